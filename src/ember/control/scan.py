"""``scan(fn, init, xs)``: a loop over the leading axis of ``xs`` with a carry, whose body is a
subgraph (the same machinery as control/flow.py).

``fn(carry, x) -> (carry, y)``; the result is ``(final carry, ys)`` with the ``y``s stacked on a
new leading axis (as ``jax.lax.scan``). Eagerly it is a Python loop (gradients by the tape);
while a graph is built it is one ``scan`` node: inputs ``(*init, *xs, *lifted)``, attributes
``body`` (a graph from ``(*carries, *x slices, *lifted)`` to ``(*carries, *ys)``),
``num_carries``, ``num_xs`` and optionally ``checkpoint_every``; outputs the final carries,
then the stacked ``ys``. Its VJP (control/scan_grad.py) is a reverse scan written in ember ops: a
forward scan that also stacks each step's incoming carries (every k-th with
``checkpoint_every=k``), then a scan of the body's VJP over the reversed sequences, so the
gradients (carries, xs and closed-over tensors) are differentiable again.
"""

from __future__ import annotations

import numpy as np

from ..errors import EmberError, ShapeError
from ..graph.subgraph import fresh_results, run_subgraph, trace_subgraph, type_of, unify_lifted
from ..graph.tree import describe, flatten, unflatten
from ..ops._registry import OpDef, apply, export, register
from ..types import TensorType
from ._common import (
    check_carries,
    check_checkpoint,
    check_operands,
    fmt,
    mismatch,
    no_cost,
    same,
    tracing,
)
from .scan_grad import scan_vjp
from .scan_run import compile_scan
from .unroll import unroll_scan


def _scan_infer(*operands, body, num_carries, num_xs, checkpoint_every=None):
    check_checkpoint(checkpoint_every, "scan")
    carries = operands[:num_carries]
    xs = operands[num_carries : num_carries + num_xs]
    if not xs:
        raise EmberError("scan needs at least one sequence in xs", op="scan")
    length = xs[0].shape[0] if xs[0].shape else None
    for i, x in enumerate(xs):
        if not x.shape or x.shape[0] != length:
            raise ShapeError(
                f"every sequence in xs needs the same leading length; xs {i} has shape "
                f"{tuple(x.shape)}, xs 0 has length {length}",
                op="scan",
            )
    sliced = [*carries, *(TensorType(tuple(x.shape[1:]), x.dtype) for x in xs)]
    check_operands("scan", [*sliced, *operands[num_carries + num_xs :]], body, "body")
    for i, (c, out) in enumerate(zip(carries, body.outputs)):
        if not same(c, out.type):
            raise mismatch(
                "scan",
                f"the body changes carry {i} (%{body.inputs[i].name}) from {fmt(c)} to "
                f"{fmt(out.type)}; a scan body must keep its carries' shapes and dtypes",
                c,
                out.type,
            )
    ys = [TensorType((length, *v.type.shape), v.type.dtype) for v in body.outputs[num_carries:]]
    return (*(TensorType(tuple(c.shape), c.dtype) for c in carries), *ys)


def _scan_kernel(*arrays, body, num_carries, num_xs, checkpoint_every=None):

    carries = list(arrays[:num_carries])
    xs = arrays[num_carries : num_carries + num_xs]
    extra = list(arrays[num_carries + num_xs :])
    length = xs[0].shape[0]
    steps = []
    for t in range(length):
        results = run_subgraph(body, carries + [x[t] for x in xs] + extra)
        carries = results[:num_carries]
        steps.append(results[num_carries:])
    ys = []
    for k, v in enumerate(body.outputs[num_carries:]):
        if steps:
            ys.append(np.stack([s[k] for s in steps]))
        else:  # no steps: an empty stack of the body's output type
            ys.append(np.empty((0, *v.type.shape), dtype=v.type.dtype.np))
    return fresh_results([*carries, *ys], arrays)


def _onnx_scan(e):
    """``Scan``: the body takes the carries and one slice of each sequence, and returns the
    new carries and the step's outputs, which ONNX stacks; lifted values are read from the
    outer scope."""
    n, m = e.attrs["num_carries"], e.attrs["num_xs"]
    init, xs, lifted = e.inputs[:n], e.inputs[n : n + m], list(e.inputs[n + m :])
    if m == 0:
        e.unsupported("over no sequence")
    length = e.in_types[n].shape[0]
    if length == 0:  # (onnxruntime's Scan fails on empty sequences): the carries, no ys
        carries = [e.node("Identity", [c]) for c in init]
        ys = [e.constant(np.zeros(t.shape, t.dtype.np)) for t in e.out_types[n:]]
        return (*carries, *[e.node("Identity", [y]) for y in ys])
    slices = [TensorType(tuple(t.shape[1:]), t.dtype) for t in e.in_types[n : n + m]]
    graph = e.body(
        [*e.in_types[:n], *slices],
        lambda *formal: e.inline(e.attrs["body"], [*formal, *lifted]),
        "scan_body",
    )
    out = e.node("Scan", [*init, *xs], outputs=len(e.out_types), body=graph, num_scan_inputs=m)
    return (out,) if isinstance(out, str) else out


_SCAN = register(
    OpDef(
        name="scan",
        kind="control",
        infer=_scan_infer,
        kernel=_scan_kernel,
        compile=compile_scan,  # control/scan_run.py: the body planned once, ops' C forms
        vjp=scan_vjp,  # control/scan_grad.py
        cost=no_cost,
        unroll=unroll_scan,  # control/unroll.py
        num_outputs=-1,
        onnx=_onnx_scan,
        doc="scan(*init, *xs, *lifted; body, num_carries, num_xs[, checkpoint_every]): a loop "
        "over xs' first axis.",
    )
)


@export
def scan(fn, init, xs, *, checkpoint_every: int | None = None):
    """``carry = init; for x in xs: carry, y = fn(carry, x)``; returns ``(carry, ys)`` with the
    ``y``s stacked on a new first axis. ``init``, ``xs`` and ``y`` are tensors or tuple, list
    and dict nests of them; every tensor in ``xs`` is sliced along its first axis (all of the
    same length), and ``fn`` must keep the carry's structure, shapes and dtypes.

    Gradients flow to the floating-point carries, sequences and closed-over tensors. The
    backward pass stacks every step's carry; with ``checkpoint_every=k`` it keeps every k-th and
    recomputes the rest segment by segment (O(n/k + k) stacked carries; even an eager call is
    then recorded as one node, so that this gradient, not the tape of every step, is used)."""
    check_checkpoint(checkpoint_every, "scan")
    if not tracing() and checkpoint_every is None:
        return _eager_scan(fn, init, xs)
    return staged_scan(fn, init, xs, checkpoint_every=checkpoint_every)


def _eager_scan(fn, init, xs):
    from ..ops.concat import stack

    c_leaves, c_paths, c_spec = flatten(init, "scan carries", numbers=True)
    c_types = [type_of(t) for t in c_leaves]
    x_leaves, _, x_spec = flatten(xs, "scan sequences", numbers=True)
    if not x_leaves:
        raise EmberError("scan needs at least one sequence in xs", op="scan")
    carry, ys, y_spec = init, [], None
    for t in range(x_leaves[0].shape[0]):
        carry, y = fn(carry, unflatten(x_spec, [x[t] for x in x_leaves]))
        check_carries(carry, c_spec, c_types, c_paths, op="scan")
        y_leaves, _, y_spec = flatten(y, "scan outputs", numbers=True)
        ys.append(y_leaves)
    if y_spec is None:
        # no steps: trace nothing, the outputs' structure is unknown without running fn
        raise EmberError("an eager scan over zero steps cannot know fn's outputs", op="scan")
    return carry, unflatten(y_spec, [stack([step[k] for step in ys]) for k in range(len(ys[0]))])


def staged_scan(fn, init, xs, *, checkpoint_every: int | None = None):
    """`scan` recorded as a node even when eager (see control/flow.py's docstring)."""

    c_leaves, _, c_spec = flatten(init, "scan carries", numbers=True)
    x_leaves, _, x_spec = flatten(xs, "scan sequences", numbers=True)
    if not x_leaves or any(not x.shape for x in x_leaves):
        raise EmberError("scan needs sequences (tensors with a first axis) in xs", op="scan")
    types = [type_of(t) for t in c_leaves]
    types += [TensorType(tuple(x.shape[1:]), x.dtype) for x in x_leaves]
    names = [f"carry{i}" for i in range(len(c_leaves))] + [f"x{i}" for i in range(len(x_leaves))]
    n = len(c_leaves)
    specs = {}

    def body(*args):
        carry, y = fn(unflatten(c_spec, args[:n]), unflatten(x_spec, args[n:]))
        specs["y"] = flatten(y, "scan outputs", numbers=True)[2]
        return (carry, y)

    graph, _, spec, lifted = trace_subgraph(body, types, names, "body", "scan outputs")
    if spec[1][0] != c_spec:
        raise EmberError(
            f"the body returns {describe(spec[1][0])} but the carries are {describe(c_spec)}; "
            "a scan body must return its carries' structure",
            op="scan",
        )
    extra = unify_lifted([(graph, lifted)], len(types))
    attrs = {} if checkpoint_every is None else {"checkpoint_every": checkpoint_every}
    outs = apply(
        _SCAN,
        *c_leaves,
        *x_leaves,
        *extra,
        body=graph,
        num_carries=n,
        num_xs=len(x_leaves),
        **attrs,
    )
    return unflatten(c_spec, outs[:n]), unflatten(specs["y"], outs[n:])
