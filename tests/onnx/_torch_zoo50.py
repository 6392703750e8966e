"""Small PyTorch models of the kinds held-out ONNX files come from (test_onnx50_torch_models.py):
a BERT-like encoder (attention mask, token types), a ConvNeXt block, an EfficientNet MBConv,
a masked bidirectional GRU, a YOLO-style head and a DETR-ish decoder with
nn.MultiheadAttention and a key padding mask; ``inputs(name, batch, length)`` draws their
inputs, ``DYNAMIC`` names their dynamic axes. Parameters are perturbed off their fresh values
so that no two tensors are equal (PyTorch's exporter merges equal initializers, which would tie
them when fine-tuned)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class _Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.qkv, self.out, self.heads = nn.Linear(d, 3 * d), nn.Linear(d, d), heads

    def forward(self, x, bias):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5 + bias, -1)
        return self.out((a @ v).transpose(1, 2).reshape(b, t, d))


class _Layer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.attention, self.ln1, self.ln2 = _Attention(d, heads), nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x, bias):
        x = self.ln1(x + self.attention(x, bias))
        return self.ln2(x + self.ff(x))


class Bert(nn.Module):
    def __init__(self, vocab=40, d=16, heads=2):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, d), nn.Embedding(32, d)
        self.types, self.ln = nn.Embedding(2, d), nn.LayerNorm(d)
        self.layers = nn.ModuleList([_Layer(d, heads) for _ in range(2)])

    def forward(self, ids, mask, types):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.ln(self.tokens(ids) + self.positions(positions) + self.types(types))
        bias = (1.0 - mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x[:, 0], x.mean(1)


class ConvNeXt(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.dw, self.ln = nn.Conv2d(c, c, 7, padding=3, groups=c), nn.LayerNorm(c)
        self.up, self.down = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.full((c,), 0.1))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.down(nn.functional.gelu(self.up(self.ln(y)))) * self.gamma
        return x + y.permute(0, 3, 1, 2)


class MBConv(nn.Module):
    def __init__(self, c=8, e=3):
        super().__init__()
        self.expand = nn.Sequential(
            nn.Conv2d(c, c * e, 1, bias=False), nn.BatchNorm2d(c * e), nn.SiLU()
        )
        self.dw = nn.Sequential(
            nn.Conv2d(c * e, c * e, 3, padding=1, groups=c * e, bias=False),
            nn.BatchNorm2d(c * e),
            nn.SiLU(),
        )
        self.se1, self.se2 = nn.Conv2d(c * e, 4, 1), nn.Conv2d(4, c * e, 1)
        self.project = nn.Sequential(nn.Conv2d(c * e, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        y = self.dw(self.expand(x))
        squeeze = nn.functional.adaptive_avg_pool2d(y, 1)
        w = torch.sigmoid(self.se2(nn.functional.silu(self.se1(squeeze))))
        return x + self.project(y * w)


class MaskedGRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(6, 8, batch_first=True, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(16, 3)

    def forward(self, x, mask):
        out, h = self.gru(x * mask.unsqueeze(-1))
        m = mask.unsqueeze(-1)
        return self.fc((out * m).sum(1) / m.sum(1).clamp(min=1)), h


class YoloHead(nn.Module):
    def __init__(self, c=8, anchors=3, classes=4):
        super().__init__()
        self.conv, self.a, self.k = nn.Conv2d(c, anchors * (5 + classes), 1), anchors, classes
        self.register_buffer("anchors", torch.tensor([[10.0, 13], [16, 30], [33, 23]]))

    def forward(self, x):
        b, _, h, w = x.shape
        p = self.conv(x).view(b, self.a, 5 + self.k, h, w).permute(0, 1, 3, 4, 2)
        gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        grid = torch.stack((gx, gy), -1).view(1, 1, h, w, 2).float()
        xy = (p[..., :2].sigmoid() * 2 - 0.5 + grid) * 8
        wh = (p[..., 2:4].sigmoid() * 2) ** 2 * self.anchors.view(1, self.a, 1, 1, 2)
        return torch.cat((xy, wh, p[..., 4:].sigmoid()), -1).view(b, -1, 5 + self.k)


class Detr(nn.Module):
    def __init__(self, d=16, queries=4):
        super().__init__()
        self.queries = nn.Parameter(torch.randn(queries, d))
        self.self_attention = nn.MultiheadAttention(d, 2, batch_first=True)
        self.cross = nn.MultiheadAttention(d, 2)  # (sequence-first: see forward)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, d))
        self.box = nn.Linear(d, 4)

    def forward(self, memory, padding):
        q = self.queries.unsqueeze(0).expand(memory.shape[0], -1, -1)
        q = self.ln1(q + self.self_attention(q, q, q, need_weights=False)[0])
        # (with a padding mask, batch-first cross attention, or one tensor as both key and
        # value, exports with a size PyTorch's exporter fixes at the traced length, which
        # onnxruntime itself then refuses: sequence-first, the key and value two transposes)
        key, value = memory.transpose(0, 1), memory.transpose(0, 1)
        a, weights = self.cross(q.transpose(0, 1), key, value, key_padding_mask=padding)
        q = self.ln2(q + a.transpose(0, 1))
        return self.box(q + self.ff(q)).sigmoid(), weights


MODELS = {
    "bert": (Bert, ["ids", "mask", "types"], {0: "b", 1: "t"}),
    "convnext": (ConvNeXt, ["x"], {0: "b", 2: "h", 3: "w"}),
    "mbconv": (MBConv, ["x"], {0: "b", 2: "h", 3: "w"}),
    "gru": (MaskedGRU, ["x", "mask"], {0: "b", 1: "t"}),
    "yolo": (YoloHead, ["x"], {0: "b", 2: "h", 3: "w"}),
    "detr": (Detr, ["memory", "padding"], {0: "b", 1: "t"}),
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
    if name == "bert":
        mask = np.ones((batch, length), np.int64)
        mask[0, length // 2 :] = 0
        return [r.integers(0, 40, (batch, length)), mask, r.integers(0, 2, (batch, length))]
    if name == "gru":
        mask = np.ones((batch, length), np.float32)
        mask[0, length // 2 :] = 0
        return [r.standard_normal((batch, length, 6)).astype(np.float32), mask]
    if name == "detr":
        padding = np.zeros((batch, length), bool)
        padding[0, length // 2 :] = True
        return [r.standard_normal((batch, length, 16)).astype(np.float32), padding]
    channels = 8
    return [r.standard_normal((batch, channels, length, length + 2)).astype(np.float32)]
