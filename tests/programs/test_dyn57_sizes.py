"""torch.compile'd programs whose sizes vary between calls and that use those sizes as numbers
(dyn57), run on PyTorch (its eager backend) and on ember (automatic dynamic shapes): sizes
returned (``a.shape[0] + b.shape[0]``, ``x.shape``), made tensors (``torch.tensor(T)``,
``torch.full((), T)``), stored in a module attribute (``self.last_len``), with tensors taken in
dicts, tuples and keyword arguments. Under a symbolic size
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


def keyword_masks_and_a_stored_length(torch, ctx):
    nn = torch.nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(6, 10)
            self.norm = nn.LayerNorm(10)

        def forward(self, x, *, mask=None, extra=None):
            self.last_len = x.shape[1]
            h = self.norm(self.proj(x))
            if mask is not None:
                h = h.masked_fill(~mask.unsqueeze(-1), 0.0)
            out = {"pooled": h.sum(1) / mask.sum(1, keepdim=True), "seq": h}
            if extra is not None:
                out["extra"] = (extra * 2, h.max(dim=1).values)
            return out

    model = ctx.init(Encoder())
    compiled = _compile(torch, ctx, model)
    rng = np.random.default_rng(11)
    out = []
    for T in [5, 7, 5, 12, 7]:
        x = ctx.t(rng.standard_normal((3, T, 6)).astype(np.float32))
        mask = ctx.t(rng.random((3, T)) > 0.2)
        mask[:, 0] = True
        got = compiled(x, mask=mask, extra=ctx.t(np.ones((3, T), np.float32)))
        out += [got["pooled"], got["seq"], *got["extra"], model.last_len]
    if not ctx.is_torch:
        assert _traces(compiled) == (1, 1, False), _traces(compiled)
    return out


def test_sizes_returned_from_nested_arguments():
    check_program(sizes_returned_from_nested_arguments)


def test_sizes_made_tensors():
    check_program(sizes_made_tensors)


def test_keyword_masks_and_a_stored_length():
    check_program(keyword_masks_and_a_stored_length)
