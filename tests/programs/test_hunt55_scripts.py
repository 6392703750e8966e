"""Whole scripts of hunt55, each run on PyTorch and on ember: nanoGPT's train.py and model.py as
written (a GPTConfig dataclass, ModuleDict of the transformer, weight tying, the c_proj scaled
init, flash and manual causal attention, configure_optimizers reading AdamW's signature for
``fused``, no autocast on the CPU and a disabled GradScaler, gradient accumulation, a hand-written
cosine schedule, estimate_loss under no_grad, a checkpoint dict saved and reloaded with the
``_orig_mod.`` prefix stripped, crop_block_size and top-k generation); and data loading with
two worker processes (an IterableDataset sharded by worker info, persistent workers, a map
dataset reading get_worker_info, a seeded shuffle).
"""

import inspect
import io
import math
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005, SIM222, C414


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 24
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 16
    dropout: float = 0.0
    bias: bool = True


def _nanogpt(torch):
    nn, F = torch.nn, torch.nn.functional

    class LayerNorm(nn.Module):
        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))
            self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self, config, flash):
            super().__init__()
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout
            self.flash = flash
            if not self.flash:
                self.register_buffer(
                    "bias",
                    torch.tril(torch.ones(config.block_size, config.block_size)).view(
                        1, 1, config.block_size, config.block_size
                    ),
                )

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            if self.flash:
                y = torch.nn.functional.scaled_dot_product_attention(
                    q,
                    k,
                    v,
                    attn_mask=None,
                    dropout_p=self.dropout if self.training else 0,
                    is_causal=True,
                )
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                att = F.softmax(att, dim=-1)
                att = self.attn_dropout(att)
                y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self, config, flash):
            super().__init__()
            self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
            self.attn = CausalSelfAttention(config, flash)
            self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
            self.mlp = MLP(config)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, config, flash=True):
            super().__init__()
            self.config = config
            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(config.vocab_size, config.n_embd),
                    wpe=nn.Embedding(config.block_size, config.n_embd),
                    drop=nn.Dropout(config.dropout),
                    h=nn.ModuleList([Block(config, flash) for _ in range(config.n_layer)]),
                    ln_f=LayerNorm(config.n_embd, bias=config.bias),
                )
            )
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        def get_num_params(self, non_embedding=True):
            n_params = sum(p.numel() for p in self.parameters())
            if non_embedding:
                n_params -= self.transformer.wpe.weight.numel()
            return n_params

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            tok_emb = self.transformer.wte(idx)
            pos_emb = self.transformer.wpe(pos)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(
                    logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
                )
            else:
                logits = self.lm_head(x[:, [-1], :])
                loss = None
            return logits, loss

        def crop_block_size(self, block_size):
            self.config.block_size = block_size
            self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[:block_size])
            for block in self.transformer.h:
                if hasattr(block.attn, "bias"):
                    block.attn.bias = block.attn.bias[:, :, :block_size, :block_size]

        def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
            param_dict = {pn: p for pn, p in self.named_parameters()}
            param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [
                {"params": decay_params, "weight_decay": weight_decay},
                {"params": nodecay_params, "weight_decay": 0.0},
            ]
            fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
            use_fused = fused_available and device_type == "cuda"
            extra_args = dict(fused=True) if use_fused else dict()
            return torch.optim.AdamW(
                optim_groups, lr=learning_rate, betas=betas, **extra_args
            ), fused_available

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
            for _ in range(max_new_tokens):
                idx_cond = (
                    idx
                    if idx.size(1) <= self.config.block_size
                    else idx[:, -self.config.block_size :]
                )
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                idx_next = torch.multinomial(probs, num_samples=1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    return GPT


def nanogpt_script(torch, ctx):
    text = "hello world, this is a tiny shakespeare. to be or not to be, that is the question! " * 4
    chars = sorted(list(set(text)))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = np.array([stoi[c] for c in text], dtype=np.uint16)
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n:]
    torch.manual_seed(1337)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device_type = "cpu"
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
        "bfloat16"
    ]
    # (nanoGPT's rule: no autocast on the CPU)
    actx = (
        nullcontext()
        if device_type == "cpu"
        else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    )
    cfg = GPTConfig(vocab_size=len(chars))
    results = []
    for flash in (True, False):
        GPT = _nanogpt(torch)
        model = ctx.init(GPT(cfg, flash=flash), f"gpt{flash}")
        results.append(model.get_num_params())
        block_size, batch_size = cfg.block_size, 4

        def get_batch(split):
            d = train_data if split == "train" else val_data
            ix = torch.randint(len(d) - block_size, (batch_size,))
            x = torch.stack(
                [torch.from_numpy((d[i : i + block_size]).astype(np.int64)) for i in ix]
            )
            y = torch.stack(
                [torch.from_numpy((d[i + 1 : i + 1 + block_size]).astype(np.int64)) for i in ix]
            )
            return x, y

        optimizer, fused = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), device_type)
        scaler = torch.amp.GradScaler("cpu", enabled=(ptdtype == torch.float16))

        def get_lr(it, warmup_iters=2, lr_decay_iters=8, learning_rate=6e-3, min_lr=6e-4):
            if it < warmup_iters:
                return learning_rate * (it + 1) / (warmup_iters + 1)
            if it > lr_decay_iters:
                return min_lr
            decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
            coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
            return min_lr + coeff * (learning_rate - min_lr)

        @torch.no_grad()
        def estimate_loss():
            out = {}
            model.eval()
            for split in ["train", "val"]:
                losses = torch.zeros(2)
                for k in range(2):
                    X, Y = get_batch(split)
                    with actx:
                        logits, loss = model(X, Y)
                    losses[k] = loss.item()
                out[split] = losses.mean()
            model.train()
            return out

        torch.manual_seed(1)
        X, Y = get_batch("train")
        losses = []
        for iter_num in range(3):
            lr = get_lr(iter_num)
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr
            for micro_step in range(2):
                with actx:
                    logits, loss = model(X, Y)
                    loss = loss / 2
                X, Y = get_batch("train")
                scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item() * 2)
        results += [losses, estimate_loss(), fused]
        buf = io.BytesIO()
        checkpoint = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "model_args": dict(n_layer=2, n_head=2),
            "iter_num": 4,
            "best_val_loss": 1e9,
            "config": {"lr": 6e-4},
        }
        torch.save(checkpoint, buf)
        buf.seek(0)
        ck = torch.load(buf, map_location="cpu")
        state_dict = ck["model"]
        unwanted_prefix = "_orig_mod."
        for k, v in list(state_dict.items()):
            if k.startswith(unwanted_prefix):
                state_dict[k[len(unwanted_prefix) :]] = state_dict.pop(k)
        model2 = GPT(cfg, flash=flash)
        model2.load_state_dict(state_dict)
        model2.crop_block_size(8)
        results.append([ck["iter_num"], ck["model_args"], model2.transformer.wpe.weight.shape])
        model2.eval()
        torch.manual_seed(42)
        start = torch.tensor([[stoi["t"], stoi["o"]]], dtype=torch.long)
        results.append(model2.generate(start, 6, temperature=0.8, top_k=5))
    return results


def workers_pipeline(torch, ctx):
    D = torch.utils.data

    class Stream(D.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            info = D.get_worker_info()
            wid, nw = (0, 1) if info is None else (info.id, info.num_workers)
            for i in range(wid, self.n, nw):
                yield torch.tensor([i, wid])

    class MapDS(D.Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return {
                "x": torch.full((2,), float(i)),
                "w": torch.utils.data.get_worker_info().id
                if torch.utils.data.get_worker_info()
                else -1,
            }

    res = []
    dl = D.DataLoader(Stream(9), batch_size=2, num_workers=2)
    res.append([b.tolist() for b in dl])
    dl = D.DataLoader(Stream(7), batch_size=None, num_workers=2, persistent_workers=True)
    res.append([b.tolist() for b in dl])
    res.append([b.tolist() for b in dl])
    dl = D.DataLoader(
        MapDS(),
        batch_size=3,
        num_workers=2,
        shuffle=False,
        prefetch_factor=2,
        pin_memory=False,
        drop_last=False,
    )
    res.append([(b["x"].tolist(), b["w"].tolist()) for b in dl])
    dl = D.DataLoader(
        MapDS(),
        batch_size=4,
        num_workers=2,
        shuffle=True,
        generator=torch.Generator().manual_seed(3),
    )
    res.append([b["x"][:, 0].tolist() for b in dl])
    return res


def test_nanogpt_script():
    import torch

    import ember

    # (the script sets allow_tf32, as nanoGPT's train.py does: PyTorch's float32 matmul
    # precision becomes "high" for the rest of the process unless it is put back)
    saved = [(lib, lib.get_float32_matmul_precision()) for lib in (torch, ember)]
    cudnn = [(lib, lib.backends.cudnn.allow_tf32) for lib in (torch, ember)]
    try:
        check_program(nanogpt_script)
    finally:
        for lib, precision in saved:
            lib.set_float32_matmul_precision(precision)
        for lib, flag in cudnn:
            lib.backends.cudnn.allow_tf32 = flag


def test_workers_pipeline():
    check_program(workers_pipeline)
