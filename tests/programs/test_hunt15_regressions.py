"""What hunt15's programs found, reduced.

A captured function that reads a parameter's ``.grad`` made by an eager backward outside it
(an optimizer step, gradient statistics or clipping captured apart from the forward and
backward) fed its graph from the gradient tensor it saw while tracing. ``zero_grad()`` (None)
and the next eager backward make a new tensor, so every later call read the first call's
gradient: the captured ``clip_grad_norm_`` + ``opt.step()`` of a gradient-accumulation loop
stepped with stale gradients.
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


def test_grad_read_is_fed_from_the_owner_each_call():
    w = ember.nn.Parameter(ember.ones(2))
    read = ember.function(lambda: w.grad.sum())
    sums = []
    for scale in (1.0, 2.0, 3.0):
        w.grad = None
        (w * scale).sum().backward()
        sums.append(read().item())
    assert sums == [2.0, 4.0, 6.0]
