"""Programs of hunt59 on nn.Module machinery, run on PyTorch and on ember: parametrizations
trained (orthogonal with its default map, spectral_norm's power iteration in train and eval,
weight_norm's g/v, a custom low-rank parametrization cached with
parametrize.cached, remove_parametrizations leaving the value), module hooks (global
forward hooks, forward_pre_hook with kwargs rewriting arguments, full backward hooks on a
module of two inputs, state_dict pre/post hooks, load_state_dict post hooks fixing keys),
deepcopy/pickle of a trained model with its optimizer, apply() initialisation, named_buffers
with persistent=False, and pruning with its masks.
"""

import copy
import importlib
import io
import pickle

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def parametrized_training(torch, ctx):
    """Three parametrized layers trained together: orthogonal (Q^T Q = I after steps),
    spectral_norm (n_power_iterations=2; its u vector updated in training, frozen in eval),
    the parametrizations' weight_norm; a LowRank parametrization with right_inverse; then
    cached() evaluation and remove_parametrizations(leave_parametrized=True)."""
    nn = torch.nn
    P = nn.utils.parametrize
    par = nn.utils.parametrizations

    class LowRank(nn.Module):
        def forward(self, A, B):
            return A @ B

        def right_inverse(self, W):
            U, S, Vh = torch.linalg.svd(W, full_matrices=False)
            r = 2
            return U[:, :r] * S[:r].sqrt(), S[:r].sqrt()[:, None] * Vh[:r]

    orth = par.orthogonal(ctx.init(nn.Linear(4, 4, bias=False), "orth"))
    sn = ctx.init(nn.Linear(4, 5), "sn")
    sn = par.spectral_norm(sn, n_power_iterations=2)
    wn = par.weight_norm(ctx.init(nn.Linear(5, 3), "wn"), dim=0)
    lr = ctx.init(nn.Linear(3, 3), "lr")
    P.register_parametrization(lr, "weight", LowRank(), unsafe=True)
    params = [p for m in (orth, sn, wn, lr) for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))
    out = []
    u0 = sn.parametrizations.weight[0]._u.clone()
    def step(x):
        y = lr(wn(torch.relu(sn(orth(x)))))
        loss = y.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = ctx.fn(step)
    out = [step(x) for _ in range(3)]
    W = orth.weight
    eye = W.T @ W
    sn.eval()
    with P.cached():
        e1 = sn(x[:2])
        e2 = sn(x[:2])
    names = sorted(n for n, _ in lr.named_parameters())
    P.remove_parametrizations(lr, "weight", leave_parametrized=True)
    return [
        out, eye, sn.parametrizations.weight[0]._u, u0, e1, e2, wn.parametrizations.weight.original0,
        wn.parametrizations.weight.original1.grad, names, sorted(n for n, _ in lr.named_parameters()),
        lr.weight, P.is_parametrized(sn), P.is_parametrized(lr),
    ]


def module_hooks(torch, ctx):
    """Hooks in a training step: a global forward hook (register_module_forward_hook)
    counting calls per class, a forward_pre_hook with_kwargs rewriting a keyword argument, a
    forward hook with_kwargs and always_call, a full backward hook on a two-input module
    scaling grad_input, a backward pre-hook, state_dict post hooks adding an entry and a
    load_state_dict pre hook renaming old keys."""
    nn = torch.nn

    class Mix(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 4)
            self.b = nn.Linear(3, 4)

        def forward(self, x, y, scale=1.0):
            return (self.a(x) + self.b(y)) * scale

    net = ctx.init(Mix(), "mix")
    head = ctx.init(nn.Linear(4, 1), "head")
    counts = {}
    g = nn.modules.module.register_module_forward_hook(lambda m, i, o: counts.__setitem__(type(m).__name__, counts.get(type(m).__name__, 0) + 1))

    def pre(m, args, kwargs):
        kwargs = dict(kwargs)
        kwargs["scale"] = kwargs.get("scale", 1.0) * 2
        return args, kwargs

    seen_kwargs = []
    net.register_forward_pre_hook(pre, with_kwargs=True)
    net.register_forward_hook(lambda m, args, kwargs, out: seen_kwargs.append(kwargs["scale"]), with_kwargs=True, always_call=True)
    grads_in = []

    def bhook(m, gin, gout):
        grads_in.append([None if t is None else tuple(t.shape) for t in gin])
        return tuple(None if t is None else t * 0.5 for t in gin)

    net.register_full_backward_hook(bhook)
    net.register_full_backward_pre_hook(lambda m, gout: (gout[0] * 3,))
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((5, 3)).astype(np.float32)).requires_grad_()
    y = ctx.t(rng.standard_normal((5, 3)).astype(np.float32)).requires_grad_()
    out = head(net(x, y, scale=0.5)).sum()
    out.backward()
    g.remove()
    head(net(x, y))

    net.register_state_dict_post_hook(lambda m, sd, prefix, local: sd.__setitem__(prefix + "version", torch.tensor(2)))
    sd = net.state_dict()

    def rename(module, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        for k in list(state_dict):
            if k.startswith(prefix + "left."):
                state_dict[k.replace("left.", "a.")] = state_dict.pop(k)
            if k == prefix + "version":
                state_dict.pop(k)

    fresh = Mix()
    fresh._register_load_state_dict_pre_hook(rename, with_module=True)
    old = {k.replace("a.", "left."): v for k, v in sd.items()}
    res = fresh.load_state_dict(old)
    return [out.detach(), x.grad, y.grad, net.a.weight.grad, counts, seen_kwargs, grads_in, sorted(sd), sd["version"], fresh.a.weight, sorted(res.missing_keys), sorted(res.unexpected_keys)]


def copy_and_pickle(torch, ctx):
    """A trained model with a non-persistent buffer and its Adam state deep-copied and
    pickled; the copies trained on diverge from the original without sharing storage; a
    checkpoint dict through torch.save/torch.load (weights_only default) into a fresh module."""
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)
            self.register_buffer("scale", torch.tensor(2.0), persistent=False)
            self.register_buffer("count", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            self.count += 1
            return self.fc(x) * self.scale

    net = ctx.init(Net(), "net")
    opt = torch.optim.Adam(net.parameters(), lr=0.1)
    x = ctx.t(np.ones((2, 3), dtype=np.float32))
    net(x).sum().backward()
    opt.step()
    twin = copy.deepcopy(net)
    opt2 = torch.optim.Adam(twin.parameters(), lr=0.1)
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    twin(x).pow(2).sum().backward()
    opt2.step()
    blob = pickle.dumps(net.state_dict())
    back = pickle.loads(blob)
    buf = io.BytesIO()
    torch.save({"sd": net.state_dict(), "meta": {"epoch": 1, "name": "net"}}, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    whole = Net()
    whole.load_state_dict(loaded["sd"])
    return [net.fc.weight, twin.fc.weight, sorted(net.state_dict()), sorted(dict(net.named_buffers())), back["count"], whole(x), int(whole.count), whole.scale, loaded["meta"], twin.fc.weight.data_ptr() != net.fc.weight.data_ptr(), opt2.state_dict()["state"][0]["exp_avg"]]


def init_and_prune(torch, ctx):
    """apply() with an initializer per layer type (xavier_uniform_ with gain, orthogonal_,
    zeros_, trunc_normal_ skipped: random), global unstructured L1 pruning across two layers,
    ln_structured pruning of rows, the masks and the pruned weights, prune.remove making it
    permanent, and training after pruning keeps the pruned zeros."""
    nn = torch.nn
    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")
    net = ctx.init(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)), "net")
    prune.global_unstructured([(net[0], "weight"), (net[2], "weight")], pruning_method=prune.L1Unstructured, amount=0.4)
    prune.ln_structured(net[2], "weight", amount=1, n=2, dim=0)
    masks = [net[0].weight_mask, net[2].weight_mask]
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = ctx.t(np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4))
    for _ in range(2):
        opt.zero_grad()
        net(x).pow(2).sum().backward()
        opt.step()
    sparsity = float((net[0].weight == 0).float().mean())
    prune.remove(net[0], "weight")
    keys = sorted(net.state_dict())
    return [masks, net[0].weight, net[2].weight, sparsity, keys, net[0].bias, prune.is_pruned(net)]


PROGRAMS = [parametrized_training, module_hooks, copy_and_pickle, init_and_prune]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


def test_captured_parametrized_training():
    check_program(parametrized_training, capture=True)
