"""LSTM and GRU layers on the whole-layer ops (ops/recurrent.py: ``lstm_layer``, ``gru_layer``
and their BPTT grads, the C time loop in kernels/crnn.py) against torch.nn.LSTM / nn.GRU with the
same weights: outputs, h_n, c_n, input, initial-state and every parameter gradient, over layers
1-3, both directions, both batch layouts, with and without initial states, float32 and float64;
eagerly, captured by ``ember.function`` (a training step), and with the C kernels unavailable
(the NumPy reference runs)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import nn
from ember.kernels import crnn

from .compare import assert_close, compare_module, copy_weights, torch

tnn = torch.nn
r = np.random.default_rng(20)

# kind, layers, bidirectional, batch_first, initial states given, dtype
GRID = [
    (kind, layers, bidir, first, h0, dtype)
    for kind, layers, bidir, first, h0, dtype in itertools.product(
        ("LSTM", "GRU"),
        (1, 2, 3),
        (False, True),
        (False, True),
        (False, True),
        (np.float32, np.float64),
    )  # fmt: skip
    # a slice of the grid that still varies every factor against every other one
    if (layers + bidir + first + h0 + (dtype is np.float64)) % 2 == 0
]


def _case_id(case) -> str:
    kind, layers, bidir, first, h0, dtype = case
    flags = ["bidir"] * bidir + ["batch_first"] * first + ["h0"] * h0
    return "-".join([kind, f"{layers}layer", *flags, np.dtype(dtype).name])


def _inputs(kind, layers, bidir, first, h0, hidden=5, steps=6, batch=3, size=4):
    x = r.standard_normal((batch, steps, size) if first else (steps, batch, size))
    states = []
    if h0:
        shape = (layers * (2 if bidir else 1), batch, hidden)
        states = [r.standard_normal(shape) * 0.5 for _ in range(2 if kind == "LSTM" else 1)]
    return x, states


def _call(kind):
    def call(module, x, *states):
        if not states:
            return module(x)
        return module(x, tuple(states) if kind == "LSTM" else states[0])

    return call


@pytest.mark.parametrize("case", GRID, ids=_case_id)
def test_eager_layer_matches_torch(case):
    kind, layers, bidir, first, h0, dtype = case
    x, states = _inputs(kind, layers, bidir, first, h0)

    def make(lib):
        return getattr(lib, kind)(4, 5, num_layers=layers, bidirectional=bidir, batch_first=first)

    compare_module(make(nn), make(tnn), [x, *states], dtype=dtype, call=_call(kind))


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_without_bias_and_unbatched(kind):
    make = lambda lib: getattr(lib, kind)(3, 4, bias=False, num_layers=2)  # noqa: E731
    compare_module(make(nn), make(tnn), [r.standard_normal((5, 3))])


@pytest.mark.parametrize("case", GRID[::3], ids=_case_id)
def test_captured_training_step_matches_torch(case):
    """The step (forward, loss, backward) under ember.function: the graph holds one whole-layer
    op per layer and direction, and the parameter gradients equal torch's."""
    kind, layers, bidir, first, h0, dtype = case
    x, states = _inputs(kind, layers, bidir, first, h0)
    kwargs = {"num_layers": layers, "bidirectional": bidir, "batch_first": first}
    e = getattr(nn, kind)(4, 5, **kwargs).to(
        ember.float32 if dtype is np.float32 else ember.float64
    )
    t = getattr(tnn, kind)(4, 5, **kwargs).to(
        torch.float32 if dtype is np.float32 else torch.float64
    )
    copy_weights(e, t)
    weights = r.standard_normal((6, 3, 10 if bidir else 5)).astype(dtype)
    if first:
        weights = weights.transpose(1, 0, 2).copy()

    def loss(module, tensor, x, *states):
        out = _call(kind)(module, x, *states)[0]
        return (out * tensor(weights)).sum() + (out * out).mean()

    call = _call(kind)
    e_args = [ember.tensor(a.astype(dtype)) for a in (x, *states)]

    @ember.function
    def step(*args):
        value = loss(e, ember.tensor, *args)
        value.backward()
        return value

    value = step(*e_args)
    t_value = loss(t, torch.tensor, *(torch.tensor(a.astype(dtype)) for a in (x, *states)))
    t_value.backward()
    assert_close(value.numpy(), t_value.detach().numpy(), dtype, "loss")
    for (name, p), tp in zip(e.named_parameters(), t.parameters()):
        assert_close(p.grad.numpy(), tp.grad.numpy(), dtype, f"gradient of {name}")
    with ember.no_grad():
        graph = ember.trace(lambda *a: call(e, *a)[0], *e_args).graph
    op = "lstm_layer" if kind == "LSTM" else "gru_layer"
    assert str(graph).count(f"= {op}(") == layers * (2 if bidir else 1)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_numpy_reference_runs_where_the_c_kernels_do_not(kind, monkeypatch):
    """With the C loop unavailable every whole-layer op runs its NumPy kernel, and the
    layer still equals torch's."""
    monkeypatch.setattr(crnn, "_loop", lambda dtype: None)
    x, states = _inputs(kind, 2, True, False, True)
    make = lambda lib: getattr(lib, kind)(4, 5, num_layers=2, bidirectional=True)  # noqa: E731
    compare_module(make(nn), make(tnn), [x, *states], dtype=np.float32, call=_call(kind))


def test_no_compiler_falls_back_to_numpy():
    """CC=/bin/false in a fresh process: the layer runs (one warning at most) and its outputs
    and gradients equal those of this process (C kernels) to float rounding."""
    lstm = nn.LSTM(3, 4, num_layers=2)
    x = ember.tensor(r.standard_normal((5, 2, 3)).astype(np.float32), requires_grad=True)
    out = lstm(x)[0]
    out.sum().backward()
    script = (
        "import sys, numpy as np, ember\n"
        "from ember import nn\n"
        "from ember.kernels import ccompile\n"
        "assert not ccompile.compiler_available()\n"
        "lstm = nn.LSTM(3, 4, num_layers=2)\n"
        "state = np.load(sys.argv[1])\n"
        "lstm.load_state_dict({k: ember.tensor(state[k]) for k in state.files if k != 'x'})\n"
        "x = ember.tensor(state['x'], requires_grad=True)\n"
        "out = lstm(x)[0]\n"
        "out.sum().backward()\n"
        "np.savez(sys.argv[2], out=out.detach().numpy(), gx=x.grad.numpy())\n"
    )
    folder = Path(os.environ.get("TMPDIR", "/tmp"))
    src, dst = folder / f"rnn_cc_{os.getpid()}.npz", folder / f"rnn_cc_out_{os.getpid()}.npz"
    np.savez(src, x=x.detach().numpy(), **{k: v.numpy() for k, v in lstm.state_dict().items()})
    env = dict(os.environ, CC="/bin/false", PYTHONPATH=str(Path(ember.__file__).parents[1]))
    try:
        done = subprocess.run(
            [sys.executable, "-c", script, str(src), str(dst)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        got = np.load(dst)
        assert_close(got["out"], out.detach().numpy(), np.float32, "output")
        assert_close(got["gx"], x.grad.numpy(), np.float32, "input gradient")
    finally:
        for path in (src, dst):
            path.unlink(missing_ok=True)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_second_derivative_through_the_fused_backward_matches_pytorch(kind):
    """Eagerly, create_graph=True through a whole-layer op records the BPTT as a
    differentiable composite (ops/recurrent_double.py; the fused grad op has no VJP): the
    gradient of the input gradient matches PyTorch's double backward."""
    t_mod = getattr(tnn, kind)(3, 4, bidirectional=True).double()
    e_mod = getattr(nn, kind)(3, 4, bidirectional=True).double()
    copy_weights(e_mod, t_mod)
    x0 = r.standard_normal((4, 2, 3))
    grads = []
    for lib, mod in ((torch, t_mod), (ember, e_mod)):
        x = lib.tensor(x0, requires_grad=True)
        (gx,) = lib.autograd.grad(mod(x)[0].pow(2).sum(), [x], create_graph=True)
        gx.pow(2).sum().backward()
        grads.append([x.grad.numpy()] + [p.grad.numpy() for p in mod.parameters()])
    for want, got in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_nested_grad_in_a_captured_function_is_differentiable():
    """ember.grad inside ember.function with parameters that require grad: the gradient is
    differentiated again (JAX's semantics), so the layer records its scan form there."""
    lstm = nn.LSTM(3, 4, num_layers=2).double()
    x = ember.tensor(r.standard_normal((5, 2, 3)))
    value, gx = ember.function(ember.value_and_grad(lambda a: lstm(a)[0].sum()))(x)
    leaf = ember.tensor(x.numpy(), requires_grad=True)
    eager = lstm(leaf)[0].sum()
    eager.backward()
    np.testing.assert_allclose(value.item(), eager.item(), rtol=1e-12)
    np.testing.assert_allclose(
        gx.detach().numpy(), leaf.grad.detach().numpy(), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell"])
def test_cells_run_the_fused_op_and_match_torch(kind):
    """A cell is the fused op over one step; float32, a few steps of a user's loop, eagerly."""
    make = lambda lib: getattr(lib, kind)(3, 4)  # noqa: E731
    x, h = r.standard_normal((5, 2, 3)), r.standard_normal((2, 4)) * 0.5
    lstm = kind == "LSTMCell"

    def call(module, x, h):
        state = (h, h * 0.5) if lstm else h
        outs = []
        for t in range(x.shape[0]):
            state = module(x[t], state)
            outs.append(state[0] if lstm else state)
        return outs

    compare_module(make(nn), make(tnn), [x, h], dtype=np.float32, call=call)
    cell = make(nn)
    with ember.no_grad():
        args = ember.tensor(x.astype(np.float32)), ember.tensor(h.astype(np.float32))
        graph = ember.trace(lambda a, b: call(cell, a, b)[-1], *args)
    op = "lstm_layer" if lstm else "gru_layer"
    assert str(graph.graph).count(f"= {op}(") == x.shape[0]
