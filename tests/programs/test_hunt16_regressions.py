"""What hunt16's programs found, reduced, each against PyTorch.

A captured backward gave a zero ``.grad`` to leaves it reaches only through a ``detach()`` (a
GAN's discriminator step on ``G(z).detach()``: the generator's ``.grad`` stayed None eagerly,
became zeros under ``ember.function``) or through an integer value (an argmax fed to an
embedding); ``autograd.grad(..., allow_unused=True)`` gave zeros there instead of None.
"""

import numpy as np
import pytest

from .harness import check_program

torch = pytest.importorskip("torch")


def detached_leaves(torch, ctx):
    nn = torch.nn
    G, D = ctx.init(nn.Linear(2, 3), "G"), ctx.init(nn.Linear(3, 4), "D")
    emb = ctx.init(nn.Embedding(4, 3), "emb")
    opt = torch.optim.SGD(D.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    z = ctx.t(rng.standard_normal((5, 2)).astype(np.float32))

    @ctx.fn
    def d_step(z):
        loss = D(G(z).detach()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, G.weight.grad is None, G.bias.grad is None

    @ctx.fn
    def through_argmax(z):
        idx = D(G(z)).argmax(-1)  # an integer value: no gradient flows back through it
        (emb(idx) * G(z)).sum().backward()
        return G.weight.grad, D.weight.grad is None, emb.weight.grad

    @ctx.fn
    def unused(z):
        out = D(G(z).detach()).sum()
        return torch.autograd.grad(out, [G.weight, D.bias], allow_unused=True)

    out = [d_step(z), d_step(z)]
    D.zero_grad()
    out.append(through_argmax(z))
    gw, gb = unused(z)
    out += [gw is None, gb]
    return out


@pytest.mark.parametrize("capture", [False, True])
def test_detached_leaves_keep_none_grads(capture):
    check_program(detached_leaves, capture=capture)
