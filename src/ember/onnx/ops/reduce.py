"""ONNX's reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
ReduceL2, ReduceLogSum, ReduceLogSumExp and ReduceSumSquare.

Every one is "an elementwise step, a reduction, an elementwise step" over the node's axes, with
ONNX's rules where they differ from ember's (PyTorch's):

* axes come from an attribute before the opset that made them an input (13 for ReduceSum, 18
  for the others); absent or empty axes reduce every axis, except with
  ``noop_with_empty_axes=1``, where nothing is reduced but the elementwise steps still run
  (ReduceSumSquare is then a plain square);
* the result keeps the input's dtype (ember sums integers to int64 and refuses integer means);
* a reduction over an empty set gives the operation's identity: 0 for sums, 1 for products,
  -inf for ReduceMax (the dtype's least value for integers, False for bools), +inf for
  ReduceMin, -inf for the logarithms; ReduceMean's, which ONNX leaves undefined, is 0, as
  onnxruntime's: PyTorch's exporter relies on it (an EmbeddingBag with mode="mean" is a Loop
  of ReduceMean over each bag's rows, an empty bag's mean 0, as the layer's).

Element types ember has no tensors for (uint16/32/64) can only be static here; they are reduced
in NumPy, by the same rules.
"""

from __future__ import annotations

import numpy as np

from .._convert import converter, ember_dtype, is_static, supported_dtype
from ._common import E, dtype_np, rank_of


def _axes(ctx, x, axes_input) -> tuple[int, ...]:
    """The axes to reduce, normalized and sorted; () when nothing is reduced."""
    rank = rank_of(x)
    if ctx.has_attr("axes"):
        axes = [int(a) for a in ctx.attr("axes")]
    elif axes_input is not None:
        axes = ctx.ints(axes_input, "axes")
    else:
        axes = []
    if not axes:
        return () if ctx.attr("noop_with_empty_axes", 0) else tuple(range(rank))
    normalized = set()
    for a in axes:
        if not -rank <= a < max(rank, 1):
            raise ctx.error(f"axis {a} is out of range for an input of rank {rank}")
        normalized.add(a + rank if a < 0 else a)
    return tuple(sorted(normalized))


def _out_shape(shape, axes, keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _least(dtype: np.dtype):
    if dtype.kind == "b":
        return False
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    return -np.inf


def _greatest(dtype: np.dtype):
    if dtype.kind == "b":
        return True
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    return np.inf


# ---------------------------------------------------------------------------------------------
# the reductions in ember ops: (x, axes (non-empty), keepdim) -> reduced tensor


def _sum(x, axes, keep):
    return E.sum(x, dim=axes, keepdim=keep)


def _mean(x, axes, keep):
    if any(x.shape[a] == 0 for a in axes):  # onnxruntime's 0 (the module's docstring)
        return E.zeros(_out_shape(tuple(x.shape), axes, keep), dtype=x.dtype)
    if not x.dtype.is_floating_point:
        count = int(np.prod([x.shape[a] for a in axes]))
        return _floating(E.sum(x, dim=axes, keepdim=keep)) / float(max(count, 1))
    return E.mean(x, dim=axes, keepdim=keep)


def _extreme(fn, empty_value):
    def reduce(x, axes, keep):
        if any(x.shape[a] == 0 for a in axes):
            dtype = dtype_np(x)
            shape = _out_shape(tuple(x.shape), axes, keep)
            return E.full(shape, empty_value(dtype), dtype=x.dtype)
        return fn(x, dim=axes, keepdim=keep)

    return reduce


def _prod(x, axes, keep):
    return E.prod(x, dim=axes, keepdim=keep)


def _floating(x):
    return x if x.dtype.is_floating_point else E.cast(x, ember_dtype(np.float64, "reduce"))


# name -> (before the reduction, the reduction, after it); None: nothing
_REDUCTIONS = {
    "ReduceSum": (None, _sum, None),
    "ReduceMean": (None, _mean, None),
    "ReduceMax": (None, _extreme(E.amax, _least), None),
    "ReduceMin": (None, _extreme(E.amin, _greatest), None),
    "ReduceProd": (None, _prod, None),
    "ReduceL1": (E.abs, _sum, None),
    "ReduceL2": (lambda x: x * x, _sum, lambda x: E.sqrt(_floating(x))),
    "ReduceLogSum": (None, _sum, lambda x: E.log(_floating(x))),
    "ReduceLogSumExp": (_floating, lambda x, a, k: E.logsumexp(x, dim=a, keepdim=k), None),
    "ReduceSumSquare": (lambda x: x * x, _sum, None),
}

# the same in NumPy, for element types ember has no tensors for (static values only)
_NP_REDUCTIONS = {
    "ReduceSum": (None, np.sum, None),
    "ReduceMean": (None, np.mean, None),
    "ReduceMax": (None, np.max, None),
    "ReduceMin": (None, np.min, None),
    "ReduceProd": (None, np.prod, None),
    "ReduceL1": (np.abs, np.sum, None),
    "ReduceL2": (np.square, np.sum, np.sqrt),
    "ReduceLogSum": (None, np.sum, np.log),
    "ReduceLogSumExp": (np.exp, np.sum, np.log),
    "ReduceSumSquare": (np.square, np.sum, None),
}


def _reduce(ctx, x, axes_input=None):
    name = ctx.op_type
    axes = _axes(ctx, x, axes_input)
    keep = bool(ctx.attr("keepdims", 1))
    dtype = dtype_np(x)
    if is_static(x) and not supported_dtype(dtype):
        return _reduce_numpy(ctx, name, x, axes, keep)
    x = ctx.tensor(x)
    before, reduce, after = _REDUCTIONS[name]
    out = before(x) if before is not None else x
    if axes:
        out = reduce(out, axes, keep)
    if after is not None:
        out = after(out)
    if dtype_np(out) != dtype:
        out = E.cast(out, ember_dtype(dtype, ctx.label))
    return out


# what NumPy's reductions do not give over an empty set (np.mean's NaN, max's error)
_EMPTY_FILL = {"ReduceMax": _least, "ReduceMin": _greatest, "ReduceMean": lambda dtype: 0}


def _reduce_numpy(ctx, name, x: np.ndarray, axes, keep) -> np.ndarray:
    before, reduce, after = _NP_REDUCTIONS[name]
    with np.errstate(all="ignore"):
        out = before(x) if before is not None else x
        if axes and any(x.shape[a] == 0 for a in axes) and name in _EMPTY_FILL:
            fill = _EMPTY_FILL[name](x.dtype)
            out = np.full(_out_shape(x.shape, axes, keep), fill, x.dtype)
        elif axes:
            out = reduce(out, axis=axes, keepdims=keep)
        if after is not None:
            out = after(out)
        return np.asarray(out).astype(x.dtype)


for _name in _REDUCTIONS:
    converter(_name, 1)(_reduce)
