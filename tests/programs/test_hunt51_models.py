"""Programs of hunt51 (models), each run on PyTorch and on ember (eagerly and captured): a tiny
LLaMA (RMSNorm, rotary embeddings through torch.polar / view_as_complex, SwiGLU, grouped-query
attention by repeat_interleave, a KV-cache generation loop with past_key_values tuples and
top-p sampling); Hugging Face-style GPT-2 (Conv1D by addmm, a causal-mask buffer with
persistent=False filled with finfo.min, tied head, shifted loss with ignore_index) and BERT (a
config dataclass, an extended attention mask, token types, a position-ids buffer, the pooler,
an MLM data collator's 80/10/10 masking); a MADE / masked autoregressive flow; a
Kolmogorov-Arnold network on B-spline bases; unrolled ISTA (LISTA); a child-sum Tree-LSTM; an
E(n)-equivariant GNN; a BiDAF-style span extractor; sparsemax as a custom Function.
"""

import dataclasses
import inspect
import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, E702, E701, C408, SIM118


def tiny_llama(torch, ctx):
    """LLaMA's block: RMSNorm, rotary embeddings as complex rotations, SwiGLU, grouped-query
    attention, then greedy and top-p generation with a KV cache of past_key_values tuples."""
    nn, F = torch.nn, torch.nn.functional
    D, H, KV, V, L = 16, 4, 2, 23, 2
    hd = D // H

    def precompute_freqs_cis(dim, end, theta=10000.0):
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
        t = torch.arange(end, device=freqs.device)
        freqs = torch.outer(t, freqs).float()
        return torch.polar(torch.ones_like(freqs), freqs)

    def apply_rotary(xq, xk, freqs_cis):
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        fc = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
        xq_out = torch.view_as_real(xq_ * fc).flatten(3)
        xk_out = torch.view_as_real(xk_ * fc).flatten(3)
        return xq_out.type_as(xq), xk_out.type_as(xk)

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            x32 = x.float()
            return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(
                x
            ) * self.weight

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(D, H * hd, bias=False)
            self.wk = nn.Linear(D, KV * hd, bias=False)
            self.wv = nn.Linear(D, KV * hd, bias=False)
            self.wo = nn.Linear(H * hd, D, bias=False)

        def forward(self, x, freqs_cis, past=None):
            B, T, _ = x.shape
            q = self.wq(x).view(B, T, H, hd)
            k = self.wk(x).view(B, T, KV, hd)
            v = self.wv(x).view(B, T, KV, hd)
            q, k = apply_rotary(q, k, freqs_cis)
            if past is not None:
                k = torch.cat([past[0], k], dim=1)
                v = torch.cat([past[1], v], dim=1)
            present = (k, v)
            k = k.repeat_interleave(H // KV, dim=2)
            v = v.repeat_interleave(H // KV, dim=2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            if past is None:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                S = k.shape[2]
                mask = torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T)
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            return self.wo(out.transpose(1, 2).reshape(B, T, -1)), present

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_norm, self.ffn_norm = RMSNorm(D), RMSNorm(D)
            self.attn = Attention()
            self.w1 = nn.Linear(D, 24, bias=False)
            self.w2 = nn.Linear(24, D, bias=False)
            self.w3 = nn.Linear(D, 24, bias=False)

        def forward(self, x, freqs_cis, past=None):
            h, present = self.attn(self.attn_norm(x), freqs_cis, past)
            x = x + h
            y = self.ffn_norm(x)
            return x + self.w2(F.silu(self.w1(y)) * self.w3(y)), present

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, D)
            self.layers = nn.ModuleList([Block() for _ in range(L)])
            self.norm = RMSNorm(D)
            self.out = nn.Linear(D, V, bias=False)
            self.register_buffer("freqs_cis", precompute_freqs_cis(hd, 32), persistent=False)

        def forward(self, ids, past_key_values=None, start=0):
            x = self.tok(ids)
            fc = self.freqs_cis[start : start + ids.shape[1]]
            presents = []
            for i, layer in enumerate(self.layers):
                x, p = layer(x, fc, None if past_key_values is None else past_key_values[i])
                presents.append(p)
            return self.out(self.norm(x)).float(), tuple(presents)

    model = ctx.init(Llama())
    assert "freqs_cis" not in model.state_dict()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    rng = np.random.default_rng(0)
    data = ctx.t(rng.integers(0, V, size=(3, 9)))

    @ctx.fn
    def step(batch):
        logits, _ = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    losses = [step(data).item() for _ in range(3)]
    model.eval()
    out = []
    with torch.no_grad():
        ids = data[:1, :4]
        logits, past = model(ids)
        g = torch.Generator().manual_seed(5)
        for t in range(5):
            probs = torch.softmax(logits[:, -1] / 0.8, dim=-1)
            sp, si = torch.sort(probs, dim=-1, descending=True)
            keep = sp.cumsum(-1) - sp <= 0.9
            sp = sp * keep
            nxt = si.gather(-1, torch.multinomial(sp / sp.sum(-1, keepdim=True), 1, generator=g))
            out.append(nxt.item())
            logits, past = model(nxt, past_key_values=past, start=ids.shape[1] + t)
        full, _ = model(torch.cat([ids, torch.tensor([out[:-1]])], 1))
    return [losses, out, logits, full[:, -1], [p[0].shape[1] for p in past]]


def hf_gpt2(torch, ctx):
    """Hugging Face's GPT-2 code: Conv1D (addmm with a transposed weight), gelu_new, a causal
    ``bias`` buffer (persistent=False) used with torch.where and finfo.min, tied embeddings,
    a padded batch with ignore_index -100, and generation with past key values."""
    nn, F = torch.nn, torch.nn.functional

    @dataclasses.dataclass
    class Config:
        vocab_size: int = 29
        n_positions: int = 16
        n_embd: int = 12
        n_head: int = 3
        n_layer: int = 2
        layer_norm_epsilon: float = 1e-5

    class Conv1D(nn.Module):
        def __init__(self, nf, nx):
            super().__init__()
            self.nf = nf
            self.weight = nn.Parameter(torch.empty(nx, nf))
            self.bias = nn.Parameter(torch.zeros(nf))
            nn.init.normal_(self.weight, std=0.02)

        def forward(self, x):
            size_out = x.size()[:-1] + (self.nf,)
            x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
            return x.view(size_out)

    def gelu_new(x):
        return (
            0.5
            * x
            * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
        )

    class Attention(nn.Module):
        def __init__(self, config):
            super().__init__()
            n = config.n_positions
            self.register_buffer(
                "bias",
                torch.tril(torch.ones((n, n), dtype=torch.bool)).view(1, 1, n, n),
                persistent=False,
            )
            self.n_head, self.split = config.n_head, config.n_embd
            self.c_attn = Conv1D(3 * config.n_embd, config.n_embd)
            self.c_proj = Conv1D(config.n_embd, config.n_embd)

        def _split_heads(self, t):
            return t.view(t.size()[:-1] + (self.n_head, -1)).permute(0, 2, 1, 3)

        def forward(self, x, layer_past=None, attention_mask=None):
            q, k, v = self.c_attn(x).split(self.split, dim=2)
            q, k, v = map(self._split_heads, (q, k, v))
            if layer_past is not None:
                k = torch.cat((layer_past[0], k), dim=-2)
                v = torch.cat((layer_past[1], v), dim=-2)
            present = (k, v)
            w = torch.matmul(q, k.transpose(-1, -2)) / torch.full(
                [], v.size(-1) ** 0.5, dtype=q.dtype
            )
            ql, kl = q.size(-2), k.size(-2)
            causal = self.bias[:, :, kl - ql : kl, :kl]
            mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype)
            w = torch.where(causal, w.to(w.dtype), mask_value)
            if attention_mask is not None:
                w = w + attention_mask
            w = nn.functional.softmax(w, dim=-1)
            out = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous()
            out = out.view(out.size()[:-2] + (self.split,))
            return self.c_proj(out), present

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
            self.attn = Attention(config)
            self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
            self.c_fc = Conv1D(4 * config.n_embd, config.n_embd)
            self.c_proj = Conv1D(config.n_embd, 4 * config.n_embd)

        def forward(self, x, layer_past=None, attention_mask=None):
            a, present = self.attn(self.ln_1(x), layer_past, attention_mask)
            x = x + a
            return x + self.c_proj(gelu_new(self.c_fc(self.ln_2(x)))), present

    class GPT2(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.wte = nn.Embedding(config.vocab_size, config.n_embd)
            self.wpe = nn.Embedding(config.n_positions, config.n_embd)
            self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
            self.ln_f = nn.LayerNorm(config.n_embd)
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, input_ids, past_key_values=None, attention_mask=None, labels=None):
            past_length = 0 if past_key_values is None else past_key_values[0][0].size(-2)
            position_ids = torch.arange(
                past_length, input_ids.size(-1) + past_length, dtype=torch.long
            )
            position_ids = position_ids.unsqueeze(0)
            if attention_mask is not None:
                attention_mask = attention_mask[:, None, None, :].to(dtype=torch.float32)
                attention_mask = (1.0 - attention_mask) * torch.finfo(torch.float32).min
            x = self.wte(input_ids) + self.wpe(position_ids)
            presents = ()
            for i, block in enumerate(self.h):
                x, p = block(
                    x, None if past_key_values is None else past_key_values[i], attention_mask
                )
                presents = presents + (p,)
            logits = self.lm_head(self.ln_f(x))
            loss = None
            if labels is not None:
                shift_logits = logits[..., :-1, :].contiguous()
                shift_labels = labels[..., 1:].contiguous()
                loss = F.cross_entropy(
                    shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1)
                )
            return loss, logits, presents

    config = Config()
    model = ctx.init(GPT2(config))
    assert model.lm_head.weight is model.wte.weight
    assert "h.0.attn.bias" not in model.state_dict()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, config.vocab_size, size=(2, 8))
    mask = np.ones((2, 8), np.int64)
    mask[1, 6:] = 0
    labels = ids.copy()
    labels[1, 6:] = -100
    ids, mask, labels = ctx.t(ids), ctx.t(mask), ctx.t(labels)

    @ctx.fn
    def step():
        loss, _, _ = model(ids, attention_mask=mask, labels=labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [step().item() for _ in range(3)]
    model.eval()
    with torch.no_grad():
        _, logits, past = model(ids[:1, :5])
        gen = []
        for _ in range(4):
            nxt = logits[:, -1:].argmax(-1)
            gen.append(nxt.item())
            _, logits, past = model(nxt, past_key_values=past)
    return [losses, gen, logits, model.wte.weight.grad is None]


def hf_bert(torch, ctx):
    """Hugging Face's BERT code: a config dataclass, a position_ids buffer (persistent=False)
    expanded and sliced, token_type_ids, the extended attention mask (1 - mask) * finfo.min,
    the tanh pooler, a sequence-classification head, AdamW with no-decay groups and a linear
    warmup schedule by LambdaLR, and an MLM collator's 80/10/10 masking with a generator."""
    nn, F = torch.nn, torch.nn.functional

    @dataclasses.dataclass
    class BertConfig:
        vocab_size: int = 31
        hidden_size: int = 16
        num_hidden_layers: int = 2
        num_attention_heads: int = 4
        intermediate_size: int = 32
        max_position_embeddings: int = 20
        type_vocab_size: int = 2
        hidden_dropout_prob: float = 0.0
        layer_norm_eps: float = 1e-12
        num_labels: int = 3

    class Embeddings(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=0)
            self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
            self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
            self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
            self.dropout = nn.Dropout(c.hidden_dropout_prob)
            self.register_buffer(
                "position_ids",
                torch.arange(c.max_position_embeddings).expand((1, -1)),
                persistent=False,
            )
            self.register_buffer(
                "token_type_ids",
                torch.zeros(self.position_ids.size(), dtype=torch.long),
                persistent=False,
            )

        def forward(self, input_ids, token_type_ids=None):
            seq_length = input_ids.size(1)
            position_ids = self.position_ids[:, :seq_length]
            if token_type_ids is None:
                token_type_ids = self.token_type_ids[:, :seq_length].expand(
                    input_ids.shape[0], seq_length
                )
            e = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
            e = e + self.position_embeddings(position_ids)
            return self.dropout(self.LayerNorm(e))

    class SelfAttention(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.h = c.num_attention_heads
            self.d = c.hidden_size // c.num_attention_heads
            self.query = nn.Linear(c.hidden_size, c.hidden_size)
            self.key = nn.Linear(c.hidden_size, c.hidden_size)
            self.value = nn.Linear(c.hidden_size, c.hidden_size)

        def transpose_for_scores(self, x):
            return x.view(x.size()[:-1] + (self.h, self.d)).permute(0, 2, 1, 3)

        def forward(self, x, mask):
            q = self.transpose_for_scores(self.query(x))
            k = self.transpose_for_scores(self.key(x))
            v = self.transpose_for_scores(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d) + mask
            probs = nn.functional.softmax(scores, dim=-1)
            ctx_ = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
            return ctx_.view(ctx_.size()[:-2] + (self.h * self.d,))

    class Layer(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.attention = SelfAttention(c)
            self.attn_out = nn.Linear(c.hidden_size, c.hidden_size)
            self.ln1 = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
            self.intermediate = nn.Linear(c.hidden_size, c.intermediate_size)
            self.output = nn.Linear(c.intermediate_size, c.hidden_size)
            self.ln2 = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

        def forward(self, x, mask):
            x = self.ln1(x + self.attn_out(self.attention(x, mask)))
            return self.ln2(x + self.output(F.gelu(self.intermediate(x))))

    class BertForSequenceClassification(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.config = c
            self.embeddings = Embeddings(c)
            self.encoder = nn.ModuleList([Layer(c) for _ in range(c.num_hidden_layers)])
            self.pooler = nn.Linear(c.hidden_size, c.hidden_size)
            self.classifier = nn.Linear(c.hidden_size, c.num_labels)

        def get_extended_attention_mask(self, attention_mask, dtype):
            ext = attention_mask[:, None, None, :].to(dtype=dtype)
            return (1.0 - ext) * torch.finfo(dtype).min

        def forward(self, input_ids, attention_mask, token_type_ids=None, labels=None):
            x = self.embeddings(input_ids, token_type_ids)
            mask = self.get_extended_attention_mask(attention_mask, x.dtype)
            for layer in self.encoder:
                x = layer(x, mask)
            pooled = torch.tanh(self.pooler(x[:, 0]))
            logits = self.classifier(pooled)
            return F.cross_entropy(logits.view(-1, self.config.num_labels), labels.view(-1)), logits

    c = BertConfig()
    model = ctx.init(BertForSequenceClassification(c))
    assert "embeddings.position_ids" not in model.state_dict()
    no_decay = ["bias", "LayerNorm.weight", "ln1.weight", "ln2.weight"]
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
    opt = torch.optim.AdamW(groups, lr=5e-3)
    warmup, total = 2, 6
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            s / max(1, warmup) if s < warmup else max(0.0, (total - s) / max(1, total - warmup))
        ),
    )
    rng = np.random.default_rng(2)
    ids = rng.integers(1, c.vocab_size, size=(4, 7))
    att = np.ones((4, 7), np.int64)
    att[2, 5:] = 0
    att[3, 3:] = 0
    ids[att == 0] = 0
    tt = np.zeros((4, 7), np.int64)
    tt[:, 4:] = 1
    ids, att, tt = ctx.t(ids), ctx.t(att), ctx.t(tt)
    labels = ctx.t(np.array([0, 2, 1, 2]))

    @ctx.fn
    def step():
        loss, logits = model(ids, att, tt, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, logits

    out = []
    for _ in range(4):
        loss, logits = step()
        sched.step()
        out.append((loss.item(), sched.get_last_lr()))
    # an MLM collator's masking: 15% chosen, 80% of them [MASK], 10% random words
    g = torch.Generator().manual_seed(3)
    inputs = ids.clone()
    mlm_labels = inputs.clone()
    prob = torch.full(mlm_labels.shape, 0.15)
    special = inputs == 0
    prob.masked_fill_(special, value=0.0)
    masked = torch.bernoulli(prob, generator=g).bool()
    mlm_labels[~masked] = -100
    replaced = torch.bernoulli(torch.full(mlm_labels.shape, 0.8), generator=g).bool() & masked
    inputs[replaced] = 30
    rand = (
        torch.bernoulli(torch.full(mlm_labels.shape, 0.5), generator=g).bool() & masked & ~replaced
    )
    words = torch.randint(c.vocab_size, mlm_labels.shape, dtype=torch.long, generator=g)
    inputs[rand] = words[rand]
    return [out, logits, inputs, mlm_labels]


def made_maf(torch, ctx):
    """A masked autoregressive flow of MADE blocks: masks as buffers multiplied into the
    weights, the log-density as the base normal's plus the sum of log-scales, reversal
    permutations between blocks, and sampling by inverting one dimension at a time."""
    nn, F = torch.nn, torch.nn.functional
    D, Hd = 3, 12

    class MaskedLinear(nn.Linear):
        def __init__(self, i, o, mask):
            super().__init__(i, o)
            self.register_buffer("mask", mask)

        def forward(self, x):
            return F.linear(x, self.mask * self.weight, self.bias)

    class MADE(nn.Module):
        def __init__(self):
            super().__init__()
            m_in = torch.arange(1, D + 1)
            m_h = torch.arange(Hd) % (D - 1) + 1
            mask1 = (m_h[:, None] >= m_in[None, :]).float()
            mask2 = (m_in[:, None] > m_h[None, :]).float()
            self.l1 = MaskedLinear(D, Hd, mask1)
            self.mu = MaskedLinear(Hd, D, mask2)
            self.alpha = MaskedLinear(Hd, D, mask2)

        def forward(self, x):
            h = torch.relu(self.l1(x))
            return self.mu(h), torch.tanh(self.alpha(h))

    class MAF(nn.Module):
        def __init__(self, n=3):
            super().__init__()
            self.blocks = nn.ModuleList([MADE() for _ in range(n)])

        def log_prob(self, x):
            log_det = torch.zeros(x.shape[0])
            for b in self.blocks:
                mu, alpha = b(x)
                x = (x - mu) * torch.exp(-alpha)
                log_det = log_det - alpha.sum(-1)
                x = x.flip(-1)
            base = torch.distributions.Normal(0.0, 1.0).log_prob(x).sum(-1)
            return base + log_det

        @torch.no_grad()
        def sample(self, z):
            for b in reversed(self.blocks):
                z = z.flip(-1)
                x = torch.zeros_like(z)
                for i in range(D):
                    mu, alpha = b(x)
                    x[:, i] = mu[:, i] + z[:, i] * torch.exp(alpha[:, i])
                z = x
            return z

    flow = ctx.init(MAF())
    opt = torch.optim.Adam(flow.parameters(), lr=5e-3)
    rng = np.random.default_rng(3)
    a = rng.normal(size=(64, 1))
    data = ctx.t(
        np.concatenate([a, a**2 + 0.1 * rng.normal(size=(64, 1)), np.sin(a)], 1).astype(np.float32)
    )

    @ctx.fn
    def step(x):
        loss = -flow.log_prob(x).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [step(data).item() for _ in range(4)]
    z = ctx.t(rng.normal(size=(5, D)).astype(np.float32))
    xs = flow.sample(z)
    return [losses, xs, flow.log_prob(xs)]


def kan_splines(torch, ctx):
    """A Kolmogorov-Arnold network: each edge a SiLU base plus a B-spline of order 3 on a
    grid buffer (Cox-de Boor recursion), fitted to a 2-D function with LBFGS-free Adam, and
    the splines' L1 regularizer."""
    nn, F = torch.nn, torch.nn.functional

    class KANLayer(nn.Module):
        def __init__(self, i, o, grid_size=5, k=3):
            super().__init__()
            h = 2.0 / grid_size
            grid = torch.arange(-k, grid_size + k + 1) * h - 1.0
            self.register_buffer("grid", grid.expand(i, -1).contiguous())
            self.k = k
            self.base = nn.Linear(i, o, bias=False)
            self.spline_weight = nn.Parameter(torch.randn(o, i, grid_size + k) * 0.1)

        def b_splines(self, x):
            grid = self.grid
            x = x.unsqueeze(-1)
            bases = ((x >= grid[:, :-1]) & (x < grid[:, 1:])).to(x.dtype)
            for k in range(1, self.k + 1):
                left = (
                    (x - grid[:, : -(k + 1)])
                    / (grid[:, k:-1] - grid[:, : -(k + 1)])
                    * bases[:, :, :-1]
                )
                right = (
                    (grid[:, k + 1 :] - x) / (grid[:, k + 1 :] - grid[:, 1:(-k)]) * bases[:, :, 1:]
                )
                bases = left + right
            return bases

        def forward(self, x):
            base = self.base(F.silu(x))
            spline = torch.einsum("bik,oik->bo", self.b_splines(x), self.spline_weight)
            return base + spline

    model = ctx.init(nn.Sequential(KANLayer(2, 4), KANLayer(4, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    rng = np.random.default_rng(4)
    x = ctx.t(rng.uniform(-0.9, 0.9, size=(48, 2)).astype(np.float32))
    y = torch.exp(torch.sin(math.pi * x[:, :1]) + x[:, 1:] ** 2)

    @ctx.fn
    def step():
        pred = model(x)
        reg = sum(layer.spline_weight.abs().mean() for layer in model)
        loss = F.mse_loss(pred, y) + 1e-3 * reg
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [step().item() for _ in range(5)]
    return [losses, model(x[:6]), model[0].b_splines(x[:3])]


def lista(torch, ctx):
    """Learned ISTA: a fixed number of unrolled soft-thresholding iterations with learned
    matrices and per-iteration thresholds, trained to match sparse codes."""
    nn, F = torch.nn, torch.nn.functional
    n, m, T = 8, 16, 4

    class LISTA(nn.Module):
        def __init__(self, A):
            super().__init__()
            L = float(torch.linalg.matrix_norm(A, ord=2) ** 2)
            self.We = nn.Linear(n, m, bias=False)
            self.S = nn.Linear(m, m, bias=False)
            with torch.no_grad():
                self.We.weight.copy_(A.t() / L)
                self.S.weight.copy_(torch.eye(m) - A.t() @ A / L)
            self.theta = nn.Parameter(torch.full((T,), 0.1 / L))

        @staticmethod
        def shrink(x, th):
            return torch.sign(x) * F.relu(x.abs() - th)

        def forward(self, y):
            b = self.We(y)
            z = self.shrink(b, self.theta[0])
            for t in range(1, T):
                z = self.shrink(b + self.S(z), self.theta[t])
            return z

    rng = np.random.default_rng(5)
    A = ctx.t((rng.normal(size=(n, m)) / np.sqrt(n)).astype(np.float32))
    codes = rng.normal(size=(32, m)) * (rng.random((32, m)) < 0.2)
    z_true = ctx.t(codes.astype(np.float32))
    y = z_true @ A.t()
    model = LISTA(A)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    @ctx.fn
    def step():
        loss = F.mse_loss(model(y), z_true)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [step().item() for _ in range(5)]
    z = model(y)
    return [losses, model.theta, (z != 0).float().mean(), z[:2]]


def tree_lstm(torch, ctx):
    """A child-sum Tree-LSTM over Python trees (recursion, sums over children, a forget gate
    per child), classifying trees at the root."""
    nn, F = torch.nn, torch.nn.functional
    X, Hd = 5, 8

    class ChildSumTreeLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.ioux = nn.Linear(X, 3 * Hd)
            self.iouh = nn.Linear(Hd, 3 * Hd)
            self.fx = nn.Linear(X, Hd)
            self.fh = nn.Linear(Hd, Hd)
            self.out = nn.Linear(Hd, 2)

        def node(self, x, children):
            if children:
                cs, hs = zip(*children)
                c_ch, h_ch = torch.stack(cs), torch.stack(hs)
            else:
                c_ch, h_ch = torch.zeros(1, Hd), torch.zeros(1, Hd)
            h_sum = h_ch.sum(0)
            i, o, u = torch.split(self.ioux(x) + self.iouh(h_sum), Hd)
            i, o, u = torch.sigmoid(i), torch.sigmoid(o), torch.tanh(u)
            f = torch.sigmoid(self.fh(h_ch) + self.fx(x).unsqueeze(0))
            c = i * u + (f * c_ch).sum(0)
            return c, o * torch.tanh(c)

        def forward(self, tree, feats):
            idx, kids = tree
            return self.node(feats[idx], [self.forward(k, feats) for k in kids])

    model = ctx.init(ChildSumTreeLSTM())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trees = [
        (0, [(1, []), (2, [(3, []), (4, [])])]),
        (0, [(1, [(2, [(3, [])])])]),
        (2, [(0, []), (1, []), (4, [])]),
    ]
    labels = [1, 0, 1]
    rng = np.random.default_rng(6)
    feats = ctx.t(rng.normal(size=(5, X)).astype(np.float32))
    losses = []
    for epoch in range(3):
        total = 0.0
        for tree, y in zip(trees, labels):
            _, h = model(tree, feats)
            loss = F.cross_entropy(model.out(h).unsqueeze(0), torch.tensor([y]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        losses.append(total)
    return [losses, model(trees[0], feats)[1]]


def egnn(torch, ctx):
    """An E(n)-equivariant GNN layer on a fully connected point cloud (edges from
    torch.combinations, messages from squared distances, coordinate updates by scatter-add),
    checked equivariant under a rotation and trained to predict energies."""
    nn, F = torch.nn, torch.nn.functional
    N, Fd = 6, 4

    class EGCL(nn.Module):
        def __init__(self):
            super().__init__()
            self.phi_e = nn.Sequential(
                nn.Linear(2 * Fd + 1, 16), nn.SiLU(), nn.Linear(16, 16), nn.SiLU()
            )
            self.phi_x = nn.Sequential(nn.Linear(16, 16), nn.SiLU(), nn.Linear(16, 1, bias=False))
            self.phi_h = nn.Sequential(nn.Linear(Fd + 16, 16), nn.SiLU(), nn.Linear(16, Fd))

        def forward(self, h, x, edges):
            row, col = edges
            diff = x[row] - x[col]
            radial = (diff**2).sum(-1, keepdim=True)
            m = self.phi_e(torch.cat([h[row], h[col], radial], dim=-1))
            trans = diff * self.phi_x(m)
            agg = torch.zeros_like(x).index_add_(0, row, trans)
            counts = torch.bincount(row, minlength=x.shape[0]).clamp(min=1).unsqueeze(-1)
            x = x + agg / counts
            m_agg = torch.zeros(h.shape[0], m.shape[1]).scatter_add_(
                0, row.unsqueeze(-1).expand_as(m), m
            )
            return h + self.phi_h(torch.cat([h, m_agg], dim=-1)), x

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([EGCL(), EGCL()])
            self.head = nn.Linear(Fd, 1)

        def forward(self, h, x, edges):
            for layer in self.layers:
                h, x = layer(h, x, edges)
            return self.head(h).sum(), x

    pairs = torch.combinations(torch.arange(N), r=2)
    edges = torch.cat([pairs, pairs.flip(1)]).t()
    model = ctx.init(Net())
    rng = np.random.default_rng(7)
    h = ctx.t(rng.normal(size=(N, Fd)).astype(np.float32))
    x = ctx.t(rng.normal(size=(N, 3)).astype(np.float32))
    th = 0.7
    R = ctx.t(
        np.array([[np.cos(th), -np.sin(th), 0], [np.sin(th), np.cos(th), 0], [0, 0, 1]], np.float32)
    )
    e1, x1 = model(h, x, edges)
    e2, x2 = model(h, x @ R.t(), edges)
    target = ctx.t(np.array(1.5, np.float32))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    @ctx.fn
    def step():
        e, _ = model(h, x, edges)
        loss = (e - target) ** 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [step().item() for _ in range(3)]
    return [losses, (e1 - e2).abs() < 1e-4, torch.allclose(x1 @ R.t(), x2, atol=1e-4), x1, edges]


def bidaf_span(torch, ctx):
    """A BiDAF-style reader: context-to-query and query-to-context attention with masked
    softmaxes (padding filled with -inf-like values), start/end logits, span loss, and the best
    span by the upper triangle of the start-end score outer product (max length window)."""
    nn, F = torch.nn, torch.nn.functional
    E = 8

    def masked_softmax(logits, mask, dim=-1, log=False):
        mask = mask.type(torch.float32)
        masked = mask * logits + (1 - mask) * -1e30
        fn = F.log_softmax if log else F.softmax
        return fn(masked, dim)

    class BiDAF(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, E, padding_idx=0)
            self.enc = nn.LSTM(E, E // 2, batch_first=True, bidirectional=True)
            self.c_w = nn.Parameter(torch.zeros(E, 1))
            self.q_w = nn.Parameter(torch.zeros(E, 1))
            self.cq_w = nn.Parameter(torch.zeros(1, 1, E))
            for w in (self.c_w, self.q_w, self.cq_w):
                nn.init.xavier_uniform_(w)
            self.start = nn.Linear(4 * E, 1)
            self.end = nn.Linear(4 * E, 1)

        def forward(self, cw, qw):
            c_mask, q_mask = cw != 0, qw != 0
            c, _ = self.enc(self.emb(cw))
            q, _ = self.enc(self.emb(qw))
            s = torch.matmul(c, self.c_w).expand([-1, -1, q.size(1)])
            s = s + torch.matmul(q, self.q_w).transpose(1, 2).expand([-1, c.size(1), -1])
            s = s + torch.matmul(c * self.cq_w, q.transpose(1, 2))
            s1 = masked_softmax(s, q_mask.unsqueeze(1), dim=2)
            s2 = masked_softmax(s, c_mask.unsqueeze(2), dim=1)
            a = torch.bmm(s1, q)
            b = torch.bmm(torch.bmm(s1, s2.transpose(1, 2)), c)
            g = torch.cat([c, a, c * a, c * b], dim=2)
            log_p1 = masked_softmax(self.start(g).squeeze(-1), c_mask, log=True)
            log_p2 = masked_softmax(self.end(g).squeeze(-1), c_mask, log=True)
            return log_p1, log_p2

    def discretize(p_start, p_end, max_len=3):
        c_len = p_start.size(1)
        p_joint = torch.matmul(p_start.unsqueeze(2), p_end.unsqueeze(1))
        is_legal = torch.triu(torch.ones((c_len, c_len)))
        is_legal = is_legal - torch.triu(torch.ones((c_len, c_len)), diagonal=max_len)
        p_joint = p_joint * is_legal
        max_in_row, _ = torch.max(p_joint, dim=2)
        max_in_col, _ = torch.max(p_joint, dim=1)
        return torch.argmax(max_in_row, dim=-1), torch.argmax(max_in_col, dim=-1)

    model = ctx.init(BiDAF())
    opt = torch.optim.Adadelta(model.parameters(), lr=0.5)
    cw = ctx.t(np.array([[3, 5, 7, 2, 9, 4, 0, 0], [1, 8, 8, 6, 2, 3, 5, 11]]))
    qw = ctx.t(np.array([[7, 2, 0], [6, 2, 3]]))
    y1, y2 = ctx.t(np.array([2, 3])), ctx.t(np.array([3, 5]))
    losses = []
    for _ in range(3):
        lp1, lp2 = model(cw, qw)
        loss = F.nll_loss(lp1, y1) + F.nll_loss(lp2, y2)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
    lp1, lp2 = model(cw, qw)
    s, e = discretize(lp1.exp(), lp2.exp())
    return [losses, s, e, lp1]


def sparsemax_fn(torch, ctx):
    """Sparsemax as a custom autograd Function (sort, cumsum, support size, threshold; its
    backward on the support), used as an attention normalizer, checked by gradcheck in
    float64 and trained a few steps."""
    nn, F = torch.nn, torch.nn.functional

    class Sparsemax(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, input, dim=-1):
            ctx_.dim = dim
            z_sorted, _ = torch.sort(input, dim=dim, descending=True)
            k = torch.arange(1, input.size(dim) + 1, dtype=input.dtype)
            view = [1] * input.dim()
            view[dim] = -1
            k = k.view(view)
            cumsum = z_sorted.cumsum(dim) - 1
            support = (k * z_sorted) > cumsum
            k_z = support.sum(dim=dim, keepdim=True)
            tau = cumsum.gather(dim, k_z - 1) / k_z.to(input.dtype)
            out = torch.clamp(input - tau, min=0)
            ctx_.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx_, grad_output):
            (out,) = ctx_.saved_tensors
            dim = ctx_.dim
            nonzero = out != 0
            v = (grad_output * nonzero).sum(dim, keepdim=True) / nonzero.sum(dim, keepdim=True).to(
                out.dtype
            )
            return nonzero * (grad_output - v), None

    rng = np.random.default_rng(8)
    z = ctx.t(rng.normal(size=(3, 5)), dtype=torch.float64, requires_grad=True)
    ok = torch.autograd.gradcheck(lambda t: Sparsemax.apply(t, -1), (z,))
    p = Sparsemax.apply(z, -1)

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(4, 4)
            self.k = nn.Linear(4, 4)

        def forward(self, x):
            w = Sparsemax.apply(self.q(x) @ self.k(x).transpose(-1, -2) / 2.0, -1)
            return w @ x, w

    m = ctx.init(Attn())
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = ctx.t(rng.normal(size=(2, 5, 4)).astype(np.float32))
    losses = []
    for _ in range(3):
        y, w = m(x)
        loss = (y - x.flip(1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return [ok, p, p.sum(-1), losses, w, m.q.weight.grad]


PROGRAMS = [
    tiny_llama,
    hf_gpt2,
    hf_bert,
    made_maf,
    kan_splines,
    lista,
    tree_lstm,
    egnn,
    bidaf_span,
    sparsemax_fn,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


# the programs that mark steps for ember.function (the others run as in test_eager)
CAPTURED = [p for p in PROGRAMS if "@ctx.fn" in inspect.getsource(p)]


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
