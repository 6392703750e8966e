"""Programs of hunt59 on higher-order autograd, run on PyTorch and on ember: a WGAN-GP critic's
gradient penalty (autograd.grad with create_graph through LayerNorm and LeakyReLU), a MAML
inner loop on functional_call fast weights, Hessian-vector products by double backward and by
torch.autograd.functional, straight-through estimators as custom Functions, tensor hooks
that rescale and record gradients, post-accumulate-grad hooks stepping an optimizer per
parameter, and torch.func transforms (jvp, vjp, linearize, jacrev of a module) inside training.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def wgan_gp(torch, ctx):
    """Two critic steps and one generator step of WGAN-GP: the penalty's gradient of the
    critic's output at points between real and fake samples, taken with create_graph and
    differentiated again by the critic's backward; Adam with betas (0, 0.9)."""
    nn = torch.nn
    critic = ctx.init(
        nn.Sequential(nn.Linear(4, 16), nn.LayerNorm(16), nn.LeakyReLU(0.2), nn.Linear(16, 1)),
        "critic",
    )
    gen = ctx.init(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 4)), "gen")
    # (eps 1e-6: a gradient element that is rounding noise, as LayerNorm's bias has, would
    # otherwise step by up to lr either way depending on the products' summation order)
    opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.0, 0.9), eps=1e-6)
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3, betas=(0.0, 0.9), eps=1e-6)
    rng = np.random.default_rng(1)
    out = []

    def critic_step(real, z, eps):
        fake = gen(z).detach()
        interp = (eps * real + (1 - eps) * fake).requires_grad_(True)
        score = critic(interp)
        (g,) = torch.autograd.grad(
            outputs=score,
            inputs=interp,
            grad_outputs=torch.ones_like(score),
            create_graph=True,
            retain_graph=True,
        )
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        loss_c = critic(fake).mean() - critic(real).mean() + 10 * gp
        opt_c.zero_grad()
        loss_c.backward()
        opt_c.step()
        return gp.detach(), loss_c.detach()

    critic_step = ctx.fn(critic_step)
    for step in range(2):
        real = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))
        z = ctx.t(rng.standard_normal((6, 3)).astype(np.float32))
        eps = ctx.t(rng.uniform(size=(6, 1)).astype(np.float32))
        out += list(critic_step(real, z, eps))
    z = ctx.t(rng.standard_normal((6, 3)).astype(np.float32))
    loss_g = -critic(gen(z)).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    return out + [loss_g.detach(), [p.detach() for p in critic.parameters()], gen[0].weight.grad]


def maml_inner_loop(torch, ctx):
    """Second-order MAML: two inner SGD steps on fast weights by autograd.grad with
    create_graph, the query loss through functional_call, the meta gradient summed over two
    tasks and an outer Adam step; then first-order MAML (create_graph=False) for comparison."""
    nn = torch.nn
    F = nn.functional
    fc = torch.func.functional_call
    net = ctx.init(nn.Sequential(nn.Linear(1, 12), nn.ReLU(), nn.Linear(12, 1)), "net")
    meta = torch.optim.Adam(net.parameters(), lr=1e-2)
    rng = np.random.default_rng(2)
    tasks = []
    for _ in range(2):
        a, ph = rng.uniform(0.5, 2), rng.uniform(0, 3)
        xs = rng.uniform(-3, 3, (5, 1)).astype(np.float32)
        xq = rng.uniform(-3, 3, (5, 1)).astype(np.float32)
        tasks.append(
            tuple(ctx.t(v) for v in (xs, (a * np.sin(xs + ph)).astype(np.float32), xq, (a * np.sin(xq + ph)).astype(np.float32)))
        )
    def adapt(xs, ys, xq, yq, second_order):
        fast = dict(net.named_parameters())
        for _ in range(2):
            loss = F.mse_loss(fc(net, fast, (xs,)), ys)
            grads = torch.autograd.grad(loss, list(fast.values()), create_graph=second_order)
            fast = {k: w - 0.1 * g for (k, w), g in zip(fast.items(), grads)}
        q = F.mse_loss(fc(net, fast, (xq,)), yq)
        q.backward()
        return q.detach()

    adapt = ctx.fn(adapt)
    out = []
    for second_order in (True, False):
        meta.zero_grad()
        total = 0.0
        for xs, ys, xq, yq in tasks:
            total += adapt(xs, ys, xq, yq, second_order).item()
        out.append(total)
        out.append([p.grad.clone() for p in net.parameters()])
        meta.step()
    return out + [net[2].weight]


def hessian_vector(torch, ctx):
    """Hessian-vector products of a small network's loss: Pearlmutter's double backward
    (grad of grad·v), torch.autograd.functional.hvp and vhp, the full hessian of a scalar
    function, and grad_outputs given for a vector output with retain_graph reused twice."""
    nn = torch.nn
    net = ctx.init(nn.Sequential(nn.Linear(3, 4), nn.Softplus(), nn.Linear(4, 1)), "net")
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))
    y = ctx.t(rng.standard_normal((5, 1)).astype(np.float32))
    params = list(net.parameters())
    loss = ((net(x) - y) ** 2).mean()
    grads = torch.autograd.grad(loss, params, create_graph=True)
    vs = [ctx.t(rng.standard_normal(tuple(p.shape)).astype(np.float32)) for p in params]
    dot = sum((g * v).sum() for g, v in zip(grads, vs))
    hv = torch.autograd.grad(dot, params, retain_graph=True)
    hv2 = torch.autograd.grad(dot, params[0])

    def f(w):
        return (torch.tanh(x @ w) ** 2).sum()

    w = ctx.t(rng.standard_normal(3).astype(np.float32))
    v = ctx.t(rng.standard_normal(3).astype(np.float32))
    val, hvp = torch.autograd.functional.hvp(f, w, v)
    _, vhp = torch.autograd.functional.vhp(f, w, v)
    H = torch.autograd.functional.hessian(f, w)
    J = torch.autograd.functional.jacobian(lambda a: torch.softmax(a, 0) * a.sum(), w)
    z = (x * 2).requires_grad_()
    o = z.exp() * z
    g1 = torch.autograd.grad(o, z, grad_outputs=torch.ones_like(o), retain_graph=True)[0]
    g2 = torch.autograd.grad(o, z, grad_outputs=2 * torch.ones_like(o))[0]
    return [list(hv), hv2[0], val, hvp, vhp, H, J, g1, g2]


def straight_through(torch, ctx):
    """Straight-through estimators: a sign quantizer whose backward passes the gradient
    clipped to |x| <= 1 (once_differentiable), a rounding Function with the
    x + (round(x) - x).detach() trick, and a vector quantizer's commitment loss with the
    codebook picked by argmin; a training loop of an autoencoder on them."""
    nn = torch.nn
    F = nn.functional
    once_differentiable = torch.autograd.function.once_differentiable

    class SignSTE(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x):
            ctx_.save_for_backward(x)
            return x.sign()

        @staticmethod
        @once_differentiable
        def backward(ctx_, g):
            (x,) = ctx_.saved_tensors
            return g * (x.abs() <= 1).to(g.dtype)

    enc = ctx.init(nn.Linear(6, 4), "enc")
    dec = ctx.init(nn.Linear(4, 6), "dec")
    codebook = ctx.init(nn.Embedding(5, 4), "cb")
    opt = torch.optim.SGD(
        list(enc.parameters()) + list(dec.parameters()) + list(codebook.parameters()),
        lr=0.05,
        momentum=0.9,
        nesterov=True,
    )
    rng = np.random.default_rng(4)
    out = []

    def step(x):
        h = enc(x)
        b = SignSTE.apply(h)
        r = h + (torch.round(h * 2) / 2 - h).detach()
        d = torch.cdist(h, codebook.weight)
        idx = d.argmin(dim=1)
        q = codebook(idx)
        commit = F.mse_loss(h, q.detach()) + F.mse_loss(q, h.detach())
        q_st = h + (q - h).detach()
        loss = F.mse_loss(dec(b + r + q_st), x) + 0.25 * commit
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), idx

    step = ctx.fn(step)
    for _ in range(3):
        out += list(step(ctx.t(rng.standard_normal((8, 6)).astype(np.float32))))
    return out + [enc.weight.grad, codebook.weight]


def tensor_hooks(torch, ctx):
    """Tensor hooks in training: a hook on an activation that scales its gradient, one that
    records gradient norms into a list, retain_grad on a non-leaf, a hook removed by its
    handle, hooks on a leaf parameter (returning None) and post-accumulate-grad hooks that
    step a per-parameter optimizer and zero the grad (optimizer-in-backward)."""
    nn = torch.nn
    net = ctx.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)), "net")
    rng = np.random.default_rng(5)
    norms = []
    opts = {p: torch.optim.SGD([p], lr=0.1) for p in net.parameters()}

    def step_hook(p):
        opts[p].step()
        opts[p].zero_grad()

    handles = [p.register_post_accumulate_grad_hook(step_hook) for p in net.parameters()]
    seen = []
    leaf_handle = net[0].weight.register_hook(lambda g: seen.append(tuple(g.shape)))
    out = []
    for i in range(3):
        x = ctx.t(rng.standard_normal((5, 4)).astype(np.float32))
        h = net[0](x)
        h.retain_grad()
        h.register_hook(lambda g: g * 0.5)
        a = net[1](h)
        hd = a.register_hook(lambda g: norms.append(g.norm().item()))
        if i == 1:
            hd.remove()
        y = net[2](a)
        loss = (y**2).sum()
        loss.backward()
        out += [h.grad, loss.detach()]
    leaf_handle.remove()
    for hd in handles:
        hd.remove()
    return out + [norms, seen, net[2].weight, net[0].weight.grad is None]


def func_in_training(torch, ctx):
    """torch.func transforms inside a training step: jvp of a module's function of its input
    (forward-mode directional derivative as a regularizer term's value), vjp with a
    function returning a tuple, linearize reused for two tangents, jacrev of
    functional_call with respect to the parameter dict, and a Jacobian-norm penalty from
    vmap(jacrev) added to the loss and trained."""
    nn = torch.nn
    tf = torch.func
    net = ctx.init(nn.Sequential(nn.Linear(3, 5), nn.SiLU(), nn.Linear(5, 2)), "net")
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    rng = np.random.default_rng(6)
    x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
    t = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
    y, dy = tf.jvp(lambda a: net(a), (x,), (t,))
    out2, vjp_fn = tf.vjp(lambda a, b: (net(a) * b.sum(), a.sum()), x, t)
    cot = vjp_fn((torch.ones_like(out2[0]), torch.ones_like(out2[1])))
    yl, lin = tf.linearize(lambda a: torch.sin(a).cumsum(0), x[0])
    l1, l2 = lin(t[0]), lin(2 * t[0])
    params = {k: v.detach() for k, v in net.named_parameters()}
    jp = tf.jacrev(lambda p: tf.functional_call(net, p, (x[:2],)))(params)
    def step(x):
        jac = tf.vmap(tf.jacrev(lambda a: net(a)))(x)
        loss = net(x).pow(2).mean() + 0.1 * jac.pow(2).sum(dim=(1, 2)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), jac.detach()

    step = ctx.fn(step)
    losses = []
    for _ in range(2):
        loss, jac = step(x)
        losses.append(loss)
    return [y, dy, out2, list(cot), yl, l1, l2, {k: v for k, v in jp.items()}, losses, jac]


PROGRAMS = [wgan_gp, maml_inner_loop, hessian_vector, straight_through, tensor_hooks, func_in_training]
CAPTURED = [wgan_gp, straight_through, maml_inner_loop, func_in_training]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
