"""A small ResNet for CIFAR-style 3-channel images, with augmentation in the Dataset.

Random crops (zero padding of 2) and horizontal flips are applied per image in
``__getitem__`` with tensor ops; the loss uses label smoothing; SGD with Nesterov momentum and
weight decay follows a one-cycle learning-rate schedule stepped every batch. The data is a small
synthetic stand-in for CIFAR-10 (images of ten noisy class templates).

    python resnet_cifar.py --epochs 2
"""

import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(
            in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False
        )
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes),
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        out = F.relu(out)
        return out


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10, width=16):
        super().__init__()
        self.in_planes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = self._make_layer(block, width, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, 2 * width, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, 4 * width, num_blocks[2], stride=2)
        self.linear = nn.Linear(4 * width * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1] * (num_blocks - 1)
        layers = []
        for stride in strides:
            layers.append(block(self.in_planes, planes, stride))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer1(out)
        out = self.layer2(out)
        out = self.layer3(out)
        out = F.adaptive_avg_pool2d(out, 1)
        out = out.view(out.size(0), -1)
        out = self.linear(out)
        return out


def ResNetMini(width=16):
    return ResNet(BasicBlock, [1, 1, 1], width=width)


MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


class SyntheticCIFAR(Dataset):
    """Uint8 images of ten smooth random class templates plus noise, like a tiny CIFAR-10."""

    def __init__(self, n, train, seed=0, size=16, padding=2):
        rng = np.random.default_rng(seed)
        templates = rng.uniform(0, 255, size=(10, 3, size // 4, size // 4))
        templates = templates.repeat(4, axis=2).repeat(4, axis=3)
        draw = np.random.default_rng(seed + (1 if train else 2))
        self.targets = draw.integers(0, 10, size=n)
        noise = draw.normal(0, 40, size=(n, 3, size, size))
        self.data = np.clip(templates[self.targets] + noise, 0, 255).astype(np.uint8)
        self.train = train
        self.padding = padding
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        img = torch.from_numpy(self.data[index]).float().div(255)
        if self.train:
            # RandomCrop(size, padding=2) and RandomHorizontalFlip(), by hand
            p = self.padding
            padded = F.pad(img, (p, p, p, p))
            i, j = torch.randint(0, 2 * p + 1, (2,)).tolist()
            img = padded[:, i : i + img.size(1), j : j + img.size(2)]
            if torch.rand(1).item() < 0.5:
                img = torch.flip(img, dims=[2])
        img = (img - self.mean) / self.std
        return img, int(self.targets[index])


def train(epoch, net, trainloader, criterion, optimizer, scheduler, device, args, losses):
    net.train()
    train_loss, correct, total = 0.0, 0, 0
    start = len(losses)
    for inputs, targets in trainloader:
        if args.max_steps is not None and len(losses) >= args.max_steps:
            break
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        scheduler.step()

        losses.append(loss.item())
        train_loss += loss.item()
        _, predicted = outputs.max(1)
        total += targets.size(0)
        correct += predicted.eq(targets).sum().item()
    if total:
        print(
            f"Epoch {epoch} | Loss: {train_loss / len(losses[start:]):.3f} | "
            f"Acc: {100.0 * correct / total:.3f}% ({correct}/{total})"
        )


def test(net, testloader, criterion, device):
    net.eval()
    test_loss, correct, total = 0.0, 0, 0
    with torch.no_grad():
        for inputs, targets in testloader:
            inputs, targets = inputs.to(device), targets.to(device)
            outputs = net(inputs)
            loss = criterion(outputs, targets)
            test_loss += loss.item() * targets.size(0)
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
    acc = 100.0 * correct / total
    print(f"Test | Loss: {test_loss / total:.4f} | Acc: {acc:.3f}% ({correct}/{total})")
    return test_loss / total, acc


def main(argv=None):
    parser = argparse.ArgumentParser(description="PyTorch CIFAR10 Training")
    parser.add_argument("--lr", default=0.1, type=float, help="peak learning rate")
    parser.add_argument("--epochs", default=5, type=int)
    parser.add_argument("--batch-size", default=32, type=int)
    parser.add_argument("--width", default=16, type=int)
    parser.add_argument("--image-size", default=32, type=int)
    parser.add_argument("--label-smoothing", default=0.1, type=float)
    parser.add_argument("--max-steps", default=None, type=int)
    parser.add_argument("--n-train", default=512, type=int)
    parser.add_argument("--n-test", default=128, type=int)
    parser.add_argument("--seed", default=0, type=int)
    parser.add_argument("--init-from", default=None, help="a checkpoint to start from")
    parser.add_argument("--evaluate", action="store_true")
    parser.add_argument("--checkpoint-dir", default="checkpoint")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    trainset = SyntheticCIFAR(args.n_train, train=True, size=args.image_size)
    testset = SyntheticCIFAR(args.n_test, train=False, size=args.image_size)
    trainloader = DataLoader(trainset, batch_size=args.batch_size, shuffle=True, drop_last=True)
    testloader = DataLoader(testset, batch_size=100, shuffle=False)

    net = ResNetMini(args.width).to(device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    if args.init_from:
        net.load_state_dict(torch.load(args.init_from, map_location=device)["net"])

    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    history = {"train_loss": [], "test_loss": [], "test_acc": []}
    if args.evaluate:
        loss, acc = test(net, testloader, criterion, device)
        history["test_loss"].append(loss)
        history["test_acc"].append(acc)
        return history

    optimizer = optim.SGD(
        net.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=5e-4
    )
    scheduler = optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, epochs=max(1, args.epochs), steps_per_epoch=len(trainloader)
    )

    os.makedirs(args.checkpoint_dir, exist_ok=True)
    path = os.path.join(args.checkpoint_dir, "ckpt.pth")
    best_acc = -1.0
    for epoch in range(args.epochs):
        train(
            epoch,
            net,
            trainloader,
            criterion,
            optimizer,
            scheduler,
            device,
            args,
            history["train_loss"],
        )
        loss, acc = test(net, testloader, criterion, device)
        history["test_loss"].append(loss)
        history["test_acc"].append(acc)
        if acc > best_acc:
            print("Saving..")
            torch.save({"net": net.state_dict(), "acc": acc, "epoch": epoch}, path)
            best_acc = acc

    if args.epochs == 0:
        torch.save({"net": net.state_dict(), "acc": None, "epoch": -1}, path)
    # the best checkpoint, reloaded
    checkpoint = torch.load(path, map_location=device)
    net.load_state_dict(checkpoint["net"])
    history["best_test_loss"], history["best_acc"] = test(net, testloader, criterion, device)
    return history


if __name__ == "__main__":
    main()
