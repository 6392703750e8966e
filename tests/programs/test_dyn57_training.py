"""torch.compile'd training with shapes that vary between calls (dyn57), run on PyTorch (its
eager backend) and on ember (automatic dynamic shapes): a CNN on images of several sizes
through adaptive pooling, then evaluated under no_grad; a DataLoader's smaller last batch over
epochs through ``x.view(x.size(0), -1)``; a compiled train step (backward and optimizer step)
on batches of two sizes. Losses and parameters agree, and the traces stay few: the first
shape's, then one symbolic trace per pattern of varying dimensions, never one per size."""

import numpy as np

from .harness import check_program

# ruff: noqa: N806


def _compile(torch, ctx, model):
    return torch.compile(model, backend="eager") if ctx.is_torch else torch.compile(model)


def _traces(compiled) -> tuple[int, int, bool]:
    d = getattr(compiled, "__dict__", {})
    c = d["_compiled"] if "_compiled" in d else compiled._compiled
    auto = c.automatic
    return (
        c.function.stats.traces,
        sum(f.stats.traces for f in auto.functions.values()),
        auto.failed,
    )


def cnn_images_of_several_sizes(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(
        nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2, padding=1),
            nn.GroupNorm(4, 16),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d((1, 1)),
            nn.Flatten(),
            nn.Linear(16, 5),
        )
    )
    compiled = _compile(torch, ctx, model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(1)
    losses = []
    for H, W in [(32, 32), (28, 36), (40, 24), (32, 32), (18, 22)]:
        x = ctx.t(rng.standard_normal((4, 3, H, W)).astype(np.float32))
        y = ctx.t(rng.integers(0, 5, 4))
        loss = F.cross_entropy(compiled(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    model.eval()
    with torch.no_grad():
        evaluated = [
            compiled(ctx.t(rng.standard_normal((2, 3, s, s + 4)).astype(np.float32)))
            for s in (20, 30, 44)
        ]
    if not ctx.is_torch:
        # the first shape; H and W symbolic in training, then in eval mode (batch too)
        assert _traces(compiled) == (1, 2, False), _traces(compiled)
    return losses, evaluated, model[1].running_mean, [p.detach() for p in model.parameters()]


def loader_last_batch_and_train_step(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.fc = nn.Linear(4 * 8 * 8, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv(x)), 2)
            return self.fc(x.view(x.size(0), -1))

    model = ctx.init(Net())
    rng = np.random.default_rng(2)
    data = torch.utils.data.TensorDataset(
        ctx.t(rng.standard_normal((50, 1, 16, 16)).astype(np.float32)),
        ctx.t(rng.integers(0, 10, 50)),
    )
    loader = torch.utils.data.DataLoader(data, batch_size=16, drop_last=False)
    compiled = _compile(torch, ctx, model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):  # (16, 16, 16, then 2 each epoch)
        for xb, yb in loader:
            loss = F.cross_entropy(compiled(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss)

    head = ctx.init(nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.Tanh()), "head")
    head_opt = torch.optim.Adam(head.parameters(), lr=1e-2)

    def train_step(x, y):
        head_opt.zero_grad()
        loss = F.mse_loss(head(x).sum(-1), y)
        loss.backward()
        head_opt.step()
        return loss

    step = _compile(torch, ctx, train_step)
    for n in [32, 32, 20, 32, 20, 7]:
        x = ctx.t(rng.standard_normal((n, 6)).astype(np.float32))
        losses.append(step(x, ctx.t(rng.standard_normal(n).astype(np.float32))))
    if not ctx.is_torch:
        assert _traces(compiled) == (1, 1, False), _traces(compiled)
        assert _traces(step)[1:] == (1, False), _traces(step)
    return losses, [p.detach() for p in model.parameters()], [p.detach() for p in head.parameters()]


def test_cnn_images_of_several_sizes():
    check_program(cnn_images_of_several_sizes)


def test_loader_last_batch_and_train_step():
    check_program(loader_last_batch_and_train_step)
