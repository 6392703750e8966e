"""Recurrent layers: `RNN`, `LSTM` (with ``proj_size``), `GRU` and their cells, with PyTorch's
parameter names (``weight_ih_l0``, ``bias_hh_l1_reverse``, ...), gate orders (LSTM: input,
forget, cell, output; GRU: reset, update, new) and default initialisation U(-1/sqrt(H), 1/sqrt(H)).

The input projection of every step is one matmul up front; each step then adds the recurrent
projection. An RNN (tanh or relu), an LSTM without projection or a GRU, in float32/float64 and
packed or not, runs each layer and direction as one whole-layer op (ops/recurrent.py:
``lstm_layer`` / ``gru_layer``; ops/recurrent_elman.py: ``rnn_layer``; the time loop in C,
kernels/crnn.py), eagerly and in graphs: one node forward and one backward (backpropagation
through time inside the op), as PyTorch's fused RNNs do. Otherwise (projections, half
precision, or while a nested ``ember.grad`` records, whose
gradients may be differentiated again) the time loop is a Python loop eagerly (the tape
records each step) and, while a graph is captured (`ember.function`, `ember.trace`), one
``scan`` node whose body is one step (control/scan.py), so the graph's size does not grow with
the sequence and its gradient is the scan's reverse scan.

A `PackedSequence` input (nn/utils/rnn.py) runs as its padded batch in the caller's order:
through the whole-layer op with each sequence's final state read at its own last step and,
running backwards, each sequence's steps reversed in place (`whole_layer_packed`); in the step
loop with a mask: a sequence's state stops changing after its last step (and, running
backwards, starts changing at its last step). Both are what PyTorch's shrinking batch
computes; the output is packed again with the input's batch sizes and permutation.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .. import dtypes
from ..control.scan import scan
from ..errors import ArgumentError, ArgumentTypeError, ShapeError, user_stacklevel
from ..graph.builder import GraphBuilder
from ..ops import api as E
from ..ops._node_names import rename_node
from ..ops._registry import TensorBase, current_mode
from ..ops._util import fmt_shape
from ..ops.recurrent import gru_layer, lstm_layer, lstm_layer_cells
from ..ops.recurrent_elman import rnn_layer
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import new_parameter
from .utils.rnn import PackedSequence, pack_like, pad_packed_sequence

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
_WHOLE_LAYER_DTYPES = (dtypes.float32, dtypes.float64)


def rnn_step(mode: str, x_proj: Tensor, state: tuple, w_hh, b_hh, w_hr=None) -> tuple:
    """One time step: ``x_proj`` is ``x @ w_ih.T + b_ih``; ``state`` is (h,) or (h, c) for
    LSTM. Returns the new state."""
    h = state[0]
    h_proj = F.linear(h, w_hh, b_hh)
    if mode == "LSTM":
        i, f, g, o = (x_proj + h_proj).chunk(4, -1)
        c = F.sigmoid(f) * state[1] + F.sigmoid(i) * F.tanh(g)
        h = F.sigmoid(o) * F.tanh(c)
        if w_hr is not None:
            h = F.linear(h, w_hr)
        return h, c
    if mode == "GRU":
        x_r, x_z, x_n = x_proj.chunk(3, -1)
        h_r, h_z, h_n = h_proj.chunk(3, -1)
        r = F.sigmoid(x_r + h_r)
        z = F.sigmoid(x_z + h_z)
        n = F.tanh(x_n + r * h_n)
        return ((1.0 - z) * n + z * h,)
    pre = x_proj + h_proj
    return (F.tanh(pre) if mode == "RNN_TANH" else F.relu(pre),)


def whole_layer_applies(mode: str, x, parameters) -> bool:
    """Whether an RNN, LSTM or GRU runs as one ``rnn_layer`` / ``lstm_layer`` / ``gru_layer``
    op a layer and direction (ops/recurrent.py, ops/recurrent_elman.py; eagerly and in graphs):
    float32/float64 throughout, and not while a nested ``ember.grad`` records (the whole-layer
    backward has no VJP of its own, and that transform's gradients may be differentiated
    again: the step-by-step form can be)."""
    current = current_mode()
    return (
        mode in _GATES
        and not (isinstance(current, GraphBuilder) and current.nested_grads)
        and x.dtype in _WHOLE_LAYER_DTYPES
        and all(p.dtype == x.dtype for p in parameters)
    )


def whole_layer(mode: str, x, state: tuple, weights: tuple, reverse: bool) -> tuple:
    """(y, new state) of one RNN, LSTM or GRU layer and direction over x (T, B, input) as one op
    over the whole sequence: the input projection of every step is one product before it."""
    w_ih, w_hh, b_ih, b_hh = weights
    if mode == "LSTM":
        bias = None if b_ih is None else b_ih + b_hh
        y, h, c = lstm_layer(F.linear(x, w_ih, bias), state[0], state[1], w_hh, reverse)
        return y, (h, c)
    if mode != "GRU":  # the Elman RNN, tanh or relu
        bias = None if b_ih is None else b_ih + b_hh
        xg = F.linear(x, w_ih, bias)
        y, h = rnn_layer(xg, state[0], w_hh, reverse, relu=mode == "RNN_RELU")
        return y, (h,)
    if b_hh is None:
        b_hh = E.zeros((w_hh.shape[0],), dtype=x.dtype)
    y, h = gru_layer(F.linear(x, w_ih, b_ih), state[0], w_hh, b_hh, reverse)
    return y, (h,)


def whole_layer_packed(mode: str, x, state: tuple, weights: tuple, reverse: bool, lengths):
    """`whole_layer` over a packed batch's padded steps x (T, B, input), sequence b holding
    ``lengths[b]`` steps (a NumPy array): what PyTorch's shrinking batch computes, with the
    whole-layer op. Running forwards, a step never reads later ones, so the padding changes no
    output a sequence keeps, and its final state is its state at its own last step (LSTM: the
    op's cell state of every step, read there). Running backwards, each sequence's own steps
    are reversed in place (padding kept where it is), run forwards, and reversed back."""
    steps, batch = x.shape[0], x.shape[1]
    t = np.arange(steps)[:, None]
    order = np.where(t < lengths[None, :], lengths[None, :] - 1 - t, t)  # (its own inverse)

    def along_steps(values, rows):
        index = Tensor(np.ascontiguousarray(rows[:, :, None]))
        return E.gather(values, 0, E.broadcast_to(index, (rows.shape[0], batch, values.shape[-1])))

    if reverse:
        x = along_steps(x, order)
    w_ih, w_hh, b_ih, b_hh = weights
    if mode == "LSTM":
        bias = None if b_ih is None else b_ih + b_hh
        y, cells = lstm_layer_cells(F.linear(x, w_ih, bias), state[0], state[1], w_hh)
    elif mode == "GRU":
        if b_hh is None:
            b_hh = E.zeros((w_hh.shape[0],), dtype=x.dtype)
        y, _ = gru_layer(F.linear(x, w_ih, b_ih), state[0], w_hh, b_hh, False)
    else:
        bias = None if b_ih is None else b_ih + b_hh
        y, _ = rnn_layer(F.linear(x, w_ih, bias), state[0], w_hh, False, relu=mode == "RNN_RELU")
    last = (lengths - 1)[None, :]
    final = (along_steps(y, last)[0],)
    if mode == "LSTM":
        final += (along_steps(cells, last)[0],)
    return (along_steps(y, order) if reverse else y), final


def _keep_finished(running, new: tuple, old: tuple) -> tuple:
    """A packed batch's step: the new state where the sequence runs, the old one elsewhere."""
    return tuple(E.where(running, n, o) for n, o in zip(new, old))


def _check_input(op: str, input, size: int, batched_ndim: int) -> None:
    if not isinstance(input, TensorBase):
        raise ArgumentTypeError(
            f"{op}: expected a Tensor input (or, for RNN, LSTM and GRU, a PackedSequence), got "
            f"{type(input).__name__}"
        )
    if input.ndim not in (batched_ndim - 1, batched_ndim) or input.shape[-1] != size:
        raise ShapeError(
            f"expected input of {batched_ndim}-D (batched) or {batched_ndim - 1}-D (unbatched) "
            f"with last dimension {size}, got shape {fmt_shape(input.shape)}",
            op=op,
        )


def _check_state(op: str, state: Tensor, expected: tuple, what: str) -> None:
    if tuple(state.shape) != expected:
        raise ShapeError(
            f"expected {what} of shape {fmt_shape(expected)}, got {fmt_shape(state.shape)}",
            op=op,
        )


class RNNBase(Module):
    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if mode not in _GATES:
            raise ArgumentError(f"Unrecognized RNN mode: {mode}")
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Number):
            raise ArgumentError("dropout should be a number in range [0, 1]")
        if not 0 <= dropout <= 1:
            raise ArgumentError("dropout should be a number in range [0, 1]")
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}",
                stacklevel=user_stacklevel(),
            )
        if input_size <= 0 or hidden_size <= 0 or num_layers <= 0:
            raise ArgumentError("input_size, hidden_size and num_layers must be greater than zero")
        if proj_size < 0 or (proj_size and mode != "LSTM"):
            raise ArgumentError("proj_size must be zero, or positive for LSTM only")
        if proj_size >= hidden_size:
            raise ArgumentError("proj_size has to be smaller than hidden_size")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        out_size = proj_size or hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(directions):
                in_size = input_size if layer == 0 else out_size * directions
                shapes = [(gate_size, in_size), (gate_size, out_size)]
                names = ["weight_ih_l{}{}", "weight_hh_l{}{}"]
                if bias:
                    shapes += [(gate_size,), (gate_size,)]
                    names += ["bias_ih_l{}{}", "bias_hh_l{}{}"]
                if proj_size:
                    shapes.append((proj_size, hidden_size))
                    names.append("weight_hr_l{}{}")
                suffix = "_reverse" if direction == 1 else ""
                names = [n.format(layer, suffix) for n in names]
                for name, shape in zip(names, shapes):
                    setattr(self, name, new_parameter(shape, device, dtype))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def flatten_parameters(self) -> None:
        """Accepted for PyTorch compatibility (cuDNN weight packing); nothing to do."""

    @property
    def all_weights(self) -> list:
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def _weights(self, layer: int, direction: int) -> tuple:
        suffix = "_reverse" if direction == 1 else ""
        w_ih = getattr(self, f"weight_ih_l{layer}{suffix}")
        w_hh = getattr(self, f"weight_hh_l{layer}{suffix}")
        b_ih = getattr(self, f"bias_ih_l{layer}{suffix}") if self.bias else None
        b_hh = getattr(self, f"bias_hh_l{layer}{suffix}") if self.bias else None
        w_hr = getattr(self, f"weight_hr_l{layer}{suffix}") if self.proj_size else None
        return w_ih, w_hh, b_ih, b_hh, w_hr

    def _initial_states(self, hx, x: Tensor, batched: bool) -> list:
        """[h0] or [h0, c0], each (layers * directions, N, size)."""
        op = type(self).__name__
        count = self.num_layers * (2 if self.bidirectional else 1)
        n = x.shape[1]
        sizes = [self.proj_size or self.hidden_size]
        if self.mode == "LSTM":
            sizes.append(self.hidden_size)
            if hx is not None and not (isinstance(hx, (tuple, list)) and len(hx) == 2):
                raise ArgumentTypeError(f"{op}: hx must be a tuple (h_0, c_0)")
        elif hx is not None:
            hx = (hx,)
        if hx is None:
            return [E.zeros((count, n, size), dtype=x.dtype) for size in sizes]
        states = []
        for state, size, what in zip(hx, sizes, ("h_0", "c_0")):
            expected = (count, n, size) if batched else (count, size)
            _check_state(op, state, expected, what)
            states.append(state if batched else state.unsqueeze(1))
        return states

    def forward(self, input, hx=None):
        op = type(self).__name__
        packed = input if isinstance(input, PackedSequence) else None
        if packed is not None:
            x, lengths = pad_packed_sequence(packed)
            _check_input(op, x, self.input_size, 3)
            batched, lengths = True, lengths.numpy()
            # (T, B, 1): whether step t is inside sequence b
            steps = np.arange(x.shape[0])[:, None, None]
            mask = Tensor(steps < lengths[None, :, None])
        else:
            _check_input(op, input, self.input_size, 3)
            batched, mask, lengths = input.ndim == 3, None, None
            x = input if batched else input.unsqueeze(1)
            if batched and self.batch_first:
                x = x.transpose(0, 1)
        states = self._initial_states(hx, x, batched)
        directions = 2 if self.bidirectional else 1
        finals: list[list] = [[] for _ in states]
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                state = tuple(s[index] for s in states)
                out, state = self._run_direction(x, state, layer, direction, mask, lengths)
                outputs.append(out)
                for final, s in zip(finals, state):
                    final.append(s)
            x = outputs[0] if directions == 1 else E.cat(outputs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        final_states = [E.stack(f) for f in finals]
        if packed is not None:
            x = pack_like(x, packed)
        elif batched and self.batch_first:
            x = x.transpose(0, 1)
            if self.mode != "LSTM":
                # (PyTorch's GRU and RNN transpose their stacked output in place)
                x = rename_node(x, "TransposeBackward1")
        if not batched:
            x = x.squeeze(1)
            final_states = [s.squeeze(1) for s in final_states]
        if self.mode == "LSTM":
            return x, tuple(final_states)
        return x, final_states[0]

    def _run_direction(self, x, state: tuple, layer: int, direction: int, mask, lengths) -> tuple:
        w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
        if w_hr is None and whole_layer_applies(self.mode, x, self.parameters()):
            weights, reverse = (w_ih, w_hh, b_ih, b_hh), direction == 1
            if mask is None:
                return whole_layer(self.mode, x, state, weights, reverse)
            return whole_layer_packed(self.mode, x, state, weights, reverse, lengths)
        x_proj = F.linear(x, w_ih, b_ih)
        if isinstance(current_mode(), GraphBuilder):
            return self._scan_direction(x_proj, state, direction, mask, (w_hh, b_hh, w_hr))
        # every step's input projection in one matmul; unbind's gradient is one concatenation
        # (indexing step by step would scatter each step's gradient into a full-size zero array)
        x_proj = x_proj.unbind(0)
        masks = None if mask is None else mask.unbind(0)
        steps = x.shape[0]
        order = range(steps - 1, -1, -1) if direction == 1 else range(steps)
        outs: list = [None] * steps
        for t in order:
            new = rnn_step(self.mode, x_proj[t], state, w_hh, b_hh, w_hr)
            state = new if masks is None else _keep_finished(masks[t], new, state)
            outs[t] = state[0]
        return E.stack(outs), state

    def _scan_direction(self, x_proj, state: tuple, direction: int, mask, weights) -> tuple:
        """The time loop as one scan node: the body is one step (weights closed over)."""
        reverse = direction == 1
        xs = (x_proj, mask) if mask is not None else (x_proj,)
        if reverse:
            xs = tuple(E.flip(a, (0,)) for a in xs)

        def step(carry, inputs):
            new = rnn_step(self.mode, inputs[0], carry, *weights)
            if mask is not None:
                new = _keep_finished(inputs[1], new, carry)
            return new, new[0]

        state, outs = scan(step, state, xs)
        return (E.flip(outs, (0,)) if reverse else outs), state

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ArgumentError(
                f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'."
            )
        self.nonlinearity = nonlinearity
        super().__init__(
            "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            0,
            device,
            dtype,
        )


class LSTM(RNNBase):
    """Long short-term memory; returns ``(output, (h_n, c_n))``."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            "LSTM",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            proj_size,
            device,
            dtype,
        )


class GRU(RNNBase):
    """Gated recurrent unit; returns ``(output, h_n)``."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            "GRU",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            0,
            device,
            dtype,
        )
