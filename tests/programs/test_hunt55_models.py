"""Model programs of hunt55, each run on PyTorch and on ember: HuggingFace-style code (a config
dataclass, an ``nn.ModuleDict`` of heads, non-persistent buffers, ``finfo(dtype).min`` masks
filled through broadcast bool masks, ``torch.where`` with scalars, ``einsum`` with ellipsis),
rotary embeddings built with ``outer``/``cat``/``repeat_interleave``, a KV-cache generation loop
under ``inference_mode`` with top-k/top-p sampling (``sort``, ``cumsum``, ``scatter``,
``multinomial``), and vision utilities (grid_sample's modes, affine_grid, pixel (un)shuffle,
unfold, roll, flip, rot90) with gradients.
"""

import dataclasses
import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


@dataclasses.dataclass
class TinyConfig:
    vocab_size: int = 40
    hidden_size: int = 16
    num_heads: int = 4
    num_layers: int = 2
    max_position: int = 32
    num_labels: int = 3
    rope_theta: float = 10000.0
    layer_norm_eps: float = 1e-5


def _hf_model(torch, cfg):
    nn, F = torch.nn, torch.nn.functional

    class RotaryEmbedding(nn.Module):
        def __init__(self, dim, max_pos, base):
            super().__init__()
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
            self.register_buffer("inv_freq", inv_freq, persistent=False)
            t = torch.arange(max_pos, dtype=torch.float32)
            freqs = torch.outer(t, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos_cached", emb.cos(), persistent=False)
            self.register_buffer("sin_cached", emb.sin(), persistent=False)

        def forward(self, position_ids):
            return self.cos_cached[position_ids], self.sin_cached[position_ids]

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)

    class Attention(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.h = cfg.num_heads
            self.d = cfg.hidden_size // cfg.num_heads
            self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size, bias=False)
            self.o = nn.Linear(cfg.hidden_size, cfg.hidden_size)

        def forward(self, x, cos, sin, mask, past=None):
            B, T, C = x.shape
            q, k, v = self.qkv(x).view(B, T, 3, self.h, self.d).permute(2, 0, 3, 1, 4).unbind(0)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if past is not None:
                k = torch.cat([past[0], k], dim=-2)
                v = torch.cat([past[1], v], dim=-2)
            scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(self.d)
            scores = scores + mask
            probs = scores.softmax(-1, dtype=torch.float32).to(q.dtype)
            out = torch.einsum("...qk,...kd->...qd", probs, v)
            out = out.transpose(1, 2).reshape(B, T, C)
            return self.o(out), (k, v)

    class Block(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.ln1 = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
            self.attn = Attention(cfg)
            self.ln2 = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
            self.mlp = nn.Sequential(
                nn.Linear(cfg.hidden_size, 4 * cfg.hidden_size),
                nn.GELU(approximate="tanh"),
                nn.Linear(4 * cfg.hidden_size, cfg.hidden_size),
            )

        def forward(self, x, cos, sin, mask, past=None):
            a, kv = self.attn(self.ln1(x), cos, sin, mask, past)
            x = x + a
            return x + self.mlp(self.ln2(x)), kv

    class Model(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.config = cfg
            self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size, padding_idx=0)
            self.rotary = RotaryEmbedding(
                cfg.hidden_size // cfg.num_heads, cfg.max_position, cfg.rope_theta
            )
            self.layers = nn.ModuleList([Block(cfg) for _ in range(cfg.num_layers)])
            self.norm = nn.LayerNorm(cfg.hidden_size)
            self.heads = nn.ModuleDict(
                {
                    "lm": nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False),
                    "cls": nn.Sequential(
                        nn.Dropout(0.0), nn.Linear(cfg.hidden_size, cfg.num_labels)
                    ),
                }
            )
            self.heads["lm"].weight = self.embed.weight
            self.apply(self._init_weights)

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                module.weight.data.normal_(mean=0.0, std=0.02)
                if module.bias is not None:
                    module.bias.data.zero_()
            elif isinstance(module, nn.Embedding):
                module.weight.data.normal_(mean=0.0, std=0.02)
                if module.padding_idx is not None:
                    module.weight.data[module.padding_idx].zero_()

        def forward(self, input_ids, attention_mask=None, past_key_values=None, position_ids=None):
            B, T = input_ids.shape
            past_len = 0 if past_key_values is None else past_key_values[0][0].shape[-2]
            if position_ids is None:
                position_ids = torch.arange(past_len, past_len + T).unsqueeze(0).expand(B, -1)
            x = self.embed(input_ids)
            dtype = x.dtype
            min_value = torch.finfo(dtype).min
            causal = torch.ones(T, past_len + T, dtype=torch.bool).tril(diagonal=past_len)
            mask = torch.zeros(B, 1, T, past_len + T, dtype=dtype)
            mask = mask.masked_fill(~causal, min_value)
            if attention_mask is not None:
                pad = attention_mask[:, None, None, :].to(torch.bool)
                mask = mask.masked_fill(~pad, min_value)
            cos, sin = self.rotary(position_ids)
            presents = []
            for i, layer in enumerate(self.layers):
                past = None if past_key_values is None else past_key_values[i]
                x, kv = layer(x, cos, sin, mask, past)
                presents.append(kv)
            x = self.norm(x)
            return {
                "logits": self.heads["lm"](x),
                "cls": self.heads["cls"](x[:, 0]),
                "past_key_values": tuple(presents),
            }

    return Model(cfg)


def hf_style_training(torch, ctx):
    """A config-dataclass model with tied heads in a ModuleDict, non-persistent rotary buffers,
    a padding mask filled with finfo.min, a masked LM loss (ignore_index) plus a classification
    loss, three AdamW steps with a grouped no-decay set; state_dict keys exclude the buffers."""
    cfg = TinyConfig()
    model = ctx.init(_hf_model(torch, cfg))
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    ids = ctx.t(rng.integers(1, cfg.vocab_size, (3, 10)))
    am = ctx.t(np.array([[1] * 10, [1] * 7 + [0] * 3, [1] * 5 + [0] * 5]))
    ids = torch.where(am.bool(), ids, 0)
    labels = ids.clone()
    labels[am == 0] = -100
    cls_labels = ctx.t(np.array([0, 2, 1]))
    no_decay = ["bias", "norm", "ln"]
    groups = [
        {
            "params": [
                p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)
            ],
            "weight_decay": 0.01,
        },
        {
            "params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
            "weight_decay": 0.0,
        },
    ]
    opt = torch.optim.AdamW(groups, lr=1e-2)
    losses = []
    for _ in range(3):
        out = model(ids, attention_mask=am)
        logits = out["logits"][:, :-1]
        lm = F.cross_entropy(
            logits.reshape(-1, cfg.vocab_size), labels[:, 1:].reshape(-1), ignore_index=-100
        )
        cl = F.cross_entropy(out["cls"], cls_labels, label_smoothing=0.1)
        loss = lm + 0.5 * cl
        opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    keys = sorted(model.state_dict().keys())
    return [
        losses,
        keys,
        len(list(model.buffers())),
        model.heads["lm"].weight is model.embed.weight,
        model.embed.weight.grad,
        out["logits"],
    ]


def _sample_top_k_top_p(torch, logits, top_k, top_p, temperature, gen):
    logits = logits / temperature
    if top_k > 0:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1, None]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    sorted_logits, sorted_idx = torch.sort(logits, descending=True, dim=-1)
    cum = sorted_logits.softmax(-1).cumsum(-1)
    remove = cum > top_p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    remove = remove.scatter(-1, sorted_idx, remove)
    logits = logits.masked_fill(remove, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=gen)


def kv_cache_generation(torch, ctx):
    """Greedy and sampled generation with a KV cache under inference_mode and no_grad: the
    cached decode equals the full recompute; top-k/top-p sampling with a seeded generator."""
    cfg = TinyConfig()
    model = ctx.init(_hf_model(torch, cfg)).eval()
    rng = np.random.default_rng(1)
    prompt = ctx.t(rng.integers(1, cfg.vocab_size, (2, 4)))
    results = []
    with torch.inference_mode():
        out = model(prompt)
        past = out["past_key_values"]
        ids = prompt
        nxt = out["logits"][:, -1].argmax(-1, keepdim=True)
        for _ in range(5):
            ids = torch.cat([ids, nxt], dim=1)
            out = model(nxt, past_key_values=past)
            past = out["past_key_values"]
            nxt = out["logits"][:, -1].argmax(-1, keepdim=True)
        full = model(ids)["logits"][:, -1]
        results += [ids, out["logits"][:, -1], full, ids.is_inference(), past[0][0].shape]
    gen = torch.Generator().manual_seed(123)
    with torch.no_grad():
        ids = prompt
        out = model(ids)
        past = out["past_key_values"]
        for _ in range(6):
            nxt = _sample_top_k_top_p(torch, out["logits"][:, -1], 10, 0.9, 0.8, gen)
            ids = torch.cat([ids, nxt], 1)
            out = model(nxt, past_key_values=past)
            past = out["past_key_values"]
        results += [ids, out["logits"].requires_grad]
    return results


def einsum_ellipsis(torch, ctx):
    """einsum with ellipsis in many positions (batched bilinear forms, broadcasting a leading
    ellipsis against a shorter one, implicit output, diagonal via repeated labels, a trailing
    ellipsis), with gradients."""
    rng = np.random.default_rng(2)
    a = ctx.t(rng.standard_normal((2, 3, 4, 5)).astype(np.float32), requires_grad=True)
    b = ctx.t(rng.standard_normal((5, 6)).astype(np.float32), requires_grad=True)
    c = ctx.t(rng.standard_normal((3, 1, 5)).astype(np.float32), requires_grad=True)
    w = ctx.t(rng.standard_normal((4, 4)).astype(np.float32), requires_grad=True)
    outs = [
        torch.einsum("...ij,jk->...ik", a, b),
        torch.einsum("...j,...j->...", a, c),
        torch.einsum("b...j,jk", a, b),
        torch.einsum(
            "...ii->...i",
            torch.einsum(
                "...ij,jk->...ik",
                a.transpose(-1, -2)[..., :4, :],
                b[:, :4].T.contiguous() if False else b[:4, :4],
            ),
        ),
        torch.einsum("ij...,jk->ik...", a.permute(2, 3, 0, 1), b),
        torch.einsum("...ij,ik,...kl->...jl", a[..., :4], w, a[..., :4]),
        torch.einsum("i...->...", a),
    ]
    loss = sum((o**2).mean() for o in outs)
    loss.backward()
    return outs + [a.grad, b.grad, c.grad, w.grad]


def where_and_mask_idioms(torch, ctx):
    """torch.where with scalar branches (python ints/floats, mixed), masked_fill with bool masks
    broadcast from smaller shapes, masked_fill_ in place with a 0-d tensor value, finfo/iinfo
    limits of several dtypes, and their gradients."""
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((2, 3, 4)).astype(np.float32), requires_grad=True)
    m = ctx.t(rng.random((3, 1)) > 0.5)
    outs = [
        torch.where(x > 0, x, 0.0),
        torch.where(x > 0, 1.0, -1.0),
        torch.where(x > 0, 2, x),
        torch.where(m, x, torch.tensor(float("nan"))).nan_to_num(0.5),
        x.masked_fill(m, -1e4),
        x.masked_fill(~m.unsqueeze(0), torch.finfo(torch.float16).min),
        x.masked_fill(m, torch.tensor(3.0)),
        torch.where(m.expand(2, 3, 4), x.double(), x.half().float()),
        torch.where(x > 0),
    ]
    y = x.detach().clone()
    y.masked_fill_(y < 0, torch.tensor(0.25))
    outs.append(y)
    outs.append(
        [torch.finfo(d).min for d in (torch.float32, torch.float16, torch.bfloat16, torch.float64)]
    )
    outs.append([torch.finfo(d).eps for d in (torch.float32, torch.float16, torch.bfloat16)])
    outs.append([torch.finfo(d).tiny for d in (torch.float32, torch.bfloat16)])
    outs.append(
        [
            torch.iinfo(d).max
            for d in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)
        ]
    )
    outs.append(torch.finfo().dtype)
    outs.append(torch.finfo(torch.float32).resolution)
    loss = sum(o.float().sum() for o in outs[:8])
    loss.backward()
    outs.append(x.grad)
    return outs


def vision_utilities(torch, ctx):
    """grid_sample in every mode, padding mode and align_corners (4-D and 5-D), affine_grid,
    pixel_shuffle/unshuffle, unfold/fold, roll, flip, rot90, with gradients through all."""
    F = torch.nn.functional
    rng = np.random.default_rng(4)
    img = ctx.t(rng.standard_normal((2, 3, 6, 7)).astype(np.float32), requires_grad=True)
    theta = ctx.t(
        (np.eye(2, 3)[None] + 0.1 * rng.standard_normal((2, 2, 3))).astype(np.float32),
        requires_grad=True,
    )
    outs = []
    for ac in (False, True):
        grid = F.affine_grid(theta, (2, 3, 5, 5), align_corners=ac)
        for mode in ("bilinear", "nearest", "bicubic"):
            for pad in ("zeros", "border", "reflection"):
                outs.append(F.grid_sample(img, grid, mode=mode, padding_mode=pad, align_corners=ac))
    vol = ctx.t(rng.standard_normal((1, 2, 4, 5, 6)).astype(np.float32), requires_grad=True)
    th3 = ctx.t((np.eye(3, 4)[None] + 0.1 * rng.standard_normal((1, 3, 4))).astype(np.float32))
    g3 = F.affine_grid(th3, (1, 2, 3, 3, 3), align_corners=False)
    outs.append(F.grid_sample(vol, g3, mode="bilinear", padding_mode="border", align_corners=False))
    outs.append(
        F.grid_sample(vol, g3, mode="nearest", padding_mode="reflection", align_corners=True)
    )
    x = ctx.t(rng.standard_normal((2, 8, 3, 3)).astype(np.float32), requires_grad=True)
    ps = F.pixel_shuffle(x, 2)
    outs += [ps, F.pixel_unshuffle(ps, 2), torch.nn.PixelShuffle(2)(x)]
    cols = F.unfold(img, kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    outs.append(cols)
    outs.append(
        F.fold(
            cols, output_size=(6, 7), kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1)
        )
    )
    outs += [
        torch.roll(img, shifts=(1, -2), dims=(2, 3)),
        img.roll(3),
        torch.flip(img, dims=(1, 3)),
        img.fliplr() if img.dim() == 2 else img.flip(-1),
        torch.rot90(img, 1, (2, 3)),
        torch.rot90(img, -1, (3, 2)),
        img.rot90(2, [2, 3]),
        torch.rot90(img, 3),
    ]
    loss = sum((o * o).mean() for o in outs)
    loss.backward()
    return outs + [img.grad, theta.grad, vol.grad, x.grad]


PROGRAMS = [
    hf_style_training,
    kv_cache_generation,
    einsum_ellipsis,
    where_and_mask_idioms,
    vision_utilities,
]
CAPTURED = [einsum_ellipsis]
TOLERANCES = {}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, **TOLERANCES.get(program.__name__, {}))


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True, **TOLERANCES.get(program.__name__, {}))
