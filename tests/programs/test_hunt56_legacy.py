"""Programs of hunt56 in the idioms of older repositories, each run on PyTorch and on ember:
a warmup scheduler subclassing ``torch.optim.lr_scheduler._LRScheduler`` (ember lacked the old
name, an AttributeError at the class statement), Variable, legacy tensor constructors,
``size_average``/``reduce`` arguments and deprecated functional names, a custom convolution
annotated with ``torch.nn.common_types`` (missing in ember), and ``default_collate`` imported
from ``torch.utils.data._utils.collate`` (missing too) with a type added to
``default_collate_fn_map``.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E501, UP008, E721, E731, C408, SIM108, B007


def legacy_warmup_scheduler(torch, ctx):
    """GradualWarmupScheduler as older repos write it: a torch.optim.lr_scheduler._LRScheduler
    subclass overriding get_lr and step, chaining to an after_scheduler (including
    ReduceLROnPlateau), with a custom closed-form poly scheduler."""
    ReduceLROnPlateau = torch.optim.lr_scheduler.ReduceLROnPlateau

    _LRScheduler = torch.optim.lr_scheduler._LRScheduler

    class GradualWarmupScheduler(_LRScheduler):
        def __init__(self, optimizer, multiplier, total_epoch, after_scheduler=None):
            self.multiplier = multiplier
            if self.multiplier < 1.0:
                raise ValueError("multiplier should be greater thant or equal to 1.")
            self.total_epoch = total_epoch
            self.after_scheduler = after_scheduler
            self.finished = False
            super(GradualWarmupScheduler, self).__init__(optimizer)

        def get_lr(self):
            if self.last_epoch > self.total_epoch:
                if self.after_scheduler:
                    if not self.finished:
                        self.after_scheduler.base_lrs = [
                            base_lr * self.multiplier for base_lr in self.base_lrs
                        ]
                        self.finished = True
                    return self.after_scheduler.get_last_lr()
                return [base_lr * self.multiplier for base_lr in self.base_lrs]
            if self.multiplier == 1.0:
                return [
                    base_lr * (float(self.last_epoch) / self.total_epoch)
                    for base_lr in self.base_lrs
                ]
            return [
                base_lr * ((self.multiplier - 1.0) * self.last_epoch / self.total_epoch + 1.0)
                for base_lr in self.base_lrs
            ]

        def step_ReduceLROnPlateau(self, metrics, epoch=None):
            if epoch is None:
                epoch = self.last_epoch + 1
            self.last_epoch = epoch if epoch != 0 else 1
            if self.last_epoch <= self.total_epoch:
                warmup_lr = [
                    base_lr * ((self.multiplier - 1.0) * self.last_epoch / self.total_epoch + 1.0)
                    for base_lr in self.base_lrs
                ]
                for param_group, lr in zip(self.optimizer.param_groups, warmup_lr):
                    param_group["lr"] = lr
            else:
                if epoch is None:
                    self.after_scheduler.step(metrics, None)
                else:
                    self.after_scheduler.step(metrics)

        def step(self, epoch=None, metrics=None):
            if type(self.after_scheduler) != ReduceLROnPlateau:
                if self.finished and self.after_scheduler:
                    if epoch is None:
                        self.after_scheduler.step(None)
                    else:
                        self.after_scheduler.step(epoch - self.total_epoch)
                    self._last_lr = self.after_scheduler.get_last_lr()
                else:
                    return super(GradualWarmupScheduler, self).step(epoch)
            else:
                self.step_ReduceLROnPlateau(metrics, epoch)

    class PolyLR(_LRScheduler):
        def __init__(self, optimizer, max_iters, power=0.9, last_epoch=-1, min_lr=1e-6):
            self.power = power
            self.max_iters = max_iters
            self.min_lr = min_lr
            super(PolyLR, self).__init__(optimizer, last_epoch)

        def get_lr(self):
            return [
                max(base_lr * (1 - self.last_epoch / self.max_iters) ** self.power, self.min_lr)
                for base_lr in self.base_lrs
            ]

    outs = [_LRScheduler.__name__, issubclass(_LRScheduler, torch.optim.lr_scheduler.LRScheduler)]
    for kind in ("cos", "plateau", "none"):
        p = torch.nn.Parameter(torch.ones(3))
        opt = torch.optim.SGD([p], lr=0.01, momentum=0.9)
        if kind == "cos":
            after = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=8)
        elif kind == "plateau":
            after = ReduceLROnPlateau(opt, patience=0)
        else:
            after = None
        sched = GradualWarmupScheduler(opt, multiplier=8, total_epoch=3, after_scheduler=after)
        trace = []
        for epoch in range(1, 10):
            opt.zero_grad()
            (p**2).sum().backward()
            opt.step()
            if kind == "plateau":
                sched.step(epoch, metrics=float(10 - min(epoch, 5)))
            else:
                sched.step()
            trace.append(opt.param_groups[0]["lr"])
        outs.append(trace)
        outs.append(isinstance(sched, torch.optim.lr_scheduler.LRScheduler))
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.Adam([p], lr=0.1)
    poly = PolyLR(opt, max_iters=10)
    trace = []
    for _ in range(5):
        opt.step()
        poly.step()
        trace.append(poly.get_last_lr()[0])
    outs.append(trace)
    outs.append(sorted(k for k in poly.state_dict() if not k.startswith("_")))
    return outs


def legacy_idioms(torch, ctx):
    """Pre-1.0 idioms still found in repositories: Variable, FloatTensor/LongTensor
    constructors, .data, .type(...), size_average/reduce loss arguments, F.sigmoid/F.tanh,
    F.upsample, nn.init without underscores, clip_grad_norm, torch.nn.modules.utils._pair
    and default_collate from torch.utils.data._utils.collate."""
    nn, F = torch.nn, torch.nn.functional
    Variable = torch.autograd.Variable
    _pair = torch.nn.modules.utils._pair
    rng = np.random.default_rng(0)

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(16, 12)
            self.fc21 = nn.Linear(12, 4)
            self.fc22 = nn.Linear(12, 4)
            self.fc3 = nn.Linear(4, 12)
            self.fc4 = nn.Linear(12, 16)

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar, eps):
            std = logvar.mul(0.5).exp_()
            return eps.mul(std).add_(mu)

        def decode(self, z):
            h3 = F.relu(self.fc3(z))
            return F.sigmoid(self.fc4(h3))

        def forward(self, x, eps):
            mu, logvar = self.encode(x.view(-1, 16))
            z = self.reparameterize(mu, logvar, eps)
            return self.decode(z), mu, logvar

    model = ctx.init(VAE())
    x = Variable(ctx.t(rng.random((6, 16)).astype(np.float32)))
    eps = Variable(ctx.t(rng.standard_normal((6, 4)).astype(np.float32)), requires_grad=False)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    outs = []
    for _ in range(2):
        opt.zero_grad()
        recon, mu, logvar = model(x, eps)
        BCE = F.binary_cross_entropy(recon, x.view(-1, 16), size_average=False)
        KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = BCE + KLD
        loss.backward()
        total = torch.nn.utils.clip_grad_norm(model.parameters(), 5.0)
        opt.step()
        outs += [loss.data.item(), loss.data, total]
    t = torch.FloatTensor(2, 3).zero_()
    outs.append(t)
    outs.append(torch.LongTensor([1, 2, 3]))
    outs.append(torch.FloatTensor([[1, 2], [3, 4]]).type(torch.LongTensor))
    outs.append(torch.ones(2).type(torch.DoubleTensor).dtype)
    outs.append(torch.ones(2).type("torch.IntTensor"))
    outs.append(torch.ones(2).type())
    outs.append(torch.ByteTensor([1, 0]).dtype)
    outs.append(
        F.mse_loss(ctx.t(np.ones(3, np.float32)), ctx.t(np.zeros(3, np.float32)), reduce=False)
    )
    outs.append(
        F.l1_loss(ctx.t(np.ones(3, np.float32)), ctx.t(np.zeros(3, np.float32)), size_average=False)
    )
    outs.append(
        nn.CrossEntropyLoss(size_average=False)(
            ctx.t(rng.standard_normal((4, 3)).astype(np.float32)), ctx.t(np.array([0, 1, 2, 1]))
        )
    )
    outs.append(
        nn.NLLLoss(reduce=False)(
            ctx.t(rng.standard_normal((4, 3)).astype(np.float32)), ctx.t(np.array([0, 1, 2, 1]))
        )
    )
    img = ctx.t(rng.standard_normal((1, 2, 3, 3)).astype(np.float32))
    outs.append(F.upsample(img, scale_factor=2, mode="nearest"))
    outs.append(F.upsample_bilinear(img, scale_factor=2))
    outs.append(F.upsample_nearest(img, size=(5, 5)))
    outs.append(F.tanh(img))
    w = torch.empty(3, 4)
    torch.manual_seed(1)
    nn.init.xavier_uniform(w)
    outs.append(w)
    nn.init.constant(w, 0.5)
    outs.append(w)
    outs.append(_pair(3))
    outs.append(_pair((2, 5)))
    default_collate = torch.utils.data._utils.collate.default_collate
    batch = default_collate(
        [{"a": np.ones(2, np.float32), "b": 3}, {"a": np.zeros(2, np.float32), "b": 4}]
    )
    outs += [batch["a"], batch["b"]]
    v = Variable(torch.ones(2), volatile=False) if False else Variable(torch.ones(2))
    outs.append(type(v).__name__)
    outs.append(x.data.numpy().shape)
    return outs


def common_types_conv(torch, ctx):
    """A custom convolution written against torch.nn.common_types and _ConvNd's internals:
    weight standardization (timm's StdConv2d), same-padding computed from _pair sizes, and
    _reverse_repeat_tuple / _ntuple helpers."""
    nn, F = torch.nn, torch.nn.functional
    _ntuple, _pair = torch.nn.modules.utils._ntuple, torch.nn.modules.utils._pair
    _size_2_t = torch.nn.common_types._size_2_t
    to_2tuple = _ntuple(2)

    def get_same_padding(x: int, k: int, s: int, d: int):
        return max((math.ceil(x / s) - 1) * s + (k - 1) * d + 1 - x, 0)

    def pad_same(x, k, s, d=(1, 1), value=0):
        ih, iw = x.size()[-2:]
        pad_h, pad_w = (
            get_same_padding(ih, k[0], s[0], d[0]),
            get_same_padding(iw, k[1], s[1], d[1]),
        )
        if pad_h > 0 or pad_w > 0:
            x = F.pad(
                x, [pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2], value=value
            )
        return x

    class StdConv2dSame(nn.Conv2d):
        def __init__(
            self,
            in_channel,
            out_channels,
            kernel_size: _size_2_t,
            stride: _size_2_t = 1,
            dilation=1,
            groups=1,
            bias=False,
            eps=1e-6,
        ):
            super().__init__(
                in_channel,
                out_channels,
                kernel_size,
                stride=stride,
                padding=0,
                dilation=dilation,
                groups=groups,
                bias=bias,
            )
            self.eps = eps

        def forward(self, x):
            x = pad_same(x, self.kernel_size, self.stride, self.dilation)
            weight = F.batch_norm(
                self.weight.reshape(1, self.out_channels, -1),
                None,
                None,
                training=True,
                momentum=0.0,
                eps=self.eps,
            ).reshape_as(self.weight)
            return F.conv2d(
                x, weight, self.bias, self.stride, self.padding, self.dilation, self.groups
            )

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = StdConv2dSame(3, 8, 3, stride=2)
            self.gn = nn.GroupNorm(2, 8)
            self.c2 = StdConv2dSame(8, 8, to_2tuple(3), stride=(1, 2), groups=2, bias=True)
            self.fc = nn.Linear(8, 2)

        def forward(self, x):
            x = F.relu(self.gn(self.c1(x)))
            x = self.c2(x)
            return self.fc(x.mean((2, 3)))

    model = ctx.init(Net())
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((2, 3, 9, 10)).astype(np.float32))
    y = ctx.t(np.array([0, 1]))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    outs = [
        isinstance(model.c1, torch.nn.modules.conv._ConvNd),
        model.c1.kernel_size,
        model.c2.stride,
        _pair(4),
    ]

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    for _ in range(2):
        outs.append(step(x, y))
    outs.append(model.c1.weight.grad)
    return outs


def collate_fn_map(torch, ctx):
    """A DataLoader batching samples that hold a program's own class, collated by a function
    added to default_collate_fn_map (PyTorch's extension point), and collate() with a map of
    its own; the map is restored afterwards."""
    collate_mod = torch.utils.data._utils.collate

    class Box:
        def __init__(self, xy):
            self.xy = xy

    def collate_box(batch, *, collate_fn_map=None):
        return torch.stack([torch.as_tensor(b.xy) for b in batch])

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {
                "img": np.full((2, 2), i, np.float32),
                "box": Box(np.array([i, i + 1.0])),
                "id": i,
                "name": f"s{i}",
            }

    collate_mod.default_collate_fn_map[Box] = collate_box
    try:
        loader = torch.utils.data.DataLoader(DS(), batch_size=2)
        batches = [(b["img"], b["box"], b["id"], b["name"]) for b in loader]
    finally:
        del collate_mod.default_collate_fn_map[Box]
    own = collate_mod.collate(
        [(Box(np.ones(2)), 1.5), (Box(np.zeros(2)), 2.5)],
        collate_fn_map={Box: collate_box, float: collate_mod.collate_float_fn},
    )
    try:
        collate_mod.default_collate([Box(np.ones(2))])
        refused = False
    except TypeError:
        refused = True
    return [
        batches,
        own,
        refused,
        collate_mod.default_collate([np.float32(1), np.float32(2)]),
        collate_mod.default_collate([(1, 2.0), (3, 4.0)]),
    ]


PROGRAMS = [legacy_warmup_scheduler, legacy_idioms, common_types_conv, collate_fn_map]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


def test_captured_common_types_conv():
    check_program(common_types_conv, capture=True)
