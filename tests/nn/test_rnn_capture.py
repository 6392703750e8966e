"""RNN / LSTM / GRU captured by ``ember.function`` and ``ember.trace``: one node per layer and
direction (a whole-layer ``rnn_layer`` / ``lstm_layer`` / ``gru_layer`` op, or a ``scan`` for
projected LSTMs; the graph does not grow with the sequence), and the captured forward,
input, initial-state and parameter gradients equal eager ember's and PyTorch's (float64, torch's
state_dict copied in); dropout between layers draws what eager draws under the same seed."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn

from .compare import copy_weights, torch

tnn = torch.nn
r = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _seed_torch():
    torch.manual_seed(0)


def randn(*shape):
    return r.standard_normal(shape)


# name, constructor (ember.nn or torch.nn), input shape, initial-state shapes (None: absent)
CASES = [
    ("RNN", lambda n: n.RNN(3, 4), (5, 2, 3), None),
    ("RNN/relu-2layer-h0", lambda n: n.RNN(3, 4, 2, nonlinearity="relu"), (4, 2, 3), [(2, 2, 4)]),
    (
        "LSTM/2layer-bidir-batchfirst",
        lambda n: n.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True),
        (2, 5, 3),
        None,
    ),
    (
        "LSTM/proj-bidir-h0c0",
        lambda n: n.LSTM(3, 5, num_layers=2, proj_size=2, bidirectional=True),
        (4, 3, 3),
        [(4, 3, 2), (4, 3, 5)],
    ),
    ("LSTM/nobias-unbatched", lambda n: n.LSTM(3, 4, bias=False), (6, 3), None),
    (
        "GRU/2layer-bidir-h0",
        lambda n: n.GRU(3, 4, num_layers=2, bidirectional=True),
        (4, 3, 3),
        [(4, 3, 4)],
    ),
    ("GRU/batchfirst", lambda n: n.GRU(2, 3, batch_first=True), (3, 4, 2), None),
]


def _states(module, arrays, lib):
    if arrays is None:
        return ()
    tensors = tuple(lib(a) for a in arrays)
    return (tensors,) if isinstance(module, (nn.LSTM, tnn.LSTM)) else tensors


def _objective(out, hidden, weights):
    """sum(output * w0) + sum(h_n * w1) [+ sum(c_n * w2)] with fixed weights."""
    hidden = hidden if isinstance(hidden, tuple) else (hidden,)
    total = (out * weights[0]).sum()
    for h, w in zip(hidden, weights[1:]):
        total = total + (h * w).sum()
    return total


def _torch_reference(t, x, states, weights_np):
    tx = torch.tensor(x, requires_grad=True)
    th = [torch.tensor(s, requires_grad=True) for s in states or ()]
    out, hidden = t(tx, *_states(t, th, lambda a: a) if th else ())
    if isinstance(t, tnn.LSTM) and th:
        out, hidden = t(tx, tuple(th))
    loss = _objective(out, hidden, [torch.tensor(w) for w in weights_np])
    loss.backward()
    params = [p.grad.numpy() for p in t.parameters()]
    return loss.item(), tx.grad.numpy(), [h.grad.numpy() for h in th], params


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_captured_recurrent_layer_matches_eager_and_torch(case):
    _, make, shape, state_shapes = case
    e, t = make(nn).double(), make(tnn).double()
    copy_weights(e, t)
    x = randn(*shape)
    states = None if state_shapes is None else [randn(*s) for s in state_shapes]
    with torch.no_grad():
        probe = t(torch.tensor(x))
    out_shape = tuple(probe[0].shape)
    hidden = probe[1] if isinstance(probe[1], tuple) else (probe[1],)
    weights_np = [randn(*out_shape)] + [randn(*h.shape) for h in hidden]
    t_loss, t_gx, t_gh, t_params = _torch_reference(t, x, states, weights_np)
    weights = [ember.tensor(w) for w in weights_np]
    is_lstm = isinstance(e, nn.LSTM)

    def loss(x, *h):
        hx = (tuple(h) if is_lstm else h[0]) if h else None
        out, hidden = e(x, hx)
        return _objective(out, hidden, weights)

    args = [ember.tensor(x)] + [ember.tensor(s) for s in states or ()]
    # the captured graph (before O3 unrolls short loops): one loop per layer and direction
    with ember.no_grad():
        graph = ember.trace(loss, *args, opt_level=0).graph
    text = str(graph)
    loops = sum(text.count(f"= {op}(") for op in ("scan", "rnn_layer", "lstm_layer", "gru_layer"))
    assert loops == e.num_layers * (2 if e.bidirectional else 1)
    # forward and input / initial-state gradients captured
    argnums = tuple(range(len(args)))
    captured = ember.function(ember.value_and_grad(loss, argnums=argnums))
    value, grads = captured(*args)
    np.testing.assert_allclose(value.item(), t_loss, rtol=1e-12)
    for got, want in zip(grads, [t_gx, *t_gh]):
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-9, atol=1e-12)

    # parameter gradients of a captured training step (backward inside the function)
    @ember.function
    def step(*a):
        value = loss(*a)
        value.backward()
        return value

    e.zero_grad(set_to_none=True)
    np.testing.assert_allclose(step(*args).item(), t_loss, rtol=1e-12)
    captured_grads = [p.grad.numpy().copy() for p in e.parameters()]
    for got, want in zip(captured_grads, t_params):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    # and eager agrees with both
    e.zero_grad(set_to_none=True)
    eager_args = [ember.tensor(a.numpy(), requires_grad=True) for a in args]
    eager = loss(*eager_args)
    eager.backward()
    np.testing.assert_allclose(eager.item(), t_loss, rtol=1e-12)
    for a, want in zip(eager_args, [t_gx, *t_gh]):
        np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-9, atol=1e-12)
    for p, got in zip(e.parameters(), captured_grads):
        np.testing.assert_allclose(p.grad.numpy(), got, rtol=1e-9, atol=1e-12)


def test_graph_size_does_not_grow_with_the_sequence():
    """Past O3's unrolling limit (16 trips) the optimized graph keeps its loops."""
    lstm = nn.LSTM(3, 4, num_layers=2).double()

    def run(x):
        return lstm(x)[0].sum()

    with ember.no_grad():
        short = ember.trace(run, ember.randn(20, 2, 3, dtype=ember.float64)).graph
        long = ember.trace(run, ember.randn(40, 2, 3, dtype=ember.float64)).graph
    assert len(short.nodes) == len(long.nodes)
    assert str(long).count("= lstm_layer(") == 2
    projected = nn.LSTM(3, 4, num_layers=2, proj_size=2).double()
    with ember.no_grad():
        short = ember.trace(lambda x: projected(x)[0].sum(), ember.randn(20, 2, 3).double()).graph
        long = ember.trace(lambda x: projected(x)[0].sum(), ember.randn(40, 2, 3).double()).graph
    assert len(short.nodes) == len(long.nodes)
    assert str(long).count("= scan(") == 2


def test_trace_executors_agree_with_eager():
    gru = nn.GRU(3, 4, bidirectional=True).double()
    x = ember.tensor(randn(5, 2, 3))
    expected = gru(x)[0].detach().numpy()
    for executor in ("codegen", "interpreter"):
        with ember.no_grad():
            traced = ember.trace(lambda a: gru(a)[0], x, executor=executor)
        np.testing.assert_allclose(traced(x).numpy(), expected, rtol=1e-12, atol=1e-14)


def test_captured_dropout_between_layers_draws_what_eager_draws():
    gru = nn.GRU(3, 4, num_layers=3, dropout=0.5).double().train()
    x = ember.tensor(randn(6, 2, 3))
    captured = ember.function(lambda a: gru(a)[0])
    ember.manual_seed(0)
    a = captured(x).detach().numpy()
    ember.manual_seed(0)
    b = gru(x)[0].detach().numpy()
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    ember.manual_seed(1)
    assert not np.allclose(captured(x).detach().numpy(), a)  # the mask is drawn at each call
    gru.eval()
    no_dropout = ember.function(lambda a: gru(a)[0])(x).detach().numpy()
    np.testing.assert_allclose(no_dropout, gru(x)[0].detach().numpy(), rtol=1e-12, atol=1e-14)


def test_cells_capture():
    cell = nn.LSTMCell(3, 4).double()
    x, h, c = (ember.tensor(randn(2, n)) for n in (3, 4, 4))

    def unrolled(x, h, c):
        for _ in range(3):
            h, c = cell(x, (h, c))
        return (h * c).sum()

    np.testing.assert_allclose(
        ember.function(unrolled)(x, h, c).item(), unrolled(x, h, c).item(), rtol=1e-12
    )


def test_one_captured_graph_serves_every_sequence_length():
    lstm = nn.LSTM(3, 4, bidirectional=True).double()
    spec = [ember.TensorSpec((None, 2, 3), ember.float64)]
    captured = ember.function(lambda x: lstm(x)[0].sum(), input_signature=spec)
    for steps in (5, 30):
        x = ember.tensor(randn(steps, 2, 3))
        np.testing.assert_allclose(captured(x).item(), lstm(x)[0].sum().item(), rtol=1e-12)
    assert captured.stats.traces == 1
