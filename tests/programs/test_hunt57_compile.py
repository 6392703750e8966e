"""Programs of hunt57 run through ``ember.compile`` (in the captured run; PyTorch runs them
eagerly): training steps over batches of varying size (automatic dynamic shapes), shapes
steering Python, modules compiled whole with recurrent state carried between calls, and
functions whose capture fails part way (``.item()`` steering an ``if``): ember.compile runs
such a call again eagerly, and the Python side effects the failed trace had already done
(a counter bumped, a list appended to, a dict item set, a module attribute list grown) were
done twice, where PyTorch, resuming after its graph break, does each once; and inputs that
require grad on some calls only, which a symbolic program's key did not tell apart; layers'
settings (Dropout's p, BatchNorm's momentum) changed between calls, the generator seeded
inside the function, and draws from Python's random module (teacher forcing), all of which the
graph had baked in; and a result computed under enable_grad inside a function called under
no_grad, which had no gradient.
"""

import math

import numpy as np
import pytest

import ember

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005

pytestmark = pytest.mark.filterwarnings("ignore:ember.compile")


def _compiled(torch, ctx, f, **kwargs):
    """ember.compile in ember's captured run, the function itself otherwise."""
    return ember.compile(f, **kwargs) if ctx.capture and not ctx.is_torch else f


def varying_batch_training(torch, ctx):
    """A classifier's whole training step compiled, called with batches of 4, 6, 5, 8 and 3
    rows (a DataLoader's ragged last batch); BatchNorm's running statistics and AdamW."""
    nn = torch.nn
    model = ctx.init(
        nn.Sequential(nn.Linear(5, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3)),
        "m",
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    step = _compiled(torch, ctx, step)
    rng = np.random.default_rng(0)
    out = []
    for bs in (4, 6, 5, 8, 3):
        x = ctx.t(rng.standard_normal((bs, 5)).astype(np.float32))
        y = ctx.t(rng.integers(0, 3, bs))
        out.append(step(x, y))
    model.eval()
    out.append(model(ctx.t(rng.standard_normal((2, 5)).astype(np.float32))))
    return out + [model[1].running_mean, model[1].running_var, model[0].weight]


def shapes_steer_python(torch, ctx):
    """Sizes read in Python: positions from arange(t), an ``if b > 4`` on the batch, topk's k
    from the length, view(x.size(0), -1), reshape(b, -1, 2) and new_zeros(x.shape[0], 1)."""

    def f(x):
        b, t, c = x.shape
        pos = torch.arange(t, dtype=x.dtype)[None, :, None]
        h = x + pos / t
        if b > 4:
            h = h * 2
        v, i = h.sum(-1).topk(t // 2, dim=1)
        flat = h.view(h.size(0), -1)
        pairs = h.reshape(b, -1, 2)
        z = x.new_zeros(x.shape[0], 1)
        return [v, i, flat.mean(1), pairs.amax(1), z, h.flatten(1).shape[1]]

    f = _compiled(torch, ctx, f)
    rng = np.random.default_rng(1)
    shapes = [(3, 4, 2), (5, 6, 2), (2, 8, 2), (6, 4, 3), (7, 10, 3)]
    return [f(ctx.t(rng.standard_normal(s).astype(np.float32))) for s in shapes]


def conv_varying_images(torch, ctx):
    """A small conv net over images of varying batch and size: GroupNorm, a stride-2
    convolution, interpolate by scale_factor and to the input's size, adaptive pooling."""
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(
        nn.Sequential(
            nn.Conv2d(2, 4, 3, padding=1),
            nn.GroupNorm(2, 4),
            nn.SiLU(),
            nn.Conv2d(4, 4, 3, stride=2, padding=1),
        ),
        "conv",
    )

    def f(x):
        h = m(x)
        up = F.interpolate(h, scale_factor=2, mode="bilinear", align_corners=False)
        up2 = F.interpolate(h, size=x.shape[-2:], mode="nearest")
        pooled = F.adaptive_avg_pool2d(h, 1).flatten(1)
        err = (up[..., : x.shape[-2], : x.shape[-1]] - x.mean(1, keepdim=True)).pow(2).mean()
        return up, up2, pooled, err

    f = _compiled(torch, ctx, f)
    rng = np.random.default_rng(2)
    shapes = [(1, 2, 8, 8), (2, 2, 10, 6), (3, 2, 7, 9), (2, 2, 12, 12)]
    return [f(ctx.t(rng.standard_normal(s).astype(np.float32))) for s in shapes]


def encoder_varying_lengths(torch, ctx):
    """A TransformerEncoder with a causal mask from generate_square_subsequent_mask and a key
    padding mask from the lengths, mean-pooled over the valid positions, over batches of
    varying batch size and length."""
    nn = torch.nn
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    enc = ctx.init(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), "enc")
    emb = ctx.init(nn.Embedding(20, 8), "emb")

    def f(ids, lengths):
        T = ids.shape[1]
        pad = torch.arange(T)[None, :] >= lengths[:, None]
        causal = nn.Transformer.generate_square_subsequent_mask(T)
        h = enc(emb(ids) * math.sqrt(8), mask=causal, src_key_padding_mask=pad)
        h = h.masked_fill(pad[..., None], 0)
        return h.sum(1) / lengths[:, None]

    f = _compiled(torch, ctx, f)
    rng = np.random.default_rng(3)
    outs = []
    for b, t in [(2, 5), (3, 7), (2, 9), (4, 6)]:
        ids = ctx.t(rng.integers(0, 20, (b, t)))
        lengths = ctx.t(rng.integers(1, t + 1, b))
        outs.append(f(ids, lengths))
    return outs


def recurrent_module_state(torch, ctx):
    """A module compiled whole (ember.compile(module)) whose LSTM state is carried between
    calls of growing length, then called fresh at other batch sizes with a backward."""
    nn = torch.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 4, batch_first=True)
            self.head = nn.Linear(4, 2)

        def forward(self, x, h=None):
            o, (h, c) = self.lstm(x, h)
            return self.head(o[:, -1]), (h, c)

    m = ctx.init(M(), "m")
    mc = _compiled(torch, ctx, m)
    rng = np.random.default_rng(4)
    outs, st = [], None
    for b, t in [(2, 3), (2, 5), (2, 4)]:
        y, st = mc(ctx.t(rng.standard_normal((b, t, 3)).astype(np.float32)), st)
        outs.append(y)
    for b, t in [(3, 3), (5, 6)]:
        y, _ = mc(ctx.t(rng.standard_normal((b, t, 3)).astype(np.float32)))
        y.pow(2).sum().backward()
        outs.append(y)
    keys = sorted(k.replace("_orig_mod.", "") for k in mc.state_dict())
    return outs + [m.head.weight.grad, m.lstm.weight_hh_l0.grad, keys]


def graph_break_side_effects(torch, ctx):
    """A module's forward that counts its calls (an int attribute and a list attribute),
    appends to a closure list, bumps a dict entry and a list cell, then branches on a
    tensor's value: ember.compile's capture fails there and the call runs eagerly, which
    must leave every effect done once."""
    nn = torch.nn
    hist, stats, count = [], {"n": 0}, [0]

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.calls = 0
            self.log = []
            self.seen = set()

        def forward(self, x):
            self.calls += 1
            self.log.append(self.calls)
            self.seen.add(x.shape[0] + self.calls)
            h = self.lin(x)
            hist.append(len(hist))
            stats["n"] += 1
            stats.setdefault("first", x.shape[0])
            count[0] += 1
            if h.mean() > 0:
                h = -h
            return h

    m = ctx.init(M(), "m")
    f = _compiled(torch, ctx, m)
    rng = np.random.default_rng(5)
    outs = [f(ctx.t(rng.standard_normal((2, 3)).astype(np.float32))) for _ in range(3)]
    return [outs, hist, stats, count, m.calls, m.log, sorted(m.seen)]


def graph_break_training_step(torch, ctx):
    """A training step that steps its scheduler and logs the loss into a history list and a
    nonlocal counter, then reads ``loss.item()`` to skip a bad batch: the capture fails at
    the scheduler (or the item) and the step runs eagerly, once."""
    nn = torch.nn
    m = ctx.init(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)), "m")
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, 2, 0.5)
    history = []
    steps = 0

    def step(x, y):
        nonlocal steps
        steps += 1
        loss = nn.functional.mse_loss(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        history.append(round(loss.item(), 4))
        if loss.item() > 10:
            opt.zero_grad()
        return loss.detach()

    step = _compiled(torch, ctx, step)
    rng = np.random.default_rng(6)
    losses = []
    for _ in range(5):
        x = ctx.t(rng.standard_normal((3, 4)).astype(np.float32))
        y = ctx.t(rng.standard_normal((3, 2)).astype(np.float32))
        losses.append(step(x, y))
    return [losses, m[0].weight, opt.param_groups[0]["lr"], len(history), steps, sched.last_epoch]


def inputs_requiring_grad_in_turn(torch, ctx):
    """A compiled function called with inputs of varying batch that require grad on some
    calls and not on others (a frozen encoder's features one step, an input-gradient saliency
    map the next): once the batch varied, the symbolic program traced for an input without
    grad served the calls whose input required it, and their .grad stayed None."""

    def f(x, w):
        return (x @ w).tanh().sum(0)

    f = _compiled(torch, ctx, f)
    rng = np.random.default_rng(7)
    w = ctx.t(rng.standard_normal((3, 2)).astype(np.float32), requires_grad=True)
    outs = []
    for i in range(5):
        x = ctx.t(rng.standard_normal((2 + i, 3)).astype(np.float32), requires_grad=i % 2 == 0)
        y = f(x, w)
        y.pow(2).sum().backward()
        outs.append([y, x.grad, x.requires_grad])
    with torch.no_grad():
        outs.append(f(x, w))
    return [outs, w.grad]


def module_settings_changed(torch, ctx):
    """A compiled model whose layers' settings change between calls: dropout turned off by
    setting every Dropout's p to 0 (then a schedule of p), and swa_utils.update_bn run on the
    compiled model (it sets BatchNorm's momentum to None for a cumulative average and back):
    the graph had baked in the first values, where PyTorch's guards recompile."""
    nn = torch.nn
    m = ctx.init(
        nn.Sequential(
            nn.Linear(3, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Dropout(0.5), nn.Linear(6, 2)
        ),
        "m",
    )
    mc = _compiled(torch, ctx, m)
    rng = np.random.default_rng(8)
    xs = [ctx.t(rng.standard_normal((4, 3)).astype(np.float32)) for _ in range(4)]
    torch.manual_seed(1)
    out = [mc(xs[0])]
    for mod in m.modules():
        if isinstance(mod, nn.Dropout):
            mod.p = 0.0
    out.append(mc(xs[1]))
    for p in (0.1, 0.2):
        m[3].p = p
        out.append(mc(xs[2]))
    loader = [xs[0], xs[1], xs[2] * 2]
    torch.optim.swa_utils.update_bn(loader, mc)
    out += [m[1].running_mean, m[1].running_var, m[1].momentum, m[1].num_batches_tracked]
    m[1].eps = 1e-1
    m.eval()
    out.append(mc(xs[3]))
    return out


def seeded_inside_step(torch, ctx):
    """A compiled function that seeds the generator itself (torch.manual_seed in the step, a
    local Generator().manual_seed for a fixed noise pattern): each call must draw the same
    numbers; the graph had drawn on from where the last call stopped."""

    def noisy(x):
        torch.manual_seed(123)
        return x + torch.randn(x.shape), torch.randint(0, 10, (3,))

    def fixed_noise(x):
        g = torch.Generator().manual_seed(7)
        return x + torch.rand(x.shape, generator=g), torch.randperm(5, generator=g)

    noisy = _compiled(torch, ctx, noisy)
    fixed_noise = _compiled(torch, ctx, fixed_noise)
    x = torch.zeros(2, 3)
    out = [noisy(x), noisy(x), fixed_noise(x), fixed_noise(x)]
    return out + [torch.rand(2)]


def teacher_forcing_seq2seq(torch, ctx):
    """A GRU encoder-decoder trained with teacher forcing decided per step by
    ``random.random() < ratio`` and a NumPy-drawn scale, the step compiled: a graph holds
    the draws made while tracing and repeats them on every call (ember.function warns of
    that); ember.compile must run such a step eagerly, drawing anew each call, as PyTorch."""
    import random

    nn = torch.nn
    enc = ctx.init(nn.GRU(3, 6, batch_first=True), "enc")
    dec_cell = ctx.init(nn.GRUCell(4, 6), "dec")
    emb = ctx.init(nn.Embedding(5, 4), "emb")
    out_proj = ctx.init(nn.Linear(6, 5), "proj")
    params = [*enc.parameters(), *dec_cell.parameters(), *emb.parameters(), *out_proj.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)

    def step(src, tgt, ratio):
        _, h = enc(src)
        h = h[0]
        inp = torch.zeros(tgt.shape[0], dtype=torch.long)
        loss = 0
        for t in range(tgt.shape[1]):
            h = dec_cell(emb(inp), h)
            logits = out_proj(h)
            loss = loss + nn.functional.cross_entropy(logits, tgt[:, t])
            inp = tgt[:, t] if random.random() < ratio else logits.argmax(-1)
        loss = loss * float(np.random.uniform(0.5, 1.5))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = _compiled(torch, ctx, step)
    random.seed(0)
    np.random.seed(0)
    rng = np.random.default_rng(10)
    losses = []
    for i in range(4):
        src = ctx.t(rng.standard_normal((2, 4, 3)).astype(np.float32))
        tgt = ctx.t(rng.integers(0, 5, (2, 3)))
        losses.append(step(src, tgt, 0.5))
    return [losses, out_proj.weight, random.random(), float(np.random.rand())]


def grad_modes_inside(torch, ctx):
    """Compiled functions that set the grad mode themselves: a predictor decorated with
    no_grad, and a scorer that enables grad inside (``with torch.enable_grad():``) called
    from an evaluation loop under no_grad, whose result must still carry a gradient (an
    input-saliency map computed during validation); the graph had none."""
    nn = torch.nn
    m = ctx.init(nn.Linear(3, 2), "m")

    @torch.no_grad()
    def predict(x):
        return m(x).argmax(-1), m(x)

    def saliency(x):
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            score = m(x).logsumexp(-1).sum()
            (g,) = torch.autograd.grad(score, x)
            return score, g

    def score_only(x):
        with torch.enable_grad():
            return m(x).pow(2).sum()

    predict = _compiled(torch, ctx, predict)
    saliency = _compiled(torch, ctx, saliency)
    score_only = _compiled(torch, ctx, score_only)
    rng = np.random.default_rng(11)
    out = []
    for n in (4, 4, 6):
        x = ctx.t(rng.standard_normal((n, 3)).astype(np.float32))
        a, b = predict(x)
        with torch.no_grad():
            s, g = saliency(x)
            c = score_only(x)
        c.backward()
        out.append([a, b, b.requires_grad, s, g, c, c.requires_grad, m.weight.grad.clone()])
    return out


def trainer_bound_method(torch, ctx):
    """A Trainer class whose bound train_step is compiled: gradient accumulation over two
    micro-batches steered by a Python step counter on the trainer, a history list on it, and
    an EMA helper whose no_grad update method (its own counter) is compiled too."""
    nn = torch.nn

    class EMA:
        def __init__(self, model, decay):
            self.decay, self.num_updates = decay, 0
            self.shadow = {k: v.detach().clone() for k, v in model.state_dict().items()}

        @torch.no_grad()
        def update(self, model):
            self.num_updates += 1
            d = min(self.decay, (1 + self.num_updates) / (10 + self.num_updates))
            for k, v in model.state_dict().items():
                self.shadow[k].mul_(d).add_(v, alpha=1 - d)

    class Trainer:
        def __init__(self):
            self.model = ctx.init(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)), "m")
            self.opt = torch.optim.Adam(self.model.parameters(), lr=0.01)
            self.ema = EMA(self.model, 0.99)
            self.global_step, self.accum, self.history = 0, 2, []

        def train_step(self, x, y):
            loss = nn.functional.mse_loss(self.model(x), y) / self.accum
            loss.backward()
            self.global_step += 1
            if self.global_step % self.accum == 0:
                self.opt.step()
                self.opt.zero_grad()
            self.history.append(loss.detach())
            return loss.detach()

    tr = Trainer()
    step = _compiled(torch, ctx, tr.train_step)
    update = _compiled(torch, ctx, tr.ema.update)
    rng = np.random.default_rng(12)
    out = []
    for _ in range(5):
        x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
        y = ctx.t(rng.standard_normal((4, 1)).astype(np.float32))
        out.append(step(x, y))
        update(tr.model)
    return [
        out,
        tr.global_step,
        tr.history,
        tr.model[0].weight.grad,
        tr.ema.shadow,
        tr.ema.num_updates,
    ]


PROGRAMS = [
    varying_batch_training,
    shapes_steer_python,
    conv_varying_images,
    encoder_varying_lengths,
    recurrent_module_state,
    graph_break_side_effects,
    graph_break_training_step,
    inputs_requiring_grad_in_turn,
    module_settings_changed,
    seeded_inside_step,
    teacher_forcing_seq2seq,
    grad_modes_inside,
    trainer_bound_method,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_compiled(program):
    check_program(program, capture=True)
