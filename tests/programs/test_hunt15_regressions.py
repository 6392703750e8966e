"""What hunt15's programs found, reduced.

A captured function that reads a parameter's ``.grad`` made by an eager backward outside it
(an optimizer step, gradient statistics or clipping captured apart from the forward and
backward) fed its graph from the gradient tensor it saw while tracing. ``zero_grad()`` (None)
and the next eager backward make a new tensor, so every later call read the first call's
gradient: the captured ``clip_grad_norm_`` + ``opt.step()`` of a gradient-accumulation loop
stepped with stale gradients.

An in-place op on a view of a parameter inside a captured step (``m.weight[:, 0].clamp_(...)``
under no_grad after ``opt.step()``: weight masking, max-norm constraints) raised AttributeError:
the write-through compared the eager base's version counter with the graph view's, which has
none.

A captured function kept running its first graph after a module hook was registered or
removed, or a submodule without tensors was replaced (``seq[1] = nn.Tanh()``): neither was in
its cache key, and registering a hook did not send a call past its guard. Nor was a Python
attribute that a nested user module's forward reads (``model.attn.causal = True``): only the
modules the function names had their forward's reads guarded; nor a function rebound (a
global helper, ``self.act = F.relu`` in place of ``F.gelu``): functions were not guarded; nor
an attribute of a plain object a module holds (``self.config.temperature``), nor one a nested
module's helper method reads (``self._mask`` reading ``self.causal``).
"""

import numpy as np
import pytest

import ember

from .harness import check_program

torch = pytest.importorskip("torch")


def grads_made_outside(torch, ctx):
    nn = torch.nn
    m = ctx.init(nn.Linear(3, 2))
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    z = torch.zeros(4, 2, requires_grad=True)  # a latent optimized beside the model

    @ctx.fn
    def update():
        norm = nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        opt.step()
        opt.zero_grad()  # (set_to_none: the next backward makes new tensors)
        return norm, z.grad.norm()

    @ctx.fn
    def apply_step():
        opt.step()

    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
    out = []
    for i in range(4):
        z.grad = None
        ((m(x) * (i + 1) + z).pow(2).mean()).backward()
        out.append(update())
    for i in range(2):
        m.zero_grad()
        m(x).sum().backward()
        m.weight.grad.data = m.weight.grad.data * (i + 2)  # a new array behind the same tensor
        m.bias.grad = torch.full_like(m.bias, float(i + 1))  # a new tensor
        apply_step()
        out.append([m.weight.clone(), m.bias.clone()])
    return out


def test_grads_made_outside_a_captured_function():
    check_program(grads_made_outside, capture=True)


def view_writes_on_params(torch, ctx):
    nn = torch.nn
    m = ctx.init(nn.Linear(4, 4))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    keep = ctx.t(np.array([[True, False, True, False]] * 4))

    @ctx.fn
    def step(x):
        loss = m(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            m.weight[:, 0].clamp_(-0.1, 0.1)
            m.weight.data[:, 1].clamp_(-0.05, 0.05)
            m.weight.copy_(torch.where(keep, m.weight, m.weight * 0.5))
            m.weight.T[0].add_(0.01)
            m.weight.view(-1)[::5].mul_(0.9)
            m.weight.diagonal().clamp_(min=0.0)
            m.weight.unsqueeze(0)[0, 3].sub_(0.01)
            nn.init.zeros_(m.bias[2:])
            m.bias.narrow(0, 0, 1).fill_(0.25)
        return loss

    x = ctx.t(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    return [[step(x) for _ in range(3)], m.weight, m.bias, m.weight.grad]


def test_view_writes_on_params_in_a_captured_step():
    check_program(view_writes_on_params, capture=True)


def hooks_and_submodules_changed(torch, ctx):
    nn = torch.nn
    m = ctx.init(nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1)))
    opt = torch.optim.SGD(m.parameters(), lr=0.0)  # (a key built on every call)
    f = ctx.fn(lambda x: m(x).sum())
    g = ctx.fn(lambda x: (m(x).sum(), opt)[0])
    x = ctx.t(np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32))
    out = [f(x), g(x)]
    h = m[0].register_forward_hook(lambda mod, i, o: o * 2)
    out += [f(x), g(x)]
    h.remove()
    out += [f(x), g(x)]
    h = m[2].register_forward_pre_hook(lambda mod, i: (i[0] + 1,))
    out += [f(x), g(x)]
    h.remove()
    hg = torch.nn.modules.module.register_module_forward_hook(lambda mod, i, o: o + 0.5)
    out += [f(x), g(x)]
    hg.remove()
    m[1] = nn.Tanh()
    out += [f(x), g(x)]
    return out


def test_hooks_and_submodules_changed_between_calls():
    check_program(hooks_and_submodules_changed, capture=True)


class Config:
    def __init__(self):
        self.temperature = 1.0


def nested_module_flag(torch, ctx):
    nn = torch.nn
    config = Config()

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(3, 3)
            self.causal = False
            self.scale = 1.0
            self.act = torch.nn.functional.gelu
            self.config = config

        def _mask(self, a):
            if self.causal:
                a = a.masked_fill(torch.ones(3, 3, dtype=torch.bool).triu(1), float("-inf"))
            return a

        def forward(self, x):
            a = self._mask(self.q(x) @ x.transpose(-1, -2) * self.scale)
            return self.act((a / self.config.temperature).softmax(-1) @ x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Attn(), Attn()])

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x

    m = ctx.init(Net())
    f = ctx.fn(m)
    x = ctx.t(np.random.default_rng(0).standard_normal((1, 3, 3)).astype(np.float32))
    out = [f(x)]
    m.blocks[1].causal = True
    out.append(f(x))
    m.blocks[0].scale = 0.5
    out.append(f(x))
    m.blocks[1].causal = False
    out.append(f(x))
    m.blocks[0].act = torch.tanh
    out.append(f(x))
    config.temperature = 2.0
    out.append(f(x))
    return out


def test_nested_module_flag_changed_between_calls():
    check_program(nested_module_flag, capture=True)


def test_grad_read_is_fed_from_the_owner_each_call():
    w = ember.nn.Parameter(ember.ones(2))
    read = ember.function(lambda: w.grad.sum())
    sums = []
    for scale in (1.0, 2.0, 3.0):
        w.grad = None
        (w * scale).sum().backward()
        sums.append(read().item())
    assert sums == [2.0, 4.0, 6.0]
