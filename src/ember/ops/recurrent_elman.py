"""The whole-layer Elman RNN: ``rnn_layer`` runs one layer and direction of ``nn.RNN`` (tanh or
relu) over every time step, and ``rnn_layer_grad`` runs its backpropagation through time, as
ops/recurrent.py's ``lstm_layer`` and ``gru_layer`` do for their cells (read that module
first; the helpers are its own).

* ``rnn_layer(xg, h0, w_hh; reverse, relu) -> (y, h_n)``: ``xg`` (T, B, H) is every step's
  input projection with both biases, ``x @ W_ih^T + b_ih + b_hh``; each step is
  ``h = act(xg[t] + h @ W_hh^T)`` with ``act`` tanh or (``relu``) relu. ``y`` (T, B, H) holds
  every step's h, which is all the backward pass reads (tanh's derivative is ``1 - h^2``,
  relu's ``h > 0``).
* ``rnn_layer_grad(gy, gh_n, y, h0, w_hh; reverse, relu) -> (dxg, dh0, dw_hh)``.

The NumPy kernels are the specification; kernels/crnn.py's C loop (cells 2 and 3) the fast
rule. The grad op has no VJP (no second derivative through a fused recurrence).
"""

from __future__ import annotations

import numpy as np

from ..types import TensorType
from ._recurrent_workspace import workspace
from ._registry import OpDef, apply, register
from ._rules import Autocast
from .recurrent import (
    _check,
    _onnx_steps,
    _onnx_time_loop,
    _onnx_weight_grad,
    _order,
    _recurrent_cost,
    _weight_grad,
    kept_pack_compile,
    recurrent_c_step,
)

__all__ = ["rnn_layer"]


def _infer(xg, h0, w_hh, *, reverse, relu):
    hidden = _check("rnn_layer", xg, (h0,), w_hh, 1)
    steps, rows = xg.shape[0], xg.shape[1]
    return TensorType((steps, rows, hidden), xg.dtype), TensorType((rows, hidden), xg.dtype)


def _kernel(xg, h0, w_hh, *, reverse, relu):
    y = np.empty(xg.shape, xg.dtype)
    h = h0
    for t in _order(xg.shape[0], reverse):
        pre = xg[t] + np.matmul(h, w_hh.T)
        h = np.maximum(pre, 0) if relu else np.tanh(pre)
        y[t] = h
    return y, np.array(h, copy=True)


def _fast(xg, h0, w_hh, *, reverse, relu, packs=None):
    from ..kernels import crnn

    return crnn.elman_forward(xg, h0, w_hh, relu, reverse, packs=packs)


def _vjp(ctx, gy, ghn):
    _, h0, w_hh = ctx.inputs
    y, _ = ctx.outputs
    return apply(RNN_LAYER_GRAD, gy, ghn, y, h0, w_hh, **ctx.attrs)


def _grad_infer(gy, ghn, y, h0, w_hh, *, reverse, relu):
    return tuple(TensorType(tuple(t.shape), t.dtype) for t in (y, h0, w_hh))


def _grad_kernel(gy, ghn, y, h0, w_hh, *, reverse, relu):
    dg = np.empty_like(y)
    dh = ghn
    for t in reversed(_order(y.shape[0], reverse)):
        dh = dh + gy[t]
        dg[t] = dh * (y[t] > 0) if relu else dh * (1 - y[t] * y[t])
        dh = np.matmul(dg[t], w_hh)
    return dg, np.array(dh, copy=True), _weight_grad(dg, y, h0, reverse)


def _grad_fast(gy, ghn, y, h0, w_hh, *, reverse, relu):
    from ..kernels import crnn

    return crnn.elman_backward(gy, ghn, y, h0, w_hh, relu, reverse)


def _onnx_layer(e):
    w_t = e.node("Transpose", [e.inputs[2]], perm=[1, 0])
    activation = "Relu" if e.attrs["relu"] else "Tanh"

    def step(e, h, x):
        h = e.node(activation, [e.node("Add", [x, e.node("MatMul", [h, w_t])])])
        return h, h

    h_type = e.in_types[1]
    h_n, y = _onnx_time_loop(e, 1, step, 1, [h_type] * 2)
    return y, h_n


RNN_LAYER = register(
    OpDef(
        name="rnn_layer",
        grad_fn="StackBackward0",  # (PyTorch's CPU RNN stacks its steps' outputs)
        onnx=_onnx_layer,
        kind="nn",
        infer=_infer,
        kernel=_kernel,
        fast=_fast,
        compile=kept_pack_compile(2, _fast),
        c_step=recurrent_c_step(lambda attrs: "relu" if attrs["relu"] else "tanh", 2),
        vjp=_vjp,
        cost=_recurrent_cost(1),
        num_outputs=2,
        autocast=Autocast.FP32,  # (as lstm_layer's)
        save_inputs=(1, 2),
        save_outputs=(0,),
        batch=None,
        workspace=workspace("rnn", False, 2),
        doc="rnn_layer(xg, h0, w_hh; reverse, relu) -> (y, h_n): one Elman RNN layer and "
        "direction over every step, xg the input projection with both biases",
    )
)


def _onnx_layer_grad(e):
    gy, ghn, y, h0, w_hh = e.inputs
    reverse, relu = e.attrs["reverse"], e.attrs["relu"]
    dtype = e.in_types[2].dtype
    one = e.scalar(1, dtype)
    zero = e.scalar(0, dtype)

    def step(e, dh, gy_t, y_t):
        dh = e.node("Add", [dh, gy_t])
        if relu:
            slope = e.node("Cast", [e.node("Greater", [y_t, zero])], to=e.dtype(dtype))
        else:
            slope = e.node("Sub", [one, e.node("Mul", [y_t, y_t])])
        dg_t = e.node("Mul", [dh, slope])
        return e.node("MatMul", [dg_t, w_hh]), dg_t

    state = e.in_types[1]
    step_type = TensorType(tuple(state.shape), dtype)
    dh, dg = _onnx_steps(
        e, [ghn], [state], [gy, y], [e.in_types[0], e.in_types[2]], step, [step_type],
        not reverse,
    )  # fmt: skip
    return dg, dh, _onnx_weight_grad(e, dg, y, h0, reverse, e.in_types[4])


RNN_LAYER_GRAD = register(
    OpDef(
        name="rnn_layer_grad",
        onnx=_onnx_layer_grad,
        kind="nn",
        infer=_grad_infer,
        kernel=_grad_kernel,
        fast=_grad_fast,
        cost=_recurrent_cost(2),
        num_outputs=3,
        batch=None,
        workspace=workspace("rnn", True, 4),
        doc="rnn_layer_grad(gy, gh_n, y, h0, w_hh; reverse, relu) -> (dxg, dh0, dw_hh): "
        "backpropagation through time of rnn_layer",
    )
)


def rnn_layer(xg, h0, w_hh, reverse: bool = False, relu: bool = False) -> tuple:
    """(y, h_n) of one Elman RNN layer and direction (see the module docstring)."""
    return apply(RNN_LAYER, xg, h0, w_hh, reverse=bool(reverse), relu=bool(relu))
