"""Programs of hunt60 on API corners scripts reach for: torch.func (functional_call with tied
weights and buffers, jacrev with chunk_size, linearize, grad_and_value with aux, vjp of
several outputs, stack_module_state), parameter containers trained by Adam (ParameterList,
ParameterDict, ModuleDict.update), deepcopy and pickle of parametrized models, a full backward
hook on a module with two inputs and outputs, strict=False/assign=True loading, context
managers used as decorators (grad modes on generators, autocast, fork_rng, record_function,
sdpa_kernel), and tensors' Python protocol (item types, numpy sharing,
new_* factories under a float64 default dtype).
"""

import copy
import importlib
import pickle

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def func_misc(torch, ctx):
    """functional_call with tied weights (tie_weights True and False) and with a
    (params, buffers) tuple on BatchNorm in training mode (the passed buffers are updated, the
    module's are not); jacrev(chunk_size=2); linearize; grad_and_value(has_aux=True); vjp of a
    function with two outputs; stack_module_state's shapes."""
    nn = torch.nn
    fc = torch.func

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2)
            self.b = self.a

        def forward(self, x):
            return self.b(torch.tanh(self.a(x)))

    m = ctx.init(Tied(), "tied")
    x = ctx.t(np.array([[0.5, -1.0]], np.float32))
    w = {"a.weight": torch.eye(2) * 2, "a.bias": torch.ones(2)}
    r1 = fc.functional_call(m, w, (x,))
    r2 = fc.functional_call(m, w, (x,), tie_weights=False)
    bn = nn.BatchNorm1d(3)
    xb = ctx.t(np.arange(12, dtype=np.float32).reshape(4, 3) ** 1.5)
    bufs = {k: v.clone() for k, v in bn.named_buffers()}
    out = fc.functional_call(bn, (dict(bn.named_parameters()), bufs), (xb,))
    f = lambda v: (v.sin() * v.sum()).cumsum(0)
    lin = torch.linspace(0, 1, 5)
    jac = fc.jacrev(f, chunk_size=2)(lin)
    val, jvp_fn = fc.linearize(lambda v: v.sin() * 2, lin)
    g, (v, aux) = fc.grad_and_value(lambda v: ((v**2).sum(), v.mean()), has_aux=True)(lin)
    _, vjp_fn = fc.vjp(lambda a, b: (a * b, a + b), lin, lin.flip(0))
    cot = vjp_fn((torch.ones(5), torch.ones(5) * 2))
    ps, bs = fc.stack_module_state([ctx.init(nn.Linear(2, 3), f"l{i}") for i in range(3)])
    return [r1, r2, out, bufs["running_mean"], bufs["num_batches_tracked"], bn.running_mean, jac, val, jvp_fn(torch.ones(5)), g, v, aux, list(cot), {k: list(t.shape) for k, t in ps.items()}]


def containers_trained(torch, ctx):
    """ParameterList/ParameterDict/ModuleDict built, appended to and updated, trained one Adam
    step; the state_dict keys and named_parameters order; named_parameters(prefix=...),
    named_modules(prefix=...), and zero_grad(set_to_none=False) keeping zero tensors."""
    nn = torch.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.pl = nn.ParameterList([nn.Parameter(torch.ones(2)), nn.Parameter(torch.zeros(3))])
            self.pd = nn.ParameterDict({"b": nn.Parameter(torch.ones(1)), "a": nn.Parameter(torch.ones(2) * 2)})
            self.md = nn.ModuleDict({"z": nn.Linear(2, 2), "y": nn.ReLU()})
            self.md.update({"x": nn.Tanh()})
            self.pl.append(nn.Parameter(torch.ones(1)))
            self.pd["c"] = nn.Parameter(torch.zeros(1))

    m = ctx.init(M())
    opt = torch.optim.Adam(m.parameters(), lr=0.1)
    loss = sum(p.sum() for p in m.pl) + sum(p.pow(2).sum() for p in m.pd.values()) + m.md["z"](torch.ones(1, 2)).sum()
    loss.backward()
    opt.step()
    m.zero_grad(set_to_none=False)
    return [list(m.state_dict().keys()), list(m.md.keys()), [n for n, _ in m.named_parameters(prefix="model")], [n for n, _ in m.named_modules(prefix="root")], m.pd["a"], m.pl[1], m.md["z"].weight.grad, list(m.pd.keys())]


def copies_and_hooks(torch, ctx):
    """deepcopy of an orthogonal-parametrized Linear and of a weight-normed one (the copy's
    parametrization is its own), pickle round trip of a Sequential, a full backward hook on a
    module with two inputs (one not requiring grad) and two outputs (one unused), and
    load_state_dict(strict=False) / (assign=True) results."""
    nn = torch.nn
    o = ctx.init(nn.Linear(3, 3), "o")
    nn.utils.parametrizations.orthogonal(o)
    o2 = copy.deepcopy(o)
    wn = nn.utils.parametrizations.weight_norm(ctx.init(nn.Linear(3, 2), "wn"))
    wn2 = copy.deepcopy(wn)
    with torch.no_grad():
        wn2.parametrizations.weight.original0.mul_(2)
    seq = ctx.init(nn.Sequential(nn.Linear(2, 2), nn.ReLU()), "seq")
    seq2 = pickle.loads(pickle.dumps(seq))
    x = ctx.t(np.array([[0.3, -0.2, 0.9]], np.float32))

    class Mul(nn.Module):
        def forward(self, a, b):
            return a * b, a + b

    m = Mul()
    seen = []
    m.register_full_backward_hook(lambda mod, gin, gout: seen.append([None if g is None else g.clone() for g in gin] + [None if g is None else g.clone() for g in gout]))
    a = ctx.t(np.array([1.0, 2.0], np.float32), requires_grad=True)
    p, s = m(a, ctx.t(np.array([3.0, 4.0], np.float32)))
    (p.sum() * 2).backward()
    bn = nn.BatchNorm1d(3)
    sd = bn.state_dict()
    sd["running_mean"] = torch.tensor([1.0, 2.0, 3.0])
    del sd["num_batches_tracked"]
    res = bn.load_state_dict(sd, strict=False)
    lin = nn.Linear(2, 2)
    w = torch.ones(2, 2)
    lin.load_state_dict({"weight": w, "bias": torch.zeros(2)}, assign=True)
    return [o2(x), o(x), wn2(x), wn(x), seq2(x[:, :2]), seen, a.grad, res.missing_keys, bn.running_mean, lin.weight is w, lin.weight.requires_grad]


def decorators(torch, ctx):
    """Context managers as decorators: no_grad on a generator (the body in no-grad mode at
    every resumption, the caller's loop in grad mode), bare @no_grad and @enable_grad,
    @set_grad_enabled(False), @inference_mode(False) inside an inference region, @autocast on
    a function, fork_rng as a decorator, record_function, sdpa_kernel."""
    w = ctx.t(np.array([1.0, 2.0], np.float32), requires_grad=True)

    @torch.no_grad()
    def batches(n):
        for i in range(n):
            yield (w * i).requires_grad, torch.is_grad_enabled()

    gen_modes = [item + (torch.is_grad_enabled(),) for item in batches(2)]

    @torch.no_grad
    def f():
        return (w * 2).requires_grad

    @torch.set_grad_enabled(False)
    def g():
        return (w * 3).requires_grad

    with torch.no_grad():

        @torch.enable_grad
        def h():
            return (w * 4).requires_grad

        inner = h()

    @torch.inference_mode(False)
    def k():
        return torch.is_inference_mode_enabled()

    with torch.inference_mode():
        inf = k()

    @torch.autocast("cpu", dtype=torch.bfloat16)
    def mm(x):
        return (x @ x).dtype

    torch.manual_seed(1)

    @torch.random.fork_rng()
    def draw():
        torch.manual_seed(7)
        return torch.rand(2)

    forked = draw()
    after = torch.rand(2)
    prof = importlib.import_module(torch.__name__ + ".autograd.profiler")

    @prof.record_function("block")
    def doubled(x):
        return x * 2

    att = importlib.import_module(torch.__name__ + ".nn.attention")

    @att.sdpa_kernel([att.SDPBackend.MATH])
    def attend(q):
        return torch.nn.functional.scaled_dot_product_attention(q, q, q)

    q = ctx.t(np.arange(8, dtype=np.float32).reshape(1, 1, 2, 4) / 8)
    return [gen_modes, f(), g(), inner, inf, mm(torch.ones(2, 2)), forked, after, doubled(w), attend(q), torch.is_grad_enabled()]


def python_protocol(torch, ctx):
    """Tensors in plain Python: item() types, int()/float()/bool()/round()/format, tolist,
    from_numpy memory sharing both ways, as_tensor without a copy, NumPy scalars' dtypes, and
    new_* factories and literals under set_default_dtype(float64) (restored after)."""
    x = torch.tensor([1.5, 2.5])
    res = [type(x[0].item()).__name__, type(torch.tensor(3).item()).__name__, type(torch.tensor(True).item()).__name__, x.tolist(), int(x[1]), float(torch.tensor(3)), bool(torch.tensor([0.1])), round(x[1].item()), f"{x[0]:.2f}"]
    a = np.arange(4, dtype=np.float32)
    t = torch.from_numpy(a)
    t += 1
    t.numpy()[0] = 100
    res += [a.tolist(), t.tolist(), torch.tensor(np.float64(2.5)).dtype, torch.tensor([np.int32(1)]).dtype]
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        d = torch.ones(2, dtype=torch.float32)
        res += [torch.nn.Linear(2, 2).weight.dtype, torch.tensor([1.0]).dtype, torch.arange(3.0).dtype, torch.tensor(1.5).dtype, (d * 1.5).dtype, d.new_tensor([1, 2]).dtype, d.new_full((2,), 3).dtype, torch.full((2,), 1).dtype, torch.zeros_like(d, dtype=torch.int64).dtype, torch.tensor([1, 2]).dtype]
    finally:
        torch.set_default_dtype(prev)
    return res


PROGRAMS = [func_misc, containers_trained, copies_and_hooks, decorators, python_protocol]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, rtol=1e-5, atol=1e-6)
