"""PyTorch 2.13 semantics of three corners, compared with PyTorch: a float16/bfloat16 tensor
multiplied or divided by a number (computed in float32 with the number as a float32, rounded
once: ``h * 1e30`` is inf, never 0 * inf = NaN, and ``h * 0.1`` is not ``h * half(0.1)``);
``x.masked_scatter_(mask, source)`` with a source sharing x's memory (read as PyTorch's loop
reads it, seeing earlier writes); copysign's second derivative (NaN at zeros, as PyTorch's
formula gives)."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

HALVES = ["float16", "bfloat16"]
NUMBERS = [0.1, 1 / 3, 7.3, 1e-5, 1e30, -1e30, 3, 4097, 2.0]


def _data():
    x = np.random.RandomState(0).randn(2000).astype(np.float32) * 4
    x[:4] = [0.0, -0.0, np.inf, np.nan]
    return x


def _same(a, b):
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    a, b = a.float().numpy(), b.detach().float().numpy()
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("how", ["mul", "div", "rmul", "rdiv", "imul", "idiv", "mul_0d"])
def test_half_times_number_is_float32_math(dtype, how):
    x = _data()
    for s in NUMBERS:
        results = []
        for m in (torch, ember):
            t = m.tensor(x).to(getattr(m, dtype))
            if how == "mul":
                r = t * s
            elif how == "div":
                r = t.div(s)
            elif how == "rmul":
                r = s * t
            elif how == "rdiv":
                r = s / t
            elif how == "imul":
                r = t.clone()
                r *= s
            elif how == "idiv":
                r = t.clone()
                r.div_(s)
            else:
                r = t * m.tensor(s, dtype=m.float64)
            results.append(r)
        _same(*results)


@pytest.mark.parametrize("dtype", HALVES)
def test_half_times_number_gradient(dtype):
    x = _data()[4:40]
    grads, names = [], []
    for m in (torch, ember):
        t = m.tensor(x).to(getattr(m, dtype)).requires_grad_()
        out = t * 0.1 / 7.3
        names.append(type(out.grad_fn).__name__)
        out.backward(m.ones_like(out) * 3.3)
        grads.append(t.grad)
    _same(*grads)
    assert names[0] == names[1]


def _masked_scatter_cases(m):
    x = m.arange(8.0)
    mask = m.tensor([1, 0, 1, 1, 0, 1, 1, 1], dtype=m.bool)
    out = []
    y = x.clone()
    out.append(y.masked_scatter_(mask, y))
    y = x.clone()
    out.append(y.masked_scatter_(mask, y[1:]))
    y = x.clone()
    y[2:].masked_scatter_(mask[2:], y)
    out.append(y)
    y = x.clone()
    out.append(y.masked_scatter_(mask, y.flip(0)))
    y = x.clone().reshape(2, 4)
    out.append(y.masked_scatter_(m.tensor([True, False, True, True]), y))
    y = x.clone()
    out.append(m.masked_scatter(y, mask, y))
    out.append(y.masked_scatter(mask, y))
    y = x.clone()
    out.append(y.masked_scatter_(m.tensor([1, 1, 0, 1, 0, 1, 0, 0], dtype=m.bool), y[3:]))
    return out


def test_masked_scatter_reads_an_overlapping_source_as_it_writes():
    for a, b in zip(_masked_scatter_cases(torch), _masked_scatter_cases(ember), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_masked_scatter_self_source_with_history():
    out = []
    for m in (torch, ember):
        leaf = m.arange(6.0, requires_grad=True)
        y = leaf * 2
        mask = m.tensor([0, 1, 1, 0, 1, 1], dtype=m.bool)
        y.masked_scatter_(mask, y)
        name = type(y.grad_fn).__name__
        y.backward(m.arange(6.0) + 1)
        out.append((y.detach().numpy().copy(), leaf.grad.numpy(), name))
    (ty, tg, tn), (ey, eg, en) = out
    np.testing.assert_array_equal(ty, ey)
    np.testing.assert_array_equal(tg, eg)
    assert tn == en


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_copysign_second_derivative(dtype):
    out = []
    for m in (torch, ember):
        a = m.tensor([0.0, 1.5, -0.0, -2.0, 3.0], dtype=getattr(m, dtype), requires_grad=True)
        b = m.tensor([1.0, -1.0, 2.0, 0.5, -0.0], dtype=getattr(m, dtype), requires_grad=True)
        y = m.copysign(a, b)
        (ga,) = m.autograd.grad((y * y.detach()).sum(), a, create_graph=True)
        gga, ggb = m.autograd.grad(ga.sum(), (a, b), allow_unused=True)
        out.append([ga.detach(), gga, ggb])
    for t, e in zip(*out, strict=True):
        if t is None or e is None:
            assert t is None and (e is None or not e.numpy().any())
            continue
        np.testing.assert_array_equal(t.numpy(), e.numpy())


def test_masked_scatter_refuses_a_short_source():
    for m in (torch, ember):
        y = m.arange(8.0)
        for call in (
            lambda: y.masked_scatter_(m.ones(8, dtype=m.bool), m.arange(5.0)),
            lambda: m.masked_scatter(y, m.ones(2, 1, dtype=m.bool), m.arange(15.0)),
        ):
            with pytest.raises(RuntimeError, match="source|Number of elements"):
                call()
        # (enough elements: fine)
        m.masked_scatter(y, m.ones(2, 1, dtype=m.bool), m.arange(16.0))


@pytest.mark.parametrize("beta, alpha", [(0.2, 0.6), (1.7, 2.9), (-1.7, -2.6), (2, 1.5)])
def test_integer_add_products_truncate_float_scalars(beta, alpha):
    def run(m):
        v, b = m.tensor([1, 1]), m.tensor([5, 6])
        mat = m.tensor([[1, 2], [3, 4]])
        return [
            m.addmv(b, mat, v, beta=beta, alpha=alpha),
            m.addmm(b, mat, mat, beta=beta, alpha=alpha),
            m.baddbmm(b, mat[None], mat[None], beta=beta, alpha=alpha),
            m.addbmm(b, mat[None], mat[None], beta=beta, alpha=alpha),
            b.clone().addmv_(mat, v, beta=beta, alpha=alpha),
        ]

    for t, e in zip(run(torch), run(ember), strict=True):
        assert e.dtype is ember.int64
        np.testing.assert_array_equal(t.numpy(), e.numpy())
    for m in (torch, ember):  # (addr and add refuse a float scalar of an integer result)
        v = m.tensor([1, 2])
        with pytest.raises(RuntimeError):
            m.addr(m.ones(2, 2, dtype=m.int64), v, v, beta=1.5)
        with pytest.raises(RuntimeError):
            m.add(v, v, alpha=1.5)


def test_zero_norm_has_no_gradient():
    """PyTorch's backward of a 0-norm is undefined: x.grad stays None (ember gave zeros)."""
    for m in (torch, ember):
        for norm in (
            lambda x: m.linalg.vector_norm(x, 0),
            lambda x: m.norm(x, p=0),
            lambda x: m.linalg.vector_norm(x, 0.0, dim=1),
        ):
            x = m.tensor([[1.0, -2.0, 0.0], [3.0, 0.5, -1.0]], requires_grad=True)
            y = norm(x)
            assert y.requires_grad
            y.sum().backward()
            assert x.grad is None
        x = m.tensor([1.0, 0.0, 2.0], requires_grad=True)
        (m.linalg.vector_norm(x, 0) + x.sum()).backward()
        assert x.grad.tolist() == [1.0, 1.0, 1.0]
