"""A small U-Net for binary segmentation (in the style of the popular Pytorch-UNet repository),
on synthetic images.

Each 32x32 image holds a few ellipses and rectangles over a noisy, shaded background; the mask
marks the ellipses only, so the model must tell the shapes apart. The data is made with NumPy
from a fixed seed. The loss is BCE-with-logits plus soft Dice; the metrics are per-pixel
accuracy, Dice and IoU of the thresholded prediction.

    python unet_segmentation.py --epochs 10
"""

import argparse
import logging
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader, Dataset


def make_shapes(n, size=32, seed=0):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    images = np.zeros((n, 3, size, size), dtype=np.float32)
    masks = np.zeros((n, 1, size, size), dtype=np.float32)
    for i in range(n):
        gy, gx = rng.uniform(-0.3, 0.3, size=2)
        background = 0.3 + gy * (yy / size - 0.5) + gx * (xx / size - 0.5)
        img = np.repeat(background[None], 3, axis=0)
        for _ in range(rng.integers(2, 5)):
            cy, cx = rng.uniform(4, size - 4, size=2)
            ry, rx = rng.uniform(2.5, 6, size=2)
            color = rng.uniform(0.4, 1.0, size=3).astype(np.float32)
            if rng.random() < 0.5:
                shape = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0
                masks[i, 0][shape] = 1.0
            else:
                shape = (np.abs(yy - cy) <= ry) & (np.abs(xx - cx) <= rx)
                masks[i, 0][shape] = 0.0
            img[:, shape] = color[:, None]
        images[i] = img + 0.05 * rng.standard_normal(img.shape)
    return images, masks


class ShapesDataset(Dataset):
    def __init__(self, images, masks, augment=False):
        self.images = torch.from_numpy(images)
        self.masks = torch.from_numpy(masks)
        self.augment = augment

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        image, mask = self.images[idx], self.masks[idx]
        if self.augment and torch.rand(1).item() < 0.5:
            image, mask = image.flip(-1), mask.flip(-1)
        return {"image": image, "mask": mask}


class DoubleConv(nn.Module):
    """(convolution => [BN] => ReLU) * 2"""

    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    """Downscaling with maxpool then double conv"""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    """Upscaling then double conv"""

    def __init__(self, in_channels, out_channels, bilinear=True):
        super().__init__()
        # if bilinear, use the normal convolutions to reduce the number of channels
        self.bilinear = bilinear
        if bilinear:
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        if self.bilinear:
            x1 = F.interpolate(x1, scale_factor=2, mode="bilinear", align_corners=False)
        else:
            x1 = self.up(x1)
        # input is CHW
        diffY = x2.size()[2] - x1.size()[2]
        diffX = x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, base=8, bilinear=True):
        super().__init__()
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.bilinear = bilinear
        factor = 2 if bilinear else 1
        self.inc = DoubleConv(n_channels, base)
        self.down1 = Down(base, base * 2)
        self.down2 = Down(base * 2, base * 4 // factor)
        self.up1 = Up(base * 4, base * 2 // factor, bilinear)
        self.up2 = Up(base * 2, base, bilinear)
        self.outc = nn.Conv2d(base, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3, x2)
        x = self.up2(x, x1)
        return self.outc(x)


def init_weights(m):
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)


def dice_coeff(input, target, epsilon=1e-6):
    """Average Dice coefficient over the batch; input and target are (N, 1, H, W)."""
    inter = 2 * (input * target).sum(dim=(-1, -2, -3))
    sets_sum = input.sum(dim=(-1, -2, -3)) + target.sum(dim=(-1, -2, -3))
    sets_sum = torch.where(sets_sum == 0, inter, sets_sum)
    dice = (inter + epsilon) / (sets_sum + epsilon)
    return dice.mean()


def dice_loss(input, target):
    return 1 - dice_coeff(input, target)


@torch.inference_mode()
def evaluate(net, dataloader, criterion, device):
    net.eval()
    num_batches = len(dataloader)
    loss_sum, dice_sum, acc_sum, iou_sum = 0.0, 0.0, 0.0, 0.0
    for batch in dataloader:
        image, mask_true = batch["image"], batch["mask"]
        image = image.to(device=device, dtype=torch.float32)
        mask_true = mask_true.to(device=device, dtype=torch.float32)
        mask_logits = net(image)
        probs = torch.sigmoid(mask_logits)
        loss = criterion(mask_logits, mask_true) + dice_loss(probs, mask_true)
        loss_sum += loss.item()
        mask_pred = (probs > 0.5).float()
        dice_sum += dice_coeff(mask_pred, mask_true).item()
        acc_sum += (mask_pred == mask_true).float().mean().item()
        inter = (mask_pred * mask_true).sum()
        union = torch.clamp(mask_pred + mask_true, max=1).sum()
        iou_sum += (inter / union.clamp(min=1)).item()
    net.train()
    return {
        "loss": loss_sum / num_batches,
        "dice": dice_sum / num_batches,
        "accuracy": acc_sum / num_batches,
        "iou": iou_sum / num_batches,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description="Train the UNet on synthetic shapes")
    parser.add_argument("--epochs", "-e", type=int, default=5)
    parser.add_argument("--batch-size", "-b", type=int, default=16)
    parser.add_argument("--learning-rate", "-l", type=float, default=3e-3)
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--base", type=int, default=8, help="channels of the first level")
    parser.add_argument("--amp", action="store_true", default=False, help="mixed precision")
    parser.add_argument("--bilinear", action="store_true", default=True)
    parser.add_argument("--transposed", dest="bilinear", action="store_false")
    parser.add_argument("--n-images", type=int, default=480)
    parser.add_argument("--val-percent", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--load", "-f", default=None, help="load the model from a .pth file")
    parser.add_argument("--evaluate", action="store_true")
    parser.add_argument("--dir-checkpoint", default="checkpoints")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    images, masks = make_shapes(args.n_images, seed=3)
    n_val = int(len(images) * args.val_percent / 100)
    # a fixed split, the same whichever library and seed run the program
    perm = np.random.default_rng(0).permutation(len(images))
    train_idx, val_idx = perm[n_val:], perm[:n_val]
    train_set = ShapesDataset(images[train_idx], masks[train_idx], augment=True)
    val_set = ShapesDataset(images[val_idx], masks[val_idx])
    loader_args = dict(batch_size=args.batch_size, num_workers=0, pin_memory=False)
    train_loader = DataLoader(train_set, shuffle=True, **loader_args)
    val_loader = DataLoader(val_set, shuffle=False, drop_last=False, **loader_args)

    model = UNet(n_channels=3, n_classes=1, base=args.base, bilinear=args.bilinear)
    model.apply(init_weights)
    model = model.to(device=device, memory_format=torch.channels_last)
    if args.load:
        state_dict = torch.load(args.load, map_location=device)
        model.load_state_dict(state_dict)
        logging.info(f"Model loaded from {args.load}")

    criterion = nn.BCEWithLogitsLoss()
    history = {"train_loss": [], "val_loss": [], "val_dice": [], "val_accuracy": [], "val_iou": []}

    def record(scores):
        for key in ("loss", "dice", "accuracy", "iou"):
            history[f"val_{key}"].append(scores[key])

    if args.evaluate:
        record(evaluate(model, val_loader, criterion, device))
        return history

    # no weight decay on BatchNorm weights and biases
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    optimizer = optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=args.learning_rate,
    )
    scheduler = optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=2, T_mult=2)
    grad_scaler = torch.amp.GradScaler(device.type, enabled=args.amp)
    os.makedirs(args.dir_checkpoint, exist_ok=True)
    global_step = 0
    for epoch in range(1, args.epochs + 1):
        model.train()
        for i, batch in enumerate(train_loader):
            images_b, true_masks = batch["image"], batch["mask"]
            images_b = images_b.to(
                device=device, dtype=torch.float32, memory_format=torch.channels_last
            )
            true_masks = true_masks.to(device=device, dtype=torch.float32)

            with torch.autocast(device.type, enabled=args.amp):
                masks_pred = model(images_b)
                loss = criterion(masks_pred, true_masks)
                loss = loss + dice_loss(torch.sigmoid(masks_pred), true_masks)

            optimizer.zero_grad(set_to_none=True)
            grad_scaler.scale(loss).backward()
            grad_scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            grad_scaler.step(optimizer)
            grad_scaler.update()
            scheduler.step(epoch - 1 + i / len(train_loader))
            global_step += 1
            history["train_loss"].append(loss.item())

        scores = evaluate(model, val_loader, criterion, device)
        record(scores)
        logging.info(
            f"epoch {epoch} step {global_step}: val loss {scores['loss']:.4f} dice "
            f"{scores['dice']:.4f} acc {scores['accuracy']:.4f} iou {scores['iou']:.4f}"
        )
        state_dict = model.state_dict()
        torch.save(state_dict, os.path.join(args.dir_checkpoint, f"checkpoint_epoch{epoch}.pth"))
        logging.info(f"Checkpoint {epoch} saved!")

    path = os.path.join(args.dir_checkpoint, "model.pth")
    torch.save(model.state_dict(), path)
    reloaded = UNet(n_channels=3, n_classes=1, base=args.base, bilinear=args.bilinear).to(device)
    reloaded.load_state_dict(torch.load(path, map_location=device))
    history["reloaded_val_loss"] = evaluate(reloaded, val_loader, criterion, device)["loss"]
    return history


if __name__ == "__main__":
    main()
