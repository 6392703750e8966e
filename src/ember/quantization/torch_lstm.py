"""PyTorch's dynamic quantized LSTM (``torch.ao.nn.quantized.dynamic.LSTM``), unidirectional,
any number of layers: each layer's W_ih and W_hh qint8 per-tensor symmetric weights; the
layer's whole input sequence goes through the dynamic Linear once (its range over every
step), each step's hidden state through W_hh's (its own range), ``gates = hh + ih`` in float32,
then the float LSTM cell (PyTorch's quantized_lstm with its FullLayer)."""

from __future__ import annotations

import numpy as np

from ..errors import QuantizationError
from ..nn import Module
from ..tensor import Tensor
from . import torch_fbgemm as fbgemm

_F = np.float32


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return (_F(1) / (_F(1) + np.exp(-x))).astype(_F)


class LSTM(Module):
    """See the module docstring; ``forward(x, (h0, c0)=None)`` returns ``(out, (h_n, c_n))``."""

    def __init__(self, lstm, quantize_weight):
        from .torch_modules import _weight_parts

        super().__init__()
        if lstm.bidirectional or getattr(lstm, "proj_size", 0):
            raise QuantizationError("ember's dynamic quantized LSTM is unidirectional, without "
                                    "projections", op="quantize_dynamic")  # fmt: skip
        self.batch_first, self.num_layers = lstm.batch_first, lstm.num_layers
        self.hidden_size = lstm.hidden_size
        self._layers = []
        for k in range(lstm.num_layers):
            parts = []
            for kind in ("ih", "hh"):
                w = getattr(lstm, f"weight_{kind}_l{k}").detach().numpy().astype(_F)
                b = getattr(lstm, f"bias_{kind}_l{k}", None) if lstm.bias else None
                qw = quantize_weight(w)
                ints, scales, _ = _weight_parts(qw)
                bias = None if b is None else b.detach().numpy()
                parts.append(fbgemm.DynamicWeights(ints, scales, bias))
                setattr(self, f"_qweight_{kind}_l{k}", qw)
            self._layers.append(parts)

    def forward(self, x, hx=None):
        a = np.asarray(x.detach().numpy(), _F)
        if self.batch_first:
            a = a.swapaxes(0, 1)
        steps, batch = a.shape[:2]
        zeros = np.zeros((self.num_layers, batch, self.hidden_size), _F)
        h0, c0 = (zeros, zeros) if hx is None else (np.asarray(t.detach().numpy(), _F) for t in hx)
        hs, cs = [], []
        for k, (ih, hh) in enumerate(self._layers):
            pre = ih(a)  # (every step at once, as PyTorch's FullLayer on the CPU)
            h, c = h0[k], c0[k]
            outs = []
            for t in range(steps):
                gates = hh(h) + pre[t]
                i, f, g, o = np.split(gates, 4, axis=-1)
                c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
                h = _sigmoid(o) * np.tanh(c)
                outs.append(h)
            a = np.stack(outs)
            hs.append(h)
            cs.append(c)
        out = a.swapaxes(0, 1) if self.batch_first else a
        return Tensor(np.ascontiguousarray(out)), (Tensor(np.stack(hs)), Tensor(np.stack(cs)))
