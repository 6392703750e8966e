"""Batch normalization's fused ops (ops/batch_norm.py) and their C kernels (kernels/cbatchnorm.py):
the kernels against the NumPy kernels (random shapes, float32/float64, a mean far from zero,
NaN/Inf; bfloat16/float16 read and written in 16 bits), values, gradients and running statistics
against PyTorch (momentum, momentum=None, affine=False, track_running_stats=False, several
steps), gradients through the statistics and through the evaluation op's every input by finite
differences, graph capture, and NumPy without a compiler."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from ember.kernels import cbatchnorm, ccompile
from ember.ops import batch_norm as bn
from ember.ops._registry import apply

torch = pytest.importorskip("torch")

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _tol(dtype, length: int) -> float:
    # sums of ``length`` terms in another order, each rounded once at the end
    return 16 * float(np.finfo(dtype).eps) * np.sqrt(max(length, 1))


def _shapes(rng):
    for nd in (2, 3, 4, 5):
        for _ in range(3):
            n = int(rng.integers(1, 5))
            c = int(rng.integers(1, 9))
            spatial = tuple(int(v) for v in rng.integers(1, 7, nd - 2))
            if n * int(np.prod(spatial)) > 1:
                yield (n, c) + spatial


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("runs", [False, True], ids=["planes", "runs"])
def test_kernels_against_the_numpy_kernels(dtype, runs, monkeypatch):
    # both forms of the training kernels (plane by plane; along each sample's run of channels)
    monkeypatch.setattr(cbatchnorm, "RUNS", runs)
    rng = np.random.default_rng(0)
    for shape in [*_shapes(rng), (40, 70), (3, 9, 37)]:
        c = shape[1]
        # a mean far from zero: a variance taken as E[x^2] - E[x]^2 in float32 would lose it
        x = (rng.standard_normal(shape) * 0.5 + 1000.0).astype(dtype)
        gy = rng.standard_normal(shape).astype(dtype)
        w, b = rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype)
        length = x.size // c
        tol = _tol(dtype, length)
        got, want = cbatchnorm.train_forward(x, w, b, 1e-5), bn._train_kernel(x, w, b, eps=1e-5)
        for g, e in zip(got, want):
            assert g.dtype == e.dtype and g.shape == e.shape
        # centring rounds at the scale of |x|, not of the deviations: |x| / std times more
        scale = 1 + np.abs(x).max() * np.sqrt(1 / want[2]).max()
        np.testing.assert_allclose(got[0], want[0], rtol=tol, atol=tol * scale)
        np.testing.assert_allclose(got[1], want[1], rtol=tol)
        np.testing.assert_allclose(got[2], want[2], rtol=tol * scale, atol=tol * scale * 0.25)
        mean, var = want[1], want[2]
        zeros = np.zeros(c, dtype)
        got = bn._backward_fast(gy, zeros, zeros, x, mean, var, w, eps=1e-5)
        want = bn._backward_kernel(gy, zeros, zeros, x, mean, var, w, eps=1e-5)
        for g, e in zip(got, want):
            s = np.abs(e).max()
            np.testing.assert_allclose(g, e, rtol=tol * scale, atol=tol * scale * s)
        got = bn._eval_fast(x, mean, var, w, b, eps=1e-5)
        want = bn._eval_kernel(x, mean, var, w, b, eps=1e-5)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


def _within_one_rounding(got, want, message):
    """Double arithmetic in another order, rounded once to 16 bits: equal, or one unit in the
    last place apart (a sum on the other side of a tie)."""
    assert got.dtype == want.dtype and got.shape == want.shape, message
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=message)
    finite = np.isfinite(w)
    ulp = np.spacing(np.abs(want[finite])).astype(np.float64)
    assert np.all(np.abs(g[finite] - w[finite]) <= ulp), message


@needs_cc
@pytest.mark.parametrize("dtype", [ember.bfloat16.np, np.float16], ids=str)
def test_half_precision_kernels_read_and_write_16_bits(dtype):
    # the training forward, its backward and the evaluation affine on 16-bit arrays, computed
    # in double as the NumPy kernels compute them on widened copies
    rng = np.random.default_rng(5)
    for shape in [*_shapes(rng), (32, 16, 14, 14)]:
        c = shape[1]
        x = (rng.standard_normal(shape) * 2 + 3).astype(np.float32).astype(dtype)
        gy = rng.standard_normal(shape).astype(np.float32).astype(dtype)
        w, b = (rng.standard_normal(c).astype(np.float32).astype(dtype) for _ in range(2))
        got = cbatchnorm.train_forward(x, w, b, 1e-5)
        want = bn._train_kernel(x, w, b, eps=1e-5)
        for g, e, what in zip(got, want, ("y", "mean", "var")):
            _within_one_rounding(g, e, f"train_forward {what} {shape}")
        mean, var = want[1], want[2]
        zeros = np.zeros(c, dtype)
        got = bn._backward_fast(gy, zeros, zeros, x, mean, var, w, eps=1e-5)
        want = bn._backward_kernel(gy, zeros, zeros, x, mean, var, w, eps=1e-5)
        for g, e, what in zip(got, want, ("gx", "gweight", "gbias")):
            _within_one_rounding(g, e, f"train_backward {what} {shape}")
        got = bn._eval_fast(x, mean, var, w, b, eps=1e-5)
        _within_one_rounding(got, bn._eval_kernel(x, mean, var, w, b, eps=1e-5), "eval")


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_call_evaluation_has_the_numpy_terms_bits(dtype):
    # eval_normalize computes the per-channel terms in C: bit for bit the NumPy _scale_shift's
    # (a fused multiply-add in the shift would round once where NumPy rounds twice), then the
    # affine of eval_forward; a zero input's result is the rounded shift itself
    rng = np.random.default_rng(7)
    shapes = [*_shapes(rng), (1, 960, 4, 4), (2, 257, 3)]
    for shape in shapes:
        c = shape[1]
        x = rng.standard_normal(shape).astype(dtype)
        mean = (rng.standard_normal(c) * 50).astype(dtype)
        var = rng.uniform(1e-4, 30, c).astype(dtype)
        w, b = (rng.standard_normal(c).astype(dtype) for _ in range(2))
        eps = float(rng.choice([1e-5, 1e-3, 0.1]))
        scale, shift = bn._scale_shift(mean, var, w, b, eps)
        want = cbatchnorm.eval_forward(x, scale.astype(dtype), shift.astype(dtype))
        got = cbatchnorm.eval_normalize(x, mean, var, w, b, eps)
        assert got.dtype == x.dtype and got.shape == x.shape
        np.testing.assert_array_equal(got.view(f"u{x.itemsize}"), want.view(f"u{x.itemsize}"))
        np.testing.assert_array_equal(bn._eval_fast(x, mean, var, w, b, eps=eps), want)
        zero = cbatchnorm.eval_normalize(np.zeros((1, c), dtype), mean, var, w, b, eps)
        np.testing.assert_array_equal(
            zero[0].view(f"u{x.itemsize}"), shift.astype(dtype).view(f"u{x.itemsize}")
        )
    # operands it does not take: None (the caller's path runs)
    x = np.ones((2, 3, 4), np.float32)
    p = np.ones(3, np.float32)
    assert cbatchnorm.eval_normalize(x, p.astype(np.float64), p, p, p, 1e-5) is None
    assert cbatchnorm.eval_normalize(x, np.ones(6, np.float32)[::2], p, p, p, 1e-5) is None
    assert cbatchnorm.eval_normalize(x.astype(np.float16), p, p, p, p, 1e-5) is None
    assert cbatchnorm.eval_normalize(np.ones((0, 3), np.float32), p, p, p, p, 1e-5) is None


@needs_cc
def test_non_finite_values_spread_as_in_the_numpy_kernels():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    x[1, 1, 2, 2] = np.nan
    x[2, 2, 0, 0] = np.inf
    w, b = np.ones(3, np.float32), np.zeros(3, np.float32)
    got, want = cbatchnorm.train_forward(x, w, b, 1e-5), bn._train_kernel(x, w, b, eps=1e-5)
    for g, e in zip(got, want):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
        np.testing.assert_array_equal(np.isfinite(g), np.isfinite(e))
    assert np.isfinite(got[0][:, 0]).all()  # (channel 0 untouched)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape", [(8, 5, 6, 7), (1, 3, 4, 4), (16, 1, 3, 3), (10, 4), (6, 3, 9), (2, 3, 2, 3, 4)]
)
def test_values_gradients_and_running_stats_against_torch(shape, dtype):
    rng = np.random.default_rng(2)
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + 3).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w, b = rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype)
    ex, ew, eb = (ember.tensor(a, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    erm, erv = ember.tensor(np.zeros(c, dtype)), ember.tensor(np.ones(c, dtype))
    trm, trv = torch.zeros(c, dtype=tx.dtype), torch.ones(c, dtype=tx.dtype)
    tol = _tol(dtype, x.size // c) * 8
    for _ in range(3):
        y = F.batch_norm(ex, erm, erv, ew, eb, True, 0.2, 1e-4)
        ty = torch.nn.functional.batch_norm(tx, trm, trv, tw, tb, True, 0.2, 1e-4)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(erm.detach().numpy(), trm.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(erv.numpy(), trv.numpy(), rtol=tol, atol=tol)
    grads = ember.autograd.grad(y, (ex, ew, eb), ember.tensor(g))
    tgrads = torch.autograd.grad(ty, (tx, tw, tb), torch.tensor(g))
    for a, t in zip(grads, tgrads):
        scale = float(np.abs(t.numpy()).max()) + 1
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=tol, atol=tol * scale)
    ye = F.batch_norm(ex, erm, erv, ew, eb, False, 0.2, 1e-4)
    tye = torch.nn.functional.batch_norm(tx, trm, trv, tw, tb, False, 0.2, 1e-4)
    np.testing.assert_allclose(ye.detach().numpy(), tye.detach().numpy(), rtol=tol, atol=tol)
    grads = ember.autograd.grad(ye, (ex, ew, eb), ember.tensor(g))
    tgrads = torch.autograd.grad(tye, (tx, tw, tb), torch.tensor(g))
    for a, t in zip(grads, tgrads):
        scale = float(np.abs(t.numpy()).max()) + 1
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=tol, atol=tol * scale)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(momentum=None),
        dict(affine=False),
        dict(track_running_stats=False),
        dict(momentum=None, affine=False),
    ],
)
@pytest.mark.parametrize("captured", [False, True])
def test_module_running_stats_over_steps_equal_torch(kwargs, captured):
    """Eagerly and inside ember.function (momentum=None's factor, 1 / num_batches_tracked, is
    a graph value there)."""
    rng = np.random.default_rng(3)
    ours, theirs = nn.BatchNorm2d(4, **kwargs), torch.nn.BatchNorm2d(4, **kwargs)
    run = ember.function(lambda x: ours(x)) if captured else ours
    for step in range(4):
        x = (rng.standard_normal((3, 4, 5, 5)) * (step + 1) + step).astype(np.float32)
        y, ty = run(ember.tensor(x)), theirs(torch.tensor(x))
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    for (name, b), (_, tb) in zip(ours.named_buffers(), theirs.named_buffers()):
        np.testing.assert_allclose(
            b.detach().numpy(), tb.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name
        )
    ours.eval(), theirs.eval()
    x = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(
        ours(ember.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), atol=1e-5
    )


def _finite_difference(f, arrays, i, eps=1e-6):
    a = arrays[i]
    grad = np.zeros_like(a)
    for j in range(a.size):
        plus, minus = [b.copy() for b in arrays], [b.copy() for b in arrays]
        plus[i].flat[j] += eps
        minus[i].flat[j] -= eps
        grad.flat[j] = (f(*plus) - f(*minus)) / (2 * eps)
    return grad


def test_gradients_through_the_statistics_by_finite_differences():
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((3, 2, 4)), rng.standard_normal(2), rng.standard_normal(2)
    cy, cm, cv = rng.standard_normal((3, 2, 4)), rng.standard_normal(2), rng.standard_normal(2)

    def loss(x, w, b, lib=np):
        y, mean, var = apply(bn.BATCH_NORM_TRAIN, *(ember.tensor(a) for a in (x, w, b)), eps=1e-3)
        return float((y.numpy() * cy).sum() + (mean.numpy() * cm).sum() + (var.numpy() * cv).sum())

    ts = [ember.tensor(a, requires_grad=True) for a in (x, w, b)]
    y, mean, var = apply(bn.BATCH_NORM_TRAIN, *ts, eps=1e-3)
    total = (y * ember.tensor(cy)).sum() + (mean * ember.tensor(cm)).sum()
    total = total + (var * ember.tensor(cv)).sum()
    grads = ember.autograd.grad(total, ts)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(
            g.numpy(), _finite_difference(loss, [x, w, b], i), rtol=1e-5, atol=1e-6
        )


def test_evaluation_gradients_in_every_input_by_finite_differences():
    rng = np.random.default_rng(5)
    arrays = [
        rng.standard_normal((3, 2, 4)),
        rng.standard_normal(2),
        rng.random(2) + 0.5,
        rng.standard_normal(2),
        rng.standard_normal(2),
    ]
    cy = rng.standard_normal((3, 2, 4))

    def loss(*arrays):
        y = apply(bn.BATCH_NORM_EVAL, *(ember.tensor(a) for a in arrays), eps=1e-3)
        return float((y.numpy() * cy).sum())

    ts = [ember.tensor(a, requires_grad=True) for a in arrays]
    y = apply(bn.BATCH_NORM_EVAL, *ts, eps=1e-3)
    grads = ember.autograd.grad((y * ember.tensor(cy)).sum(), ts, create_graph=True)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(
            g.detach().numpy(), _finite_difference(loss, arrays, i), rtol=1e-5, atol=1e-6
        )
    # (differentiable again: the VJP is written in ember ops)
    (second,) = ember.autograd.grad(grads[1].sum(), (ts[2],))
    assert second.shape == (2,)


def test_a_captured_training_step_equals_eager_and_runs_the_fused_ops():
    rng = np.random.default_rng(6)

    def make():
        ember.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())

    eager_model, graph_model = make(), make()
    opt_e = ember.optim.SGD(eager_model.parameters(), lr=0.1)
    opt_g = ember.optim.SGD(graph_model.parameters(), lr=0.1)

    def step(model, opt, x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    compiled = ember.function(lambda x: step(graph_model, opt_g, x))
    for _ in range(3):
        x = ember.tensor(rng.standard_normal((4, 3, 6, 6)).astype(np.float32))
        want, got = step(eager_model, opt_e, x), compiled(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4)
    for (name, a), b in zip(graph_model.state_dict().items(), eager_model.state_dict().values()):
        np.testing.assert_allclose(
            a.detach().numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=name
        )
    ops = {n.op for g in compiled.graphs.values() for n in g.nodes if n.kind == "call"}
    assert bn.BATCH_NORM_TRAIN in ops and bn.BATCH_NORM_BACKWARD in ops


def test_without_a_compiler_numpy_runs(tmp_path):
    code = textwrap.dedent(
        """
        import warnings
        import numpy as np
        import ember
        from ember import nn
        from ember.kernels import cbatchnorm
        warnings.simplefilter("ignore")
        m = nn.BatchNorm2d(3)
        # (float32: a float64 input meets float32 buffers, which PyTorch refuses too)
        data = np.random.default_rng(0).standard_normal((4, 3, 5, 5)).astype(np.float32)
        x = ember.tensor(data, requires_grad=True)
        m(x).sum().backward()
        assert cbatchnorm.train_forward(x.detach().numpy(), np.ones(3), np.zeros(3), 1e-5) is None
        assert x.grad is not None and float(m.running_var.sum()) != 3.0
        print("ok")
        """
    )
    env = dict(os.environ, CC="/bin/false", EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH="src")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "ok" in out.stdout


def test_second_derivatives_of_training_batch_and_instance_norm_equal_torch():
    # batch_norm_backward's own VJP: a gradient penalty through a training-mode BatchNorm and
    # through InstanceNorm (batch_norm_train on N * C channels) against PyTorch's double backward
    rng = np.random.default_rng(11)
    cases = [
        ("InstanceNorm1d(3, affine=True)", (2, 3, 5)),
        ("InstanceNorm2d(3, affine=True, track_running_stats=True)", (2, 3, 4, 4)),
        ("BatchNorm2d(3)", (4, 3, 2, 3)),
        ("BatchNorm1d(4)", (6, 4)),
    ]
    for spec, shape in cases:
        xn = rng.standard_normal(shape)
        weights = np.arange(xn.size).reshape(shape) % 7 / 7.0
        params = None
        results = []
        for ns in (ember, torch):
            m = eval(f"ns.nn.{spec}", {"ns": ns}).double()
            if params is None:
                params = [rng.standard_normal(tuple(p.shape)) for p in m.parameters()]
            with ns.no_grad():
                for p, v in zip(m.parameters(), params):
                    p.copy_(ns.tensor(v))
            x = ns.tensor(xn, requires_grad=True)
            y = m(x)
            loss = (y * y * ns.tensor(weights)).sum()
            (g,) = ns.autograd.grad(loss, x, create_graph=True)
            ((g * g).sum() + (g * x).sum()).backward()
            results.append([x.grad.detach().numpy()] + [p.grad.numpy() for p in m.parameters()])
        for got, want in zip(*results):
            np.testing.assert_allclose(
                got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max(), err_msg=spec
            )
