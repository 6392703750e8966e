"""A backward that records nothing takes shortcuts (ops/reduce.py): a full reduction's 0-d
gradient broadcast as it is (no reshape to ones first), a broadcast operand's gradient summed
over leading axes without kept dimensions (no reshape after), and broadcast_to's read-only
view made in C (ops/shape.py). Each gives the bits, strides and flags of the path it skips,
checked against that path and PyTorch on both sides of every condition."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import reduce
from ember.ops.shape import _broadcast_kernel

torch = pytest.importorskip("torch")


def _arrays(*shapes, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


PROGRAMS = [
    lambda L, x, w, b: (x * w + b).sum(),  # 0-d gradient; b summed over a leading axis
    lambda L, x, w, b: (x * w + b).mean(),
    lambda L, x, w, b: (x - b.reshape(1, -1)).sum(),  # (1, n): a kept axis, the old path
    lambda L, x, w, b: (x * b).sum(dim=1).sum(),  # a reduction with a 1-d gradient
    lambda L, x, w, b: (x * w).sum(dim=(0, 1), keepdim=True).sum(),  # keepdims
    lambda L, x, w, b: (x.t() * b.reshape(-1, 1)).sum(),  # non-contiguous operand
]


def _grads(lib, program, arrays, steps=2, **backward):
    tensors = [lib.tensor(a, requires_grad=True) for a in arrays]
    for _ in range(steps):  # (the second backward takes the kept signatures)
        program(lib, *tensors).backward(**backward)
    return [t.grad for t in tensors]


def _slow_paths(monkeypatch):
    """The dispatched paths the shortcuts skip."""
    monkeypatch.setattr(reduce, "plain_eager_no_grad", lambda: False)


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shortcuts_give_the_dispatched_bits_and_torch(program, dtype, monkeypatch):
    arrays = _arrays((4, 6), (4, 6), (6,), dtype=dtype)
    got = _grads(ember, program, arrays)
    want_torch = _grads(torch, program, arrays)
    _slow_paths(monkeypatch)
    slow = _grads(ember, program, arrays)
    for g, s, t in zip(got, slow, want_torch):
        assert (g is None) == (s is None) == (t is None)
        if g is None:
            continue
        np.testing.assert_array_equal(g.numpy(), s.numpy())
        assert g.stride() == s.stride() and g.dtype == s.dtype
        np.testing.assert_allclose(
            g.numpy(), t.numpy(), rtol=1e-5 if dtype == np.float32 else 1e-12
        )


@pytest.mark.parametrize("program", PROGRAMS[:2])
def test_create_graph_records_the_gradients_as_before(program, monkeypatch):
    arrays = _arrays((3, 5), (3, 5), (5,), dtype=np.float64, seed=3)

    def second(lib):
        x, w, b = (lib.tensor(a, requires_grad=True) for a in arrays)
        gx, gb = lib.autograd.grad(program(lib, x, w * w, b) * 3.0, (x, b), create_graph=True)
        assert gx.grad_fn is not None  # (recorded: no shortcut)
        ((gx * gx).sum() + (gb * gb).sum()).backward()
        return [t.grad.numpy() for t in (x, w, b) if t.grad is not None]

    got, want = second(ember), second(torch)
    assert len(got) == len(want)
    for g, t in zip(got, want):
        np.testing.assert_allclose(g, t, rtol=1e-12)


def test_hooks_autocast_and_mixed_dtypes_take_the_general_path():
    xs, bs = _arrays((4, 6), (6,), dtype=np.float64, seed=4)
    x = ember.tensor(xs, requires_grad=True)
    b = ember.tensor(bs.astype(np.float32), requires_grad=True)
    y = x + b  # float64 result of a float32 bias
    y.register_hook(lambda g: g * 2)
    y.sum().backward()
    tx = torch.tensor(xs, requires_grad=True)
    tb = torch.tensor(bs.astype(np.float32), requires_grad=True)
    ty = tx + tb
    ty.register_hook(lambda g: g * 2)
    ty.sum().backward()
    assert b.grad.dtype == ember.float32
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    # a hook on the sum's input sees the broadcast 0-d gradient, read-only as PyTorch's expand
    seen = []
    x2 = ember.tensor(xs, requires_grad=True)
    z = x2 * 1.0
    z.register_hook(lambda g: seen.append(g.numpy().copy()) or None)
    z.sum().backward()
    np.testing.assert_array_equal(seen[0], np.ones_like(xs))
    with ember.autocast("cpu", dtype=ember.bfloat16):
        w = ember.tensor(_arrays((6, 3), seed=5)[0], requires_grad=True)
        out = (ember.tensor(xs.astype(np.float32)) @ w).sum()
    out.backward()
    tw = torch.tensor(w.detach().numpy(), requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tout = (torch.tensor(xs.astype(np.float32)) @ tw).sum()
    tout.backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-2)


def test_zero_d_and_meta_operands():
    (xs,) = _arrays((), dtype=np.float64, seed=6)
    x = ember.tensor(xs, requires_grad=True)
    for _ in range(2):
        (x * 3.0).sum().backward()
    assert x.grad.shape == () and float(x.grad) == 6.0
    m = ember.empty((4, 6), device="meta", requires_grad=True)
    b = ember.empty(6, device="meta", requires_grad=True)
    (m + b).sum().backward()
    assert m.grad.is_meta and m.grad.shape == (4, 6) and b.grad.shape == (6,)


def test_version_counter_errors_still_raised():
    xs, ws = _arrays((3, 4), (4,), dtype=np.float64, seed=7)
    for _ in range(2):
        x = ember.tensor(xs, requires_grad=True)
        w = ember.tensor(ws, requires_grad=True) * 1.0
        z = (x * w).sum()
        w.add_(1.0)
        with pytest.raises(ember.errors.EmberError, match="modified by an in-place operation"):
            z.backward()


@pytest.mark.parametrize(
    "shape, to",
    [((), (3, 4)), ((1,), (5,)), ((3, 1), (2, 3, 4)), ((1, 4), (3, 4)), ((2, 1, 3), (2, 5, 3)),
     ((0, 1), (0, 3)), ((1, 0), (4, 0)), ((1,), (0,)), ((), (0,)), ((1, 1), (1, 7))],
)  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_, np.complex64])
def test_broadcast_view_is_numpys(shape, to, dtype):
    x = np.asarray(np.random.default_rng(8).standard_normal(shape)).astype(dtype)
    got, want = _broadcast_kernel(x, shape=to), np.broadcast_to(x, to)
    assert got.shape == want.shape and got.strides == want.strides and got.dtype == want.dtype
    assert not got.flags.writeable and got.base is x
    np.testing.assert_array_equal(got, want)
    strided = np.asarray(np.random.default_rng(9).standard_normal((4, 2)))[::2, :1]  # (2, 1)
    got = _broadcast_kernel(strided, shape=(3, 2, 5))  # (not contiguous: NumPy's own)
    np.testing.assert_array_equal(got, np.broadcast_to(strided, (3, 2, 5)))
    assert not got.flags.writeable


def test_expand_matches_torch_and_stays_read_only():
    (xs,) = _arrays((3, 1), seed=10)
    e, t = ember.tensor(xs).expand(2, 3, 4), torch.tensor(xs).expand(2, 3, 4)
    assert e.stride() == t.stride()
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    with pytest.raises(ember.errors.EmberError):
        e.add_(1.0)  # (repeated elements: PyTorch refuses the write too)
    with pytest.raises(RuntimeError):
        t.add_(1.0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_scalar_loss_gradient_is_a_fresh_one_every_backward(dtype):
    (xs,) = _arrays((3,), dtype=np.float64, seed=16)
    results = []
    for lib in (ember, torch):
        x = lib.tensor(xs, dtype=getattr(lib, dtype), requires_grad=True)
        for _ in range(2):
            loss = (x * 2.0).sum()
            # (a hook that scales the implicit gradient in place: the next one is 1 again)
            loss.register_hook(lambda g: g.mul_(3.0))
            loss.backward()
        results.append((str(x.grad.dtype), x.grad.double().numpy()))
    assert results[0][0].split(".")[-1] == results[1][0].split(".")[-1]
    np.testing.assert_array_equal(results[0][1], results[1][1])
