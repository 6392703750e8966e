"""Reverse-mode gradients of ``while_loop`` (the ``while_loop_grad`` primitive), and the helpers
the loop gradients share (control/scan_grad.py holds ``scan``'s VJP).

* **while_loop** (`while_vjp`): a data-dependent trip count cannot be a static shape, so the
  VJP emits one ``while_loop_grad(*init, *lifted, *cotangents; cond, body, body_vjp,
  num_carries, wrt_lifted, checkpoint_every)`` node. Its kernel *recomputes* the forward loop
  (the forward node's outputs are only the final carries, not a stack), keeping each
  iteration's incoming carries in a Python list (the stack), then walks the stack backwards
  running ``body_vjp`` (the body's VJP traced once into a graph when the node is emitted) and
  accumulating the lifted operands' gradients. With ``checkpoint_every=k`` only every k-th
  carry is kept and each segment of k is recomputed from its checkpoint when the backward walk
  reaches it: O(n/k + k) carries held instead of O(n), for about one more forward pass.
  ``while_loop_grad`` has no VJP: no higher-order gradients through a ``while_loop``.

Only floating-point carries and lifted operands get gradients (the others get None). The
loop gradients run the body again, so a body that draws random numbers is refused (the
draws would differ from the forward's). `record_loop_gradients` lets a caller observe what the
``while_loop_grad`` kernels did (iterations, peak number of carries held).

flow.py registers `while_vjp` as ``while_loop``'s VJP; this module does not import it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes as dt
from ..errors import AutogradError, EmberError
from ..graph.ir import Graph
from ..graph.subgraph import fresh_results, graph_vjp, run_subgraph, trace_subgraph, type_of
from ..ops._registry import OpDef, apply, export, register
from ..transforms.dce import eliminate_dead_code
from ..types import TensorType
from ._common import check_operands, fmt, no_cost, same

# ------------------------------------------------------------------------------ shared


def floating(t) -> bool:
    return t.dtype.is_floating_point


def refuse_random(graph, op: str) -> None:
    """The gradients recompute the loop: random draws in the body would not repeat."""

    for node in graph.nodes:
        if node.kind != "call":
            continue
        if node.op.kind == "random":
            raise AutogradError(
                f"the loop body draws random numbers ({node.op.name}, node %{node.name}); the "
                f"gradient of {op} runs the body again and the draws would differ; draw them "
                "outside the loop and pass them in (as a sequence of xs or a closed-over tensor)",
                op=op,
            )
        for attr in node.attrs.values():
            if isinstance(attr, Graph):
                refuse_random(attr, op)


def zeros_like_type(t):
    from ..ops.creation import zeros

    return zeros(tuple(t.shape), dtype=t.dtype)


def flip0(x):
    """``x`` reversed along its first axis (a ``flip`` node: works on symbolic lengths too)."""
    from ..ops.shape import flip

    return flip(x, 0)


# ------------------------------------------------------------------------------ while_loop


@dataclass
class LoopGradStats:
    """What one run of a ``while_loop_grad`` kernel did."""

    iterations: int  # trips of the forward loop
    checkpoint_every: int | None
    peak_carries: int  # the most loop states (carry tuples) held at once
    recomputed: int  # body steps run again during the backward walk (checkpointing)


_RECORDERS: list[list] = []


class record_loop_gradients:
    """``with ember.record_loop_gradients() as runs:`` collects a `LoopGradStats` per run of a
    ``while_loop_grad`` kernel inside the block (eager backward, ``ember.grad``, a compiled
    function's backward), so the memory a loop's gradient held can be checked."""

    def __enter__(self) -> list[LoopGradStats]:
        self.runs: list[LoopGradStats] = []
        _RECORDERS.append(self.runs)
        return self.runs

    def __exit__(self, *exc) -> bool:
        _RECORDERS.remove(self.runs)
        return False


export(record_loop_gradients)


def _while_grad_infer(*operands, cond, body, body_vjp, num_carries, wrt_lifted, checkpoint_every):
    op = "while_loop_grad"
    n_body = len(body.inputs)
    check_operands(op, operands[:n_body], body, "body")
    carries = operands[:num_carries]
    float_carries = [c for c in carries if floating(c)]
    cots = operands[n_body:]
    if len(cots) != len(float_carries):
        raise EmberError(
            f"expected a cotangent for each of the {len(float_carries)} floating carries, got "
            f"{len(cots)}",
            op=op,
        )
    for i, (c, t) in enumerate(zip(cots, float_carries)):
        if not same(c, t):
            raise EmberError(f"cotangent {i} is {fmt(c)} but its carry is {fmt(t)}", op=op)
    check_operands(op, operands, body_vjp, "body_vjp")
    lifted = operands[num_carries:n_body]
    want = [*float_carries, *(lifted[k] for k in wrt_lifted)]
    outs = [v.type for v in body_vjp.outputs]
    if len(outs) != len(want) or not all(same(a, b) for a, b in zip(outs, want)):
        got = ", ".join(fmt(t) for t in outs)
        wanted = ", ".join(fmt(t) for t in want)
        raise EmberError(f"body_vjp returns ({got}) but the gradients are ({wanted})", op=op)
    return tuple(TensorType(tuple(t.shape), t.dtype) for t in want)


def _while_grad_kernel(*arrays, cond, body, body_vjp, num_carries, wrt_lifted, checkpoint_every):

    n_body = len(body.inputs)
    init, lifted = list(arrays[:num_carries]), list(arrays[num_carries:n_body])
    cots = arrays[n_body:]
    nfc = len(cots)

    def going(c) -> bool:
        return bool(run_subgraph(cond, c + lifted)[0])

    def step(c) -> list:
        return run_subgraph(body, c + lifted)

    ct = list(cots)
    acc = [np.zeros_like(lifted[k]) for k in wrt_lifted]

    def back(c) -> None:
        nonlocal ct
        g = run_subgraph(body_vjp, c + lifted + ct)
        ct = g[:nfc]
        for a, b in zip(acc, g[nfc:]):
            a += b

    k = checkpoint_every
    stack: list = []  # every carry (k None), or every k-th one (the checkpoints)
    c, n, peak, recomputed = init, 0, 0, 0
    while going(c):
        if not k or n % k == 0:
            stack.append(c)
            peak = max(peak, len(stack))
        c = step(c)
        n += 1
    if not k:
        for c in reversed(stack):
            back(c)
    else:
        for start in reversed(range(0, n, k)):
            segment = [stack.pop()]
            for _ in range(start + 1, min(start + k, n)):
                segment.append(step(segment[-1]))
                recomputed += 1
            peak = max(peak, len(stack) + len(segment))
            for c in reversed(segment):
                back(c)
    stats = LoopGradStats(n, k, peak, recomputed)
    for runs in _RECORDERS:
        runs.append(stats)
    return fresh_results([*ct, *acc], arrays)


def _onnx_while_grad(e):
    """Two ONNX Loops: the forward loop again, stacking each iteration's incoming carries (a
    Loop's scan outputs), then as many iterations back through ``body_vjp`` over the stack
    from its top, accumulating the lifted operands' gradients (``checkpoint_every`` only
    trades memory for time: the gradients are the same)."""
    a = e.attrs
    cond, body, body_vjp = a["cond"], a["body"], a["body_vjp"]
    n, n_body = a["num_carries"], len(a["body"].inputs)
    carries, lifted = list(e.inputs[:n]), list(e.inputs[n:n_body])
    cots = list(e.inputs[n_body:])
    carry_types = list(e.in_types[:n])
    index_type, bool_type = TensorType((), dt.int64), TensorType((), dt.bool_)

    def truth(name):
        return name if cond.outputs[0].type.dtype is dt.bool_ else e.cast(name, dt.bool_)

    first = truth(e.inline(cond, carries + lifted)[0])

    def forward(iteration, keep_going, *current):
        new = list(e.inline(body, list(current) + lifted))
        return [truth(e.inline(cond, new + lifted)[0]), *new, *current]

    stacked_types = [TensorType(tuple(t.shape), t.dtype) for t in carry_types]
    graph = e.body(
        [index_type, bool_type, *carry_types],
        forward,
        "grad_forward",
        [bool_type, *carry_types, *stacked_types],
    )
    out = e.node("Loop", ["", first, *carries], outputs=2 * n, body=graph)
    out = [out] if isinstance(out, str) else list(out)
    stacks = out[n:]
    trips = e.node("Gather", [e.node("Shape", [stacks[0]]), e.scalar(0, dt.int64)])
    last = e.node("Sub", [trips, e.scalar(1, dt.int64)])
    grads = [e.in_types[n_body + k] for k in range(len(cots))]
    acc_types = [e.in_types[n + k] for k in a["wrt_lifted"]]
    zeros = [
        e.node("ConstantOfShape", [e.node("Shape", [lifted[k]])], value=np.zeros(1, t.dtype.np))
        for k, t in zip(a["wrt_lifted"], acc_types)
    ]

    def backward(iteration, keep_going, *state):
        ct, acc = list(state[: len(cots)]), list(state[len(cots) :])
        at = e.node("Sub", [last, iteration])  # the stack's top first
        current = [e.node("Gather", [s, at], axis=0) for s in stacks]
        g = list(e.inline(body_vjp, current + lifted + ct))
        new_acc = [e.node("Add", [x, y]) for x, y in zip(acc, g[len(cots) :])]
        return [keep_going, *g[: len(cots)], *new_acc]

    graph = e.body(
        [index_type, bool_type, *grads, *acc_types],
        backward,
        "grad_backward",
        [bool_type, *grads, *acc_types],
    )
    out = e.node("Loop", [trips, "", *cots, *zeros], outputs=len(cots) + len(zeros), body=graph)
    return (out,) if isinstance(out, str) else out


WHILE_LOOP_GRAD = register(
    OpDef(
        name="while_loop_grad",
        onnx=_onnx_while_grad,
        kind="control",
        infer=_while_grad_infer,
        kernel=_while_grad_kernel,
        vjp=None,  # no higher-order gradients through a while_loop
        cost=no_cost,
        num_outputs=-1,
        doc="while_loop_grad(*init, *lifted, *cotangents; cond, body, body_vjp, num_carries, "
        "wrt_lifted, checkpoint_every): a while_loop's gradients, its forward recomputed.",
    )
)


def _body_vjp_graph(body, nc: int, fc: list, fl: list):
    """The body's VJP as a graph: ``(*carries, *lifted, *cotangents of the floating carries) ->
    (*gradients of the floating carries, *gradients of the lifted operands fl)``."""

    n_body = len(body.inputs)
    vjp = graph_vjp(body, (*fc, *(nc + k for k in fl)))
    types = [v.type for v in body.inputs] + [body.inputs[i].type for i in fc]
    names = [v.name for v in body.inputs] + [f"ct_{body.inputs[i].name}" for i in fc]

    def fn(*args):
        cots: list = [None] * nc
        for i, g in zip(fc, args[n_body:]):
            cots[i] = g
        return tuple(vjp(*args[:n_body], *cots))

    graph, _, _, lifted = trace_subgraph(fn, types, names, "body_vjp", "the body's gradients")
    if lifted:  # the VJP reads only the body's inputs; anything else would be a bug here
        raise AutogradError(
            "the loop body's VJP closed over values outside the loop: "
            + ", ".join(fmt(type_of(t)) for _, t in lifted),
            op="while_loop",
        )

    return eliminate_dead_code(graph)[0]  # the forward values the VJP does not read


def while_vjp(ctx, *cotangents):
    """The VJP of ``while_loop(*carries, *lifted; cond, body[, checkpoint_every])``: one
    ``while_loop_grad`` node (module docstring)."""
    body = ctx.attrs["body"]
    nc = len(body.outputs)
    inputs, types, needs = ctx.inputs, ctx.in_types, ctx.needs_input_grad
    fc = [i for i in range(nc) if floating(types[i])]
    fl = [k for k in range(len(inputs) - nc) if floating(types[nc + k]) and needs[nc + k]]
    if not (fl or any(needs[i] for i in fc)):
        return (None,) * len(inputs)
    refuse_random(body, "while_loop")
    cots = [
        zeros_like_type(types[i])
        if i >= len(cotangents) or cotangents[i] is None
        else cotangents[i]
        for i in fc
    ]
    grads = apply(
        WHILE_LOOP_GRAD,
        *inputs,
        *cots,
        cond=ctx.attrs["cond"],
        body=body,
        body_vjp=_body_vjp_graph(body, nc, fc, fl),
        num_carries=nc,
        wrt_lifted=tuple(fl),
        checkpoint_every=ctx.attrs.get("checkpoint_every"),
    )
    result: list = [None] * len(inputs)
    for i, g in zip(fc, grads[: len(fc)]):
        result[i] = g if needs[i] else None
    for k, g in zip(fl, grads[len(fc) :]):
        result[nc + k] = g
    return tuple(result)
