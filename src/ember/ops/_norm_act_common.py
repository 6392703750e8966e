"""What ops/gelu.py and ops/layer_norm.py share: the C kernels' module (kernels/cnorm_act.py),
the compute dtype (float32 for 16-bit inputs, computed in float32 and rounded once), the rule
for whether the C kernels run, the NumPy kernels' workspace count, and ONNX constants."""

from __future__ import annotations

import functools

import numpy as np

from . import _onnx
from ._util import (
    half_precision,
    value_bytes,
)

_HALF = (np.dtype(np.float16), np.dtype("bfloat16"))


def _onnx_c(e, value):
    return _onnx.scalar(e, value, e.out_types[0].dtype)


@functools.cache  # (an import statement here cost each gelu and layer norm half a microsecond)
def _fast_module():
    from ..kernels import cnorm_act

    return cnorm_act


def _compute_dtype(x):
    return np.dtype(np.float32) if x.dtype in _HALF else x.dtype


def _c_runs(value) -> bool:
    """Whether the C kernels run for a value of this type, half precision included (they
    allocate only their results: the workspace rules below count NumPy's temporaries only
    where NumPy runs)."""
    return _fast_module().available(value.dtype.np)


def _numpy_workspace(node, half_buffers: int, buffers: int) -> int:
    """Bytes the NumPy kernels below allocate beyond their result, at their peak: each
    works in explicit buffers (``out=``, in-place updates) so the count does not depend on
    NumPy's elision of temporaries. ``half_buffers`` / ``buffers``: arrays of the result's
    size in the compute dtype alive at once at the peak in half precision (float32, the
    operands' widened copies among them) / otherwise, the one that becomes the result
    included (in half precision it is rounded into a new 16-bit array at the end, after
    the others are freed). The C kernels allocate only their results."""
    out = node.outputs[0]
    if _c_runs(out):
        return 0
    size = value_bytes(out) // out.dtype.itemsize
    if half_precision(out):
        return half_buffers * size * 4 - value_bytes(out)
    return (buffers - 1) * value_bytes(out)
