"""RNN / LSTM / GRU layers and cells against PyTorch with the same weights (dropout 0):
outputs, final states, input, initial-state and parameter gradients, names and layouts."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn

from .compare import compare_module, same_state_layout, torch

tnn = torch.nn
r = np.random.default_rng(1)


def randn(*shape):
    return r.standard_normal(shape)


LAYERS = [
    ("RNN", lambda n: n.RNN(3, 4), (randn(5, 2, 3),)),
    ("RNN/relu-2layer", lambda n: n.RNN(3, 4, 2, nonlinearity="relu"), (randn(4, 2, 3),)),
    (
        "RNN/bidirectional-h0",
        lambda n: n.RNN(3, 4, bidirectional=True),
        (
            randn(4, 2, 3),
            randn(2, 2, 4),
        ),
    ),
    ("LSTM", lambda n: n.LSTM(3, 5), (randn(6, 2, 3),)),
    (
        "LSTM/2layer-bidir-batchfirst",
        lambda n: n.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True),
        (randn(2, 5, 3),),
    ),
    ("LSTM/nobias", lambda n: n.LSTM(3, 4, bias=False), (randn(4, 2, 3),)),
    ("LSTM/proj", lambda n: n.LSTM(3, 5, num_layers=2, proj_size=2), (randn(4, 2, 3),)),
    ("LSTM/unbatched", lambda n: n.LSTM(3, 4), (randn(5, 3),)),
    ("GRU", lambda n: n.GRU(3, 4), (randn(5, 2, 3),)),
    (
        "GRU/2layer-bidir-h0",
        lambda n: n.GRU(3, 4, num_layers=2, bidirectional=True),
        (randn(4, 3, 3), randn(4, 3, 4)),
    ),
    ("GRU/batchfirst", lambda n: n.GRU(2, 3, batch_first=True), (randn(3, 4, 2),)),
    ("RNNCell", lambda n: n.RNNCell(3, 4), (randn(2, 3), randn(2, 4))),
    (
        "RNNCell/relu-nobias",
        lambda n: n.RNNCell(3, 4, bias=False, nonlinearity="relu"),
        (randn(2, 3),),
    ),
    ("GRUCell", lambda n: n.GRUCell(3, 4), (randn(2, 3), randn(2, 4))),
    ("GRUCell/unbatched", lambda n: n.GRUCell(3, 4), (randn(3),)),
    ("LSTMCell", lambda n: n.LSTMCell(3, 4), (randn(2, 3),)),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", LAYERS, ids=[c[0] for c in LAYERS])
def test_recurrent_layer_matches_torch(case, dtype):
    _, make, inputs = case
    compare_module(make(nn), make(tnn), list(inputs), dtype=dtype)


@pytest.mark.parametrize("case", LAYERS, ids=[c[0] for c in LAYERS])
def test_recurrent_layout_and_repr(case):
    _, make, _ = case
    e, t = make(nn), make(tnn)
    same_state_layout(e, t)
    assert repr(e) == repr(t)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_lstm_with_initial_states(dtype):
    e, t = nn.LSTM(3, 4, num_layers=2), tnn.LSTM(3, 4, num_layers=2)
    x, h0, c0 = randn(5, 2, 3), randn(2, 2, 4), randn(2, 2, 4)
    compare_module(e, t, [x, h0, c0], dtype=dtype, call=lambda m, a, h, c: m(a, (h, c)))


def test_lstm_cell_with_state():
    e, t = nn.LSTMCell(3, 4), tnn.LSTMCell(3, 4)
    compare_module(
        e, t, [randn(2, 3), randn(2, 4), randn(2, 4)], call=lambda m, a, h, c: m(a, (h, c))
    )


def test_rnn_dropout_between_layers_only_in_training():
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = ember.randn(5, 2, 3)
    lstm.eval()
    first = lstm(x)[0].detach().numpy()
    np.testing.assert_array_equal(lstm(x)[0].detach().numpy(), first)
    lstm.train()
    ember.manual_seed(0)
    a = lstm(x)[0].detach().numpy()
    ember.manual_seed(1)
    b = lstm(x)[0].detach().numpy()
    assert not np.allclose(a, b)  # dropout between the layers changes the output
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.GRU(2, 2, dropout=0.2)


def test_rnn_errors():
    gru = nn.GRU(3, 4)
    with pytest.raises(ember.ShapeError, match="last dimension 3"):
        gru(ember.zeros(5, 2, 2))
    with pytest.raises(ember.ShapeError, match="h_0"):
        gru(ember.zeros(5, 2, 3), ember.zeros(1, 3, 4))
    with pytest.raises(TypeError, match="PackedSequence"):
        gru([1, 2, 3])
    with pytest.raises(ValueError):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError):
        nn.LSTM(3, 4, proj_size=4)


def test_all_weights_and_flatten_parameters():
    lstm = nn.LSTM(2, 3, num_layers=2, bidirectional=True)
    lstm.flatten_parameters()
    names = [[w.shape for w in layer] for layer in lstm.all_weights]
    assert len(names) == 4 and names[0] == [(12, 2), (12, 3), (12,), (12,)]
    assert names[2][0] == (12, 6)
