"""Joining and splitting along an axis: the ``concat`` and ``split`` primitives and the
composites built on them (``torch.cat``/``concat``, ``stack``, ``split``, ``chunk``,
``unbind``). ``concat`` promotes its inputs to the widest dtype (PyTorch's ``cat``);
``split``'s pieces are views of the input.
"""

from __future__ import annotations

import numpy as np

from .. import _meta
from ..errors import ArgumentError, ShapeError
from ..symbolic import SymDim
from ..types import TensorType
from . import _batching, qtensor, sparse_methods
from . import _onnx_complex as cx
from . import api as E
from ._autocast import Autocast, autocasts
from ._node_names import rename_node
from ._registry import OpDef, apply, export, register
from ._rules import Complex
from ._util import (
    fmt_shape,
    memory_cost,
    normalize_axis,
    pick_axis,
)
from .promotion import promote, to_tensor
from .shape import RESHAPE
from .sparse_tensor import SparseTensor

# ------------------------------------------------------------------------------ concat/split


def _concat_infer(*xs, axis):
    first = xs[0]
    model = first.shape
    ndim = len(model)
    if -ndim <= axis < 0:  # (a graph file's negative axis: the public function's is normalized)
        axis += ndim
    dtype = first.dtype
    total = 0
    for i, t in enumerate(xs):  # (one pass, no generators: every torch.cat passes here)
        shape = t.shape
        clash = len(shape) != ndim
        if not clash:
            for d in range(ndim):
                if d != axis and shape[d] != model[d]:
                    clash = True
                    break
        if clash:
            listed = ", ".join(fmt_shape(x.shape) for x in xs)
            raise ShapeError(
                f"tensor {i} does not match the others outside dimension {axis}: {listed}",
                op="concat",
            )
        if t.dtype is not dtype:
            raise ShapeError("operands must share one dtype", op="concat")
        total = total + shape[axis]
    out = list(model)
    out[axis] = total
    return TensorType(tuple(out), dtype)


def _concat_vjp(c, g):
    sizes = tuple(t.shape[c.attrs["axis"]] for t in c.in_types)
    parts = apply(SPLIT, g, sizes=sizes, axis=c.attrs["axis"])
    return tuple(p if need else None for p, need in zip(parts, c.needs_input_grad))


def _concat_c_step(node):
    from ..kernels import csteps

    return csteps.concat_step(node)


def _onnx_concat(e):
    return e.node("Concat", e.inputs, axis=e.attrs["axis"])


def _onnx_concat_pairs(e):  # (complex values: the axis counted from the front)
    return e.node("Concat", e.inputs, axis=e.attrs["axis"] % len(e.out_types[0].shape))


CONCAT = register(
    OpDef(
        name="concat",
        quantized="per_tensor",  # (moves elements: ops/qtensor.py)
        grad_fn="CatBackward0",
        float8=True,
        complex=Complex.GRADIENT,
        autocast=Autocast.PROMOTE,
        onnx=cx.pairs(_onnx_concat, _onnx_concat_pairs),
        kind="shape",
        infer=_concat_infer,
        cached_infer=True,
        kernel=lambda *xs, axis: np.concatenate(xs, axis=axis),
        vjp=_concat_vjp,
        cost=memory_cost,
        save_inputs=(),
        doc="concat(*xs, axis): join tensors along an existing axis",
        batch=_batching.concat_rule,
        c_step=_concat_c_step,
    )
)


def _split_infer(x, *, sizes, axis):
    if sum(sizes) != x.shape[axis]:
        raise ShapeError(
            f"sections {sizes} do not add up to dimension {axis} of shape {fmt_shape(x.shape)}",
            op="split",
        )
    shape = list(x.shape)
    types = []
    for s in sizes:
        shape[axis] = s
        types.append(TensorType(tuple(shape), x.dtype))
    return tuple(types)


def _split_kernel(x, *, sizes, axis):
    # basic slices: views, without np.split's per-call bookkeeping (a graph at batch 1 splits
    # attention's fused projections on every call)
    index = [slice(None)] * x.ndim
    parts, start = [], 0
    for size in sizes:
        index[axis] = slice(start, start + size)
        parts.append(x[tuple(index)])
        start += size
    return tuple(parts)


def _split_vjp(c, *grads):
    return (apply(CONCAT, *grads, axis=c.attrs["axis"]),)


def _onnx_split(e):
    sizes = e.attrs["sizes"]
    if len(sizes) == 1:
        return (e.node("Identity", e.inputs),)
    return e.node("Split", [e.inputs[0], e.shape(sizes)], outputs=len(sizes), axis=e.attrs["axis"])


SPLIT = register(
    OpDef(
        name="split",
        quantized="per_tensor",  # (moves elements: ops/qtensor.py)
        float8=True,
        complex=Complex.GRADIENT,
        onnx=_onnx_split,
        kind="shape",
        infer=_split_infer,
        cached_infer=True,
        kernel=_split_kernel,
        vjp=_split_vjp,
        cost=memory_cost,
        save_inputs=(),
        num_outputs=None,
        doc="split(x, sizes, axis): consecutive pieces of the given sizes along axis",
        # aliases: the memory plan's: the pieces are views of x
        batch=_batching.split_rule,
        aliases=True,
    )
)


@export(name="concat")
@autocasts(Autocast.PROMOTE)
def concat(tensors, dim=0, *, axis=None):
    """Join tensors along dimension ``dim`` (promoting their dtypes); sparse tensors join as
    sparse ones (ops/sparse_methods.py)."""
    if isinstance(tensors, (list, tuple)) and tensors and isinstance(tensors[0], SparseTensor):
        return sparse_methods.cat(tensors, pick_axis(dim, axis, 0))
    if _meta.active[0]:
        tensors = list(tensors)
        _meta.refuse_mixed("cat", tensors)
    if not len(tensors):  # (before promotion, which needs an operand)
        raise ArgumentError("expected a non-empty list of tensors", op="concat")
    if qtensor.is_quantized(tensors[0]):  # (quantized tensors join without promotion)
        tensors = qtensor.aligned("cat", tensors)
    tensors = promote(*tensors)
    ndims = [t.ndim for t in tensors]
    if 0 in ndims:
        raise ShapeError(
            f"zero-dimensional tensor (at position {ndims.index(0)}) cannot be concatenated",
            op="concat",
        )
    # PyTorch's legacy rule: a 1-D empty tensor joins tensors of any rank (it takes part in
    # the dtype promotion above and adds nothing; reshaped to an empty slice of the others,
    # it stays in the result's history, which then requires grad when it does). Only ranks
    # that differ can call for it (every torch.cat passes here: the common case costs a list)
    mixed = ndims.count(ndims[0]) != len(ndims)
    legacy = [t.ndim == 1 and t.shape[0] == 0 for t in tensors] if mixed or ndims[0] == 1 else None
    model = next((t for t, skip in zip(tensors, legacy) if not skip), None) if mixed else None
    if model is not None and model.ndim != 1:
        a = normalize_axis("concat", pick_axis(dim, axis, 0), model.ndim)
        empty = tuple(0 if i == a else s for i, s in enumerate(model.shape))
        tensors = [E.reshape(t, empty) if skip else t for t, skip in zip(tensors, legacy)]
    if legacy is not None and all(legacy):
        a = 0  # (only such tensors: PyTorch joins them whatever the dim, unchecked)
    else:
        a = normalize_axis("concat", pick_axis(dim, axis, 0), tensors[0].ndim)
    if len(tensors) == 1:
        return tensors[0]
    return apply(CONCAT, *tensors, axis=a)


# (PyTorch's out= refuses an operand partly overlapping out: ops/_out.py, ops/_overlap.py)
concat.out_overlap_refused = True
export(concat, name="cat")
export(concat, name="concatenate")


@export
@autocasts(Autocast.PROMOTE)
def stack(tensors, dim=0, *, axis=None):
    """Join tensors of one shape along a new dimension ``dim``; sparse tensors join as sparse
    ones (ops/sparse_methods.py)."""
    if isinstance(tensors, (list, tuple)) and tensors and isinstance(tensors[0], SparseTensor):
        return sparse_methods.stack(tensors, pick_axis(dim, axis, 0))
    tensors = [to_tensor(t) for t in tensors]
    if _meta.active[0]:
        _meta.refuse_mixed("stack", tensors)
    if not tensors:
        raise ShapeError("needs at least one tensor", op="stack")
    first = getattr(tensors[0], "_data", None)  # (an eager array: no Size made)
    shape = first.shape if type(first) is np.ndarray else tuple(tensors[0].shape)
    for t in tensors:
        if t.shape != shape:
            listed = ", ".join(fmt_shape(x.shape) for x in tensors)
            raise ShapeError(f"all tensors must have one shape; got {listed}", op="stack")
    d = normalize_axis("stack", pick_axis(dim, axis, 0), len(shape) + 1)
    # each operand with its new axis, straight to the reshape op (unsqueeze's checks and
    # names are for its own callers: stacking a sequence's steps makes many of these)
    grown = shape[:d] + (1,) + shape[d:]
    parts = [apply(RESHAPE, t, shape=grown) for t in tensors]
    if len(parts) == 1 or qtensor.is_quantized(parts[0]):
        return rename_node(concat(parts, d), "StackBackward0")
    # (concat's own checks hold: one shape of one rank, at least 1, so none is its legacy
    # empty 1-d tensor)
    return rename_node(apply(CONCAT, *promote(*parts), axis=d), "StackBackward0")


@export(method=True)
def split(x, split_size_or_sections, dim=0, *, axis=None):
    """PyTorch's split: an int gives pieces of that size (the last may be smaller); a list gives
    the size of each piece."""
    x = to_tensor(x)
    a = normalize_axis("split", pick_axis(dim, axis, 0), x.ndim)
    n = x.shape[a]
    spec = split_size_or_sections
    if isinstance(spec, SymDim) or isinstance(spec, int) and isinstance(n, SymDim):
        sizes = _symbolic_pieces(n, spec)
    elif isinstance(spec, int):
        if spec <= 0:
            raise ShapeError(f"split size must be positive, got {spec}", op="split")
        sizes = tuple(min(spec, n - i) for i in range(0, n, spec)) or (0,)
    else:
        sizes = tuple(s if isinstance(s, SymDim) else int(s) for s in spec)
        pieces = apply(SPLIT, x, sizes=sizes, axis=a)
        rename_node(pieces[0], "SplitWithSizesBackward0", x)  # (the pieces' one node)
        return pieces
    return apply(SPLIT, x, sizes=sizes, axis=a)


def _symbolic_pieces(n, size) -> tuple:
    """Pieces of ``size`` of a dimension of ``n`` where one of them is symbolic: their number
    must be fixed (``x.split(x.shape[2] // 2, 2)``: two), the last one the rest."""
    ratio = n.ratio(size) if isinstance(n, SymDim) else None
    if ratio is None:
        raise ShapeError(
            f"pieces of {size} of a dimension of size {n}: their number depends on the "
            "symbolic size's value; give split sizes that divide it a fixed number of times",
            op="split",
        )
    count = -(-ratio.numerator // ratio.denominator)  # (ceil: the last piece may be smaller)
    return (size,) * (count - 1) + (n - size * (count - 1),)


@export(method=True)
def chunk(x, chunks, dim=0, *, axis=None):
    """Split into ``chunks`` pieces of equal size (the last may be smaller), like PyTorch."""
    x = to_tensor(x)
    a = normalize_axis("chunk", pick_axis(dim, axis, 0), x.ndim)
    if chunks <= 0:
        raise ShapeError(f"chunk expects chunks to be greater than 0, got {chunks}", op="chunk")
    if x.shape[a] == 0:
        # PyTorch's: an empty dimension gives ``chunks`` empty pieces
        return apply(SPLIT, x, sizes=(0,) * max(int(chunks), 1), axis=a)
    n = x.shape[a]
    if isinstance(n, SymDim):  # pieces of ceil(n / chunks), the last one the rest
        size = -(-n // chunks)
        rest = n - size * (chunks - 1)
        return apply(SPLIT, x, sizes=(size,) * (chunks - 1) + (rest,), axis=a)
    size = -(-n // chunks)
    return split(x, max(size, 1), a)


@export(method=True)
def unbind(x, dim=0):
    x = to_tensor(x)
    a = normalize_axis("unbind", dim, x.ndim)
    if x.shape[a] == 0:
        return ()
    # each piece without its unit axis, straight to the reshape op (squeeze's axis checks and
    # node names are for its own callers: a head split unbinds q, k and v at every call)
    shape = tuple(x.shape)
    squeezed = shape[:a] + shape[a + 1 :]
    return tuple(
        [
            rename_node(apply(RESHAPE, p, shape=squeezed), "UnbindBackward0", x)
            for p in split(x, 1, a)
        ]
    )
