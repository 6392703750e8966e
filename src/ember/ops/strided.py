"""``as_strided``: PyTorch's window over a tensor's memory by sizes and strides, as a view.

ember's model of the memory: a tensor's storage is the row-major elements of the root of its
views (the tensor itself where it is no view), from that root's ``storage_offset()`` on. The
window ``storage[offset + sum_k i_k * stride_k]`` is the view op ``as_strided_view`` of the
tensor (where the window lies within its own elements and it is contiguous) or of its root
(otherwise: a window before or after a slice's elements, or over a transposed tensor's
memory): a strided NumPy view of the same memory eagerly, so writes through it reach the
tensor and writes into the tensor are seen through it (ember/_views.py follows the histories,
as for any view), and an element gather of the row-major values in a graph. Its gradient adds
each element's share back where it came from, overlapping windows summed, as PyTorch's does;
read from the root, it reaches the tensor's own elements only (the op's ``within``), as
PyTorch's as_strided_backward drops the window's elements outside its input's.
A window reaching outside the root's elements, or a root that is itself not row-major (a
transposed array handed over by NumPy), is refused, naming the fix."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..types import TensorType
from . import _attr_rules as R
from . import api as E
from ._registry import OpDef, apply, constant, export, register
from ._rules import Complex
from ._util import memory_cost
from .promotion import to_tensor


def _positions(size, stride, offset) -> np.ndarray:
    """The window's elements' positions among the source's row-major elements."""
    index = np.full(size, offset, dtype=np.int64)
    for axis, (d, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[axis] = d
        index = index + (np.arange(d, dtype=np.int64) * s).reshape(shape)
    return index


def _infer(x, *, size, stride, offset, within=None):
    if within is not None:
        _check_within(x, within)
    return TensorType(tuple(size), x.dtype)


def _check_within(x, within) -> None:
    """``within``, the input's own elements as a window (sizes, strides, offset) of the source
    ``x``, the gradient's mask: inside ``x`` and no more elements than it has (a graph file's
    value reaches an index and an allocation of its size)."""
    n = int(np.prod(x.shape, dtype=np.int64)) if all(isinstance(d, int) for d in x.shape) else None
    ok = isinstance(within, (tuple, list)) and len(within) == 3
    if ok:
        sizes, strides, start = within
        ok = (
            isinstance(sizes, (tuple, list))
            and isinstance(strides, (tuple, list))
            and len(sizes) == len(strides)
            and all(type(v) is int and v >= 0 for v in (*sizes, *strides, start))
        )
    if ok and n is not None:
        count = int(np.prod(sizes, dtype=object))
        last = start + sum((d - 1) * s for d, s in zip(sizes, strides))
        ok = count <= n and (count == 0 or last < n)
    if not ok:
        raise ShapeError(
            f"within {str(within)[:120]} is no window of the source's {n} elements",
            op="as_strided_view",
        )


def _window(flat, size, stride, offset):
    if not all(size):
        return flat[:0].reshape(size)
    last = offset + sum((d - 1) * s for d, s in zip(size, stride))
    if offset < 0 or last >= flat.size:
        raise ShapeError(
            f"sizes {list(size)}, strides {list(stride)} and offset {offset} reach element "
            f"{last} of {flat.size}",
            op="as_strided",
        )
    # (an ndarray over the flat array's buffer: its base chain reaches the memory's owner,
    # which storage_offset() and data sharing read)
    item = flat.itemsize
    return np.ndarray(
        size, flat.dtype, buffer=flat, offset=offset * item,
        strides=tuple(s * item for s in stride),
    )  # fmt: skip


def _kernel(x, *, size, stride, offset, within=None):
    """The window over ``x``'s row-major elements: a view of a C-contiguous ``x`` (the
    eager case: the memory shared), else of a row-major copy (a graph value's layout)."""
    flat = x.reshape(-1) if x.flags.c_contiguous else np.ascontiguousarray(x).reshape(-1)
    out = _window(flat, size, stride, offset)
    if not x.flags.writeable:
        out.flags.writeable = False
    return out


def _as_view(x, *, size, stride, offset, within=None):
    """The window as a view of ``x`` (ember/_views.py's positions), ValueError where the
    kernel would copy."""
    if not x.flags.c_contiguous:
        raise ValueError("as_strided of a non-contiguous array copies")
    return _window(x.reshape(-1), size, stride, offset)


def _vjp(c, g):
    x = c.in_types[0]
    n = int(np.prod(x.shape, dtype=np.int64))
    where = _positions(c.attrs["size"], c.attrs["stride"], c.attrs["offset"]).reshape(-1)
    flat = E.index_add(E.zeros((n,), dtype=g.dtype), 0, constant(where), E.reshape(g, (-1,)))
    within = c.attrs.get("within")
    if within is not None:
        # PyTorch's as_strided_backward: the gradient reaches the input's own elements only,
        # a window's elements outside them (before or after a slice) get none
        keep = np.zeros(n, dtype=bool)
        keep[_positions(*within).reshape(-1)] = True
        flat = E.where(constant(keep), flat, E.zeros((), dtype=g.dtype))
    return (E.reshape(flat, tuple(x.shape)),)


def _onnx_rule(e):
    a = e.attrs
    flat = e.node("Reshape", [e.inputs[0], e.ints([-1])])
    where = _positions(a["size"], a["stride"], a["offset"]).reshape(-1)
    taken = e.node("Gather", [flat, e.constant(where)], axis=0)
    return e.node("Reshape", [taken, e.ints(list(a["size"]))])


AS_STRIDED_VIEW = register(
    OpDef(
        name="as_strided_view",
        kind="shape",
        infer=_infer,
        kernel=_kernel,
        as_view=_as_view,
        vjp=_vjp,
        cost=memory_cost,
        save_inputs=(),
        view=True,
        float8=True,
        complex=Complex.GRADIENT,
        batch=None,
        onnx=_onnx_rule,
        grad_fn="AsStridedBackward0",
        attrs={"within": R.Optional(R.Structured("a window the shape rule checks against x"))},
        doc="as_strided_view(x; size, stride, offset): the window of x's row-major elements at "
        "offset + sum(i_k * stride_k) (a view where x is contiguous); ``within``: the "
        "(size, stride, offset) of the elements the gradient reaches, where the user's tensor "
        "is a view of x (the window read from its root), else None: all of x's",
    )
)


def _concrete(shape) -> bool:
    return all(isinstance(d, (int, np.integer)) for d in shape)


def _numel(t) -> int:
    return int(np.prod(tuple(t.shape), dtype=np.int64))


def _fits(size, stride, offset, n) -> bool:
    """Whether the window's elements all lie among ``n`` elements from ``offset`` on."""
    if not all(size):
        return True
    return offset >= 0 and offset + sum((d - 1) * s for d, s in zip(size, stride)) < n


@export(method=True)
def as_strided(input, size, stride, storage_offset=None):
    """``input``'s memory at ``storage_offset + sum_k i_k * stride_k`` for each index
    ``(i_0, i_1, ...)`` of ``size``, a view (see the module docstring); ``storage_offset``
    defaults to the tensor's own, as in PyTorch."""
    x = to_tensor(input)
    size, stride = tuple(int(d) for d in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise ShapeError(
            f"mismatch in length of strides and shape: {len(stride)} and {len(size)}",
            op="as_strided",
        )
    if any(s < 0 for s in stride):
        raise ShapeError(
            f"Negative strides are not supported at the moment, got strides: {list(stride)}",
            op="as_strided",
        )
    if any(d < 0 for d in size):
        raise ShapeError(f"negative size: {list(size)}", op="as_strided")
    own = x.storage_offset()
    start = own if storage_offset is None else int(storage_offset)
    if start < 0:
        raise ShapeError(f"Tensor: invalid storage offset {start}", op="as_strided")
    if _concrete(x.shape) and x.is_contiguous() and _fits(size, stride, start - own, _numel(x)):
        source, offset = x, start - own  # (the tensor's own elements: its gradient flows to it)
    else:
        view_of = getattr(x, "_view_of", None)
        root = view_of[0] if view_of is not None and isinstance(view_of[1], tuple) else x
        if not (_concrete(root.shape) and root.is_contiguous()):
            raise ShapeError(
                f"the window reads memory outside the tensor (shape {tuple(x.shape)}, strides "
                f"{x.stride()}), whose storage ember holds in row-major order only for a "
                "contiguous tensor or view root: call .contiguous() first",
                op="as_strided",
            )
        first = root.storage_offset()
        source, offset = root, start - first
        if not _fits(size, stride, offset, _numel(root)):
            reach = start + sum((d - 1) * s for d, s in zip(size, stride))
            raise ShapeError(
                f"setStorage: sizes {list(size)}, strides {list(stride)} and storage offset "
                f"{start} reach elements {start}..{reach}, out of bounds for the storage's "
                f"elements {first}..{first + _numel(root) - 1}",
                op="as_strided",
            )
        if source is not x:  # (the gradient reaches x's own elements only, as PyTorch's)
            within = (tuple(int(d) for d in x.shape), tuple(x.stride()), own - first)
            return apply(
                AS_STRIDED_VIEW, source, size=size, stride=stride, offset=offset, within=within
            )
    return apply(AS_STRIDED_VIEW, source, size=size, stride=stride, offset=offset)
