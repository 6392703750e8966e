"""PyTorch 2.13's uint16, uint32 and uint64 ("shell" dtypes), against PyTorch: creation,
casts (wrapping as PyTorch's), printing, iinfo, the few kernels PyTorch has for them (equality,
bitwise and/or/xor, mul, true division, integer reductions to int64, sort, unique, data
movement), its refusals of the others (NotImplementedError) and of promotion with another
integer or bool dtype (RuntimeError)."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

NAMES = ["uint16", "uint32", "uint64"]

WORKING = {
    "repr": lambda m, a, b: repr(a),
    "mul": lambda m, a, b: a * b,
    "mul_number": lambda m, a, b: a * 2,
    "div": lambda m, a, b: a / b,
    "eq": lambda m, a, b: a == b,
    "eq_number": lambda m, a, b: a == 2,
    "ne": lambda m, a, b: a != b,
    "and": lambda m, a, b: a & b,
    "or": lambda m, a, b: a | b,
    "xor": lambda m, a, b: a ^ b,
    "and_number": lambda m, a, b: a & 1,
    "sum": lambda m, a, b: a.sum(),
    "sum_dim": lambda m, a, b: a.reshape(3, 1).sum(1),
    "cumsum": lambda m, a, b: a.cumsum(0),
    "prod": lambda m, a, b: a.prod(),
    "any_all": lambda m, a, b: (a.any(), a.all()),
    "sort": lambda m, a, b: tuple(b.sort()),
    "unique": lambda m, a, b: a.unique(),
    "float": lambda m, a, b: a.float(),
    "long": lambda m, a, b: a.long(),
    "bool": lambda m, a, b: a.bool(),
    "from_float": lambda m, a, b: m.tensor([1.5, 70000.0]).to(a.dtype),
    "from_negative": lambda m, a, b: m.tensor([-1, -7]).to(a.dtype),
    "zeros": lambda m, a, b: m.zeros(2, dtype=a.dtype),
    "full": lambda m, a, b: m.full((2,), 7, dtype=a.dtype),
    "cat_stack": lambda m, a, b: (m.cat([a, b]), m.stack([a, b])),
    "index": lambda m, a, b: (a[[0, 2]], a[1:], a.reshape(3, 1).t()),
    "clone": lambda m, a, b: a.clone(),
    "item_tolist": lambda m, a, b: (a[2].item(), a.tolist()),
    "promote_float": lambda m, a, b: a + m.tensor([1.0]),
    "equal": lambda m, a, b: m.equal(a, a),
    "fill_": lambda m, a, b: a.clone().fill_(5),
}

REFUSED = {
    "add": lambda m, a, b: a + b,
    "add_number": lambda m, a, b: a + 1,
    "sub": lambda m, a, b: a - b,
    "floordiv": lambda m, a, b: a // b,
    "lt": lambda m, a, b: a < b,
    "neg": lambda m, a, b: -a,
    "not": lambda m, a, b: ~a,
    "shift": lambda m, a, b: a << 1,
    "max": lambda m, a, b: a.max(),
    "maximum": lambda m, a, b: m.maximum(a, b),
    "where": lambda m, a, b: m.where(a > 1, a, b),
    "matmul": lambda m, a, b: a @ b,
    "clamp": lambda m, a, b: a.clamp(0, 2),
    "flip": lambda m, a, b: a.flip(0),
    "pow": lambda m, a, b: a**2,
    "nonzero": lambda m, a, b: a.nonzero(),
}


def _pair(m, name):
    d = getattr(m, name)
    return m.tensor([1, 2, 60000], dtype=d), m.tensor([3, 2, 1], dtype=d)


def _same(t, e):
    if isinstance(t, (tuple, list)):
        assert len(t) == len(e)
        for x, y in zip(t, e, strict=True):
            _same(x, y)
    elif isinstance(t, torch.Tensor):
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    elif isinstance(t, str):
        assert t == e.replace("ember.", "torch.")
    else:
        assert t == e


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("how", sorted(WORKING))
def test_kernels_pytorch_has(name, how):
    _same(WORKING[how](torch, *_pair(torch, name)), WORKING[how](ember, *_pair(ember, name)))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("how", sorted(REFUSED))
def test_kernels_pytorch_lacks(name, how):
    for m in (torch, ember):
        with pytest.raises(NotImplementedError):
            REFUSED[how](m, *_pair(m, name))


@pytest.mark.parametrize("name", NAMES)
def test_promotion_refused_with_other_integers(name):
    for m in (torch, ember):
        a, _ = _pair(m, name)
        for other in (m.int64, m.uint8, m.int8, m.bool):
            with pytest.raises(RuntimeError):
                a * m.tensor([1], dtype=other)
            with pytest.raises(RuntimeError):
                m.promote_types(a.dtype, other)
        assert m.promote_types(a.dtype, m.float32) == m.float32


@pytest.mark.parametrize("name", NAMES)
def test_dtype_facts(name):
    t, e = getattr(torch, name), getattr(ember, name)
    ti, ei = torch.iinfo(t), ember.iinfo(e)
    assert (ei.min, ei.max, ei.bits) == (ti.min, ti.max, ti.bits)
    assert (e.is_signed, e.itemsize, e.is_floating_point) == (t.is_signed, t.itemsize, False)
    arr = np.array([1, 2], dtype=name)
    assert str(ember.from_numpy(arr).dtype) == str(torch.from_numpy(arr).dtype).replace(
        "torch", "ember"
    )
    assert ember.tensor([5], dtype=e).numpy().dtype == np.dtype(name)
