"""Model surgery: swapping layers through named_modules/setattr, freezing, parameter groups,
copying weights between models, parameters_to_vector round trips, ModuleDict/ParameterList/
ParameterDict iteration, non-persistent buffers, apply(init_fn) with seeded nn.init, deepcopy
of models and optimizers.
"""

import copy

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007


def _net(nn, bias=True):
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1, bias=bias),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Conv2d(4, 4, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 5),
    )


def replace_layers(torch, ctx):
    nn = torch.nn
    model = ctx.init(_net(nn))
    # swap every ReLU for a GELU, then the head for a new 3-class one
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.ReLU):
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, nn.GELU())
    in_f = model[-1].in_features
    model[-1] = nn.Linear(in_f, 3)
    ctx.init(model[-1], "head")
    names = [n for n, _ in model.named_children()]
    kinds = [type(m).__name__ for m in model.modules()]
    for p in model.parameters():
        p.requires_grad_(False)
    for p in model[-1].parameters():
        p.requires_grad = True
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    opt = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    y = ctx.t(np.array([0, 2]))
    model.train()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    grads = [p.grad is None for p in model.parameters()]
    return [names, kinds, trainable, n_train, loss, grads, model[-1].weight, model[0].weight]


def param_groups(torch, ctx):
    nn = torch.nn
    # no bias before the batch norm: its gradient is 0 up to rounding, which Adam's first
    # step would turn into a whole lr
    model = ctx.init(_net(nn, bias=False))
    backbone = [p for n, p in model.named_parameters() if not n.startswith("7.")]
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    opt = torch.optim.AdamW(
        [
            {"params": backbone, "lr": 1e-3},
            {"params": model[7].parameters(), "lr": 1e-2, "weight_decay": 0.0},
        ],
        weight_decay=0.05,
    )
    opt2 = torch.optim.SGD(
        [{"params": decay, "weight_decay": 1e-2}, {"params": no_decay, "weight_decay": 0.0}],
        lr=0.05,
        momentum=0.9,
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, [lambda e: 0.5**e, lambda e: 1.0 / (e + 1)])
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((3, 3, 5, 5)).astype(np.float32))
    y = ctx.t(np.array([1, 4, 0]))
    out = []
    for step in range(3):
        for o in (opt, opt2):
            loss = nn.functional.cross_entropy(model(x), y)
            o.zero_grad()
            loss.backward()
            o.step()
        sched.step()
        out.append([loss, [g["lr"] for g in opt.param_groups]])
    sd = opt.state_dict()
    info = [
        len(opt.param_groups),
        [len(g["params"]) for g in opt.param_groups],
        sd["param_groups"][1]["params"],
        sorted(sd["state"][0]),
        [g["weight_decay"] for g in opt2.param_groups],
        len(decay),
    ]
    opt.add_param_group({"params": [nn.Parameter(torch.zeros(2))], "lr": 0.3})
    info.append([g["lr"] for g in opt.param_groups])
    info.append(opt.param_groups[2]["betas"])
    return [out, info, list(model.parameters())]


def copy_weights(torch, ctx):
    nn = torch.nn
    teacher = ctx.init(_net(nn), "t")
    student = _net(nn)
    # copy by state_dict, then by parameter zip under no_grad, then a partial load
    student.load_state_dict(teacher.state_dict())
    same = [torch.equal(a, b) for a, b in zip(teacher.parameters(), student.parameters())]
    with torch.no_grad():
        for ps, pt in zip(student.parameters(), teacher.parameters()):
            ps.copy_(pt * 0.5)
        student[1].running_var.fill_(2.0)
    head = nn.Linear(4, 5)
    res = head.load_state_dict(
        {k[2:]: v for k, v in teacher.state_dict().items() if k.startswith("7.")}
    )
    partial = {k: v for k, v in teacher.state_dict().items() if k.startswith("0.")}
    res2 = student.load_state_dict(partial, strict=False)
    vec = nn.utils.parameters_to_vector(teacher.parameters())
    nn.utils.vector_to_parameters(vec * 2, student.parameters())
    vec2 = nn.utils.parameters_to_vector(student.parameters())
    twin = copy.deepcopy(student)
    twin[0].weight.data.zero_()
    sd_keys = list(student.state_dict().keys())
    return [
        same,
        list(res.missing_keys),
        sorted(res2.missing_keys)[:3],
        list(res2.unexpected_keys),
        vec.shape,
        vec2,
        student[1].running_var,
        student[0].weight.abs().sum() > 0,
        twin[0].weight.sum(),
        sd_keys,
        head.weight,
    ]


def containers_buffers(torch, ctx):
    nn = torch.nn

    class Multi(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "reg": nn.Linear(4, 1)})
            self.scales = nn.ParameterList(
                [nn.Parameter(torch.ones(4) * (i + 1)) for i in range(3)]
            )
            self.extra = nn.ParameterDict({"bias": nn.Parameter(torch.zeros(4))})
            self.register_buffer("mean", torch.zeros(4))
            self.register_buffer("cache", torch.ones(4), persistent=False)
            self.register_buffer("nothing", None)

        def forward(self, x):
            for s in self.scales:
                x = x * s
            x = x + self.extra["bias"] - self.mean + self.cache
            return {k: head(x) for k, head in self.heads.items()}

    m = ctx.init(Multi())
    keys = list(m.state_dict().keys())
    buffers = [n for n, _ in m.named_buffers()]
    m.heads["aux"] = nn.Linear(4, 2)
    ctx.init(m.heads["aux"], "aux")
    m.scales.append(nn.Parameter(torch.full((4,), 0.5)))
    m.extra["gain"] = nn.Parameter(torch.ones(4))
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((2, 4)).astype(np.float32))
    out = m(x)
    loss = sum(v.sum() for v in out.values())
    loss.backward()
    info = [
        keys,
        buffers,
        list(m.heads.keys()),
        len(m.scales),
        list(m.extra.keys()),
        "cls" in m.heads,
        [n for n, _ in m.named_parameters()],
        m.scales[0].grad,
        m.extra["gain"].grad is None,
        [type(v).__name__ for v in m.heads.values()],
        "cache" in m.state_dict(),
    ]
    m2 = Multi()
    r = m2.load_state_dict(m.state_dict(), strict=False)
    info.append([sorted(r.missing_keys), sorted(r.unexpected_keys)])
    del m.heads["reg"]
    info.append(list(m.heads))
    m.heads.update({"z": nn.Identity()})
    info.append(list(m.heads))
    info.append(m.heads.pop("z").__class__.__name__)
    return [out, info]


def init_apply(torch, ctx):
    nn = torch.nn
    g = torch.Generator().manual_seed(123)

    def init_fn(m):
        if isinstance(m, nn.Linear):
            nn.init.kaiming_uniform_(m.weight, a=0, mode="fan_in", nonlinearity="relu")
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.constant_(m.bias, 0.1)

    model = _net(nn)
    model.apply(init_fn)
    stats = []
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            fan_in = m.weight[0].numel()
            bound = (6.0 / fan_in) ** 0.5
            stats.append(bool(m.weight.abs().max() <= bound + 1e-6))
    w = torch.empty(64, 32)
    nn.init.orthogonal_(w)
    ortho = torch.allclose(w.t() @ w, torch.eye(32), atol=1e-4)
    t = torch.empty(1000)
    nn.init.trunc_normal_(t, mean=0.0, std=1.0, a=-2.0, b=2.0)
    x = torch.empty(200, 100)
    nn.init.xavier_uniform_(x, gain=nn.init.calculate_gain("tanh"))
    xb = (6.0 / 300) ** 0.5 * 5 / 3
    u = torch.empty(3, 4)
    nn.init.uniform_(u, -0.1, 0.1, generator=g)
    return [
        stats,
        ortho,
        bool(t.abs().max() <= 2.0),
        bool(x.abs().max() <= xb),
        bool(u.abs().max() <= 0.1),
        nn.init.calculate_gain("leaky_relu", 0.2),
        nn.init.calculate_gain("selu"),
        model[1].bias,
        model[7].bias,
        [torch.nn.init._calculate_fan_in_and_fan_out(model[0].weight)],
    ]


def deepcopy_opt(torch, ctx):
    nn = torch.nn
    model = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))
    y = ctx.t(rng.standard_normal((6, 2)).astype(np.float32))

    def step(m, o):
        loss = nn.functional.mse_loss(m(x), y)
        o.zero_grad()
        loss.backward()
        o.step()
        return loss.item()

    step(model, opt)
    snapshot = copy.deepcopy(model)
    opt_sd = copy.deepcopy(opt.state_dict())
    a = [step(model, opt) for _ in range(3)]
    # restore and replay: the same trajectory
    model.load_state_dict(snapshot.state_dict())
    opt.load_state_dict(opt_sd)
    b = [step(model, opt) for _ in range(3)]
    # a clone with its own optimizer built from the copied state
    clone = copy.deepcopy(model)
    opt_c = torch.optim.Adam(clone.parameters(), lr=1e-2)
    opt_c.load_state_dict(opt.state_dict())
    c = [step(clone, opt_c), step(model, opt)]
    ema = copy.deepcopy(model).requires_grad_(False)
    with torch.no_grad():
        for pe, pm in zip(ema.parameters(), model.parameters()):
            pe.mul_(0.9).add_(pm, alpha=0.1)
    return [
        a,
        b,
        c,
        opt.state_dict()["state"][0]["step"],
        snapshot[0].weight,
        ema[2].bias,
        [p.requires_grad for p in ema.parameters()],
        clone[0].weight.data_ptr() != model[0].weight.data_ptr(),
    ]


PROGRAMS = [
    replace_layers,
    param_groups,
    copy_weights,
    containers_buffers,
    init_apply,
    deepcopy_opt,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)
