"""Character-level LSTM language model (in the style of the PyTorch word_language_model example).

Trains on a small built-in corpus with truncated backpropagation through time: the text is laid
out as ``batch_size`` parallel streams, each batch is the next ``bptt`` characters of every
stream, and the hidden state carries over from batch to batch, detached from the old graph.

    python char_lstm.py --epochs 3
"""

import argparse
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

CORPUS = """\
It was the best of times, it was the worst of times, it was the age of wisdom, it was the age
of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season
of light, it was the season of darkness, it was the spring of hope, it was the winter of
despair, we had everything before us, we had nothing before us, we were all going direct to
heaven, we were all going direct the other way. There were a king with a large jaw and a queen
with a plain face, on the throne of England; there were a king with a large jaw and a queen
with a fair face, on the throne of France. In both countries it was clearer than crystal to the
lords of the State preserves of loaves and fishes, that things in general were settled for ever.
"""


class Vocabulary:
    def __init__(self, text):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.itos = {i: c for i, c in enumerate(self.chars)}

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        return torch.tensor([self.stoi[c] for c in text], dtype=torch.long)

    def decode(self, ids):
        return "".join(self.itos[int(i)] for i in ids)


class StreamBatches(Dataset):
    """Item i is batch i: characters [i*bptt, (i+1)*bptt) of every stream and their successors."""

    def __init__(self, data, batch_size, bptt):
        n = data.size(0) // batch_size
        self.streams = data[: n * batch_size].view(batch_size, n)
        self.bptt = bptt

    def __len__(self):
        return (self.streams.size(1) - 1) // self.bptt

    def __getitem__(self, i):
        start = i * self.bptt
        x = self.streams[:, start : start + self.bptt]
        y = self.streams[:, start + 1 : start + 1 + self.bptt]
        return x, y


class CharLSTM(nn.Module):
    def __init__(self, vocab_size, emb_size, hidden_size, num_layers, dropout=0.2):
        super().__init__()
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocab_size, emb_size)
        self.rnn = nn.LSTM(emb_size, hidden_size, num_layers, dropout=dropout, batch_first=True)
        self.decoder = nn.Linear(hidden_size, vocab_size)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, x, hidden):
        emb = self.drop(self.encoder(x))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        return self.decoder(output), hidden

    def init_hidden(self, batch_size):
        weight = next(self.parameters())
        return (
            weight.new_zeros(self.num_layers, batch_size, self.hidden_size),
            weight.new_zeros(self.num_layers, batch_size, self.hidden_size),
        )


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def evaluate(model, loader, batch_size, device):
    model.eval()
    total_loss, total_tokens = 0.0, 0
    hidden = model.init_hidden(batch_size)
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            logits, hidden = model(x, hidden)
            loss = F.cross_entropy(
                logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum"
            )
            total_loss += loss.item()
            total_tokens += y.numel()
    return total_loss / total_tokens


@torch.no_grad()
def sample(model, vocab, prompt, length, temperature, device):
    model.eval()
    x = vocab.encode(prompt).unsqueeze(0).to(device)
    logits, hidden = model(x, None)
    out = x[0].tolist()
    for _ in range(length):
        probs = F.softmax(logits[:, -1, :] / temperature, dim=-1)
        next_id = torch.multinomial(probs, num_samples=1)
        out.append(next_id.item())
        logits, hidden = model(next_id, hidden)
    return vocab.decode(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description="character-level LSTM language model")
    parser.add_argument("--emsize", type=int, default=32)
    parser.add_argument("--nhid", type=int, default=64)
    parser.add_argument("--nlayers", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--bptt", type=int, default=16)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=1111)
    parser.add_argument("--init-state", default=None)
    parser.add_argument("--evaluate", action="store_true")
    parser.add_argument("--save", default="char_lstm.pt")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    vocab = Vocabulary(CORPUS)
    data = vocab.encode(CORPUS)
    split = int(0.8 * len(data))
    train_set = StreamBatches(data[:split], args.batch_size, args.bptt)
    val_set = StreamBatches(data[split:], 2, args.bptt)
    # each item already is a whole batch of parallel streams, in order
    train_loader = DataLoader(train_set, batch_size=None, shuffle=False)
    val_loader = DataLoader(val_set, batch_size=None, shuffle=False)

    model = CharLSTM(len(vocab), args.emsize, args.nhid, args.nlayers, args.dropout).to(device)
    if args.init_state:
        model.load_state_dict(torch.load(args.init_state, map_location=device))
    history = {"train_loss": [], "val_loss": []}
    if args.evaluate:
        history["val_loss"].append(evaluate(model, val_loader, 2, device))
        return history

    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=max(1, args.epochs * len(train_loader))
    )
    best_val = None
    for epoch in range(1, args.epochs + 1):
        model.train()
        hidden = model.init_hidden(args.batch_size)
        for x, y in train_loader:
            if args.max_steps is not None and len(history["train_loss"]) >= args.max_steps:
                break
            x, y = x.to(device), y.to(device)
            hidden = repackage_hidden(hidden)
            optimizer.zero_grad()
            logits, hidden = model(x, hidden)
            loss = F.cross_entropy(logits.reshape(-1, len(vocab)), y.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            scheduler.step()
            history["train_loss"].append(loss.item())
        val_loss = evaluate(model, val_loader, 2, device)
        history["val_loss"].append(val_loss)
        print(
            f"| epoch {epoch:3d} | lr {scheduler.get_last_lr()[0]:.5f} | "
            f"valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}"
        )
        if best_val is None or val_loss < best_val:
            with open(args.save, "wb") as f:
                torch.save(model.state_dict(), f)
            best_val = val_loss

    if not os.path.exists(args.save):  # no epoch ran: keep the initial weights
        torch.save(model.state_dict(), args.save)
    # load the best saved model and report it
    with open(args.save, "rb") as f:
        model.load_state_dict(torch.load(f))
    history["best_val_loss"] = evaluate(model, val_loader, 2, device)
    history["sample"] = sample(model, vocab, "It was", 40, args.temperature, device)
    print(history["sample"])
    return history


if __name__ == "__main__":
    main()
