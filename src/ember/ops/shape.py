"""Layout primitives: reshape, broadcast_to, permute and flip, and the composites built on
them (view, expand, transpose, movedim, squeeze, unsqueeze, flatten). Joining and splitting
(concat, split, stack, chunk, unbind) are in concat.py, tile and repeat in tile.py, padding in
pad.py.

``reshape``, ``broadcast_to`` and ``permute`` are *views*: their kernels return NumPy views that
share memory with the input (and its version counter, see OpDef.view).
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import ShapeError
from ..symbolic_assumptions import layout_by_example
from ..types import TensorType
from . import _batching
from . import _onnx_complex as cx
from . import api as E
from ._node_names import rename_node
from ._registry import OpDef, apply, export, register
from ._rules import Complex
from ._unrecorded import direct
from ._util import (
    fmt_shape,
    memory_cost,
    normalize_axes,
    normalize_axis,
    numel,
    pick_axis,
    shape_arg,
)
from .promotion import to_tensor

# ----------------------------------------------------------------------------------- reshape


def resolve_shape(op: str, in_shape, shape) -> tuple:
    """Replace one -1 in ``shape`` by the size that keeps the element count of ``in_shape``."""
    total = numel(in_shape)
    if -1 in shape:
        if shape.count(-1) > 1:
            raise ShapeError(f"only one dimension can be -1, got {fmt_shape(shape)}", op=op)
        known = 1
        for s in shape:  # (every x.view(-1) passes here: no generator)
            if s != -1:
                known *= s
        if known == 0 or total % known:
            raise ShapeError(
                f"cannot reshape {fmt_shape(in_shape)} ({total} elements) into {fmt_shape(shape)}",
                op=op,
            )
        i = shape.index(-1)
        shape = (*shape[:i], total // known, *shape[i + 1 :])
    negative = False
    for s in shape:  # (every reshape passes here twice: no generator)
        if s < 0:
            negative = True
    if negative or numel(shape) != total:
        raise ShapeError(
            f"cannot reshape {fmt_shape(in_shape)} ({total} elements) into "
            f"{fmt_shape(shape)} ({numel(shape)} elements)",
            op=op,
        )
    return shape


def _reshape_infer(x, *, shape):
    return TensorType(resolve_shape("reshape", tuple(x.shape), shape), x.dtype)


def _copy_c_step(node):
    from ..kernels import csteps

    return csteps.copy_step(node)


def _onnx_reshape(e):
    return e.node("Reshape", [e.inputs[0], e.shape(e.attrs["shape"])])


def _onnx_reshape_pairs(e):  # (complex values: their parts' axis kept last)
    return e.node("Reshape", [e.inputs[0], e.shape((*e.attrs["shape"], 2))])


RESHAPE = register(
    OpDef(
        name="reshape",
        quantized="per_tensor",  # (moves elements: ops/qtensor.py)
        grad_fn="ViewBackward0",
        float8=True,
        complex=Complex.GRADIENT,
        onnx=cx.pairs(_onnx_reshape, _onnx_reshape_pairs),
        kind="shape",
        infer=_reshape_infer,
        cached_infer=True,
        kernel=lambda x, *, shape: x.reshape(shape),
        vjp=lambda c, g: (_reshape_back(g, c.in_types[0].shape),),
        cost=memory_cost,
        save_inputs=(),
        view=True,
        doc="reshape(x, shape): same elements, new shape (row-major order)",
        batch=_batching.reshape_rule,
        # NumPy copies where the strides allow no view: plan/layout.py asks for a view only
        as_view=lambda x, *, shape: np.reshape(x, shape, copy=False),
        noop=lambda x, *, shape: tuple(x.shape) == tuple(shape),
        c_step=_copy_c_step,
        compose=lambda inner, outer, x: dict(outer),
    )
)


def _reshape_back(g, shape):
    """A reshape's gradient: ``g`` in the input's ``shape``; undispatched where nothing is
    recorded and reshape took this signature before (ops/_unrecorded.py)."""
    out = direct(RESHAPE, g, shape=shape) if type(shape) is tuple else None
    return reshape(g, shape) if out is None else out


@export(method=True)
def reshape(x, *shape):
    """Same elements in a new shape; one dimension may be -1. Always a new tensor, a view of x
    where x's strides allow (PyTorch's: ``x.reshape(x.shape) is not x``)."""
    x = to_tensor(x)
    shape = resolve_shape("reshape", _shape_of(x), shape_arg(shape))
    out = apply(RESHAPE, x, shape=shape)
    if getattr(out, "grad_fn", None) is None:
        return out
    data = getattr(x, "_data", None)  # (an eager tensor's array: contiguous ones view as any)
    if type(data) is np.ndarray and data.flags.c_contiguous:
        return out
    if not _viewable(tuple(x.shape), _strides_for_view(x), shape):
        # (PyTorch copies, then views the copy without checks: the node its history shows)
        return rename_node(out, "UnsafeViewBackward0")
    if type(data) is np.ndarray:  # (a strided tensor that views: PyTorch's _reshape_alias)
        return rename_node(out, "ReshapeAliasBackward0")
    return out


def _shape_of(x) -> tuple:
    """x's shape as a tuple: an eager tensor's array's (no Size made), else its own."""
    data = getattr(x, "_data", None)
    return data.shape if type(data) is np.ndarray else tuple(x.shape)


def _strides_for_view(x) -> tuple:
    """x's strides for deciding whether it views as another shape: under symbolic sizes those
    at the captured call's sizes, whose answer holds at every size but 0 and 1
    (symbolic_assumptions.layout_by_example)."""
    data = getattr(x, "_data", None)
    if type(data) is np.ndarray:  # (an eager tensor: its array's, no symbolic size to bind)
        itemsize = data.itemsize
        return tuple([step // itemsize for step in data.strides])
    with layout_by_example():
        return x.stride()


def view_shape(x, *shape):
    """`reshape` under ``view``'s name (PyTorch's ``view``: ``x.view(x.shape) is not x``; its
    ``_base`` is x)."""
    x = to_tensor(x)
    shape = resolve_shape("view", _shape_of(x), shape_arg(shape))
    data = getattr(x, "_data", None)  # (an eager tensor's array: contiguous ones view as any)
    contiguous = type(data) is np.ndarray and data.flags.c_contiguous
    if not contiguous and not _viewable(tuple(x.shape), _strides_for_view(x), shape):
        raise ShapeError(
            f"view size {fmt_shape(shape)} is not compatible with the input's size "
            f"{fmt_shape(x.shape)} and strides {_strides_for_view(x)} (at least one dimension "
            "spans across two contiguous subspaces); use .reshape(...) instead, which copies "
            "where it must",
            op="view",
        )
    return apply(RESHAPE, x, shape=shape)


def _viewable(shape: tuple, strides: tuple, new_shape: tuple) -> bool:
    """Whether memory laid out with ``strides`` can be read as ``new_shape`` without a copy
    (PyTorch's rule for ``view``, which NumPy's no-copy reshape follows): asked of a stand-in
    array with those strides, whose memory is never read. Symbolic sizes pass (a graph value
    of unknown sizes is dense: its strides are row-major)."""
    for d in (*shape, *new_shape, *strides):  # (no generator: every strided reshape asks)
        if type(d) is not int:
            return True
    return _viewable_sizes(shape, strides, new_shape)


@functools.lru_cache(maxsize=2048)  # (a model reshapes its few layouts at every call)
def _viewable_sizes(shape: tuple, strides: tuple, new_shape: tuple) -> bool:
    """`_viewable` of integer sizes and strides (its answer depends on them alone)."""
    stand_in = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), shape, strides)
    try:
        np.reshape(stand_in, new_shape, copy=False)
    except ValueError:
        return False
    return True


@export(method=True, toplevel=False)
def view_as(x, other):
    """``x.view(other.shape)``: a new view of x (even of its own shape), as PyTorch's."""
    return view_shape(x, tuple(other.shape))


@export(method=True)
def flatten(x, start_dim=0, end_dim=-1):
    """Merge dimensions ``start_dim..end_dim`` into one."""
    x = to_tensor(x)
    if x.ndim == 0:
        return reshape(x, (1,))
    s = normalize_axis("flatten", start_dim, x.ndim)
    e = normalize_axis("flatten", end_dim, x.ndim)
    if s == e:  # (PyTorch returns x itself here, a 1-d x's flatten() included)
        return x
    shape = tuple(x.shape)
    return reshape(x, shape[:s] + (numel(shape[s : e + 1]),) + shape[e + 1 :])


@export(method=True)
def squeeze(x, dim=None, *, axis=None):
    """Drop size-1 dimensions (all of them, or those in ``dim`` that have size 1)."""
    x = to_tensor(x)
    d = pick_axis(dim, axis)
    shape = _shape_of(x)
    axes = tuple(i for i in normalize_axes("squeeze", d, len(shape)) if shape[i] == 1)
    # (the reshape op applied directly: reshape's checks hold, one size-1 axis fewer)
    out = apply(RESHAPE, x, shape=tuple(s for i, s in enumerate(shape) if i not in axes))
    # (PyTorch numbers squeeze's overloads: all dims, one dim, several dims)
    number = 0 if d is None else 1 if isinstance(d, int) else 2
    return rename_node(out, f"SqueezeBackward{number}", x)


@export(method=True)
def unsqueeze(x, dim):
    """Insert a size-1 dimension at ``dim``."""
    x = to_tensor(x)
    shape = _shape_of(x)
    d = normalize_axis("unsqueeze", dim, len(shape) + 1)
    # (the reshape op applied directly: reshape's checks hold, one size-1 axis more)
    out = apply(RESHAPE, x, shape=shape[:d] + (1,) + shape[d:])
    return rename_node(out, "UnsqueezeBackward0", x)


# ----------------------------------------------------------------------------- broadcast_to


def _broadcast_infer(x, *, shape):
    lead = len(shape) - x.ndim
    if lead < 0 or any(s != 1 and s != t for s, t in zip(x.shape, shape[lead:])):
        raise ShapeError(
            f"cannot broadcast {fmt_shape(x.shape)} to {fmt_shape(shape)}", op="broadcast_to"
        )
    return TensorType(shape, x.dtype)


def _broadcast_kernel(x, *, shape):
    own = x.shape
    lead = len(shape) - len(own)
    if own == tuple(shape[lead:]) and all([s == 1 for s in shape[:lead]]):
        # no element repeated: a writable view (unit axes in front), as PyTorch's expand, whose
        # result takes in-place writes where no two elements share memory
        return x[(None,) * lead] if lead else x.view()
    if type(x) is np.ndarray and x.flags.c_contiguous and x.dtype.kind in "biufc":
        # (repeated elements: read-only) np.broadcast_to's view made in C, over x's own
        # buffer: its Python layers (an nditer, argument checks) cost most of a small call
        strides = x.strides
        view = np.ndarray(
            shape,
            x.dtype,
            x,
            0,
            (0,) * lead + tuple([0 if n == 1 else step for n, step in zip(own, strides)]),
        )
        view.flags.writeable = False
        return view
    return np.broadcast_to(x, shape)  # (repeated elements: read-only)


def _onnx_broadcast_to(e):
    return e.node("Expand", [e.inputs[0], e.shape(e.attrs["shape"])])


_BROADCAST = register(
    OpDef(
        name="broadcast_to",
        quantized="per_tensor",  # (moves elements: ops/qtensor.py)
        grad_fn="ExpandBackward0",
        float8=True,
        complex=Complex.GRADIENT,
        onnx=_onnx_broadcast_to,
        kind="shape",
        infer=_broadcast_infer,
        cached_infer=True,
        kernel=_broadcast_kernel,
        vjp=lambda c, g: (E.sum_to(g, c.in_types[0].shape),),
        cost=memory_cost,
        save_inputs=(),
        view=True,
        doc="broadcast_to(x, shape): a broadcast view, read-only where it repeats elements",
        batch=_batching.broadcast_rule,
        noop=lambda x, *, shape: tuple(x.shape) == tuple(shape),
        c_step=_copy_c_step,
        compose=lambda inner, outer, x: dict(outer),
        broadcast=True,
    )
)


@export(method=True)
def broadcast_to(x, *shape):
    """Broadcast ``x`` to ``shape`` (NumPy rules)."""
    x = to_tensor(x)
    return apply(_BROADCAST, x, shape=shape_arg(shape))  # (a new view even of x's own shape)


@export(method=True, toplevel=False)
def expand(x, *sizes):
    """PyTorch's expand: like broadcast_to, with -1 meaning 'keep this dimension'."""
    x = to_tensor(x)
    sizes = shape_arg(sizes)
    own = _shape_of(x)
    lead = len(sizes) - len(own)
    if -1 in sizes[:lead]:  # (PyTorch's refusal; own[i - lead] would read from the end)
        raise ShapeError(
            f"expand({fmt_shape(sizes)}): -1 is not allowed in a leading, new dimension of a "
            f"tensor of shape {fmt_shape(own)}",
            op="expand",
        )
    shape = tuple([own[i - lead] if s == -1 else s for i, s in enumerate(sizes)])
    return apply(_BROADCAST, x, shape=shape)  # (broadcast_to's, its shape made here)


@export(method=True, toplevel=False)
def expand_as(x, other):
    return broadcast_to(x, other.shape)


@export
def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to (ints for 1-d shapes), as an ``ember.Size``."""
    from ..size import Size
    from ._util import broadcast_shapes as broadcast

    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    return Size(broadcast("broadcast_shapes", *shapes) if shapes else ())


@export
def broadcast_tensors(*tensors):
    from ._util import broadcast_shapes

    shape = broadcast_shapes("broadcast_tensors", *(t.shape for t in tensors))
    # (a tensor that has the shape already is returned itself, as PyTorch's)
    return tuple(t if tuple(t.shape) == tuple(shape) else broadcast_to(t, shape) for t in tensors)


# ----------------------------------------------------------------------------------- permute


def _permute_infer(x, *, dims):
    if sorted(dims) != list(range(x.ndim)):
        raise ShapeError(
            f"dims {dims} are not a permutation of the {x.ndim} dimensions of "
            f"a tensor of shape {fmt_shape(x.shape)}",
            op="permute",
        )
    return TensorType(tuple(x.shape[d] for d in dims), x.dtype)


def _permute_vjp(c, g):
    dims = c.attrs["dims"]
    inverse = tuple(sorted(range(len(dims)), key=dims.__getitem__))
    # (nothing recorded, a signature permute took before: its kernel, undispatched)
    out = direct(_PERMUTE, g, dims=inverse)
    return (permute(g, inverse) if out is None else out,)


def _onnx_permute(e):
    if not e.attrs["dims"]:  # (a 0-d tensor's permutation: the value itself; an empty perm
        # list has no attribute type ONNX could record)
        return e.node("Identity", e.inputs)
    return e.node("Transpose", e.inputs, perm=list(e.attrs["dims"]))


def _onnx_permute_pairs(e):  # (complex values: their parts' axis kept last)
    n = len(e.in_types[0].shape)
    return e.node("Transpose", e.inputs, perm=[d % n for d in e.attrs["dims"]] + [n])


PERMUTE = _PERMUTE = register(
    OpDef(
        name="permute",
        quantized="per_tensor",  # (moves elements: ops/qtensor.py)
        float8=True,
        complex=Complex.GRADIENT,
        onnx=cx.pairs(_onnx_permute, _onnx_permute_pairs),
        kind="shape",
        infer=_permute_infer,
        cached_infer=True,
        kernel=lambda x, *, dims: x.transpose(dims),
        vjp=_permute_vjp,
        cost=memory_cost,
        save_inputs=(),
        view=True,
        doc="permute(x, dims): reorder dimensions (a view)",
        batch=_batching.permute_rule,
        noop=lambda x, *, dims: tuple(dims) == tuple(range(len(dims))),
        # x.transpose(a).transpose(b) == x.transpose([a[i] for i in b])
        compose=lambda inner, outer, x: {"dims": tuple(inner["dims"][i] for i in outer["dims"])},
    )
)


@export(method=True)
def permute(x, *dims):
    """Reorder the dimensions of ``x``."""
    x = to_tensor(x)
    ndim = x.ndim
    dims = tuple([normalize_axis("permute", d, ndim) for d in shape_arg(dims)])
    return apply(_PERMUTE, x, dims=dims)  # (a new view even for the identity, as PyTorch's)


@export(method=True)
def transpose(x, dim0=-2, dim1=-1):
    """Swap two dimensions (the last two by default)."""
    x = to_tensor(x)
    ndim = x.ndim
    a = normalize_axis("transpose", dim0, ndim)
    b = normalize_axis("transpose", dim1, ndim)
    dims = list(range(ndim))
    if a != b:  # (a 0-d x's transpose(0, 0) too: a new view of x, as PyTorch's)
        dims[a], dims[b] = dims[b], dims[a]
    out = apply(_PERMUTE, x, dims=tuple(dims))  # (`permute`'s checks hold: a != b, in range)
    return rename_node(out, "TransposeBackward0")


export(transpose, name="swapaxes", method=True)


@export(method=True)
def movedim(x, source, destination):
    """Move dimension(s) ``source`` to position(s) ``destination`` (ints, or sequences of one
    length); the other dimensions keep their order, as in PyTorch."""
    x = to_tensor(x)
    source = tuple(source) if isinstance(source, (tuple, list)) else (source,)
    destination = tuple(destination) if isinstance(destination, (tuple, list)) else (destination,)
    if len(source) != len(destination):
        raise ShapeError(
            f"source {tuple(source)} and destination {tuple(destination)} must name as many "
            "dimensions",
            op="movedim",
        )
    src = [normalize_axis("movedim", a, x.ndim) for a in source]
    dst = [normalize_axis("movedim", a, x.ndim) for a in destination]
    for which, axes in (("source", src), ("destination", dst)):
        if len(set(axes)) != len(axes):
            raise ShapeError(f"{which} {tuple(axes)} repeats a dimension", op="movedim")
    if x.ndim == 0:
        return E.reshape(x, ())
    dims = [None] * x.ndim
    for s_, d_ in zip(src, dst):
        dims[d_] = s_
    rest = iter(d for d in range(x.ndim) if d not in src)
    return permute(x, [next(rest) if d is None else d for d in dims])


# -------------------------------------------------------------------------------------- flip


def _onnx_flip(e):
    axes = list(e.attrs["axes"])
    if not axes:
        return e.node("Identity", e.inputs)
    big = 2**62
    starts, ends = e.ints([-1] * len(axes)), e.ints([-big] * len(axes))
    return e.node("Slice", [e.inputs[0], starts, ends, e.ints(axes), e.ints([-1] * len(axes))])


_FLIP = register(
    OpDef(
        name="flip",
        quantized="per_tensor",  # (moves elements: ops/qtensor.py)
        complex=Complex.GRADIENT,
        onnx=_onnx_flip,
        kind="shape",
        infer=lambda x, *, axes: TensorType(tuple(x.shape), x.dtype),
        kernel=lambda x, *, axes: np.flip(x, axes).copy(),
        vjp=lambda c, g: (apply(_FLIP, g, axes=c.attrs["axes"]),),
        cost=memory_cost,
        save_inputs=(),
        doc="flip(x, axes): reverse the order of elements along axes",
    )
)


@export(method=True)
def flip(x, dims=None, *more, axis=None):
    """Reverse the order of elements along ``dims`` (a sequence, or, as ``Tensor.flip``
    takes them, several ints)."""
    x = to_tensor(x)
    if more:
        dims = (dims, *more)
    axes = normalize_axes("flip", pick_axis(dims, axis), x.ndim)
    return apply(_FLIP, x, axes=axes) if axes else x
