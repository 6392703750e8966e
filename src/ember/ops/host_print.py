"""``host_print``: a Python ``print`` call that a captured graph keeps, run on every call.

PyTorch's ``torch.compile`` breaks its graph at ``print`` and prints on every call, the tensor
arguments with their values; a capture that only traced the call would print once, at trace
time, and print symbols. While ``ember.compile`` captures a function, ``print`` records this op
(capture/prints.py): its operands are the call's tensor arguments, its ``printer`` attribute
the object that formats them with the other arguments and prints (made by the capture layer,
which knows tensors; a Python object, so a graph holding this op has no graph file, as
autograd_function's). Its ``effect`` keeps it in a graph whose result does not read it, runs
the prints of one call in the order they were recorded, and keeps the executor choice from
running the graph on made-up inputs (which would print). Its result, a 0-d bool nobody reads,
is only there because every node has one. ONNX has no operator that prints: refused on export.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..types import TensorType
from . import _attr_rules as R
from ._registry import Cost, OpDef, apply, register
from ._rules import Complex, Effect


def _infer(*in_types, printer):
    return TensorType((), dt.bool_)


def _kernel(*arrays, printer):
    printer(*arrays)
    return np.zeros((), dtype=bool)


HOST_PRINT = register(
    OpDef(
        name="host_print",
        kind="control",
        float8=True,
        complex=Complex.GRADIENT,
        infer=_infer,
        kernel=_kernel,
        vjp=None,  # (its result is no function of its operands: nothing to differentiate)
        cost=lambda in_types, out_types, attrs: Cost(0, 0),
        save_inputs=(),
        effect=Effect(ordered="print"),
        # (a capture's own callback: no graph file's tags make a callable, so none loads)
        attrs={"printer": R.Kind("a callable", callable)},
        doc="host_print(*tensors; printer): printer(*values) each time the graph runs (a "
        "print call inside a captured function), a 0-d bool result",
    )
)


def host_print(tensors, printer):
    """Record (or, eagerly, run) ``printer(*values of tensors)``."""
    return apply(HOST_PRINT, *tensors, printer=printer)
