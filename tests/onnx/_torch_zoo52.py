"""HuggingFace-style patterns rebuilt in plain PyTorch (test_onnx52_hf_patterns.py), so the
suite exercises what transformers' models export without depending on transformers: T5's
relative position buckets (log, min, where over a position table) and its float32 RMS norm;
Wav2Vec2's feature extractor (strided Conv1d without bias, GroupNorm with one channel per
group, GELU) and its weight-normed grouped positional convolution with the even kernel's last
frame cut; Swin's shifted windows (roll, window partition through view/permute, a relative
position bias gathered by a buffer of indices); CLIP's text tower (a causal mask from triu,
pooling at each row's argmax); a GPT-2 decoder step on a key/value cache (past and new keys
concatenated, positions ``arange(past, past + t)``, the causal mask offset by the past length)
with Mistral's sliding window and a left-padding mask over the cached tokens. ``MODELS`` names
each model's inputs and dynamic axes; ``inputs(name, batch, length)`` draws a feed; the source
runs on ember too (``import ember as torch``)"""

from __future__ import annotations

import contextlib
import io
import math
import warnings

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def _attend(q, k, v, bias):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + bias
    return torch.softmax(scores, dim=-1) @ v


class T5Encoder(nn.Module):
    def __init__(self, vocab=40, d=16, heads=2, buckets=8, max_distance=16):
        super().__init__()
        self.embed, self.heads = nn.Embedding(vocab, d), heads
        self.buckets, self.max_distance = buckets, max_distance
        self.bias = nn.Embedding(buckets, heads)
        self.qkv, self.out = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.norm_weight = nn.Parameter(torch.ones(d))

    def bucket(self, relative):
        half = self.buckets // 2
        ret = (relative > 0).long() * half
        n = torch.abs(relative)
        exact = half // 2
        is_small = n < exact
        large = (
            exact
            + (
                torch.log(n.float() / exact) / math.log(self.max_distance / exact) * (half - exact)
            ).long()
        )
        large = torch.min(large, torch.full_like(large, half - 1))
        return ret + torch.where(is_small, n, large)

    def rms(self, x):
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return self.norm_weight * (x * torch.rsqrt(variance + 1e-6))

    def forward(self, ids, mask):
        b, t = ids.shape
        x = self.embed(ids)
        position = torch.arange(t)
        relative = position[None, :] - position[:, None]
        bias = self.bias(self.bucket(relative)).permute(2, 0, 1)[None]
        padding = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        q, k, v = self.qkv(self.rms(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = _attend(q, k, v, bias + padding)
        return x + self.out(a.transpose(1, 2).reshape(b, t, -1))


class Wav2Vec(nn.Module):
    def __init__(self, c=8, d=16):
        super().__init__()
        self.conv0 = nn.Conv1d(1, c, 10, stride=5, bias=False)
        self.norm0 = nn.GroupNorm(c, c)
        self.conv1 = nn.Conv1d(c, c, 3, stride=2, bias=False)
        self.ln, self.project = nn.LayerNorm(c), nn.Linear(c, d)
        self.pos = nn.utils.parametrizations.weight_norm(
            nn.Conv1d(d, d, 4, padding=2, groups=4), name="weight", dim=2
        )

    def forward(self, wave):
        h = F.gelu(self.norm0(self.conv0(wave[:, None])))
        h = F.gelu(self.conv1(h)).transpose(1, 2)
        h = self.project(self.ln(h))
        p = self.pos(h.transpose(1, 2))[:, :, :-1]  # (the even kernel's extra frame)
        return h + F.gelu(p).transpose(1, 2)


class Swin(nn.Module):
    def __init__(self, d=8, heads=2, window=4, shift=2):
        super().__init__()
        self.embed = nn.Conv2d(3, d, 2, stride=2)
        self.window, self.shift, self.heads = window, shift, heads
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.1)
        coords = torch.stack(
            torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")
        )
        flat = coords.flatten(1)
        relative = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0) + (window - 1)
        self.register_buffer("index", relative[..., 0] * (2 * window - 1) + relative[..., 1])
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        x = self.embed(x).permute(0, 2, 3, 1)  # (b, h, w, d)
        b, h, w, d = x.shape
        s, ws = self.shift, self.window
        shifted = torch.roll(x, shifts=(-s, -s), dims=(1, 2))
        windows = shifted.view(b, h // ws, ws, w // ws, ws, d).permute(0, 1, 3, 2, 4, 5)
        windows = windows.reshape(-1, ws * ws, d)
        n = windows.shape[0]
        q, k, v = self.qkv(windows).view(n, ws * ws, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        bias = self.table[self.index.reshape(-1)].view(ws * ws, ws * ws, -1).permute(2, 0, 1)
        a = _attend(q, k, v, bias[None]).transpose(1, 2).reshape(n, ws * ws, d)
        a = self.out(a).view(b, h // ws, w // ws, ws, ws, d).permute(0, 1, 3, 2, 4, 5)
        a = a.reshape(b, h, w, d)
        return torch.roll(a, shifts=(s, s), dims=(1, 2)) + x


class ClipText(nn.Module):
    def __init__(self, vocab=30, d=16, heads=2):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, d), nn.Embedding(24, d)
        self.heads, self.ln = heads, nn.LayerNorm(d)
        self.qkv, self.out, self.final = nn.Linear(d, 3 * d), nn.Linear(d, d), nn.LayerNorm(d)
        self.projection = nn.Linear(d, 8, bias=False)

    def forward(self, ids):
        b, t = ids.shape
        x = self.tokens(ids) + self.positions(torch.arange(t))[None]
        causal = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)[None, None]
        q, k, v = self.qkv(self.ln(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        x = x + self.out(_attend(q, k, v, causal).transpose(1, 2).reshape(b, t, -1))
        x = self.final(x)
        pooled = x[torch.arange(b), ids.argmax(dim=-1)]
        return x, self.projection(pooled)


class CachedDecoder(nn.Module):
    """One step of a GPT-2-style decoder on a cache, Mistral's sliding window in the mask."""

    def __init__(self, vocab=30, d=16, heads=2, window=5):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, d), nn.Embedding(32, d)
        self.heads, self.window = heads, window
        self.ln, self.qkv = nn.LayerNorm(d), nn.Linear(d, 3 * d)
        self.out, self.head = nn.Linear(d, d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids, mask, past_k, past_v):
        b, t = ids.shape
        past = past_k.shape[2]
        x = self.tokens(ids) + self.positions(torch.arange(past, past + t))[None]
        q, k, v = self.qkv(self.ln(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        rows = torch.arange(past, past + t)[:, None]
        cols = torch.arange(past + t)[None, :]
        allowed = (cols <= rows) & (rows - cols < self.window)
        keep = torch.cat([mask, torch.ones(b, t, dtype=mask.dtype)], 1)  # (new tokens: kept)
        allowed = allowed[None, None] & keep[:, None, None, :].bool()
        bias = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
        a = _attend(q, k, v, bias).transpose(1, 2).reshape(b, t, -1)
        return self.head(x + self.out(a)), k, v


MODELS = {
    "t5": (T5Encoder, ["ids", "mask"], {0: {0: "b", 1: "t"}, 1: {0: "b", 1: "t"}}),
    "wav2vec": (Wav2Vec, ["wave"], {0: {0: "b", 1: "samples"}}),
    "swin": (Swin, ["x"], {0: {0: "b"}}),
    "clip_text": (ClipText, ["ids"], {0: {0: "b", 1: "t"}}),
    "cached_decoder": (
        CachedDecoder,
        ["ids", "mask", "past_k", "past_v"],
        {
            0: {0: "b", 1: "t"},
            1: {0: "b", 1: "past"},
            2: {0: "b", 2: "past"},
            3: {0: "b", 2: "past"},
        },
    ),
}


def build(name: str) -> nn.Module:
    torch.manual_seed(0)
    model = MODELS[name][0]().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape) * 0.05)
    return model


def inputs(name: str, batch: int, length: int) -> list:
    r = np.random.default_rng(batch * 100 + length)
    if name == "t5":
        mask = np.ones((batch, length), np.int64)
        mask[-1, length // 2 :] = 0
        return [r.integers(0, 40, (batch, length)), mask]
    if name == "wav2vec":
        return [r.standard_normal((batch, 40 * length + 3)).astype(np.float32)]
    if name == "swin":
        return [r.standard_normal((batch, 3, 16, 16)).astype(np.float32)]
    if name == "clip_text":
        return [r.integers(0, 30, (batch, length))]
    past, t = length, 1 + length % 3
    mask = np.ones((batch, past), np.int64)
    mask[-1, :2] = 0  # (left padding of the cached tokens)
    k, v = (r.standard_normal((batch, 2, past, 8)).astype(np.float32) for _ in range(2))
    return [r.integers(0, 30, (batch, t)), mask, k, v]


def dynamic_shapes(name: str, dim=None) -> tuple:
    """``dynamic_shapes`` for the model's inputs: one Dim per name, shared between inputs."""
    dim = dim or torch.export.Dim
    _, names, axes = MODELS[name]
    dims = {}
    for per_input in axes.values():
        for dim_name in per_input.values():
            dims.setdefault(
                dim_name, dim(dim_name, min=2, max=64 if dim_name != "samples" else 4096)
            )
    return tuple({axis: dims[n] for axis, n in axes.get(i, {}).items()} for i in range(len(names)))


def dynamic_axes(name: str) -> dict:
    """TorchScript's ``dynamic_axes`` (names per input)."""
    _, names, axes = MODELS[name]
    return {names[i]: dict(per_input) for i, per_input in axes.items()}


def export(name: str, path, *, dynamo: bool, opset: int) -> nn.Module:
    """Export ``build(name)`` (traced at batch 2, length 7) with PyTorch's exporter."""
    model = build(name)
    args = tuple(torch.tensor(a) for a in inputs(name, 2, 7))
    options = (
        {"dynamic_shapes": dynamic_shapes(name)}
        if dynamo
        else {"dynamic_axes": dynamic_axes(name), "output_names": None}
    )
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            args,
            str(path),
            dynamo=dynamo,
            opset_version=opset,
            input_names=MODELS[name][1],
            **options,
        )
    return model
