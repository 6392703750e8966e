"""MLP regression on tabular data with a custom Dataset, worker processes, early stopping and
resumable checkpoints (model, optimizer, scheduler and epoch in one dict).

The data is synthetic: a smooth nonlinear function of 8 features plus noise, made with NumPy
from a fixed seed.

    python mlp_regression.py --epochs 20
    python mlp_regression.py --epochs 30 --resume checkpoints/last.pt
"""

import argparse
import os
import random

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


def make_data(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=(n, 8)).astype(np.float32)
    y = np.sin(x[:, 0]) * x[:, 1] + 0.5 * x[:, 2] ** 2 - x[:, 3] * x[:, 4] + 0.3 * x[:, 5]
    y = y + 0.1 * rng.standard_normal(n)
    return x, y.astype(np.float32)


class TabularDataset(Dataset):
    def __init__(self, features, targets, mean=None, std=None):
        self.mean = features.mean(axis=0) if mean is None else mean
        self.std = features.std(axis=0) if std is None else std
        self.features = (features - self.mean) / self.std
        self.targets = targets

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, idx):
        x = torch.from_numpy(self.features[idx])
        y = torch.tensor([self.targets[idx]], dtype=torch.float32)
        return x, y


class MLP(nn.Module):
    def __init__(self, in_features, hidden=64, depth=3):
        super().__init__()
        layers = []
        width = in_features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.LayerNorm(hidden), nn.SiLU()]
            width = hidden
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def seed_worker(worker_id):
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def evaluate(model, loader, criterion, device):
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            total += criterion(model(x), y).item() * x.size(0)
            count += x.size(0)
    return total / count


def save_checkpoint(path, model, optimizer, scheduler, epoch, best_val, history):
    torch.save(
        {
            "epoch": epoch,
            "model_state_dict": model.state_dict(),
            "optimizer_state_dict": optimizer.state_dict(),
            "scheduler_state_dict": scheduler.state_dict(),
            "best_val": best_val,
            "history": history,
        },
        path,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description="MLP regression")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--patience", type=int, default=5, help="early-stopping patience")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--n-train", type=int, default=512)
    parser.add_argument("--n-val", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume", default=None, help="checkpoint to resume from")
    parser.add_argument("--evaluate", action="store_true", help="evaluate --resume and exit")
    parser.add_argument("--checkpoint-dir", default="checkpoints")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    x_train, y_train = make_data(args.n_train, seed=1)
    x_val, y_val = make_data(args.n_val, seed=2)
    train_set = TabularDataset(x_train, y_train)
    val_set = TabularDataset(x_val, y_val, mean=train_set.mean, std=train_set.std)

    g = torch.Generator()
    g.manual_seed(args.seed)
    train_loader = DataLoader(
        train_set,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        persistent_workers=args.workers > 0,
        worker_init_fn=seed_worker,
        generator=g,
    )
    val_loader = DataLoader(val_set, batch_size=128, shuffle=False)

    model = MLP(x_train.shape[1]).to(device)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=1e-5)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="min", factor=0.5, patience=2
    )

    start_epoch, best_val, bad_epochs = 0, float("inf"), 0
    history = {"train_loss": [], "val_loss": [], "lr": []}
    if args.resume:
        checkpoint = torch.load(args.resume, map_location=device)
        model.load_state_dict(checkpoint["model_state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
        scheduler.load_state_dict(checkpoint["scheduler_state_dict"])
        start_epoch = checkpoint["epoch"] + 1
        best_val = checkpoint["best_val"]
        history = checkpoint["history"]
        print(f"resumed from {args.resume} at epoch {start_epoch}")
    if args.evaluate:
        return {
            "val_loss": [evaluate(model, val_loader, criterion, device)],
            "start_epoch": start_epoch,
        }

    os.makedirs(args.checkpoint_dir, exist_ok=True)
    last_path = os.path.join(args.checkpoint_dir, "last.pt")
    best_path = os.path.join(args.checkpoint_dir, "best.pt")
    for epoch in range(start_epoch, args.epochs):
        model.train()
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            history["train_loss"].append(loss.item())

        val_loss = evaluate(model, val_loader, criterion, device)
        scheduler.step(val_loss)
        history["val_loss"].append(val_loss)
        history["lr"].append(optimizer.param_groups[0]["lr"])
        print(f"epoch {epoch}: val mse {val_loss:.4f} lr {optimizer.param_groups[0]['lr']:.2e}")

        if val_loss < best_val:
            best_val, bad_epochs = val_loss, 0
            torch.save(model.state_dict(), best_path)
        else:
            bad_epochs += 1
        save_checkpoint(last_path, model, optimizer, scheduler, epoch, best_val, history)
        if bad_epochs >= args.patience:
            print(f"early stopping at epoch {epoch}")
            break

    if not os.path.exists(last_path):  # no epoch ran: save the starting point
        save_checkpoint(last_path, model, optimizer, scheduler, start_epoch - 1, best_val, history)
    if os.path.exists(best_path):
        model.load_state_dict(torch.load(best_path, map_location=device))
    history["final_val_loss"] = evaluate(model, val_loader, criterion, device)
    history["start_epoch"] = start_epoch
    return history


if __name__ == "__main__":
    main()
