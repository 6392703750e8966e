"""Sequence-to-sequence Transformer (after the PyTorch "language translation with nn.Transformer"
tutorial) on a toy task: reverse a sequence of digits.

Source sequences have random lengths and are padded; the target is the reversed sequence between
BOS and EOS. Training uses teacher forcing, label-smoothed cross-entropy that ignores padding,
the "Noam" warmup schedule through LambdaLR, and gradient clipping; evaluation reports the
teacher-forced loss and the exact-match accuracy of greedy decoding.

    python seq2seq_transformer.py --epochs 10
"""

import argparse
import math
import os

import numpy as np
import torch
import torch.nn as nn
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD_IDX, BOS_IDX, EOS_IDX = 0, 1, 2
N_SPECIAL = 3


class ReverseDataset(Dataset):
    def __init__(self, n, n_digits, min_len, max_len, seed):
        rng = np.random.default_rng(seed)
        self.samples = []
        for _ in range(n):
            length = rng.integers(min_len, max_len + 1)
            seq = rng.integers(N_SPECIAL, N_SPECIAL + n_digits, size=length)
            self.samples.append((seq.tolist(), seq[::-1].tolist()))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        return self.samples[idx]


def collate_fn(batch):
    src_batch, tgt_batch = [], []
    for src, tgt in batch:
        src_batch.append(torch.tensor(src, dtype=torch.long))
        tgt_batch.append(torch.tensor([BOS_IDX] + tgt + [EOS_IDX], dtype=torch.long))
    src = pad_sequence(src_batch, batch_first=True, padding_value=PAD_IDX)
    tgt = pad_sequence(tgt_batch, batch_first=True, padding_value=PAD_IDX)
    return src, tgt


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size: int, dropout: float, maxlen: int = 64):
        super().__init__()
        den = torch.exp(-torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        pos_embedding = pos_embedding.unsqueeze(0)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pos_embedding", pos_embedding)

    def forward(self, token_embedding: Tensor):
        return self.dropout(token_embedding + self.pos_embedding[:, : token_embedding.size(1), :])


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, emb_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens: Tensor):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, num_layers, emb_size, nhead, vocab_size, dim_feedforward, dropout):
        super().__init__()
        self.transformer = nn.Transformer(
            d_model=emb_size,
            nhead=nhead,
            num_encoder_layers=num_layers,
            num_decoder_layers=num_layers,
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            batch_first=True,
        )
        self.generator = nn.Linear(emb_size, vocab_size)
        self.src_tok_emb = TokenEmbedding(vocab_size, emb_size)
        self.tgt_tok_emb = TokenEmbedding(vocab_size, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

    def forward(self, src, trg, tgt_mask, src_padding_mask, tgt_padding_mask):
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        outs = self.transformer(
            src_emb,
            tgt_emb,
            src_mask=None,
            tgt_mask=tgt_mask,
            memory_mask=None,
            src_key_padding_mask=src_padding_mask,
            tgt_key_padding_mask=tgt_padding_mask,
            memory_key_padding_mask=src_padding_mask,
        )
        return self.generator(outs)

    def encode(self, src, src_padding_mask=None):
        return self.transformer.encoder(
            self.positional_encoding(self.src_tok_emb(src)), src_key_padding_mask=src_padding_mask
        )

    def decode(self, tgt, memory, tgt_mask, memory_padding_mask=None):
        return self.transformer.decoder(
            self.positional_encoding(self.tgt_tok_emb(tgt)),
            memory,
            tgt_mask=tgt_mask,
            memory_key_padding_mask=memory_padding_mask,
        )


def generate_square_subsequent_mask(sz, device):
    mask = (torch.triu(torch.ones((sz, sz), device=device)) == 1).transpose(0, 1)
    mask = mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)
    return mask


def create_mask(src, tgt, device):
    tgt_seq_len = tgt.shape[1]
    tgt_mask = generate_square_subsequent_mask(tgt_seq_len, device)
    src_padding_mask = (src == PAD_IDX).type(torch.bool)
    tgt_padding_mask = (tgt == PAD_IDX).type(torch.bool)
    return tgt_mask, src_padding_mask, tgt_padding_mask


def train_epoch(model, optimizer, scheduler, loader, loss_fn, device, clip, losses):
    model.train()
    for src, tgt in loader:
        src, tgt = src.to(device), tgt.to(device)
        tgt_input = tgt[:, :-1]
        tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input, device)
        logits = model(src, tgt_input, tgt_mask, src_padding_mask, tgt_padding_mask)
        optimizer.zero_grad()
        tgt_out = tgt[:, 1:]
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())


@torch.no_grad()
def greedy_decode(model, src, max_len, device):
    src_padding_mask = src == PAD_IDX
    memory = model.encode(src, src_padding_mask)
    ys = torch.full((src.size(0), 1), BOS_IDX, dtype=torch.long, device=device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=device)
    for _ in range(max_len - 1):
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(ys.size(1), device=device)
        out = model.decode(ys, memory, tgt_mask, src_padding_mask)
        prob = model.generator(out[:, -1])
        next_word = torch.argmax(prob, dim=1)
        next_word = torch.where(finished, torch.full_like(next_word, PAD_IDX), next_word)
        ys = torch.cat([ys, next_word.unsqueeze(1)], dim=1)
        finished |= next_word == EOS_IDX
        if finished.all():
            break
    return ys


def evaluate(model, loader, loss_fn, device):
    model.eval()
    total_loss, n_batches, correct, n = 0.0, 0, 0, 0
    correct_tokens, n_tokens = 0, 0
    with torch.no_grad():
        for src, tgt in loader:
            src, tgt = src.to(device), tgt.to(device)
            tgt_input = tgt[:, :-1]
            tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input, device)
            logits = model(src, tgt_input, tgt_mask, src_padding_mask, tgt_padding_mask)
            tgt_out = tgt[:, 1:]
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
            total_loss += loss.item()
            n_batches += 1
            pred = logits.argmax(dim=-1)
            mask = tgt_out != PAD_IDX
            correct_tokens += ((pred == tgt_out) & mask).sum().item()
            n_tokens += mask.sum().item()

            decoded = greedy_decode(model, src, tgt.size(1) + 2, device)
            for i in range(src.size(0)):
                pred = [t for t in decoded[i, 1:].tolist() if t not in (PAD_IDX,)]
                if EOS_IDX in pred:
                    pred = pred[: pred.index(EOS_IDX)]
                target = [t for t in tgt[i, 1:].tolist() if t not in (PAD_IDX, EOS_IDX)]
                correct += int(pred == target)
                n += 1
    print(f"token accuracy {correct_tokens / n_tokens:.3f}")
    return total_loss / n_batches, correct / n


def main(argv=None):
    parser = argparse.ArgumentParser(description="nn.Transformer seq2seq on sequence reversal")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--emb-size", type=int, default=32)
    parser.add_argument("--nhead", type=int, default=4)
    parser.add_argument("--ffn-hid-dim", type=int, default=64)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--n-digits", type=int, default=8)
    parser.add_argument("--min-len", type=int, default=3)
    parser.add_argument("--max-len", type=int, default=8)
    parser.add_argument("--n-train", type=int, default=1024)
    parser.add_argument("--n-val", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init-state", default=None)
    parser.add_argument("--evaluate", action="store_true")
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    vocab_size = N_SPECIAL + args.n_digits

    train_set = ReverseDataset(args.n_train, args.n_digits, args.min_len, args.max_len, seed=1)
    val_set = ReverseDataset(args.n_val, args.n_digits, args.min_len, args.max_len, seed=2)
    # the data is random already; batches in a fixed order make runs reproducible
    train_loader = DataLoader(train_set, batch_size=args.batch_size, collate_fn=collate_fn)
    val_loader = DataLoader(val_set, batch_size=64, collate_fn=collate_fn)

    model = Seq2SeqTransformer(
        args.num_layers, args.emb_size, args.nhead, vocab_size, args.ffn_hid_dim, args.dropout
    ).to(device)
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    if args.init_state:
        model.load_state_dict(torch.load(args.init_state, map_location=device))

    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD_IDX, label_smoothing=args.label_smoothing)
    history = {"train_loss": [], "val_loss": [], "val_accuracy": []}
    if args.evaluate:
        val_loss, val_acc = evaluate(model, val_loader, loss_fn, device)
        history["val_loss"].append(val_loss)
        history["val_accuracy"].append(val_acc)
        return history

    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)

    def noam(step):
        step = max(step, 1)
        return args.emb_size**-0.5 * min(step**-0.5, step * args.warmup**-1.5)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=noam)
    path = os.path.join(args.save_dir, "seq2seq.pt")
    best_val = None
    for epoch in range(1, args.epochs + 1):
        train_epoch(
            model,
            optimizer,
            scheduler,
            train_loader,
            loss_fn,
            device,
            args.clip,
            history["train_loss"],
        )
        val_loss, val_acc = evaluate(model, val_loader, loss_fn, device)
        history["val_loss"].append(val_loss)
        history["val_accuracy"].append(val_acc)
        print(
            f"Epoch: {epoch}, Train loss: {history['train_loss'][-1]:.3f}, "
            f"Val loss: {val_loss:.3f}, Val exact match: {val_acc:.3f}"
        )
        if best_val is None or val_loss < best_val:
            best_val = val_loss
            torch.save(model.state_dict(), path)

    if not os.path.exists(path):
        torch.save(model.state_dict(), path)
    model.load_state_dict(torch.load(path, map_location=device))
    history["best_val_loss"], history["best_val_accuracy"] = evaluate(
        model, val_loader, loss_fn, device
    )
    return history


if __name__ == "__main__":
    main()
