"""Variable-length sequence classification: a bidirectional GRU over packed sequences next to a
Transformer encoder with a padding mask, on synthetic token sequences.

The label of a sequence is whether it holds more "open" tokens than "close" tokens, so both
order-free counting (the Transformer) and running state (the GRU) help. Batches are padded by a
collate function; the GRU sees them packed, the encoder sees a key padding mask.

    python seq_classifier.py --epochs 5
"""

import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD, OPEN, CLOSE = 0, 1, 2


class ToySequences(Dataset):
    def __init__(self, n, vocab_size=20, min_len=4, max_len=24, seed=0):
        rng = np.random.default_rng(seed)
        self.samples = []
        for _ in range(n):
            length = int(rng.integers(min_len, max_len + 1))
            tokens = rng.integers(1, vocab_size, size=length)
            label = int((tokens == OPEN).sum() > (tokens == CLOSE).sum())
            self.samples.append((tokens, label))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        tokens, label = self.samples[i]
        return torch.as_tensor(tokens, dtype=torch.long), label


def collate_batch(batch):
    sequences, labels = zip(*batch)
    lengths = torch.tensor([len(s) for s in sequences])
    padded = pad_sequence(sequences, batch_first=True, padding_value=PAD)
    return padded, lengths, torch.tensor(labels)


class SequenceClassifier(nn.Module):
    def __init__(self, vocab_size, d_model=32, nhead=4, num_layers=1, dropout=0.1, max_len=64):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.pos = nn.Parameter(torch.zeros(1, max_len, d_model))
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=2 * d_model, dropout=dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers)
        self.gru = nn.GRU(d_model, d_model // 2, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(2 * d_model, 2)
        nn.init.normal_(self.pos, std=0.02)

    def forward(self, tokens, lengths):
        x = self.embedding(tokens)
        pad_mask = tokens == PAD  # True where a position is padding
        encoded = self.encoder(x + self.pos[:, : tokens.size(1)], src_key_padding_mask=pad_mask)
        keep = (~pad_mask).unsqueeze(-1).float()
        pooled = (encoded * keep).sum(dim=1) / keep.sum(dim=1)

        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, h_n = self.gru(packed)
        out, _ = pad_packed_sequence(out, batch_first=True)
        last = torch.cat([h_n[-2], h_n[-1]], dim=1)  # final forward and backward states

        features = torch.cat([pooled, last[:, : pooled.size(1)]], dim=1)
        return self.head(self.dropout(features))


def evaluate(model, loader, device):
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for tokens, lengths, labels in loader:
            tokens, labels = tokens.to(device), labels.to(device)
            logits = model(tokens, lengths)
            total_loss += F.cross_entropy(logits, labels, reduction="sum").item()
            correct += (logits.argmax(dim=1) == labels).sum().item()
            count += labels.size(0)
    return total_loss / count, correct / count


def main(argv=None):
    parser = argparse.ArgumentParser(description="sequence classification")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--gamma", type=float, default=0.9)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--clip-value", type=float, default=0.5)
    parser.add_argument("--n-train", type=int, default=512)
    parser.add_argument("--n-test", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init-state", default=None)
    parser.add_argument("--evaluate", action="store_true")
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_set = ToySequences(args.n_train, seed=1)
    test_set = ToySequences(args.n_test, seed=2)
    train_loader = DataLoader(
        train_set, batch_size=args.batch_size, shuffle=True, collate_fn=collate_batch
    )
    test_loader = DataLoader(test_set, batch_size=64, collate_fn=collate_batch)

    model = SequenceClassifier(vocab_size=20, dropout=args.dropout).to(device)
    if args.init_state:
        model.load_state_dict(torch.load(args.init_state, map_location=device))
    history = {"train_loss": [], "test_loss": [], "test_acc": []}
    if args.evaluate:
        loss, acc = evaluate(model, test_loader, device)
        history["test_loss"].append(loss)
        history["test_acc"].append(acc)
        return history

    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=args.gamma)
    for epoch in range(args.epochs):
        model.train()
        for tokens, lengths, labels in train_loader:
            tokens, labels = tokens.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(tokens, lengths), labels)
            loss.backward()
            torch.nn.utils.clip_grad_value_(model.parameters(), args.clip_value)
            optimizer.step()
            history["train_loss"].append(loss.item())
        scheduler.step()
        loss, acc = evaluate(model, test_loader, device)
        history["test_loss"].append(loss)
        history["test_acc"].append(acc)
        print(f"epoch {epoch}: test loss {loss:.4f} accuracy {acc:.3f}")

    path = os.path.join(args.save_dir, "seq_classifier.pt")
    torch.save(model.state_dict(), path)
    model.load_state_dict(torch.load(path, map_location=device))
    history["reloaded_test_loss"], _ = evaluate(model, test_loader, device)
    return history


if __name__ == "__main__":
    main()
