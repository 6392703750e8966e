"""PyTorch's rearranging functions written in ember's shape ops: roll, meshgrid, diag,
diagonal, hstack, vstack and t. Composites, so they differentiate and capture through the ops
they are made of (split, concat, narrow, reshape, permute, getitem, broadcast_to, where, pad),
but for diagonal's own view op (``diagonal_view``: the diagonal of the last two dimensions,
a strided view of any input, so writing into ``x[:, :3].diagonal()`` writes ``x``, as in
PyTorch).

Where PyTorch returns a view of meshgrid's outputs or t, ember returns a new tensor: writing
into it in place does not write the input.
"""

from __future__ import annotations

import operator

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from ..types import TensorType
from . import _batching
from . import api as E
from ._node_names import rename_node
from ._registry import OpDef, TensorBase, apply, export, register
from ._rules import Complex
from ._util import fmt_shape, memory_cost, normalize_axis
from .promotion import to_tensor
from .shape import PERMUTE

# ------------------------------------------------------------------------------------ roll


def _roll_one(x, shift: int, dim: int):
    n = x.shape[dim]
    if not isinstance(n, int):  # (the shift taken to be within the size, as it must be to
        # mean the same at every size: a split at n - shift)
        if shift == 0:
            return x
        cut = n - shift if shift > 0 else -shift
        head, tail = E.split(x, [cut, n - cut], dim)
        return E.concat([tail, head], dim)
    if n == 0:
        return x
    shift %= n
    if shift == 0:
        return x
    # (split, not narrow: it keeps symbolic sizes of the other dimensions)
    head, tail = E.split(x, [n - shift, shift], dim)
    return E.concat([tail, head], dim)


def roll(input, shifts, dims=None):
    """Roll the elements along ``dims`` by ``shifts`` (ints or tuples of one length); an
    element pushed past the end comes back at the start. Without ``dims`` the tensor is
    rolled flattened and given its shape back, as in PyTorch."""
    x = to_tensor(input)
    shifts = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    if not shifts:
        raise ShapeError("shifts must hold at least one shift", op="roll")
    if dims is None:
        if len(shifts) != 1:
            raise ShapeError(f"without dims, shifts must be one int, got {shifts}", op="roll")
        flat = E.reshape(x, (-1,)) if x.ndim != 1 else x
        rolled = E.reshape(_roll_one(flat, operator.index(shifts[0]), 0), tuple(x.shape))
        return rename_node(rolled, "RollBackward0", x)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims):
        raise ShapeError(f"shifts {shifts} and dims {dims} must have one length", op="roll")
    if 0 in tuple(x.shape):  # nothing moves: PyTorch returns a copy before reading the dims
        return E.clone(x)
    rolled = x
    for shift, dim in zip(shifts, dims):
        rolled = _roll_one(rolled, operator.index(shift), normalize_axis("roll", dim, rolled.ndim))
    return rename_node(rolled, "RollBackward0", x)


export(roll, method=True)


# -------------------------------------------------------------------------------- meshgrid


def meshgrid(*tensors, indexing: str = "ij"):
    """Coordinate grids from 0-d or 1-d tensors of one dtype: output k holds tensor k's values
    along its own axis, broadcast over the others. ``indexing="xy"`` swaps the first two axes
    (NumPy's default, Cartesian). ember's default is "ij" without PyTorch's warning; the
    outputs are broadcast tensors, not views to write through."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise ShapeError("meshgrid needs at least one tensor", op="meshgrid")
    if indexing not in ("ij", "xy"):
        raise ArgumentError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    tensors = [to_tensor(t) for t in tensors]
    for t in tensors:
        if t.ndim > 1:
            raise ShapeError(
                f"expects 0-d or 1-d tensors, got one of shape {fmt_shape(t.shape)}",
                op="meshgrid",
            )
        if t.dtype is not tensors[0].dtype:
            names = ", ".join(str(t.dtype) for t in tensors)
            raise DTypeError(f"expects tensors of one dtype, got {names}", op="meshgrid")
    sizes = [t.shape[0] if t.ndim else 1 for t in tensors]
    axes = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:
        axes[0], axes[1] = 1, 0
    shape = [0] * len(tensors)
    for k, axis in enumerate(axes):
        shape[axis] = sizes[k]
    grids = []
    for k, t in enumerate(tensors):
        view = [1] * len(tensors)
        view[axes[k]] = sizes[k]
        grids.append(E.broadcast_to(E.reshape(t, tuple(view)), tuple(shape)))
    return tuple(grids)


export(meshgrid)


# --------------------------------------------------------------------------- diag, diagonal


def _diagonal_extent(n: int, m: int, offset: int) -> tuple[int, int, int]:
    """(length, first row, first column) of diagonal ``offset`` of an n x m plane."""
    row, col = (0, offset) if offset >= 0 else (-offset, 0)
    return max(min(n - row, m - col), 0), row, col


def _diagonal_view_infer(x, *, offset):
    length = _diagonal_extent(x.shape[-2], x.shape[-1], offset)[0]
    return TensorType((*x.shape[:-2], length), x.dtype)


def _diagonal_view_kernel(x, *, offset):
    """A strided view of ``x``'s memory (writable where ``x`` is): one step is a row and a
    column, whatever the layout."""
    length, row, col = _diagonal_extent(x.shape[-2], x.shape[-1], offset)
    corner = x[..., row : row + length, col : col + length]
    return np.lib.stride_tricks.as_strided(
        corner,
        shape=(*x.shape[:-2], length),
        strides=(*x.strides[:-2], x.strides[-2] + x.strides[-1]),
        writeable=x.flags.writeable,
    )


def _diagonal_view_vjp(c, g):
    zeros = E.zeros(tuple(c.in_types[0].shape), dtype=g.dtype)
    return (E.diagonal_scatter(zeros, g, c.attrs["offset"], -2, -1),)


def _diagonal_view_onnx(e):
    n, m = e.in_types[0].shape[-2:]
    if not (isinstance(n, int) and isinstance(m, int)):
        e.unsupported("for a symbolic plane")
    length, row, col = _diagonal_extent(n, m, e.attrs["offset"])
    lead = [0] * (len(e.in_types[0].shape) - 2)
    flat = e.node("Reshape", [e.inputs[0], e.ints([*lead, n * m])])
    positions = (row + np.arange(length)) * m + col + np.arange(length)
    return e.node("Gather", [flat, e.constant(positions.astype(np.int64))], axis=-1)


def _diagonal_view_batch(in_types, axes, attrs, k):
    if axes[0] >= len(in_types[0].shape) - 2:
        raise _batching.NotBatchable("the batch runs along the diagonal's plane")
    return _batching.Batched((axes[0],), attrs)


_DIAGONAL_VIEW = register(
    OpDef(
        name="diagonal_view",
        float8=True,
        complex=Complex.GRADIENT,
        onnx=_diagonal_view_onnx,
        kind="shape",
        infer=_diagonal_view_infer,
        kernel=_diagonal_view_kernel,
        vjp=_diagonal_view_vjp,
        cost=memory_cost,
        save_inputs=(),
        view=True,
        batch=_diagonal_view_batch,
        doc="diagonal_view(x, offset): diagonal ``offset`` of the last two dimensions, as the "
        "last dimension (a view)",
    )
)


def diagonal(input, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """The diagonal of the (dim1, dim2) planes, ``offset`` above the main one (below when
    negative), as the last dimension (PyTorch's and NumPy's layout): a view, as PyTorch's."""
    x = to_tensor(input)
    if x.ndim < 2:
        raise ShapeError(
            f"needs at least 2 dimensions, got shape {fmt_shape(x.shape)}", op="diagonal"
        )
    d1, d2 = normalize_axis("diagonal", dim1, x.ndim), normalize_axis("diagonal", dim2, x.ndim)
    if d1 == d2:
        raise ShapeError(f"dim1 and dim2 are the same dimension {d1}", op="diagonal")
    offset = operator.index(offset)
    x = E.movedim(x, (d1, d2), (-2, -1))
    n, m = x.shape[-2], x.shape[-1]
    if isinstance(n, int) and isinstance(m, int):
        return rename_node(apply(_DIAGONAL_VIEW, x, offset=offset), "DiagonalBackward0")
    # a symbolic plane: the planes flattened, element (i, i + offset) sits at
    # i * (m + 1) + offset (offset >= 0), (i - offset, i) at -offset * m + i * (m + 1)
    batch = tuple(x.shape[:-2])
    if offset >= 0:
        length, start = max(min(n, m - offset), 0), offset
    else:
        length, start = max(min(n + offset, m), 0), -offset * m
    flat = E.reshape(x, (*batch, n * m))
    if length == 0:
        return E.narrow(flat, -1, 0, 0)
    return flat[..., start : start + (length - 1) * (m + 1) + 1 : m + 1]


export(diagonal, method=True)


def diag(input, diagonal: int = 0):
    """PyTorch's diag: of a 1-d tensor, the square matrix with it on diagonal ``diagonal``
    (above the main one when positive), zero elsewhere; of a 2-d tensor, that diagonal."""
    x = to_tensor(input)
    k = operator.index(diagonal)
    if x.ndim == 2:
        return globals()["diagonal"](x, k)
    if x.ndim != 1:
        raise ShapeError(f"expects a 1-d or 2-d tensor, got shape {fmt_shape(x.shape)}", op="diag")
    n = x.shape[0]
    # (a select, not a product with the identity: an inf on the diagonal leaves 0 elsewhere)
    square = E.where(E.eye(n, dtype=dt.bool_), E.reshape(x, (1, n)), E.zeros((), dtype=x.dtype))
    if k == 0:
        return square
    # shifted: k columns before and k rows after (k > 0), or |k| rows before, columns after
    pads = (k, 0, 0, k) if k > 0 else (0, -k, -k, 0)
    return E.pad(square, pads, value=False if x.dtype is dt.bool_ else 0)


export(diag, method=True)


# ---------------------------------------------------------------------------- stacks and t


def _tensors(name: str, tensors) -> list:
    if isinstance(tensors, TensorBase) or not isinstance(tensors, (list, tuple)):
        raise ArgumentTypeError(f"{name} takes a sequence of tensors")
    if not tensors:
        raise ShapeError("expects a non-empty sequence of tensors", op=name)
    return [to_tensor(t) for t in tensors]


def hstack(tensors):
    """Concatenate along the columns: 0-d tensors become 1-d; 1-d tensors are joined end to
    end, others along dimension 1 (PyTorch's and NumPy's hstack), with type promotion."""
    ts = [E.reshape(t, (1,)) if t.ndim == 0 else t for t in _tensors("hstack", tensors)]
    return E.concat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    """Concatenate along the rows: 0-d and 1-d tensors become rows (1, n) first, then all
    join along dimension 0 (PyTorch's and NumPy's vstack), with type promotion."""
    ts = [
        E.reshape(t, (1, t.shape[0] if t.ndim else 1)) if t.ndim < 2 else t
        for t in _tensors("vstack", tensors)
    ]
    return E.concat(ts, 0)


export(hstack)
export(vstack)


def t(input):
    """The transpose of a matrix; a 0-d or 1-d tensor is returned as it is. Tensors of more
    dimensions are refused (use transpose or permute), as in PyTorch."""
    x = to_tensor(input)
    if x.ndim > 2:
        raise ShapeError(
            f"expects a tensor of at most 2 dimensions, got shape {fmt_shape(x.shape)}; use "
            "transpose(dim0, dim1) or permute",
            op="t",
        )
    if x.ndim != 2:
        return x
    # (the permute op applied directly: transpose's checks hold for a matrix's two axes)
    return rename_node(apply(PERMUTE, x, dims=(1, 0)), "TBackward0")


export(t, method=True)
