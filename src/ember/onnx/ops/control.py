"""ONNX's control flow: If, Loop and Scan, as ember's control-flow ops.

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
from ...graph.builder import GraphBuilder
from ...ops import _registry as _reg
from .._convert import EMPTY, NeedsData, converter, ember_dtype, is_static, is_symbolic
from ._common import E, axis, np_dtype, rank_of

_INT64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)


def _capturing() -> bool:
    return isinstance(_reg.current_mode(), GraphBuilder)


# ---------------------------------------------------------------------------------------------
# what a body reads


def _free_names(graph) -> set[str]:
    """The names a GraphProto (and the graphs nested in it) reads from enclosing scopes."""
    defined = {vi.name for vi in graph.input}
    defined |= {t.name for t in graph.initializer}
    defined |= {s.values.name for s in graph.sparse_initializer}
    used = set()
    for node in graph.node:
        used.update(name for name in node.input if name)
        for attr in node.attribute:
            nested = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
            for g in nested:
                used |= _free_names(g)
        defined.update(name for name in node.output if name)
    used.update(vi.name for vi in graph.output)
    return used - defined


def _static_value(value) -> bool:
    if value is None or value is EMPTY or is_static(value):
        return True
    if isinstance(value, list):
        return all(_static_value(v) for v in value)
    return False


def _all_static(ctx, inputs, graph_attrs) -> bool:
    """Every input of the node, and every outer value its graphs read, is static."""
    if not all(_static_value(v) for v in inputs):
        return False
    for name in graph_attrs:
        for free in _free_names(ctx.attr(name)):
            if not _static_value(ctx.env.get(free)):
                return False
    return True


# ---------------------------------------------------------------------------------------------
# values crossing a captured node


def _captured(ctx, value, what: str):
    """A value a captured branch or body gives back, as an ember tensor."""
    if isinstance(value, list) or value is EMPTY or value is None:
        kind = "a sequence" if isinstance(value, list) else "an empty optional"
        raise NeedsData(f"{ctx.label}: {what} is {kind}, which a captured graph cannot carry")
    return ctx.tensor(value)


def _predicate(ctx, value, what: str):
    """A 0-d bool tensor from a one-element condition."""
    t = ctx.tensor(value)
    if int(np.prod(t.shape)) != 1:
        raise ctx.error(f"{what} must hold one element, got shape {tuple(t.shape)}")
    if tuple(t.shape) != ():
        t = E.reshape(t, ())
    if t.dtype != ember_dtype(_BOOL, ctx.label):
        t = E.cast(t, ember_dtype(_BOOL, ctx.label))
    return t


def _flag(ctx, value, what: str) -> bool:
    array = np.asarray(ctx.static(value, what))
    if array.size != 1:
        raise ctx.error(f"{what} must hold one element, got shape {array.shape}")
    return bool(array.reshape(()))


def _same_type(a, b) -> bool:
    return tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype


def _stack(ctx, values):
    if all(is_static(v) for v in values):
        return np.stack(values)
    return E.stack([ctx.tensor(v) for v in values])


def _empty_stack(ctx, info) -> np.ndarray:
    """The scan output of zero iterations: no body ran, so its element type is the body's
    declared output type (unknown dimensions taken as 0, float32 when no type is declared)."""
    dtype, dims = np.dtype(np.float32), []
    if info.type.WhichOneof("value") == "tensor_type":
        tt = info.type.tensor_type
        if tt.elem_type:
            dtype = np_dtype(tt.elem_type, ctx.label)
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tt.shape.dim]
    return np.zeros((0, *dims), dtype)


# ---------------------------------------------------------------------------------------------
# If


@converter("If", 1, fold=False)
def _if(ctx, cond):
    then_branch, else_branch = ctx.subgraph("then_branch"), ctx.subgraph("else_branch")
    if not is_symbolic(cond):
        branch = then_branch if _flag(ctx, cond, "the condition") else else_branch
        return tuple(ctx.run(branch, []))
    pred = _predicate(ctx, cond, "the condition")

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
        return [_captured(ctx, v, what) for v in value]
    return _captured(ctx, value, what)


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
    if not _capturing() or _all_static(ctx, [max_trips, cond, *initial], ["body"]):
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
    keep_going = True if cond is None else _flag(ctx, cond, "the condition")
    cond_in = np.asarray(True) if cond is None else cond
    scans: list[list] = [[] for _ in range(k)]
    i = 0
    while keep_going and (limit is None or i < limit):
        if unroll_limit is not None and i >= unroll_limit:
            raise NeedsData(
                f"{ctx.label}: a loop carrying a sequence runs more than {unroll_limit} "
                "iterations, too many to unroll into a graph"
            )
        results = ctx.run(body, [np.asarray(i, _INT64), cond_in, *values])
        cond_in, values = results[0], list(results[1 : 1 + n])
        for out, v in zip(scans, results[1 + n :]):
            out.append(v)
        if cond is not None:
            keep_going = _flag(ctx, cond_in, "the body's condition")
        i += 1
    stacked = []
    for j, out in enumerate(scans):
        stacked.append(_stack(ctx, out) if out else _empty_stack(ctx, body.output_infos[1 + n + j]))
    return tuple(values + stacked)


def _loop_captured(ctx, body, max_trips, cond, values):
    n = len(values)
    k = len(body.output_names) - 1 - n
    carries = tuple(_captured(ctx, v, f"carried value {i}") for i, v in enumerate(values))
    limit = None
    if max_trips is not None:
        limit = (
            int(ctx.ints(max_trips, "M")[0])
            if not is_symbolic(max_trips)
            else E.reshape(ctx.tensor(max_trips, ember_dtype(_INT64, ctx.label)), ())
        )
    if cond is not None and not is_symbolic(cond) and not _flag(ctx, cond, "the condition"):
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
        t = _captured(ctx, v, f"carried value {j}")
        if not _same_type(old, t):
            raise NeedsData(
                f"{ctx.label}: carried value {j} changes from {tuple(old.shape)} "
                f"{old.dtype} to {tuple(t.shape)} {t.dtype} in an iteration; only an eager "
                "run can follow it"
            )
        new.append(t)
    return results[0], new, results[1 + n :]


def _loop_as_while(ctx, body, limit, cond, carries):
    i64 = ember_dtype(_INT64, ctx.label)
    start = E.zeros((), dtype=i64)
    keep = _predicate(ctx, np.asarray(True) if cond is None else cond, "the condition")

    def keep_going(state):
        i, c, *_ = state
        if limit is None:
            return c
        in_range = i < limit
        return in_range if cond is None else E.logical_and(in_range, c)

    def step(state):
        i, c, *vals = state
        cond_out, new, _ = _body_step(ctx, body, i, c, vals)
        c = c if cond is None else _predicate(ctx, cond_out, "the body's condition")
        return (i + 1, c, *new)

    final = E.while_loop(keep_going, step, (start, keep, *carries))
    return tuple(final[2:])


def _loop_as_scan(ctx, body, trips: int, has_cond: bool, carries):
    """A Loop with scan outputs and a static trip count: ``scan`` over the iteration numbers.
    The body's condition must then be known true (it would otherwise end the loop early)."""
    steps = E.arange(trips, dtype=ember_dtype(_INT64, ctx.label))

    def step(vals, xs):
        (i,) = xs
        cond_out, new, ys = _body_step(ctx, body, i, np.asarray(True), list(vals))
        if has_cond and not (is_static(cond_out) and _flag(ctx, cond_out, "the condition")):
            raise NeedsData(
                f"{ctx.label}: the body's condition depends on the data, so the number of "
                "scan outputs is known only by running it"
            )
        return tuple(new), tuple(_captured(ctx, y, "a scan output") for y in ys)

    final, ys = staged_scan(step, tuple(carries), (steps,))
    return (*final, *ys)


# ---------------------------------------------------------------------------------------------
# Scan


@converter("Scan", 9, fold=False)
def _scan(ctx, *args):
    body = ctx.subgraph("body")
    m = int(ctx.attr("num_scan_inputs"))
    if not 0 < m <= len(args):
        raise ctx.error(f"num_scan_inputs={m} does not fit the node's {len(args)} inputs")
    states, xs = list(args[: len(args) - m]), list(args[len(args) - m :])
    _check_scan_body(ctx, body, len(states), m)
    k = len(body.output_names) - len(states)
    in_axes = _per_input(ctx, "scan_input_axes", m)
    in_dirs = _per_input(ctx, "scan_input_directions", m)
    out_axes = _per_input(ctx, "scan_output_axes", k)
    out_dirs = _per_input(ctx, "scan_output_directions", k)
    sequences = []
    for x, a, d in zip(xs, in_axes, in_dirs):
        x = ctx.tensor(x) if not is_static(x) else x
        a = axis(a, rank_of(x), ctx)
        x = _moveaxis(x, a, 0)
        sequences.append(_flip0(x) if d else x)
    unrolled = not _capturing() or _all_static(ctx, args, ["body"])
    final, ys = _run_scan(ctx, body, states, sequences, unrolled)
    outs = []
    for y, a, d in zip(ys, out_axes, out_dirs):
        y = _flip0(y) if d else y
        outs.append(_moveaxis(y, 0, axis(a, rank_of(y), ctx)))
    return (*final, *outs)


def _check_scan_body(ctx, body, n_states: int, n_inputs: int):
    if len(body.input_names) != n_states + n_inputs or len(body.output_names) < n_states:
        raise ctx.error(
            f"the body takes {len(body.input_names)} inputs and gives "
            f"{len(body.output_names)} outputs; a Scan with {n_states} states and {n_inputs} "
            f"scan inputs needs {n_states + n_inputs} inputs and at least {n_states} outputs"
        )
    if ctx.num_outputs > len(body.output_names):
        raise ctx.error(
            f"the node names {ctx.num_outputs} outputs, the body gives {len(body.output_names)}"
        )


def _per_input(ctx, name: str, count: int) -> list[int]:
    values = list(ctx.attr(name, [0] * count))
    if len(values) != count:
        raise ctx.error(f"{name} has {len(values)} entries, the node has {count}")
    return values


def _moveaxis(x, source: int, dest: int):
    if source == dest:
        return x
    return np.moveaxis(x, source, dest) if is_static(x) else E.movedim(x, source, dest)


def _flip0(x):
    return np.flip(x, 0) if is_static(x) else E.flip(x, (0,))


def _run_scan(ctx, body, states, sequences, unrolled: bool):
    """Scan ``body`` over the first axis of ``sequences``; returns (final states, stacked
    scan outputs with the iterations on axis 0)."""
    length = int(sequences[0].shape[0])
    for x in sequences:
        if int(x.shape[0]) != length:
            raise ctx.error(
                f"the scan inputs have different lengths ({length} and {int(x.shape[0])})"
            )
    n = len(states)
    if unrolled:
        ys: list[list] = [[] for _ in range(len(body.output_names) - n)]
        for t in range(length):
            slices = [x[t] if is_static(x) else E.select(x, 0, t) for x in sequences]
            results = ctx.run(body, [*states, *slices])
            _check_states(ctx, states, results[:n])
            states = list(results[:n])
            for out, y in zip(ys, results[n:]):
                out.append(y)
        stacked = [
            _stack(ctx, out) if out else _empty_stack(ctx, body.output_infos[n + j])
            for j, out in enumerate(ys)
        ]
        return states, stacked

    def step(carry, x):
        results = ctx.run(body, [*carry, *x])
        new = [_captured(ctx, v, f"state {j}") for j, v in enumerate(results[:n])]
        _check_states(ctx, carry, new)
        return tuple(new), tuple(_captured(ctx, y, "a scan output") for y in results[n:])

    init = tuple(_captured(ctx, s, f"state {j}") for j, s in enumerate(states))
    final, ys = staged_scan(step, init, tuple(ctx.tensor(x) for x in sequences))
    return list(final), list(ys)


def _check_states(ctx, old, new):
    for j, (a, b) in enumerate(zip(old, new)):
        if isinstance(a, list) or isinstance(b, list) or a is EMPTY or b is EMPTY:
            raise ctx.error(f"state {j} must be a tensor")
        if tuple(a.shape) != tuple(b.shape):
            raise ctx.error(
                f"the body changes state {j} from shape {tuple(a.shape)} to {tuple(b.shape)}; "
                "Scan's states keep their shapes"
            )


@converter("Scan", 8, fold=False)
def _scan8(ctx, sequence_lens, *args):
    """Scan-8: axis 0 of every state and scan input is a batch, axis 1 the sequence; each batch
    entry scans its own ``sequence_lens[b]`` steps (scan outputs padded to the longest with
    zeros, whose values ONNX leaves undefined)."""
    body = ctx.subgraph("body")
    m = int(ctx.attr("num_scan_inputs"))
    if not 0 < m <= len(args):
        raise ctx.error(f"num_scan_inputs={m} does not fit the node's {len(args)} inputs")
    states, xs = list(args[: len(args) - m]), list(args[len(args) - m :])
    _check_scan_body(ctx, body, len(states), m)
    dirs = _per_input(ctx, "directions", m)
    batch, max_len = int(xs[0].shape[0]), int(xs[0].shape[1])
    lengths = [max_len] * batch
    if sequence_lens is not None:
        lengths = ctx.ints(sequence_lens, "sequence_lens")
        if len(lengths) != batch or any(not 0 <= n <= max_len for n in lengths):
            raise ctx.error(f"sequence_lens {lengths} must give {batch} lengths in [0, {max_len}]")
    if batch == 0:  # no entry runs the body: the scan outputs take its declared types
        empty = [_empty_stack(ctx, info) for info in body.output_infos[len(states) :]]
        return (*states, *(y.reshape(0, max_len, *y.shape[1:]) for y in empty))
    unrolled = not _capturing() or _all_static(ctx, [sequence_lens, *args], ["body"])
    finals: list[list] = [[] for _ in states]
    outs: list[list] = []
    for b in range(batch):
        entry_states = [_index0(ctx, s, b) for s in states]
        sequences = []
        for x, d in zip(xs, dirs):
            x = _narrow0(ctx, _index0(ctx, x, b), lengths[b])
            sequences.append(_flip0(x) if d else x)
        final, ys = _run_scan(ctx, body, entry_states, sequences, unrolled)
        for acc, v in zip(finals, final):
            acc.append(v)
        if not outs:
            outs = [[] for _ in ys]
        for acc, y in zip(outs, ys):
            acc.append(_pad0(ctx, y, max_len))
    return (*(_stack(ctx, v) for v in finals), *(_stack(ctx, y) for y in outs))


def _index0(ctx, x, b: int):
    return x[b] if is_static(x) else E.select(ctx.tensor(x), 0, b)


def _narrow0(ctx, x, n: int):
    return x[:n] if is_static(x) else E.narrow(x, 0, 0, n)


def _pad0(ctx, y, length: int):
    missing = length - int(y.shape[0])
    if not missing:
        return y
    if is_static(y):
        return np.concatenate([y, np.zeros((missing, *y.shape[1:]), y.dtype)])
    return E.cat([y, E.zeros((missing, *y.shape[1:]), dtype=y.dtype)])
