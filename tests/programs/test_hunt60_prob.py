"""Programs of hunt60 on torch.distributions and module surgery as research code uses them: a
VAE with an Independent(Normal) posterior, a LowRankMultivariateNormal prior and the analytic
KL; a SAC-style squashed Gaussian through TransformedDistribution with a ComposeTransform and
its log-det; a mixture density network with MixtureSameFamily; concentration gradients of
Beta/Dirichlet/Gamma log-probs and their entropies and KLs; a discrete policy with
Categorical(logits), entropy bonus and OneHotCategorical; module surgery with
_load_from_state_dict migrating an old checkpoint version, strict=False results, non-persistent
buffers, named_modules(remove_duplicate=False) and set_submodule; and a BatchNorm training step
captured by ember.function with its running statistics.
"""


import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def _x(ctx, shape, seed=0, grad=False, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return ctx.t(rng.standard_normal(shape).astype(dtype), requires_grad=grad)


def vae_lowrank_prior(torch, ctx):
    """A VAE step: the encoder gives Independent(Normal(mu, sigma), 1); the reparameterised
    sample uses noise drawn from NumPy; the prior is LowRankMultivariateNormal with a learned
    factor; KL by Monte Carlo (log q - log p) and the analytic KL of the posterior to a
    standard Normal via kl_divergence; Bernoulli(logits) reconstruction log-likelihood."""
    nn = torch.nn
    D = torch.distributions

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 6))
            self.dec = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 6))
            self.cov_factor = nn.Parameter(torch.full((3, 1), 0.2))
            self.cov_diag_raw = nn.Parameter(torch.zeros(3))

    vae = ctx.init(VAE())
    x = ctx.t((np.random.default_rng(0).uniform(size=(5, 6)) < 0.5).astype(np.float32))
    eps = _x(ctx, (5, 3), 1)
    opt = torch.optim.Adam(vae.parameters(), lr=1e-2)
    out = []
    for _ in range(2):
        mu, log_sigma = vae.enc(x).chunk(2, -1)
        q = D.Independent(D.Normal(mu, log_sigma.exp()), 1)
        z = mu + log_sigma.exp() * eps
        prior = D.LowRankMultivariateNormal(torch.zeros(3), vae.cov_factor, nn.functional.softplus(vae.cov_diag_raw) + 1e-3)
        kl_mc = q.log_prob(z) - prior.log_prob(z)
        kl_std = D.kl_divergence(q, D.Independent(D.Normal(torch.zeros(3), torch.ones(3)), 1))
        rec = D.Independent(D.Bernoulli(logits=vae.dec(z)), 1).log_prob(x)
        loss = (kl_mc - rec).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [loss.item(), kl_std, prior.variance, prior.entropy()]
    return out + [vae.cov_factor.grad, vae.enc[0].weight.grad, q.batch_shape, q.event_shape]


def squashed_gaussian_policy(torch, ctx):
    """SAC's actor: Normal(mu, std) pushed through TransformedDistribution with TanhTransform
    and an AffineTransform to the action bounds (a ComposeTransform); rsample with a given
    noise via the base's rsample replaced by mu + std * eps; log_prob of the squashed action vs
    the hand-written tanh correction; the actor loss alpha * logp - Q."""
    nn = torch.nn
    D = torch.distributions
    T = D.transforms
    actor = ctx.init(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 4)), "actor")
    q = ctx.init(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1)), "q")
    obs = _x(ctx, (7, 4), 2)
    eps = _x(ctx, (7, 2), 3)
    mu, log_std = actor(obs).chunk(2, -1)
    log_std = log_std.clamp(-5, 2)
    std = log_std.exp()
    squash = T.ComposeTransform([T.TanhTransform(cache_size=1), T.AffineTransform(loc=torch.tensor([0.0, 1.0]), scale=torch.tensor([2.0, 0.5]))])
    dist = D.TransformedDistribution(D.Normal(mu, std), [squash])
    u = mu + std * eps
    a = squash(u)
    logp = dist.log_prob(a).sum(-1)
    manual = (D.Normal(mu, std).log_prob(u) - torch.log(1 - torch.tanh(u) ** 2 + 1e-6) - torch.log(torch.tensor([2.0, 0.5]))).sum(-1)
    loss = (0.2 * logp - q(torch.cat([obs, a], -1)).squeeze(-1)).mean()
    loss.backward()
    return [a, logp, manual, loss, actor[0].weight.grad, squash.inv(a), dist.support.upper_bound if hasattr(dist.support, "upper_bound") else 0.0]


def mdn_mixture(torch, ctx):
    """A mixture density network: pi logits, means and log-scales for a 2-D target with
    MixtureSameFamily(Categorical(logits), Independent(Normal, 1)); the NLL trained two steps,
    the mixture's mean and variance, and component posteriors via log_prob of each component."""
    nn = torch.nn
    D = torch.distributions
    K = 3
    net = ctx.init(nn.Sequential(nn.Linear(2, 24), nn.Tanh(), nn.Linear(24, K * 5)))
    x = _x(ctx, (9, 2), 4)
    y = _x(ctx, (9, 2), 5)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.5)
    losses = []
    for _ in range(2):
        p = net(x)
        logits, mu, log_s = p[:, :K], p[:, K:3 * K].view(-1, K, 2), p[:, 3 * K:].view(-1, K, 2)
        comp = D.Independent(D.Normal(mu, log_s.exp()), 1)
        mix = D.MixtureSameFamily(D.Categorical(logits=logits), comp)
        loss = -mix.log_prob(y).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    post = torch.log_softmax(logits, -1) + comp.log_prob(y.unsqueeze(1))
    post = post - post.logsumexp(-1, keepdim=True)
    return [losses, mix.mean, mix.variance, post.exp(), net[2].bias.grad]


def concentration_grads(torch, ctx):
    """Gradients of log-probs with respect to concentration parameters (digamma/lgamma):
    Beta, Dirichlet, Gamma(rate), plus their entropies; KL(Beta||Beta), KL(Dirichlet||Dirichlet),
    KL(Gamma||Gamma); Kumaraswamy-free moments: mean and variance."""
    D = torch.distributions
    a = ctx.t(np.array([0.7, 2.0, 5.0], np.float32), requires_grad=True)
    b = ctx.t(np.array([1.5, 0.9, 3.0], np.float32), requires_grad=True)
    alpha = ctx.t(np.array([[0.5, 1.0, 2.0], [3.0, 0.2, 1.1]], np.float32), requires_grad=True)
    x01 = ctx.t(np.array([0.2, 0.5, 0.9], np.float32))
    simplex = ctx.t(np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]], np.float32))
    beta = D.Beta(a, b)
    dirich = D.Dirichlet(alpha)
    gamma = D.Gamma(a, b)
    total = beta.log_prob(x01).sum() + dirich.log_prob(simplex).sum() + gamma.log_prob(x01 * 3).sum()
    total = total + beta.entropy().sum() + dirich.entropy().sum() + gamma.entropy().sum()
    kls = [D.kl_divergence(beta, D.Beta(b, a)), D.kl_divergence(dirich, D.Dirichlet(alpha.flip(-1).detach())), D.kl_divergence(gamma, D.Gamma(b.detach(), a.detach()))]
    (total + sum(k.sum() for k in kls)).backward()
    return [total, kls, a.grad, b.grad, alpha.grad, beta.mean, beta.variance, dirich.mean, dirich.variance, gamma.variance]


def discrete_policy(torch, ctx):
    """An actor-critic step on a discrete action space: Categorical(logits=...) with given
    actions, log_prob/entropy, advantage-weighted loss with an entropy bonus, the value loss
    by smooth_l1; OneHotCategorical's log_prob of one-hot actions; probs normalisation."""
    nn = torch.nn
    D = torch.distributions
    body = ctx.init(nn.Sequential(nn.Linear(5, 32), nn.Tanh(), nn.Linear(32, 4 + 1)))
    obs = _x(ctx, (8, 5), 6)
    actions = ctx.t(np.array([0, 3, 1, 1, 2, 0, 3, 2]))
    returns = _x(ctx, (8,), 7)
    out = body(obs)
    logits, value = out[:, :4], out[:, 4]
    dist = D.Categorical(logits=logits)
    logp = dist.log_prob(actions)
    adv = (returns - value).detach()
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    loss = -(logp * adv).mean() - 0.01 * dist.entropy().mean() + 0.5 * nn.functional.smooth_l1_loss(value, returns)
    loss.backward()
    oh = D.OneHotCategorical(logits=logits.detach())
    oh_lp = oh.log_prob(nn.functional.one_hot(actions, 4).float())
    cat_p = D.Categorical(probs=torch.tensor([[1.0, 3.0], [2.0, 2.0]]))
    return [logp, dist.entropy(), loss, body[0].weight.grad, oh_lp, cat_p.probs, cat_p.logits, dist.mode]


def load_surgery(torch, ctx):
    """Module surgery: a layer whose _load_from_state_dict migrates version-1 checkpoints (a
    renamed 'gamma' to 'weight', recorded in _version metadata), load_state_dict(strict=False)
    reporting missing and unexpected keys, a non-persistent buffer absent from the state_dict,
    named_modules(remove_duplicate=False) listing a shared module twice, get_submodule,
    set_submodule replacing a layer, and apply() re-initialising Linear layers."""
    nn = torch.nn

    class Scale(nn.Module):
        _version = 2

        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))
            self.register_buffer("mask", torch.ones(n), persistent=False)

        def _load_from_state_dict(self, sd, prefix, local_metadata, strict, missing, unexpected, errors):
            version = local_metadata.get("version", None)
            if (version is None or version < 2) and prefix + "gamma" in sd:
                sd[prefix + "weight"] = sd.pop(prefix + "gamma")
            super()._load_from_state_dict(sd, prefix, local_metadata, strict, missing, unexpected, errors)

        def forward(self, x):
            return x * self.weight * self.mask

    shared = nn.Linear(3, 3)
    net = nn.Sequential(shared, Scale(3), nn.ReLU(), shared)
    net = ctx.init(net)
    sd = net.state_dict()
    meta = sd._metadata["1"]["version"]
    old = {"0.weight": sd["0.weight"], "0.bias": sd["0.bias"], "1.gamma": torch.tensor([2.0, 3.0, 4.0])}
    old = type(sd)(old)
    old._metadata = {"1": {"version": 1}}
    net2 = nn.Sequential(nn.Linear(3, 3), Scale(3), nn.ReLU(), nn.Linear(3, 3))
    res = net2.load_state_dict(old, strict=False)
    names = [n for n, _ in net.named_modules(remove_duplicate=False)]
    names_dedup = [n for n, _ in net.named_modules()]
    sub = net.get_submodule("1")
    net.set_submodule("2", nn.Tanh())

    def init(m):
        if isinstance(m, nn.Linear):
            with torch.no_grad():
                m.weight.fill_(0.1)
                m.bias.zero_()

    net2.apply(init)
    x = _x(ctx, (2, 3), 8)
    return [meta, sorted(res.missing_keys), sorted(res.unexpected_keys), net2[1].weight, list(sd.keys()), names, names_dedup, type(sub).__name__, net(x), net2(x), type(net[2]).__name__]


def captured_bn_training(torch, ctx):
    """A CNN with BatchNorm trained by a step captured with ember.function (forward, loss,
    backward, SGD step inside); running statistics and num_batches_tracked after three steps,
    then an eval-mode prediction; momentum=None (cumulative averaging) on the second BN."""
    nn = torch.nn
    model = ctx.init(nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 3, stride=2), nn.BatchNorm2d(4, momentum=None), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = _x(ctx, (4, 2, 7, 7), 9)
    y = ctx.t(np.array([0, 2, 1, 0]))

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(x, y).item() for _ in range(3)]
    model.eval()
    with torch.no_grad():
        pred = model(x)
    return [losses, model[1].running_mean, model[1].running_var, model[4].running_mean, model[4].running_var, model[4].num_batches_tracked, pred]


def inplace_view_updates(torch, ctx):
    """In-place updates through views as training code writes them: a slice of a non-leaf
    scaled in place, x[mask] = value on a clone with grads flowing, a transposed view's add_,
    unsqueeze_/squeeze_ on a non-leaf, masked_fill_ on a narrowed view, copy_ into a column
    of a buffer under no_grad, and index_put_ via advanced indexing with a tensor value."""
    w = _x(ctx, (4, 5), 10, True)
    v = _x(ctx, (3,), 11, True)
    h = w * 2
    h[1:3, ::2] *= 3
    h2 = h.clone()
    h2[h2 > 1.0] = 0.5
    t = h2.t()
    t.add_(1)
    h3 = h2.sum(0)
    h3.unsqueeze_(0)
    h3.mul_(0.5)
    n = h2.narrow(1, 1, 3)
    n.masked_fill_(n < 0, -1.0)
    idx = ctx.t(np.array([0, 2, 3]))
    h2[idx, 0] = v * 10
    buf = torch.zeros(4, 5)
    with torch.no_grad():
        buf[:, 2].copy_(w[:, 0])
    loss = (h2 * h2).sum() + h3.sum() + (buf * h2).sum()
    loss.backward()
    return [h2, h3, buf, w.grad, v.grad, h3.shape]


PROGRAMS = [vae_lowrank_prior, squashed_gaussian_policy, mdn_mixture, concentration_grads, discrete_policy, load_surgery, captured_bn_training, inplace_view_updates]
CAPTURED = [captured_bn_training]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True, rtol=1e-4, atol=1e-5)
