"""Quantization parameters PyTorch 2.13 accepts and ember refused: a per-tensor scale that is
zero, negative, tiny, infinite or NaN (PyTorch quantizes by the same steps), and the integer a
NaN becomes per channel (0 in 8 bits, whatever the zero point)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")
X = [[-1.0, 0.05, 0.15, 0.0], [1.2, 30.0, -20.0, -0.0], [NAN, INF, -INF, 2.5]]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # (PyTorch deprecates its quantized tensors)
        warnings.simplefilter("ignore")
        yield


def _same(e, t):
    np.testing.assert_array_equal(e.int_repr().numpy(), t.int_repr().numpy())
    np.testing.assert_array_equal(e.dequantize().numpy(), t.dequantize().numpy())


@pytest.mark.parametrize("qdtype", ["quint8", "qint8", "qint32"])
@pytest.mark.parametrize("scale", [0.0, -0.1, -3.0, 1e-12, INF, NAN])
def test_any_per_tensor_scale(qdtype, scale):
    t, e = (
        m.quantize_per_tensor(m.tensor(X), scale, 3, getattr(m, qdtype)) for m in (torch, ember)
    )
    _same(e, t)
    assert e.q_scale() == t.q_scale() or (np.isnan(e.q_scale()) and np.isnan(t.q_scale()))


@pytest.mark.parametrize("qdtype", ["quint8", "qint8", "qint32"])
def test_per_channel_nan_and_odd_scales(qdtype):
    def run(m):
        x = m.tensor(X)
        return [
            m.quantize_per_channel(x, m.tensor(s), m.tensor([1, 2, 5]), 0, getattr(m, qdtype))
            for s in ([0.1, NAN, 0.2], [0.0, -0.5, INF])
        ]

    for e, t in zip(run(ember), run(torch), strict=True):
        _same(e, t)


def test_ember_checkpoints_hold_quantized_tensors(tmp_path):
    """ember.save/ember.load keep a quantized tensor (its integers and parameters, odd scales
    too), as torch.save/torch.load do; a damaged parameter is refused naming the file."""
    x = ember.tensor(np.random.RandomState(0).randn(3, 4).astype(np.float32))
    saved = {
        "u8": ember.quantize_per_tensor(x, 0.05, 128, ember.quint8),
        "nan_scale": ember.quantize_per_tensor(x, NAN, 1, ember.qint32),
        "negative": ember.quantize_per_tensor(x, -0.2, -5, ember.qint8),
        "channel": ember.quantize_per_channel(
            x, ember.tensor([0.1, 0.2, 0.3]), ember.tensor([1, 2, 3]), 0, ember.qint8
        ),  # fmt: skip
        "plain": x,
    }
    ember.save(saved, tmp_path / "q.pt")
    loaded = ember.load(tmp_path / "q.pt")
    for name, t in saved.items():
        assert repr(loaded[name]) == repr(t)
        if t.is_quantized:
            assert loaded[name].dtype is t.dtype
            np.testing.assert_array_equal(loaded[name].int_repr().numpy(), t.int_repr().numpy())
    from ember.io import checkpoint

    structure, arrays = checkpoint.encode({"q": saved["u8"]})
    structure["$dict"]["q"]["quantized"]["zero_point"] = 300
    metadata = {checkpoint.FORMAT_KEY: checkpoint.FORMAT_VERSION,
                "structure": __import__("json").dumps(structure)}  # fmt: skip
    checkpoint.write_safetensors(tmp_path / "bad.pt", arrays, metadata)
    with pytest.raises(ember.errors.CheckpointError, match="bad.pt: .*zero_point 300"):
        ember.load(tmp_path / "bad.pt")


def test_loading_pytorchs_quantized_tensors(tmp_path):
    x = np.random.RandomState(0).randn(3, 4, 5).astype(np.float32)
    saved = {
        "u8": torch.quantize_per_tensor(torch.tensor(x), 0.05, 128, torch.quint8),
        "i8_view": torch.quantize_per_tensor(torch.tensor(x), 0.1, -3, torch.qint8)[:, 1:3],
        "i32": torch.quantize_per_tensor(torch.tensor(x), 0.01, 7, torch.qint32),
        "channel": torch.quantize_per_channel(
            torch.tensor(x), torch.tensor([0.1, 0.2, 0.3]), torch.tensor([1, 2, 3]), 0, torch.qint8
        ),  # fmt: skip
    }
    torch.save(saved, tmp_path / "q.pt")
    loaded = ember.load(tmp_path / "q.pt")
    for name, t in saved.items():
        e = loaded[name]
        assert repr(e).replace("ember.", "torch.") == repr(t)
        np.testing.assert_array_equal(e.int_repr().numpy(), t.int_repr().numpy())
