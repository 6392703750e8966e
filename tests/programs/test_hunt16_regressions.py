"""What hunt16's programs found, reduced, each against PyTorch.

A captured backward gave a zero ``.grad`` to leaves it reaches only through a ``detach()`` (a
GAN's discriminator step on ``G(z).detach()``: the generator's ``.grad`` stayed None eagerly,
became zeros under ``ember.function``) or through an integer value (an argmax fed to an
embedding); ``autograd.grad(..., allow_unused=True)`` gave zeros there instead of None.

``diagonal()`` of a tensor whose plane was not one strided run (a column slice, a transpose) was
a copy: ``x[:, :3].diagonal().zero_()`` and ``x.t().diagonal().fill_(v)`` left ``x`` unchanged,
where PyTorch's diagonal is always a view.

In a captured function, ``contiguous()`` of a strided view (``h.T.contiguous()``) returned the
view itself, so writing into the "copy" wrote ``h``; eagerly it is a copy. ``is_contiguous()``
said True for every graph value, transposes included.

In a captured function, ``h.detach()`` of a graph value was a new value: an in-place write into
it (``h.detach()[0].fill_(v)``, ``h[:, 1].detach().mul_(k)``) did not reach ``h``, and it did
not see ``h``'s later writes; PyTorch's detach shares the memory (as ``.data`` did already).

The in-place shape changes (``t_``, ``transpose_``, ``unsqueeze_``, ``squeeze_``,
``swapdims_``) raised under ember.function; they rebind the traced tensor to its view now (a view
of a base staying one, so a later write through it still reaches the base).
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


def diagonal_views(torch, ctx):
    out = []
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for write in (
        lambda x: x[0, :, :3].diagonal().zero_(),
        lambda x: x[1, :, 1:].diagonal(offset=1).fill_(-1.0),
        lambda x: x[0].t().diagonal(-1).mul_(10.0),
        lambda x: x.diagonal(0, 1, 2).add_(100.0),  # (2, 3): batched, dims 1 and 2
        lambda x: x.permute(2, 0, 1)[1:].diagonal(0, 0, 2).neg_(),
        lambda x: x.transpose(0, 2).diagonal(dim1=0, dim2=1).copy_(torch.full((2, 3), 7.0)),
    ):
        x = ctx.t(base.copy())
        write(x)
        out.append(x)
    # through autograd: a diagonal of a slice of a non-leaf written in place
    w = ctx.t(base[0], requires_grad=True)

    @ctx.fn
    def f(w):
        h = w * 2.0
        h[:, 1:].diagonal().mul_(w[:, 0])
        y = (h * h).sum()
        y.backward()
        return y, h

    y, h = f(w)
    out += [y, h, w.grad, x.diagonal(0, 0, 1).is_contiguous()]
    return out


def contiguous_copies(torch, ctx):
    w = ctx.t(np.arange(12, dtype=np.float32).reshape(3, 4) / 4, requires_grad=True)

    @ctx.fn
    def f(w):
        h = w * 2.0
        flags = [h.is_contiguous(), h.T.is_contiguous(), h[1].is_contiguous(),
                 h[:, 1].is_contiguous(), h[:, :2].is_contiguous(), h[1:].is_contiguous(),
                 h.unsqueeze(0).is_contiguous(), h[:, 1:2].is_contiguous()]  # fmt: skip
        e = h.T.contiguous()
        e[0] = 100.0  # a copy: h is unchanged
        r = h[1].contiguous()
        r.mul_(3.0)  # the row itself (contiguous): h's row 1 is tripled
        c = h[:, :2].contiguous()
        c.zero_()  # a copy
        loss = (h * e.T).sum() + c.sum()
        loss.backward()
        return flags, h, e, loss

    return [f(w), w.grad]


def detached_aliases(torch, ctx):
    w = ctx.t(np.arange(6, dtype=np.float32).reshape(2, 3) / 3, requires_grad=True)

    @ctx.fn
    def f(w):
        h = w * 2.0
        d = h.detach()
        d[0].fill_(5.0)  # writes h (without history: h's gradient is still 2)
        h[:, 1].detach().mul_(10.0)
        k = h.view(-1)[2:4].detach().clone()
        k.zero_()  # a copy: h is unchanged
        h.add_(1.0)
        seen = d * 1.0  # the alias reads h's later write
        loss = (h * w).sum()
        loss.backward()
        return h, seen, d.requires_grad, loss

    return [f(w), w.grad]


@pytest.mark.parametrize("capture", [False, True])
def test_detach_aliases_its_tensor(capture):
    check_program(detached_aliases, capture=capture)


def shape_changes_in_place(torch, ctx):
    w = ctx.t(np.arange(12, dtype=np.float32).reshape(3, 4) / 4, requires_grad=True)

    @ctx.fn
    def f(w):
        h = w * 1.5
        h.t_()  # (4, 3)
        h[0] += 1.0
        h.unsqueeze_(0)  # (1, 4, 3)
        g = h.squeeze(0)
        g[:, 1] *= w[0]
        h.squeeze_(0)
        v = h[1:]  # a view of h, made a view of its transpose, written through
        v.transpose_(0, 1)  # (3, 3)
        v[0].mul_(-2.0)
        v.swapdims_(0, 1).unsqueeze_(-1)  # (3, 3, 1)
        v[2, 0].zero_()
        loss = (h * h).sum() + g[0].sum() + v.sum()
        loss.backward()
        return loss, h, v, g.shape, v.shape

    return [f(w), w.grad]


@pytest.mark.parametrize("capture", [False, True])
def test_shape_changes_in_place(capture):
    check_program(shape_changes_in_place, capture=capture)


@pytest.mark.parametrize("capture", [False, True])
def test_contiguous_of_a_view_copies(capture):
    check_program(contiguous_copies, capture=capture)


@pytest.mark.parametrize("capture", [False, True])
def test_detached_leaves_keep_none_grads(capture):
    check_program(detached_leaves, capture=capture)


@pytest.mark.parametrize("capture", [False, True])
def test_diagonal_is_a_view(capture):
    check_program(diagonal_views, capture=capture)
