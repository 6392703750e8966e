"""Compiled and deployed programs of hunt54, each run on PyTorch (torch.compile with its eager
backend) and on ember (its captures): torch.compile's arguments and call forms, graph breaks
(data-dependent branches, masks, .item(), Python side effects), a compiled module mutating its
state, torch.jit script/trace/freeze/save/load, a compiled training step with an optimizer and
OneCycleLR, captured dropout and random draws, bfloat16 autocast with GradScaler, dynamic
quantization with torch.qint8, ONNX export read by onnxruntime and torch.export.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def compile_variants(torch, ctx):
    """torch.compile of a module (trained through the wrapper: _orig_mod, state_dict keys),
    with mode/fullgraph/dynamic, backend='eager', as @torch.compile and
    @torch.compile(fullgraph=True), of a lambda with dynamic=True called at another rank,
    Module.compile, torch._dynamo.reset and torch.compiler.reset."""
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2)))
    # (PyTorch runs its eager backend: the same guards and results without inductor's C++
    # compile time; ember captures with its default backend)
    be = {"backend": "eager"} if ctx.is_torch else {}
    cm = torch.compile(model, **be)
    cm2 = torch.compile(model, mode="reduce-overhead", fullgraph=True, dynamic=False, **be)
    cm3 = torch.compile(model, backend="eager")

    @torch.compile(fullgraph=True, **be)
    def f(x, y):
        return (x.sin() * y).sum(-1)

    @torch.compile(**be)
    def g(x):
        return F.softplus(x) * 2

    h = torch.compile(lambda x: x.cos() + 1, dynamic=True, **be)
    x = torch.linspace(-1, 1, 12).view(3, 4)
    opt = torch.optim.SGD(cm.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = cm(x).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss)
    sd_keys = sorted(cm.state_dict().keys())
    orig = cm._orig_mod is model
    torch._dynamo.reset()
    torch.compiler.reset()
    out = [
        cm2(x),
        cm3(x),
        f(x, x + 1),
        g(x),
        h(x),
        h(torch.ones(5)),
        losses,
        sd_keys,
        orig,
        torch.compiler.is_compiling(),
    ]
    model.compile(**be)
    out.append(model(x))
    return out


def compile_graph_breaks(torch, ctx):
    """Compiled functions that break PyTorch's graph: a branch on a tensor's value, boolean-
    mask indexing and nonzero, .item() and tolist, a Python loop over an int argument,
    unique and topk, a Python side effect: each run over three inputs."""
    nn, F = torch.nn, torch.nn.functional
    # (PyTorch runs its eager backend: dynamo's graph breaks without inductor's compile time)
    compile_ = torch.compile(backend="eager") if ctx.is_torch else torch.compile

    @compile_
    def data_dep(x):
        if x.sum() > 0:
            return x * 2
        return x - 1

    @compile_
    def masked(x):
        sel = x[x > 0]
        return sel.sum() + sel.numel(), x.nonzero()

    @compile_
    def with_item(x):
        n = int(x.max().item())
        return torch.arange(n) * x.mean(), x.tolist()

    @compile_
    def loop(x, k: int):
        for i in range(k):
            x = x * 0.5 + i
        return x

    @compile_
    def topk_uniq(x):
        u = torch.unique(x)
        return u, x.topk(2)

    log = []

    @compile_
    def side(x):
        log.append(x.shape[0])
        return x.relu()

    xs = [
        torch.tensor([1.0, -2.0, 3.0]),
        torch.tensor([-1.0, -2.0, -3.0]),
        torch.tensor([4.0, 0.5, 2.0]),
    ]
    out = []
    for x in xs:
        out += [
            data_dep(x),
            masked(x),
            with_item(x.abs()),
            loop(x, 3),
            loop(x, 2),
            topk_uniq(x),
            side(x),
        ]
    out.append(log)
    return out


def compile_module_mutation(torch, ctx):
    """A compiled module that counts its calls in a Python attribute, updates a buffer in
    place, writes a dict, takes keyword arguments and returns a tensor or a dict by a string
    argument; batch sizes that change."""
    nn = torch.nn

    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.calls = 0
            self.register_buffer("running", torch.zeros(3))
            self.cache = {}

        def forward(self, x, scale=1.0, mode="a"):
            self.calls += 1
            self.running.mul_(0.9).add_(x.mean(0).detach(), alpha=0.1)
            self.cache["last"] = x.shape[0]
            y = self.lin(x) * scale
            if mode == "a":
                return y
            return {"y": y, "n": self.calls}

    m = ctx.init(Counter())
    cm = torch.compile(m, **({"backend": "eager"} if ctx.is_torch else {}))
    x = torch.linspace(-1, 1, 6).view(2, 3)
    outs = [cm(x), cm(x, scale=2.0), cm(x, mode="b"), cm(x[:1], 0.5, "b"), cm(torch.ones(4, 3))]
    return [outs, m.calls, m.running, m.cache, cm.calls]


def jit_variants(torch, ctx):
    """torch.jit.script of a module and a function, jit.trace of a module and a function,
    freeze, optimize_for_inference, save/load through a buffer, is_scripting, isinstance
    ScriptModule; gradients through the scripted module."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return F.relu(self.fc(x)) * 2

    net = ctx.init(Net())
    x = torch.linspace(-2, 2, 8).view(2, 4)
    s = torch.jit.script(net)
    t = torch.jit.trace(net, (x,))

    @torch.jit.script
    def fused(a, b):
        return a * torch.sigmoid(b)

    def py(a):
        return a.tanh() + 1

    tf = torch.jit.trace(py, torch.ones(3))
    frozen = torch.jit.freeze(torch.jit.script(net.eval()))
    opt = torch.jit.optimize_for_inference(torch.jit.script(net.eval()))
    y = s(x)
    y2 = t(x)
    y.sum().backward()
    import io

    buf = io.BytesIO()
    torch.jit.save(s, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    return [
        y,
        y2,
        fused(x, x),
        tf(x[0, :3]),
        frozen(x),
        opt(x),
        loaded(x),
        net.fc.weight.grad,
        torch.jit.is_scripting(),
        isinstance(s, torch.jit.ScriptModule),
    ]


def compiled_train_step(torch, ctx):
    """A whole training step compiled (zero_grad, forward with BatchNorm and Dropout, label-
    smoothed cross-entropy, backward, clip_grad_norm_, Adam step), a buffer counting samples
    in place, OneCycleLR outside; the eval output and Adam's state."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.drop = nn.Dropout(0.3)
            self.fc = nn.Linear(4 * 4 * 4, 3)
            self.register_buffer("seen", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            self.seen += x.shape[0]
            h = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
            return self.fc(self.drop(h.flatten(1)))

    net = ctx.init(Net())
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=10)
    compile_ = torch.compile(backend="eager") if ctx.is_torch else torch.compile

    @compile_
    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        logits = net(x)
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        return loss.detach(), (logits.argmax(1) == y).float().mean()

    rng = np.random.default_rng(0)
    torch.manual_seed(1)
    out = []
    for step in range(4):
        x = ctx.t(rng.standard_normal((6, 1, 8, 8)).astype(np.float32))
        y = ctx.t(rng.integers(0, 3, 6))
        loss, acc = train_step(x, y)
        sched.step()
        out.append([loss, acc, sched.get_last_lr()[0]])
    net.eval()
    with torch.no_grad():
        ev = net(x)
    return [out, net.state_dict(), ev, opt.state_dict()["state"][0]["exp_avg"]]


def captured_dropout_rng(torch, ctx):
    """A captured SGD step drawing Dropout and AlphaDropout masks, randn_like noise, a rand
    mask and a dropout1d: the draws follow the seed as eagerly, and the generator continues
    where they left it."""
    nn, F = torch.nn, torch.nn.functional
    net = ctx.init(
        nn.Sequential(
            nn.Linear(5, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2), nn.AlphaDropout(0.2)
        )
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        out = net(x)
        noise = torch.randn_like(out) * 0.01
        mask = torch.rand(out.shape) > 0.1
        loss = ((out + noise) * mask).pow(2).mean() + F.dropout1d(x.unsqueeze(0), 0.5).sum() * 0
        loss.backward()
        opt.step()
        return loss, noise

    step = ctx.fn(step)
    torch.manual_seed(5)
    res = []
    x = torch.linspace(-1, 1, 20).view(4, 5)
    for _ in range(3):
        res.append(step(x))
    res.append(torch.rand(2))
    return [res, net.state_dict()]


def autocast_scaler(torch, ctx):
    """torch.autocast('cpu', bfloat16) around the forward and loss (the dtypes inside),
    torch.amp.GradScaler('cpu') with scale, unscale_, clip_grad_norm_, step and update,
    autocast disabled and default-dtype regions."""
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.LayerNorm(16), nn.Linear(16, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=2)
    rng = np.random.default_rng(0)
    losses, dts, scales = [], [], []
    for step in range(4):
        x = ctx.t(rng.standard_normal((8, 6)).astype(np.float32))
        y = ctx.t(rng.integers(0, 3, 8))
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
            dts.append(logits.dtype)
            loss = F.cross_entropy(logits, y)
            dts.append(loss.dtype)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        gn = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        losses.append(loss.float())
        scales.append(scaler.get_scale())
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False):
        z = model(x)
    with torch.amp.autocast("cpu"):
        zz = model(x)
        mm = torch.mm(x, x.t())
    sd = scaler.state_dict()
    return [
        losses,
        dts,
        scales,
        z,
        zz.float(),
        zz.dtype,
        mm.dtype,
        model.state_dict(),
        sorted(sd.keys()),
        torch.is_autocast_enabled("cpu"),
    ]


def quant_dynamic(torch, ctx):
    """torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8), and
    through torch.quantization with qconfig_spec and inplace=False: outputs within int8
    rounding of the float model, the state_dict saved."""
    nn = torch.nn
    model = ctx.init(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)))
    model.eval()
    q = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    x = torch.linspace(-2, 2, 24).view(3, 8)
    y = model(x)
    yq = q(x)
    err = (y - yq).abs().max()
    q2 = torch.quantization.quantize_dynamic(
        model, qconfig_spec={nn.Linear}, dtype=torch.qint8, inplace=False
    )
    buf = io.BytesIO()
    torch.save(q.state_dict(), buf)
    return [y, yq, bool(err < 0.05), q2(x), len(buf.getvalue()) > 0]


def export_onnx(torch, ctx):
    """torch.onnx.export with input/output names, dynamic batch axes and an opset, run by
    onnxruntime at another batch size; torch.export.export and its module()."""
    nn = torch.nn
    import os
    import tempfile

    model = ctx.init(
        nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 4 * 4, 3))
    )
    model.eval()
    x = torch.linspace(-1, 1, 2 * 36).view(2, 1, 6, 6)
    d = tempfile.mkdtemp()
    path = os.path.join(d, "m.onnx")
    torch.onnx.export(
        model,
        (x,),
        path,
        input_names=["x"],
        output_names=["y"],
        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    import onnxruntime as ort

    sess = ort.InferenceSession(path)
    out = sess.run(None, {"x": np.linspace(-1, 1, 3 * 36, dtype=np.float32).reshape(3, 1, 6, 6)})[0]
    ep = torch.export.export(model, (x,))
    y2 = ep.module()(x)
    return [out, y2, [i.name for i in sess.get_inputs()], model(x)]


PROGRAMS = [
    compile_variants,
    compile_graph_breaks,
    compile_module_mutation,
    jit_variants,
    compiled_train_step,
    captured_dropout_rng,
    autocast_scaler,
    quant_dynamic,
    export_onnx,
]
CAPTURED = [captured_dropout_rng]
TOLERANCES = {
    "autocast_scaler": dict(rtol=2e-2, atol=2e-2),
    "quant_dynamic": dict(rtol=1e-2, atol=1e-2),
}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, **TOLERANCES.get(program.__name__, {}))


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True, **TOLERANCES.get(program.__name__, {}))
