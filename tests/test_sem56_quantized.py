"""Quantized tensors as PyTorch programs use them (ops/qtensor.py), against PyTorch 2.13:
quantize_per_tensor / quantize_per_channel to quint8, qint8 and qint32 (PyTorch's rounding:
its fused multiply-add, ties to even, clamping, NaN), int_repr, dequantize, the parameter
accessors, printing, the element-moving ops that keep the parameters, the writes that
quantize their values, and the refusals PyTorch's QuantizedCPU backend makes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

QDTYPES = ["quint8", "qint8", "qint32"]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # (PyTorch deprecates its quantized tensors)
        warnings.simplefilter("ignore")
        yield


def _data(scale: float, n: int = 20000) -> np.ndarray:
    rs = np.random.RandomState(0)
    x = (rs.randn(n) * scale * 60).astype(np.float32)
    # values whose quotient by the scale lies on a half: the rounding decides
    x[:1000] = ((rs.randint(-100, 100, 1000) + 0.5) * np.float32(scale)).astype(np.float32)
    x[1000:1004] = [np.nan, np.inf, -np.inf, -0.0]
    return x


def _text(t) -> str:
    return repr(t).replace("ember.", "torch.")


@pytest.mark.parametrize("qdtype", QDTYPES)
@pytest.mark.parametrize("scale, zero_point", [(0.1, 3), (0.037, 0), (1 / 3, 5), (7.77, 1)])
def test_quantize_per_tensor_matches_pytorch(qdtype, scale, zero_point):
    x = _data(scale)
    if qdtype == "quint8":
        zero_point += 120
    t = torch.quantize_per_tensor(torch.tensor(x), scale, zero_point, getattr(torch, qdtype))
    e = ember.quantize_per_tensor(ember.tensor(x), scale, zero_point, getattr(ember, qdtype))
    assert e.dtype is getattr(ember, qdtype) and e.is_quantized
    np.testing.assert_array_equal(e.int_repr().numpy(), t.int_repr().numpy())
    np.testing.assert_array_equal(e.dequantize().numpy(), t.dequantize().numpy())
    assert e.int_repr().dtype is ember.dtypes.as_dtype(str(t.int_repr().dtype).split(".")[1])
    assert (e.q_scale(), e.q_zero_point()) == (t.q_scale(), t.q_zero_point())
    assert type(e.q_scale()) is float and type(e.q_zero_point()) is int
    assert repr(e.qscheme()) == repr(t.qscheme()).replace("torch", "ember")


@pytest.mark.parametrize("qdtype", QDTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_quantize_per_channel_matches_pytorch(qdtype, axis):
    rs = np.random.RandomState(1)
    x = (rs.randn(4, 5, 300) * 3).astype(np.float32)
    n = x.shape[axis]
    scales = np.linspace(0.01, 0.4, n)
    zps = np.arange(n) % 50 + (100 if qdtype == "quint8" else -2)
    results = []
    for m in (torch, ember):
        q = m.quantize_per_channel(m.tensor(x), m.tensor(scales), m.tensor(zps), axis,
                                   getattr(m, qdtype))  # fmt: skip
        results.append(q)
    t, e = results
    np.testing.assert_array_equal(e.int_repr().numpy(), t.int_repr().numpy())
    np.testing.assert_array_equal(e.dequantize().numpy(), t.dequantize().numpy())
    np.testing.assert_array_equal(e.q_per_channel_scales().numpy(), t.q_per_channel_scales())
    assert e.q_per_channel_scales().dtype is ember.float64
    np.testing.assert_array_equal(
        e.q_per_channel_zero_points().numpy(), t.q_per_channel_zero_points()
    )
    assert e.q_per_channel_axis() == t.q_per_channel_axis()
    assert repr(e.qscheme()) == "ember.per_channel_affine"
    assert _text(e.clone()) == repr(t.clone())


def _qt(m):
    x = m.tensor([[-1.0, 0.05, 0.15, 0.25], [1.2, 30.0, -20.0, 0.35]])
    return m.quantize_per_tensor(x, 0.1, 10, m.quint8)


def test_printing():
    for make in (
        _qt,
        lambda m: m.quantize_per_tensor(m.tensor([0.5, -1.25]), m.tensor(0.1), 2, m.qint8),
        lambda m: m.quantize_per_tensor(m.randn(3, 9, generator=m.Generator().manual_seed(0)),
                                        0.02, 0, m.qint32),  # fmt: skip
        lambda m: m.quantize_per_channel(m.tensor([[1.0, 2.0], [3.0, 4.0]]),
                                         m.tensor([0.1, 0.2]), m.tensor([1, 2]), 0, m.qint8),
    ):  # fmt: skip
        t, e = make(torch), make(ember)
        assert _text(e) == repr(t)
        assert str(e).replace("ember.", "torch.") == str(t)


@pytest.mark.parametrize(
    "how",
    ["reshape", "view", "t", "permute", "index", "index1", "slice", "flatten", "clone",
     "contiguous", "cat", "stack", "squeeze", "expand", "chunk", "flip", "index_select",
     "detach", "narrow", "select", "iter"],
)  # fmt: skip
def test_element_moving_ops_keep_the_parameters(how):
    def run(m):
        q = _qt(m)
        f = {
            "reshape": lambda: q.reshape(8),
            "view": lambda: q.view(4, 2),
            "t": lambda: q.t(),
            "permute": lambda: q.permute(1, 0),
            "index": lambda: q[0],
            "index1": lambda: q[0, 1],
            "slice": lambda: q[:, 1:3],
            "flatten": lambda: q.flatten(),
            "clone": lambda: q.clone(),
            "contiguous": lambda: q.t().contiguous(),
            "cat": lambda: m.cat([q, q]),
            "stack": lambda: m.stack([q, q]),
            "squeeze": lambda: q.unsqueeze(0).squeeze(0),
            "expand": lambda: q[0:1].expand(3, 4),
            "chunk": lambda: q.chunk(2)[1],
            "flip": lambda: q.flip(0),
            "index_select": lambda: q.index_select(1, m.tensor([3, 0])),
            "detach": lambda: q.detach(),
            "narrow": lambda: q.narrow(1, 1, 2),
            "select": lambda: q.select(1, 2),
            "iter": lambda: list(q)[1],
        }[how]
        return f()

    t, e = run(torch), run(ember)
    assert _text(e) == repr(t)
    np.testing.assert_array_equal(e.int_repr().numpy(), t.int_repr().numpy())


def test_writes_quantize_their_values():
    def run(m):
        q = _qt(m)
        out = [q.clone().fill_(1.0), q.clone().copy_(m.full((2, 4), 0.26)),
               q.masked_fill(m.tensor([[True, False, True, False]] * 2), 2.0)]  # fmt: skip
        r = q.clone()
        r[0] = 3.0
        r[1, 2] = -0.45
        out.append(r)
        return out

    for t, e in zip(run(torch), run(ember), strict=True):
        assert _text(e) == repr(t)
    assert _qt(ember)[1, 1].item() == _qt(torch)[1, 1].item() == 24.5


@pytest.mark.parametrize(
    "how", ["add", "add_number", "mul", "sum", "abs", "neg", "float", "to", "exp", "add_"]
)
def test_refusals(how):
    for m in (torch, ember):
        q = _qt(m)
        f = {
            "add": lambda: q + q,
            "add_number": lambda: q + 1,
            "mul": lambda: q * 2,
            "sum": lambda: q.sum(),
            "abs": lambda: q.abs(),
            "neg": lambda: -q,
            "float": lambda: q.float(),
            "to": lambda: q.to(m.float32),
            "exp": lambda: m.exp(q),
            "add_": lambda: q.add_(1),
        }[how]
        with pytest.raises(RuntimeError if how in ("add_number", "mul", "float", "to", "add_")
                           and m is torch else (NotImplementedError, RuntimeError)):  # fmt: skip
            f()
    with pytest.raises(NotImplementedError, match="QuantizedCPU"):
        _qt(ember) + 1


def test_argument_refusals():
    x = [[-1.0, 0.05], [1.2, 30.0]]
    for m in (torch, ember):
        for call in (
            lambda: m.quantize_per_tensor(m.tensor(x, dtype=m.float64), 0.1, 0, m.quint8),
            lambda: m.quantize_per_tensor(m.tensor(x).half(), 0.1, 0, m.qint8),
            lambda: m.quantize_per_tensor(m.tensor(x), 0.1, 300, m.quint8),
            lambda: m.quantize_per_tensor(m.tensor(x), 0.1, -129, m.qint8),
            lambda: _qt(m).q_per_channel_scales(),
            lambda: m.quantize_per_channel(
                m.tensor(x), m.tensor([0.1, 0.2]), m.tensor([0, 1]), 0, m.qint8
            ).q_scale(),  # fmt: skip
            lambda: m.quantize_per_channel(
                m.tensor(x), m.tensor([0.1, 0.2]), m.tensor([0, 1]), 0, m.qint8
            ).t(),  # fmt: skip
            lambda: m.quantize_per_channel(
                m.tensor(x), m.tensor([0.1, 0.2]), m.tensor([0, 1]), -1, m.qint8
            ),  # fmt: skip
            lambda: _qt(m).numpy(),
            lambda: _qt(m).tolist(),
            lambda: _qt(m).requires_grad_(),
        ):
            with pytest.raises((RuntimeError, TypeError)):
                call()


def test_functions_and_names():
    for m in (torch, ember):
        q = _qt(m)
        assert isinstance(q, m.Tensor) and not m.ones(2).is_quantized
        a, b = m.dequantize([q, q])
        np.testing.assert_array_equal(a.numpy(), q.dequantize().numpy())
        np.testing.assert_array_equal(m.dequantize(q).numpy(), b.numpy())
        made = m._make_per_tensor_quantized_tensor(m.tensor([1, 2, 250], dtype=m.uint8), 0.5, 1)
        assert made.dtype == m.quint8 and made.int_repr().tolist() == [1, 2, 250]
        assert made.dequantize().tolist() == [0.0, 0.5, 124.5]
        assert q.shape == (2, 4) and q.numel() == 8 and q.element_size() == 1
        assert m.qint32.itemsize == 4 and not m.qint8.is_floating_point
    e = ember.quantize_per_tensor(ember.tensor([0.2, 0.5]), 0.1, 3, ember.uint8)
    assert e.dtype is ember.uint8  # (ember's own spelling: the integers, as before)


def test_cat_requantizes_to_the_first_parameters():
    def run(m):
        a = m.quantize_per_tensor(m.tensor([1.0, 2.0, -0.7]), 0.1, 0, m.qint8)
        b = m.quantize_per_tensor(m.tensor([1.0, 2.3, 5.0]), 0.2, 1, m.qint8)
        c = a.clone()
        c.index_put_((m.tensor([0]),), m.tensor(5.0))
        return [m.cat([a, b]), m.stack([a, b]), m.cat([a, a]), c]

    for t, e in zip(run(torch), run(ember), strict=True):
        assert _text(e) == repr(t)
    for m in (torch, ember):
        a = m.quantize_per_tensor(m.tensor([1.0]), 0.1, 0, m.qint8)
        with pytest.raises(RuntimeError):
            m.cat([a, m.quantize_per_tensor(m.tensor([1.0]), 0.1, 0, m.quint8)])
