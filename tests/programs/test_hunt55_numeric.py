"""Numeric and tooling programs of hunt55, each run on PyTorch and on ember: linear algebra with
gradients through every factorization (cholesky, eigh, svd, solve, inv, det, slogdet,
matrix_exp, lu_factor/lu_solve, lu, qr, pinv, cholesky_solve, solve_triangular, norms, cond,
lstsq), FFTs with gradients through complex values (rfft2/irfft2 with a shifted filter, fftn,
hfft, polar, complex), tensor printing of every dtype under set_printoptions, item/tolist and
format specs, model ensembling with stack_module_state + functional_call + vmap(grad), and
``torch._dynamo.explain`` of a function captured whole and of one with a graph break, beside
compiled functions and modules.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, UP032, B905, PIE810, SIM108, RUF005


def linalg_grads(torch, ctx):
    rng = np.random.default_rng(0)
    A0 = rng.standard_normal((2, 4, 4))
    A = ctx.t(A0, requires_grad=True)
    S = A @ A.mT + 4 * torch.eye(4, dtype=torch.float64)
    B = ctx.t(rng.standard_normal((2, 4, 3)), requires_grad=True)
    L = torch.linalg.cholesky(S)
    w, V = torch.linalg.eigh(S)
    U, s, Vh = torch.linalg.svd(A, full_matrices=False)
    sv = torch.linalg.svdvals(A)
    X = torch.linalg.solve(S, B)
    Xl = torch.linalg.solve(A, B, left=True)
    inv = torch.linalg.inv(S)
    det = torch.linalg.det(A)
    sign, logabs = torch.linalg.slogdet(A)
    E = torch.linalg.matrix_exp(0.1 * A)
    LU, piv = torch.linalg.lu_factor(A)
    Xlu = torch.linalg.lu_solve(LU, piv, B)
    P, Lf, Uf = torch.linalg.lu(A)
    Q, R = torch.linalg.qr(A)
    pinv = torch.linalg.pinv(A)
    cs = torch.cholesky_solve(B, L)
    tri = torch.linalg.solve_triangular(L, B, upper=False)
    nrm = [
        torch.linalg.norm(A),
        torch.linalg.matrix_norm(A, "nuc"),
        torch.linalg.matrix_norm(A, 2),
        torch.linalg.vector_norm(A, 3, dim=-1),
        torch.linalg.cond(S),
    ]
    mp = torch.linalg.matrix_power(A, 3)
    ev = torch.linalg.eigvalsh(S, UPLO="U")
    lst = torch.linalg.lstsq(A, B).solution
    outs = [
        L,
        w,
        V.abs(),
        s,
        sv,
        X,
        Xl,
        inv,
        det,
        sign,
        logabs,
        E,
        Xlu,
        Lf,
        Uf,
        R.abs(),
        pinv,
        cs,
        tri,
        mp,
        ev,
        lst,
    ] + nrm
    loss = (
        sum((o.abs() if o.dtype.is_complex else o).sum() for o in outs)
        + (U @ torch.diag_embed(s) @ Vh).sum()
    )
    loss.backward()
    return outs + [A.grad, B.grad, piv, P]


def fft_grads(torch, ctx):
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((2, 6, 8)).astype(np.float32), requires_grad=True)
    X = torch.fft.rfft2(x, norm="ortho")
    Xs = torch.fft.fftshift(X, dim=-2)
    filt = torch.exp(-(torch.linspace(-2, 2, 6)[:, None] ** 2)).to(torch.complex64)
    Y = torch.fft.ifftshift(Xs * filt, dim=-2)
    y = torch.fft.irfft2(Y, s=(6, 8), norm="ortho")
    z = torch.fft.fftn(x.to(torch.complex64), dim=(1, 2))
    f = torch.fft.fftfreq(8, d=0.5)
    rf = torch.fft.rfftfreq(8)
    h = torch.fft.hfft(X[0, 0], n=8)
    c = torch.complex(x[0], x[1])
    pol = torch.polar(x[0].abs() + 0.1, x[1])
    outs = [
        y,
        X.abs(),
        Xs.angle(),
        z.real,
        z.imag,
        f,
        rf,
        h,
        (c * c.conj()).real,
        torch.view_as_real(pol),
        c.abs(),
        torch.sgn(c).real,
        c.exp().imag,
    ]
    loss = (
        sum(o.sum() for o in outs[:5])
        + (outs[7] ** 2).mean()
        + sum(o.float().mean() for o in outs[8:])
    )
    loss.backward()
    return outs + [x.grad, X.dtype, z.dtype, c.dtype]


def printing(torch, ctx):
    res = []
    torch.set_printoptions(precision=3, sci_mode=False)
    try:
        for dt in (
            torch.float32,
            torch.float64,
            torch.float16,
            torch.bfloat16,
            torch.int8,
            torch.uint8,
            torch.int16,
            torch.int32,
            torch.int64,
            torch.bool,
            torch.complex64,
            torch.complex128,
        ):
            t = (
                torch.arange(6).reshape(2, 3).to(dt)
                if dt != torch.bool
                else torch.tensor([[True, False, True]])
            )
            if dt.is_floating_point:
                t = t / 3
            res.append(repr(t))
            res.append(str(t[0]))
            res.append(t.tolist())
            res.append(repr(t.flatten()[1].item()))
        res.append(repr(torch.tensor([1e-8, 1.0, 1e8])))
        torch.set_printoptions(precision=4, sci_mode=True)
        res.append(repr(torch.tensor([0.1, 2.5])))
        torch.set_printoptions(profile="default")
        res.append(repr(torch.tensor([1e-8, 1.0, 1e8])))
        res.append(repr(torch.arange(2000.0)))
        torch.set_printoptions(threshold=5, edgeitems=2, linewidth=40)
        res.append(repr(torch.arange(100.0).reshape(10, 10)))
        torch.set_printoptions(profile="default")
        res.append(repr(torch.zeros(2, 0, 3)))
        res.append(repr(torch.tensor(3.5)))
        res.append(repr(torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0])))
        res.append(repr(torch.ones(2, requires_grad=True) * 2))
        res.append(repr(torch.nn.Parameter(torch.ones(2))))
        res.append(repr(torch.tensor([1, 2], dtype=torch.int32)))
        res.append(repr(torch.tensor([1.5, 2], dtype=torch.float16)))
        res.append(repr(torch.tensor([1 + 2j, -0.5j])))
        x = torch.tensor(2.71828)
        res.append(
            [
                f"{x:.2f}",
                f"{x.item():.3e}",
                format(torch.tensor(7), "03d"),
                "{:>8.3f}".format(torch.tensor(1.5)),
            ]
        )
        res.append(str(torch.float32) + str(torch.int64) + repr(torch.bfloat16))
        res.append(str(torch.Size([2, 3])))
        res.append(repr(torch.tensor([[1e-3, 123456.0]])))
        res.append(repr(torch.tensor([123456789.0, 1.0])))
        res.append(repr(torch.tensor([1.0, 2.0], dtype=torch.float64)))
    finally:
        torch.set_printoptions(profile="default")
    return [r.replace("ember.", "torch.") if isinstance(r, str) else r for r in res]


def ensemble_vmap_fc(torch, ctx):
    nn = torch.nn
    functional_call, stack_module_state, vmap, grad = (
        torch.func.functional_call,
        torch.func.stack_module_state,
        torch.func.vmap,
        torch.func.grad,
    )
    models = [
        ctx.init(nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)), f"m{i}")
        for i in range(4)
    ]
    params, buffers = stack_module_state(models)
    import copy

    base = copy.deepcopy(models[0]).to("meta")

    def fmodel(p, b, x):
        return functional_call(base, (p, b), (x,))

    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((6, 3)).astype(np.float32))
    out_same = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
    xs = ctx.t(rng.standard_normal((4, 6, 3)).astype(np.float32))
    out_diff = vmap(fmodel)(params, buffers, xs)

    def loss(p, b, x):
        return fmodel(p, b, x).pow(2).mean()

    g = vmap(grad(loss), in_dims=(0, 0, None))(params, buffers, x)
    # functional_call with strict and tie_weights, and a dict of overrides
    m = models[0]
    over = {"0.weight": torch.zeros(5, 3)}
    y = functional_call(m, over, x)
    y2 = functional_call(m, ({"2.bias": torch.ones(2)}, {}), args=(x,), strict=False)
    return [
        out_same,
        out_diff,
        {k: v for k, v in g.items()},
        y,
        y2,
        sorted(params.keys()),
        params["0.weight"].shape,
        params["0.weight"].requires_grad,
    ]


def dynamo_explain(torch, ctx):
    nn = torch.nn

    def branchy(x):
        y = x.sin()
        if y.sum() > 0:
            y = y * 2
        return y.cos() + y.mean()

    def straight(x, w):
        return torch.relu(x @ w).sum(-1).tanh()

    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((4,)).astype(np.float32))
    w = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
    torch._dynamo.reset()
    ex = torch._dynamo.explain(straight)(x[None], w)
    ex2 = torch._dynamo.explain(branchy, x)
    res = [
        ex.graph_count,
        ex.graph_break_count,
        len(ex.break_reasons),
        len(ex.graphs),
        ex.op_count > 0,
        len(ex.ops_per_graph),
        "Graph Count: 1" in str(ex),
        ex2.graph_break_count,
        len(ex2.break_reasons),
        ex2.break_reasons[0].graph_break,
        len(ex2.break_reasons[0].user_stack) >= 1,
        ex2.break_reasons[0].user_stack[0].lineno > 0,
        "Graph Break Count: 1" in str(ex2),
    ]
    kw = {"backend": "eager"} if ctx.is_torch else {}
    g = torch.compile(branchy, fullgraph=False, dynamic=False, **kw)
    res.append(g(x))
    net = ctx.init(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
    cnet = torch.compile(net, **kw)
    res.append(cnet(x[None]))
    res.append(type(cnet).__name__)
    res.append(sorted(cnet.state_dict().keys()))
    res.append(torch.compiler.is_compiling())

    @torch.compiler.disable
    def dis(x):
        return x + 1

    res.append(torch.compile(lambda x: dis(x) * 2, **kw)(x))
    torch._dynamo.config.suppress_errors = False
    res.append(torch._dynamo.is_compiling())
    return res


PROGRAMS = [linalg_grads, fft_grads, printing, ensemble_vmap_fc, dynamo_explain]
TOLERANCES = {"linalg_grads": dict(rtol=1e-6, atol=1e-8)}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore:ember.compile")
def test_eager(program):
    check_program(program, **TOLERANCES.get(program.__name__, {}))
