"""Models exported by PyTorch 2.13's ONNX exporter (the TorchScript one, ``dynamo=False``: the
dynamo exporter needs onnxscript) imported by ember: an MLP, a CNN with BatchNorm, ReLU6,
ceil-mode pooling and a depthwise conv, a bidirectional 2-layer LSTM, a GRU, a
TransformerEncoder, MultiheadAttention, an embedding LM, upsampling with transposed convs, a
mix of elementwise / cumulative / top-k / pad ops, Conv1d + GroupNorm, Conv3d + InstanceNorm,
at opsets 13 and 17, with a dynamic batch: each captured, equal to PyTorch at two batch sizes.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
nn = torch.nn


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = nn.MultiheadAttention(16, 4, batch_first=True)

    def forward(self, x):
        return self.m(x, x, x)[0]


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.ln = nn.LayerNorm(16)
        self.fc = nn.Linear(16, 5)

    def forward(self, t):
        return torch.softmax(self.fc(torch.nn.functional.gelu(self.ln(self.emb(t)))), -1)


class Up(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)
        self.t = nn.ConvTranspose2d(4, 2, 2, stride=2)

    def forward(self, x):
        y = torch.nn.functional.interpolate(
            self.c(x), scale_factor=2, mode="bilinear", align_corners=False
        )
        out = torch.cat([self.t(torch.relu(self.c(x))), y[:, :2]], 1)
        return out.flatten(1).mean(1, keepdim=True)


class Ops(nn.Module):
    def forward(self, x):
        a = x.clamp(-0.5, 0.5).abs().sqrt() + x.sin() * x.exp().log1p()
        b = torch.where(x > 0, x, x * 0.1).cumsum(1)
        c = x.transpose(0, 1).reshape(-1)[: x.shape[0] * 2].view(2, -1)
        d = torch.topk(x, 2, dim=1).values
        return (
            a.sum()
            + b.max()
            + c.std()
            + d.mean()
            + x.argmax().float()
            + torch.nn.functional.pad(x, (1, 2)).sum()
        )


def _models():
    torch.manual_seed(0)
    return {
        "mlp": (
            nn.Sequential(
                nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 3), nn.LogSoftmax(-1)
            ),
            torch.randn(4, 8),
        ),
        "cnn": (
            nn.Sequential(
                nn.Conv2d(3, 8, 3, stride=2, padding=1),
                nn.BatchNorm2d(8),
                nn.ReLU6(),
                nn.MaxPool2d(2, ceil_mode=True),
                nn.Conv2d(8, 8, 3, groups=8, padding=1),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(8, 4),
            ),
            torch.randn(2, 3, 17, 17),
        ),
        "lstm": (
            nn.LSTM(6, 10, num_layers=2, batch_first=True, bidirectional=True),
            torch.randn(3, 7, 6),
        ),
        "gru": (nn.GRU(6, 10, num_layers=1, batch_first=False), torch.randn(7, 3, 6)),
        "encoder": (
            nn.TransformerEncoder(
                nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, dropout=0.0), 2
            ),
            torch.randn(2, 5, 16),
        ),
        "mha": (Attn(), torch.randn(2, 5, 16)),
        "tiny_lm": (Tiny(), torch.randint(0, 50, (2, 7))),
        "upsample": (Up(), torch.randn(1, 3, 8, 8)),
        "ops": (Ops(), torch.randn(4, 5)),
        "conv1d": (
            nn.Sequential(
                nn.Conv1d(4, 6, 5, padding=2, dilation=1),
                nn.GroupNorm(2, 6),
                nn.SiLU(),
                nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False),
            ),
            torch.randn(2, 4, 20),
        ),
        "inorm": (
            nn.Sequential(
                nn.Conv3d(2, 4, 3, padding=1),
                nn.InstanceNorm3d(4, affine=True),
                nn.LeakyReLU(0.2),
                nn.Hardswish(),
                nn.PReLU(),
            ),
            torch.randn(1, 2, 5, 6, 4),
        ),
    }


NAMES = list(_models())


def _first(out):
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("name", NAMES)
def test_pytorch_exported_model_imports(name, opset):
    model, x = _models()[name]
    model.eval()
    if name in ("encoder",) and opset < 14:
        pytest.skip("PyTorch exports scaled_dot_product_attention from opset 14 on")
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (x,), buf, opset_version=opset, dynamo=False, input_names=["x"],
            dynamic_axes={"x": {0: "batch"}} if name != "gru" else None,
        )  # fmt: skip
    f = ember.onnx.load(buf.getvalue())
    batches = [x] if name == "gru" else [x, torch.cat([x, x[:1]], 0)]
    for xb in batches:
        with torch.no_grad():
            want = _first(model(xb)).numpy()
        got = _first(f(xb.numpy())).numpy()
        scale = float(np.max(np.abs(want))) or 1.0
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6 * scale)
    assert f.eager_reason is None, f.eager_reason
