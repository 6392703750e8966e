"""Convolutional variational autoencoder (after the PyTorch VAE example), on small synthetic
images.

The images are 16x16 "sprites": a bright square or disc at a random position and size on a dark
background, made with NumPy from a fixed seed, with values in [0, 1]. The decoder outputs
logits and the reconstruction term is binary cross-entropy with logits. After training, the
program decodes samples from the prior and saves them as one image grid (a PGM file, no
torchvision needed).

    python vae.py --epochs 10
"""

import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


def make_sprites(n, size=16, seed=0):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size]
    images = np.zeros((n, 1, size, size), dtype=np.float32)
    for i in range(n):
        r = rng.uniform(2.0, 4.5)
        cy, cx = rng.uniform(r, size - r, size=2)
        if rng.random() < 0.5:
            shape = (np.abs(yy - cy) <= r) & (np.abs(xx - cx) <= r)
        else:
            shape = (yy - cy) ** 2 + (xx - cx) ** 2 <= r**2
        images[i, 0] = shape * rng.uniform(0.7, 1.0)
    return images


class Sprites(Dataset):
    def __init__(self, images):
        self.images = torch.from_numpy(images)

    def __len__(self):
        return self.images.size(0)

    def __getitem__(self, idx):
        return self.images[idx]


class VAE(nn.Module):
    def __init__(self, latent_dim=8, width=16):
        super().__init__()
        self.latent_dim = latent_dim
        self.encoder = nn.Sequential(
            nn.Conv2d(1, width, 4, stride=2, padding=1),  # 8x8
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 4, stride=2, padding=1),  # 4x4
            nn.ReLU(),
            nn.Flatten(),
        )
        self.fc_mu = nn.Linear(2 * width * 16, latent_dim)
        self.fc_logvar = nn.Linear(2 * width * 16, latent_dim)
        self.fc_dec = nn.Linear(latent_dim, 2 * width * 16)
        self.decoder = nn.Sequential(
            nn.Unflatten(1, (2 * width, 4, 4)),
            nn.ConvTranspose2d(2 * width, width, 4, stride=2, padding=1),  # 8x8
            nn.ReLU(),
            nn.ConvTranspose2d(width, 1, 4, stride=2, padding=1),  # 16x16, logits
        )

    def encode(self, x):
        h = self.encoder(x)
        return self.fc_mu(h), self.fc_logvar(h)

    def reparameterize(self, mu, logvar):
        if self.training:
            std = torch.exp(0.5 * logvar)
            eps = torch.randn_like(std)
            return mu + eps * std
        return mu

    def decode(self, z):
        return self.decoder(F.relu(self.fc_dec(z)))

    def forward(self, x):
        mu, logvar = self.encode(x)
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_logits, x, mu, logvar, beta=1.0):
    """Negative ELBO summed over the batch: reconstruction BCE + beta * KL(q(z|x) || N(0, I))."""
    bce = F.binary_cross_entropy_with_logits(recon_logits, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + beta * kld, bce, kld


def evaluate(model, loader, device):
    model.eval()
    total, total_kld, n = 0.0, 0.0, 0
    with torch.no_grad():
        for x in loader:
            x = x.to(device)
            recon, mu, logvar = model(x)
            loss, _, kld = loss_function(recon, x, mu, logvar)
            total += loss.item()
            total_kld += kld.item()
            n += x.size(0)
    return total / n, total_kld / n


def make_grid(images, nrow=8, padding=1):
    """(N, 1, H, W) in [0, 1] -> one (rows*(H+p)+p, nrow*(W+p)+p) image, like torchvision's."""
    n, _, h, w = images.shape
    ncol = min(nrow, n)
    nrows = (n + ncol - 1) // ncol
    grid = torch.ones(nrows * (h + padding) + padding, ncol * (w + padding) + padding)
    for k in range(n):
        r, c = divmod(k, ncol)
        top, left = padding + r * (h + padding), padding + c * (w + padding)
        grid[top : top + h, left : left + w] = images[k, 0]
    return grid


def save_pgm(grid, path):
    pixels = (grid.clamp(0, 1) * 255).round().to(torch.uint8).cpu().numpy()
    with open(path, "wb") as f:
        f.write(f"P5 {pixels.shape[1]} {pixels.shape[0]} 255\n".encode())
        f.write(pixels.tobytes())


def main(argv=None):
    parser = argparse.ArgumentParser(description="VAE on synthetic sprites")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--latent-dim", type=int, default=8)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--n-train", type=int, default=2048)
    parser.add_argument("--n-test", type=int, default=256)
    parser.add_argument("--n-samples", type=int, default=32)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--init-state", default=None, help="start from this checkpoint")
    parser.add_argument("--evaluate", action="store_true", help="only evaluate --init-state")
    parser.add_argument("--results-dir", default="results")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_set = Sprites(make_sprites(args.n_train, seed=10))
    test_set = Sprites(make_sprites(args.n_test, seed=11))
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=128, shuffle=False)

    model = VAE(args.latent_dim, args.width).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.95)
    if args.init_state:
        checkpoint = torch.load(args.init_state, map_location=device)
        model.load_state_dict(checkpoint["model"])
        print(f"loaded {args.init_state} (epoch {checkpoint['epoch']})")

    history = {"train_loss": [], "test_loss": [], "test_kld": []}
    if args.evaluate:
        test_loss, test_kld = evaluate(model, test_loader, device)
        history["test_loss"].append(test_loss)
        history["test_kld"].append(test_kld)
        return history

    os.makedirs(args.results_dir, exist_ok=True)
    for epoch in range(1, args.epochs + 1):
        model.train()
        for batch_idx, x in enumerate(train_loader):
            x = x.to(device)
            optimizer.zero_grad()
            recon, mu, logvar = model(x)
            loss, bce, kld = loss_function(recon, x, mu, logvar)
            (loss / x.size(0)).backward()
            optimizer.step()
            history["train_loss"].append(loss.item() / x.size(0))
            if batch_idx % args.log_interval == 0:
                print(
                    f"epoch {epoch} [{batch_idx * len(x)}/{len(train_loader.dataset)}] "
                    f"loss {loss.item() / len(x):.3f} (bce {bce.item() / len(x):.3f}, "
                    f"kld {kld.item() / len(x):.3f})"
                )
        scheduler.step()
        test_loss, test_kld = evaluate(model, test_loader, device)
        history["test_loss"].append(test_loss)
        history["test_kld"].append(test_kld)
        print(f"====> epoch {epoch} test loss {test_loss:.4f} (kld {test_kld:.4f})")

        with torch.no_grad():
            z = torch.randn(args.n_samples, args.latent_dim, device=device)
            samples = torch.sigmoid(model.decode(z))
            save_pgm(
                make_grid(samples.cpu()), os.path.join(args.results_dir, f"sample_{epoch}.pgm")
            )

    path = os.path.join(args.results_dir, "vae.pt")
    torch.save({"epoch": args.epochs, "model": model.state_dict()}, path)

    reloaded = VAE(args.latent_dim, args.width).to(device)
    reloaded.load_state_dict(torch.load(path, map_location=device)["model"])
    history["reloaded_test_loss"], _ = evaluate(reloaded, test_loader, device)
    reloaded.eval()
    with torch.no_grad():
        samples = torch.sigmoid(reloaded.decode(torch.randn(args.n_samples, args.latent_dim)))
        # reconstructions of a few random test images next to the originals
        idx = torch.randperm(len(test_set))[:8]
        originals = torch.stack([test_set[int(i)] for i in idx]).to(device)
        recon, _, _ = reloaded(originals)
        pairs = torch.cat([originals, torch.sigmoid(recon)])
    save_pgm(make_grid(samples.cpu()), os.path.join(args.results_dir, "samples.pgm"))
    save_pgm(make_grid(pairs.detach().cpu()), os.path.join(args.results_dir, "reconstructions.pgm"))
    history["sample_mean"] = samples.mean().item()
    return history


if __name__ == "__main__":
    main()
