"""Tensor idioms: where with scalars, mixed-dtype cat/stack, chunk/split, beam-search gathers,
cumulative ops, diff/cdist/einsum bilinear forms, block_diag/cartesian_prod/combinations/
tril_indices/meshgrid, clamp with tensor bounds, index_*_ and put_/take; dtype promotion and
round trips; grad modes nested, retain_grad and detach().requires_grad_().
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007


def tensor_idioms(torch, ctx):
    rng = np.random.default_rng(0)
    a = ctx.t(rng.standard_normal((4, 5)).astype(np.float32))
    out = {}
    out["where_s"] = torch.where(a > 0, a, 0.0)
    out["where_ss"] = torch.where(a > 0, 1.0, -1.0)
    out["where_int"] = torch.where(a > 0, 1, 0)
    out["cat_mixed"] = torch.cat([torch.arange(3), torch.tensor([0.5, 1.5])])
    out["stack_mixed"] = torch.stack([torch.ones(2, dtype=torch.int32), torch.tensor([2.0, 3.0])])
    out["chunk"] = list(a.chunk(3, dim=1))
    out["split"] = list(torch.split(a, [2, 3], dim=1))
    out["split2"] = list(a.split(3))
    out["cumsum"] = a.cumsum(0)
    out["cumsum_int"] = torch.arange(5).cumsum(0)
    out["cumprod"] = torch.cumprod(a, dim=1)
    out["cummax"] = list(a.cummax(1))
    out["diff"] = torch.diff(a, dim=1)
    out["diff2"] = torch.diff(a[0], n=2, prepend=torch.zeros(1), append=torch.ones(2))
    b = ctx.t(rng.standard_normal((3, 5)).astype(np.float32))
    out["cdist"] = torch.cdist(a, b)
    out["cdist1"] = torch.cdist(a.unsqueeze(0), b.unsqueeze(0), p=1)
    W = ctx.t(rng.standard_normal((5, 5)).astype(np.float32))
    out["bilinear"] = torch.einsum("bi,ij,bj->b", a, W, a)
    out["outer_e"] = torch.einsum("i,j->ij", a[0], b[0])
    out["trace"] = torch.einsum("ii", W)
    out["block"] = torch.block_diag(torch.ones(2, 2), torch.tensor([[3.0]]), torch.zeros(1, 2))
    out["cart"] = torch.cartesian_prod(torch.tensor([1, 2]), torch.tensor([3, 4, 5]))
    out["comb"] = torch.combinations(torch.tensor([1, 2, 3, 4]), r=2)
    out["comb_r"] = torch.combinations(torch.tensor([1.0, 2.0, 3.0]), with_replacement=True)
    out["tril_idx"] = torch.tril_indices(4, 4, offset=-1)
    out["triu_idx"] = torch.triu_indices(3, 4, 1)
    xs, ys = torch.meshgrid(torch.arange(3), torch.arange(2), indexing="xy")
    out["mesh_xy"] = [xs, ys]
    out["mesh_ij"] = list(torch.meshgrid(torch.arange(3), torch.arange(2), indexing="ij"))
    bad = ctx.t(np.array([1.0, np.nan, np.inf, -np.inf], dtype=np.float32))
    out["nan2num"] = torch.nan_to_num(bad, nan=0.0, posinf=1e3, neginf=-1e3)
    out["nan2num_def"] = torch.nan_to_num(bad)
    lo, hi = torch.full((5,), -0.5), torch.linspace(0.0, 1.0, 5)
    out["clamp_t"] = torch.clamp(a, min=lo, max=hi)
    out["clamp_lo"] = a.clamp(min=lo)
    out["isclose"] = torch.isclose(a, a + 1e-6)
    out["allclose"] = torch.allclose(a, a + 1e-3, atol=1e-2)
    out["isclose_nan"] = torch.isclose(bad, bad, equal_nan=True)
    c = a.clone()
    c[:, 1:3] += 10
    c[0] *= -1
    c[1:, 0] = torch.arange(3.0)
    c[-1, ::2].zero_()
    out["slices"] = c
    z = torch.zeros(4, 3)
    z.index_add_(0, torch.tensor([0, 0, 2]), torch.ones(3, 3))
    z.index_copy_(1, torch.tensor([2]), torch.full((4, 1), 7.0))
    z.index_fill_(0, torch.tensor([3]), -1.0)
    out["index_ops"] = z
    m = torch.zeros(2, 3)
    m.masked_scatter_(torch.tensor([[True, False, True], [False, True, False]]), torch.arange(6.0))
    out["mscat"] = m
    p = torch.zeros(2, 3)
    p.put_(torch.tensor([0, 4, 4]), torch.tensor([1.0, 2.0, 3.0]), accumulate=True)
    out["put"] = p
    out["take"] = torch.take(a, torch.tensor([[0, 19], [7, 3]]))
    ints = torch.tensor([0, 1, 1, 3, 3, 3])
    out["bincount_w"] = torch.bincount(ints, weights=torch.tensor([0.5, 1, 1, 2, 2, 2.0]))
    out["bincount_wi"] = torch.bincount(ints, weights=torch.arange(6))
    return out


def beam_search(torch, ctx):
    rng = np.random.default_rng(1)
    V, K, T = 6, 3, 4
    logits_seq = ctx.t(rng.standard_normal((T, K, V)).astype(np.float32))
    scores = torch.zeros(K)
    scores[1:] = float("-inf")
    seqs = torch.zeros(K, 0, dtype=torch.long)
    hist = []
    for t in range(T):
        logp = torch.log_softmax(logits_seq[t], dim=-1)
        cand = (scores.unsqueeze(1) + logp).view(-1)
        top, idx = cand.topk(K, sorted=True)
        beam = torch.div(idx, V, rounding_mode="floor")
        tok = idx % V
        seqs = torch.cat(
            [seqs.gather(0, beam.unsqueeze(1).expand(-1, seqs.size(1))), tok[:, None]], 1
        )
        scores = top
        hist.append([beam, tok])
    order = scores.argsort(descending=True)
    srt = torch.sort(torch.tensor([2, 1, 2, 1, 0]), stable=True)
    return [seqs, scores, hist, order, seqs[order[0]].tolist(), srt]


def dtype_rules(torch, ctx):
    i = torch.tensor([7, -7, 3])
    f = torch.tensor([1.5, 2.5])
    out = {}
    out["true_div"] = i / 2
    out["floor_div"] = i // 2
    out["trunc_div"] = torch.div(i, 2, rounding_mode="trunc")
    out["mod"] = i % 3
    out["int_plus_float"] = (i + 0.5).dtype
    out["int_times_float"] = i * 1.5
    out["int_pow"] = i**2
    out["bool_sum"] = (i > 0).sum()
    out["bool_arith"] = (i > 0).float() * 2 + (i < 0).long()
    out["bool_mean"] = (i > 0).float().mean()
    out["int32_long"] = (torch.ones(2, dtype=torch.int32) + torch.ones(2, dtype=torch.long)).dtype
    out["f16"] = f.half().float()
    out["bf16"] = torch.tensor([1.0 / 3, 100.125]).bfloat16().float()
    out["f16dtype"] = (f.half() + f.half()).dtype
    out["mixed_half"] = (f.half() + f).dtype
    out["f64"] = (torch.ones(2, dtype=torch.float64) + f).dtype
    out["scalar_t"] = (torch.tensor(2.0, dtype=torch.float64) * f).dtype
    out["finfo"] = [
        torch.finfo(torch.float32).eps,
        torch.finfo(torch.float16).max,
        torch.finfo(torch.bfloat16).eps,
        torch.finfo().tiny,
        torch.iinfo(torch.int32).max,
        torch.iinfo(torch.int8).min,
    ]
    out["long_idx"] = f[torch.tensor([1, 0, 1], dtype=torch.long)]
    out["int_idx"] = f[torch.tensor([1, 0], dtype=torch.int32)]
    out["arange_dtype"] = [torch.arange(3).dtype, torch.arange(3.0).dtype, torch.arange(0, 1, 0.25)]
    out["full_dtype"] = [torch.full((2,), 3).dtype, torch.full((2,), True).dtype]
    out["tensor_dtype"] = [torch.tensor([1, 2.0]).dtype, torch.tensor([True]).dtype]
    out["round"] = torch.tensor([0.5, 1.5, 2.5, -0.5]).round()
    out["round_dec"] = torch.tensor([1.2345, 2.5678]).round(decimals=2)
    out["int_to_bool"] = torch.tensor([0, 2, -1]).bool()
    out["float_to_int"] = torch.tensor([-1.7, 1.7]).long()
    out["is_fp"] = [f.is_floating_point(), i.is_floating_point(), torch.is_tensor(i)]
    out["promote"] = torch.promote_types(torch.int32, torch.float16)
    out["result_type"] = torch.result_type(i, 1.0)
    out["can_cast"] = torch.can_cast(torch.float32, torch.int32)
    return out


def grad_modes(torch, ctx):
    rng = np.random.default_rng(2)
    w = ctx.t(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    x = ctx.t(rng.standard_normal(3).astype(np.float32))
    flags = []
    with torch.no_grad():
        y = w * 2
        flags.append(y.requires_grad)
        with torch.enable_grad():
            z = w * 3
            flags.append(z.requires_grad)
        with torch.set_grad_enabled(True):
            flags.append((w + 1).requires_grad)
        flags.append(torch.is_grad_enabled())
    torch.set_grad_enabled(False)
    flags.append((w * 2).requires_grad)
    torch.set_grad_enabled(True)
    with torch.inference_mode():
        q = w * 4
        flags.append([q.requires_grad, torch.is_inference_mode_enabled()])
    with torch.inference_mode(False):
        flags.append((w * 5).requires_grad)

    @torch.no_grad()
    def predict(v):
        return (w * v).sum()

    flags.append(predict(x).requires_grad)
    h = w * x
    h.retain_grad()
    g = h.exp()
    g.retain_grad()
    loss = g.sum() + z.sum()
    loss.backward()
    d = h.detach().requires_grad_()
    d2 = (d**2).sum()
    d2.backward()
    lin = w.detach().clone().requires_grad_(True)
    (lin * x).sum().backward()
    flags.append([h.is_leaf, d.is_leaf, lin.is_leaf, y.grad_fn is None])
    # a gradient penalty through autograd.grad with create_graph
    u = ctx.t(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    f = (u.sin() * w).sum()
    (gu,) = torch.autograd.grad(f, u, create_graph=True)
    pen = (gu.norm() - 1) ** 2
    pen.backward()
    return [flags, h.grad, g.grad, w.grad, d.grad, lin.grad, u.grad, gu, pen]


PROGRAMS = [tensor_idioms, beam_search, dtype_rules, grad_modes]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)
