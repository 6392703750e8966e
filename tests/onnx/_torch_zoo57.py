"""Models of kinds the other ONNX suites lack, written in plain PyTorch for
test_onnx57_torch_kinds.py: a U-Net's transposed convolutions and concatenated skips, a
super-resolution net (pixel unshuffle/shuffle, PReLU), graph message passing (index_add,
scatter_add), PointNet's max over points, a gated dilated causal TCN, a Conformer block
(attention, GLU, depthwise Conv1d), an MLP-Mixer, 3-D convolutions and pooling, ShuffleNet's
channel shuffle, a style-transfer net (reflection and replication padding, instance norm,
nearest upsampling), DenseNet's growing concatenation with a ceil-mode stride-3 average pool,
a mixture of experts (top-k gating, gathered expert weights, Einsum), unfold/roll/flip, masks
and cumulative ops, EmbeddingBag, ALiBi attention, a stacked bidirectional LSTM feeding a
GRUCell, sorting, YOLO's box decoding (meshgrid), float16 in and out, and nn.Transformer.
``MODELS``: each model's class and its inputs at a batch size; the source also runs on
ember (``import ember as torch``)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class UNetT(nn.Module):  # ConvTranspose up path, concat skips
    def __init__(self):
        super().__init__()
        self.d1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.d2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.up2 = nn.ConvTranspose2d(16, 4, 3, stride=2, padding=1, output_padding=1, dilation=1)
        self.out = nn.Conv2d(4, 2, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(a)
        c = torch.cat([self.up(b), a], 1)
        return self.out(
            F.interpolate(self.up2(c), scale_factor=0.5, mode="bilinear", align_corners=False)
        )


class SuperRes(nn.Module):  # PixelShuffle, PixelUnshuffle
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(12, 12, 3, padding=1)
        self.p = nn.PReLU(12)

    def forward(self, x):
        y = F.pixel_unshuffle(x, 2)
        return F.pixel_shuffle(self.p(self.c(y)), 2) + x.repeat(1, 2, 1, 1)[:, 1:4]


class GNN(nn.Module):  # index_add / scatter_add message passing
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(6, 6)

    def forward(self, x, src, dst):
        m = self.l(x)[src]
        out = torch.zeros_like(x).index_add(0, dst, m)
        deg = torch.zeros(x.shape[0], dtype=x.dtype).scatter_add(
            0, dst, torch.ones_like(dst, dtype=x.dtype)
        )
        return out / deg.clamp(min=1).unsqueeze(1)


class PointNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Sequential(
            nn.Conv1d(3, 16, 1), nn.BatchNorm1d(16), nn.ReLU(), nn.Conv1d(16, 32, 1)
        )
        self.h = nn.Linear(32, 5)

    def forward(self, x):
        f = self.c(x).max(dim=2).values
        return F.log_softmax(self.h(f), -1)


class TCN(nn.Module):  # dilated causal conv1d, weight norm, gated
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 8, 3, dilation=2)
        self.c2 = nn.Conv1d(4, 8, 3, dilation=2)

    def forward(self, x):
        x = F.pad(x, (4, 0))
        return torch.tanh(self.c1(x)) * torch.sigmoid(self.c2(x))


class Conformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.pw = nn.Conv1d(16, 32, 1)
        self.dw = nn.Conv1d(16, 16, 5, padding=2, groups=16)
        self.bn = nn.BatchNorm1d(16)
        self.ln = nn.LayerNorm(16)
        self.att = nn.MultiheadAttention(16, 4, batch_first=True)

    def forward(self, x):
        y = self.ln(x)
        y = self.att(y, y, y, need_weights=False)[0] + x
        z = F.glu(self.pw(y.transpose(1, 2)), dim=1)
        z = F.silu(self.bn(self.dw(z)))
        return y + z.transpose(1, 2)


class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.t = nn.Linear(8, 8)
        self.c = nn.Linear(12, 12)
        self.n = nn.LayerNorm(12)

    def forward(self, x):
        x = x + self.t(self.n(x).transpose(1, 2)).transpose(1, 2)
        return x + F.gelu(self.c(self.n(x)), approximate="tanh")


class Conv3D(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv3d(2, 4, 3, padding=1)
        self.b = nn.BatchNorm3d(4)
        self.ct = nn.ConvTranspose3d(4, 2, 2, stride=2)

    def forward(self, x):
        y = F.max_pool3d(F.relu(self.b(self.c(x))), 2)
        return self.ct(F.avg_pool3d(y, 1)) + F.adaptive_avg_pool3d(x, 1)


class ShuffleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(8, 8, 1, groups=2)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)

    def forward(self, x):
        y = self.c(x)
        n, c, h, w = y.shape
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        return F.hardswish(self.dw(y)) + F.relu6(x)


class StyleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3)
        self.i = nn.InstanceNorm2d(8, affine=True)
        self.c2 = nn.Conv2d(8, 3, 3)

    def forward(self, x):
        y = F.relu(self.i(self.c(F.pad(x, (1, 1, 1, 1), mode="reflect"))))
        y = F.interpolate(y, scale_factor=2, mode="nearest")
        return torch.tanh(self.c2(F.pad(y, (1, 1, 1, 1), mode="replicate")))


class DenseNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.ModuleList([nn.Conv2d(4 + 4 * i, 4, 3, padding=1) for i in range(3)])

    def forward(self, x):
        f = [x]
        for layer in self.l:
            f.append(F.relu(layer(torch.cat(f, 1))))
        return F.avg_pool2d(torch.cat(f, 1), 3, stride=3, ceil_mode=True, count_include_pad=False)


class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.g = nn.Linear(8, 4)
        self.e = nn.Parameter(torch.randn(4, 8, 8) * 0.3)

    def forward(self, x):
        w, i = torch.topk(F.softmax(self.g(x), -1), 2, dim=-1)
        ex = self.e[i]  # (B,T,2,8,8)
        y = torch.einsum("btd,btkde->btke", x, ex)
        return (y * w.unsqueeze(-1)).sum(-2)


class FoldUnfold(nn.Module):
    def forward(self, x):
        u = F.unfold(x, 3, padding=1, stride=2)
        return u.sum(1), torch.roll(x, shifts=(1, -2), dims=(2, 3)), torch.flip(x, [1])


class Masks(nn.Module):
    def forward(self, x):
        n = x.shape[-1]
        m = torch.tril(torch.ones(n, n, dtype=torch.bool))
        y = x.masked_fill(~m, -1e4)
        c = torch.cumsum(x, -1)
        return (
            y.softmax(-1),
            c,
            torch.logsumexp(x, -1),
            x.argmax(-1),
            torch.where(x > 0, x, 0.1 * x),
        )


class EmbBag(nn.Module):
    def __init__(self):
        super().__init__()
        self.e = nn.Embedding(20, 6, padding_idx=0)
        self.b = nn.EmbeddingBag(20, 6, mode="mean")

    def forward(self, i):
        return self.e(i).sum(1) + self.b(i)


class ALiBi(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(16, 48)
        self.slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625])

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.q(x).view(B, T, 3, 4, 4).permute(2, 0, 3, 1, 4).unbind(0)
        pos = torch.arange(T)
        bias = (pos[None, :] - pos[:, None]).float().abs().neg()[None] * self.slopes[:, None, None]
        return (
            F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            .transpose(1, 2)
            .reshape(B, T, 16)
        )


class BiLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.LSTM(5, 7, num_layers=2, bidirectional=True, batch_first=True)
        self.c = nn.GRUCell(14, 6)

    def forward(self, x):
        y, (h, c) = self.l(x)
        return self.c(y[:, -1]), h


class Sorting(nn.Module):
    def forward(self, x):
        v, i = torch.sort(x, -1, descending=True)
        return (
            v,
            i,
            torch.argsort(x, 1),
            torch.topk(x, 2, -1, largest=False)[0],
            x.clamp(-0.5, 0.5).round(),
        )


class Detect(nn.Module):  # box decoding, meshgrid, sigmoid, stack
    def forward(self, p):
        B, A, H, W = p.shape[0], 3, p.shape[2], p.shape[3]
        p = p.view(B, A, 6, H, W).permute(0, 1, 3, 4, 2)
        gy, gx = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
        g = torch.stack((gx, gy), 2).float()
        xy = (p[..., :2].sigmoid() * 2 - 0.5 + g) * 8
        wh = (p[..., 2:4].sigmoid() * 2) ** 2
        return torch.cat((xy, wh, p[..., 4:].sigmoid()), -1).view(B, -1, 6)


class Half(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        return self.l(x.float()).half().relu() * 2


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.t = nn.Transformer(16, 2, 1, 1, 32, dropout=0.0, batch_first=True)

    def forward(self, a, b):
        m = torch.triu(torch.full((b.shape[1], b.shape[1]), float("-inf")), 1)
        return self.t(a, b, tgt_mask=m)


def _x(*shape):
    return torch.randn(*shape)


MODELS = {
    "unet_t": (UNetT, lambda b: (_x(b, 3, 16, 16),)),
    "superres": (SuperRes, lambda b: (_x(b, 3, 8, 12),)),
    "gnn": (
        GNN,
        lambda b: (
            _x(5 + b, 6),
            torch.tensor([0, 1, 2, 3, 4, 1, 0]),
            torch.tensor([1, 2, 3, 4, 0, 0, 2]),
        ),
    ),
    "pointnet": (PointNet, lambda b: (_x(b, 3, 40),)),
    "tcn": (TCN, lambda b: (_x(b, 4, 17),)),
    "conformer": (Conformer, lambda b: (_x(b, 9, 16),)),
    "mixer": (Mixer, lambda b: (_x(b, 8, 12),)),
    "seq2seq": (Seq2Seq, lambda b: (_x(b, 7, 16), _x(b, 5, 16))),
    "conv3d": (Conv3D, lambda b: (_x(b, 2, 6, 8, 8),)),
    "shufflenet": (ShuffleNet, lambda b: (_x(b, 8, 10, 10),)),
    "stylenet": (StyleNet, lambda b: (_x(b, 3, 9, 11),)),
    "densenet": (DenseNet, lambda b: (_x(b, 4, 10, 10),)),
    "moe": (MoE, lambda b: (_x(b, 5, 8),)),
    "foldunfold": (FoldUnfold, lambda b: (_x(b, 2, 7, 8),)),
    "masks": (Masks, lambda b: (_x(b, 6, 6),)),
    "embbag": (EmbBag, lambda b: (torch.randint(0, 20, (b, 4)),)),
    "alibi": (ALiBi, lambda b: (_x(b, 6, 16),)),
    "bilstm": (BiLSTM, lambda b: (_x(b, 6, 5),)),
    "sorting": (Sorting, lambda b: (_x(b, 6, 5),)),
    "detect": (Detect, lambda b: (_x(b, 18, 4, 5),)),
    "half": (Half, lambda b: (_x(b, 8).half(),)),
}
