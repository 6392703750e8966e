"""MNIST-style CNN classifier, after the classic PyTorch MNIST example.

The data is a small synthetic stand-in for MNIST (16x16 grey images of ten noisy class
templates, made with NumPy from a fixed seed) so that a few steps run in seconds.

    python mnist_cnn.py --epochs 2
"""

import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(64 * 6 * 6, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def synthetic_mnist(n_train, n_test, seed=1234):
    """Ten fixed random 16x16 templates; each image is its class template plus noise."""
    rng = np.random.default_rng(seed)
    templates = rng.standard_normal((10, 1, 16, 16)).astype(np.float32)

    def make(n):
        labels = rng.integers(0, 10, size=n)
        noise = rng.standard_normal((n, 1, 16, 16)).astype(np.float32)
        images = templates[labels] + 1.5 * noise
        # normalize like transforms.Normalize((0.1307,), (0.3081,)) would
        images = (images - images.mean()) / images.std()
        return torch.from_numpy(images.astype(np.float32)), torch.from_numpy(labels).long()

    return TensorDataset(*make(n_train)), TensorDataset(*make(n_test))


def train(args, model, device, train_loader, optimizer, epoch, losses):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        if args.max_steps is not None and len(losses) >= args.max_steps:
            break
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if batch_idx % args.log_interval == 0:
            done = batch_idx * len(data)
            percent = 100.0 * batch_idx / len(train_loader)
            print(
                f"Train Epoch: {epoch} [{done}/{len(train_loader.dataset)} ({percent:.0f}%)]"
                f"\tLoss: {loss.item():.6f}"
            )


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()

    test_loss /= len(test_loader.dataset)
    accuracy = 100.0 * correct / len(test_loader.dataset)
    n = len(test_loader.dataset)
    print(f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{n} ({accuracy:.0f}%)\n")
    return test_loss, accuracy


def main(argv=None):
    parser = argparse.ArgumentParser(description="PyTorch MNIST Example")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--test-batch-size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--no-cuda", action="store_true", default=False)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--max-steps", type=int, default=None, help="stop after this many batches")
    parser.add_argument("--n-train", type=int, default=1024)
    parser.add_argument("--n-test", type=int, default=256)
    parser.add_argument("--init-state", default=None, help="start from these weights")
    parser.add_argument("--evaluate", action="store_true", help="only evaluate --init-state")
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(argv)

    use_cuda = not args.no_cuda and torch.cuda.is_available()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if use_cuda else "cpu")

    train_kwargs = {"batch_size": args.batch_size, "shuffle": True}
    test_kwargs = {"batch_size": args.test_batch_size}
    if use_cuda:
        cuda_kwargs = {"num_workers": 1, "pin_memory": True}
        train_kwargs.update(cuda_kwargs)
        test_kwargs.update(cuda_kwargs)

    dataset1, dataset2 = synthetic_mnist(args.n_train, args.n_test)
    train_loader = DataLoader(dataset1, **train_kwargs)
    test_loader = DataLoader(dataset2, **test_kwargs)

    model = Net().to(device)
    if args.init_state:
        model.load_state_dict(torch.load(args.init_state, map_location=device))
    history = {"train_loss": [], "test_loss": [], "test_accuracy": []}
    if args.evaluate:
        test_loss, accuracy = test(model, device, test_loader)
        history["test_loss"].append(test_loss)
        history["test_accuracy"].append(accuracy)
        return history

    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch, history["train_loss"])
        test_loss, accuracy = test(model, device, test_loader)
        history["test_loss"].append(test_loss)
        history["test_accuracy"].append(accuracy)
        scheduler.step()

    path = os.path.join(args.save_dir, "mnist_cnn.pt")
    torch.save(model.state_dict(), path)

    # reload the saved weights into a fresh model: the checkpoint must reproduce the results
    reloaded = Net().to(device)
    reloaded.load_state_dict(torch.load(path, map_location=device))
    history["reloaded_test_loss"], _ = test(reloaded, device, test_loader)
    return history


if __name__ == "__main__":
    main()
