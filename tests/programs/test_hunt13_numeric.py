"""Numeric programs: per-sample gradients and Jacobians with torch.func over functional_call,
a vmapped ensemble of batch-norm models (replace_all_batch_norm_modules_, stack_module_state),
a PPO-style update with Independent Normal and Categorical policies and their KLs, boolean-mask
and accumulating index writes with every scatter_reduce mode, bucketize/searchsorted/histc/
unique/bincount/sorting, and a sweep of the tensor methods users call.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def func_per_sample(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func
    m = ctx.init(nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)))
    params = {k: v.detach() for k, v in m.named_parameters()}
    rng = np.random.default_rng(6)
    x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
    y = ctx.t(np.array([0, 1, 1, 0]))

    def loss_fn(p, xi, yi):
        out = from_func.functional_call(m, p, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    g = from_func.vmap(from_func.grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
    lv, gg = from_func.grad_and_value(loss_fn)(params, x[0], y[0])[::-1], None
    jac = from_func.jacrev(lambda xi: from_func.functional_call(m, params, (xi,)))(x[0])
    jf = from_func.jacfwd(lambda xi: m(xi))(x[1])
    batched = from_func.vmap(lambda xi: from_func.functional_call(m, params, (xi,)), out_dims=1)(x)
    hess = from_func.hessian(lambda xi: m(xi).pow(2).sum())(x[2])
    _, vjp_fn = from_func.vjp(lambda xi: m(xi), x[3])
    (vj,) = vjp_fn(torch.ones(2))
    _, jv = from_func.jvp(lambda xi: m(xi), (x[3],), (torch.ones(3),))
    return [g, lv, jac, jf, batched, hess, vj, jv, gg]


def ensemble_bn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func

    def make():
        return nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))

    models = [ctx.init(make(), f"m{i}") for i in range(3)]
    for m in models:
        from_func.replace_all_batch_norm_modules_(m)
    params, buffers = from_func.stack_module_state(models)
    base = make()
    from_func.replace_all_batch_norm_modules_(base)
    rng = np.random.default_rng(40)
    x = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, 5))

    def loss_fn(p, b, x, y):
        return F.cross_entropy(from_func.functional_call(base, (p, b), (x,)), y)

    preds = from_func.vmap(
        lambda p, b, x: from_func.functional_call(base, (p, b), (x,)), in_dims=(0, 0, None)
    )(params, buffers, x)
    grads = from_func.vmap(from_func.grad(loss_fn), in_dims=(0, 0, None, None))(
        params, buffers, x, y
    )
    new = {k: params[k] - 0.1 * grads[k] for k in params}
    after = from_func.vmap(loss_fn, in_dims=(0, 0, None, None))(new, buffers, x, y)
    models[0].eval()
    return [preds, grads, after, sorted(buffers), models[0](x), sorted(models[1].state_dict())]


def dist_policy(torch, ctx):
    nn, _F = torch.nn, torch.nn.functional
    D = torch.distributions

    class Actor(nn.Module):
        def __init__(s):
            super().__init__()
            s.body = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
            s.mu = nn.Linear(16, 2)
            s.log_std = nn.Parameter(torch.zeros(2) - 0.5)
            s.logits = nn.Linear(16, 3)

        def forward(s, obs):
            h = s.body(obs)
            cont = D.Independent(D.Normal(s.mu(h), s.log_std.exp()), 1)
            disc = D.Categorical(logits=s.logits(h))
            return cont, disc

    m = ctx.init(Actor())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(7)
    obs = ctx.t(rng.standard_normal((5, 4)).astype(np.float32))
    a_c = ctx.t(rng.standard_normal((5, 2)).astype(np.float32))
    a_d = ctx.t(rng.integers(0, 3, 5))
    adv = ctx.t(rng.standard_normal(5).astype(np.float32))
    old_lp = ctx.t(rng.standard_normal(5).astype(np.float32) * 0.1 - 3)
    out = []
    for _ in range(3):
        cont, disc = m(obs)
        lp = cont.log_prob(a_c) + disc.log_prob(a_d)
        ratio = (lp - old_lp).exp()
        clipped = torch.clamp(ratio, 0.8, 1.2)
        ent = cont.entropy().mean() + disc.entropy().mean()
        loss = -torch.min(ratio * adv, clipped * adv).mean() - 0.01 * ent
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        opt.step()
        out.append([loss, ent])
    cont, disc = m(obs)
    ref = D.Independent(D.Normal(torch.zeros(2), torch.ones(2)), 1)
    kl = D.kl_divergence(cont, ref)
    kl_c = D.kl_divergence(disc, D.Categorical(probs=torch.ones(3) / 3))
    base = D.Normal(torch.zeros(2), torch.ones(2))
    tanh_d = D.TransformedDistribution(base, [D.transforms.TanhTransform(cache_size=1)])
    u = torch.tensor([0.3, -0.5])
    mvn = D.MultivariateNormal(torch.zeros(2), scale_tril=torch.tensor([[1.0, 0.0], [0.5, 0.8]]))
    return [
        out,
        kl,
        kl_c,
        tanh_d.log_prob(u),
        cont.mean,
        cont.stddev,
        disc.probs,
        cont.batch_shape,
        cont.event_shape,
        mvn.log_prob(u),
        mvn.entropy(),
        mvn.covariance_matrix,
    ]


def indexing_ops(torch, ctx):
    rng = np.random.default_rng(8)
    x = ctx.t(rng.standard_normal((5, 4)).astype(np.float32), requires_grad=True)
    out = {}
    y = x * 1.0
    mask = y > 0
    y[mask] = 0.0
    out["mask_assign"] = y
    z = torch.zeros(6)
    idx = torch.tensor([0, 2, 2, 5, 0])
    z.index_put_((idx,), torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]), accumulate=True)
    out["acc"] = z
    src = x.reshape(-1)
    index = torch.tensor([0, 1, 1, 2, 2, 2, 3, 0, 1, 2, 3, 3, 0, 0, 1, 2, 3, 1, 2, 0])
    for red in ["sum", "prod", "mean", "amax", "amin"]:
        for inc in [True, False]:
            out[f"sr_{red}_{inc}"] = torch.full((4,), 0.5).scatter_reduce(
                0, index, src, reduce=red, include_self=inc
            )
    out["idx_add"] = torch.zeros(3, 4).index_add(0, torch.tensor([0, 2, 0, 1, 2]), x, alpha=2.0)
    out["masked_scatter"] = torch.zeros(5, 4).masked_scatter(x.detach() > 0.5, torch.arange(20.0))
    out["tad"] = torch.take_along_dim(x, x.argsort(dim=1), dim=1)
    out["gather"] = x.gather(1, torch.tensor([[0, 0], [1, 3], [2, 2], [3, 1], [0, 3]]))
    rows = torch.tensor([0, 2, 4])
    cols = torch.tensor([1, 3])
    out["ix"] = x[rows[:, None], cols]
    out["ix2"] = x[[0, 1], [2, 3]]
    out["ell"] = x[..., 1::2]
    out["none"] = x[None, 1:3, None, -1]
    out["bool_row"] = x[torch.tensor([True, False, True, False, True])]
    w = x.clone()
    w[:, 1] += 1.0
    w[1:3] *= 2
    w[w.abs() < 0.3] = torch.tensor(9.0)
    out["w"] = w
    total = sum(v.float().sum() for k, v in out.items() if v.requires_grad)
    total.backward()
    out["g"] = x.grad
    out["nz"] = torch.nonzero(x > 0.5)
    out["nzt"] = torch.nonzero(x > 0.5, as_tuple=True)
    out["where1"] = torch.where(x > 0)
    out["argw"] = torch.argwhere(x < -0.5)
    return out


def sorting_counting(torch, ctx):
    rng = np.random.default_rng(9)
    edges = ctx.t(np.array([0.0, 0.5, 1.0, 2.0]))
    v = ctx.t(np.array([[-1.0, 0.5, 0.7], [1.0, 2.0, 3.0]]))
    out = {}
    out["bk"] = torch.bucketize(v, edges)
    out["bk_r"] = torch.bucketize(v, edges, right=True)
    out["bk_i32"] = torch.bucketize(v, edges, out_int32=True)
    out["ss"] = torch.searchsorted(edges, v)
    out["ss_side"] = torch.searchsorted(edges, v, side="right")
    unsorted = ctx.t(np.array([2.0, 0.0, 1.0, 0.5]))
    out["ss_sorter"] = torch.searchsorted(unsorted, v, sorter=unsorted.argsort())
    out["ss_batch"] = torch.searchsorted(
        torch.tensor([[0.0, 1.0, 2.0], [1.0, 1.5, 4.0]]), torch.tensor([[0.5, 2.5], [1.5, 5.0]])
    )
    d = ctx.t(rng.standard_normal(50).astype(np.float32))
    out["histc"] = torch.histc(d, bins=6, min=-2, max=2)
    out["histc_auto"] = torch.histc(d, bins=4)
    h, e = torch.histogram(d, bins=5)
    out["histogram"] = [h, e]
    ints = ctx.t(np.array([3, 1, 2, 3, 3, 1, 7, 2]))
    u, inv, cnt = torch.unique(ints, return_inverse=True, return_counts=True)
    out["unique"] = [u, inv, cnt]
    out["unique_unsorted_len"] = len(torch.unique(ints, sorted=False))
    m2 = ctx.t(np.array([[1, 2], [3, 4], [1, 2], [0, 9]]))
    out["unique_dim"] = torch.unique(m2, dim=0, return_inverse=True, return_counts=True)
    out["uc"] = torch.unique_consecutive(
        ctx.t(np.array([1, 1, 2, 2, 2, 1, 3, 3])), return_inverse=True, return_counts=True
    )
    out["bincount"] = torch.bincount(ints, weights=torch.arange(8.0), minlength=10)
    s = ctx.t(np.array([3.0, 1.0, 2.0, 1.5, 3.0, 0.0]))
    out["sort_stable"] = torch.sort(s, stable=True, descending=True)
    out["kth"] = torch.kthvalue(s, 3)
    out["mode"] = torch.mode(ctx.t(np.array([[1, 2, 2, 3], [4, 4, 1, 1]])), dim=1)
    out["topk"] = torch.topk(s, 3, largest=False, sorted=True)
    out["msort"] = torch.msort(v.t())
    out["cummax"] = torch.cummax(s, 0)
    out["cummin"] = torch.cummin(s, 0)
    out["median"] = torch.median(s)
    out["nanmedian"] = torch.nanmedian(ctx.t(np.array([1.0, np.nan, 3.0, 2.0])))
    out["quant"] = torch.quantile(d, torch.tensor([0.1, 0.5, 0.9]), interpolation="midpoint")
    out["count_nz"] = torch.count_nonzero(ints > 2)
    out["isin"] = torch.isin(ints, torch.tensor([1, 7]))
    return out


def tensor_methods(torch, ctx):
    rng = np.random.default_rng(13)
    a = ctx.t(rng.standard_normal((3, 4)).astype(np.float32))
    out = []
    out.append(a.unfold(1, 2, 1))
    out.append(a.roll(1, 0).roll(shifts=(1, -1), dims=(0, 1)))
    out.append(a.flip(0, 1).fliplr().flipud())
    out.append(a.tril(-1) + a.triu(2))
    out.append(a.masked_fill(a > 0, -1.0).clamp_(min=-0.5))
    b = a.clone()
    b.clamp_(torch.zeros(4), torch.ones(4) * 0.3)
    out.append(b)
    c = a.clone()
    c.addcmul_(a, a, value=0.5).addcdiv_(a, a.abs() + 1, value=-1)
    out.append(c)
    out.append(a.lerp(torch.zeros_like(a), torch.linspace(0, 1, 4)))
    out.append(a.lerp(a.flip(0), 0.3))
    out.append(
        [
            a.new_zeros(2, 3),
            a.new_ones((1,)),
            a.new_full((2,), 7),
            a.new_empty(0).shape,
            a.new_tensor([1, 2]).dtype,
        ]
    )
    i = torch.arange(4)
    out.append(
        [
            i.type_as(a),
            a.to(torch.float64).dtype,
            a.to(torch.int32),
            a.int().dtype,
            a.long().dtype,
            a.double().dtype,
            a.half().float(),
        ]
    )
    out.append(
        [a[0, 0].item(), a.tolist(), i.tolist(), a.sum().item(), type(i.sum().item()).__name__]
    )
    out.append(a.narrow(1, 1, 2))
    out.append(list(a.chunk(3, dim=1)))
    out.append(list(a.split([1, 3], dim=1)))
    out.append(list(a.tensor_split([1, 3], dim=1)))
    out.append(a.movedim(0, 1).swapaxes(0, 1).swapdims(0, 1))
    out.append(a.repeat_interleave(torch.tensor([1, 0, 2]), dim=0))
    out.append(a.repeat_interleave(2))
    out.append(a[:1].expand_as(a))
    out.append(a.index_select(1, torch.tensor([3, 0])))
    out.append(a.reshape(3, 2, 2).flatten(1).unflatten(1, (2, -1)))
    out.append(torch.diag_embed(a, offset=1))
    out.append(a.diagonal(offset=-1))
    out.append(a.cumprod(1))
    out.append(a.logcumsumexp(1))
    out.append(a.T.contiguous().view(-1))
    out.append(a.permute(1, 0).reshape(-1))
    out.append(a.view(2, 6).t().is_contiguous())
    out.append(a.expand(2, 3, 4).sum((0, 2)))
    out.append(a.amax(1, keepdim=True) - a.amin(dim=(0, 1)))
    out.append(a.std(1, unbiased=False) + a.var(0, correction=0).sum())
    out.append(a.nan_to_num(posinf=1.0))
    out.append(a.sign() * a.abs().sqrt().rsqrt().reciprocal())
    out.append(a.fmod(0.3) + a.remainder(0.3))
    out.append(a.sort(1, descending=True)[1])
    out.append(
        a.argmax(),
    )
    out.append(a.argmin(1, keepdim=True))
    out.append(a.any(1) & a.all(0).any())
    out.append(a.bool().float().mean())
    out.append(a.numel() + a.dim() + a.ndimension() + a.nelement() + a.size(1) + a.shape[0])
    out.append(a.masked_select(a > 0))
    out.append(a.index_fill(0, torch.tensor([1]), 5.0))
    out.append(a.where(a > 0, torch.tensor(0.0)))
    out.append(a.square().sum(-1).sqrt() - a.norm(dim=-1))
    out.append(a.renorm(2, 0, 1.0))
    out.append(a.clip(-0.1, 0.1))
    out.append(a.outer if False else torch.outer(a[0], a[1]))
    out.append(a.squeeze().unsqueeze(-1).squeeze(-1))
    out.append(a.exp_().log_())
    z = torch.zeros(3, 4)
    z.copy_(a).mul_(2).add_(1, alpha=0.5).sub_(a).div_(2, rounding_mode=None)
    out.append(z)
    out.append(torch.zeros(5).scatter_(0, torch.tensor([1, 3]), 2.0))
    out.append(a.data_ptr() == a.view(-1).data_ptr())
    out.append(a.element_size() + a.stride(0))
    return out


PROGRAMS = [
    func_per_sample,
    ensemble_bn,
    dist_policy,
    indexing_ops,
    sorting_counting,
    tensor_methods,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)
