"""nn.RNN (tanh and relu) on the whole-layer op (ops/recurrent_elman.py: ``rnn_layer`` and its
BPTT grad, kernels/crnn.py's C time loop, cells 2 and 3): the C loop against the NumPy kernels
(forward and backward, both directions, both dtypes, non-contiguous operands, NaN), and the
layer against torch.nn.RNN eagerly and captured by ``ember.function`` (one op a layer and
direction in the graph)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn
from ember.kernels import ccompile, crnn
from ember.ops import recurrent_elman

from .compare import assert_close, compare_module, copy_weights, torch

r = np.random.default_rng(47)


def _close(got, want, dtype, terms, what):
    # each output is a sum of `terms` products in another order, and libmvec's tanh: a few
    # ulps of the result per term
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=8 * terms * eps, atol=8 * terms * eps, err_msg=what)


@pytest.mark.skipif(
    not ccompile.compiler_available(), reason="no C compiler: the C time loop needs one"
)
def test_c_loop_matches_the_numpy_kernels():
    for dtype in (np.float32, np.float64):
        for relu in (False, True):
            for reverse in (False, True):
                for steps, rows, hidden in ((5, 3, 4), (3, 9, 70), (1, 2, 100)):
                    scale = 1 / np.sqrt(hidden)
                    # xg non-contiguous; W_hh in a layout the GEMM reads transposed
                    xg = r.standard_normal((steps, rows, 2 * hidden))[:, :, ::2].astype(dtype)
                    h0 = r.standard_normal((rows, hidden)).astype(dtype)
                    w = np.asfortranarray(r.standard_normal((hidden, hidden)) * scale, dtype)
                    got = crnn.elman_forward(xg, h0, w, relu, reverse)
                    want = recurrent_elman._kernel(xg, h0, w, reverse=reverse, relu=relu)
                    what = f"{np.dtype(dtype).name} relu={relu} reverse={reverse} {steps, rows}"
                    for g, e in zip(got, want):
                        _close(g, e, dtype, hidden * steps, f"forward {what}")
                    y = want[0]
                    gy = r.standard_normal(y.shape).astype(dtype)
                    ghn = r.standard_normal(h0.shape).astype(dtype)
                    got = crnn.elman_backward(gy, ghn, y, h0, w, relu, reverse)
                    want = recurrent_elman._grad_kernel(
                        gy, ghn, y, h0, w, reverse=reverse, relu=relu
                    )
                    for g, e in zip(got, want):
                        _close(g, e, dtype, hidden * steps * rows, f"backward {what}")
    xg = r.standard_normal((3, 2, 4)).astype(np.float32)
    xg[1, 0, 2] = np.nan
    h0, w = np.zeros((2, 4), np.float32), r.standard_normal((4, 4)).astype(np.float32)
    for relu in (False, True):
        got = crnn.elman_forward(xg, h0, w, relu, False)
        want = recurrent_elman._kernel(xg, h0, w, reverse=False, relu=relu)
        for g, e in zip(got, want):
            np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
    assert crnn.elman_forward(xg.astype(np.float16), h0, w, False, False) is None


def test_layer_matches_torch_eagerly_and_captured():
    tnn = torch.nn
    cases = [
        ("tanh", 1, False, True, np.float32),
        ("relu", 2, True, False, np.float64),
        ("tanh", 2, True, True, np.float64),
        ("relu", 1, False, False, np.float32),
    ]
    for act, layers, bidir, first, dtype in cases:
        kwargs = dict(nonlinearity=act, num_layers=layers, bidirectional=bidir, batch_first=first)
        x = r.standard_normal((3, 6, 4) if first else (6, 3, 4))
        h0 = r.standard_normal((layers * (1 + bidir), 3, 5)) * 0.5
        compare_module(nn.RNN(4, 5, **kwargs), tnn.RNN(4, 5, **kwargs), [x, h0], dtype=dtype)
        compare_module(nn.RNN(4, 5, **kwargs), tnn.RNN(4, 5, **kwargs), [x], dtype=dtype)

        e, t = nn.RNN(4, 5, **kwargs), tnn.RNN(4, 5, **kwargs)
        if dtype is np.float64:
            e, t = e.to(ember.float64), t.to(torch.float64)
        copy_weights(e, t)

        @ember.function
        def step(x):
            value = (e(x)[0] ** 2).sum()
            value.backward()
            return value

        value = step(ember.tensor(x.astype(dtype)))
        t_value = (t(torch.tensor(x.astype(dtype)))[0] ** 2).sum()
        t_value.backward()
        what = f"{act} layers={layers} bidir={bidir}"
        assert_close(value.numpy(), t_value.detach().numpy(), dtype, f"loss {what}")
        for (name, p), tp in zip(e.named_parameters(), t.parameters()):
            assert_close(p.grad.numpy(), tp.grad.numpy(), dtype, f"gradient of {name} {what}")
        with ember.no_grad():
            graph = ember.trace(lambda a: e(a)[0], ember.tensor(x.astype(dtype))).graph
        assert str(graph).count("= rnn_layer(") == layers * (1 + bidir), what
