"""torch.compile'd programs whose sizes vary between calls and that use those sizes as numbers
(dyn57), run on PyTorch (its eager backend) and on ember (automatic dynamic shapes): sizes
returned (``a.shape[0] + b.shape[0]``, ``x.shape``), made tensors (``torch.tensor(T)``,
``torch.full((), T)``) and taken in dicts, tuples and keyword arguments. Under a symbolic size
each call must give its own number, not the trace's symbol, and the symbolic trace must hold."""

import numpy as np

from .harness import check_program

# ruff: noqa: N806


def _compile(torch, ctx, model):
    return torch.compile(model, backend="eager") if ctx.is_torch else torch.compile(model)


def _traces(compiled) -> tuple[int, int, bool]:
    d = compiled.__dict__
    c = d["_compiled"] if "_compiled" in d else compiled._compiled
    auto = c.automatic
    return (
        c.function.stats.traces,
        sum(f.stats.traces for f in auto.functions.values()),
        auto.failed,
    )


def sizes_returned_from_nested_arguments(torch, ctx):
    nn = torch.nn

    class Merge(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, batch, pair):
            a, b = pair
            h = self.lin(batch["x"]) + batch["bias"]
            count = a.shape[0] + b.shape[0]
            return {"h": h, "cat": torch.cat([a, b], 0), "shape": h.shape}, (h.relu(), count)

    model = ctx.init(Merge())
    compiled = _compile(torch, ctx, model)
    rng = np.random.default_rng(12)
    out = []
    for n, k in [(3, 2), (5, 2), (3, 4), (7, 6), (3, 2)]:
        x = ctx.t(rng.standard_normal((n, 4)).astype(np.float32))
        batch = {"x": x, "bias": ctx.t(np.ones(4, np.float32))}
        a = ctx.t(rng.standard_normal((k, 2)).astype(np.float32))
        pair = (a, ctx.t(rng.standard_normal((n, 2)).astype(np.float32)))
        d, (r, count) = compiled(batch, pair)
        out += [d["h"], d["cat"], list(d["shape"]), r, count, type(count).__name__]
    if not ctx.is_torch:
        assert _traces(compiled)[2] is False, _traces(compiled)
    return out


def sizes_made_tensors(torch, ctx):
    def masked_mean(x, lengths):
        T = x.size(1)
        steps = torch.arange(T)
        mask = (steps[None, :] < lengths[:, None]).float()
        total = (x * mask[..., None]).sum(1)
        per_step = x.sum(1) / torch.tensor(T, dtype=torch.float32)
        scale = torch.full((), T).float().sqrt()
        return total / lengths[:, None].float(), per_step * scale, torch.tensor([T, x.size(0)])

    compiled = _compile(torch, ctx, masked_mean)
    rng = np.random.default_rng(3)
    out = []
    for T in (6, 9, 13, 6, 20):
        x = ctx.t(rng.standard_normal((3, T, 5)).astype(np.float32))
        lengths = ctx.t(rng.integers(1, T + 1, 3))
        out.append(compiled(x, lengths))
    if not ctx.is_torch:
        assert _traces(compiled) == (1, 1, False), _traces(compiled)
    return out


def test_sizes_returned_from_nested_arguments():
    check_program(sizes_returned_from_nested_arguments)


def test_sizes_made_tensors():
    check_program(sizes_made_tensors)
