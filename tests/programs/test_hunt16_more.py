"""More hunt16 programs: a spatial-transformer augmentation (affine_grid,
grid_sample, interpolate up and down) learning its affine parameters, a model wrapped by
torch.compile and trained through the wrapper (ember's; the PyTorch reference runs the model
itself), custom autograd Functions that write their input in place (mark_dirty) and mark
outputs non-differentiable, token routing with index_put_(accumulate), masked_scatter, one_hot
and repeat_interleave, and a float64 model stepped by ReduceLROnPlateau from .item() losses.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007


def stn_augment(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class STN(nn.Module):
        def __init__(self):
            super().__init__()
            self.loc = nn.Sequential(nn.Flatten(), nn.Linear(2 * 6 * 6, 6))

        def forward(self, x):
            theta = self.loc(x).view(-1, 2, 3) * 0.1 + torch.tensor(
                [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
            )
            grid = F.affine_grid(theta, list(x.shape), align_corners=False)
            warped = F.grid_sample(
                x, grid, mode="bilinear", padding_mode="border", align_corners=False
            )
            up = F.interpolate(warped, scale_factor=2, mode="bilinear", align_corners=False)
            near = F.interpolate(warped, size=(9, 9), mode="nearest")
            down = F.interpolate(up, size=(4, 4), mode="area")
            return warped, up, near, down, theta

    model = ctx.init(STN())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    rng = np.random.default_rng(12)
    x = ctx.t(rng.standard_normal((2, 2, 6, 6)).astype(np.float32))
    target = ctx.t(rng.standard_normal((2, 2, 4, 4)).astype(np.float32))

    @ctx.fn
    def step(x, target):
        warped, up, near, down, theta = model(x)
        loss = F.mse_loss(down, target) + 0.01 * near.abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, warped, up.shape, theta

    hist = [step(x, target) for _ in range(2)]
    # zeros padding and nearest sampling with align_corners, outside the step
    rot = ctx.t(np.array([[[0.0, -1.0, 0.2], [1.0, 0.0, 0.0]]], dtype=np.float32))
    grid = F.affine_grid(rot, [1, 2, 5, 5], align_corners=True)
    nn_zero = F.grid_sample(x[:1], grid, mode="nearest", padding_mode="zeros", align_corners=True)
    return [hist, nn_zero, model.loc[1].weight.grad]


def compiled_model(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 3, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(3)
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            h = F.relu(self.bn(self.conv(x)))
            return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))

    net = ctx.init(Net())
    # (PyTorch's inductor takes minutes to compile: the reference runs the model itself)
    cnet = net if ctx.is_torch else torch.compile(net)
    opt = torch.optim.Adam(cnet.parameters(), lr=1e-2)
    rng = np.random.default_rng(13)
    x = ctx.t(rng.standard_normal((4, 1, 5, 5)).astype(np.float32))
    y = ctx.t(np.array([0, 1, 1, 0]))
    out = []
    for _ in range(3):
        loss = F.cross_entropy(cnet(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss)
    cnet.eval()
    with torch.no_grad():
        ev = cnet(x)
    return [out, ev, net.bn.running_var, net.bn.num_batches_tracked, net.fc.weight]


def custom_functions(torch, ctx):
    nn = torch.nn

    class ReluInplace(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x):
            x.clamp_(min=0)
            ctx_.mark_dirty(x)
            ctx_.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx_, g):
            (y,) = ctx_.saved_tensors
            return g * (y > 0).to(g.dtype)

    class SortWithIndex(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x):
            vals, idx = torch.sort(x, dim=-1)
            ctx_.mark_non_differentiable(idx)
            ctx_.save_for_backward(idx)
            return vals, idx

        @staticmethod
        def backward(ctx_, g_vals, g_idx):
            (idx,) = ctx_.saved_tensors
            return torch.zeros_like(g_vals).scatter(-1, idx, g_vals)

    lin = ctx.init(nn.Linear(4, 4))
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    rng = np.random.default_rng(14)
    x = ctx.t(rng.standard_normal((3, 4)).astype(np.float32))
    w = ctx.t(np.linspace(1.0, 2.0, 4, dtype=np.float32))

    @ctx.fn
    def step(x):
        h = ReluInplace.apply(lin(x) * 1.0)
        vals, idx = SortWithIndex.apply(h)
        loss = (vals * w).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, idx, idx.requires_grad, vals.requires_grad

    hist = [step(x) for _ in range(2)]
    return [hist, lin.weight, lin.bias.grad]


def token_routing(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    router = ctx.init(nn.Linear(4, 3), "router")
    experts = ctx.init(nn.ModuleList([nn.Linear(4, 4) for _ in range(3)]), "experts")
    params = list(router.parameters()) + list(experts.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    rng = np.random.default_rng(15)
    x = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))

    @ctx.fn
    def step(x):
        probs = router(x).softmax(-1)
        gate, choice = probs.max(-1)
        onehot = F.one_hot(choice, 3).to(x.dtype)
        load = torch.zeros(3).index_put_((choice,), torch.ones(6), accumulate=True)
        out = torch.zeros_like(x)
        for e, expert in enumerate(experts):
            sel = (choice == e).unsqueeze(-1)
            out = out + torch.where(sel, expert(x), torch.zeros_like(x))
        out = out * gate.unsqueeze(-1)
        aux = 3 * (onehot.mean(0) * probs.mean(0)).sum()
        loss = out.pow(2).mean() + 0.1 * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, load, choice

    hist = [step(x) for _ in range(3)]
    with torch.no_grad():
        keep = x[:, 0] > 0
        filled = torch.zeros(6, 4).masked_scatter(keep.unsqueeze(-1).expand(6, 4), x * 10)
        counts = torch.tensor([1, 0, 2, 3])
        rep = torch.repeat_interleave(torch.arange(4), counts)
        rep2 = x[:2].repeat_interleave(2, dim=0)
        nz = torch.nonzero(keep, as_tuple=True)[0]
    return [hist, filled, rep, rep2, nz, router.weight.grad]


def double_plateau(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1)))
    model = model.double()
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.5)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt, mode="min", factor=0.5, patience=1, threshold=1e-3, cooldown=1
    )
    rng = np.random.default_rng(16)
    x = ctx.t(rng.standard_normal((8, 3)))
    y = ctx.t(np.sin(rng.standard_normal((8, 1))))

    @ctx.fn
    def step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    hist = []
    for epoch in range(8):
        loss = step(x, y)
        val = loss.item()
        plateau.step(val)
        hist.append([val, opt.param_groups[0]["lr"], plateau.num_bad_epochs])
    return [hist, model[0].weight.dtype, model[2].weight, plateau.state_dict()["best"]]


PROGRAMS = [stn_augment, compiled_model, custom_functions, token_routing, double_plateau]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize(
    "program", [p for p in PROGRAMS if p is not compiled_model], ids=lambda p: p.__name__
)
def test_captured(program):
    check_program(program, capture=True)
