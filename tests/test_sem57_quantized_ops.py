"""The ops PyTorch's QuantizedCPU backend runs on quantized tensors (ops/qtensor_ops.py),
against PyTorch 2.13 bit for bit: relu (and its in-place and module forms), max/min (of all
elements and along a dim), sort/argsort/msort/topk, mean, sigmoid, max pooling, comparisons
and ``equal``; with the parameters each result keeps, and PyTorch's refusals of per-channel
tensors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CASES = [("quint8", 0.05, 128), ("quint8", 0.3, 7), ("qint8", 0.05, 3), ("qint8", 0.11, -20),
         ("qint32", 0.05, 3)]  # fmt: skip


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # (PyTorch deprecates its quantized tensors)
        warnings.simplefilter("ignore")
        yield


def _x(shape=(2, 3, 6, 7), seed=0) -> np.ndarray:
    rs = np.random.RandomState(seed)
    return (rs.randn(*shape) * 4).astype(np.float32)


def _q(m, x, qdtype, scale, zp):
    return m.quantize_per_tensor(m.tensor(x), scale, zp, getattr(m, qdtype))


def _same(e, t):
    """Equal results: quantized (dtype, parameters, integers), tensors, tuples or numbers."""
    if isinstance(t, (tuple, list)):
        assert len(e) == len(t)
        for a, b in zip(e, t, strict=True):
            _same(a, b)
        return
    if not isinstance(t, torch.Tensor):
        assert e == t and type(e) is type(t)
        return
    assert tuple(e.shape) == tuple(t.shape)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    if t.is_quantized:
        assert (e.q_scale(), e.q_zero_point()) == (t.q_scale(), t.q_zero_point())
        np.testing.assert_array_equal(e.int_repr().numpy(), t.int_repr().numpy())
    else:
        np.testing.assert_array_equal(e.numpy(), t.numpy())


CALLS = {
    "relu": lambda m, q: m.relu(q),
    "relu_method": lambda m, q: q.relu(),
    "relu_": lambda m, q: q.clone().relu_(),
    "F.relu_inplace": lambda m, q: m.nn.functional.relu(q.clone(), inplace=True),
    "nn.ReLU": lambda m, q: m.nn.ReLU()(q),
    "max": lambda m, q: q.max(),
    "min": lambda m, q: m.min(q),
    "max_dim": lambda m, q: q.max(1),
    "min_dim_keepdim": lambda m, q: m.min(q, dim=2, keepdim=True),
    "max_dim_values": lambda m, q: m.max(q, -1)[0],
    "sort": lambda m, q: q.sort(1),
    "sort_descending": lambda m, q: m.sort(q, dim=-1, descending=True),
    "sort_stable": lambda m, q: m.sort(q, stable=True),
    "argsort": lambda m, q: q.argsort(dim=2),
    "msort": lambda m, q: m.msort(q),
    "topk": lambda m, q: q.topk(3),
    "topk_smallest_dim": lambda m, q: m.topk(q, 2, dim=1, largest=False),
    "mean": lambda m, q: q.mean(),
    "mean_dims": lambda m, q: q.mean((2, 3)),
    "mean_keepdim": lambda m, q: m.mean(q, 1, keepdim=True),
    "sigmoid": lambda m, q: m.sigmoid(q),
    "F.sigmoid": lambda m, q: m.nn.functional.sigmoid(q),
    "max_pool2d": lambda m, q: m.nn.functional.max_pool2d(q, 2),
    "MaxPool2d": lambda m, q: m.nn.MaxPool2d(3, 2, 1, ceil_mode=True)(q),
    "max_pool1d": lambda m, q: m.nn.functional.max_pool1d(q[0], 2, 1),
    "eq": lambda m, q: q == q.flip(0),
    "ne_number": lambda m, q: q != 0.15,
    "lt": lambda m, q: q < q.flip(1),
    "ge_number": lambda m, q: q >= -0.1,
    "gt_float": lambda m, q: q > m.tensor(_x(seed=1)) / 10,
    "le_fn": lambda m, q: m.le(q, 0.3),
    "equal_self": lambda m, q: m.equal(q, q.clone()),
    "equal_other": lambda m, q: m.equal(q, q.flip(0)),
    "equal_params": lambda m, q: m.equal(
        q, m.quantize_per_tensor(q.dequantize(), 0.5, 0, q.dtype)
    ),  # fmt: skip
    "equal_float": lambda m, q: m.equal(q, q.dequantize()),
}


@pytest.mark.parametrize("qdtype, scale, zp", CASES)
@pytest.mark.parametrize("how", list(CALLS))
def test_ops_match_pytorch(how, qdtype, scale, zp):
    x = _x()
    t, e = (
        CALLS[how](torch, _q(torch, x, qdtype, scale, zp)),
        CALLS[how](ember, _q(ember, x, qdtype, scale, zp)),
    )
    if qdtype == "qint32" and "sigmoid" in how:
        # (its 2**-32 steps show the last bit of the float32 sigmoid, which PyTorch's vectorized
        # exp rounds its own way: the values agree to float32's precision)
        assert (e.q_scale(), e.q_zero_point()) == (t.q_scale(), t.q_zero_point())
        np.testing.assert_allclose(e.dequantize().numpy(), t.dequantize().numpy(), rtol=3e-7)
        return
    _same(e, t)


@pytest.mark.parametrize("qdtype, scale, zp", [c for c in CASES if c[0] != "qint32"])
def test_every_8bit_integer(qdtype, scale, zp):
    """Every integer an 8-bit tensor holds through sigmoid and mean."""
    lo, hi = (0, 255) if qdtype == "quint8" else (-128, 127)
    ints = np.arange(lo, hi + 1)
    x = ((ints - zp) * np.float64(scale)).astype(np.float32)
    for fn in (lambda m, q: m.sigmoid(q), lambda m, q: m.mean(q.reshape(-1, 1), 1)):
        _same(
            fn(ember, _q(ember, x, qdtype, scale, zp)), fn(torch, _q(torch, x, qdtype, scale, zp))
        )


def test_relu_inplace_writes_the_tensor():
    for m in (torch, ember):
        q = _q(m, _x(), "quint8", 0.05, 100)
        r = q.relu_()
        assert r is q and int(q.int_repr().min()) == 100


@pytest.mark.parametrize(
    "how", ["relu", "relu_", "max", "max_dim", "sort", "argsort", "topk", "mean", "sigmoid",
            "max_pool2d"],
)  # fmt: skip
def test_per_channel_refusals(how):
    x = _x()
    for m in (torch, ember):
        q = m.quantize_per_channel(m.tensor(x), m.tensor([0.1, 0.2, 0.3]), m.tensor([1, 2, 3]),
                                   1, m.quint8)  # fmt: skip
        with pytest.raises(RuntimeError):
            CALLS[how](m, q)


def test_per_channel_comparisons_and_equal():
    x = _x()

    def run(m):
        q = m.quantize_per_channel(m.tensor(x), m.tensor([0.1, 0.2, 0.3]), m.tensor([1, 2, 3]),
                                   1, m.qint8)  # fmt: skip
        return [
            q == q.clone(),
            q > 0.25,
            m.equal(q, q.clone()),
            m.equal(q, _q(m, x, "qint8", 0.1, 1)),
        ]

    _same(run(ember), run(torch))
