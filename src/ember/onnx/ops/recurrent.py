"""ONNX operators: the recurrent layers RNN, LSTM and GRU (opsets 1/3/7, 14: ``layout``, 22).

Every direction of a layer runs one of two ways:

* as ember's whole-layer op (ops/recurrent.py: ``lstm_layer`` / ``gru_layer``,
  ops/recurrent_elman.py: ``rnn_layer``, the time loop in C, one node forward and one
  backward) where the ONNX configuration is PyTorch's: RNN with tanh or relu, LSTM and
  GRU with the default activations, no ``clip``, no peepholes, no ``input_forget``, GRU with
  ``linear_before_reset=1``, float32/float64, and every sequence running the full length. The
  gates are reordered from ONNX's (LSTM: i, o, f, c; GRU: z, r, h) to PyTorch's (i, f, c, o;
  r, z, n);
* otherwise as an ``ember.scan`` whose body is one step written in ember ops (so a captured
  model keeps one loop node whatever the sequence length), with ONNX's activations, clip and
  ``sequence_lens`` (a finished sequence's state stops changing and its outputs are zero; the
  reverse direction runs each sequence from its own last step).
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...nn.rnn import whole_layer_applies
from ...ops.recurrent import gru_layer, lstm_layer
from ...ops.recurrent_elman import rnn_layer
from .._convert import converter, is_static, is_symbolic, to_tensor
from ._common import E, F, given

# ONNX's activation functions: name -> (function of (x, alpha, beta), default alpha, beta);
# None: the function takes no such parameter. The defaults are onnxruntime's (0 where it has
# none: Affine, ScaledTanh, ThresholdedRelu)
_ACTIVATIONS = {
    "relu": (lambda x, a, b: E.relu(x), None, None),
    "tanh": (lambda x, a, b: E.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: E.sigmoid(x), None, None),
    "affine": (lambda x, a, b: x * a + b, 0.0, 0.0),
    "leakyrelu": (lambda x, a, b: F.leaky_relu(x, a), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: E.where(x > a, x, E.zeros_like(x)), 0.0, None),
    "scaledtanh": (lambda x, a, b: E.tanh(x * b) * a, 0.0, 0.0),
    "hardsigmoid": (lambda x, a, b: E.clamp(x * a + b, 0.0, 1.0), 0.2, 0.5),
    "elu": (lambda x, a, b: F.elu(x, a), 1.0, None),
    "softsign": (lambda x, a, b: F.softsign(x), None, None),
    "softplus": (lambda x, a, b: E.logaddexp(x, E.zeros_like(x)), None, None),
}

_DEFAULTS = {"RNN": ("Tanh",), "LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh")}
_GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}


def _activations(ctx, kind: str, directions: int) -> tuple:
    """Per direction, the activation functions (callables of one tensor), consuming
    ``activation_alpha`` / ``activation_beta`` in order for the functions that take them
    (onnxruntime's convention); whether they are the defaults; and their names, lowercase."""
    count = len(_DEFAULTS[kind])
    names = ctx.attr("activations", None)
    if not names:
        names = list(_DEFAULTS[kind]) * directions
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    if len(names) == count and directions == 2:
        names = names * 2
    if len(names) != count * directions:
        raise ctx.error(f"activations lists {len(names)} functions, expected {count * directions}")
    alphas = list(ctx.attr("activation_alpha", []) or [])
    betas = list(ctx.attr("activation_beta", []) or [])
    result, default = [], True
    for d in range(directions):
        fns = []
        for name in names[d * count : (d + 1) * count]:
            key = name.lower()
            if key not in _ACTIVATIONS:
                raise ctx.error(f"unknown activation function {name!r}")
            fn, alpha, beta = _ACTIVATIONS[key]
            if alpha is not None and alphas:
                alpha = float(alphas.pop(0))
            if beta is not None and betas:
                beta = float(betas.pop(0))
            fns.append(lambda x, fn=fn, a=alpha, b=beta: fn(x, a, b))
        default = default and [n.lower() for n in names[d * count : (d + 1) * count]] == [
            n.lower() for n in _DEFAULTS[kind]
        ]
        result.append(fns)
    return result, default, [n.lower() for n in names]


def _chunks(t, parts: int, axis: int = 0) -> list:
    size = t.shape[axis] // parts
    return [E.narrow(t, axis, i * size, size) for i in range(parts)]


def _reorder(t, order: list[int], parts: int):
    """``t``'s gate blocks along its first axis in the given order (a NumPy array stays one:
    an initializer's reordered copy is made once, at import, rather than by a ``cat`` in the
    captured graph on every call)."""
    if isinstance(t, np.ndarray):
        blocks = np.split(t, parts, axis=0)
        return np.concatenate([blocks[i] for i in order], 0)
    blocks = _chunks(t, parts)
    return E.cat([blocks[i] for i in order], 0)


class _Layer:
    """One ONNX recurrent node's operands, in time-major layout."""

    def __init__(self, ctx, kind, x, w, r, b, lens, h0, c0=None, p=None):
        self.ctx, self.kind = ctx, kind
        self.layout = ctx.attr("layout", 0) if ctx.opset >= 14 else 0
        x = ctx.tensor(x)
        if x.ndim != 3:
            raise ctx.error(f"X must be 3-D, got shape {tuple(x.shape)}")
        self.x = E.transpose(x, 0, 1) if self.layout else x
        self.dtype = self.x.dtype
        self.w, self.r = ctx.tensor(w, self.dtype), ctx.tensor(r, self.dtype)
        # the initializers as arrays, for the whole-layer op's reordered weights
        self.static = {
            name: np.asarray(value, dtype=self.dtype.np) if is_static(value) else None
            for name, value in (("w", w), ("r", r), ("b", b if given(b) else None))
        }
        self.steps, self.batch = self.x.shape[0], self.x.shape[1]
        gates = _GATES[kind]
        direction = ctx.attr("direction", "forward")
        if isinstance(direction, bytes):
            direction = direction.decode()
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ctx.error(f"unknown direction {direction!r}")
        self.direction = direction
        self.dirs = 2 if direction == "bidirectional" else 1
        self.hidden = ctx.attr("hidden_size", None) or self.r.shape[-1]
        if tuple(self.w.shape)[:2] != (self.dirs, gates * self.hidden):
            raise ctx.error(
                f"W of shape {tuple(self.w.shape)} does not fit {self.dirs} direction(s) of "
                f"{gates} x {self.hidden} hidden units"
            )
        self.b = ctx.tensor(b, self.dtype) if given(b) else None
        self.lens = ctx.tensor(lens, _dt.int64) if given(lens) else None
        self.full = self.lens is None
        if not self.full and not is_symbolic(lens):
            self.full = bool(np.all(np.asarray(ctx.static(lens)) == self.steps))
        self.h0 = self._state(h0)
        self.c0 = self._state(c0) if kind == "LSTM" else None
        self.p = ctx.tensor(p, self.dtype) if given(p) else None
        clip = ctx.attr("clip", None)
        self.clip = None if clip is None else float(clip)
        # (the names, lowercase, per direction and function: RNN's whole-layer op)
        self.acts, self.default_acts, self.act_names = _activations(ctx, kind, self.dirs)

    def _state(self, value):
        if not given(value):
            return E.zeros((self.dirs, self.batch, self.hidden), dtype=self.dtype)
        state = self.ctx.tensor(value, self.dtype)
        return E.transpose(state, 0, 1) if self.layout else state

    def outputs(self, ys: list, hs: list, cs: list | None):
        """Y, Y_h (and Y_c) in the node's layout."""
        y = E.stack(ys, 1)  # (T, dirs, B, H)
        y_h = E.stack(hs, 0)
        y_c = None if cs is None else E.stack(cs, 0)
        if self.layout:
            y = E.permute(y, (2, 0, 1, 3))
            y_h = E.transpose(y_h, 0, 1)
            y_c = None if y_c is None else E.transpose(y_c, 0, 1)
        return (y, y_h) if y_c is None else (y, y_h, y_c)


def _clip(layer, t):
    return t if layer.clip is None else E.clamp(t, -layer.clip, layer.clip)


def _time_index(layer, reverse: bool):
    """(T, B) int64: each step's source time per batch row, for running a direction with
    ``sequence_lens`` (reverse: each sequence from its own last step), and (T, B, 1) the
    running mask."""
    t = to_tensor(np.arange(layer.steps, dtype=np.int64).reshape(-1, 1), layer.ctx.label)
    lens = E.reshape(layer.lens, (1, -1))
    running = t < lens
    if reverse:
        source = E.where(running, lens - 1 - t, t)
    else:
        source = t + E.zeros_like(lens)
    return source, E.unsqueeze(running, 2)


def _run_direction(layer, d: int, x, step):
    """The scan over one direction of ``x`` (T, B, *) (the input projections): ``step(state
    tuple, x_t) -> new state tuple``; returns (Y of that direction (T, B, H), final state
    tuple)."""
    reverse = layer.direction == "reverse" or d == 1
    init = (layer.h0[d],) if layer.c0 is None else (layer.h0[d], layer.c0[d])
    if layer.steps == 0:
        return E.zeros((0, layer.batch, layer.hidden), dtype=layer.dtype), init
    if layer.full:
        xs = (E.flip(x, (0,)) if reverse else x,)

        def body(carry, inputs):
            new = step(carry, inputs[0])
            return new, new[0]

        final, ys = E.scan(body, init, xs)
        return (E.flip(ys, (0,)) if reverse else ys), final
    source, running = _time_index(layer, reverse)
    if reverse:
        index = E.broadcast_to(E.unsqueeze(source, 2), (layer.steps, layer.batch, x.shape[2]))
        x = E.gather(x, 0, index)
    xs = (x, running)

    def masked(carry, inputs):
        new = step(carry, inputs[0])
        keep = inputs[1]
        new = tuple(E.where(keep, n, o) for n, o in zip(new, carry))
        return new, E.where(keep, new[0], E.zeros_like(new[0]))

    final, ys = E.scan(masked, init, xs)
    if reverse:
        # ys[t] is the output of source time src[t]; put it back in time order
        order = E.broadcast_to(E.unsqueeze(source, 2), tuple(ys.shape))
        ys = E.scatter(E.zeros_like(ys), 0, order, ys)
    return ys, final


def _bias_parts(layer, d: int, gates: int):
    """(Wb, Rb) of direction d, each (gates * H,), or (None, None) where B is absent."""
    if layer.b is None:
        return None, None
    size = gates * layer.hidden
    return E.narrow(layer.b[d], 0, 0, size), E.narrow(layer.b[d], 0, size, size)


def _static_parts(layer, d: int, gates: int):
    """(W[d], R[d], Wb, Rb) as NumPy arrays where the node's W, R and B are static (else None
    for each that is not), for the whole-layer op's reordered copies."""
    w, r, b = (layer.static[k] for k in ("w", "r", "b"))
    size = gates * layer.hidden
    wb, rb = (None, None) if b is None else (b[d, :size], b[d, size:])
    return (None if w is None else w[d]), (None if r is None else r[d]), wb, rb


def _gates(layer, static, value, order: list[int], parts: int):
    """``value``'s gate blocks reordered, as a tensor: from its static array where there is one
    (reordered once, now: a graph constant), else from the tensor ``value``."""
    if static is None:
        return None if value is None else _reorder(value, order, parts)
    reordered = _reorder(static, order, parts)
    # the import's own copy, never written: a captured graph keeps it as a frozen constant
    # (the whole-layer ops keep W_hh's packed panels: ops/recurrent.py `kept_pack_compile`)
    reordered.setflags(write=False)
    return to_tensor(reordered, layer.ctx.label)


def _sum(a, b):
    return None if a is None else a + b


# ---------------------------------------------------------------------------------------------
# RNN


@converter("RNN", 1)
def _rnn(ctx, x, w, r, b=None, lens=None, h0=None):
    layer = _Layer(ctx, "RNN", x, w, r, b, lens, h0)
    # PyTorch's nn.RNN (tanh or relu in every direction) runs as the whole-layer op, as LSTM
    # and GRU do: a step-by-step scan over a torch-exported RNN unrolled into many nodes
    names = layer.act_names
    fused = (
        set(names) <= {"tanh", "relu"}
        and layer.clip is None
        and layer.full
        and layer.steps > 0
        and whole_layer_applies("RNN_TANH", layer.x, [layer.w, layer.r])
    )
    ys, hs = [], []
    for d in range(layer.dirs):
        wb, rb = _bias_parts(layer, d, 1)
        if fused:
            sw, sr, swb, srb = _static_parts(layer, d, 1)
            w_ih = _gates(layer, sw, layer.w[d], [0], 1)
            w_hh = _gates(layer, sr, layer.r[d], [0], 1)
            bias = _gates(layer, _sum(swb, srb), _sum(wb, rb), [0], 1)
            reverse = layer.direction == "reverse" or d == 1
            y, h = rnn_layer(
                F.linear(layer.x, w_ih, bias), layer.h0[d], w_hh, reverse, names[d] == "relu"
            )
            ys.append(y)
            hs.append(h)
            continue
        xp = F.linear(layer.x, layer.w[d], _sum(wb, rb))
        r_d, (f,) = layer.r[d], layer.acts[d]

        def step(carry, xt, r_d=r_d, f=f):
            return (f(_clip(layer, xt + E.matmul(carry[0], E.t(r_d)))),)

        y, (h,) = _run_direction(layer, d, xp, step)
        ys.append(y)
        hs.append(h)
    return layer.outputs(ys, hs, None)


# ---------------------------------------------------------------------------------------------
# LSTM


@converter("LSTM", 1)
def _lstm(ctx, x, w, r, b=None, lens=None, h0=None, c0=None, p=None):
    layer = _Layer(ctx, "LSTM", x, w, r, b, lens, h0, c0, p)
    input_forget = bool(ctx.attr("input_forget", 0))
    fused = (
        layer.default_acts
        and layer.clip is None
        and layer.p is None
        and not input_forget
        and layer.full
        and layer.steps > 0
        and whole_layer_applies("LSTM", layer.x, [layer.w, layer.r])
    )
    ys, hs, cs = [], [], []
    for d in range(layer.dirs):
        wb, rb = _bias_parts(layer, d, 4)
        reverse = layer.direction == "reverse" or d == 1
        if fused:
            order = [0, 2, 3, 1]  # ONNX's i, o, f, c as PyTorch's i, f, c, o
            sw, sr, swb, srb = _static_parts(layer, d, 4)
            w_ih = _gates(layer, sw, layer.w[d], order, 4)
            w_hh = _gates(layer, sr, layer.r[d], order, 4)
            bias = _gates(layer, _sum(swb, srb), _sum(wb, rb), order, 4)
            y, h, c = lstm_layer(
                F.linear(layer.x, w_ih, bias), layer.h0[d], layer.c0[d], w_hh, reverse
            )
        else:
            y, (h, c) = _run_direction_lstm(layer, d, _sum(wb, rb), input_forget)
        ys.append(y)
        hs.append(h)
        cs.append(c)
    return layer.outputs(ys, hs, cs)


def _run_direction_lstm(layer, d, bias, input_forget, project=None, recur=None):
    """One direction of an LSTM; ``project(x, bias)`` and ``recur(h)`` replace the input and
    recurrent products (x W^T + bias, h R^T) where given (quantized products)."""
    xp = F.linear(layer.x, layer.w[d], bias) if project is None else project(layer.x, bias)
    if recur is None:
        r_t = E.t(layer.r[d])

        def recur(h):
            return E.matmul(h, r_t)

    f, g, h_act = layer.acts[d]
    peep = None if layer.p is None else _chunks(layer.p[d], 3)

    def step(carry, xt):
        h, c = carry
        i, o, fg, cand = _chunks(xt + recur(h), 4, 1)
        if peep is not None:
            i, fg = i + peep[0] * c, fg + peep[2] * c
        i = f(_clip(layer, i))
        fg = 1.0 - i if input_forget else f(_clip(layer, fg))
        c_new = fg * c + i * g(_clip(layer, cand))
        if peep is not None:
            o = o + peep[1] * c_new
        o = f(_clip(layer, o))
        return o * h_act(c_new), c_new

    return _run_direction(layer, d, xp, step)


# ---------------------------------------------------------------------------------------------
# GRU


@converter("GRU", 1)
def _gru(ctx, x, w, r, b=None, lens=None, h0=None):
    layer = _Layer(ctx, "GRU", x, w, r, b, lens, h0)
    before_reset = bool(ctx.attr("linear_before_reset", 0))
    fused = (
        before_reset
        and layer.default_acts
        and layer.clip is None
        and layer.full
        and layer.steps > 0
        and whole_layer_applies("GRU", layer.x, [layer.w, layer.r])
    )
    ys, hs = [], []
    for d in range(layer.dirs):
        wb, rb = _bias_parts(layer, d, 3)
        reverse = layer.direction == "reverse" or d == 1
        if fused:
            order = [1, 0, 2]  # ONNX's z, r, h as PyTorch's r, z, n
            sw, sr, swb, srb = _static_parts(layer, d, 3)
            w_ih = _gates(layer, sw, layer.w[d], order, 3)
            w_hh = _gates(layer, sr, layer.r[d], order, 3)
            b_ih = _gates(layer, swb, wb, order, 3)
            if rb is None:
                b_hh = E.zeros((3 * layer.hidden,), dtype=layer.dtype)
            else:
                b_hh = _gates(layer, srb, rb, order, 3)
            y, h = gru_layer(F.linear(layer.x, w_ih, b_ih), layer.h0[d], w_hh, b_hh, reverse)
        else:
            y, (h,) = _run_direction_gru(layer, d, wb, rb, before_reset)
        ys.append(y)
        hs.append(h)
    return layer.outputs(ys, hs, None)


def _run_direction_gru(layer, d, wb, rb, before_reset):
    xp = F.linear(layer.x, layer.w[d], wb)
    r_z, r_r, r_h = _chunks(layer.r[d], 3)
    rb_z, rb_r, rb_h = _chunks(rb, 3) if rb is not None else (None, None, None)
    r_zr = E.t(E.cat([r_z, r_r], 0))
    rb_zr = None if rb is None else E.cat([rb_z, rb_r], 0)
    r_h_t = E.t(r_h)
    f, g = layer.acts[d]

    def step(carry, xt):
        (h,) = carry
        x_z, x_r, x_h = _chunks(xt, 3, 1)
        h_zr = E.matmul(h, r_zr)
        h_z, h_r = _chunks(h_zr if rb_zr is None else h_zr + rb_zr, 2, 1)
        z = f(_clip(layer, x_z + h_z))
        reset = f(_clip(layer, x_r + h_r))
        if before_reset:
            h_h = E.matmul(h, r_h_t)
            cand = x_h + reset * (h_h if rb_h is None else h_h + rb_h)
        else:
            cand = x_h + E.matmul(reset * h, r_h_t)
            cand = cand if rb_h is None else cand + rb_h
        cand = g(_clip(layer, cand))
        return ((1.0 - z) * cand + z * h,)

    return _run_direction(layer, d, xp, step)
