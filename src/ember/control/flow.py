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

from ..errors import DTypeError, EmberError, ShapeError
from ..ops._registry import Cost, OpDef, TensorType, apply, current_mode, export, register

# ------------------------------------------------------------------------------ type rules


def _fmt(t) -> str:
    from ..graph.printer import format_type

    return format_type(TensorType(tuple(t.shape), t.dtype))


def _same(a, b) -> bool:
    return tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype


def _mismatch(op: str, message: str, a, b) -> EmberError:
    cls = ShapeError if tuple(a.shape) != tuple(b.shape) else DTypeError
    return cls(message, op=op)


def _check_operands(op: str, operands, graph, role: str) -> None:
    if len(operands) != len(graph.inputs):
        raise EmberError(
            f"the {role} graph takes {len(graph.inputs)} inputs, the node gives {len(operands)}",
            op=op,
        )
    for i, (x, v) in enumerate(zip(operands, graph.inputs)):
        if not _same(x, v.type):
            raise _mismatch(
                op,
                f"operand {i} is {_fmt(x)} but the {role} graph's input %{v.name} is "
                f"{_fmt(v.type)}",
                x,
                v.type,
            )


def _cond_infer(pred, *operands, true_branch, false_branch):
    if tuple(pred.shape) != ():
        raise ShapeError(
            f"the predicate must be a 0-d tensor, got shape {tuple(pred.shape)}; reduce it "
            "(e.g. .any(), .all(), .sum() > 0) first",
            op="cond",
        )
    _check_operands("cond", operands, true_branch, "true_branch")
    _check_operands("cond", operands, false_branch, "false_branch")
    t_out, f_out = true_branch.outputs, false_branch.outputs
    if len(t_out) != len(f_out):
        raise EmberError(
            f"the branches return different numbers of tensors: true_branch {len(t_out)}, "
            f"false_branch {len(f_out)}",
            op="cond",
        )
    for i, (a, b) in enumerate(zip(t_out, f_out)):
        if not _same(a.type, b.type):
            raise _mismatch(
                "cond",
                f"output {i} differs between the branches: true_branch gives {_fmt(a.type)}, "
                f"false_branch gives {_fmt(b.type)}; both branches must return the same shapes "
                "and dtypes",
                a.type,
                b.type,
            )
    return tuple(v.type for v in t_out)


def _while_infer(*operands, cond, body, checkpoint_every=None):
    _check_checkpoint(checkpoint_every)
    _check_operands("while_loop", operands, cond, "cond")
    _check_operands("while_loop", operands, body, "body")
    if len(cond.outputs) != 1 or tuple(cond.outputs[0].type.shape) != ():
        got = ", ".join(_fmt(v.type) for v in cond.outputs)
        raise ShapeError(f"cond must return one 0-d tensor, got ({got})", op="while_loop")
    carries = body.inputs[: len(body.outputs)]
    if len(body.outputs) > len(body.inputs):
        raise EmberError(
            f"the body returns {len(body.outputs)} carries but takes {len(body.inputs)} inputs",
            op="while_loop",
        )
    for i, (v, out) in enumerate(zip(carries, body.outputs)):
        if not _same(v.type, out.type):
            raise _mismatch(
                "while_loop",
                f"the body changes carry {i} (%{v.name}) from {_fmt(v.type)} to "
                f"{_fmt(out.type)}; a loop body must keep its carries' shapes and dtypes",
                v.type,
                out.type,
            )
    return tuple(v.type for v in carries)


# ------------------------------------------------------------------------------ kernels


def _cond_kernel(pred, *arrays, true_branch, false_branch):
    from ..graph.subgraph import fresh_results, run_subgraph

    branch = true_branch if bool(pred) else false_branch
    return fresh_results(run_subgraph(branch, arrays), arrays)


def _while_kernel(*arrays, cond, body, checkpoint_every=None):
    from ..graph.subgraph import fresh_results, run_subgraph

    n = len(body.outputs)
    carries, extra = list(arrays[:n]), list(arrays[n:])
    while bool(run_subgraph(cond, carries + extra)[0]):
        carries = run_subgraph(body, carries + extra)
    return fresh_results(carries, arrays)


def _cond_vjp(ctx, *cotangents):
    from ..graph.subgraph import graph_vjp

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


def _no_cost(in_types, out_types, attrs) -> Cost:
    return Cost(0, 0)  # the subgraphs' own nodes carry the cost; a trip count is unknown


_COND = register(
    OpDef(
        name="cond",
        kind="control",
        infer=_cond_infer,
        kernel=_cond_kernel,
        vjp=_cond_vjp,
        cost=_no_cost,
        num_outputs=-1,  # as many as the branches return: always a tuple
        doc="cond(pred, *operands; true_branch, false_branch): run one branch graph.",
    )
)


def _while_vjp(ctx, *cotangents):
    from .flow_grad import while_vjp

    return while_vjp(ctx, *cotangents)


_WHILE = register(
    OpDef(
        name="while_loop",
        kind="control",
        infer=_while_infer,
        kernel=_while_kernel,
        vjp=_while_vjp,
        cost=_no_cost,
        num_outputs=-1,
        doc="while_loop(*carries, *lifted; cond, body[, checkpoint_every]): iterate body while "
        "cond holds.",
    )
)


# ------------------------------------------------------------------------------ public API


def _tracing() -> bool:
    from ..graph.builder import GraphBuilder

    return isinstance(current_mode(), GraphBuilder)


@export
def cond(pred, true_fn, false_fn, *operands):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``.

    ``pred`` is a 0-d tensor (or a Python bool); ``operands`` are tensors or tuples, lists and
    dicts of them; both branches must return the same structure of tensors with the same shapes
    and dtypes. Eagerly this is an ``if``; while a graph is built both branches are traced into
    one ``cond`` node, so the choice is made at run time. Branches may use tensors they close
    over. Gradients flow through the branch taken.
    """
    if isinstance(pred, bool) or not _tracing():
        return true_fn(*operands) if bool(pred) else false_fn(*operands)
    return staged_cond(pred, true_fn, false_fn, *operands)


def staged_cond(pred, true_fn, false_fn, *operands):
    """`cond` recorded as a node even when eager (see the module docstring)."""
    from ..graph.subgraph import trace_subgraph, type_of, unify_lifted
    from ..graph.tree import flatten, unflatten

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
            f"{_describe(t_spec)}, false_branch {_describe(f_spec)}); both must return the same "
            "nest of tensors",
            op="cond",
        )
    if not t_graph.outputs:
        raise EmberError("the branches return no tensors", op="cond")
    lifted = unify_lifted([(t_graph, t_lifted), (f_graph, f_lifted)], len(leaves))
    outs = apply(_COND, pred, *leaves, *lifted, true_branch=t_graph, false_branch=f_graph)
    return unflatten(t_spec, outs)


def _describe(spec) -> str:
    if spec[0] == "leaf":
        return "tensor"
    kind, inner = spec
    if kind is dict:
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in inner) + "}"
    parts = [_describe(s) for s in inner]
    return ("[%s]" if kind is list else "(%s)") % ", ".join(parts)


def _check_carries(new, spec, types, paths, op: str = "while_loop") -> None:
    """The body kept the carries' structure and types (eager loops check every step)."""
    from ..graph.tree import flatten

    leaves, _, new_spec = flatten(new, "a loop body's result", numbers=True)
    if new_spec != spec:
        raise EmberError(
            f"the body returns {_describe(new_spec)} but the carries are {_describe(spec)}; a "
            "loop body must return its carries' structure",
            op=op,
        )
    for i, (t, want) in enumerate(zip(leaves, types)):
        if not _same(t, want):
            raise _mismatch(
                "while_loop",
                f"the body changes carry {i} (carry{paths[i]}) from {_fmt(want)} to {_fmt(t)}; a "
                "loop body must keep its carries' shapes and dtypes",
                want,
                t,
            )


def _check_checkpoint(checkpoint_every, op: str = "while_loop") -> None:
    k = checkpoint_every
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise EmberError(
            f"checkpoint_every must be a positive int (keep every k-th carry for the backward "
            f"pass) or None (keep them all), got {k!r}",
            op=op,
        )


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
    _check_checkpoint(checkpoint_every)
    if not _tracing() and checkpoint_every is None:
        from ..graph.subgraph import type_of
        from ..graph.tree import flatten

        leaves, paths, spec = flatten(init_vals, "loop carries", numbers=True)
        types = [type_of(t) for t in leaves]
        vals = init_vals
        while bool(cond_fn(vals)):
            vals = body_fn(vals)
            _check_carries(vals, spec, types, paths)
        return vals
    return staged_while_loop(cond_fn, body_fn, init_vals, checkpoint_every=checkpoint_every)


def staged_while_loop(cond_fn, body_fn, init_vals, *, checkpoint_every: int | None = None):
    """`while_loop` recorded as a node even when eager (see the module docstring)."""
    from ..graph.subgraph import trace_subgraph, type_of, unify_lifted
    from ..graph.tree import flatten, unflatten

    _check_checkpoint(checkpoint_every)
    leaves, paths, spec = flatten(init_vals, "loop carries", numbers=True)
    if not leaves:
        raise EmberError("a loop needs at least one tensor carry", op="while_loop")
    types = [type_of(t) for t in leaves]
    names = [f"carry{i}" for i in range(len(leaves))]
    c_graph, _, c_spec, c_lifted = trace_subgraph(
        lambda *xs: cond_fn(unflatten(spec, xs)), types, names, "cond", "cond_fn's result"
    )
    if c_spec != ("leaf",):
        raise EmberError(
            f"cond_fn must return one 0-d tensor, got {_describe(c_spec)}", op="while_loop"
        )
    b_graph, _, b_spec, b_lifted = trace_subgraph(
        lambda *xs: body_fn(unflatten(spec, xs)), types, names, "body", "a loop body's result"
    )
    if b_spec != spec:
        raise EmberError(
            f"the body returns {_describe(b_spec)} but the carries are {_describe(spec)}; a "
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
