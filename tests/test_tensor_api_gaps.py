"""PyTorch names ember gained for ported programs, beyond their OpInfos: the count samplers'
statistics and generators, put_/index_put_ in place, with gradients and inside ember.function,
the unsafe splits' in-place writes, frombuffer's shared memory, and DLPack exchange with
PyTorch and NumPy in both directions."""

import warnings

import numpy as np
import pytest
import torch

import ember

# ------------------------------------------------------------------------ poisson, binomial


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_poisson_statistics_and_generator(dtype):
    rates = ember.tensor([0.0, 0.5, 3.0, 40.0], dtype=getattr(ember, dtype))
    draws = ember.poisson(rates.expand(20000, 4).contiguous(), ember.Generator(1))
    assert draws.dtype is rates.dtype
    mean = draws.float().mean(0).numpy()
    var = draws.float().var(0).numpy()
    want = rates.float().numpy()
    assert (np.abs(mean - want) <= 0.05 + 0.02 * want).all(), (mean, want)
    assert (np.abs(var - want) <= 0.1 + 0.05 * want).all(), (var, want)
    again = ember.poisson(rates.expand(20000, 4).contiguous(), generator=ember.Generator(1))
    np.testing.assert_array_equal(draws.numpy(), again.numpy())


def test_binomial_statistics_and_edge_cases():
    n = ember.tensor([10.0, 50.0, 3.0])
    p = ember.tensor([0.5, 0.1, 0.9])
    draws = ember.binomial(n.expand(20000, 3), p.expand(20000, 3), generator=ember.Generator(2))
    np.testing.assert_allclose(draws.mean(0).numpy(), (n * p).numpy(), rtol=0.03)
    np.testing.assert_allclose(draws.var(0).numpy(), (n * p * (1 - p)).numpy(), rtol=0.08)
    # PyTorch's: probability above 1 is 1, a negative count 0, a count's fraction dropped
    out = ember.binomial(ember.tensor([10.0, -3.0, 2.5]), ember.tensor([1.5, 0.5, 1.0]))
    want = torch.binomial(torch.tensor([10.0, -3.0, 2.5]), torch.tensor([1.5, 0.5, 1.0]))
    np.testing.assert_array_equal(out.numpy(), want.numpy())


def test_count_samplers_gradients_as_torch():
    r = ember.tensor([1.0, 4.0], requires_grad=True)
    (g,) = ember.autograd.grad(ember.poisson(r).sum(), r)
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0])
    n = ember.tensor([3.0, 4.0], requires_grad=True)
    out = ember.binomial(n, ember.tensor([0.5, 0.5]))
    with pytest.raises(RuntimeError):
        out.sum().backward()


# --------------------------------------------------------------------- put_, index_put_


def test_put_in_place_matches_torch_with_gradients():
    x = np.random.default_rng(0).standard_normal((3, 4))
    src = np.random.default_rng(1).standard_normal(3)
    idx = np.array([1, -2, 1])
    ex = ember.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    es = ember.tensor(src, requires_grad=True)
    ts = torch.tensor(src, requires_grad=True)
    e = ex * 1
    e.put_(ember.tensor(idx), es, accumulate=True)
    t = tx * 1
    t.put_(torch.tensor(idx), ts, accumulate=True)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy())
    w = np.random.default_rng(2).standard_normal((3, 4))
    (e * ember.tensor(w)).sum().backward()
    (t * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(es.grad.numpy(), ts.grad.numpy())


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_matches_torch_with_gradients(accumulate):
    x = np.random.default_rng(3).standard_normal((4, 3))
    v = np.random.default_rng(4).standard_normal(3)
    rows, cols = np.array([0, 2, 3]), np.array([1, 1, 0])
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ev, tv = ember.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    e = ember.index_put(ex, (ember.tensor(rows), ember.tensor(cols)), ev, accumulate)
    t = torch.index_put(tx, (torch.tensor(rows), torch.tensor(cols)), tv, accumulate)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy())
    w = np.random.default_rng(5).standard_normal((4, 3))
    (e * ember.tensor(w)).sum().backward()
    (t * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(ev.grad.numpy(), tv.grad.numpy())
    y = ember.zeros(4, 3)
    assert y.index_put_((ember.tensor(rows), ember.tensor(cols)), ember.ones(3), accumulate) is y
    assert float(y.sum()) == 3.0


def test_put_and_index_put_inside_function():
    @ember.function
    def step(x, v):
        y = x.clone()
        y.put_(ember.tensor([0, 5]), v, accumulate=True)
        return ember.index_put(y, (ember.tensor([1]),), v[:1] * 2)

    x, v = ember.randn(2, 3), ember.randn(2)
    want = x.clone()
    want.put_(ember.tensor([0, 5]), v, accumulate=True)
    want = ember.index_put(want, (ember.tensor([1]),), v[:1] * 2)
    np.testing.assert_allclose(step(x, v).numpy(), want.numpy())


# ----------------------------------------------------------------------- unsafe splits


def test_unsafe_pieces_share_memory_and_take_in_place_writes():
    x = ember.randn(4, 3, requires_grad=True)
    y = x * 2
    a, b = y.unsafe_chunk(2)
    with pytest.raises(RuntimeError):
        y.chunk(2)[0].mul_(3)  # the safe pieces refuse it, as PyTorch's
    a.mul_(3)  # the unsafe ones take it, as PyTorch's
    a.sum().backward()
    np.testing.assert_allclose(x.grad.numpy()[:2], 6.0)
    np.testing.assert_allclose(x.grad.numpy()[2:], 0.0)
    z = ember.zeros(4)
    p, _ = z.unsafe_split(2)
    p.fill_(1.0)
    np.testing.assert_array_equal(z.numpy(), [1.0, 1.0, 0.0, 0.0])  # views: memory shared
    sizes = [t.shape[0] for t in ember.unsafe_split_with_sizes(ember.arange(5), [2, 3])]
    assert sizes == [2, 3]


# ------------------------------------------------------------------ frombuffer, DLPack


def test_frombuffer_shares_memory_and_checks_as_torch():
    data = bytearray(np.arange(6, dtype=np.float32).tobytes())
    t = ember.frombuffer(data, dtype=ember.float32, count=3, offset=8)
    np.testing.assert_array_equal(t.numpy(), [2.0, 3.0, 4.0])
    t.mul_(10)
    np.testing.assert_array_equal(np.frombuffer(data, np.float32), [0, 1, 20, 30, 40, 5])
    for kwargs in (
        {"dtype": ember.int32, "count": 7},
        {"dtype": ember.int32, "offset": 1},
        {"dtype": ember.int32, "offset": 24},
        {"dtype": ember.int32, "count": 0},
    ):
        tk = {k: (getattr(torch, v.name) if k == "dtype" else v) for k, v in kwargs.items()}
        with pytest.raises(ValueError):
            torch.frombuffer(bytearray(24), **tk)
        with pytest.raises(ValueError):
            ember.frombuffer(bytearray(24), **kwargs)
    with pytest.warns(UserWarning, match="not writable"):
        r = ember.frombuffer(b"\x01\x00\x00\x00", dtype=ember.int32)
    assert r.tolist() == [1]
    assert ember.frombuffer(bytearray(8), dtype=ember.float32, requires_grad=True).requires_grad


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "uint8", "bool", "float16"])
def test_dlpack_round_trips_share_memory(dtype):
    x = ember.ones(2, 3, dtype=getattr(ember, dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.from_dlpack(x)
        assert str(t.dtype) == f"torch.{dtype}" and tuple(t.shape) == (2, 3)
        back = ember.from_dlpack(t)
        capsule = ember.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(t))
        via_numpy = np.from_dlpack(x)
        to_torch = torch.utils.dlpack.from_dlpack(ember.utils.dlpack.to_dlpack(x))
    assert back.dtype.name == dtype and capsule.dtype.name == dtype
    t[0, 0] = 0  # one memory behind all of them
    for other in (x, back, capsule, to_torch):
        assert not bool(other[0, 0])
    assert not bool(via_numpy[0, 0])
    assert x.__dlpack_device__() == (1, 0)


def test_dlpack_refusals():
    with pytest.raises(BufferError, match="require gradient"):
        ember.ones(2, requires_grad=True).__dlpack__()
    with pytest.raises(TypeError):
        ember.from_dlpack(object())
    with pytest.raises(TypeError):
        ember.from_dlpack(torch.ones(2, dtype=torch.bfloat16))
