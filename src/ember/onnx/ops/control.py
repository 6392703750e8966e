"""ONNX's If and Loop as ember's control-flow ops (Scan: scan.py; what they share: _flow.py).

Each body or branch is a `GraphRunner` (``ctx.subgraph``) run with ``ctx.run``, which sees the
values of the enclosing graph: a branch or body reads them by closure, and when it is traced
into an ember subgraph they are lifted into operands of the control-flow node
(graph/subgraph.py).

Two ways to run, chosen by what is known while the importer walks the graph:

* **Unrolled in Python** when no graph is being built (an eager model, an `OnnxModule`) or when
  every input the node and its bodies read is static. The bodies' nodes then fold or run
  eagerly one by one, the tape records them (gradients need nothing special), and a Loop's
  carried values may change shape from one iteration to the next, as ONNX allows.
* **Captured** while a graph is built: If with a data-dependent condition becomes
  ``ember.cond``; Loop becomes ``ember.while_loop`` (carrying the iteration number and the
  condition), or ``ember.scan`` over ``arange(M)`` when it has scan outputs, which needs a trip
  count known while importing; Scan becomes ``ember.scan``. What a graph cannot hold (branches
  giving different shapes, carried values that change shape, scan outputs of a loop whose trip
  count depends on the data, sequences or optionals crossing the node) raises `NeedsData`, and
  the model runs eagerly.

Static conditions and trip counts never reach a control-flow op: an If on a static condition
is the branch it takes. These converters are not folded as nodes (``fold=False``): a body may
read dynamic values of the enclosing graph even when the node's own inputs are all static.
"""

from __future__ import annotations

import numpy as np

from ...control.scan import staged_scan
from ...errors import EmberError, OnnxError
from ...ops.checks import check
from .._convert import EMPTY, NeedsData, converter, ember_dtype, is_static, is_symbolic
from ._common import E
from ._flow import (
    INT64,
    all_static,
    captured,
    capturing,
    empty_stack,
    flag,
    predicate,
    same_type,
    stack,
)

# ---------------------------------------------------------------------------------------------
# If


@converter("If", 1, fold=False)
def _if(ctx, cond):
    then_branch, else_branch = ctx.subgraph("then_branch"), ctx.subgraph("else_branch")
    if not is_symbolic(cond):
        branch = then_branch if flag(ctx, cond, "the condition") else else_branch
        return tuple(ctx.run(branch, []))
    pred = predicate(ctx, cond, "the condition")

    def traced(branch, name):
        def run():
            # a sequence output is a list of tensors: cond carries nests, so both branches'
            # sequences must have the same length and element types
            outs = ctx.run(branch, [])
            return tuple(_branch_output(ctx, v, f"an output of {name}") for v in outs)

        return run

    try:
        outs = E.cond(pred, traced(then_branch, "then_branch"), traced(else_branch, "else_branch"))
    except EmberError as err:
        # cond's own checks (the branches disagree): the errors of the branches' nodes reach
        # here as OnnxErrors naming the node
        if isinstance(err, OnnxError) or err.op != "cond":
            raise
        raise NeedsData(
            f"{ctx.label}: the branches give different shapes, dtypes or sequence lengths "
            f"({err.detail}), which only an eager run can follow"
        ) from None
    return tuple(outs)


def _branch_output(ctx, value, what: str):
    if isinstance(value, list):
        return [captured(ctx, v, what) for v in value]
    return captured(ctx, value, what)


# ---------------------------------------------------------------------------------------------
# Loop


@converter("Loop", 1, fold=False)
def _loop(ctx, max_trips, cond, *initial):
    body = ctx.subgraph("body")
    n = len(initial)
    if len(body.input_names) != n + 2 or len(body.output_names) < n + 1:
        raise ctx.error(
            f"the body takes {len(body.input_names)} inputs and gives "
            f"{len(body.output_names)} outputs; a Loop with {n} carried values needs "
            f"{n + 2} inputs (iteration, condition, carried values) and at least {n + 1} outputs"
        )
    if max_trips is None and cond is None:
        raise ctx.error("the loop has neither a trip count nor a condition: it never ends")
    if not capturing() or all_static(ctx, [max_trips, cond, *initial], ["body"]):
        return _loop_unrolled(ctx, body, max_trips, cond, list(initial))
    if any(isinstance(v, list) or v is EMPTY for v in initial):
        # a sequence (or optional) carried through the loop has no place in a while_loop
        # node; while the trip count is known (every condition static) the loop unrolls into
        # the graph, the sequence's elements becoming ordinary graph values
        return _loop_unrolled(ctx, body, max_trips, cond, list(initial), _UNROLL_LIMIT)
    return _loop_captured(ctx, body, max_trips, cond, list(initial))


# the most iterations a captured loop unrolls into a graph (beyond: the model runs eagerly)
_UNROLL_LIMIT = 1024
# the largest static trip count a Loop with a condition and scan outputs is captured with
_SCAN_TRIPS_LIMIT = 1 << 24


def _loop_unrolled(ctx, body, max_trips, cond, values, unroll_limit=None):
    n = len(values)
    k = len(body.output_names) - 1 - n
    limit = None if max_trips is None else int(ctx.ints(max_trips, "the trip count M")[0])
    keep_going = True if cond is None else flag(ctx, cond, "the condition")
    cond_in = np.asarray(True) if cond is None else cond
    scans: list[list] = [[] for _ in range(k)]
    bound = _iteration_bound(ctx, cond)
    i = 0
    while keep_going and (limit is None or i < limit):
        if bound is not None and i >= bound:
            raise ctx.error(_endless_message(bound))
        if unroll_limit is not None and i >= unroll_limit:
            raise NeedsData(
                f"{ctx.label}: a loop carrying a sequence runs more than {unroll_limit} "
                "iterations, too many to unroll into a graph"
            )
        results = ctx.run(body, [np.asarray(i, INT64), cond_in, *values])
        cond_in, values = results[0], list(results[1 : 1 + n])
        for out, v in zip(scans, results[1 + n :]):
            out.append(v)
        if cond is not None:
            keep_going = flag(ctx, cond_in, "the body's condition")
        i += 1
    stacked = []
    for j, out in enumerate(scans):
        stacked.append(stack(ctx, out) if out else empty_stack(ctx, body.output_infos[1 + n + j]))
    return tuple(values + stacked)


def _iteration_bound(ctx, cond) -> int | None:
    """The iterations after which a Loop whose condition is still true is called endless
    (``load(max_loop_iterations=)``); None for a Loop that only counts to its trip count."""
    return None if cond is None else ctx.runner.model.max_loop_iterations


def _endless_message(bound: int) -> str:
    return (
        f"the loop's condition is still true after {bound} iterations and its trip "
        "count does not end it sooner; if the model means to loop longer, load it with "
        "ember.onnx.load(..., max_loop_iterations=<more>) or max_loop_iterations=None"
    )


def _loop_captured(ctx, body, max_trips, cond, values):
    n = len(values)
    k = len(body.output_names) - 1 - n
    carries = tuple(captured(ctx, v, f"carried value {i}") for i, v in enumerate(values))
    limit = None
    if max_trips is not None:
        limit = (
            int(ctx.ints(max_trips, "M")[0])
            if not is_symbolic(max_trips)
            else E.reshape(ctx.tensor(max_trips, ember_dtype(INT64, ctx.label)), ())
        )
    if cond is not None and not is_symbolic(cond) and not flag(ctx, cond, "the condition"):
        limit = 0  # the condition is false before the first iteration
    if k:
        # scan outputs stack one value per iteration: their length must be known, so the trip
        # count is a static M and the condition, if any, static and true throughout (checked
        # on the body's result while it is traced). A huge M next to a condition is the
        # exporters' way of writing a while loop: the condition decides, at run time.
        data_dependent = limit is None or not isinstance(limit, int) or is_symbolic(cond)
        if data_dependent or (cond is not None and limit > _SCAN_TRIPS_LIMIT):
            raise NeedsData(
                f"{ctx.label}: a Loop with scan outputs and a trip count that depends on the "
                "data has outputs whose length only an eager run knows"
            )
        return _loop_as_scan(ctx, body, limit, cond is not None, carries)
    return _loop_as_while(ctx, body, limit, cond, carries)


def _body_step(ctx, body, i, cond_in, carries):
    """Run the body once while it is traced; the new carries must keep their types."""
    results = ctx.run(body, [i, cond_in, *carries])
    n = len(carries)
    new = []
    for j, (old, v) in enumerate(zip(carries, results[1 : 1 + n])):
        t = captured(ctx, v, f"carried value {j}")
        if not same_type(old, t):
            raise NeedsData(
                f"{ctx.label}: carried value {j} changes from {tuple(old.shape)} "
                f"{old.dtype} to {tuple(t.shape)} {t.dtype} in an iteration; only an eager "
                "run can follow it"
            )
        new.append(t)
    return results[0], new, results[1 + n :]


def _loop_as_while(ctx, body, limit, cond, carries):
    i64 = ember_dtype(INT64, ctx.label)
    start = E.zeros((), dtype=i64)
    keep = predicate(ctx, np.asarray(True) if cond is None else cond, "the condition")
    bound = _iteration_bound(ctx, cond)
    if bound is not None and isinstance(limit, int) and limit <= bound:
        bound = None  # (the trip count ends it first)

    def keep_going(state):
        i, c, *_ = state
        go = c if cond is not None else None
        for below in (limit, bound):
            if below is not None:
                in_range = i < below
                go = in_range if go is None else E.logical_and(go, in_range)
        return go

    def step(state):
        i, c, *vals = state
        cond_out, new, _ = _body_step(ctx, body, i, c, vals)
        c = c if cond is None else predicate(ctx, cond_out, "the body's condition")
        return (i + 1, c, *new)

    final = E.while_loop(keep_going, step, (start, keep, *carries))
    if bound is None:
        return tuple(final[2:])
    # stopped by the bound alone: the condition still true and the trip count not reached
    i, c = final[0], final[1]
    endless = E.logical_and(c, i >= bound)
    if limit is not None:
        endless = E.logical_and(endless, i < limit)
    ok = E.logical_not(endless)
    return tuple(check(v, ok, f"{ctx.label}: {_endless_message(bound)}") for v in final[2:])


def _loop_as_scan(ctx, body, trips: int, has_cond: bool, carries):
    """A Loop with scan outputs and a static trip count: ``scan`` over the iteration numbers.
    The body's condition must then be known true (it would otherwise end the loop early)."""
    steps = E.arange(trips, dtype=ember_dtype(INT64, ctx.label))

    def step(vals, xs):
        (i,) = xs
        cond_out, new, ys = _body_step(ctx, body, i, np.asarray(True), list(vals))
        if has_cond and not (is_static(cond_out) and flag(ctx, cond_out, "the condition")):
            raise NeedsData(
                f"{ctx.label}: the body's condition depends on the data, so the number of "
                "scan outputs is known only by running it"
            )
        return tuple(new), tuple(captured(ctx, y, "a scan output") for y in ys)

    final, ys = staged_scan(step, tuple(carries), (steps,))
    return (*final, *ys)
