"""Whole-layer recurrences: ``lstm_layer`` and ``gru_layer`` run one layer and direction of an
LSTM or GRU over every time step, and their ``*_grad`` ops run backpropagation through time,
the way PyTorch's fused RNN kernels do: one op forward and one backward per layer, not a tape
of thousands of per-step nodes, and in a graph no Python between steps.

Operands (T steps, B rows, H hidden units; gate orders as PyTorch's):

* ``lstm_layer(xg, h0, c0, w_hh; reverse) -> (y, h_n, c_n, cs, acts)``: ``xg`` (T, B, 4H) is
  every step's input projection with both biases, ``x @ W_ih^T + b_ih + b_hh``, computed by
  the caller as one product; each step adds ``h @ W_hh^T`` and applies the gates (input,
  forget, cell, output). ``y`` (T, B, H) holds every step's h, ``cs`` every step's c, ``acts``
  (T, B, 4H) the gates' activations (what the backward pass reads).
* ``gru_layer(xg, h0, w_hh, b_hh; reverse) -> (y, h_n, acts)``: ``xg = x @ W_ih^T + b_ih``
  (T, B, 3H); ``b_hh`` stays apart because the reset gate scales ``h @ W_hn^T + b_hn``
  (PyTorch's GRU). ``acts`` (T, B, 4H) holds r, z, n and ``h @ W_hn^T + b_hn``.

``reverse`` runs the steps from last to first (a bidirectional layer's second direction).
The NumPy kernels below are the specification; kernels/crnn.py is the C implementation (the
whole time loop of a layer in one C call). Every output is differentiable, the saved ones included,
so the VJPs are exact whatever the caller reads; the ``*_grad`` ops have no VJP: a backward
that is itself recorded (``create_graph``) runs ops/recurrent_double.py's step-by-step
composite instead, whose gradient is PyTorch's double backward.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..types import TensorType
from ._recurrent_workspace import workspace as _workspace
from ._registry import Cost, OpDef, apply, current_mode, is_grad_enabled, register
from ._rules import Autocast
from ._util import fmt_shape, io_bytes
from .recurrent_double import (
    _order,
    gru_backward,
    gru_steps,
    lstm_backward,
    lstm_steps,
    recurrence_length,
)


@functools.cache
def _crnn():
    """kernels/crnn.py, imported at the first call (every eager recurrent layer and its gradient:
    an import statement there costs each call half a microsecond)."""
    from ..kernels import crnn

    return crnn


__all__ = ["gru_layer", "lstm_layer"]

_FLOATS = (dt.float32, dt.float64)


def _size(d) -> int:
    return d if isinstance(d, int) else 1  # (a symbolic size: counted once)


def _check(op: str, xg, states: tuple, w_hh, gates: int, bias=None) -> int:
    """The hidden size, after checking every operand's shape and dtype."""
    operands = (xg, *states, w_hh) + (() if bias is None else (bias,))
    for t in operands:
        if t.dtype not in _FLOATS or t.dtype != xg.dtype:
            raise DTypeError(
                f"expected float32 or float64 operands of one dtype, got "
                f"{', '.join(str(t.dtype) for t in operands)}",
                op=op,
            )
    if len(xg.shape) != 3 or any(len(s.shape) != 2 for s in states) or len(w_hh.shape) != 2:
        raise ShapeError(
            f"expected xg (T, B, {gates}H), states (B, H) and w_hh ({gates}H, H), got "
            + ", ".join(fmt_shape(t.shape) for t in operands),
            op=op,
        )
    hidden = w_hh.shape[1]
    rows = xg.shape[1]
    expected = [(xg.shape[0], rows, gates * hidden)] + [(rows, hidden)] * len(states)
    expected.append((gates * hidden, hidden))
    if bias is not None:
        expected.append((gates * hidden,))
    got = [tuple(t.shape) for t in operands]
    if any(
        len(g) != len(e) or any(isinstance(a, int) and isinstance(b, int) and a != b
                                for a, b in zip(g, e))
        for g, e in zip(got, expected)
    ):  # fmt: skip
        raise ShapeError(
            f"operand shapes {', '.join(fmt_shape(g) for g in got)} do not agree; expected "
            f"{', '.join(fmt_shape(e) for e in expected)}",
            op=op,
        )
    return hidden


def _recurrent_cost(products: int, weight: int = -1):
    """``products`` (T, B, H) x (H, gates * H) products (the forward's recurrent one; the
    backward's through the steps and for the weights; ``in_types[weight]`` is W_hh), and ~12
    operations a gate value."""

    def cost(in_types, out_types, attrs) -> Cost:
        steps, rows = (_size(d) for d in in_types[0].shape[:2])
        gates, hidden = (_size(d) for d in in_types[weight].shape)
        matmul = 2 * products * steps * rows * gates * hidden
        return Cost(matmul + 12 * steps * rows * gates, io_bytes(in_types, out_types))

    return cost


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _previous(y: np.ndarray, h0: np.ndarray, reverse: bool) -> np.ndarray:
    """Each step's incoming hidden state: h0 for the first step run, else the step before's."""
    if reverse:
        return np.concatenate([y[1:], h0[None]])
    return np.concatenate([h0[None], y[:-1]])


def _weight_grad(dg: np.ndarray, y: np.ndarray, h0: np.ndarray, reverse: bool) -> np.ndarray:
    if dg.shape[0] == 0:  # no steps: the weights were never read
        return np.zeros((dg.shape[2], h0.shape[1]), dg.dtype)
    h_prev = _previous(y, h0, reverse)
    return np.matmul(dg.reshape(-1, dg.shape[2]).T, h_prev.reshape(-1, h_prev.shape[2]))


# ------------------------------------------------------------------------------- LSTM


def _lstm_infer(xg, h0, c0, w_hh, *, reverse):
    hidden = _check("lstm_layer", xg, (h0, c0), w_hh, 4)
    steps, rows = xg.shape[0], xg.shape[1]
    seq, state = TensorType((steps, rows, hidden), xg.dtype), TensorType((rows, hidden), xg.dtype)
    return seq, state, state, seq, TensorType((steps, rows, 4 * hidden), xg.dtype)


def _lstm_kernel(xg, h0, c0, w_hh, *, reverse):
    steps, rows, gates = xg.shape
    hidden = gates // 4
    y = np.empty((steps, rows, hidden), xg.dtype)
    cs = np.empty_like(y)
    acts = np.empty((steps, rows, gates), xg.dtype)
    h, c = h0, c0
    for t in _order(steps, reverse):
        pre = xg[t] + np.matmul(h, w_hh.T)
        i = _sigmoid(pre[:, :hidden])
        f = _sigmoid(pre[:, hidden : 2 * hidden])
        g = np.tanh(pre[:, 2 * hidden : 3 * hidden])
        o = _sigmoid(pre[:, 3 * hidden :])
        c = f * c + i * g
        h = o * np.tanh(c)
        acts[t] = np.concatenate([i, f, g, o], axis=1)
        cs[t], y[t] = c, h
    return y, np.array(h, copy=True), np.array(c, copy=True), cs, acts


def _lstm_fast(xg, h0, c0, w_hh, *, reverse, packs=None):
    return _crnn().lstm_forward(xg, h0, c0, w_hh, reverse, packs=packs)


def kept_pack_compile(weight: int, fast):
    """The ``compile`` rule of a whole-layer recurrence whose recurrent weight is its input
    ``weight``: where that is a frozen graph constant (an imported model's W_hh), the node's
    implementation keeps the weight's packed panels for the program's life (kernels/crnn.py's
    ``packs``) rather than packing them at every call; ``fast(*arrays, packs=, **attrs)`` is
    the op's fast rule (None where C does not run it: the kernel then runs)."""

    def compile_node(node):
        from ..kernels.cconv_constant import frozen_array

        if frozen_array(node, weight) is None:
            return None
        attrs, kernel, packs = dict(node.attrs), node.op.kernel, {}

        def run(*arrays, out=None):
            result = fast(*arrays, packs=packs, **attrs)
            return kernel(*arrays, **attrs) if result is None else result

        return run

    return compile_node


def recurrent_c_step(cell, weight: int):
    """The ``c_step`` rule of a whole-layer recurrence whose recurrent weight is input
    ``weight`` (kernels/crnn_step.py: the fast rule's loop called from C; a frozen graph
    constant's W_hh packed once per step); ``cell``: "lstm", "gru", or a function of the
    node's attributes naming the Elman cell ("tanh", "relu")."""

    def c_step(node):
        from ..kernels import crnn_step
        from ..kernels.cconv_constant import frozen_array

        name = cell if isinstance(cell, str) else cell(node.attrs)
        return crnn_step.rnn_layer_c_step(node, name, weight, frozen_array(node, weight))

    return c_step


def _recorded_backward() -> bool:
    """Whether this VJP's ops are recorded to be differentiated again (eagerly: grad mode on
    inside backward, create_graph=True; in a graph: the builder's grad with create_graph),
    so it must be the differentiable composite rather than the fused ``*_grad`` op."""
    flag = getattr(current_mode(), "differentiable_backward", None)
    return is_grad_enabled() if flag is None else flag


def _lstm_vjp(ctx, gy, ghn, gcn, gcs, gacts):
    xg, h0, c0, w_hh = ctx.inputs
    y, _, _, cs, acts = ctx.outputs
    if _recorded_backward() and recurrence_length(y):
        return lstm_backward(gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0, w_hh, **ctx.attrs)
    dxg, dh0, dc0, dw = apply(
        LSTM_LAYER_GRAD, gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0, w_hh, **ctx.attrs
    )
    return dxg, dh0, dc0, dw


def _lstm_grad_infer(gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0, w_hh, *, reverse):
    return tuple(TensorType(tuple(t.shape), t.dtype) for t in (acts, h0, c0, w_hh))


def _lstm_grad_kernel(gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0, w_hh, *, reverse):
    dgs, dh, dc = lstm_steps(np, gy, ghn, gcn, gcs, gacts, acts, cs, c0, w_hh, reverse)
    dg = np.stack(dgs, 0).astype(acts.dtype, copy=False) if dgs else np.empty_like(acts)
    return dg, np.array(dh, copy=True), np.array(dc, copy=True), _weight_grad(dg, y, h0, reverse)


def _lstm_grad_fast(gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0, w_hh, *, reverse):
    return _crnn().lstm_backward(gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0, w_hh, reverse)


def _onnx_gates(e, name, hidden, count):
    """``name``'s last axis cut into ``count`` gates of ``hidden``."""
    return e.node("Split", [name, e.ints([hidden] * count)], outputs=count, axis=-1)


def _onnx_steps(e, state, state_types, seqs, seq_types, step, out_types, backward):
    """A Scan over the leading (time) axis of ``seqs`` (from the last step for ``backward``;
    each output stored at its own step) running ``step(e, *state, *slices) -> (*state,
    *outputs)`` (``out_types``: the outputs' types per step); returns the final state and the
    stacked outputs. No steps: the state as it came, empty sequences (onnxruntime's Scan fails
    on empty sequences)."""
    steps = seq_types[0].shape[0]
    if steps == 0:
        empty = [e.constant(np.zeros((0, *t.shape), t.dtype.np)) for t in out_types]
        return [e.node("Identity", [v]) for v in [*state, *empty]]
    slices = [TensorType(tuple(t.shape[1:]), t.dtype) for t in seq_types]
    body = e.body(
        [*state_types, *slices],
        lambda *formal: step(e, *formal),
        "rnn_step",
        [*state_types, *out_types],
    )
    out = e.node(
        "Scan",
        [*state, *seqs],
        outputs=len(state) + len(out_types),
        body=body,
        num_scan_inputs=len(seqs),
        scan_input_directions=[int(backward)] * len(seqs),
        scan_output_directions=[int(backward)] * len(out_types),
    )
    return [out] if isinstance(out, str) else list(out)


def _onnx_time_loop(e, n_state, step, n_outputs, step_types):
    """The forward layer's loop: state from the operands after xg, xg the one sequence."""
    return _onnx_steps(
        e,
        list(e.inputs[1 : 1 + n_state]),
        list(e.in_types[1 : 1 + n_state]),
        [e.inputs[0]],
        [e.in_types[0]],
        step,
        step_types[n_state:],
        e.attrs["reverse"],
    )


def _onnx_previous(e, seq, first, reverse):
    """Each step's incoming state (`_previous`): ``first`` for the first step run."""
    first = e.node("Unsqueeze", [first, e.ints([0])])
    if reverse:
        rest = e.node("Slice", [seq, e.ints([1]), e.ints([2**62]), e.ints([0])])
        return e.node("Concat", [rest, first], axis=0)
    rest = e.node("Slice", [seq, e.ints([0]), e.ints([-1]), e.ints([0])])
    return e.node("Concat", [first, rest], axis=0)


def _onnx_weight_grad(e, dg, y, h0, reverse, w_type):
    """`_weight_grad`: the gates' gradients against each step's incoming hidden state."""
    if e.in_types[0].shape[0] == 0:
        return e.node("Identity", [e.constant(np.zeros(w_type.shape, w_type.dtype.np))])
    h_prev = _onnx_previous(e, y, h0, reverse)
    flat_g = e.node("Reshape", [dg, e.ints([-1, w_type.shape[0]])])
    flat_h = e.node("Reshape", [h_prev, e.ints([-1, w_type.shape[1]])])
    return e.node("MatMul", [e.node("Transpose", [flat_g], perm=[1, 0]), flat_h])


def _onnx_lstm_layer(e):
    w_hh = e.inputs[3]
    hidden = e.in_types[1].shape[-1]
    w_t = e.node("Transpose", [w_hh], perm=[1, 0])

    def step(e, h, c, x):
        pre = e.node("Add", [x, e.node("MatMul", [h, w_t])])
        i, f, g, o = _onnx_gates(e, pre, hidden, 4)
        i, f, o = (e.node("Sigmoid", [v]) for v in (i, f, o))
        g = e.node("Tanh", [g])
        c = e.node("Add", [e.node("Mul", [f, c]), e.node("Mul", [i, g])])
        h = e.node("Mul", [o, e.node("Tanh", [c])])
        acts = e.node("Concat", [i, f, g, o], axis=1)
        return h, c, h, c, acts

    h_type, acts = e.in_types[1], e.out_types[4]
    acts_type = TensorType(tuple(acts.shape[1:]), acts.dtype)
    h_n, c_n, y, cs, acts = _onnx_time_loop(e, 2, step, 3, [h_type] * 4 + [acts_type])
    return y, h_n, c_n, cs, acts


LSTM_LAYER = register(
    OpDef(
        name="lstm_layer",
        grad_fn="MkldnnRnnLayerBackward0",  # (PyTorch's CPU LSTM layer)
        onnx=_onnx_lstm_layer,
        kind="nn",
        infer=_lstm_infer,
        kernel=_lstm_kernel,
        fast=_lstm_fast,
        compile=kept_pack_compile(3, _lstm_fast),
        c_step=recurrent_c_step("lstm", 3),
        vjp=_lstm_vjp,
        cost=_recurrent_cost(1),
        num_outputs=5,
        # (PyTorch runs a CPU LSTM in the autocast dtype through oneDNN; ember's recurrent
        # kernels are float32/float64, so the time loop runs in float32: the input
        # projections before it are products, which autocast runs in 16 bits)
        autocast=Autocast.FP32,
        save_inputs=(1, 2, 3),
        save_outputs=(0, 3, 4),
        batch=None,
        workspace=_workspace("lstm", False, 3),
        doc="lstm_layer(xg, h0, c0, w_hh; reverse) -> (y, h_n, c_n, cs, acts): one LSTM layer "
        "and direction over every step, xg the input projection with both biases",
    )
)


def _onnx_lstm_layer_grad(e):
    gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0, w_hh = e.inputs
    reverse = e.attrs["reverse"]
    hidden = e.in_types[5].shape[-1]
    dtype = e.in_types[5].dtype
    one = e.scalar(1, dtype)
    c_prev = _onnx_previous(e, cs, c0, reverse) if e.in_types[5].shape[0] else cs

    def minus(v):
        return e.node("Sub", [one, v])

    def step(e, dh, dc, gy_t, gcs_t, ga_t, a_t, c_t, cp_t):
        dh = e.node("Add", [dh, gy_t])
        tc = e.node("Tanh", [c_t])
        i, f, g, o = _onnx_gates(e, a_t, hidden, 4)
        ga_i, ga_f, ga_g, ga_o = _onnx_gates(e, ga_t, hidden, 4)
        d_out = e.node("Add", [e.node("Mul", [dh, tc]), ga_o])
        through = e.node("Mul", [e.node("Mul", [dh, o]), minus(e.node("Mul", [tc, tc]))])
        dc = e.node("Add", [e.node("Add", [dc, gcs_t]), through])
        di = e.node("Add", [e.node("Mul", [dc, g]), ga_i])
        df = e.node("Add", [e.node("Mul", [dc, cp_t]), ga_f])
        d_g = e.node("Add", [e.node("Mul", [dc, i]), ga_g])
        parts = [
            e.node("Mul", [di, e.node("Mul", [i, minus(i)])]),
            e.node("Mul", [df, e.node("Mul", [f, minus(f)])]),
            e.node("Mul", [d_g, minus(e.node("Mul", [g, g]))]),
            e.node("Mul", [d_out, e.node("Mul", [o, minus(o)])]),
        ]
        dg_t = e.node("Concat", parts, axis=1)
        return e.node("MatMul", [dg_t, w_hh]), e.node("Mul", [dc, f]), dg_t

    state_type = e.in_types[1]
    gates = TensorType(tuple(e.in_types[6].shape[1:]), dtype)
    seq_types = [e.in_types[k] for k in (0, 3, 4, 6, 7)] + [e.in_types[7]]
    dh, dc, dg = _onnx_steps(
        e,
        [ghn, gcn],
        [state_type, state_type],
        [gy, gcs, gacts, acts, cs, c_prev],
        seq_types,
        step,
        [gates],
        not reverse,
    )
    dw = _onnx_weight_grad(e, dg, y, h0, reverse, e.in_types[10])
    return dg, dh, dc, dw


LSTM_LAYER_GRAD = register(
    OpDef(
        name="lstm_layer_grad",
        onnx=_onnx_lstm_layer_grad,
        kind="nn",
        infer=_lstm_grad_infer,
        kernel=_lstm_grad_kernel,
        fast=_lstm_grad_fast,
        cost=_recurrent_cost(2),
        num_outputs=4,
        batch=None,
        workspace=_workspace("lstm", True, 10),
        doc="lstm_layer_grad(gy, gh_n, gc_n, gcs, gacts, y, acts, cs, h0, c0, w_hh; reverse) "
        "-> (dxg, dh0, dc0, dw_hh): backpropagation through time of lstm_layer",
    )
)


# ------------------------------------------------------------------------------- GRU


def _gru_infer(xg, h0, w_hh, b_hh, *, reverse):
    hidden = _check("gru_layer", xg, (h0,), w_hh, 3, b_hh)
    steps, rows = xg.shape[0], xg.shape[1]
    return (
        TensorType((steps, rows, hidden), xg.dtype),
        TensorType((rows, hidden), xg.dtype),
        TensorType((steps, rows, 4 * hidden), xg.dtype),
    )


def _gru_kernel(xg, h0, w_hh, b_hh, *, reverse):
    steps, rows, gates = xg.shape
    hidden = gates // 3
    y = np.empty((steps, rows, hidden), xg.dtype)
    acts = np.empty((steps, rows, 4 * hidden), xg.dtype)
    h = h0
    for t in _order(steps, reverse):
        x, q = xg[t], np.matmul(h, w_hh.T)
        r = _sigmoid(x[:, :hidden] + (q[:, :hidden] + b_hh[:hidden]))
        z = _sigmoid(
            x[:, hidden : 2 * hidden] + (q[:, hidden : 2 * hidden] + b_hh[hidden : 2 * hidden])
        )
        hn = q[:, 2 * hidden :] + b_hh[2 * hidden :]
        n = np.tanh(x[:, 2 * hidden :] + r * hn)
        h = (1 - z) * n + z * h
        acts[t] = np.concatenate([r, z, n, hn], axis=1)
        y[t] = h
    return y, np.array(h, copy=True), acts


def _gru_fast(xg, h0, w_hh, b_hh, *, reverse, packs=None):
    return _crnn().gru_forward(xg, h0, w_hh, b_hh, reverse, packs=packs)


def _gru_vjp(ctx, gy, ghn, gacts):
    _, h0, w_hh, _ = ctx.inputs
    y, _, acts = ctx.outputs
    if _recorded_backward() and recurrence_length(y):
        return gru_backward(gy, ghn, gacts, y, acts, h0, w_hh, **ctx.attrs)
    dxg, dh0, dw, db = apply(GRU_LAYER_GRAD, gy, ghn, gacts, y, acts, h0, w_hh, **ctx.attrs)
    return dxg, dh0, dw, db


def _gru_grad_infer(gy, ghn, gacts, y, acts, h0, w_hh, *, reverse):
    steps, rows, hidden = y.shape
    return (
        TensorType((steps, rows, 3 * hidden), y.dtype),
        TensorType(tuple(h0.shape), h0.dtype),
        TensorType(tuple(w_hh.shape), w_hh.dtype),
        TensorType((w_hh.shape[0],), y.dtype),
    )


def _gru_grad_kernel(gy, ghn, gacts, y, acts, h0, w_hh, *, reverse):
    dgx, dgh, dh = gru_steps(np, gy, ghn, gacts, y, acts, h0, w_hh, reverse)
    gates = acts[..., : 3 * (acts.shape[2] // 4)]  # (no steps: empty gradients of this shape)
    dgx = np.stack(dgx, 0).astype(y.dtype, copy=False) if dgx else np.empty_like(gates)
    dgh = np.stack(dgh, 0).astype(y.dtype, copy=False) if dgh else np.empty_like(gates)
    dw = _weight_grad(dgh, y, h0, reverse)
    return dgx, np.array(dh, copy=True), dw, dgh.sum(axis=(0, 1))


def _gru_grad_fast(gy, ghn, gacts, y, acts, h0, w_hh, *, reverse):
    return _crnn().gru_backward(gy, ghn, gacts, y, acts, h0, w_hh, reverse)


def _onnx_gru_layer(e):
    w_hh, b_hh = e.inputs[2], e.inputs[3]
    hidden = e.in_types[1].shape[-1]
    w_t = e.node("Transpose", [w_hh], perm=[1, 0])
    one = e.scalar(1, e.in_types[0].dtype)

    def step(e, h, x):
        q = e.node("Add", [e.node("MatMul", [h, w_t]), b_hh])
        xr, xz, xn = _onnx_gates(e, x, hidden, 3)
        qr, qz, hn = _onnx_gates(e, q, hidden, 3)
        r = e.node("Sigmoid", [e.node("Add", [xr, qr])])
        z = e.node("Sigmoid", [e.node("Add", [xz, qz])])
        n = e.node("Tanh", [e.node("Add", [xn, e.node("Mul", [r, hn])])])
        h = e.node("Add", [e.node("Mul", [e.node("Sub", [one, z]), n]), e.node("Mul", [z, h])])
        return h, h, e.node("Concat", [r, z, n, hn], axis=1)

    h_type, acts = e.in_types[1], e.out_types[2]
    acts_type = TensorType(tuple(acts.shape[1:]), acts.dtype)
    h_n, y, acts = _onnx_time_loop(e, 1, step, 2, [h_type] * 2 + [acts_type])
    return y, h_n, acts


GRU_LAYER = register(
    OpDef(
        name="gru_layer",
        grad_fn="StackBackward0",  # (PyTorch's CPU GRU stacks its steps' outputs)
        onnx=_onnx_gru_layer,
        kind="nn",
        infer=_gru_infer,
        kernel=_gru_kernel,
        fast=_gru_fast,
        compile=kept_pack_compile(2, _gru_fast),
        c_step=recurrent_c_step("gru", 2),
        vjp=_gru_vjp,
        cost=_recurrent_cost(1, weight=2),
        num_outputs=3,
        autocast=Autocast.FP32,  # (as lstm_layer's)
        save_inputs=(1, 2),
        save_outputs=(0, 2),
        batch=None,
        workspace=_workspace("gru", False, 2),
        doc="gru_layer(xg, h0, w_hh, b_hh; reverse) -> (y, h_n, acts): one GRU layer and "
        "direction over every step, xg the input projection with b_ih",
    )
)


def _onnx_gru_layer_grad(e):
    gy, ghn, gacts, y, acts, h0, w_hh = e.inputs
    reverse = e.attrs["reverse"]
    hidden = e.in_types[3].shape[-1]
    dtype = e.in_types[3].dtype
    one = e.scalar(1, dtype)
    h_prev = _onnx_previous(e, y, h0, reverse) if e.in_types[3].shape[0] else y

    def minus(v):
        return e.node("Sub", [one, v])

    def step(e, dh, gy_t, ga_t, a_t, hp_t):
        dh = e.node("Add", [dh, gy_t])
        r, z, n, hn = _onnx_gates(e, a_t, hidden, 4)
        ga_r, ga_z, ga_n, ga_hn = _onnx_gates(e, ga_t, hidden, 4)
        dn = e.node("Add", [e.node("Mul", [dh, minus(z)]), ga_n])
        dz = e.node("Add", [e.node("Mul", [dh, e.node("Sub", [hp_t, n])]), ga_z])
        dpn = e.node("Mul", [dn, minus(e.node("Mul", [n, n]))])
        dr = e.node("Add", [e.node("Mul", [dpn, hn]), ga_r])
        dhn = e.node("Add", [e.node("Mul", [dpn, r]), ga_hn])
        dpr = e.node("Mul", [dr, e.node("Mul", [r, minus(r)])])
        dpz = e.node("Mul", [dz, e.node("Mul", [z, minus(z)])])
        dgx_t = e.node("Concat", [dpr, dpz, dpn], axis=1)
        dgh_t = e.node("Concat", [dpr, dpz, dhn], axis=1)
        dh = e.node("Add", [e.node("Mul", [dh, z]), e.node("MatMul", [dgh_t, w_hh])])
        return dh, dgx_t, dgh_t

    rows = e.in_types[1].shape[0]
    gates = TensorType((rows, 3 * hidden), dtype)
    seq_types = [e.in_types[k] for k in (0, 2, 4, 3)]
    dh, dgx, dgh = _onnx_steps(
        e,
        [ghn],
        [e.in_types[1]],
        [gy, gacts, acts, h_prev],
        seq_types,
        step,
        [gates, gates],
        not reverse,
    )
    dw = _onnx_weight_grad(e, dgh, y, h0, reverse, e.in_types[6])
    db = e.node("ReduceSum", [dgh, e.ints([0, 1])], keepdims=0)
    return dgx, dh, dw, db


GRU_LAYER_GRAD = register(
    OpDef(
        name="gru_layer_grad",
        onnx=_onnx_gru_layer_grad,
        kind="nn",
        infer=_gru_grad_infer,
        kernel=_gru_grad_kernel,
        fast=_gru_grad_fast,
        cost=_recurrent_cost(2),
        num_outputs=4,
        batch=None,
        workspace=_workspace("gru", True, 6),
        doc="gru_layer_grad(gy, gh_n, gacts, y, acts, h0, w_hh; reverse) -> (dxg, dh0, dw_hh, "
        "db_hh): backpropagation through time of gru_layer",
    )
)


def lstm_layer(xg, h0, c0, w_hh, reverse: bool = False) -> tuple:
    """(y, h_n, c_n) of one LSTM layer and direction (see the module docstring)."""
    y, h_n, c_n, _, _ = apply(LSTM_LAYER, xg, h0, c0, w_hh, reverse=bool(reverse))
    return y, h_n, c_n


def lstm_layer_cells(xg, h0, c0, w_hh) -> tuple:
    """(y, every step's cell state) of one forward-running LSTM layer: a packed batch reads
    each sequence's final state at its own last step (nn/rnn.py)."""
    y, _, _, cs, _ = apply(LSTM_LAYER, xg, h0, c0, w_hh, reverse=False)
    return y, cs


def gru_layer(xg, h0, w_hh, b_hh, reverse: bool = False) -> tuple:
    """(y, h_n) of one GRU layer and direction (see the module docstring)."""
    y, h_n, _ = apply(GRU_LAYER, xg, h0, w_hh, b_hh, reverse=bool(reverse))
    return y, h_n
