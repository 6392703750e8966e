"""DCGAN (after the PyTorch DCGAN example and tutorial), on small synthetic images.

The "real" images are 16x16 soft blobs: one or two Gaussian bumps at random places, scaled to
[-1, 1] like the tutorial's ``Normalize((0.5,), (0.5,))``, made with NumPy from a fixed seed.

Besides the usual losses, the program reports a simple sample-quality score computed on a fixed
noise batch: how far the generated images' per-pixel mean and standard deviation are from the
real test images' (squared distance). It falls as the generator learns the data's statistics.

    python dcgan.py --epochs 5
"""

import argparse
import os

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


def make_blobs(n, size=16, seed=0):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    images = np.zeros((n, 1, size, size), dtype=np.float32)
    for i in range(n):
        for _ in range(rng.integers(1, 3)):
            cy, cx = rng.uniform(3, size - 3, size=2)
            s = rng.uniform(1.5, 3.0)
            images[i, 0] += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
    images = np.clip(images, 0.0, 1.0)
    return images * 2.0 - 1.0


def weights_init(m):
    """Custom weights initialization called on netG and netD (from the DCGAN paper)."""
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


class Generator(nn.Module):
    def __init__(self, nz, ngf, nc=1):
        super().__init__()
        self.main = nn.Sequential(
            # input is Z, going into a convolution
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            # state size. (ngf*4) x 4 x 4
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            # state size. (ngf*2) x 8 x 8
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
            # state size. (nc) x 16 x 16
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self, ndf, nc=1):
        super().__init__()
        self.main = nn.Sequential(
            # input is (nc) x 16 x 16
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf) x 8 x 8
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf*2) x 4 x 4
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
            # logits: the loss is BCEWithLogitsLoss
        )

    def forward(self, input):
        return self.main(input).view(-1)


def sample_score(netG, fixed_noise, real_mean, real_std):
    """Squared distance of the fakes' per-pixel mean and std to the real images'.

    Like the DCGAN example's progress images, the fakes come from the generator in training
    mode (BatchNorm normalizes with the fixed batch's own statistics)."""
    with torch.no_grad():
        fake = netG(fixed_noise)
    mean_gap = (fake.mean(dim=0) - real_mean).pow(2).mean()
    std_gap = (fake.std(dim=0) - real_std).pow(2).mean()
    return (mean_gap + std_gap).item()


@torch.no_grad()
def evaluate(netD, netG, loader, fixed_noise, criterion, device):
    """Discriminator loss on the real test images and on fakes from the fixed noise."""
    netD.eval()
    netG.eval()
    real_loss, n = 0.0, 0
    for (real,) in loader:
        real = real.to(device)
        output = netD(real)
        real_loss += criterion(output, torch.ones_like(output)).item() * real.size(0)
        n += real.size(0)
    fake = netG(fixed_noise)
    output = netD(fake)
    fake_loss = criterion(output, torch.zeros_like(output)).item()
    netD.train()
    netG.train()
    return real_loss / n + fake_loss


def main(argv=None):
    parser = argparse.ArgumentParser(description="DCGAN on synthetic blobs")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--nz", type=int, default=16, help="size of the latent z vector")
    parser.add_argument("--ngf", type=int, default=16)
    parser.add_argument("--ndf", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.0002)
    parser.add_argument("--beta1", type=float, default=0.5)
    parser.add_argument("--n-train", type=int, default=1024)
    parser.add_argument("--n-test", type=int, default=256)
    parser.add_argument("--manual-seed", type=int, default=999)
    parser.add_argument("--init-from", default=None, help="checkpoint to start from")
    parser.add_argument("--evaluate", action="store_true", help="only evaluate --init-from")
    parser.add_argument("--outf", default=".", help="folder for checkpoints and samples")
    opt = parser.parse_args(argv)

    torch.manual_seed(opt.manual_seed)
    cudnn.benchmark = True
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")

    train_set = TensorDataset(torch.from_numpy(make_blobs(opt.n_train, seed=5)))
    test_images = torch.from_numpy(make_blobs(opt.n_test, seed=6))
    test_loader = DataLoader(TensorDataset(test_images), batch_size=128)
    dataloader = DataLoader(train_set, batch_size=opt.batch_size, shuffle=True, drop_last=True)
    real_mean = test_images.mean(dim=0).to(device)
    real_std = test_images.std(dim=0).to(device)

    netG = Generator(opt.nz, opt.ngf).to(device)
    netG.apply(weights_init)
    netD = Discriminator(opt.ndf).to(device)
    netD.apply(weights_init)
    fixed_noise = torch.randn(64, opt.nz, 1, 1, device=device)

    criterion = nn.BCEWithLogitsLoss()
    real_label, fake_label = 1.0, 0.0
    optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    start_epoch = 0
    if opt.init_from:
        checkpoint = torch.load(opt.init_from, map_location=device)
        netG.load_state_dict(checkpoint["netG"])
        netD.load_state_dict(checkpoint["netD"])
        fixed_noise = checkpoint["fixed_noise"].to(device)
        start_epoch = checkpoint["epoch"]

    history = {"train_loss": [], "loss_G": [], "eval_loss": [], "score": []}
    if opt.evaluate:
        history["eval_loss"].append(
            evaluate(netD, netG, test_loader, fixed_noise, criterion, device)
        )
        history["score"].append(sample_score(netG, fixed_noise, real_mean, real_std))
        return history

    os.makedirs(opt.outf, exist_ok=True)
    for epoch in range(start_epoch, start_epoch + opt.epochs):
        for i, (data,) in enumerate(dataloader):
            ############################
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            ###########################
            netD.zero_grad()
            real_cpu = data.to(device)
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
            output = netD(real_cpu)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = torch.sigmoid(output).mean().item()

            noise = torch.randn(batch_size, opt.nz, 1, 1, device=device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = torch.sigmoid(output).mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()

            ############################
            # (2) Update G network: maximize log(D(G(z)))
            ###########################
            netG.zero_grad()
            label.fill_(real_label)  # fake labels are real for generator cost
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = torch.sigmoid(output).mean().item()
            optimizerG.step()

            history["train_loss"].append(errD.item())
            history["loss_G"].append(errG.item())
            if i % 5 == 0:
                print(
                    f"[{epoch}/{start_epoch + opt.epochs}][{i}/{len(dataloader)}] "
                    f"Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} "
                    f"D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}"
                )

        history["eval_loss"].append(
            evaluate(netD, netG, test_loader, fixed_noise, criterion, device)
        )
        history["score"].append(sample_score(netG, fixed_noise, real_mean, real_std))
        print(
            f"epoch {epoch}: eval loss {history['eval_loss'][-1]:.4f} "
            f"score {history['score'][-1]:.4f}"
        )
        with torch.no_grad():
            fake = netG(fixed_noise).detach().cpu()
        np.save(os.path.join(opt.outf, f"fake_samples_epoch_{epoch:03d}.npy"), fake.numpy())

    path = os.path.join(opt.outf, "dcgan.pt")
    torch.save(
        {
            "epoch": start_epoch + opt.epochs,
            "netG": netG.state_dict(),
            "netD": netD.state_dict(),
            "optimizerG": optimizerG.state_dict(),
            "optimizerD": optimizerD.state_dict(),
            "fixed_noise": fixed_noise,
        },
        path,
    )

    checkpoint = torch.load(path, map_location=device)
    reloadedG = Generator(opt.nz, opt.ngf).to(device)
    reloadedG.load_state_dict(checkpoint["netG"])
    history["reloaded_score"] = sample_score(
        reloadedG, checkpoint["fixed_noise"], real_mean, real_std
    )
    return history


if __name__ == "__main__":
    main()
