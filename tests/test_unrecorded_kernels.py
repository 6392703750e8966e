"""The products' VJPs without dispatches (ops/_unrecorded.py): the same bits as the
dispatched transposes and products, PyTorch's gradients, and the dispatcher kept where the
backward records (create_graph=True), profiles, or gets a gradient the product refuses."""

import numpy as np
import pytest
import torch

import ember
from ember.errors import EmberError
from ember.ops import _unrecorded

RNG = np.random.default_rng(54)


def _arr(*shape, dtype=np.float32):
    a = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * RNG.standard_normal(shape)
    return a.astype(dtype)


def _grads(lib, arrays, fn):
    leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = fn(lib, *leaves)
    loss = (out * out.conj()).real.sum() if out.dtype.is_complex else (out * out).sum()
    loss.backward()
    return [leaf.grad.numpy() for leaf in leaves]


def _matmul(lib, a, b):
    return lib.tanh(a @ b) if not a.dtype.is_complex else a @ b


def _matmul_transposed(lib, a, b):  # b read as b.T: the column-major path
    return a @ b.T


def _linear(lib, x, w, bias):
    return lib.nn.functional.linear(x, w, bias)


CASES = [
    (_matmul, [(5, 7), (7, 3)], np.float32),
    (_matmul, [(5, 7), (7, 3)], np.float64),
    (_matmul, [(4, 5, 7), (7, 3)], np.float32),  # a batch folded into one product
    (_matmul, [(2, 5, 7), (2, 7, 3)], np.float32),  # batched: the dispatched path
    (_matmul, [(5, 7), (7, 3)], np.complex64),
    (_matmul_transposed, [(5, 7), (3, 7)], np.float32),
    (_linear, [(6, 7), (3, 7), (3,)], np.float32),
    (_linear, [(2, 6, 7), (3, 7), (3,)], np.float64),
]


@pytest.mark.parametrize("fn,shapes,dtype", CASES)
def test_same_bits_as_dispatched_and_torch(fn, shapes, dtype, monkeypatch):
    arrays = [_arr(*s, dtype=dtype) for s in shapes]
    direct = _grads(ember, arrays, fn)
    monkeypatch.setattr(_unrecorded, "plain_eager_no_grad", lambda: False)
    dispatched = _grads(ember, arrays, fn)
    for d, s in zip(direct, dispatched):
        assert d.dtype == s.dtype and d.shape == s.shape
        np.testing.assert_array_equal(d, s)
    reference = _grads(torch, arrays, fn)
    tol = 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    for d, r in zip(direct, reference):
        np.testing.assert_allclose(d, r, rtol=tol, atol=tol)


def test_direct_only_when_nothing_is_recorded(monkeypatch):
    calls = []
    original = _unrecorded.direct_product

    def counting(*args, **kwargs):
        out = original(*args, **kwargs)
        calls.append(out is not None)
        return out

    monkeypatch.setattr("ember.ops.linalg.direct_product", counting)
    a = ember.tensor(_arr(4, 5, dtype=np.float64), requires_grad=True)
    b = ember.tensor(_arr(5, 3, dtype=np.float64), requires_grad=True)
    (ga,) = ember.autograd.grad((a @ b).pow(2).sum(), a, create_graph=True)
    assert ga.requires_grad and calls and not any(calls)  # recorded: dispatched
    ga.sum().backward()  # the second derivative through the recorded products
    at = torch.tensor(a.detach().numpy(), requires_grad=True)
    bt = torch.tensor(b.detach().numpy(), requires_grad=True)
    (gat,) = torch.autograd.grad((at @ bt).pow(2).sum(), at, create_graph=True)
    gat.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), bt.grad.numpy(), rtol=1e-12)
    calls.clear()
    (a @ b).sum().backward()
    assert calls and all(calls)


def test_hook_gradient_of_another_dtype_is_refused_before_the_product():
    a = ember.tensor(_arr(4, 5), requires_grad=True)
    b = ember.tensor(_arr(5, 3), requires_grad=True)
    out = a @ b
    out.register_hook(lambda g: g.double())
    # (PyTorch's words: the hook's result is checked before any backward product reads it)
    with pytest.raises(EmberError, match="hook '<lambda>' has changed the type of value"):
        out.sum().backward()
    assert a.grad is None and b.grad is None


def _fan_out(lib, a, b):  # a and b reach the loss along several paths: the engine sums
    h = a
    for _ in range(3):
        h = lib.relu(h * b + a)
    return h


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_summed_gradients_same_bits_as_dispatched_and_torch(dtype, monkeypatch):
    arrays = [_arr(6, 5, dtype=dtype), _arr(6, 5, dtype=dtype)]
    direct = _grads(ember, arrays, _fan_out)
    monkeypatch.setattr(_unrecorded, "plain_eager_no_grad", lambda: False)
    dispatched = _grads(ember, arrays, _fan_out)
    for d, s in zip(direct, dispatched):
        np.testing.assert_array_equal(d, s)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for d, r in zip(direct, _grads(torch, arrays, _fan_out)):
        np.testing.assert_allclose(d, r, rtol=tol, atol=tol)


def _mixed_dtype_paths():
    a = ember.tensor(_arr(3, 4), requires_grad=True)
    y = a * 2
    z = y * 3
    z.register_hook(lambda g: g.double())  # one path's gradient in float64
    try:
        (y + z).sum().backward()
    except EmberError as exc:  # (ember refuses the promoted float64 .grad; PyTorch casts it)
        return type(exc).__name__
    return a.grad.numpy()


def test_gradients_of_two_dtypes_take_the_dispatcher(monkeypatch):
    # (a sum that promotes is not the add kernel on the arrays as they are)
    direct = _mixed_dtype_paths()
    monkeypatch.setattr(_unrecorded, "plain_eager_no_grad", lambda: False)
    dispatched = _mixed_dtype_paths()
    assert type(direct) is type(dispatched)
    np.testing.assert_array_equal(direct, dispatched)


def test_profiled_backward_dispatches_its_products():
    # the profiler's eager mode records each op: the backward's two products among them
    a = ember.randn(4, 5, requires_grad=True)
    b = ember.randn(5, 3, requires_grad=True)
    with ember.profiler.profile() as prof:
        (a @ b).sum().backward()
    assert [e.name for e in prof.events()].count("matmul") == 3
