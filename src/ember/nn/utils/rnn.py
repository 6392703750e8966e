"""``ember.nn.utils.rnn``: variable-length sequences, as PyTorch's module of the same name.

A `PackedSequence` holds the time steps of a batch of sequences one after another, each step
holding only the sequences still running (sorted longest first): ``data`` (sum of lengths,
*features), ``batch_sizes`` (int64, one count per step), and ``sorted_indices`` /
``unsorted_indices`` (the permutation from the caller's batch order to the sorted one and back,
or None when the caller's batch was already sorted). Packing and unpacking are one
``index_select`` each, so they are differentiable and capture into graphs; the lengths
themselves are host data (as PyTorch's, which must live on the CPU): they must be known when a
graph is captured, and the graph holds them as constants.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from ... import dtypes as dt
from ...errors import ArgumentError, ArgumentTypeError, EmberError, ShapeError
from ...ops import api as E
from ...ops._registry import TensorBase
from ...ops._util import fmt_shape
from ...tensor import Tensor


class _PackedSequenceFields(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedSequenceFields):
    """``(data, batch_sizes, sorted_indices, unsorted_indices)``, a named tuple as PyTorch's.
    Made by `pack_padded_sequence` and `pack_sequence`, read by `pad_packed_sequence`, and
    taken and returned by `ember.nn.RNN`, `LSTM` and `GRU`."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:  # PackedSequence((data, batch_sizes), ...) as PyTorch allows
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise ArgumentTypeError(
                    "PackedSequence: expected data to be a (data, batch_sizes) pair"
                )
            data, batch_sizes = data
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data: Tensor) -> PackedSequence:
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        """``data.to(...)``; the indices stay as they are (as in PyTorch, for a dtype)."""
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else self._with_data(data)

    def double(self) -> PackedSequence:
        return self.to(dt.float64)

    def float(self) -> PackedSequence:
        return self.to(dt.float32)

    def cpu(self) -> PackedSequence:
        return self

    @property
    def is_cuda(self) -> bool:
        return False


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a 1-D permutation (None stays None)."""
    if permutation is None:
        return None
    p = _host(permutation, "invert_permutation", "permutation")
    inverse = np.empty_like(p)
    inverse[p] = np.arange(p.size, dtype=p.dtype)
    return Tensor(inverse)


def _host(value, op: str, what: str) -> np.ndarray:
    """Lengths and permutations are host data: a list, an array or an eager integer tensor;
    while a graph is captured, an argument of the captured function (which ember.function then
    specializes on: see `SymbolicTensor.host_value`)."""
    if isinstance(value, Tensor):
        array = value.numpy(force=True)
    elif isinstance(value, TensorBase):
        if hasattr(value, "host_value"):
            array = np.asarray(value.host_value(f"{op}'s {what}"))
        else:
            raise EmberError(
                f"{what} must be known while the graph is captured (a list, a NumPy array, an "
                "eager tensor or an argument of the function ember.function captures), not a "
                "value the graph computes",
                op=op,
            )
    else:
        array = np.asarray(value)
    if array.ndim != 1 or not (array.dtype.kind in "iu" or array.size == 0):
        raise ShapeError(
            f"{what} must be a 1-D sequence of integers, got {array.dtype} of shape "
            f"{fmt_shape(array.shape)}",
            op=op,
        )
    return array.astype(np.int64)


def _steps(batch_sizes: np.ndarray) -> np.ndarray:
    """Where each step starts in ``data``."""
    return np.concatenate([[0], np.cumsum(batch_sizes)[:-1]]).astype(np.int64)


def _packed_rows(batch_sizes: np.ndarray, order: np.ndarray) -> np.ndarray:
    """For each row of the packed data, its row in a (T * B) flattening of the padded batch
    (in the caller's order): step t holds sorted positions 0..batch_sizes[t]-1."""
    b = order.size
    return np.concatenate(
        [t * b + order[:n] for t, n in enumerate(batch_sizes)] or [np.zeros(0, np.int64)]
    ).astype(np.int64)


def pack_padded_sequence(
    input: Tensor, lengths, batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Pack a padded batch ``input`` (T, B, *) (or (B, T, *) with ``batch_first``) of sequences
    of the given ``lengths``. With ``enforce_sorted`` the lengths must be in decreasing order;
    otherwise the batch is sorted here and ``sorted_indices`` records how."""
    op = "pack_padded_sequence"
    lengths = _host(lengths, op, "lengths")
    if input.ndim < 2:
        raise ShapeError(f"input must have at least 2 dimensions, got {input.ndim}", op=op)
    batch_axis = 0 if batch_first else 1
    size, steps = input.shape[batch_axis], input.shape[1 - batch_axis]
    if lengths.size != size:
        raise ShapeError(
            f"expected {size} lengths (the batch size of input {fmt_shape(input.shape)}), got "
            f"{lengths.size}",
            op=op,
        )
    if lengths.size and lengths.min() <= 0:
        raise ShapeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' "
            f"that is <= 0 (lengths {lengths.tolist()})",
            op=op,
        )
    if lengths.size and lengths.max() > steps:
        raise ShapeError(
            f"a length ({lengths.max()}) is longer than the input's {steps} time steps",
            op=op,
        )
    if enforce_sorted:
        if np.any(np.diff(lengths) > 0):
            raise ShapeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX "
                "exportability.",
                op=op,
            )
        order, sorted_indices = np.arange(size, dtype=np.int64), None
    else:
        order = np.argsort(-lengths, kind="stable").astype(np.int64)
        sorted_indices = Tensor(order)
    batch_sizes = (lengths[None, :] > np.arange(int(lengths.max(initial=0)))[:, None]).sum(1)
    x = input.transpose(0, 1) if batch_first else input
    return _pack(x, batch_sizes.astype(np.int64), order, sorted_indices, None)


def _pack(x, batch_sizes: np.ndarray, order: np.ndarray, sorted_indices, unsorted_indices):
    steps, size = x.shape[0], x.shape[1]
    flat = x.reshape((steps * size, *x.shape[2:]))
    data = E.index_select(flat, 0, Tensor(_packed_rows(batch_sizes, order)))
    return PackedSequence(data, Tensor(batch_sizes), sorted_indices, unsorted_indices)


def pack_like(padded: Tensor, like: PackedSequence) -> PackedSequence:
    """Pack ``padded`` (T, B, *), in the caller's batch order, exactly as ``like`` is packed
    (its batch sizes and permutation): how a recurrent layer returns a packed output."""
    batch_sizes = _host(like.batch_sizes, "pack_like", "batch_sizes")
    size = int(batch_sizes[0]) if batch_sizes.size else 0
    order = (
        np.arange(size, dtype=np.int64)
        if like.sorted_indices is None
        else _host(like.sorted_indices, "pack_like", "sorted_indices")
    )
    return _pack(padded, batch_sizes, order, like.sorted_indices, like.unsorted_indices)


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple:
    """The inverse of `pack_padded_sequence`: ``(padded, lengths)``, the batch back in the
    caller's order, padded with ``padding_value`` to the longest length (or ``total_length``);
    ``lengths`` is an int64 tensor."""
    op = "pad_packed_sequence"
    batch_sizes = _host(sequence.batch_sizes, op, "batch_sizes")
    steps = batch_sizes.size
    if total_length is not None:
        if total_length < steps:
            raise ArgumentError(
                "Expected total_length to be at least the length of the longest sequence in "
                f"input, but got total_length={total_length} and max sequence length being "
                f"{steps}"
            )
        steps = total_length
    data = sequence.data
    size = int(batch_sizes[0]) if batch_sizes.size else 0
    unsorted = (
        np.arange(size, dtype=np.int64)
        if sequence.unsorted_indices is None
        else _host(sequence.unsorted_indices, op, "unsorted_indices")
    )
    # sorted position j runs while j < batch_sizes[t]; the caller's sequence b sits at
    # position unsorted[b]; every other slot reads the padding row appended after the data
    starts = _steps(batch_sizes)
    rows = np.full((steps, size), data.shape[0], dtype=np.int64)
    for t, n in enumerate(batch_sizes):
        running = unsorted < n
        rows[t, running] = starts[t] + unsorted[running]
    pad = E.full((1, *data.shape[1:]), padding_value, dtype=data.dtype)
    padded = E.index_select(E.cat([data, pad]), 0, Tensor(rows.reshape(-1)))
    padded = padded.reshape((steps, size, *data.shape[1:]))
    lengths = (batch_sizes[None, :] > unsorted[:, None]).sum(1).astype(np.int64)
    return (padded.transpose(0, 1) if batch_first else padded), Tensor(lengths)


def pad_sequence(
    sequences,
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stack tensors of shapes (L_i, *) into (max L, B, *) (or (B, max L, *)), padding each
    with ``padding_value`` on the ``padding_side`` ("right" or "left")."""
    op = "pad_sequence"
    if padding_side not in ("right", "left"):
        raise ArgumentError(
            f"Expected padding_side to be one of left or right, but got {padding_side}."
        )
    if isinstance(sequences, TensorBase):
        sequences = sequences.unbind(0)
    elif not isinstance(sequences, Iterable):
        raise ArgumentTypeError(
            f"pad_sequence: Expected iterable for input sequences, but got arg of type: "
            f"{type(sequences)}"
        )
    sequences = list(sequences)
    if not sequences:
        raise ShapeError("received an empty list of sequences", op=op)
    trailing = tuple(sequences[0].shape[1:])
    for i, s in enumerate(sequences):
        if s.ndim < 1 or tuple(s.shape[1:]) != trailing:
            raise ShapeError(
                f"every sequence needs the trailing shape {fmt_shape(trailing)} of sequence 0; "
                f"sequence {i} has shape {fmt_shape(s.shape)}",
                op=op,
            )
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            fill = E.full((missing, *trailing), padding_value, dtype=s.dtype)
            s = E.cat([s, fill] if padding_side == "right" else [fill, s])
        padded.append(s)
    return E.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    """The inverse of `pad_sequence` (right padding): the list of unpadded sequences. As
    PyTorch's, a time-major ``padded_sequences`` is transposed in place to batch-major."""
    lengths = _host(lengths, "unpad_sequence", "lengths")
    x = padded_sequences
    if not batch_first:
        x.transpose_(0, 1)
    return [x[b, : int(n)] for b, n in enumerate(lengths)]


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of tensors of shapes (L_i, *) (longest first, unless ``enforce_sorted`` is
    False)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The inverse of `pack_sequence`: the list of tensors in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]
