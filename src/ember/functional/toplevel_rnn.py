"""PyTorch's functional recurrent layers with flat weights, as exported and traced code calls
them: ``torch.lstm``, ``torch.gru``, ``torch.rnn_tanh`` and ``torch.rnn_relu`` (the padded
overload: ``input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
batch_first``), written over toplevel_native.py's cells, one step at a time in ember ops."""

from __future__ import annotations

from ..errors import ArgumentError, ShapeError
from ..ops import api as E
from ..ops._registry import FUNCTIONAL, PUBLIC, export
from ..ops._util import fmt_shape
from ..ops.promotion import to_tensor


def _layers(
    op,
    input,
    hx,
    params,
    has_biases,
    num_layers,
    dropout,
    train,
    bidirectional,
    batch_first,
    step,
    pair,
):
    if isinstance(has_biases, (list, tuple)):  # (data, batch_sizes, hx, params, ...)
        raise ArgumentError(
            "the packed-sequence overload (data, batch_sizes, hx, params, ...) is not "
            "supported; pass the padded input",
            op=op,
        )
    x = to_tensor(input)
    if x.ndim != 3 and (pair or op == "gru" or x.ndim != 2):
        # (torch.lstm and torch.gru take batched input only: nn.LSTM / nn.GRU add the batch
        # dimension themselves; torch.rnn_tanh / rnn_relu also run a 2-d one)
        raise ShapeError(
            f"input must be 3-d (time, batch, features), got shape {fmt_shape(x.shape)}", op=op
        )
    unbatched = x.ndim == 2
    if unbatched:
        x = E.unsqueeze(x, 1)
    elif batch_first:
        x = E.transpose(x, 0, 1)  # (time, batch, features)
    directions = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    params = list(params)
    if len(params) != num_layers * directions * per:
        raise ShapeError(
            f"expected {num_layers * directions * per} parameters ({num_layers} layers, "
            f"{directions} directions, {per} each), got {len(params)}",
            op=op,
        )
    states = [to_tensor(h) for h in (hx if pair else (hx,))]
    if unbatched:
        states = [E.unsqueeze(h, 1) for h in states]
    finals = [[] for _ in states]
    for layer in range(num_layers):
        outputs = []
        for d in range(directions):
            k = (layer * directions + d) * per
            weights = params[k : k + per]
            w_ih, w_hh = weights[0], weights[1]
            b_ih, b_hh = (weights[2], weights[3]) if has_biases else (None, None)
            state = [h[layer * directions + d] for h in states]
            steps = range(x.shape[0] - 1, -1, -1) if d == 1 else range(x.shape[0])
            seq = [None] * x.shape[0]
            for t in steps:
                state = step(x[t], state, w_ih, w_hh, b_ih, b_hh)
                seq[t] = state[0]
            outputs.append(E.stack(seq, 0))
            for f, s in zip(finals, state):
                f.append(s)
        x = outputs[0] if directions == 1 else E.cat(outputs, -1)
        if dropout and train and layer < num_layers - 1:
            x = FUNCTIONAL["dropout"](x, dropout, True)
    out = x
    finals = [E.stack(f, 0) for f in finals]
    if unbatched:
        out = E.squeeze(out, 1)
        finals = [E.squeeze(f, 1) for f in finals]
    elif batch_first:
        out = E.transpose(out, 0, 1)
    return (out, *finals)


def _lstm_step(x, state, w_ih, w_hh, b_ih, b_hh):
    return PUBLIC["lstm_cell"](x, tuple(state), w_ih, w_hh, b_ih, b_hh)


def _single(name):
    cell = PUBLIC[name]

    def step(x, state, w_ih, w_hh, b_ih, b_hh):
        return (cell(x, state[0], w_ih, w_hh, b_ih, b_hh),)

    return step


@export
def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """``torch.lstm``: ``(output, h_n, c_n)`` of a stacked (bidirectional) LSTM with flat
    weights ``params`` (per layer and direction: w_ih, w_hh[, b_ih, b_hh], as nn.LSTM's
    ``_flat_weights`` without projections), ``hx = (h_0, c_0)``."""
    return _layers(
        "lstm",
        input,
        hx,
        params,
        has_biases,
        num_layers,
        dropout,
        train,
        bidirectional,
        batch_first,
        _lstm_step,
        pair=True,
    )


@export
def gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """``torch.gru``: ``(output, h_n)`` of a stacked (bidirectional) GRU with flat weights."""
    return _layers(
        "gru",
        input,
        hx,
        params,
        has_biases,
        num_layers,
        dropout,
        train,
        bidirectional,
        batch_first,
        _single("gru_cell"),
        pair=False,
    )


@export
def rnn_tanh(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """``torch.rnn_tanh``: ``(output, h_n)`` of a stacked Elman RNN (tanh), flat weights."""
    return _layers(
        "rnn_tanh",
        input,
        hx,
        params,
        has_biases,
        num_layers,
        dropout,
        train,
        bidirectional,
        batch_first,
        _single("rnn_tanh_cell"),
        pair=False,
    )


@export
def rnn_relu(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """``torch.rnn_relu``: ``(output, h_n)`` of a stacked Elman RNN (relu), flat weights."""
    return _layers(
        "rnn_relu",
        input,
        hx,
        params,
        has_biases,
        num_layers,
        dropout,
        train,
        bidirectional,
        batch_first,
        _single("rnn_relu_cell"),
        pair=False,
    )
