"""Models exported by PyTorch 2.13's ONNX exporter (the TorchScript one, ``dynamo=False``: the
dynamo exporter needs onnxscript) imported by ember: an MLP, a CNN with BatchNorm, ReLU6,
ceil-mode pooling and a depthwise conv, a bidirectional 2-layer LSTM, a GRU, a
TransformerEncoder, MultiheadAttention, an embedding LM, upsampling with transposed convs, a
mix of elementwise / cumulative / top-k / pad ops, Conv1d + GroupNorm, Conv3d + InstanceNorm,
at opsets 13 and 17, with a dynamic batch: each captured, equal to PyTorch at two batch sizes.
Models of several inputs with dynamic batch, sequence and image sizes (a BERT with its
attention mask, a GPT with its causal mask, an LSTM given its initial states, bicubic / nearest /
sized bilinear resizing with a transposed convolution and pixel shuffle, scripted Loop and If,
einsum / top-k / strided slices) against onnxruntime at two sizes each; and one file of the
dynamo exporter (skipped without onnxscript, which it needs).
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


# ---------------------------------------------------------------------------------------------
# models of several inputs, dynamic batch and sequence / image sizes, against onnxruntime


class _Bert(nn.Module):
    """BERT-style: token, position and segment embeddings, an additive mask from a 0/1
    attention mask, one attention block, a pooler."""

    def __init__(self):
        super().__init__()
        self.tok, self.pos, self.seg = (
            nn.Embedding(30, 16),
            nn.Embedding(32, 16),
            nn.Embedding(2, 16),
        )
        self.ln, self.ln2 = nn.LayerNorm(16), nn.LayerNorm(16)
        self.qkv, self.out, self.pool = nn.Linear(16, 48), nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, ids, mask):
        b, t = ids.shape
        pos = torch.arange(t).unsqueeze(0).expand(b, t)
        x = self.ln(self.tok(ids) + self.pos(pos) + self.seg(torch.zeros_like(ids)))
        q, k, v = self.qkv(x).view(b, t, 3, 4, 4).permute(2, 0, 3, 1, 4)
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        a = ((q @ k.transpose(-1, -2)) / 2.0 + bias).softmax(-1) @ v
        x = self.ln2(x + self.out(a.transpose(1, 2).reshape(b, t, 16)))
        return x, torch.tanh(self.pool(x[:, 0]))


class _Gpt(nn.Module):
    """GPT-style: a causal mask sliced from a buffer to the sequence's length, tied output."""

    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(30, 16), nn.Embedding(32, 16)
        self.attn, self.ln = nn.Linear(16, 48), nn.LayerNorm(16)
        self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(approximate="tanh"), nn.Linear(32, 16))
        self.register_buffer("causal", torch.tril(torch.ones(32, 32)).view(1, 1, 32, 32))

    def forward(self, ids):
        b, t = ids.shape
        x = self.wte(ids) + self.wpe(torch.arange(t).unsqueeze(0))
        q, k, v = (p.view(b, t, 2, 8).transpose(1, 2) for p in self.attn(x).split(16, 2))
        att = (q @ k.transpose(-2, -1)) * 8**-0.5
        att = att.masked_fill(self.causal[:, :, :t, :t] == 0, float("-inf"))
        x = x + (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, 16)
        x = x + self.mlp(self.ln(x))
        return x @ self.wte.weight.t()


class _LstmState(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(5, 7, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x, h, c):
        y, (h, c) = self.lstm(x, (h, c))
        return y, h, c


class _Resize(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.up = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        y = self.conv(x)
        a = torch.nn.functional.interpolate(y, scale_factor=2, mode="bicubic", align_corners=True)
        b = torch.nn.functional.interpolate(y, scale_factor=2, mode="nearest")
        c = torch.nn.functional.interpolate(y, size=(7, 9), mode="bilinear", align_corners=False)
        return a + b + self.up(y), torch.nn.functional.pixel_shuffle(c, 2)


class _Loop(nn.Module):
    def forward(self, x):
        y = x
        for i in range(x.shape[0]):
            y = y * 0.5 + x[i]
        return y


class _If(nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):
            return x * 2
        return x - 1


class _Indexing(nn.Module):
    def forward(self, a, b):
        c = torch.einsum("bij,bjk->bik", a, b)
        top = torch.topk(c.flatten(1), 3, dim=1)
        return c, torch.einsum("bii->bi", a), top.values, top.indices, a[:, 1:-1:2].flip(1)


def _multi_input_models():
    torch.manual_seed(0)
    ids = torch.randint(0, 30, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 4:] = 0
    ids2, mask2 = torch.randint(0, 30, (3, 5)), torch.ones(3, 5, dtype=torch.long)
    mask2[0, 2:] = 0
    bs, n = {0: "batch", 1: "seq"}, {0: "n"}
    return {
        "bert": (_Bert(), [ids, mask], {0: bs, 1: bs}, [ids2, mask2], 14),
        "gpt": (_Gpt(), [ids], {0: bs}, [torch.randint(0, 30, (1, 11))], 14),
        "lstm_state": (
            _LstmState(),
            [torch.randn(3, 4, 5), torch.randn(4, 3, 7), torch.randn(4, 3, 7)],
            {0: {0: "b", 1: "t"}, 1: {1: "b"}, 2: {1: "b"}},
            [torch.randn(2, 6, 5), torch.randn(4, 2, 7), torch.randn(4, 2, 7)],
            14,
        ),
        "resize": (
            _Resize(),
            [torch.randn(1, 3, 5, 6)],
            {0: {0: "b", 2: "h", 3: "w"}},
            [torch.randn(2, 3, 7, 4)],
            13,
        ),
        "loop": (torch.jit.script(_Loop()), [torch.randn(3, 4)], {0: n}, [torch.randn(5, 4)], 13),
        "if": (torch.jit.script(_If()), [torch.randn(3, 4)], {0: n}, [-torch.ones(5, 4)], 13),
        "indexing": (
            _Indexing(),
            [torch.randn(2, 4, 4), torch.randn(2, 4, 3)],
            {0: {0: "b"}, 1: {0: "b"}},
            [torch.randn(3, 4, 4), torch.randn(3, 4, 3)],
            13,
        ),
    }  # fmt: skip


@pytest.mark.parametrize("name", list(_multi_input_models()))
def test_pytorch_exports_of_several_inputs_against_onnxruntime(name):
    ort = pytest.importorskip("onnxruntime")
    model, inputs, dynamic, other, opset = _multi_input_models()[name]
    names = [f"in{i}" for i in range(len(inputs))]
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model.eval() if isinstance(model, nn.Module) else model, tuple(inputs), buf,
            opset_version=opset, dynamo=False, input_names=names,
            dynamic_axes={names[i]: axes for i, axes in dynamic.items()},
        )  # fmt: skip
    session = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    f = ember.onnx.load(buf.getvalue())
    for batch in (inputs, other):
        feeds = {n: t.numpy() for n, t in zip(names, batch)}
        want = session.run(None, feeds)
        got = f(*feeds.values())
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            g = g.numpy()
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype)
            scale = float(np.max(np.abs(w))) if w.size and w.dtype.kind == "f" else 1.0
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(scale, 1.0))


@pytest.mark.parametrize("name", ["bert"])
def test_dynamo_exporter_files(name, tmp_path):
    """torch.onnx.export(..., dynamo=True) (the torch.export path: opset 18 and later, its own
    naming and decompositions, onnxscript's functions inlined)."""
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    model, inputs, dynamic, other, _ = _multi_input_models()[name]
    names = [f"in{i}" for i in range(len(inputs))]
    path = str(tmp_path / "m.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            model.eval(), tuple(inputs), dynamo=True, opset_version=18, input_names=names,
            dynamic_axes={names[i]: axes for i, axes in dynamic.items()}, verbose=False,
        )  # fmt: skip
        program.save(path)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    f = ember.onnx.load(path)
    for batch in (inputs, other):
        feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), batch)}
        want = session.run(None, feeds)
        got = f(*feeds.values())
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, want):
            scale = float(np.max(np.abs(w))) if w.size and w.dtype.kind == "f" else 1.0
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=1e-5 * max(scale, 1.0))
