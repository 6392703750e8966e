"""``scan``'s VJP: a reverse scan written in ember ops, so the gradient is differentiable again.

For ``scan(*init, *xs, *lifted; body, num_carries, num_xs[, checkpoint_every])``:

1. a forward scan runs the body once more and also emits each step's *incoming* carries as
   extra stacked ``ys`` (static shapes: one slice per step);
2. a scan over the reversed sequences (``flip`` on axis 0: xs, the stacked carries, the ys'
   cotangents) runs the body's VJP (`graph_vjp`) step by step. Its carry is the carries'
   cotangent plus one accumulator per lifted (closed-over) operand; the ``xs`` gradients come
   out as its stacked ``ys`` and are flipped back.

Both are ordinary ``scan`` nodes, so ``grad(grad(f))`` works. With ``checkpoint_every=k`` (and a
static length n > k) step 1 keeps only every k-th carry: an outer scan over the n // k segments
of k steps (the sequences reshaped to (n // k, k, ...)) stacks each segment's incoming carry,
and step 2 is an outer reverse scan over the segments whose body runs steps 1 and 2 on its one
segment. The stacked carries are then (n // k) + k (+ the n % k tail's) instead of n, for one
more forward pass. A scan of symbolic length keeps every carry.

Only floating-point carries, sequences and lifted operands get gradients (the others None);
a missing cotangent is zeros. The body runs again, so a body drawing random numbers is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..graph.subgraph import graph_vjp, inline_graph, trace_subgraph, type_of, unify_lifted
from ..ops._registry import apply
from ..transforms.dce import eliminate_dead_code
from ..types import TensorType
from .flow_grad import flip0, floating, refuse_random, zeros_like_type


def scan_call(op, fn, carries: list, xs: list) -> tuple[list, list]:
    """Record one node of the scan ``op`` (in the current mode) of ``fn(carries, x_slices) ->
    (carries, ys)``, lists of tensors; returns (final carries, stacked ys). ``op`` is the op
    being differentiated (``ctx.op``): the VJP of a scan is scans, and this module does not
    import scan.py, which imports it."""
    n = len(carries)
    types = [type_of(c) for c in carries]
    types += [TensorType(tuple(x.shape[1:]), x.dtype) for x in xs]
    names = [f"carry{i}" for i in range(n)] + [f"x{j}" for j in range(len(xs))]

    def body(*args):
        new, ys = fn(list(args[:n]), list(args[n:]))
        return (tuple(new), tuple(ys))

    graph, _, _, lifted = trace_subgraph(body, types, names, "body", "scan outputs")
    graph = eliminate_dead_code(graph)[0]  # e.g. the forward values a VJP does not read
    extra = unify_lifted([(graph, lifted)], len(types))
    outs = apply(op, *carries, *xs, *extra, body=graph, num_carries=n, num_xs=len(xs))
    return list(outs[:n]), list(outs[n:])


@dataclass
class _Parts:
    """The positions that matter to the reverse scan of one body."""

    op: object  # the scan op (ctx.op), whose nodes the reverse scan records
    body: object  # the body graph
    nc: int  # carries
    nx: int  # sequences
    ny: int  # stacked outputs
    fc: list  # floating carries (their cotangents chain through every step)
    fx: list  # floating sequences whose gradient is wanted
    fl: list  # floating lifted operands whose gradient is wanted
    fy: list  # floating outputs (the others have no cotangent)


def _reverse_scan(p: _Parts, init, xs, lifted, ct_c, ct_y, acc=None) -> tuple[list, list, list]:
    """The gradients (of the floating carries' init, of the xs fx, of the lifted fl) of a scan
    of ``p.body`` from carries ``init`` over ``xs``, given the final carries' cotangents
    ``ct_c`` (one per fc) and the stacked outputs' ``ct_y`` (one per fy). The lifted operands'
    gradients are added to ``acc`` (zeros when None) step by step, in reverse order."""

    nc, nx, ny = p.nc, p.nx, p.ny
    stacked: list = []
    if nc:

        def forward(c, x):
            return inline_graph(p.body, [*c, *x, *lifted])[:nc], c

        _, stacked = scan_call(p.op, forward, list(init), list(xs))

    body_vjp = graph_vjp(p.body, (*p.fc, *(nc + j for j in p.fx), *(nc + nx + k for k in p.fl)))
    nfc, nfx = len(p.fc), len(p.fx)

    def backward(carry, seq):
        g_c, acc = carry[:nfc], carry[nfc:]
        x_t, c_t, gy_t = seq[:nx], seq[nx : nx + nc], seq[nx + nc :]
        cots: list = [None] * (nc + ny)
        for i, g in zip(p.fc, g_c):
            cots[i] = g
        for m, g in zip(p.fy, gy_t):
            cots[nc + m] = g
        grads = body_vjp(*c_t, *x_t, *lifted, *cots)
        g_lifted = grads[nfc + nfx :]
        return [*grads[:nfc], *(a + g for a, g in zip(acc, g_lifted))], list(grads[nfc : nfc + nfx])

    seqs = [flip0(x) for x in xs] + [flip0(s) for s in stacked] + [flip0(g) for g in ct_y]
    if acc is None:
        acc = [zeros_like_type(lifted[k]) for k in p.fl]
    carry0 = [*ct_c, *acc]
    final, g_xs = scan_call(p.op, backward, carry0, seqs)
    return final[:nfc], [flip0(g) for g in g_xs], final[nfc:]


def _checkpointed(p: _Parts, init, xs, lifted, ct_c, ct_y, k: int):
    """`_reverse_scan` keeping every k-th carry (module docstring); the same results, summed
    in the same order."""
    from ..ops.concat import concat

    n = xs[0].shape[0]
    if not isinstance(n, int) or n <= k or not p.nc:
        return _reverse_scan(p, init, xs, lifted, ct_c, ct_y)
    segments, rest = divmod(n, k)
    head = segments * k

    def split(t):  # (n, ...) -> (segments, k, ...) and the (rest, ...) tail
        return t[:head].reshape(segments, k, *t.shape[1:]), t[head:]

    xs_h, xs_t = zip(*(split(x) for x in xs))
    cy_h, cy_t = zip(*(split(g) for g in ct_y)) if ct_y else ((), ())
    nc, nx, nfc = p.nc, p.nx, len(p.fc)

    def segment_forward(c, x_seg):
        def step(c2, x2):
            return inline_graph(p.body, [*c2, *x2, *lifted])[:nc], []

        return scan_call(p.op, step, c, x_seg)[0], c  # each segment's incoming carry: a checkpoint

    middle, checkpoints = scan_call(p.op, segment_forward, list(init), list(xs_h))
    g_c, acc, g_tail = list(ct_c), [zeros_like_type(lifted[j]) for j in p.fl], []
    if rest:
        g_c, g_tail, acc = _reverse_scan(p, middle, xs_t, lifted, g_c, cy_t, acc)

    def segment_backward(carry, seq):
        g, a = carry[:nfc], carry[nfc:]
        c_s, x_seg, cy_seg = seq[:nc], seq[nc : nc + nx], seq[nc + nx :]
        g2, gx, a2 = _reverse_scan(p, c_s, x_seg, lifted, g, cy_seg, a)
        return [*g2, *a2], gx

    seqs = [*map(flip0, checkpoints), *map(flip0, xs_h), *map(flip0, cy_h)]
    final, gx_h = scan_call(p.op, segment_backward, [*g_c, *acc], seqs)
    g_xs = []
    for j, g in enumerate(gx_h):
        g = flip0(g).reshape(head, *g.shape[2:])
        g_xs.append(concat([g, g_tail[j]]) if rest else g)
    return final[:nfc], g_xs, final[nfc:]


def scan_vjp(ctx, *cotangents):
    """The VJP of a ``scan`` node (module docstring)."""
    body = ctx.attrs["body"]
    nc, nx = ctx.attrs["num_carries"], ctx.attrs["num_xs"]
    inputs, types, needs = ctx.inputs, ctx.in_types, ctx.needs_input_grad
    init, xs, lifted = inputs[:nc], inputs[nc : nc + nx], inputs[nc + nx :]
    ny = len(body.outputs) - nc
    fc = [i for i in range(nc) if floating(types[i])]
    fx = [j for j in range(nx) if floating(types[nc + j]) and needs[nc + j]]
    fl = [k for k in range(len(lifted)) if floating(types[nc + nx + k]) and needs[nc + nx + k]]
    if not (fx or fl or any(needs[i] for i in fc)):
        return (None,) * len(inputs)
    refuse_random(body, "scan")
    fy = [m for m in range(ny) if floating(ctx.out_types[nc + m])]

    def cot(i):
        c = cotangents[i] if i < len(cotangents) else None
        return zeros_like_type(ctx.out_types[i]) if c is None else c

    parts = _Parts(ctx.op, body, nc, nx, ny, fc, fx, fl, fy)
    ct_c, ct_y = [cot(i) for i in fc], [cot(nc + m) for m in fy]
    k = ctx.attrs.get("checkpoint_every")
    if k:
        g_c, g_xs, g_l = _checkpointed(parts, init, xs, lifted, ct_c, ct_y, k)
    else:
        g_c, g_xs, g_l = _reverse_scan(parts, init, xs, lifted, ct_c, ct_y)

    grads: list = [None] * len(inputs)
    for i, g in zip(fc, g_c):
        grads[i] = g if needs[i] else None
    for j, g in zip(fx, g_xs):
        grads[nc + j] = g
    for k, g in zip(fl, g_l):
        grads[nc + nx + k] = g
    return tuple(grads)
