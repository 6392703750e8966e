"""The gradient ops of max pooling: ``pool_scatter`` (each output gradient added at its input
position: flat positions within each (n, c) plane, or a window's own number of it, ops/
pool_codes.py's codes, where given the ``window``) and its adjoint ``pool_gather`` (a tensor
read at those positions). Each is the other's VJP, so every order of max pooling's gradient
exists; pool_scatter's VJP gives its indices zeros, which reach max pooling's input through its
VJP as PyTorch's double backward's zeros. pool_scatter's epilogue takes a ReLU's mask before the
pooling (kernels/cpooling.py applies it plane by plane)."""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..kernels.conv_plan import scratch
from ..types import TensorType
from . import _batching
from ._half import c_runs
from ._registry import REGISTRY, Cost, OpDef, apply, register
from ._rules import EpilogueRule, Layout, ScatterRule
from ._util import fmt_shape, half_precision, io_bytes, numel, value_bytes, zero_input_grad
from .pool_codes import code_dtype, flat_from_codes, onnx_flat_from_codes
from .program import Input


@functools.cache
def _cpooling():
    """kernels/cpooling.py, imported at the first call (every eager max pooling and its gradient:
    an import statement there costs each call half a microsecond)."""
    from ..kernels import cpooling

    return cpooling


def _window(attrs) -> dict:
    """The ``window`` attribute to pass on: the codes' geometry where there is one."""
    window = attrs.get("window")
    return {} if window is None else {"window": window}


def _flat_rows(idx, plane: int) -> np.ndarray:
    """Indices into the flattened (N * C * plane) tensor: each (n, c) row's own offset added.
    Returns a scratch buffer (read at once, never returned)."""
    rows = idx.shape[0] * idx.shape[1]
    lin = scratch("pool_lin", (rows, idx.size // max(rows, 1)), np.int64)
    np.add(idx.reshape(lin.shape), (np.arange(rows, dtype=np.int64) * plane)[:, None], out=lin)
    return lin


def _scatter_fast(g, idx, *, in_size, window=None):
    """The C scatter (kernels/cpooling.py), or None."""
    return _cpooling().scatter(g, idx, in_size, window=window)


def _scatter_kernel(g, idx, *, in_size, window=None):
    if window is not None:
        idx = flat_from_codes(idx, window, in_size)
    plane = math.prod(in_size)
    dtype = np.float32 if g.dtype in (dt.float16.np, dt.bfloat16.np) else g.dtype
    out = np.zeros(g.shape[0] * g.shape[1] * plane, dtype)
    np.add.at(out, _flat_rows(idx, plane).reshape(-1), g.reshape(-1).astype(dtype, copy=False))
    return out.reshape(g.shape[:2] + tuple(in_size)).astype(g.dtype, copy=False)


def _scatter_workspace(node, layouts) -> int:
    """`_scatter_kernel`'s temporaries beyond the result: none in float32/float64 (the C
    scatter, or NumPy's ``add.at`` into the result), nor in half precision in C (each plane
    summed in a float32 plane of the thread's). NumPy's half precision accumulates into a
    float32 result from a float32 copy of the gradient, then rounds it: the larger of the two
    moments."""
    g, out = node.inputs[0], node.outputs[0]
    # (NumPy reading codes: their flat int64 positions first)
    flat = 8 * numel(g.shape) if node.attrs.get("window") is not None else 0
    if not half_precision(out) or c_runs():
        return 0 if c_runs() else flat
    return flat + max(value_bytes(out) + 2 * value_bytes(g), 2 * value_bytes(out))


def _gather_kernel(src, idx, *, window=None):
    if window is not None:
        idx = flat_from_codes(idx, window, tuple(src.shape[2:]))
    rows = idx.shape[0] * idx.shape[1]
    flat = src.reshape(rows, -1)
    return np.take_along_axis(flat, idx.reshape(rows, -1), axis=1).reshape(idx.shape)


def _check_indices(name, values, idx, window=None):
    if window is None and idx.dtype is not dt.int64:
        raise DTypeError(f"indices must be int64, got {idx.dtype}", op=name)
    if window is not None:
        expected = code_dtype(window[0])
        if idx.dtype is not expected:
            raise DTypeError(
                f"window codes of kernel {window[0]} must be {expected}, got {idx.dtype}", op=name
            )
    if values.ndim < 2 or tuple(values.shape[:2]) != tuple(idx.shape[:2]):
        raise ShapeError(
            f"tensor of shape {fmt_shape(values.shape)} and indices of shape "
            f"{fmt_shape(idx.shape)} must share the (N, C) dimensions",
            op=name,
        )


def _scatter_infer(g, idx, *, in_size, window=None):
    _check_indices("pool_scatter", g, idx, window)
    if tuple(g.shape) != tuple(idx.shape):
        raise ShapeError(
            f"gradient {fmt_shape(g.shape)} and indices {fmt_shape(idx.shape)} differ in shape",
            op="pool_scatter",
        )
    return TensorType(tuple(g.shape[:2]) + tuple(in_size), g.dtype)


def _compiled_scatter(node):
    """The code generator's implementation of a ``pool_scatter`` node: a C kernel
    (kernels/cpooling.py) equal to the NumPy kernel here, or None (another dtype, no
    compiler)."""
    from ..kernels import cpooling

    return cpooling.build_scatter(node)


def _masks(program, slot: int) -> bool:
    """Whether an epilogue program on the scatter's result is ``where(mask, result, c)``."""
    if len(program) != 1 or slot != 1:
        return False
    instr = program[0]
    return (
        instr.op is REGISTRY["where"]
        and not instr.attrs
        and instr.operands == (Input(0), Input(1), Input(2))
    )


def _takes_mask(node, program, outputs, out_types, in_types, slot) -> bool:
    """The epilogue the scatter applies plane by plane (kernels/cpooling.py): ``where(mask,
    result, c)``, a bool mask of the result's shape and a scalar c of its dtype, the gradient
    of a ReLU before the pooling."""
    if not _masks(program, slot) or tuple(outputs) != (0,):
        return False
    mask, result, fill = in_types
    return (
        mask.dtype is dt.bool_
        and tuple(mask.shape) == tuple(result.shape)
        and fill.shape == ()
        and fill.dtype == result.dtype == dt.as_dtype(out_types[0][1])
    )


def _masked_scatter(node):
    from ..kernels import cpooling

    attrs = node.attrs
    return cpooling.build_masked_scatter(node) if _masks(attrs["program"], attrs["slot"]) else None


def _gather_infer(src, idx, *, window=None):
    _check_indices("pool_gather", src, idx, window)
    return TensorType(tuple(idx.shape), src.dtype)


def _onnx_pool_scatter(e):
    if e.opset < 16:
        e.unsupported("before opset 16 (ScatterElements' reduction)")
    g, indices = e.inputs
    n, c = e.in_types[0].shape[:2]
    in_size = e.attrs["in_size"]
    if e.attrs.get("window") is not None:
        out_size = tuple(e.in_types[0].shape[2:])
        indices = onnx_flat_from_codes(e, indices, e.attrs["window"], in_size, out_size)
    zeros = e.node(
        "ConstantOfShape",
        [e.shape((n, c, math.prod(in_size)))],
        value=np.zeros(1, e.in_types[0].dtype.np),
    )
    flat_g = e.node("Reshape", [g, e.shape((n, c, -1))])
    flat_i = e.node("Reshape", [indices, e.shape((n, c, -1))])
    out = e.node("ScatterElements", [zeros, flat_i, flat_g], axis=2, reduction="add")
    return e.node("Reshape", [out, e.shape((n, c, *in_size))])


def _scatter_vjp(c, g):
    # linear in g: a gather at the same indices; zeros for the indices (max_pool's saved
    # output when this is its gradient) reach max_pool's input as PyTorch's zeros_like(self)
    return apply(POOL_GATHER, g, c.inputs[1], **_window(c.attrs)), zero_input_grad(c, 1)


POOL_SCATTER = register(
    OpDef(
        name="pool_scatter",
        layout=Layout((0,)),  # (channels-last in, out: PyTorch's)
        onnx=_onnx_pool_scatter,
        kind="index",
        infer=_scatter_infer,
        kernel=_scatter_kernel,
        fast=_scatter_fast,  # (half precision: summed in float32, rounded once, in C)
        vjp=_scatter_vjp,
        cost=lambda i, o, a: Cost(numel(i[0].shape), io_bytes(i, o)),
        save_inputs=(1,),
        doc="pool_scatter(g, indices; in_size, window=None): zeros of spatial size in_size with "
        "each g added at its flat index within its (n, c) plane (the gradient of max pooling); "
        "with window=(kernel, stride, padding, dilation), indices are window codes",
        batch=_batching.per_sample((0, 1)),
        compile=_compiled_scatter,
        workspace=_scatter_workspace,
        epilogue=EpilogueRule(
            accepts=lambda node: True, takes=_takes_mask, compile=_masked_scatter
        ),
        scatter=ScatterRule(values=0, index=1, gather=lambda attrs: (POOL_GATHER, _window(attrs))),
    )
)


def _onnx_pool_gather(e):
    x, indices = e.inputs
    (n, c, *in_size), out = e.in_types[0].shape, e.in_types[1].shape
    if e.attrs.get("window") is not None:
        indices = onnx_flat_from_codes(e, indices, e.attrs["window"], in_size, out[2:])
    flat_x = e.node("Reshape", [x, e.shape((n, c, -1))])
    flat_i = e.node("Reshape", [indices, e.shape((n, c, -1))])
    got = e.node("GatherElements", [flat_x, flat_i], axis=2)
    return e.node("Reshape", [got, e.shape(out)])


POOL_GATHER = register(
    OpDef(
        name="pool_gather",
        onnx=_onnx_pool_gather,
        kind="index",
        infer=_gather_infer,
        kernel=_gather_kernel,
        vjp=lambda c, g: (
            apply(
                POOL_SCATTER,
                g,
                c.inputs[1],
                in_size=tuple(c.in_types[0].shape[2:]),
                **_window(c.attrs),
            ),
            None,
        ),
        cost=lambda i, o, a: Cost(0, io_bytes(i, o)),
        save_inputs=(1,),
        doc="pool_gather(x, indices; window=None): x read at flat indices within each (n, c) "
        "plane (the adjoint of pool_scatter); with window, indices are window codes",
    )
)
