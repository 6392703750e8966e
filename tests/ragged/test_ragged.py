"""ember.ragged: construction, padding, elementwise ops, reductions over the ragged dimension,
embedding lookup, gradients, capture with a symbolic total length, and bad input.

References: the same computation row by row in NumPy (the rows as dense arrays), PyTorch's
torch.segment_reduce and nested tensors (to_padded_tensor), and central finite differences
in float64 for the gradients."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
from ember import ragged
from ember.errors import EmberError

ROWS = [[1.0, -2.0, 3.5], [], [4.0], [0.5, 7.0]]
R = np.random.default_rng(5)


def _rows3d():
    lengths = [2, 0, 3, 1]
    return [R.standard_normal((n, 3)) for n in lengths], lengths


# ------------------------------------------------------------------ construction


def test_constant_structure_and_rows():
    rt = ragged.constant(ROWS)
    assert rt.values.dtype is ember.float32 and rt.row_splits.dtype is ember.int64
    assert rt.row_splits.numpy().tolist() == [0, 3, 3, 4, 6]
    assert rt.row_lengths().numpy().tolist() == [3, 0, 1, 2]
    assert rt.nrows() == 4 and rt.shape == (4, None)
    assert rt.tolist() == ROWS
    assert rt[0].numpy().tolist() == ROWS[0] and rt[-1].numpy().tolist() == ROWS[-1]
    assert rt[1].shape == (0,)
    assert rt[1:3].tolist() == ROWS[1:3]
    assert "RaggedTensor" in repr(rt) and "[4.0]" in repr(rt)
    ints = ragged.constant([[1, 2], [3]])
    assert ints.dtype is ember.int64
    assert copy.deepcopy(ints).tolist() == [[1, 2], [3]]


def test_trailing_dimensions_and_from_lengths_and_splits():
    rows, lengths = _rows3d()
    values = np.concatenate(rows)
    a = ragged.from_row_lengths(ember.tensor(values), lengths)
    b = ragged.from_row_splits(ember.tensor(values), np.concatenate([[0], np.cumsum(lengths)]))
    c = ragged.constant([r.tolist() for r in rows], dtype=ember.float64)
    for rt in (a, b, c):
        assert rt.shape == (4, None, 3)
        for got, want in zip(rt.numpy(), rows):
            np.testing.assert_array_equal(got, want)


def test_padding_round_trip_and_nested_tensors():
    torch = pytest.importorskip("torch")
    rows, lengths = _rows3d()
    rt = ragged.from_row_lengths(ember.tensor(np.concatenate(rows)), lengths)
    padded = rt.to_padded(-1.0)
    nested = torch.nested.nested_tensor([torch.tensor(r) for r in rows])
    np.testing.assert_array_equal(padded.numpy(), nested.to_padded_tensor(-1.0).numpy())
    np.testing.assert_array_equal(rt.to_tensor(-1.0).numpy(), padded.numpy())
    wide = rt.to_padded(0.0, output_size=(4, 5, 3))
    np.testing.assert_array_equal(
        wide.numpy(), nested.to_padded_tensor(0.0, output_size=(4, 5, 3)).numpy()
    )
    back = ragged.from_padded(padded, lengths)
    assert back.row_splits.numpy().tolist() == rt.row_splits.numpy().tolist()
    np.testing.assert_array_equal(back.values.numpy(), rt.values.numpy())


# ------------------------------------------------------------------ elementwise


def test_elementwise_with_scalars_ragged_trailing_and_per_row_operands():
    rows, lengths = _rows3d()
    rt = ragged.from_row_lengths(ember.tensor(np.concatenate(rows)), lengths)
    bias = R.standard_normal(3)
    per_row = R.standard_normal((4, 1, 3))
    out = ((rt * 2.0 - rt) / (rt.map_values(ember.exp) + 1) + ember.tensor(bias)) * ember.tensor(
        per_row
    )
    for r, (got, x) in enumerate(zip(out.numpy(), rows)):
        want = ((x * 2.0 - x) / (np.exp(x) + 1) + bias) * per_row[r]
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert (-rt).tolist() == [(-x).tolist() for x in rows]
    for got, x in zip(rt.relu().tanh().numpy(), rows):
        np.testing.assert_allclose(got, np.tanh(np.maximum(x, 0)), rtol=1e-12)
    assert ((rt > 0).values.numpy() == (np.concatenate(rows) > 0)).all()


def test_mismatched_splits_are_refused_naming_them():
    a = ragged.constant([[1.0, 2.0], [3.0]])
    b = ragged.constant([[1.0], [2.0, 3.0]])
    with pytest.raises(EmberError, match="row_splits differ"):
        a + b
    with pytest.raises(EmberError, match="does not fit a ragged tensor"):
        a * ember.ones(3, 2)
    assert (a + ragged.constant([[1.0, 1.0], [1.0]])).tolist() == [[2.0, 3.0], [4.0]]


# ------------------------------------------------------------------ reductions


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_reductions_over_the_ragged_dimension(reduce):
    rows, lengths = _rows3d()
    rt = ragged.from_row_lengths(ember.tensor(np.concatenate(rows)), lengths)
    got = getattr(rt, reduce)().numpy()
    empty = {"sum": 0.0, "mean": np.nan, "max": -np.inf, "min": np.inf}[reduce]
    want = np.stack([getattr(np, reduce)(x, axis=0) if len(x) else np.full(3, empty) for x in rows])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    torch = pytest.importorskip("torch")
    peer = torch.segment_reduce(
        torch.tensor(rt.values.numpy()), reduce, lengths=torch.tensor(lengths)
    )
    np.testing.assert_allclose(got, peer.numpy(), rtol=1e-12)
    inner = getattr(rt, reduce)(dim=2)  # the values' own trailing dimension: still ragged
    np.testing.assert_allclose(
        inner.values.numpy(), getattr(np, reduce)(np.concatenate(rows), axis=1), rtol=1e-12
    )


def _finite_differences(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        grad[i] = (f(up) - f(down)) / (2 * eps)
    return grad


def test_gradients_through_ops_reductions_and_padding():
    rows, lengths = _rows3d()
    flat = np.concatenate(rows)
    per_row = R.standard_normal((4, 1, 3))
    weights = R.standard_normal((4, 3))
    weights_pad = R.standard_normal((4, 3, 3))

    def loss(values, lib_eval=False):
        rt = ragged.from_row_lengths(ember.tensor(values, requires_grad=not lib_eval), lengths)
        h = (rt * ember.tensor(per_row)).map_values(ember.tanh) + 0.5
        total = (h.sum() * ember.tensor(weights)).sum()
        # (the empty row's max and mean are not finite: only the full rows count)
        full = ember.tensor(np.array(lengths) > 0).reshape(4, 1)
        total = total + ember.where(full, h.max() + h.mean() - h.min(), 0.0).sum()
        total = total + (h.to_padded(0.0) * ember.tensor(weights_pad)).sum()
        return rt.values, total

    values, total = loss(flat)
    total.backward()
    expected = _finite_differences(lambda v: loss(v, True)[1].item(), flat)
    np.testing.assert_allclose(values.grad.numpy(), expected, rtol=1e-6, atol=1e-8)


def test_from_padded_gradient_reaches_the_real_positions_only():
    x = ember.tensor(R.standard_normal((3, 4, 2)), requires_grad=True)
    rt = ragged.from_padded(x, [4, 0, 2])
    weights = R.standard_normal((6, 2))
    (rt.values * ember.tensor(weights)).sum().backward()
    expected = np.zeros((3, 4, 2))
    expected[0] = weights[:4]
    expected[2, :2] = weights[4:]
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_embedding_lookup_on_ragged_ids():
    ids = ragged.constant([[3, 1, 4], [], [1, 5]])
    emb = ember.nn.Embedding(6, 4, dtype=ember.float64)
    out = emb(ids)
    assert isinstance(out, ragged.RaggedTensor) and out.shape == (3, None, 4)
    w = emb.weight.detach().numpy()
    for got, row in zip(out.numpy(), [[3, 1, 4], [], [1, 5]]):
        np.testing.assert_array_equal(got, w[row].reshape(-1, 4))
    out.sum().sum().backward()
    counts = np.bincount([3, 1, 4, 1, 5], minlength=6)[:, None]
    np.testing.assert_array_equal(emb.weight.grad.numpy(), np.broadcast_to(counts, (6, 4)))
    via_f = ember.nn.functional.embedding(ids, emb.weight)
    np.testing.assert_array_equal(via_f.values.detach().numpy(), out.values.detach().numpy())


# ------------------------------------------------------------------ capture


def test_function_with_a_symbolic_total_length_traces_once():
    spec = ember.TensorSpec

    def f(rt, w):
        h = (rt * w).map_values(ember.tanh)
        return h.mean(), h.max(), h + 1.0

    fn = ember.function(
        f,
        input_signature=[
            spec((None, 3), ember.float64),
            spec((5,), ember.int64),
            spec((3,), ember.float64),
        ],
    )
    w = ember.tensor(R.standard_normal(3))
    for lengths in ([2, 1, 3, 1], [5, 1, 2, 4], [1, 1, 1, 1]):
        rt = ragged.from_row_lengths(ember.tensor(R.standard_normal((sum(lengths), 3))), lengths)
        mean, mx, shifted = fn(rt, w)
        e_mean, e_mx, e_shifted = f(rt, w)
        np.testing.assert_allclose(mean.numpy(), e_mean.numpy(), rtol=1e-12)
        np.testing.assert_allclose(mx.numpy(), e_mx.numpy(), rtol=1e-12)
        assert isinstance(shifted, ragged.RaggedTensor)
        np.testing.assert_allclose(shifted.values.numpy(), e_shifted.values.numpy(), rtol=1e-12)
    assert fn.stats.traces == 1
    assert "N" in str(fn.graph)  # the values' length is the symbolic size


def test_gradient_of_a_captured_ragged_function():
    lengths = [2, 3, 1]
    x = R.standard_normal((6, 3))

    def loss(values):
        rt = ragged.from_row_lengths(values, lengths)
        return (rt.map_values(ember.sin).mean() ** 2).sum()

    grad = ember.grad(loss)
    got = grad(ember.tensor(x)).numpy()
    expected = _finite_differences(lambda v: loss(ember.tensor(v)).item(), x)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "splits, message",
    [
        ([0, 3, 2, 4], "must not decrease"),
        ([1, 2, 4], "must start at 0"),
        ([0, 2, 3], "must end at the values' length 4"),
        ([0.0, 2.0, 4.0], "must be integers"),
        ([[0, 4]], "1-D"),
    ],
)
def test_bad_row_splits_name_the_field(splits, message):
    with pytest.raises(EmberError, match="row_splits") as info:
        ragged.from_row_splits(ember.ones(4), splits)
    assert message in str(info.value)


def test_bad_lengths_and_shapes():
    with pytest.raises(EmberError, match="row_lengths must not be negative"):
        ragged.from_row_lengths(ember.ones(2), [3, -1])
    with pytest.raises(EmberError, match="must end at the values' length"):
        ragged.from_row_lengths(ember.ones(2), [1, 2])
    with pytest.raises(EmberError, match="only the first dimension may be ragged"):
        ragged.constant([[[1, 2]], [[1, 2, 3]]])
    with pytest.raises(EmberError, match="do not fit a padded tensor"):
        ragged.from_padded(ember.ones(2, 3), [1, 4])
    with pytest.raises(EmberError, match="row_splits"):  # the op's own check, in a kernel
        ember.segment_reduce(ember.ones(3), "sum", offsets=[0, 2, 1, 3])
