"""Programs of hunt56, each run on PyTorch and on ember (eagerly, and the marked ones with
their steps under ``ember.function``): diffusers' attention (``baddbmm`` with ``beta=0`` on an
uninitialized input), Whisper's key/value cache kept by forward hooks, soft actor-critic with a
tanh-squashed policy, ArcFace margins, HuggingFace's logits processors, TransformerEncoder and
MultiheadAttention in eval with padding masks (PyTorch's fast paths), printing of every dtype,
fractional max pooling, mesh geometry with ``cross`` and ``unravel_index``, custom autograd
Functions' flags, module surgery with ``set_submodule`` and state-dict version upgrades,
schedulers resumed from their state_dicts, convolutions and pools at awkward geometries,
wav2vec2's pretraining pieces, and a program's own distribution transform with
``register_kl``: a flow through ``SigmoidTransform`` gave another log-density in the tail, as
ember clamped the sigmoid below by eps where PyTorch clamps by the smallest normal number.
"""

import io
import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005, UP008, E721, B018


def diffusers_attention(torch, ctx):
    """diffusers' AttnProcessor: baddbmm on an uninitialized (here NaN-filled) input with beta=0,
    group norm, timestep embedding, nearest upsampling; addmm/addbmm/addmv/addr with beta=0 too."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)

    def get_timestep_embedding(
        timesteps,
        embedding_dim,
        flip_sin_to_cos=False,
        downscale_freq_shift=1,
        scale=1,
        max_period=10000,
    ):
        half_dim = embedding_dim // 2
        exponent = -math.log(max_period) * torch.arange(
            start=0, end=half_dim, dtype=torch.float32, device=timesteps.device
        )
        exponent = exponent / (half_dim - downscale_freq_shift)
        emb = torch.exp(exponent)
        emb = timesteps[:, None].float() * emb[None, :]
        emb = scale * emb
        emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
        if flip_sin_to_cos:
            emb = torch.cat([emb[:, half_dim:], emb[:, :half_dim]], dim=-1)
        if embedding_dim % 2 == 1:
            emb = torch.nn.functional.pad(emb, (0, 1, 0, 0))
        return emb

    class Attention(nn.Module):
        def __init__(self, query_dim, heads=2, dim_head=4):
            super().__init__()
            inner = heads * dim_head
            self.heads = heads
            self.scale = dim_head**-0.5
            self.group_norm = nn.GroupNorm(
                num_channels=query_dim, num_groups=4, eps=1e-6, affine=True
            )
            self.to_q = nn.Linear(query_dim, inner)
            self.to_k = nn.Linear(query_dim, inner)
            self.to_v = nn.Linear(query_dim, inner)
            self.to_out = nn.ModuleList([nn.Linear(inner, query_dim), nn.Dropout(0.0)])

        def head_to_batch_dim(self, tensor):
            batch_size, seq_len, dim = tensor.shape
            tensor = tensor.reshape(batch_size, seq_len, self.heads, dim // self.heads)
            return tensor.permute(0, 2, 1, 3).reshape(
                batch_size * self.heads, seq_len, dim // self.heads
            )

        def batch_to_head_dim(self, tensor):
            batch_size, seq_len, dim = tensor.shape
            tensor = tensor.reshape(batch_size // self.heads, self.heads, seq_len, dim)
            return tensor.permute(0, 2, 1, 3).reshape(
                batch_size // self.heads, seq_len, dim * self.heads
            )

        def get_attention_scores(self, query, key, attention_mask=None):
            dtype = query.dtype
            if attention_mask is None:
                baddbmm_input = torch.empty(
                    query.shape[0],
                    query.shape[1],
                    key.shape[1],
                    dtype=query.dtype,
                    device=query.device,
                ).fill_(float("nan"))
                beta = 0
            else:
                baddbmm_input = attention_mask
                beta = 1
            attention_scores = torch.baddbmm(
                baddbmm_input, query, key.transpose(-1, -2), beta=beta, alpha=self.scale
            )
            attention_probs = attention_scores.softmax(dim=-1)
            return attention_probs.to(dtype)

        def forward(self, hidden_states, attention_mask=None):
            residual = hidden_states
            batch_size, channel, height, width = hidden_states.shape
            hidden_states = self.group_norm(hidden_states)
            hidden_states = hidden_states.view(batch_size, channel, height * width).transpose(1, 2)
            query = self.head_to_batch_dim(self.to_q(hidden_states))
            key = self.head_to_batch_dim(self.to_k(hidden_states))
            value = self.head_to_batch_dim(self.to_v(hidden_states))
            attention_probs = self.get_attention_scores(query, key, attention_mask)
            hidden_states = torch.bmm(attention_probs, value)
            hidden_states = self.batch_to_head_dim(hidden_states)
            hidden_states = self.to_out[0](hidden_states)
            hidden_states = self.to_out[1](hidden_states)
            hidden_states = hidden_states.transpose(-1, -2).reshape(
                batch_size, channel, height, width
            )
            return hidden_states + residual

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.time = nn.Sequential(nn.Linear(8, 16), nn.SiLU(), nn.Linear(16, 8))
            self.conv_in = nn.Conv2d(3, 8, 3, padding=1)
            self.attn = Attention(8)
            self.conv_out = nn.Conv2d(8, 3, 3, padding=1)

        def forward(self, x, t):
            temb = self.time(
                get_timestep_embedding(t, 8, flip_sin_to_cos=True, downscale_freq_shift=0)
            )
            h = self.conv_in(x) + temb[:, :, None, None]
            h = self.attn(h)
            h = F.interpolate(h, scale_factor=2.0, mode="nearest")
            h = F.avg_pool2d(h, 2)
            return self.conv_out(F.silu(h))

    model = ctx.init(Net())
    x = ctx.t(rng.standard_normal((2, 3, 4, 4)).astype(np.float32))
    t = ctx.t(np.array([3, 500]))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    outs = []
    for _ in range(2):
        opt.zero_grad()
        loss = F.mse_loss(model(x, t), x)
        loss.backward()
        opt.step()
        outs.append(loss)
    outs.append(get_timestep_embedding(t, 7))
    nan = float("nan")
    M = ctx.t(np.full((3, 4), nan, np.float32))
    a = ctx.t(rng.standard_normal((3, 5)).astype(np.float32), requires_grad=True)
    b = ctx.t(rng.standard_normal((5, 4)).astype(np.float32))
    v = ctx.t(rng.standard_normal(5).astype(np.float32))
    bb = ctx.t(rng.standard_normal((2, 3, 5)).astype(np.float32))
    bc = ctx.t(rng.standard_normal((2, 5, 4)).astype(np.float32))
    r = [
        torch.addmm(M, a, b, beta=0),
        torch.addmm(M, a, b, beta=0, alpha=2.0),
        torch.addmv(ctx.t(np.full(3, nan, np.float32)), a, v, beta=0),
        torch.addbmm(M, bb, bc, beta=0),
        torch.baddbmm(ctx.t(np.full((2, 3, 4), nan, np.float32)), bb, bc, beta=0.0),
        torch.addr(M, ctx.t(np.ones(3, np.float32)), ctx.t(np.ones(4, np.float32)), beta=0),
        M.addmm(a, b, beta=0),
    ]
    sum(x.sum() for x in r).backward()
    outs += r + [a.grad]
    return outs


def whisper_kv_hooks(torch, ctx):
    """Whisper's decoding: forward hooks on key/value projections that cache their outputs and
    return the concatenation (a hook replacing a module's output), removed after generation."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(1)

    def sinusoids(length, channels, max_timescale=10000):
        log_timescale_increment = np.log(max_timescale) / (channels // 2 - 1)
        inv_timescales = torch.exp(-log_timescale_increment * torch.arange(channels // 2))
        scaled_time = torch.arange(length)[:, np.newaxis] * inv_timescales[np.newaxis, :]
        return torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)

    class MultiHeadAttention(nn.Module):
        def __init__(self, n_state, n_head):
            super().__init__()
            self.n_head = n_head
            self.query = nn.Linear(n_state, n_state)
            self.key = nn.Linear(n_state, n_state, bias=False)
            self.value = nn.Linear(n_state, n_state)
            self.out = nn.Linear(n_state, n_state)

        def forward(self, x, xa=None, mask=None, kv_cache=None):
            q = self.query(x)
            if kv_cache is None or xa is None or self.key not in kv_cache:
                k = self.key(x if xa is None else xa)
                v = self.value(x if xa is None else xa)
            else:
                k = kv_cache[self.key]
                v = kv_cache[self.value]
            n_batch, n_ctx, n_state = q.shape
            scale = (n_state // self.n_head) ** -0.25
            q = q.view(*q.shape[:2], self.n_head, -1).permute(0, 2, 1, 3) * scale
            k = k.view(*k.shape[:2], self.n_head, -1).permute(0, 2, 3, 1) * scale
            v = v.view(*v.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
            qk = q @ k
            if mask is not None:
                qk = qk + mask[:n_ctx, :n_ctx]
            qk = qk.float()
            w = F.softmax(qk, dim=-1).to(q.dtype)
            return self.out((w @ v).permute(0, 2, 1, 3).flatten(start_dim=2))

    class Block(nn.Module):
        def __init__(self, n_state, n_head, cross):
            super().__init__()
            self.attn = MultiHeadAttention(n_state, n_head)
            self.attn_ln = nn.LayerNorm(n_state)
            self.cross_attn = MultiHeadAttention(n_state, n_head) if cross else None
            self.cross_attn_ln = nn.LayerNorm(n_state) if cross else None
            self.mlp = nn.Sequential(
                nn.Linear(n_state, 4 * n_state), nn.GELU(), nn.Linear(4 * n_state, n_state)
            )
            self.mlp_ln = nn.LayerNorm(n_state)

        def forward(self, x, xa=None, mask=None, kv_cache=None):
            x = x + self.attn(self.attn_ln(x), mask=mask, kv_cache=kv_cache)
            if self.cross_attn:
                x = x + self.cross_attn(self.cross_attn_ln(x), xa, kv_cache=kv_cache)
            x = x + self.mlp(self.mlp_ln(x))
            return x

    class Decoder(nn.Module):
        def __init__(self, n_vocab, n_ctx, n_state, n_head, n_layer):
            super().__init__()
            self.token_embedding = nn.Embedding(n_vocab, n_state)
            self.positional_embedding = nn.Parameter(torch.empty(n_ctx, n_state))
            self.blocks = nn.ModuleList(
                [Block(n_state, n_head, cross=True) for _ in range(n_layer)]
            )
            self.ln = nn.LayerNorm(n_state)
            mask = torch.empty(n_ctx, n_ctx).fill_(-np.inf).triu_(1)
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, x, xa, kv_cache=None):
            offset = next(iter(kv_cache.values())).shape[1] if kv_cache else 0
            x = self.token_embedding(x) + self.positional_embedding[offset : offset + x.shape[-1]]
            x = x.to(xa.dtype)
            for block in self.blocks:
                x = block(x, xa, mask=self.mask, kv_cache=kv_cache)
            x = self.ln(x)
            logits = (x @ torch.transpose(self.token_embedding.weight.to(x.dtype), 0, 1)).float()
            return logits

    def install_kv_cache_hooks(model, cache=None):
        cache = {**cache} if cache is not None else {}
        hooks = []

        def save_to_cache(module, _, output):
            if module not in cache or output.shape[1] > 16:
                cache[module] = output
            else:
                cache[module] = torch.cat([cache[module], output], dim=1).detach()
            return cache[module]

        def install_hooks(layer):
            if isinstance(layer, MultiHeadAttention):
                hooks.append(layer.key.register_forward_hook(save_to_cache))
                hooks.append(layer.value.register_forward_hook(save_to_cache))

        model.apply(install_hooks)
        return cache, hooks

    dec = Decoder(20, 16, 8, 2, 2)
    with torch.no_grad():
        dec.positional_embedding.copy_(sinusoids(16, 8))
    ctx.init(dec)
    dec.eval()
    audio = ctx.t(rng.standard_normal((2, 5, 8)).astype(np.float32))
    tokens = ctx.t(np.array([[1, 2], [1, 3]]))
    outs = []
    with torch.no_grad():
        full = tokens
        fdec = ctx.fn(dec)
        for _ in range(4):
            logits = fdec(full, audio)
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            full = torch.cat([full, nxt], dim=-1)
        outs.append(full)
        kv_cache, hooks = install_kv_cache_hooks(dec)
        seq = tokens
        step_in = tokens
        logits_cached = []
        cdec = ctx.fn(lambda a, b, kv_cache: dec(a, b, kv_cache=kv_cache))
        for i in range(4):
            logits = cdec(step_in, audio, kv_cache=kv_cache)
            logits_cached.append(logits[:, -1])
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], dim=-1)
            step_in = nxt
        for h in hooks:
            h.remove()
        outs += [
            seq,
            torch.stack(logits_cached),
            len(kv_cache),
            sorted(v.shape[1] for v in kv_cache.values()),
        ]
        outs.append(len(dec.blocks[0].attn.key._forward_hooks))
    return outs


def sac_update(torch, ctx):
    """Soft actor-critic: a tanh-squashed Gaussian policy (TransformedDistribution with
    TanhTransform(cache_size=1) over Independent(Normal)), twin Q networks, target networks
    updated by Polyak averaging under no_grad, and an automatically tuned temperature."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    rng = np.random.default_rng(2)
    obs_dim, act_dim = 5, 2

    def mlp(sizes, activation=nn.ReLU, output_activation=nn.Identity):
        layers = []
        for j in range(len(sizes) - 1):
            act = activation if j < len(sizes) - 2 else output_activation
            layers += [nn.Linear(sizes[j], sizes[j + 1]), act()]
        return nn.Sequential(*layers)

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp([obs_dim, 16, 16], nn.ReLU, nn.ReLU)
            self.mu = nn.Linear(16, act_dim)
            self.log_std = nn.Linear(16, act_dim)

        def forward(self, obs, deterministic=False):
            h = self.net(obs)
            mu = self.mu(h)
            log_std = torch.clamp(self.log_std(h), -20, 2)
            std = torch.exp(log_std)
            base = D.Independent(D.Normal(mu, std), 1)
            dist = D.TransformedDistribution(base, [D.transforms.TanhTransform(cache_size=1)])
            a = torch.tanh(mu) if deterministic else dist.rsample()
            logp = dist.log_prob(a)
            # spinning-up's closed form, to check against
            u = torch.atanh(a.clamp(-0.999999, 0.999999))
            logp2 = D.Normal(mu, std).log_prob(u).sum(-1) - (
                2 * (np.log(2) - u - F.softplus(-2 * u))
            ).sum(axis=1)
            return a, logp, logp2

    class QFunc(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = mlp([obs_dim + act_dim, 16, 16, 1])

        def forward(self, obs, act):
            return torch.squeeze(self.q(torch.cat([obs, act], dim=-1)), -1)

    actor, q1, q2 = Actor(), QFunc(), QFunc()
    ctx.init(actor, "actor")
    ctx.init(q1, "q1")
    ctx.init(q2, "q2")
    import copy

    q1_t, q2_t = copy.deepcopy(q1), copy.deepcopy(q2)
    for p in list(q1_t.parameters()) + list(q2_t.parameters()):
        p.requires_grad = False
    log_alpha = torch.zeros(1, requires_grad=True)
    target_entropy = -float(act_dim)
    pi_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    q_opt = torch.optim.Adam(list(q1.parameters()) + list(q2.parameters()), lr=1e-3)
    a_opt = torch.optim.Adam([log_alpha], lr=1e-3)
    o = ctx.t(rng.standard_normal((8, obs_dim)).astype(np.float32))
    act = ctx.t(np.tanh(rng.standard_normal((8, act_dim))).astype(np.float32))
    r = ctx.t(rng.standard_normal(8).astype(np.float32))
    o2 = ctx.t(rng.standard_normal((8, obs_dim)).astype(np.float32))
    d = ctx.t((rng.random(8) < 0.2).astype(np.float32))
    gamma, polyak = 0.99, 0.995
    outs = []

    def update():
        alpha = log_alpha.exp().detach()
        with torch.no_grad():
            a2, logp_a2, _ = actor(o2)
            q_pi_targ = torch.min(q1_t(o2, a2), q2_t(o2, a2))
            backup = r + gamma * (1 - d) * (q_pi_targ - alpha * logp_a2)
        loss_q = ((q1(o, act) - backup) ** 2).mean() + ((q2(o, act) - backup) ** 2).mean()
        q_opt.zero_grad()
        loss_q.backward()
        q_opt.step()
        for p in list(q1.parameters()) + list(q2.parameters()):
            p.requires_grad = False
        pi, logp_pi, logp2 = actor(o)
        q_pi = torch.min(q1(o, pi), q2(o, pi))
        loss_pi = (alpha * logp_pi - q_pi).mean()
        pi_opt.zero_grad()
        loss_pi.backward()
        pi_opt.step()
        for p in list(q1.parameters()) + list(q2.parameters()):
            p.requires_grad = True
        loss_alpha = -(log_alpha * (logp_pi + target_entropy).detach()).mean()
        a_opt.zero_grad()
        loss_alpha.backward()
        a_opt.step()
        with torch.no_grad():
            for p, p_targ in zip(q1.parameters(), q1_t.parameters()):
                p_targ.data.mul_(polyak)
                p_targ.data.add_((1 - polyak) * p.data)
            for p, p_targ in zip(q2.parameters(), q2_t.parameters()):
                p_targ.data.mul_(polyak).add_(p.data, alpha=1 - polyak)
        return [loss_q, loss_pi, loss_alpha, logp_pi, logp2, pi]

    update = ctx.fn(update)
    for it in range(3):
        outs += update()
    outs.append(q1_t.state_dict())
    outs.append(log_alpha)
    return outs


def arcface(torch, ctx):
    """ArcFace / CosFace margins: normalized weights, acos of clamped cosines, cos(theta + m),
    one-hot through scatter_, easy-margin where, and a center loss on the side."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3)

    class ArcMarginProduct(nn.Module):
        def __init__(self, in_features, out_features, s=30.0, m=0.50, easy_margin=False):
            super().__init__()
            self.s, self.m = s, m
            self.weight = nn.Parameter(torch.FloatTensor(out_features, in_features))
            nn.init.xavier_uniform_(self.weight)
            self.easy_margin = easy_margin
            self.cos_m = math.cos(m)
            self.sin_m = math.sin(m)
            self.th = math.cos(math.pi - m)
            self.mm = math.sin(math.pi - m) * m

        def forward(self, input, label):
            cosine = F.linear(F.normalize(input), F.normalize(self.weight))
            sine = torch.sqrt((1.0 - torch.pow(cosine, 2)).clamp(0, 1))
            phi = cosine * self.cos_m - sine * self.sin_m
            if self.easy_margin:
                phi = torch.where(cosine > 0, phi, cosine)
            else:
                phi = torch.where(cosine > self.th, phi, cosine - self.mm)
            one_hot = torch.zeros(cosine.size(), device=input.device)
            one_hot.scatter_(1, label.view(-1, 1).long(), 1)
            output = (one_hot * phi) + ((1.0 - one_hot) * cosine)
            output *= self.s
            return output

    def arc_via_acos(emb, W, labels, s=16.0, m=0.3, eps=1e-7):
        cos = F.normalize(emb, dim=1) @ F.normalize(W, dim=1).t()
        theta = torch.acos(torch.clamp(cos, -1 + eps, 1 - eps))
        target = torch.cos(theta + m)
        oh = F.one_hot(labels, num_classes=W.shape[0]).bool()
        logits = torch.where(oh, target, cos) * s
        return F.cross_entropy(logits, labels, label_smoothing=0.1)

    backbone = nn.Sequential(nn.Linear(10, 16), nn.PReLU(16), nn.BatchNorm1d(16), nn.Linear(16, 8))
    head = ArcMarginProduct(8, 5, s=16.0, m=0.3)
    ctx.init(backbone, "b")
    ctx.init(head, "h")
    W2 = nn.Parameter(ctx.t(rng.standard_normal((5, 8)).astype(np.float32)))
    centers = ctx.t(np.zeros((5, 8), np.float32))
    opt = torch.optim.SGD(
        [
            {"params": backbone.parameters()},
            {"params": head.parameters(), "lr": 0.05},
            {"params": [W2], "weight_decay": 5e-4},
        ],
        lr=0.1,
        momentum=0.9,
    )
    x = ctx.t(rng.standard_normal((12, 10)).astype(np.float32))
    y = ctx.t(rng.integers(0, 5, 12))
    outs = []

    def step(x, y):
        opt.zero_grad()
        emb = backbone(x)
        l1 = F.cross_entropy(head(emb, y), y)
        l2 = arc_via_acos(emb, W2, y)
        lc = ((emb - centers[y]) ** 2).sum(1).mean() * 0.01
        loss = l1 + l2 + lc
        loss.backward()
        opt.step()
        with torch.no_grad():
            delta = torch.zeros_like(centers).index_add_(0, y, emb - centers[y])
            cnt = torch.bincount(y, minlength=5).clamp(min=1).unsqueeze(1).float()
            centers.add_(0.5 * delta / cnt)
        return [l1, l2, lc]

    step = ctx.fn(step)
    for _ in range(3):
        outs += step(x, y)
    outs += [W2.grad, head.weight.grad, centers, backbone[1].weight]
    return outs


def hf_logits_processors(torch, ctx):
    """HuggingFace's sampling loop: repetition penalty (gather/where/scatter_), no-repeat n-gram
    bans, min-length EOS suppression, temperature, top-k and top-p warpers, multinomial
    sampling, finished sequences padded."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(4)
    V, eos, pad = 12, 11, 0

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, 16)
            self.gru = nn.GRU(16, 16, batch_first=True)
            self.out = nn.Linear(16, V)

        def forward(self, ids):
            h, _ = self.gru(self.emb(ids))
            return self.out(h)

    def repetition_penalty(input_ids, scores, penalty):
        score = torch.gather(scores, 1, input_ids)
        score = torch.where(score < 0, score * penalty, score / penalty)
        return scores.scatter(1, input_ids, score)

    def no_repeat_ngram(input_ids, scores, n):
        num_batch, cur_len = input_ids.shape
        for b in range(num_batch):
            gen = input_ids[b].tolist()
            ngrams = {}
            for ngram in zip(*[gen[i:] for i in range(n)]):
                prev = tuple(ngram[:-1])
                ngrams[prev] = ngrams.get(prev, []) + [ngram[-1]]
            start = cur_len + 1 - n
            banned = ngrams.get(tuple(gen[start:cur_len]), [])
            scores[b, banned] = -float("inf")
        return scores

    def min_length(input_ids, scores, min_len):
        vocab_tensor = torch.arange(scores.shape[-1], device=scores.device)
        eos_token_mask = torch.isin(vocab_tensor, torch.tensor([eos]))
        scores_processed = scores.clone()
        if input_ids.shape[-1] < min_len:
            scores_processed = torch.where(eos_token_mask, -math.inf, scores)
        return scores_processed

    def top_k(scores, k, filter_value=-float("inf")):
        top_k = min(k, scores.size(-1))
        indices_to_remove = scores < torch.topk(scores, top_k)[0][..., -1, None]
        return scores.masked_fill(indices_to_remove, filter_value)

    def top_p(scores, p, filter_value=-float("inf"), min_tokens_to_keep=1):
        sorted_logits, sorted_indices = torch.sort(scores, descending=False)
        cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        sorted_indices_to_remove = cumulative_probs <= (1 - p)
        sorted_indices_to_remove[..., -min_tokens_to_keep:] = 0
        indices_to_remove = sorted_indices_to_remove.scatter(
            1, sorted_indices, sorted_indices_to_remove
        )
        return scores.masked_fill(indices_to_remove, filter_value)

    model = ctx.init(LM())
    model.eval()
    input_ids = ctx.t(rng.integers(1, V - 1, (3, 3)))
    unfinished = torch.ones(input_ids.shape[0], dtype=torch.long, device=input_ids.device)
    gen = torch.Generator().manual_seed(7)
    outs = []
    cmodel = ctx.fn(model)
    with torch.no_grad():
        for step in range(6):
            logits = cmodel(input_ids)[:, -1, :].to(copy=True, dtype=torch.float32)
            scores = repetition_penalty(input_ids, logits, 1.3)
            scores = no_repeat_ngram(input_ids, scores, 2)
            scores = min_length(input_ids, scores, 5)
            scores = scores / 0.7
            scores = top_k(scores, 6)
            scores = top_p(scores, 0.9)
            probs = F.softmax(scores, dim=-1)
            outs.append(scores)
            next_tokens = torch.multinomial(probs, num_samples=1, generator=gen).squeeze(1)
            next_tokens = next_tokens * unfinished + pad * (1 - unfinished)
            input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
            unfinished = unfinished & ~(next_tokens == eos)
            if unfinished.max() == 0:
                break
    outs += [input_ids, unfinished]
    return outs


def encoder_nested_fastpath(torch, ctx):
    """nn.TransformerEncoder in eval mode with a key padding mask: PyTorch's nested-tensor fast
    path returns zeros at padded positions; training mode and norm_first differ."""
    nn = torch.nn
    rng = np.random.default_rng(0)
    outs = []
    for norm_first in (False, True):
        layer = nn.TransformerEncoderLayer(
            d_model=8,
            nhead=2,
            dim_feedforward=16,
            dropout=0.0,
            batch_first=True,
            norm_first=norm_first,
        )
        enc = nn.TransformerEncoder(
            layer, num_layers=2, enable_nested_tensor=True, norm=nn.LayerNorm(8)
        )
        ctx.init(enc, f"enc{norm_first}")
        x = ctx.t(rng.standard_normal((3, 5, 8)).astype(np.float32))
        lengths = [5, 3, 2]
        mask = ctx.t(np.array([[i >= n for i in range(5)] for n in lengths]))
        enc.eval()
        with torch.no_grad():
            outs.append(enc(x, src_key_padding_mask=mask))
        with torch.inference_mode():
            outs.append(enc(x, src_key_padding_mask=mask))
        outs.append(enc(x, src_key_padding_mask=mask))
        enc.train()
        outs.append(enc(x, src_key_padding_mask=mask))
        fmask = torch.zeros(3, 5).masked_fill(mask, float("-inf"))
        enc.eval()
        with torch.no_grad():
            outs.append(enc(x, src_key_padding_mask=fmask))
            outs.append(
                enc(
                    x,
                    mask=nn.Transformer.generate_square_subsequent_mask(5),
                    src_key_padding_mask=mask,
                    is_causal=True,
                )
            )
    return outs


def mha_fastpath_eval(torch, ctx):
    """nn.MultiheadAttention in eval under no_grad (PyTorch's fast path) with key padding
    masks and need_weights in every combination, and a fully padded row."""
    nn = torch.nn
    rng = np.random.default_rng(1)
    mha = ctx.init(nn.MultiheadAttention(8, 2, batch_first=True))
    mha.eval()
    x = ctx.t(rng.standard_normal((3, 4, 8)).astype(np.float32))
    mask = ctx.t(np.array([[0, 0, 0, 1], [0, 0, 1, 1], [0, 0, 0, 0]], bool))
    outs = []
    with torch.no_grad():
        for need in (False, True):
            for avg in (False, True):
                o, w = mha(
                    x, x, x, key_padding_mask=mask, need_weights=need, average_attn_weights=avg
                )
                outs += [o, w]
        attn_mask = ctx.t(np.triu(np.ones((4, 4), bool), 1))
        o, w = mha(x, x, x, attn_mask=attn_mask, need_weights=False)
        outs += [o, w]
        o, _ = mha(x, x, x, attn_mask=attn_mask, is_causal=True, need_weights=False)
        outs.append(o)
    return outs


def printing_dtypes(torch, ctx):
    """repr and str of tensors of every dtype with edge values, summarized large tensors,
    empty shapes, requires_grad and grad_fn, and set_printoptions restored."""
    outs = []
    vals = [0.0, -1.5, 3.25, 1e-5, 12345.678, float("inf"), float("-inf"), float("nan")]
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        outs.append(repr(torch.tensor(vals, dtype=dt)))
        outs.append(repr(torch.tensor([[1.0, 2.5], [3.0, 4.0]], dtype=dt)))
        outs.append(
            repr(
                torch.tensor(
                    [1e10, 1.0], dtype=torch.float64 if dt == torch.float64 else torch.float32
                ).to(dt)
            )
        )
    for dt in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64):
        outs.append(repr(torch.tensor([0, 1, -1 if dt != torch.uint8 else 255, 100], dtype=dt)))
    outs.append(repr(torch.tensor([True, False])))
    outs.append(repr(torch.tensor(True)))
    outs.append(repr(torch.tensor(3, dtype=torch.int16)))
    outs.append(repr(torch.tensor(2.5, dtype=torch.float16)))
    outs.append(repr(torch.tensor([1 + 2j, -0.5j], dtype=torch.complex64)))
    outs.append(repr(torch.zeros(0, 3)))
    outs.append(repr(torch.zeros(2, 0, dtype=torch.int32)))
    outs.append(repr(torch.zeros(0, dtype=torch.bfloat16)))
    outs.append(repr(torch.arange(2000).reshape(40, 50)))
    outs.append(repr(torch.arange(2000, dtype=torch.float32) / 7))
    outs.append(str(torch.ones(2, 2, requires_grad=True)))
    outs.append(repr(torch.ones(2, requires_grad=True) * 2))
    outs.append(repr(torch.nn.Parameter(torch.ones(2, dtype=torch.float16))))
    outs.append(repr(torch.tensor([1e-10, 1.0, 1e5])))
    outs.append(repr(torch.tensor([0.1, 0.25, 100.0])))
    torch.set_printoptions(precision=2, sci_mode=False, linewidth=40)
    try:
        outs.append(repr(torch.tensor([1e-10, 1.0, 1e5, 3.14159])))
        outs.append(repr(torch.arange(30, dtype=torch.float64).reshape(3, 10) / 3))
    finally:
        torch.set_printoptions(profile="default")
    torch.set_printoptions(threshold=5, edgeitems=1)
    try:
        outs.append(repr(torch.arange(12).reshape(3, 4)))
    finally:
        torch.set_printoptions(profile="default")
    outs.append(repr(torch.tensor([1.0, 2.0], dtype=torch.float64)))
    outs.append(repr(torch.tensor([1.0, 2.0], dtype=torch.float16).sum()))
    outs.append(repr(torch.tensor([[1, 2]], dtype=torch.uint8).bool()))
    outs.append(f"{torch.tensor(2.5):.3f}")
    outs.append(str(torch.float16) + str(torch.bfloat16) + repr(torch.int64) + str(torch.bool))
    outs.append(repr(torch.tensor([3.0, 4.0]).norm()))
    return [o.replace(torch.__name__ + ".", "torch.") for o in outs]


def fractional_pool(torch, ctx):
    """FractionalMaxPool2d/3d with given samples, output_size and output_ratio, return_indices,
    and gradients."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((2, 3, 9, 10)).astype(np.float32), requires_grad=True)
    samples = ctx.t(rng.random((2, 3, 2)).astype(np.float32))
    outs = []
    o1, i1 = F.fractional_max_pool2d(
        x, 3, output_size=(4, 5), return_indices=True, _random_samples=samples
    )
    o2 = F.fractional_max_pool2d(x, (2, 3), output_ratio=(0.5, 0.5), _random_samples=samples)
    m = nn.FractionalMaxPool2d(2, output_size=3, return_indices=True, _random_samples=samples)
    o3, i3 = m(x)
    x3 = ctx.t(rng.standard_normal((1, 2, 6, 7, 8)).astype(np.float32), requires_grad=True)
    s3 = ctx.t(rng.random((1, 2, 3)).astype(np.float32))
    o4 = F.fractional_max_pool3d(x3, 2, output_size=(3, 4, 5), _random_samples=s3)
    (o1.sum() + (o2**2).sum() + o3.mean() + o4.sum()).backward()
    outs += [
        o1,
        i1,
        o2,
        o3,
        i3,
        o4,
        x.grad,
        x3.grad,
        F.max_unpool2d(o1, i1, 3, output_size=(12, 15)).shape,
    ]
    return outs


def mesh_geometry(torch, ctx):
    """Mesh processing: face normals by torch.cross / linalg.cross, vertex normals by index_add_,
    a uniform Laplacian from edges (unique, sparse-free scatter), heatmap argmax positions
    by unravel_index, and gradients of a smoothness loss."""
    rng = np.random.default_rng(4)
    verts = ctx.t(rng.standard_normal((6, 3)).astype(np.float32), requires_grad=True)
    faces = ctx.t(np.array([[0, 1, 2], [0, 2, 3], [0, 3, 4], [0, 4, 5], [0, 5, 1], [1, 3, 5]]))
    v0, v1, v2 = verts[faces[:, 0]], verts[faces[:, 1]], verts[faces[:, 2]]
    fn = torch.cross(v1 - v0, v2 - v0, dim=1)
    fn2 = torch.linalg.cross(v1 - v0, v2 - v0)
    area = 0.5 * fn.norm(dim=1)
    vn = torch.zeros_like(verts)
    for k in range(3):
        vn = vn.index_add(0, faces[:, k], fn)
    vn = torch.nn.functional.normalize(vn, eps=1e-6, dim=1)
    edges = torch.cat([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]], dim=0)
    edges = torch.sort(edges, dim=1).values
    edges = torch.unique(edges, dim=0)
    deg = torch.bincount(edges.flatten(), minlength=6).float()
    nb = (
        torch.zeros_like(verts)
        .index_add_(0, edges[:, 0], verts[edges[:, 1]])
        .index_add_(0, edges[:, 1], verts[edges[:, 0]])
    )
    lap = verts - nb / deg[:, None]
    loss = lap.norm(dim=1).mean() + area.sum() + (vn * verts).sum()
    loss.backward()
    heat = ctx.t(rng.standard_normal((2, 3, 5, 7)).astype(np.float32))
    flat = heat.flatten(2).argmax(-1)
    rows, cols = torch.unravel_index(flat, heat.shape[-2:])
    coords = torch.stack(torch.unravel_index(ctx.t(np.array([0, 7, 34])), (5, 7)), -1)
    return [
        fn,
        fn2,
        area,
        vn,
        edges,
        deg,
        lap,
        loss,
        verts.grad,
        rows,
        cols,
        coords,
        torch.cross(ctx.t(np.eye(3)), ctx.t(np.ones((3, 3)))),
    ]


def custom_function_flags(torch, ctx):
    """autograd.Function with once_differentiable, mark_non_differentiable (an index output),
    set_materialize_grads(False) with None grads, needs_input_grad, a non-tensor argument, and
    mark_dirty for an in-place op."""
    once_differentiable = torch.autograd.function.once_differentiable

    class SortWithIdx(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, descending):
            vals, idx = torch.sort(x, dim=-1, descending=descending)
            ctx.save_for_backward(idx)
            ctx.mark_non_differentiable(idx)
            return vals, idx

        @staticmethod
        @once_differentiable
        def backward(ctx, gv, gi):
            (idx,) = ctx.saved_tensors
            g = torch.zeros_like(gv).scatter_(-1, idx, gv)
            return g, None

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, k: float):
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(x, w)
            ctx.k = k
            return x * w * k, x + w

        @staticmethod
        def backward(ctx, g1, g2):
            x, w = ctx.saved_tensors
            gx = gw = None
            if g1 is None and g2 is None:
                return None, None, None
            if ctx.needs_input_grad[0]:
                gx = (g1 * w * ctx.k if g1 is not None else 0) + (g2 if g2 is not None else 0)
            if ctx.needs_input_grad[1]:
                gw = (g1 * x * ctx.k if g1 is not None else 0) + (g2 if g2 is not None else 0)
            return gx, gw, None

    class ReluInplace(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.clamp_(min=0)
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * (y > 0).to(g.dtype)

    rng = np.random.default_rng(5)
    x = ctx.t(rng.standard_normal((3, 5)).astype(np.float32), requires_grad=True)
    w = ctx.t(rng.standard_normal((3, 5)).astype(np.float32), requires_grad=True)
    vals, idx = SortWithIdx.apply(x, True)
    outs = [vals, idx, idx.requires_grad, vals.requires_grad]
    (vals * ctx.t(np.arange(5, dtype=np.float32))).sum().backward()
    outs.append(x.grad)
    x.grad = None
    a, b = Scale.apply(x, w, 2.0)
    a.sum().backward()
    outs += [x.grad, w.grad]
    x.grad = w.grad = None
    a, b = Scale.apply(x, w.detach(), 0.5)
    (b * b).sum().backward()
    outs += [x.grad, w.grad]
    h = x * 1.0
    r = ReluInplace.apply(h)
    outs.append(r is h)
    outs.append(type(r.grad_fn).__name__)
    x.grad = None
    (r * r).sum().backward()
    outs.append(x.grad)
    v2, _ = SortWithIdx.apply(x, False)
    g = torch.autograd.grad(v2.sum(), x, create_graph=True)[0]
    try:
        g.sum().backward()
        outs.append("no error")
    except RuntimeError as e:
        outs.append(
            "once_differentiable" in str(e) or "trying to apply" in str(e).lower() or "error"
        )
    return outs


def surgery_submodules(torch, ctx):
    """Module surgery through set_submodule/get_submodule/get_parameter, replacing a layer deep
    inside nn.Sequential and ModuleList, register_module, and load_state_dict of an old
    checkpoint upgraded in _load_from_state_dict by its version."""
    nn = torch.nn
    rng = np.random.default_rng(6)

    class Block(nn.Module):
        _version = 2

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 3, padding=1)
            self.norm = nn.BatchNorm2d(3)

        def forward(self, x):
            return torch.relu(self.norm(self.conv(x)))

        def _load_from_state_dict(
            self,
            state_dict,
            prefix,
            local_metadata,
            strict,
            missing_keys,
            unexpected_keys,
            error_msgs,
        ):
            version = local_metadata.get("version", None)
            if version is None or version < 2:
                old = prefix + "bn.weight"
                for suffix in ("weight", "bias", "running_mean", "running_var"):
                    k = prefix + "bn." + suffix
                    if k in state_dict:
                        state_dict[prefix + "norm." + suffix] = state_dict.pop(k)
            super()._load_from_state_dict(
                state_dict,
                prefix,
                local_metadata,
                strict,
                missing_keys,
                unexpected_keys,
                error_msgs,
            )

    model = nn.Sequential(Block(), nn.ModuleList([Block(), nn.Identity()]))
    ctx.init(model)
    sd = model.state_dict()
    outs = [
        sd._metadata[""].get("version"),
        sd._metadata["0"]["version"],
        sorted(sd._metadata.keys()),
    ]
    old = {k.replace("norm", "bn"): v.clone() for k, v in sd.items()}
    from collections import OrderedDict

    old = OrderedDict(old)
    old._metadata = OrderedDict({k: dict(v) for k, v in sd._metadata.items()})
    old._metadata["0"]["version"] = 1
    old._metadata["1.0"]["version"] = 1
    fresh = nn.Sequential(Block(), nn.ModuleList([Block(), nn.Identity()]))
    res = fresh.load_state_dict(old, strict=False)
    outs += [sorted(res.missing_keys), sorted(res.unexpected_keys)]
    outs.append(fresh.state_dict()["1.0.norm.weight"])
    new_conv = nn.Conv2d(3, 3, 1)
    ctx.init(new_conv, "nc")
    model.set_submodule("1.0.conv", new_conv)
    outs.append(model.get_submodule("1.0.conv") is new_conv)
    outs.append(model.get_parameter("1.0.conv.weight").shape)
    outs.append(model.get_buffer("0.norm.running_var"))
    model.register_module("head", nn.Flatten())
    try:
        model.get_submodule("1.5")
    except AttributeError as e:
        outs.append("error")
    try:
        model.set_submodule("2.conv", nn.Identity())
    except AttributeError:
        outs.append("error2")
    x = ctx.t(rng.standard_normal((2, 3, 4, 4)).astype(np.float32))
    y = model[1][0](model[0](x))
    outs.append(model.head(y))
    outs.append([n for n, _ in model.named_children()])
    return outs


def schedulers_resume(torch, ctx):
    """OneCycleLR three-phase/linear with cycled momentum, CyclicLR exp_range, warm restarts
    stepped at fractional epochs, ReduceLROnPlateau with cooldown and per-group min_lr: each
    resumed mid-run from its state_dict into fresh objects."""
    nn = torch.nn
    lr_s = torch.optim.lr_scheduler

    def make(kind):
        p = [nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(2))]
        if kind == "cyclic":
            opt = torch.optim.SGD([{"params": [p[0]]}, {"params": [p[1]]}], lr=0.1, momentum=0.9)
        else:
            opt = torch.optim.AdamW([{"params": [p[0]]}, {"params": [p[1]], "lr": 0.05}], lr=0.1)
        if kind == "onecycle":
            s = lr_s.OneCycleLR(
                opt,
                max_lr=[0.5, 0.2],
                total_steps=20,
                pct_start=0.3,
                anneal_strategy="linear",
                three_phase=True,
                div_factor=10,
                final_div_factor=100,
            )
        elif kind == "cyclic":
            s = lr_s.CyclicLR(
                opt,
                base_lr=0.01,
                max_lr=[0.2, 0.1],
                step_size_up=3,
                step_size_down=2,
                mode="exp_range",
                gamma=0.9,
                base_momentum=0.8,
                max_momentum=0.95,
            )
        elif kind == "warm":
            s = lr_s.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.001)
        else:
            s = lr_s.ReduceLROnPlateau(
                opt,
                mode="max",
                factor=0.5,
                patience=1,
                threshold=0.1,
                threshold_mode="abs",
                cooldown=1,
                min_lr=[0.02, 0.01],
            )
        return p, opt, s

    outs = []
    metrics = [1.0, 1.05, 1.02, 1.3, 1.31, 1.2, 1.1, 1.0, 1.5, 1.4, 1.3, 1.3]
    for kind in ("onecycle", "cyclic", "warm", "plateau"):
        p, opt, s = make(kind)
        trace = []
        for i in range(12):
            opt.step()
            if kind == "warm":
                for j in range(3):
                    s.step(i + j / 3)
            elif kind == "plateau":
                s.step(metrics[i])
            else:
                s.step()
            trace.append(
                [g["lr"] for g in opt.param_groups]
                + [g.get("momentum", g.get("betas", (0,))[0]) for g in opt.param_groups]
            )
            if i == 5:
                buf = io.BytesIO()
                torch.save({"opt": opt.state_dict(), "sched": s.state_dict()}, buf)
        buf.seek(0)
        state = torch.load(buf)
        p2, opt2, s2 = make(kind)
        opt2.load_state_dict(state["opt"])
        s2.load_state_dict(state["sched"])
        trace2 = []
        for i in range(6, 12):
            opt2.step()
            if kind == "warm":
                for j in range(3):
                    s2.step(i + j / 3)
            elif kind == "plateau":
                s2.step(metrics[i])
            else:
                s2.step()
            trace2.append(
                [g["lr"] for g in opt2.param_groups]
                + [g.get("momentum", g.get("betas", (0,))[0]) for g in opt2.param_groups]
            )
        outs += [
            trace,
            trace2,
            s.get_last_lr() if kind != "plateau" else s.get_last_lr(),
            sorted(k for k in s.state_dict() if not k.startswith("_")),
        ]
    return outs


def layer_geometry(torch, ctx):
    """Convolutions and pools at awkward geometries: padding='same' with even kernels and
    dilation (asymmetric padding), padding modes, transposed convolutions given output_size,
    groups and dilation, pools with ceil_mode, dilation, count_include_pad and
    divisor_override, adaptive pools at non-dividing sizes with indices, area and fractional
    scale interpolation; values and input/weight gradients."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 4, 9, 11)).astype(np.float32), requires_grad=True)
    x1 = ctx.t(rng.standard_normal((2, 4, 13)).astype(np.float32), requires_grad=True)
    mods = [
        nn.Conv2d(4, 6, 4, padding="same"),
        nn.Conv2d(4, 6, (2, 4), padding="same", dilation=(3, 2), bias=False),
        nn.Conv2d(4, 4, 3, padding=2, padding_mode="reflect", groups=2),
        nn.Conv2d(4, 6, 3, padding=(1, 2), padding_mode="circular", stride=2),
        nn.Conv2d(4, 6, 3, padding=1, padding_mode="replicate", dilation=2),
        nn.Conv2d(4, 8, 3, stride=(2, 3), groups=4),
    ]
    mods1 = [
        nn.Conv1d(4, 6, 6, padding="same", dilation=2),
        nn.Conv1d(4, 4, 5, padding=3, padding_mode="circular", groups=4),
        nn.ConvTranspose1d(4, 3, 4, stride=3, padding=1, output_padding=2, dilation=1),
    ]
    tmods = [
        nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2),
        nn.ConvTranspose2d(
            4, 2, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), dilation=(2, 1)
        ),
    ]
    for i, m in enumerate(mods + mods1 + tmods):
        ctx.init(m, f"m{i}")
    outs = [m(x) for m in mods] + [m(x1) for m in mods1]
    outs.append(tmods[0](x, output_size=[18, 22]))
    outs.append(tmods[0](x, output_size=(2, 6, 17, 21)))
    outs.append(tmods[1](x))
    pools = [
        F.max_pool2d(x, 3, stride=2, padding=1, dilation=2, ceil_mode=True),
        F.max_pool2d(x, (2, 3), stride=(2, 2), ceil_mode=True),
        F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=True),
        F.avg_pool2d(x, (2, 4), stride=(3, 2), padding=(1, 2), divisor_override=3),
        F.avg_pool1d(x1, 4, stride=3, padding=2, ceil_mode=True, count_include_pad=False),
        F.max_pool1d(x1, 3, stride=2, dilation=3, ceil_mode=True),
        F.lp_pool2d(x.abs() + 0.1, 2.0, (2, 3), stride=2),
        F.lp_pool1d(x1.abs() + 0.1, 3, 2),
        F.adaptive_avg_pool2d(x, (4, 5)),
        F.adaptive_avg_pool2d(x, (None, 3)),
        F.adaptive_max_pool2d(x, (5, 3)),
        F.adaptive_avg_pool1d(x1, 5),
        F.adaptive_max_pool1d(x1, 6),
        F.interpolate(x, size=(4, 5), mode="area"),
        F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=False),
        F.interpolate(x, scale_factor=(0.7, 1.3), mode="bilinear", recompute_scale_factor=True),
        F.interpolate(x, scale_factor=0.6, mode="nearest"),
        F.interpolate(x, scale_factor=1.7, mode="nearest-exact"),
        F.interpolate(x, size=(5, 6), mode="bicubic", align_corners=True),
        F.interpolate(x1, scale_factor=2.5, mode="linear"),
        F.interpolate(x, size=(4, 5), mode="bilinear", antialias=True),
    ]
    am, ai = F.adaptive_max_pool2d(x, (4, 6), return_indices=True)
    mp, mi = F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, return_indices=True)
    unp = F.max_unpool2d(mp, mi, 3, stride=2, padding=1, output_size=x.shape[-2:])
    outs += pools + [am, ai, mp, mi, unp]
    loss = sum((o.float() ** 2).mean() for o in outs if o.dtype.is_floating_point)
    loss.backward()
    outs += [x.grad, x1.grad] + [m.weight.grad for m in mods + mods1 + tmods]
    outs.append([tuple(o.shape) for o in outs[:20]])
    return outs


def custom_transforms_kl(torch, ctx):
    """A program's own distributions.Transform (forward, inverse, log|det J|, domain and
    codomain constraints, bijective, sign) composed with library transforms in a
    TransformedDistribution, its .inv, and a KL divergence registered for its own
    distribution class with register_kl."""
    D = torch.distributions
    constraints = D.constraints
    rng = np.random.default_rng(2)

    class CubeTransform(D.transforms.Transform):
        domain = constraints.real
        codomain = constraints.real
        bijective = True
        sign = +1

        def __eq__(self, other):
            return isinstance(other, CubeTransform)

        def _call(self, x):
            return x + x**3 / 3

        def _inverse(self, y):
            # Newton iterations for x + x^3/3 = y
            x = y.clone()
            for _ in range(30):
                x = x - (x + x**3 / 3 - y) / (1 + x**2)
            return x

        def log_abs_det_jacobian(self, x, y):
            return torch.log1p(x**2)

    class MyNormal(D.Normal):
        pass

    @D.kl.register_kl(MyNormal, MyNormal)
    def _kl_mine(p, q):
        return 2.0 * D.kl_divergence(D.Normal(p.loc, p.scale), D.Normal(q.loc, q.scale))

    loc = ctx.t(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    log_scale = ctx.t((0.1 * rng.standard_normal(3)).astype(np.float32), requires_grad=True)
    base = D.Normal(loc, log_scale.exp())
    t = CubeTransform()
    flow = D.TransformedDistribution(
        base, [t, D.transforms.AffineTransform(1.0, 2.0), D.transforms.SigmoidTransform()]
    )
    torch.manual_seed(0)
    y = flow.rsample((4,))
    lp = flow.log_prob(y)
    inv = t.inv
    z = ctx.t(np.array([-1.0, 0.0, 0.5, 2.0], np.float32))
    comp = D.transforms.ComposeTransform([t, D.transforms.ExpTransform()])
    outs = [
        y,
        lp,
        inv(z),
        inv.inv is t,
        t(z),
        comp(z),
        comp.inv(comp(z)),
        comp.log_abs_det_jacobian(z, comp(z)),
    ]
    kl = D.kl_divergence(MyNormal(loc, log_scale.exp()), MyNormal(torch.zeros(3), torch.ones(3)))
    kl2 = D.kl_divergence(D.Normal(loc, log_scale.exp()), D.Normal(torch.zeros(3), torch.ones(3)))
    (lp.sum() + kl.sum()).backward()
    outs += [
        kl,
        kl2,
        loc.grad,
        log_scale.grad,
        flow.support.check(y).all(),
        type(flow.support).__name__,
    ]
    return outs


PROGRAMS = [
    diffusers_attention,
    whisper_kv_hooks,
    sac_update,
    arcface,
    hf_logits_processors,
    encoder_nested_fastpath,
    mha_fastpath_eval,
    printing_dtypes,
    fractional_pool,
    mesh_geometry,
    custom_function_flags,
    surgery_submodules,
    schedulers_resume,
    layer_geometry,
    custom_transforms_kl,
]
CAPTURED = [
    diffusers_attention,
    whisper_kv_hooks,
    sac_update,
    arcface,
    hf_logits_processors,
    layer_geometry,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
