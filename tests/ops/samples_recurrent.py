"""Conformance samples for ops/recurrent.py and ops/recurrent_elman.py: ``lstm_layer``,
``gru_layer`` and ``rnn_layer`` (tanh, relu) over a few steps,
forward and reversed, with one step and with none, every output (the saved cell states and
gate activations included, so their cotangents check the VJPs' exactness), against a
composition of PyTorch ops written step by step (torch's LSTM/GRU formulas). Their gradients
run the ``*_grad`` ops, checked by finite differences and against torch's autograd."""

from ember.ops import apply
from ember.ops.recurrent import GRU_LAYER, LSTM_LAYER
from ember.ops.recurrent_elman import RNN_LAYER

from .harness import Sample, rng

r = rng(20)


def _lstm_inputs(steps, rows, hidden):
    return (
        r.standard_normal((steps, rows, 4 * hidden)),
        r.standard_normal((rows, hidden)) * 0.5,
        r.standard_normal((rows, hidden)) * 0.5,
        r.standard_normal((4 * hidden, hidden)) * 0.5,
    )


def _gru_inputs(steps, rows, hidden):
    return (
        r.standard_normal((steps, rows, 3 * hidden)),
        r.standard_normal((rows, hidden)) * 0.5,
        r.standard_normal((3 * hidden, hidden)) * 0.5,
        r.standard_normal(3 * hidden) * 0.5,
    )


def _order(steps, reverse):
    return range(steps - 1, -1, -1) if reverse else range(steps)


def torch_lstm(reverse):
    def run(xg, h, c, w_hh):
        import torch

        hidden = h.shape[1]
        ys, cs, acts = [None] * xg.shape[0], [None] * xg.shape[0], [None] * xg.shape[0]
        for t in _order(xg.shape[0], reverse):
            i, f, g, o = (xg[t] + h @ w_hh.T).split(hidden, 1)
            i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
            c = f * c + i * g
            h = o * torch.tanh(c)
            ys[t], cs[t], acts[t] = h, c, torch.cat([i, f, g, o], 1)
        if not ys:  # (empty outputs that still hang off xg in the autograd graph)
            empty = xg[..., :hidden] * 1
            return empty, h.clone(), c.clone(), empty * 1, xg * 1
        return torch.stack(ys), h, c, torch.stack(cs), torch.stack(acts)

    return run


def torch_gru(reverse):
    def run(xg, h, w_hh, b_hh):
        import torch

        hidden = h.shape[1]
        ys, acts = [None] * xg.shape[0], [None] * xg.shape[0]
        for t in _order(xg.shape[0], reverse):
            x_r, x_z, x_n = xg[t].split(hidden, 1)
            h_r, h_z, h_n = (h @ w_hh.T + b_hh).split(hidden, 1)
            rr, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
            n = torch.tanh(x_n + rr * h_n)
            h = (1 - z) * n + z * h
            ys[t], acts[t] = h, torch.cat([rr, z, n, h_n], 1)
        if not ys:  # (empty outputs that still hang off xg in the autograd graph)
            return xg[..., :hidden] * 1, h.clone(), torch.cat([xg, xg[..., :hidden]], 2)
        return torch.stack(ys), h, torch.stack(acts)

    return run


def _lstm(name, steps, rows, hidden, reverse):
    return Sample(
        f"lstm_layer/{name}",
        lambda *a: apply(LSTM_LAYER, *a, reverse=reverse),
        _lstm_inputs(steps, rows, hidden),
        torch_fn=torch_lstm(reverse),
    )


def _gru(name, steps, rows, hidden, reverse):
    return Sample(
        f"gru_layer/{name}",
        lambda *a: apply(GRU_LAYER, *a, reverse=reverse),
        _gru_inputs(steps, rows, hidden),
        torch_fn=torch_gru(reverse),
    )


def torch_elman(reverse, relu):
    def run(xg, h, w_hh):
        import torch

        ys = [None] * xg.shape[0]
        for t in _order(xg.shape[0], reverse):
            pre = xg[t] + h @ w_hh.T
            h = torch.relu(pre) if relu else torch.tanh(pre)
            ys[t] = h
        if not ys:  # (empty outputs that still hang off xg in the autograd graph)
            return xg * 1, h.clone()
        return torch.stack(ys), h

    return run


def _elman(name, steps, rows, hidden, reverse, relu):
    return Sample(
        f"rnn_layer/{name}",
        lambda *a: apply(RNN_LAYER, *a, reverse=reverse, relu=relu),
        (
            r.standard_normal((steps, rows, hidden)),
            r.standard_normal((rows, hidden)) * 0.5,
            r.standard_normal((hidden, hidden)) * 0.5,
        ),
        torch_fn=torch_elman(reverse, relu),
    )


SAMPLES = [
    _lstm("forward", 4, 2, 3, False),
    _lstm("reverse", 3, 3, 2, True),
    _lstm("one-step", 1, 2, 2, False),
    Sample(
        "lstm_layer/no-steps",
        lambda *a: apply(LSTM_LAYER, *a, reverse=False),
        _lstm_inputs(0, 2, 3),
        torch_fn=torch_lstm(False),
    ),
    _gru("forward", 4, 2, 3, False),
    _gru("reverse", 3, 3, 2, True),
    _gru("one-step", 1, 1, 2, False),
    _elman("tanh", 4, 2, 3, False, False),
    _elman("relu-reverse", 3, 3, 2, True, True),
    _elman("no-steps", 0, 2, 3, False, False),
]
