"""``ember.ragged``: tensors whose rows have different lengths, as ``tf.RaggedTensor``.

A `RaggedTensor` is a flat ``values`` tensor of shape (N, *rest) (N: the total length over all
rows; trailing dense dimensions allowed) and int64 ``row_splits`` (R + 1,): 0, never
decreasing, ending at N. Row ``r`` is ``values[row_splits[r]:row_splits[r + 1]]``; the tensor's
shape is (R, None, *rest). Nothing is padded, so memory and work follow the real lengths.

Everything is computed on ``values`` with ember's ops, so gradients flow to whatever the values
came from. Elementwise ops apply to the values: with a scalar, a dense tensor that fits the
trailing dimensions, a per-row dense tensor of shape (R, 1, *rest) (expanded over each row's
values, ops/segment.py's ``segment_expand``), or another ragged tensor with the same row splits
(refused otherwise, naming ``row_splits``). Reductions over the ragged dimension (``dim=1``)
are the segment reductions of ops/segment.py: an empty row's sum is 0, its mean NaN, its max
-inf and its min +inf (as tf.reduce_max's float identity and torch.segment_reduce).

Capture: to ``ember.function`` and the tree helpers a RaggedTensor is a named pair (``values``,
``row_splits``): it is flattened into those two tensors and rebuilt inside the trace, so an
input signature gives two `TensorSpec`s per ragged argument; a ``None`` first dimension of the
values makes the graph serve every total length with the same number of rows. (Iterating a
RaggedTensor therefore yields values and row_splits, as a pair; ``rt.unbind()`` lists the
rows.)
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, ShapeError
from ..ops import api as E
from ..ops.promotion import to_tensor
from ..ops.segment import RowSplitsError, check_splits, expand_rows, segment
from ..ops.varlen_attention import varlen_attention
from ..tensor import Tensor

__all__ = [
    "RaggedTensor",
    "RowSplitsError",
    "constant",
    "from_padded",
    "from_row_lengths",
    "from_row_splits",
    "is_ragged",
    "map_values",
    "varlen_attention",
]


def _concrete(t) -> bool:
    """An eager tensor (its data known), not a symbolic one being traced."""
    return isinstance(t, Tensor)


def _splits_tensor(row_splits, field="row_splits"):
    if isinstance(row_splits, (list, tuple, np.ndarray)):
        array = np.asarray(row_splits)
        if array.size and array.dtype.kind not in "iu":
            raise RowSplitsError(f"{field} must be integers, got {array.dtype}", op="RaggedTensor")
        row_splits = to_tensor(array.astype(np.int64))
    if not row_splits.dtype.is_integer:
        raise RowSplitsError(
            f"{field} must be an integer tensor, got {row_splits.dtype}", op="RaggedTensor"
        )
    if row_splits.dtype is not dt.int64:
        row_splits = E.cast(row_splits, dt.int64)
    return row_splits


class RaggedTensor(tuple):
    """Rows of different lengths: ``values`` (N, *rest) and ``row_splits`` (R + 1,) int64.
    Build one with `constant`, `from_row_lengths`, `from_row_splits` or `from_padded`."""

    __slots__ = ()
    _fields = ("values", "row_splits")  # (what capture's tree helpers rebuild it from)

    def __new__(cls, values, row_splits, *, validate: bool = True):
        values = to_tensor(values)
        row_splits = _splits_tensor(row_splits)
        if values.ndim < 1:
            raise ShapeError(
                "values must have at least one dimension (the total length)", op="RaggedTensor"
            )
        if row_splits.ndim != 1:
            raise RowSplitsError(
                f"row_splits must be 1-D (rows + 1,), got shape {tuple(row_splits.shape)}",
                op="RaggedTensor",
            )
        if validate and _concrete(row_splits) and isinstance(values.shape[0], int):
            check_splits("RaggedTensor", row_splits.numpy(force=True), values.shape[0])
        return tuple.__new__(cls, (values, row_splits))

    def __getnewargs__(self):  # (copy and pickle rebuild it from its two tensors)
        return (self.values, self.row_splits)

    # ------------------------------------------------------------------ structure
    @property
    def values(self):
        return tuple.__getitem__(self, 0)

    @property
    def row_splits(self):
        return tuple.__getitem__(self, 1)

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def shape(self) -> tuple:
        """(rows, None, *rest): None for the ragged dimension."""
        return (self.nrows(),) + (None,) + tuple(self.values.shape[1:])

    @property
    def ndim(self) -> int:
        return self.values.ndim + 1

    @property
    def requires_grad(self) -> bool:
        return self.values.requires_grad

    def nrows(self) -> int:
        return self.row_splits.shape[0] - 1

    def row_lengths(self):
        """The rows' lengths (R,) int64."""
        splits = self.row_splits
        return E.getitem(splits, slice(1, None)) - E.getitem(splits, slice(None, -1))

    def row_positions(self):
        """Each value's position within its row (N,) int64: 0, 1, ... restarting at each row
        (written in ops, so the total length may be symbolic)."""
        values = self.values
        first = (
            values
            if values.ndim == 1
            else E.getitem(values, (slice(None),) + (0,) * (values.ndim - 1))
        )
        counted = E.cumsum(E.ones_like(first, dtype=dt.int64), 0) - 1
        starts = E.getitem(self.row_splits, slice(None, -1))
        return counted - expand_rows(starts, self.row_splits, values)

    def value_rowids(self):
        """The row of each value (N,) int64 (eager only: it reads the splits)."""
        lengths = np.diff(self._splits_array())
        return to_tensor(np.repeat(np.arange(len(lengths), dtype=np.int64), lengths))

    def _splits_array(self) -> np.ndarray:
        if not _concrete(self.row_splits):
            raise EmberError(
                "this needs the row splits' values, which a traced function does not have: "
                "call it outside ember.function, or pass what it computes as an argument",
                op="RaggedTensor",
            )
        return self.row_splits.numpy(force=True)

    def with_values(self, values) -> RaggedTensor:
        """The same rows with new ``values`` (of the same length N)."""
        values = to_tensor(values)
        a, b = values.shape[0], self.values.shape[0]
        if isinstance(a, int) and isinstance(b, int) and a != b:
            raise ShapeError(
                f"new values have length {a}, the rows hold {b}", op="RaggedTensor.with_values"
            )
        return RaggedTensor(values, self.row_splits, validate=False)

    def __getitem__(self, index):
        """Row ``index`` (a tensor of shape (length, *rest)), or a RaggedTensor of the rows a
        step-1 slice selects."""
        splits = self._splits_array()
        rows = len(splits) - 1
        if isinstance(index, slice):
            start, stop, step = index.indices(rows)
            if step != 1:
                raise EmberError("row slices take step 1", op="RaggedTensor.__getitem__")
            stop = max(stop, start)
            lo, hi = int(splits[start]), int(splits[stop])
            return RaggedTensor(
                E.getitem(self.values, slice(lo, hi)), splits[start : stop + 1] - lo
            )
        if not isinstance(index, (int, np.integer)):
            raise EmberError(
                f"index rows with an int or a slice, got {type(index).__name__}",
                op="RaggedTensor.__getitem__",
            )
        r = int(index) + rows if index < 0 else int(index)
        if not 0 <= r < rows:
            raise IndexError(f"row {index} is out of range for {rows} rows")
        return E.getitem(self.values, slice(int(splits[r]), int(splits[r + 1])))

    def unbind(self) -> list:
        """The rows, as a list of tensors."""
        return [self[r] for r in range(self.nrows())]

    # a RaggedTensor is a sequence of rows (as tf.RaggedTensor): its length is the number of
    # rows and it iterates over them; the pair (values, row_splits) it is built on is for
    # capture's tree helpers, which read a tuple's own items (graph/tree.py)
    def __len__(self) -> int:
        rows = self.nrows()
        if not isinstance(rows, int):
            raise EmberError("the number of rows is symbolic here", op="RaggedTensor.__len__")
        return rows

    def __iter__(self):
        return iter(self.unbind())

    def tolist(self) -> list:
        splits = self._splits_array()
        flat = self.values.detach().numpy()
        return [flat[a:b].tolist() for a, b in zip(splits[:-1], splits[1:])]

    def numpy(self) -> list:
        """The rows as a list of NumPy arrays."""
        splits = self._splits_array()
        flat = self.values.detach().numpy()
        return [flat[a:b] for a, b in zip(splits[:-1], splits[1:])]

    def __repr__(self) -> str:
        if not (_concrete(self.values) and _concrete(self.row_splits)):
            return f"<ember.RaggedTensor (symbolic) values={self.values!r}>"
        rows = self.tolist()
        text = repr(rows) if len(rows) <= 8 else repr(rows[:4])[:-1] + ", ...]"
        return f"<ember.RaggedTensor {text} dtype={self.dtype}>"

    __str__ = __repr__

    # ------------------------------------------------------------------ padding
    def _positions(self):
        """(flat positions in an (R * L) grid, L the longest row) of every value."""
        splits = self._splits_array()
        lengths = np.diff(splits)
        width = int(lengths.max()) if len(lengths) else 0
        rowids = np.repeat(np.arange(len(lengths)), lengths)
        positions = rowids * width + (np.arange(splits[-1]) - splits[rowids])
        return positions.astype(np.int64), width

    def to_padded(self, value=0.0, output_size=None):
        """A dense (R, L, *rest) tensor, L the longest row (or ``output_size[1]``), rows
        padded with ``value``; differentiable in the values."""
        positions, width = self._positions()
        if output_size is not None:
            if int(output_size[1]) < width:
                raise ShapeError(
                    f"output_size {tuple(output_size)} is shorter than the longest row ({width})",
                    op="RaggedTensor.to_padded",
                )
            grid = np.diff(self._splits_array())
            rowids = np.repeat(np.arange(len(grid)), grid)
            positions = positions - rowids * width + rowids * int(output_size[1])
            width = int(output_size[1])
        rows, rest = self.nrows(), tuple(self.values.shape[1:])
        base = E.full((rows * width,) + rest, value, dtype=self.dtype)
        padded = E.index_copy(base, 0, to_tensor(positions), self.values)
        return E.reshape(padded, (rows, width) + rest)

    def to_tensor(self, default_value=0.0):
        """tf.RaggedTensor.to_tensor: `to_padded` with ``default_value``."""
        return self.to_padded(default_value)

    # ------------------------------------------------------------------ elementwise
    def _operand(self, other, op: str):
        """``other`` as something that combines with ``self.values`` elementwise."""
        if isinstance(other, RaggedTensor):
            _check_same_splits(self, other, op)
            return other.values
        if isinstance(other, (bool, int, float)):
            return other
        other = to_tensor(other)
        if other.ndim <= self.values.ndim - 1 or other.ndim == 0:
            return other  # broadcasts against each value's trailing dimensions
        if other.ndim == self.ndim and other.shape[1] == 1 and other.shape[0] == self.nrows():
            return expand_rows(E.squeeze(other, 1), self.row_splits, self.values)
        raise ShapeError(
            f"a dense operand of shape {tuple(other.shape)} does not fit a ragged tensor of "
            f"shape {self.shape}: give a scalar, a tensor of the trailing shape "
            f"{tuple(self.values.shape[1:])}, or a per-row tensor of shape "
            f"({self.nrows()}, 1, ...)",
            op=f"RaggedTensor.{op}",
        )

    def _binary(self, other, fn, op, reverse=False):
        o = self._operand(other, op)
        out = fn(o, self.values) if reverse else fn(self.values, o)
        return self.with_values(out)

    def __add__(self, o):
        return self._binary(o, E.add, "add")

    def __radd__(self, o):
        return self._binary(o, E.add, "add", True)

    def __sub__(self, o):
        return self._binary(o, E.sub, "sub")

    def __rsub__(self, o):
        return self._binary(o, E.sub, "sub", True)

    def __mul__(self, o):
        return self._binary(o, E.mul, "mul")

    def __rmul__(self, o):
        return self._binary(o, E.mul, "mul", True)

    def __truediv__(self, o):
        return self._binary(o, E.div, "div")

    def __rtruediv__(self, o):
        return self._binary(o, E.div, "div", True)

    def __pow__(self, o):
        return self._binary(o, E.pow, "pow")

    def __neg__(self):
        return self.with_values(E.neg(self.values))

    def __abs__(self):
        return self.with_values(E.abs(self.values))

    def __eq__(self, o):  # elementwise, as a Tensor's (a ragged bool tensor)
        return self._binary(o, E.eq, "eq")

    def __ne__(self, o):
        return self._binary(o, E.ne, "ne")

    def __lt__(self, o):
        return self._binary(o, E.lt, "lt")

    def __le__(self, o):
        return self._binary(o, E.le, "le")

    def __gt__(self, o):
        return self._binary(o, E.gt, "gt")

    def __ge__(self, o):
        return self._binary(o, E.ge, "ge")

    __hash__ = object.__hash__  # (by identity: a tensor's == is elementwise)

    def map_values(self, fn, *args, **kwargs) -> RaggedTensor:
        """``fn`` applied to the values (an elementwise function, or any function that keeps
        the first dimension): tf.ragged.map_flat_values."""
        return self.with_values(fn(self.values, *args, **kwargs))

    # ------------------------------------------------------------------ reductions
    def _reduce(self, reduce: str, dim, keepdim: bool):
        if dim is None:
            return getattr(E, {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}[reduce])(
                self.values
            )
        d = dim + self.ndim if dim < 0 else dim
        if d == 1:
            out = segment(reduce, self.values, self.row_splits)
            return E.unsqueeze(out, 1) if keepdim else out
        if 2 <= d < self.ndim:
            fn = {"sum": E.sum, "mean": E.mean, "max": E.amax, "min": E.amin}[reduce]
            return self.with_values(fn(self.values, d - 1, keepdim=keepdim))
        raise ShapeError(
            f"dim {dim} is not a dimension to reduce of a ragged tensor of shape "
            f"{self.shape} (1: the ragged one; 2...: the values' trailing ones)",
            op=f"RaggedTensor.{reduce}",
        )

    def sum(self, dim=1, keepdim: bool = False):
        """Sums over ``dim`` (1, the ragged dimension, by default: (R, *rest); empty rows 0)."""
        return self._reduce("sum", dim, keepdim)

    def mean(self, dim=1, keepdim: bool = False):
        """Means over ``dim`` (1 by default; an empty row's mean is NaN)."""
        return self._reduce("mean", dim, keepdim)

    def max(self, dim=1, keepdim: bool = False):
        """Maxima over ``dim`` (1 by default; an empty row's max is -inf)."""
        return self._reduce("max", dim, keepdim)

    def min(self, dim=1, keepdim: bool = False):
        """Minima over ``dim`` (1 by default; an empty row's min is +inf)."""
        return self._reduce("min", dim, keepdim)

    # ------------------------------------------------------------------ autograd helpers
    def detach(self) -> RaggedTensor:
        return self.with_values(self.values.detach())

    def to(self, dtype) -> RaggedTensor:
        return self.with_values(E.cast(self.values, dt.as_dtype(dtype)))


def _unary(name):
    def method(self):
        return self.with_values(getattr(E, name)(self.values))

    method.__name__ = name
    method.__doc__ = f"``ember.{name}`` of every value, with the same rows."
    return method


# the elementwise functions as methods (any other: map_values)
_UNARY = ("exp", "log", "sqrt", "tanh", "sigmoid", "relu", "sin", "cos", "floor", "ceil")
for _name in _UNARY:
    setattr(RaggedTensor, _name, _unary(_name))


def _same_dims(a, b) -> bool:
    return all(
        not (isinstance(x, int) and isinstance(y, int)) or x == y for x, y in zip(a.shape, b.shape)
    )


def _check_same_splits(a: RaggedTensor, b: RaggedTensor, op: str) -> None:
    sa, sb = a.row_splits, b.row_splits
    if sa is sb:
        return
    if _concrete(sa) and _concrete(sb):
        x, y = sa.numpy(force=True), sb.numpy(force=True)
        if x.shape == y.shape and np.array_equal(x, y):
            return
        raise RowSplitsError(
            f"the operands' row_splits differ ({x.tolist()} and {y.tolist()}): elementwise "
            "ops need ragged operands with the same rows",
            op=f"RaggedTensor.{op}",
        )
    if not _same_dims(sa, sb):
        raise RowSplitsError(
            f"the operands have {sa.shape[0] - 1} and {sb.shape[0] - 1} rows",
            op=f"RaggedTensor.{op}",
        )
    raise RowSplitsError(
        "in a traced function, ragged operands must share one row_splits tensor (their "
        "values cannot be compared while tracing): build both from the same splits",
        op=f"RaggedTensor.{op}",
    )


# ---------------------------------------------------------------------- construction


def is_ragged(x) -> bool:
    return isinstance(x, RaggedTensor)


def from_row_splits(values, row_splits, *, validate: bool = True) -> RaggedTensor:
    """Rows ``values[row_splits[r]:row_splits[r + 1]]``."""
    return RaggedTensor(values, row_splits, validate=validate)


def _lengths_to_splits(lengths) -> np.ndarray:
    if isinstance(lengths, Tensor):
        lengths = lengths.numpy(force=True)
    lengths = np.asarray(lengths)
    if lengths.size and lengths.dtype.kind not in "iu":
        raise RowSplitsError(f"row_lengths must be integers, got {lengths.dtype}", op="ragged")
    if lengths.ndim != 1:
        raise RowSplitsError(f"row_lengths must be 1-D, got shape {lengths.shape}", op="ragged")
    if (lengths < 0).any():
        raise RowSplitsError(
            f"row_lengths must not be negative, got {lengths.tolist()}", op="ragged"
        )
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)


def from_row_lengths(values, row_lengths, *, validate: bool = True) -> RaggedTensor:
    """Consecutive rows of ``row_lengths[r]`` values each (their sum is len(values))."""
    return RaggedTensor(values, _lengths_to_splits(row_lengths), validate=validate)


def from_padded(x, lengths) -> RaggedTensor:
    """The first ``lengths[r]`` entries of each row of the dense (R, L, *rest) ``x``
    (differentiable in ``x``)."""
    x = to_tensor(x)
    if x.ndim < 2:
        raise ShapeError(
            f"a padded tensor is (rows, length, ...), got shape {tuple(x.shape)}",
            op="ragged.from_padded",
        )
    splits = _lengths_to_splits(lengths)
    rows, width = x.shape[0], x.shape[1]
    lengths = np.diff(splits)
    if len(lengths) != rows or (lengths > width).any():
        raise ShapeError(
            f"lengths {lengths.tolist()} do not fit a padded tensor of shape {tuple(x.shape)}",
            op="ragged.from_padded",
        )
    rowids = np.repeat(np.arange(rows), lengths)
    positions = rowids * width + (np.arange(splits[-1]) - splits[rowids])
    flat = E.reshape(x, (rows * width,) + tuple(x.shape[2:]))
    return RaggedTensor(E.index_select(flat, 0, to_tensor(positions.astype(np.int64))), splits)


def constant(rows, dtype=None, *, requires_grad: bool = False) -> RaggedTensor:
    """A RaggedTensor from nested lists: a list of rows, each a list of values (numbers, or
    equal-shaped lists for trailing dimensions), as tf.ragged.constant."""
    if isinstance(rows, RaggedTensor):
        return rows
    if not isinstance(rows, (list, tuple)):
        raise EmberError(
            f"ragged.constant takes a list of rows, got {type(rows).__name__}", op="ragged"
        )
    arrays = [np.asarray(r) for r in rows]
    trailing = {a.shape[1:] for a in arrays if a.size or a.ndim > 1}
    if any(a.ndim == 0 for a in arrays):
        raise ShapeError("every row must be a list (a row of values)", op="ragged.constant")
    if len(trailing) > 1:
        raise ShapeError(
            f"rows' values have different shapes {sorted(trailing)}: only the first "
            "dimension may be ragged",
            op="ragged.constant",
        )
    rest = trailing.pop() if trailing else ()
    filled = [a for a in arrays if a.size]
    flat = (
        np.concatenate([a.reshape((-1,) + rest) for a in filled])
        if filled
        else np.zeros((0,) + rest)
    )
    splits = _lengths_to_splits([a.shape[0] if a.size else 0 for a in arrays])
    from ..ops.creation import tensor

    if dtype is None and flat.dtype.kind == "f":
        dtype = dt.get_default_dtype()  # (Python floats, as ember.tensor reads them)
    values = tensor(flat, dtype=dtype, requires_grad=requires_grad)
    return RaggedTensor(values, splits)


def map_values(fn, rt: RaggedTensor, *args, **kwargs) -> RaggedTensor:
    """tf.ragged.map_flat_values: ``fn(rt.values, ...)`` with rt's rows."""
    return rt.map_values(fn, *args, **kwargs)
