"""``ember.nn.utils.rnn`` against ``torch.nn.utils.rnn``: packing and padding (values, batch
sizes, permutations, lengths, gradients), and RNN / LSTM / GRU on PackedSequence inputs (packed
outputs, final states, input, initial-state and parameter gradients), eager and captured."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn
from ember.nn.utils import rnn as R

from .compare import compare_module, copy_weights, torch

tnn = torch.nn
TR = torch.nn.utils.rnn
r = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _seed_torch():
    torch.manual_seed(0)


def randn(*shape):
    return r.standard_normal(shape)


def same(e, t) -> None:
    if t is None:
        assert e is None
        return
    assert tuple(e.shape) == tuple(t.shape)
    assert str(e.dtype) == str(t.dtype).replace("torch.", "ember.")
    np.testing.assert_array_equal(e.detach().numpy(), t.detach().numpy())


def same_packed(e, t) -> None:
    assert isinstance(e, R.PackedSequence) and isinstance(e, tuple)
    for name in ("data", "batch_sizes", "sorted_indices", "unsorted_indices"):
        same(getattr(e, name), getattr(t, name))


LENGTHS = [
    ([5, 3, 3, 1], True),
    ([5, 3, 3, 1], False),
    ([2, 5, 1, 3], False),
    ([3, 5, 3, 1, 5], False),  # ties: the sort is stable, as torch's
    ([4], True),
]


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths,enforce_sorted", LENGTHS)
def test_pack_and_pad_match_torch(lengths, enforce_sorted, batch_first):
    b, steps = len(lengths), 6
    x = randn(b, steps, 3) if batch_first else randn(steps, b, 3)
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    lengths_arg = ember.tensor(np.array(lengths)) if enforce_sorted else lengths  # both kinds
    e = R.pack_padded_sequence(ex, lengths_arg, batch_first, enforce_sorted)
    t = TR.pack_padded_sequence(tx, lengths, batch_first, enforce_sorted)
    same_packed(e, t)
    for total_length in (None, 7):
        ep, el = R.pad_packed_sequence(e, batch_first, -2.5, total_length)
        tp, tl = TR.pad_packed_sequence(t, batch_first, -2.5, total_length)
        same(ep, tp)
        same(el, tl)
    # gradients: through pack and pad back to the padded input (zero on the padding)
    c = randn(*tp.shape)
    (ep * ember.tensor(c)).sum().backward()
    (tp * torch.tensor(c)).sum().backward()
    np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())
    assert [s.shape for s in R.unpack_sequence(e)] == [
        tuple(s.shape) for s in TR.unpack_sequence(t)
    ]


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pad_sequence_matches_torch(batch_first, padding_side):
    seqs = [randn(n, 2, 3) for n in (3, 5, 1)]
    e = R.pad_sequence([ember.tensor(s) for s in seqs], batch_first, 1.5, padding_side)
    t = TR.pad_sequence([torch.tensor(s) for s in seqs], batch_first, 1.5, padding_side)
    same(e, t)
    ints = [np.arange(n) for n in (2, 4)]
    same(
        R.pad_sequence([ember.tensor(s) for s in ints], padding_value=-1),
        TR.pad_sequence([torch.tensor(s) for s in ints], padding_value=-1),
    )


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_sequence_and_unpack_sequence_match_torch(enforce_sorted):
    seqs = [randn(n, 2) for n in ((4, 2, 1) if enforce_sorted else (2, 4, 1))]
    e = R.pack_sequence([ember.tensor(s) for s in seqs], enforce_sorted)
    t = TR.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted)
    same_packed(e, t)
    for got, want in zip(R.unpack_sequence(e), seqs):
        np.testing.assert_array_equal(got.numpy(), want)
    padded = R.pad_sequence([ember.tensor(s) for s in seqs], batch_first=True)
    for got, want in zip(R.unpad_sequence(padded, [len(s) for s in seqs], True), seqs):
        np.testing.assert_array_equal(got.numpy(), want)


def test_packed_sequence_is_torchs_named_tuple():
    p = R.pack_sequence([ember.tensor(randn(3, 2)), ember.tensor(randn(2, 2))])
    data, batch_sizes, sorted_indices, unsorted_indices = p
    assert R.PackedSequence._fields == TR.PackedSequence._fields
    assert sorted_indices is None and unsorted_indices is None
    assert p.float().data.dtype == ember.float32 and p.float().batch_sizes is batch_sizes
    q = R.PackedSequence(data, batch_sizes, ember.tensor(np.array([1, 0])))
    np.testing.assert_array_equal(q.unsorted_indices.numpy(), [1, 0])
    assert R.PackedSequence((data, batch_sizes)).data is data


def test_packing_errors():
    x = ember.zeros(4, 3, 2)
    with pytest.raises(ember.ShapeError, match="decreasing order"):
        R.pack_padded_sequence(x, [2, 4, 1])
    with pytest.raises(ember.ShapeError, match="greater than 0"):
        R.pack_padded_sequence(x, [4, 2, 0])
    with pytest.raises(ember.ShapeError, match="expected 3 lengths"):
        R.pack_padded_sequence(x, [4, 2])
    with pytest.raises(ember.ShapeError, match="longer than"):
        R.pack_padded_sequence(x, [5, 2, 1])
    with pytest.raises(ValueError, match="total_length"):
        R.pad_packed_sequence(R.pack_padded_sequence(x, [4, 2, 1]), total_length=3)
    with pytest.raises(ValueError, match="padding_side"):
        R.pad_sequence([x[0]], padding_side="middle")


# ---------------------------------------------------------------- recurrent layers on packs

LAYERS = [
    ("RNN", lambda n: n.RNN(3, 4), None),
    ("LSTM/2layer-bidir", lambda n: n.LSTM(3, 4, num_layers=2, bidirectional=True), None),
    (
        "LSTM/proj-bidir-h0c0",
        lambda n: n.LSTM(3, 5, proj_size=2, bidirectional=True),
        [(2, 4, 2), (2, 4, 5)],
    ),
    ("GRU/bidir-h0", lambda n: n.GRU(3, 4, bidirectional=True), [(2, 4, 4)]),
    ("GRU/batchfirst-ignored", lambda n: n.GRU(3, 4, batch_first=True), None),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("lengths,enforce_sorted", [([5, 3, 3, 1], True), ([2, 5, 1, 3], False)])
@pytest.mark.parametrize("case", LAYERS, ids=[c[0] for c in LAYERS])
def test_recurrent_layer_on_packed_sequence_matches_torch(case, lengths, enforce_sorted, dtype):
    _, make, state_shapes = case
    states = [randn(*s) for s in state_shapes or ()]

    def call(m, x, *h):
        ours = isinstance(m, nn.Module)
        pack = R.pack_padded_sequence if ours else TR.pack_padded_sequence
        packed = pack(x, lengths, enforce_sorted=enforce_sorted)
        if not h:
            return m(packed)
        return m(packed, tuple(h) if len(h) == 2 else h[0])

    outs = compare_module(make(nn), make(tnn), [randn(5, 4, 3), *states], dtype=dtype, call=call)
    assert outs[1].dtype == ember.int64  # the output's batch_sizes


def test_captured_packed_lstm_matches_eager_and_torch():
    e, t = nn.LSTM(3, 4, bidirectional=True).double(), tnn.LSTM(3, 4, bidirectional=True).double()
    copy_weights(e, t)
    lengths = [2, 5, 1, 3]
    x = randn(5, 4, 3)
    c = randn(sum(lengths), 8)

    def loss(x):
        out, (h, _) = e(R.pack_padded_sequence(x, lengths, enforce_sorted=False))
        return (out.data * ember.tensor(c)).sum() + (h * h).sum()

    with ember.no_grad():
        graph = ember.trace(loss, ember.tensor(x), opt_level=0).graph
    # each direction one whole-layer op (nn/rnn.py's whole_layer_packed), no step loop
    assert str(graph).count("= lstm_layer(") == 2 and "scan(" not in str(graph)
    value, grad = ember.function(ember.value_and_grad(loss))(ember.tensor(x))
    tx = torch.tensor(x, requires_grad=True)
    out, (h, _) = t(TR.pack_padded_sequence(tx, lengths, enforce_sorted=False))
    t_loss = (out.data * torch.tensor(c)).sum() + (h * h).sum()
    t_loss.backward()
    np.testing.assert_allclose(value.item(), t_loss.item(), rtol=1e-12)
    np.testing.assert_allclose(
        grad.detach().numpy(), tx.grad.detach().numpy(), rtol=1e-9, atol=1e-12
    )
    eager = ember.tensor(x, requires_grad=True)
    loss(eager).backward()
    np.testing.assert_allclose(eager.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_traced_lengths_argument_is_refused_and_computed_lengths_too():
    def pack(x, lengths):
        return R.pack_padded_sequence(x, lengths).data

    # ember.trace has no key to specialize on the lengths' value
    with pytest.raises(ember.errors.NeedsArgumentValue, match="ember.trace cannot"):
        ember.trace(pack, ember.zeros(3, 2, 1), ember.tensor(np.array([3, 2])))
    with pytest.raises(ember.errors.TraceError, match="lengths of a traced tensor"):
        ember.function(lambda x, n: R.pack_padded_sequence(x, n + 1).data)(
            ember.zeros(3, 2, 1), ember.tensor(np.array([2, 1]))
        )


def test_lengths_argument_of_a_captured_step_specializes_on_its_value():
    e, t = nn.LSTM(3, 4).double(), tnn.LSTM(3, 4).double()
    copy_weights(e, t)
    opt = ember.optim.SGD(e.parameters(), lr=0.1)
    t_opt = torch.optim.SGD(t.parameters(), lr=0.1)

    def step(lib, m, o, x, lengths):
        packed = lib.nn.utils.rnn.pack_padded_sequence(x, lengths, True, enforce_sorted=False)
        out, (h, _) = m(packed)
        padded, back = lib.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        loss = padded.pow(2).sum() + h.sum()
        o.zero_grad()
        loss.backward()
        o.step()
        return loss, back

    f = ember.function(lambda x, n: step(ember, e, opt, x, n))
    for lengths in ([3, 5, 2], [3, 5, 2], [4, 1, 5], [3, 5, 2]):
        x = randn(3, 5, 3)
        loss, back = f(ember.tensor(x), ember.tensor(np.array(lengths)))
        t_loss, t_back = step(torch, t, t_opt, torch.tensor(x), torch.tensor(lengths))
        np.testing.assert_allclose(loss.item(), t_loss.item(), rtol=1e-10)
        np.testing.assert_array_equal(back.numpy(), t_back.numpy())
    np.testing.assert_allclose(e.weight_hh_l0.detach().numpy(), t.weight_hh_l0.detach().numpy())
    assert f.stats.traces == 3 and f.stats.hits == 1  # (the first: no .grad yet)
    assert "the value of argument n changed from [3, 5, 2] to [4, 1, 5]" in str(f.stats)


def test_captured_function_returns_a_packed_sequence():
    gru = nn.GRU(3, 4).double()
    x = ember.tensor(randn(5, 3, 3))

    def run(x):
        return gru(R.pack_padded_sequence(x, [2, 5, 3], enforce_sorted=False))

    (out, h), (want, want_h) = ember.function(run)(x), run(x)
    assert isinstance(out, R.PackedSequence)
    for name in ("data", "batch_sizes", "sorted_indices", "unsorted_indices"):
        np.testing.assert_allclose(
            getattr(out, name).detach().numpy(), getattr(want, name).detach().numpy()
        )
    np.testing.assert_allclose(h.detach().numpy(), want_h.detach().numpy())


def test_a_packed_sequence_argument_to_a_captured_function():
    gru = nn.GRU(3, 4).double()
    packed = R.pack_padded_sequence(ember.tensor(randn(5, 3, 3)), [2, 5, 3], False, False)
    f = ember.function(lambda p: gru(p)[1])
    np.testing.assert_allclose(f(packed).detach().numpy(), gru(packed)[1].detach().numpy())
    np.testing.assert_allclose(f(packed).detach().numpy(), gru(packed)[1].detach().numpy())
    assert f.stats.traces == 1
