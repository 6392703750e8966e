"""Single-step recurrent cells: `RNNCell`, `LSTMCell`, `GRUCell`, with PyTorch's parameter
names (``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``), gate orders and initialisation.
They share the step function of the full layers (``rnn.rnn_step``); an RNN, LSTM or GRU cell in
float32/float64 is the full layers' fused op over one step (``rnn.whole_layer``): one kernel
for the gates forward, one backward."""

from __future__ import annotations

import math

from ..errors import ArgumentError, ArgumentTypeError
from ..ops import api as E
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import new_parameter
from .rnn import _check_input, _check_state, rnn_step, whole_layer, whole_layer_applies


class RNNCellBase(Module):
    _mode = ""
    _gates = 1

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool, device=None, dtype=None
    ) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        gate_size = self._gates * hidden_size
        self.weight_ih = new_parameter((gate_size, input_size), device, dtype)
        self.weight_hh = new_parameter((gate_size, hidden_size), device, dtype)
        if bias:
            self.bias_ih = new_parameter((gate_size,), device, dtype)
            self.bias_hh = new_parameter((gate_size,), device, dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _step(self, input: Tensor, states: list) -> tuple:
        """Validate, add the batch dimension if missing, run one step, remove it again."""
        op = type(self).__name__
        _check_input(op, input, self.input_size, 2)
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        n = x.shape[0]
        full = []
        for state, what in zip(states, ("hx", "cx")):
            if state is None:
                full.append(E.zeros((n, self.hidden_size), dtype=x.dtype))
                continue
            expected = (n, self.hidden_size) if batched else (self.hidden_size,)
            _check_state(op, state, expected, what)
            full.append(state if batched else state.unsqueeze(0))
        if whole_layer_applies(self._mode, x, self.parameters()):
            weights = (self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
            _, result = whole_layer(self._mode, x.unsqueeze(0), tuple(full), weights, False)
            return result if batched else tuple(s.squeeze(0) for s in result)
        x_proj = F.linear(x, self.weight_ih, self.bias_ih)
        result = rnn_step(self._mode, x_proj, tuple(full), self.weight_hh, self.bias_hh)
        return result if batched else tuple(s.squeeze(0) for s in result)


class RNNCell(RNNCellBase):
    """``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device=None,
        dtype=None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ArgumentError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    @property
    def _mode(self) -> str:
        return "RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU"

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step(input, [hx])[0]


class LSTMCell(RNNCellBase):
    """One LSTM step; ``forward(input, (h, c))`` returns ``(h', c')``."""

    _mode = "LSTM"
    _gates = 4

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None
    ) -> None:
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def forward(self, input: Tensor, hx: tuple | None = None) -> tuple:
        states = [None, None] if hx is None else list(hx)
        if len(states) != 2:
            raise ArgumentTypeError("LSTMCell: hx must be a tuple (h, c)")
        return self._step(input, states)


class GRUCell(RNNCellBase):
    """One GRU step; returns ``h'``."""

    _mode = "GRU"
    _gates = 3

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None
    ) -> None:
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step(input, [hx])[0]
