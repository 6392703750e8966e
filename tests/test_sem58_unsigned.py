"""uint16/uint32/uint64 against PyTorch 2.13, past tests/test_sem56_unsigned.py: the public
functions PyTorch has no kernel for although ember builds them of primitives that take these
dtypes (arange, linspace, topk's sort, isin, count_nonzero, masked_fill, a dtype= of sum or
cumsum), refused the same way (NotImplementedError), and the kernels PyTorch does have (where,
cumprod to int64, repeat, constant and circular padding, diagonals, windows, isnan)."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

NAMES = ["uint16", "uint32", "uint64"]


def _v(m, d):
    return m.tensor([3, 1, 2], dtype=d)


WORKING = {
    "where": lambda m, d: m.where(m.tensor([True, False, True]), _v(m, d), 5),
    "where_tensors": lambda m, d: m.where(m.tensor([True, False, True]), _v(m, d), _v(m, d)),
    "cumprod": lambda m, d: _v(m, d).cumprod(0),
    "cumprod_int32": lambda m, d: _v(m, d).cumprod(0, dtype=m.int32),
    "repeat": lambda m, d: _v(m, d).repeat(2, 2),
    "tile": lambda m, d: _v(m, d).tile(2),
    "pad_constant": lambda m, d: m.nn.functional.pad(_v(m, d)[None], (1, 1), value=3),
    "pad_circular": lambda m, d: m.nn.functional.pad(_v(m, d)[None], (1, 1), mode="circular"),
    "diagonal": lambda m, d: _v(m, d).reshape(3, 1).expand(3, 3).diagonal(1),
    "diag": lambda m, d: _v(m, d).diag(),
    "unfold": lambda m, d: _v(m, d).unfold(0, 2, 1).contiguous(),
    "unique_consecutive": lambda m, d: _v(m, d).unique_consecutive(return_counts=True),
    "isnan_isinf_isfinite": lambda m, d: (_v(m, d).isnan(), _v(m, d).isinf(), _v(m, d).isfinite()),
    "sort_stable": lambda m, d: tuple(_v(m, d).sort(stable=True, descending=True)),
    "msort": lambda m, d: _v(m, d).msort(),
    "full_negative_wraps": lambda m, d: m.full((2,), -1, dtype=d),
    "tensor_negative_wraps": lambda m, d: m.tensor([-1, -2], dtype=d) if d is not m.uint64 else 0,
}

REFUSED = {
    "arange": lambda m, d: m.arange(5, dtype=d),
    "linspace": lambda m, d: m.linspace(0, 4, 3, dtype=d),
    "logspace": lambda m, d: m.logspace(0, 1, 3, dtype=d),
    "randperm": lambda m, d: m.randperm(3, dtype=d),
    "topk": lambda m, d: _v(m, d).topk(2),
    "isin": lambda m, d: m.isin(_v(m, d), _v(m, d)),
    "count_nonzero": lambda m, d: _v(m, d).count_nonzero(),
    "masked_fill": lambda m, d: _v(m, d).masked_fill(m.tensor([True, False, True]), 2),
    "index_fill": lambda m, d: _v(m, d).index_fill(0, m.tensor([0]), 2),
    "masked_select": lambda m, d: _v(m, d).masked_select(m.tensor([True, False, True])),
    "trace": lambda m, d: _v(m, d).diag().trace(),
    "sum_dtype": lambda m, d: m.tensor([1, 2]).sum(dtype=d),
    "cumsum_dtype": lambda m, d: _v(m, d).cumsum(0, dtype=d),
    "prod_dtype": lambda m, d: _v(m, d).prod(dtype=d),
    "pad_reflect": lambda m, d: m.nn.functional.pad(_v(m, d)[None], (1, 1), mode="reflect"),
    "pad_replicate": lambda m, d: m.nn.functional.pad(_v(m, d)[None], (1, 1), mode="replicate"),
}


def _same(t, e):
    if isinstance(t, (tuple, list)):
        assert len(t) == len(e)
        for x, y in zip(t, e, strict=True):
            _same(x, y)
    elif isinstance(t, torch.Tensor):
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    else:
        assert t == e


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("how", sorted(WORKING))
def test_kernels_pytorch_has(name, how):
    _same(WORKING[how](torch, getattr(torch, name)), WORKING[how](ember, getattr(ember, name)))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("how", sorted(REFUSED))
def test_kernels_pytorch_lacks(name, how):
    for m in (torch, ember):
        with pytest.raises(NotImplementedError, match="not implemented for 'UInt"):
            REFUSED[how](m, getattr(m, name))


@pytest.mark.parametrize("dtype", ["int32", "int16", "uint8", "bool"])
def test_one_hot_takes_int64_classes_only(dtype):
    for m in (torch, ember):
        with pytest.raises(RuntimeError, match="only applicable to index tensor of type Long"):
            m.nn.functional.one_hot(m.tensor([1, 0]).to(getattr(m, dtype)))
