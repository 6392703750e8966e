"""A small GPT (in the style of minGPT / nanoGPT) trained on synthetic character data.

Decoder blocks with a causal mask built from ``torch.tril`` and ``masked_fill``, weight tying,
AdamW with decay / no-decay parameter groups, linear warmup then cosine decay through LambdaLR,
``torch.compile``, gradient accumulation, gradient clipping, and top-k sampling.

    python tiny_gpt.py --max-iters 50
"""

import argparse
import math
import os
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


@dataclass
class GPTConfig:
    block_size: int = 32
    vocab_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        mask = torch.tril(torch.ones(config.block_size, config.block_size))
        self.register_buffer("bias", mask.view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
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
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= self.config.block_size, f"sequence of {t} > block size {self.config.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(
                logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
            )
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        # every 2-D parameter (weights of matmuls, embeddings) decays; biases and norms don't
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = (
                idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size :]
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


def synthetic_text(n_chars, seed=0):
    """Sentences from a tiny grammar: learnable structure with a small vocabulary."""
    rng = np.random.default_rng(seed)
    subjects = ["the cat", "a dog", "my friend", "the old man", "she", "we"]
    verbs = ["sees", "likes", "finds", "paints", "follows", "remembers"]
    objects = ["the moon", "a red ball", "the river", "an apple", "the garden", "music"]
    parts, length = [], 0
    while length < n_chars:
        s = f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}. "
        parts.append(s.capitalize())
        length += len(s)
    return "".join(parts)[:n_chars]


class ChunkDataset(Dataset):
    """Windows of ``block_size + 1`` tokens at offsets drawn once, up front, from a seeded rng."""

    def __init__(self, tokens, block_size, n_windows, seed):
        rng = np.random.default_rng(seed)
        self.tokens = tokens
        self.block_size = block_size
        self.offsets = rng.integers(0, len(tokens) - block_size - 1, size=n_windows)

    def __len__(self):
        return len(self.offsets)

    def __getitem__(self, i):
        o = int(self.offsets[i])
        chunk = torch.from_numpy(self.tokens[o : o + self.block_size + 1].astype(np.int64))
        return chunk[:-1], chunk[1:]


@torch.no_grad()
def estimate_loss(model, loader, device):
    model.eval()
    losses = []
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        _, loss = model(x, y)
        losses.append(loss.item())
    model.train()
    return float(np.mean(losses))


def main(argv=None):
    parser = argparse.ArgumentParser(description="train a small GPT")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--gradient-accumulation-steps", type=int, default=2)
    parser.add_argument("--max-iters", type=int, default=200)
    parser.add_argument("--eval-interval", type=int, default=50)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--min-lr", type=float, default=3e-4)
    parser.add_argument("--warmup-iters", type=int, default=10)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--grad-clip", type=float, default=1.0)
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--n-embd", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--compile-backend", default=None)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--init-from", default=None, help="a checkpoint to start from")
    parser.add_argument("--evaluate", action="store_true")
    parser.add_argument("--out-dir", default="out")
    args = parser.parse_args(argv)

    os.makedirs(args.out_dir, exist_ok=True)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    text = synthetic_text(20000)
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    tokens = np.array([stoi[c] for c in text], dtype=np.uint16)
    n = int(0.9 * len(tokens))
    n_windows = args.batch_size * args.gradient_accumulation_steps * args.max_iters
    train_ds = ChunkDataset(tokens[:n], args.block_size, n_windows, seed=args.seed)
    val_ds = ChunkDataset(tokens[n:], args.block_size, 4 * args.batch_size, seed=args.seed + 1)
    # the windows are drawn at random up front, so the loader can take them in order
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=False, drop_last=True)
    val_loader = DataLoader(val_ds, batch_size=args.batch_size)

    config = GPTConfig(
        block_size=args.block_size,
        vocab_size=len(chars),
        n_layer=args.n_layer,
        n_head=args.n_head,
        n_embd=args.n_embd,
        dropout=args.dropout,
    )
    model = GPT(config)
    if args.init_from:
        model.load_state_dict(torch.load(args.init_from, map_location="cpu")["model"])
    model.to(device)
    print(f"number of parameters: {sum(p.numel() for p in model.parameters()) / 1e6:.3f}M")
    history = {"train_loss": [], "val_loss": []}
    if args.evaluate:
        history["val_loss"].append(estimate_loss(model, val_loader, device))
        return history

    optimizer = model.configure_optimizers(args.weight_decay, args.learning_rate, (0.9, 0.95))

    def lr_lambda(it):
        # linear warmup, then cosine decay down to min_lr
        if it < args.warmup_iters:
            return (it + 1) / (args.warmup_iters + 1)
        decay_ratio = (it - args.warmup_iters) / max(1, args.max_iters - args.warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * min(decay_ratio, 1.0)))
        return (args.min_lr + coeff * (args.learning_rate - args.min_lr)) / args.learning_rate

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)

    raw_model = model
    if args.compile:
        print("compiling the model...")
        if args.compile_backend is None:
            model = torch.compile(model)
        else:
            model = torch.compile(model, backend=args.compile_backend)

    batches = iter(train_loader)
    best_val_loss = float("inf")
    ckpt_path = os.path.join(args.out_dir, "ckpt.pt")
    for it in range(args.max_iters):
        total = 0.0
        for _ in range(args.gradient_accumulation_steps):
            x, y = next(batches)
            x, y = x.to(device), y.to(device)
            logits, loss = model(x, y)
            loss = loss / args.gradient_accumulation_steps  # the mean over the accumulated batch
            loss.backward()
            total += loss.item()
        if args.grad_clip != 0.0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        history["train_loss"].append(total)

        if (it + 1) % args.eval_interval == 0 or it + 1 == args.max_iters:
            val_loss = estimate_loss(model, val_loader, device)
            history["val_loss"].append(val_loss)
            print(f"iter {it + 1}: train loss {total:.4f}, val loss {val_loss:.4f}")
            if val_loss < best_val_loss:
                best_val_loss = val_loss
                checkpoint = {
                    "model": raw_model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "iter_num": it + 1,
                    "best_val_loss": best_val_loss,
                    "config": vars(args),
                }
                torch.save(checkpoint, ckpt_path)

    if args.max_iters == 0:
        torch.save({"model": raw_model.state_dict(), "iter_num": 0}, ckpt_path)
    # sample from the best checkpoint
    checkpoint = torch.load(ckpt_path, map_location=device)
    raw_model.load_state_dict(checkpoint["model"])
    raw_model.eval()
    start = torch.tensor([[stoi["T"]]], dtype=torch.long, device=device)
    out = raw_model.generate(start, max_new_tokens=40, temperature=0.8, top_k=10)
    history["sample"] = "".join(itos[i] for i in out[0].tolist())
    history["best_val_loss"] = estimate_loss(raw_model, val_loader, device)
    print(history["sample"])
    return history


if __name__ == "__main__":
    main()
