"""An independent BERT sentence encoder in plain PyTorch ops (no ember code, no transformers):
the peer of ember/text/bert.py and embedder.py in the tests and benchmarks/embed.py. It reads
the same ``model.safetensors`` with ``safetensors.torch`` and follows the published BERT
equations: embeddings (word + position + segment) and LayerNorm, then per layer multi-head
self-attention with an additive mask on padded keys, a residual LayerNorm, an erf-GELU
feed-forward and a second residual LayerNorm; mean pooling over real tokens and L2
normalisation as all-MiniLM-L6-v2's pooling config and Normalize module say.

``fused=False`` (the tests) writes LayerNorm, softmax attention and GELU out of elementary ops;
``fused=True`` (benchmarks/embed.py) calls PyTorch's own kernels for them (F.layer_norm,
F.scaled_dot_product_attention, F.gelu, F.linear), as a PyTorch user would."""

from __future__ import annotations

import json
import math
import os

import torch


class TorchSentenceBert:
    def __init__(self, directory: str, dtype=torch.float32, fused: bool = False):
        from safetensors.torch import load_file

        with open(os.path.join(directory, "config.json")) as f:
            self.config = json.load(f)
        weights = load_file(os.path.join(directory, "model.safetensors"))
        self.w = {k: v.to(dtype) if v.is_floating_point() else v for k, v in weights.items()}
        self.dtype = dtype
        self.fused = fused

    def _ln(self, x, name):
        eps = self.config["layer_norm_eps"]
        if self.fused:
            w, b = self.w[name + ".weight"], self.w[name + ".bias"]
            return torch.nn.functional.layer_norm(x, w.shape, w, b, eps)
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * self.w[name + ".weight"] + self.w[
            name + ".bias"
        ]

    def _lin(self, x, name):
        if self.fused:
            return torch.nn.functional.linear(x, self.w[name + ".weight"], self.w[name + ".bias"])
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    @torch.no_grad()
    def hidden(self, ids, mask, types):
        w, c = self.w, self.config
        ids, mask, types = (torch.as_tensor(a, dtype=torch.long) for a in (ids, mask, types))
        batch, length = ids.shape
        heads = c["num_attention_heads"]
        size = c["hidden_size"] // heads
        positions = torch.arange(length)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][positions][None]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = self._ln(x, "embeddings.LayerNorm")
        bias = torch.zeros(batch, 1, 1, length, dtype=self.dtype)
        bias[mask[:, None, None, :] == 0] = float("-inf")
        for i in range(c["num_hidden_layers"]):
            p = f"encoder.layer.{i}."

            def split(t):
                return t.view(batch, length, heads, size).permute(0, 2, 1, 3)

            q = split(self._lin(x, p + "attention.self.query"))
            k = split(self._lin(x, p + "attention.self.key"))
            v = split(self._lin(x, p + "attention.self.value"))
            if self.fused:
                a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            else:
                scores = q @ k.transpose(-1, -2) / math.sqrt(size) + bias
                a = torch.softmax(scores, -1) @ v
            a = a.permute(0, 2, 1, 3).reshape(batch, length, heads * size)
            x = self._ln(
                self._lin(a, p + "attention.output.dense") + x, p + "attention.output.LayerNorm"
            )
            h = self._lin(x, p + "intermediate.dense")
            if self.fused:
                h = torch.nn.functional.gelu(h)
            else:
                h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))  # hidden_act "gelu"
            x = self._ln(self._lin(h, p + "output.dense") + x, p + "output.LayerNorm")
        return x

    @torch.no_grad()
    def embed(self, ids, mask, types):
        x = self.hidden(ids, mask, types)
        m = torch.as_tensor(mask, dtype=self.dtype)[..., None]
        pooled = (x * m).sum(1) / m.sum(1)
        return pooled / pooled.norm(dim=1, keepdim=True)
