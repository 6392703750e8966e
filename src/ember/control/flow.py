"""Control flow: ``cond``, ``while_loop`` and ``fori_loop``, whose branches and bodies are
subgraphs (graphs held in the node's attributes).

Two ways to run, chosen by the mode, never by the user:

* **Eager** (no graph being built): plain Python. ``cond`` reads the predicate and calls one
  branch; the loops are Python loops. The tape records the ops the branch or body ran, so eager
  gradients need nothing special. The loops check, at each step, that the body keeps its carries'
  structure, shapes and dtypes, with the same error a traced loop gives.
* **Traced** (a `GraphBuilder` is current: ``ember.trace``, ``ember.function``, ``ember.grad``):
  each branch or body is traced into its own graph (graph/subgraph.py) and one node is
  recorded, so the predicate and the trip count stay data-dependent:

  - ``cond(pred, *operands, *lifted; true_branch, false_branch)``: each branch graph takes the
    operands and the lifted values and returns the outputs;
  - ``while_loop(*carries, *lifted; cond, body[, checkpoint_every])``: ``cond`` maps the
    carries (and lifted values) to a 0-d predicate, ``body`` to new carries.

The shape rules check the subgraphs against the operands (both branches give the same types; the
body keeps every carry's type), so ``graph.verify()`` checks them too. Kernels run subgraphs with
the reference interpreter. ``cond``'s VJP is a ``cond`` of the branches' VJPs: the gradient flows
through the branch taken, traced or eager. ``while_loop``'s VJP (control/flow_grad.py) is a
``while_loop_grad`` node that recomputes the loop, keeps its carries on a stack (every k-th with
``checkpoint_every=k``) and walks them back through the body's VJP; that node has no VJP, so no
second derivative goes through a ``while_loop``. Eager loops differentiate through the tape,
except with ``checkpoint_every``, which records the node even eagerly.

``staged_cond`` / ``staged_while_loop`` record the node even eagerly (the node then runs its
kernel and its VJP on the tape); the conformance samples use them to check the op's rules.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import EmberError, ShapeError
from ..graph.subgraph import (
    fresh_results,
    graph_vjp,
    run_subgraph,
    trace_subgraph,
    type_of,
    unify_lifted,
)
from ..graph.tree import LEAF, describe, flatten, unflatten
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
from .flow_grad import while_vjp
from .unroll import unroll_while

# ------------------------------------------------------------------------------ type rules


def _cond_infer(pred, *operands, true_branch, false_branch):
    if tuple(pred.shape) != ():
        raise ShapeError(
            f"the predicate must be a 0-d tensor, got shape {tuple(pred.shape)}; reduce it "
            "(e.g. .any(), .all(), .sum() > 0) first",
            op="cond",
        )
    check_operands("cond", operands, true_branch, "true_branch")
    check_operands("cond", operands, false_branch, "false_branch")
    t_out, f_out = true_branch.outputs, false_branch.outputs
    if len(t_out) != len(f_out):
        raise EmberError(
            f"the branches return different numbers of tensors: true_branch {len(t_out)}, "
            f"false_branch {len(f_out)}",
            op="cond",
        )
    for i, (a, b) in enumerate(zip(t_out, f_out)):
        if not same(a.type, b.type):
            raise mismatch(
                "cond",
                f"output {i} differs between the branches: true_branch gives {fmt(a.type)}, "
                f"false_branch gives {fmt(b.type)}; both branches must return the same shapes "
                "and dtypes",
                a.type,
                b.type,
            )
    return tuple(v.type for v in t_out)


def _while_infer(*operands, cond, body, checkpoint_every=None):
    check_checkpoint(checkpoint_every)
    check_operands("while_loop", operands, cond, "cond")
    check_operands("while_loop", operands, body, "body")
    if len(cond.outputs) != 1 or tuple(cond.outputs[0].type.shape) != ():
        got = ", ".join(fmt(v.type) for v in cond.outputs)
        raise ShapeError(f"cond must return one 0-d tensor, got ({got})", op="while_loop")
    carries = body.inputs[: len(body.outputs)]
    if len(body.outputs) > len(body.inputs):
        raise EmberError(
            f"the body returns {len(body.outputs)} carries but takes {len(body.inputs)} inputs",
            op="while_loop",
        )
    for i, (v, out) in enumerate(zip(carries, body.outputs)):
        if not same(v.type, out.type):
            raise mismatch(
                "while_loop",
                f"the body changes carry {i} (%{v.name}) from {fmt(v.type)} to "
                f"{fmt(out.type)}; a loop body must keep its carries' shapes and dtypes",
                v.type,
                out.type,
            )
    return tuple(v.type for v in carries)


# ------------------------------------------------------------------------------ kernels


def _cond_kernel(pred, *arrays, true_branch, false_branch):

    branch = true_branch if bool(pred) else false_branch
    return fresh_results(run_subgraph(branch, arrays), arrays)


def _while_kernel(*arrays, cond, body, checkpoint_every=None):

    n = len(body.outputs)
    carries, extra = list(arrays[:n]), list(arrays[n:])
    while bool(run_subgraph(cond, carries + extra)[0]):
        carries = run_subgraph(body, carries + extra)
    return fresh_results(carries, arrays)


def _cond_vjp(ctx, *cotangents):

    pred, *operands = ctx.inputs
    wrt = tuple(
        i
        for i, (need, t) in enumerate(zip(ctx.needs_input_grad[1:], ctx.in_types[1:]))
        if need and t.dtype.is_floating_point
    )
    grads: list = [None] * len(operands)
    if wrt:
        true_vjp = graph_vjp(ctx.attrs["true_branch"], wrt)
        false_vjp = graph_vjp(ctx.attrs["false_branch"], wrt)
        results = cond(pred, true_vjp, false_vjp, *operands, *cotangents)
        for i, g in zip(wrt, results):
            grads[i] = g
    return (None, *grads)


_SCALAR_INDEX = TensorType((), dt.int64)
_SCALAR_BOOL = TensorType((), dt.bool_)


def _onnx_truth(e, name: str, dtype) -> str:
    return name if dtype is dt.bool_ else e.cast(name, dt.bool_)


def _onnx_cond(e):
    """``If``: each branch a subgraph reading the operands from the outer scope."""
    pred, *operands = e.inputs
    pred = _onnx_truth(e, pred, e.in_types[0].dtype)

    def branch(graph, name):
        return e.body([], lambda: e.inline(graph, operands), name)

    then_branch = branch(e.attrs["true_branch"], "then")
    else_branch = branch(e.attrs["false_branch"], "else")
    out = e.node(
        "If", [pred], outputs=len(e.out_types), then_branch=then_branch, else_branch=else_branch
    )
    return (out,) if isinstance(out, str) else out


def _onnx_while(e):
    """``Loop`` with no trip count: the condition is evaluated on the initial carries before
    the loop, and on the new carries at the end of each iteration (the body's first output);
    lifted values are read from the outer scope."""
    body, cond = e.attrs["body"], e.attrs["cond"]
    n = len(body.outputs)
    carries, lifted = list(e.inputs[:n]), list(e.inputs[n:])
    pred_type = cond.outputs[0].type.dtype
    first = _onnx_truth(e, e.inline(cond, carries + lifted)[0], pred_type)

    def build(iteration, keep_going, *current):
        new = list(e.inline(body, list(current) + lifted))
        pred = _onnx_truth(e, e.inline(cond, new + lifted)[0], pred_type)
        return [pred, *new]

    graph = e.body([_SCALAR_INDEX, _SCALAR_BOOL, *e.in_types[:n]], build, "loop_body")
    out = e.node("Loop", ["", first, *carries], outputs=n, body=graph)
    return (out,) if isinstance(out, str) else out


_COND = register(
    OpDef(
        name="cond",
        kind="control",
        infer=_cond_infer,
        kernel=_cond_kernel,
        vjp=_cond_vjp,
        cost=no_cost,
        num_outputs=-1,  # as many as the branches return: always a tuple
        doc="cond(pred, *operands; true_branch, false_branch): run one branch graph.",
        onnx=_onnx_cond,
    )
)


_WHILE = register(
    OpDef(
        name="while_loop",
        kind="control",
        infer=_while_infer,
        kernel=_while_kernel,
        vjp=while_vjp,  # control/flow_grad.py
        cost=no_cost,
        unroll=unroll_while,  # control/unroll.py
        num_outputs=-1,
        onnx=_onnx_while,
        doc="while_loop(*carries, *lifted; cond, body[, checkpoint_every]): iterate body while "
        "cond holds.",
    )
)


# ------------------------------------------------------------------------------ public API


@export
def cond(pred, true_fn, false_fn, *operands):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``.

    ``pred`` is a 0-d tensor (or a Python bool); ``operands`` are tensors or tuples, lists and
    dicts of them; both branches must return the same structure of tensors with the same shapes
    and dtypes. Eagerly this is an ``if``; while a graph is built both branches are traced into
    one ``cond`` node, so the choice is made at run time. Branches may use tensors they close
    over. Gradients flow through the branch taken.
    """
    if isinstance(pred, bool) or not tracing():
        return true_fn(*operands) if bool(pred) else false_fn(*operands)
    return staged_cond(pred, true_fn, false_fn, *operands)


def staged_cond(pred, true_fn, false_fn, *operands):
    """`cond` recorded as a node even when eager (see the module docstring)."""

    leaves, paths, spec = flatten(operands, "cond operands", numbers=True)
    types = [type_of(t) for t in leaves]
    names = [f"operand{i}" for i in range(len(leaves))]

    def branch(fn):
        return lambda *xs: fn(*unflatten(spec, xs))

    t_graph, _, t_spec, t_lifted = trace_subgraph(
        branch(true_fn), types, names, "true_branch", "cond branches' results"
    )
    f_graph, _, f_spec, f_lifted = trace_subgraph(
        branch(false_fn), types, names, "false_branch", "cond branches' results"
    )
    if t_spec != f_spec:
        raise EmberError(
            "the branches return different structures (true_branch "
            f"{describe(t_spec)}, false_branch {describe(f_spec)}); both must return the same "
            "nest of tensors",
            op="cond",
        )
    if not t_graph.outputs:
        raise EmberError("the branches return no tensors", op="cond")
    lifted = unify_lifted([(t_graph, t_lifted), (f_graph, f_lifted)], len(leaves))
    outs = apply(_COND, pred, *leaves, *lifted, true_branch=t_graph, false_branch=f_graph)
    return unflatten(t_spec, outs)


@export
def while_loop(cond_fn, body_fn, init_vals, *, checkpoint_every: int | None = None):
    """Repeat ``vals = body_fn(vals)`` while ``cond_fn(vals)``, starting from ``init_vals``;
    returns the final ``vals``.

    ``init_vals`` is a tensor or a tuple, list or dict nest of tensors; ``cond_fn`` and
    ``body_fn`` take it as one argument, ``cond_fn`` returns a 0-d tensor, and ``body_fn``
    returns the same structure with the same shapes and dtypes (as ``jax.lax.while_loop``).
    Eagerly this is a Python loop; while a graph is built it is one ``while_loop`` node.

    Gradients flow to the floating-point carries and closed-over tensors, for any trip count.
    The backward pass runs the loop again, keeping every iteration's carries; with
    ``checkpoint_every=k`` it keeps only every k-th and recomputes the others segment by
    segment, holding O(n/k + k) carries instead of O(n) (then even an eager call is recorded
    as one node, so that its gradient, not the tape of every iteration, is used).
    """
    check_checkpoint(checkpoint_every)
    if not tracing() and checkpoint_every is None:
        leaves, paths, spec = flatten(init_vals, "loop carries", numbers=True)
        types = [type_of(t) for t in leaves]
        vals = init_vals
        while bool(cond_fn(vals)):
            vals = body_fn(vals)
            check_carries(vals, spec, types, paths)
        return vals
    return staged_while_loop(cond_fn, body_fn, init_vals, checkpoint_every=checkpoint_every)


def staged_while_loop(cond_fn, body_fn, init_vals, *, checkpoint_every: int | None = None):
    """`while_loop` recorded as a node even when eager (see the module docstring)."""

    check_checkpoint(checkpoint_every)
    leaves, paths, spec = flatten(init_vals, "loop carries", numbers=True)
    if not leaves:
        raise EmberError("a loop needs at least one tensor carry", op="while_loop")
    types = [type_of(t) for t in leaves]
    names = [f"carry{i}" for i in range(len(leaves))]
    c_graph, _, c_spec, c_lifted = trace_subgraph(
        lambda *xs: cond_fn(unflatten(spec, xs)), types, names, "cond", "cond_fn's result"
    )
    if c_spec != LEAF:
        raise EmberError(
            f"cond_fn must return one 0-d tensor, got {describe(c_spec)}", op="while_loop"
        )
    b_graph, _, b_spec, b_lifted = trace_subgraph(
        lambda *xs: body_fn(unflatten(spec, xs)), types, names, "body", "a loop body's result"
    )
    if b_spec != spec:
        raise EmberError(
            f"the body returns {describe(b_spec)} but the carries are {describe(spec)}; a "
            "loop body must return its carries' structure",
            op="while_loop",
        )
    lifted = unify_lifted([(c_graph, c_lifted), (b_graph, b_lifted)], len(leaves))
    attrs = {} if checkpoint_every is None else {"checkpoint_every": checkpoint_every}
    outs = apply(_WHILE, *leaves, *lifted, cond=c_graph, body=b_graph, **attrs)
    return unflatten(spec, outs)


@export
def fori_loop(lower, upper, body_fn, init_vals, *, checkpoint_every: int | None = None):
    """``for i in range(lower, upper): vals = body_fn(i, vals)``; returns the final ``vals``.

    ``i`` is a 0-d int64 tensor; ``lower`` and ``upper`` are Python ints or 0-d integer tensors
    (a bound read from a tensor stays data-dependent in a graph). Built on `while_loop`, with
    the same rules for ``init_vals`` and ``body_fn``'s result, the same gradients (the counter
    gets none) and the same ``checkpoint_every``.
    """
    from ..dtypes import int64
    from ..ops.creation import tensor

    start = lower.to(int64) if hasattr(lower, "dtype") else tensor(int(lower), dtype=int64)

    def keep_going(state):
        return state[0] < upper

    def step(state):
        i, vals = state
        return (i + 1, body_fn(i, vals))

    return while_loop(keep_going, step, (start, init_vals), checkpoint_every=checkpoint_every)[1]
