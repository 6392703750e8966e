"""ONNX's Scan as ``ember.scan``: Scan-9 on (with scan_input_axes / scan_input_directions /
scan_output_axes / scan_output_directions: each scan input's axis moved first and flipped for a
reverse direction, each stacked output flipped and moved to its axis) and Scan-8 (axis 0 a batch
whose entries scan their own ``sequence_lens``, axis 1 the sequence, each output padded to the
longest). Unrolled in Python eagerly or when every value it reads is static; a captured model
records one ``scan`` node (Scan-8: one per batch entry), its body closing over the enclosing
graph's values.
"""

from __future__ import annotations

import numpy as np

from ...control.scan import staged_scan
from ...errors import EmberError
from ...nn.rnn import whole_layer_applies
from ...ops._registry import apply
from ...ops.recurrent import GRU_LAYER, LSTM_LAYER
from ...ops.recurrent_elman import RNN_LAYER
from .._convert import EMPTY, converter, is_static
from ._common import E, axis, rank_of
from ._flow import all_static, captured, capturing, empty_stack, stack
from .scan_layers import elman_body, gru_body, lstm_body

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
    unrolled = not capturing() or all_static(ctx, args, ["body"])
    layer = _as_layer(ctx, body, states, sequences, in_axes, in_dirs, out_axes, out_dirs)
    if layer is not None:
        return layer
    final, ys = _run_scan(ctx, body, states, sequences, unrolled)
    outs = []
    for y, a, d in zip(ys, out_axes, out_dirs):
        y = _flip0(y) if d else y
        outs.append(_moveaxis(y, 0, axis(a, rank_of(y), ctx)))
    return (*final, *outs)


def _as_layer(ctx, body, states, sequences, in_axes, in_dirs, out_axes, out_dirs):
    """The Scan's outputs from ember's ``lstm_layer``, ``gru_layer`` or ``rnn_layer`` where its
    body is one step as ember writes it (onnx/ops/scan_layers.py) and the op takes its
    operands, else None."""
    # (LSTM: states h, c and outputs h, c, y, cs, acts; GRU: state h and outputs h, y, acts;
    # Elman: state h and outputs h, y)
    kind = {(2, 5): "LSTM", (1, 3): "GRU", (1, 2): "RNN"}.get((len(states), ctx.num_outputs))
    if len(sequences) != 1 or kind is None or len(out_dirs) != ctx.num_outputs - len(states):
        return None
    if any(a != 0 for a in (*in_axes, *out_axes)) or len({*in_dirs, *out_dirs}) != 1:
        return None
    relu = False
    if kind == "LSTM":
        found = lstm_body(body, ctx.env)
        names = None if found is None else (found,)
    elif kind == "GRU":
        names = gru_body(body, ctx.env)
    else:
        found = elman_body(body)
        names, relu = (None, False) if found is None else ((found[0],), found[1])
    if names is None or any(n not in ctx.env for n in names):
        return None
    xg, *initial = (ctx.tensor(v) for v in (sequences[0], *states))
    w_t, *bias = (ctx.tensor(ctx.env[n]) for n in names)
    reverse = bool(in_dirs[0])
    if reverse:  # (flipped for the Scan's loop: the layer takes it in time order)
        xg = _flip0(xg)
    if (w_t.ndim, xg.ndim, *(h.ndim for h in initial)) != (2, 3, *([2] * len(initial))):
        return None
    if len({xg.dtype, w_t.dtype, *(t.dtype for t in (*initial, *bias))}) != 1:
        return None
    mode = {"RNN": "RNN_RELU" if relu else "RNN_TANH"}.get(kind, kind)
    if not whole_layer_applies(mode, xg, [w_t]) or xg.shape[0] == 0:
        return None
    try:
        if kind == "LSTM":
            y, h_n, c_n, cs, acts = apply(LSTM_LAYER, xg, *initial, E.t(w_t), reverse=reverse)
            # (each step's outputs at its own time, as the Scan's reverse-stored outputs are)
            return h_n, c_n, y, cs, acts
        if kind == "GRU":
            y, h_n, acts = apply(GRU_LAYER, xg, *initial, E.t(w_t), *bias, reverse=reverse)
            return h_n, y, acts
        y, h_n = apply(RNN_LAYER, xg, *initial, E.t(w_t), reverse=reverse, relu=relu)
        return h_n, y
    except EmberError:  # (shapes the op refuses: the Scan runs as written)
        return None


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
            stack(ctx, out) if out else empty_stack(ctx, body.output_infos[n + j])
            for j, out in enumerate(ys)
        ]
        return states, stacked

    def step(carry, x):
        results = ctx.run(body, [*carry, *x])
        new = [captured(ctx, v, f"state {j}") for j, v in enumerate(results[:n])]
        _check_states(ctx, carry, new)
        return tuple(new), tuple(captured(ctx, y, "a scan output") for y in results[n:])

    init = tuple(captured(ctx, s, f"state {j}") for j, s in enumerate(states))
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
        empty = [empty_stack(ctx, info) for info in body.output_infos[len(states) :]]
        return (*states, *(y.reshape(0, max_len, *y.shape[1:]) for y in empty))
    unrolled = not capturing() or all_static(ctx, [sequence_lens, *args], ["body"])
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
    return (*(stack(ctx, v) for v in finals), *(stack(ctx, y) for y in outs))


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
