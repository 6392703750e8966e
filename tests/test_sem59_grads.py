"""Gradients at the edges, against PyTorch 2.13 (and finite differences in float64):
as_strided windows reaching outside their input's own elements (PyTorch's as_strided_backward
gives only the input's elements a gradient), special.entr and logit at 0, 1, negative values,
inf and NaN (one op each now, their derivatives.yaml formulas unmasked), and ``Tensor.chalf``'s
refusal (ember has no complex32)."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

WINDOWS = [((3,), (1,), 0), ((2, 2), (1, 1), 0), ((3,), (1,), 1), ((2,), (2,), 1), ((4,), (1,), 0),
           ((2, 3), (2, 1), 0), ((3,), (2,), 1)]  # fmt: skip


def _window_grad(m, size, stride, offset, start):
    base = m.arange(8.0, dtype=m.float64).requires_grad_()
    x = (base * 1.5)[start : start + 4]  # (a view of a non-leaf: its root's memory)
    y = m.as_strided(x, size, stride, offset)
    w = m.arange(1.0, 1.0 + int(np.prod(size)), dtype=m.float64).reshape(size)
    (y * w).sum().backward()
    return y.detach().numpy(), base.grad.numpy()


@pytest.mark.parametrize("start", [1, 2])
@pytest.mark.parametrize("size,stride,offset", WINDOWS)
def test_as_strided_outside_its_input_grads_as_pytorch(size, stride, offset, start):
    t_val, t_grad = _window_grad(torch, size, stride, offset, start)
    e_val, e_grad = _window_grad(ember, size, stride, offset, start)
    np.testing.assert_array_equal(e_val, t_val)
    np.testing.assert_array_equal(e_grad, t_grad)


def test_as_strided_within_its_input_passes_gradcheck():
    # (a window inside the input: there the gradient is the function's, finite differences
    # agree; outside it PyTorch's own gradcheck fails too: the window reads elements the
    # gradient does not reach)
    base = ember.arange(6.0, dtype=ember.float64).requires_grad_()

    def f(b):
        x = (b * 2.0)[1:5]
        return ember.as_strided(x, (2, 2), (1, 1), x.storage_offset()) ** 2

    assert ember.autograd.gradcheck(f, (base,))


EDGES = [0.0, -0.0, -1.0, 0.25, 1.0, 2.0, float("inf"), float("-inf"), float("nan")]


def _value_and_grad(m, fn, values):
    x = m.tensor(values, dtype=m.float64, requires_grad=True)
    out = fn(m, x)
    out.sum().backward()
    return out.detach().numpy(), x.grad.numpy(), out.grad_fn.name()


@pytest.mark.parametrize(
    "name,fn",
    [
        ("entr", lambda m, x: m.special.entr(x)),
        ("logit", lambda m, x: m.logit(x)),
        ("logit-eps", lambda m, x: m.logit(x, 0.1)),
        ("special.logit-eps", lambda m, x: m.special.logit(x, eps=0.3)),
    ],
)
def test_edge_values_and_gradients_as_pytorch(name, fn):
    t_val, t_grad, t_node = _value_and_grad(torch, fn, EDGES)
    e_val, e_grad, e_node = _value_and_grad(ember, fn, EDGES)
    np.testing.assert_allclose(e_val, t_val, rtol=1e-15, equal_nan=True)
    np.testing.assert_allclose(e_grad, t_grad, rtol=1e-15, equal_nan=True)
    assert e_node == t_node


@pytest.mark.parametrize("fn", [lambda x: ember.special.entr(x), lambda x: ember.logit(x, 0.2)])
def test_gradcheck_inside_the_domain(fn):
    x = ember.tensor([0.05, 0.3, 0.6, 0.9, 1.7], dtype=ember.float64, requires_grad=True)
    if fn(ember.tensor([1.7], dtype=ember.float64)).item() == fn(ember.tensor([1.8])).item():
        x = ember.tensor([0.05, 0.3, 0.6, 0.7], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(fn, (x,))
    assert ember.autograd.gradgradcheck(fn, (x,))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_logit_values_in_low_precision_as_pytorch(dtype):
    v = np.linspace(-0.1, 1.1, 301)
    for eps in (None, 0.05):
        t = torch.logit(torch.tensor(v, dtype=getattr(torch, dtype)), eps).double().numpy()
        e = ember.logit(ember.tensor(v, dtype=getattr(ember, dtype)), eps).double().numpy()
        # (16-bit: PyTorch's rounding after each step, bit for bit; float32: its vectorized
        # log is not correctly rounded, an ulp apart)
        rtol = 0 if dtype != "float32" else 2.0**-22
        np.testing.assert_allclose(e, t, rtol=rtol, atol=0, equal_nan=True)


def test_chalf_is_refused_naming_the_alternative():
    with pytest.raises(AttributeError, match="complex32") as info:
        ember.ones(2).chalf()
    assert "cfloat" in str(info.value)
