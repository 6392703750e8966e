"""Small PyTorch models exported by PyTorch's dynamo exporter (``torch.onnx.export(...,
dynamo=True)``, test_onnx51_dynamo_exports.py): a BERT-like encoder on scaled_dot_product_attention
with a padding mask, a tiny LLaMA-style decoder (RMSNorm, rotary embedding, SwiGLU, causal
attention), a ViT, a MobileNetV3 block (hardswish, squeeze-excite), a ResNet with BatchNorm in
eval mode, an LSTM and a GRU, a model of selections (where, masked_fill, cumsum, topk, gather,
index_select) and one of resampling (interpolate, grid_sample). ``MODELS`` names each model's
inputs and which of their axes are dynamic (``torch.export.Dim`` names); ``inputs(name, batch,
length)`` draws a feed. Parameters are perturbed off their fresh values so that no two tensors
are equal."""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class Bert(nn.Module):
    def __init__(self, vocab=50, d=16, heads=2, layers=2):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, d), nn.Embedding(32, d)
        self.ln, self.heads = nn.LayerNorm(d), heads
        self.qkv = nn.ModuleList([nn.Linear(d, 3 * d) for _ in range(layers)])
        self.out = nn.ModuleList([nn.Linear(d, d) for _ in range(layers)])
        self.ff = nn.ModuleList(
            [nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, d)) for _ in range(layers)]
        )
        self.norms = nn.ModuleList([nn.LayerNorm(d) for _ in range(2 * layers)])
        self.pool = nn.Linear(d, d)

    def forward(self, ids, mask):
        b, t = ids.shape
        x = self.ln(self.tokens(ids) + self.positions(torch.arange(t).unsqueeze(0)))
        keep = mask[:, None, None, :].bool()
        for i, (qkv, out, ff) in enumerate(zip(self.qkv, self.out, self.ff)):
            q, k, v = qkv(x).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            x = self.norms[2 * i](x + out(a.transpose(1, 2).reshape(b, t, -1)))
            x = self.norms[2 * i + 1](x + ff(x))
        return x, torch.tanh(self.pool(x[:, 0]))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def _rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), -1)
    return x * cos + rotated * sin


class Llama(nn.Module):
    def __init__(self, vocab=60, d=16, heads=4, kv_heads=2, hidden=40):
        super().__init__()
        self.embed, self.heads, self.kv_heads = nn.Embedding(vocab, d), heads, kv_heads
        self.head_dim = d // heads
        self.norm1, self.norm2, self.final = RMSNorm(d), RMSNorm(d), nn.RMSNorm(d, eps=1e-5)
        self.q = nn.Linear(d, d, bias=False)
        self.kv = nn.Linear(d, 2 * kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate, self.up = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.down, self.lm = nn.Linear(hidden, d, bias=False), nn.Linear(d, vocab, bias=False)
        inv = 1.0 / 10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim)
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, ids):
        b, t = ids.shape
        x = self.embed(ids)
        angles = torch.arange(t, dtype=torch.float32)[:, None] * self.inv_freq[None]
        angles = torch.cat((angles, angles), -1)
        cos, sin = angles.cos(), angles.sin()
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, 1), v.repeat_interleave(repeat, 1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
        h = self.norm2(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        return self.lm(self.final(x))


class ViT(nn.Module):
    def __init__(self, d=16, patch=4, classes=5):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, 17, d))
        layer = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, classes))

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls.expand(x.shape[0], -1, -1), x), 1) + self.pos
        return self.head(self.encoder(x)[:, 0])


class ConvNeXt(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.dw, self.ln = nn.Conv2d(c, c, 7, padding=3, groups=c), nn.LayerNorm(c, eps=1e-6)
        self.up, self.down = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.full((c,), 0.1))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.down(F.gelu(self.up(self.ln(y)))) * self.gamma
        return x + y.permute(0, 3, 1, 2)


class MobileNetV3(nn.Module):
    def __init__(self, c=8, e=3):
        super().__init__()
        self.expand = nn.Sequential(
            nn.Conv2d(c, c * e, 1, bias=False), nn.BatchNorm2d(c * e), nn.Hardswish()
        )
        self.dw = nn.Sequential(
            nn.Conv2d(c * e, c * e, 3, 2, 1, groups=c * e, bias=False), nn.BatchNorm2d(c * e)
        )
        self.se = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(c * e, 8, 1),
            nn.ReLU(),
            nn.Conv2d(8, c * e, 1),
            nn.Hardsigmoid(),
        )
        self.project = nn.Sequential(nn.Conv2d(c * e, c, 1, bias=False), nn.BatchNorm2d(c))
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        y = F.hardswish(self.dw(self.expand(x)))
        return self.project(y * self.se(y)), self.pool(x).flatten(1)


class _Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.skip = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x):
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.skip(x))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU()
        )
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.blocks = nn.Sequential(_Basic(8, 8, 1), _Basic(8, 16, 2))
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        y = self.blocks(self.pool(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 8, num_layers=2, batch_first=True)
        self.gru = nn.GRU(8, 5, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(10, 3)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        z, g = self.gru(y)
        return self.fc(z), h, c, g


class Selections(nn.Module):
    def __init__(self, d=10):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.register_buffer("order", torch.tensor([3, 1, 4, 0, 2, 9]))

    def forward(self, x, mask):
        y = self.proj(x)
        y = y.masked_fill(~mask.unsqueeze(-1), -1.0)
        y = torch.where(y > 0, y, 0.1 * y)
        c = torch.cumsum(y, dim=1)
        values, positions = torch.topk(c, 3, dim=-1)
        gathered = torch.gather(y, -1, positions)
        picked = torch.index_select(y, -1, self.order)
        return values + gathered, picked, positions


class Resample(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.theta = nn.Parameter(torch.tensor([[0.9, 0.1, 0.05], [-0.1, 0.8, -0.05]]))

    def forward(self, x):
        y = self.conv(x)
        up = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        near = F.interpolate(y, scale_factor=2.0, mode="nearest")
        grid = F.affine_grid(self.theta.expand(x.shape[0], 2, 3), list(up.shape), False)
        return F.grid_sample(up, grid, align_corners=False) + near


# name: (class, input names, {input index: {axis: Dim name}}); images' sizes kept fixed
# where the model's own arithmetic needs them (the ViT's positions, the resampling's grid).
MODELS = {
    "bert": (Bert, ["ids", "mask"], {0: {0: "b", 1: "t"}, 1: {0: "b", 1: "t"}}),
    "llama": (Llama, ["ids"], {0: {0: "b", 1: "t"}}),
    "vit": (ViT, ["x"], {0: {0: "b"}}),
    "convnext": (ConvNeXt, ["x"], {0: {0: "b", 2: "h", 3: "w"}}),
    "mobilenet": (MobileNetV3, ["x"], {0: {0: "b", 2: "h", 3: "w"}}),
    "resnet": (ResNet, ["x"], {0: {0: "b", 2: "h", 3: "w"}}),
    "recurrent": (Recurrent, ["x"], {0: {0: "b", 1: "t"}}),
    "selections": (Selections, ["x", "mask"], {0: {0: "b", 1: "t"}, 1: {0: "b", 1: "t"}}),
    "resample": (Resample, ["x"], {0: {0: "b"}}),
}


def build(name: str) -> nn.Module:
    torch.manual_seed(0)
    model = MODELS[name][0]().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    return model


def inputs(name: str, batch: int, length: int) -> list:
    r = np.random.default_rng(batch * 100 + length)
    if name in ("bert", "selections"):
        mask = np.ones((batch, length), bool if name == "selections" else np.int64)
        mask[0, length // 2 :] = 0
        if name == "bert":
            return [r.integers(0, 50, (batch, length)), mask]
        return [r.standard_normal((batch, length, 10)).astype(np.float32), mask]
    if name == "llama":
        return [r.integers(0, 60, (batch, length))]
    if name == "recurrent":
        return [r.standard_normal((batch, length, 6)).astype(np.float32)]
    if name in ("vit", "resample"):
        return [r.standard_normal((batch, 3, 16, 16)).astype(np.float32)]
    channels = 3 if name == "resnet" else 8
    return [r.standard_normal((batch, channels, length, length + 2)).astype(np.float32)]


def dynamic_shapes(name: str) -> tuple:
    """``torch.export``'s dynamic_shapes for the model's inputs: one Dim object per name, shared
    between inputs (a mask's batch and length are the ids')."""
    _, names, axes = MODELS[name]
    dims = {}
    for per_input in axes.values():
        for dim_name in per_input.values():
            dims.setdefault(dim_name, torch.export.Dim(dim_name, min=2, max=64))
    return tuple({axis: dims[n] for axis, n in axes.get(i, {}).items()} for i in range(len(names)))


def export(name: str, opset: int, optimize: bool, path) -> nn.Module:
    """Export ``build(name)`` to ``path`` with the dynamo exporter (traced at batch 2, length
    6; the sizes ``MODELS`` names dynamic); returns the model."""
    model = build(name)
    args = tuple(torch.tensor(a) for a in inputs(name, 2, 6))
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            args,
            str(path),
            dynamo=True,
            opset_version=opset,
            optimize=optimize,
            dynamic_shapes=dynamic_shapes(name),
            input_names=MODELS[name][1],
        )
    return model


def export_case(folder, case) -> tuple:
    """(model, path) of ``case`` ((name, opset, optimize)), exported into ``folder``."""
    name, opset, optimize = case
    path = folder / f"{name}_{opset}_{int(optimize)}.onnx"
    return export(name, opset, optimize, path), path
