"""The connectionist temporal classification loss (Graves et al., 2006) as two primitives:
``ctc_loss`` (each sequence's negative log-likelihood, by the alpha recursion) and
``ctc_loss_backward`` (its gradient, by the alpha and beta recursions).

Both kernels work in log space in NumPy, every sequence at once: the extended targets (the
labels with blanks around and between them) padded side by side, each step of the recursions
one pass over the batch (a Python loop per sequence and step ran 7x PyTorch's time), each
sequence's values read only up to its own input length. The gradient is PyTorch's: for
``t < input_length``, ``exp(lp) - exp(log(alpha * beta summed over the label's positions) +
nll - lp)``, times the incoming gradient. Its ``exp(lp)`` term is what the gradient with
respect to *logits* needs when ``log_probs`` come from ``log_softmax`` (it vanishes through
log_softmax's backward), so, as in PyTorch, the gradient with respect to ``log_probs``
themselves is the true one only after that composition. ``zero_infinity`` makes impossible
sequences (infinite loss) contribute 0 and a zero gradient. The backward op has no gradient of
its own (PyTorch's has none either).

Targets come padded, (N, S), or concatenated, 1-D (``concatenated=True``), with the lengths
(N,) saying how much of each row (or which slice) is used.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..types import TensorType
from ._index_plan import IndexOutOfRangeError
from ._registry import Cost, OpDef, apply, register
from ._rules import Autocast
from ._util import fmt_shape, io_bytes

_NEG_INF = -np.inf


def _infer(log_probs, targets, input_lengths, target_lengths, *, blank, concatenated, zero_inf):
    op = "ctc_loss"
    if not log_probs.dtype.is_floating_point:
        raise DTypeError(f"log_probs must be floating point, got {log_probs.dtype}", op=op)
    if log_probs.ndim != 3:
        raise ShapeError(
            f"log_probs must be (T, N, C), got shape {fmt_shape(log_probs.shape)}", op=op
        )
    _, n, c = log_probs.shape
    for what, t in (
        ("targets", targets),
        ("input_lengths", input_lengths),
        ("target_lengths", target_lengths),
    ):
        if not t.dtype.is_integer:
            raise DTypeError(f"{what} must be an integer tensor, got {t.dtype}", op=op)
    for what, t in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        if tuple(t.shape) != (n,):
            raise ShapeError(
                f"{what} must have one entry per sequence ({n}), got shape {fmt_shape(t.shape)}",
                op=op,
            )
    if targets.ndim != (1 if concatenated else 2) or (not concatenated and targets.shape[0] != n):
        raise ShapeError(
            f"targets must be (N, S) padded or 1-D concatenated, got shape "
            f"{fmt_shape(targets.shape)} for a batch of {n}",
            op=op,
        )
    if not 0 <= blank < c:
        raise ShapeError(f"blank {blank} must be a class index below C = {c}", op=op)
    return TensorType((n,), log_probs.dtype)


def _sequences(targets, input_lengths, target_lengths, concatenated, steps, classes):
    """Each sequence's (input length, labels), validated."""
    out = []
    start = 0
    for i, (t_len, s_len) in enumerate(zip(input_lengths.tolist(), target_lengths.tolist())):
        if not 0 <= t_len <= steps:
            raise ShapeError(
                f"input_lengths[{i}] = {t_len} must lie in [0, T = {steps}]", op="ctc_loss"
            )
        if concatenated:
            labels = targets[start : start + s_len]
            start += s_len
        else:
            labels = targets[i, :s_len]
        if s_len < 0 or len(labels) != s_len:
            raise ShapeError(
                f"target_lengths[{i}] = {s_len} exceeds the targets given", op="ctc_loss"
            )
        labels = np.asarray(labels, np.int64)
        if labels.size and (labels.min() < 0 or labels.max() >= classes):
            raise IndexOutOfRangeError(
                f"targets of sequence {i} hold {labels.tolist()}, outside the {classes} classes",
                op="ctc_loss",
            )
        out.append((t_len, labels))
    return out


def _extended(labels, blank):
    ext = np.full(2 * len(labels) + 1, blank, np.int64)
    ext[1::2] = labels
    # where a label may be reached from two positions back (not a blank, not a repeat)
    skip = np.zeros(len(ext), bool)
    skip[3::2] = labels[1:] != labels[:-1]
    return ext, skip


def _nll(alpha, steps, size):
    if steps == 0:
        return np.inf if size > 1 else 0.0
    last = alpha[steps - 1]
    total = last[size - 1] if size == 1 else np.logaddexp(last[size - 1], last[size - 2])
    return -total


def _batch(seqs, blank):
    """The sequences' extended labels side by side, (N, L) for the longest L = 2S + 1, padded
    with blanks; whether each position may be reached from two back; whether it is real (not
    padding); each sequence's extended length and input length."""
    n = len(seqs)
    sizes = np.array([2 * len(labels) + 1 for _, labels in seqs], np.int64)
    width = int(sizes.max()) if n else 1
    ext = np.full((n, width), blank, np.int64)
    skip = np.zeros((n, width), bool)
    for i, (_, labels) in enumerate(seqs):
        e, k = _extended(labels, blank)
        ext[i, : len(e)], skip[i, : len(k)] = e, k
    real = np.arange(width)[None, :] < sizes[:, None]
    lengths = np.array([t_len for t_len, _ in seqs], np.int64)
    return ext, skip, real, sizes, lengths


def _emissions(lp_all, ext, real):
    """log p of each sequence's extended labels at every step, (T, N, L); padding -inf."""
    steps = lp_all.shape[0]
    index = np.broadcast_to(ext[None], (steps, *ext.shape))
    emit = np.take_along_axis(lp_all, index, axis=2)
    emit[:, ~real] = _NEG_INF
    return emit


def _alphas(emit, skip):
    """log alpha of every sequence at once, (T, N, L) (padding stays -inf: its emissions are),
    each sequence's values read only before its input length ends."""
    steps, n, width = emit.shape
    alpha = np.full((max(steps, 1), n, width), _NEG_INF)
    if steps == 0:
        return alpha
    alpha[0, :, :2] = emit[0, :, :2]
    for t in range(1, steps):
        prev = alpha[t - 1]
        acc = prev.copy()
        acc[:, 1:] = np.logaddexp(acc[:, 1:], prev[:, :-1])
        acc[:, 2:] = np.where(skip[:, 2:], np.logaddexp(acc[:, 2:], prev[:, :-2]), acc[:, 2:])
        alpha[t] = acc + emit[t]
    return alpha


def _betas(emit, skip, sizes, lengths):
    """log beta of every sequence at once (PyTorch's convention: including the emission at
    t), (T, N, L): each sequence's recursion starts at its last step, -inf after it."""
    steps, n, width = emit.shape
    beta = np.full((max(steps, 1), n, width), _NEG_INF)
    skip_from = np.zeros_like(skip)
    skip_from[:, :-2] = skip[:, 2:]
    rows = np.arange(n)
    start = np.full((n, width), _NEG_INF)
    for t in range(steps - 1, -1, -1):
        if t + 1 < steps:
            nxt = beta[t + 1]
            acc = nxt.copy()
            acc[:, :-1] = np.logaddexp(acc[:, :-1], nxt[:, 1:])
            acc[:, :-2] = np.where(
                skip_from[:, :-2], np.logaddexp(acc[:, :-2], nxt[:, 2:]), acc[:, :-2]
            )
            acc += emit[t]
        else:
            acc = np.full((n, width), _NEG_INF)
        last = lengths - 1 == t  # (sequences whose last step this is: the recursion starts)
        if last.any():
            first = start.copy()
            for offset in (1, 2):
                ok = last & (sizes >= offset)
                first[rows[ok], sizes[ok] - offset] = emit[t, rows[ok], sizes[ok] - offset]
            acc = np.where(last[:, None], first, acc)
        acc[lengths <= t] = _NEG_INF
        beta[t] = acc
    return beta


def _nlls(alpha, sizes, lengths):
    """Each sequence's negative log-likelihood from the batched alphas (`_nll`'s)."""
    out = np.empty(len(sizes), np.float64)
    for i, (t_len, size) in enumerate(zip(lengths.tolist(), sizes.tolist())):
        out[i] = _nll(alpha[:, i], t_len, size)
    return out


def _kernel(log_probs, targets, input_lengths, target_lengths, *, blank, concatenated, zero_inf):
    lp_all = log_probs.astype(np.float64)
    steps, n, classes = log_probs.shape
    seqs = _sequences(targets, input_lengths, target_lengths, concatenated, steps, classes)
    if not seqs:
        return np.empty(0, log_probs.dtype)
    ext, skip, real, sizes, lengths = _batch(seqs, blank)
    out = _nlls(_alphas(_emissions(lp_all, ext, real), skip), sizes, lengths)
    if zero_inf:
        out[np.isinf(out)] = 0.0
    return out.astype(log_probs.dtype)


def _fast(log_probs, targets, input_lengths, target_lengths, *, blank, concatenated, zero_inf):
    """kernels/cctc.py's recursions, a sequence at a time (this kernel's bits); None where
    it does not apply."""
    from ..kernels import cctc

    steps, n, classes = log_probs.shape
    seqs = _sequences(targets, input_lengths, target_lengths, concatenated, steps, classes)
    if not seqs:
        return None
    ext, skip, _, sizes, lengths = _batch(seqs, blank)
    out = cctc.ctc_nll(log_probs, ext, skip, sizes, lengths)
    if out is None:
        return None
    if zero_inf:
        out[np.isinf(out)] = 0.0
    return out.astype(log_probs.dtype)


def _backward_fast(
    grad, log_probs, targets, input_lengths, target_lengths, *, blank, concatenated, zero_inf
):
    """kernels/cctc.py's recursions and sums, a sequence at a time (this kernel's operations,
    the C library's exp and log: within an ulp or two of each term); None where it does not
    apply."""
    from ..kernels import cctc

    steps, n, classes = log_probs.shape
    seqs = _sequences(targets, input_lengths, target_lengths, concatenated, steps, classes)
    if not seqs or steps == 0:
        return None
    ext, skip, _, sizes, lengths = _batch(seqs, blank)
    found = cctc.ctc_grad(grad, log_probs, ext, skip, sizes, lengths, zero_inf)
    return None if found is None else found[1].astype(log_probs.dtype)


def _backward_infer(grad, log_probs, *rest, blank, concatenated, zero_inf):
    return TensorType(tuple(log_probs.shape), log_probs.dtype)


def _backward_kernel(
    grad, log_probs, targets, input_lengths, target_lengths, *, blank, concatenated, zero_inf
):
    lp_all = log_probs.astype(np.float64)
    steps, n, classes = log_probs.shape
    out = np.zeros(lp_all.shape, np.float64)
    seqs = _sequences(targets, input_lengths, target_lengths, concatenated, steps, classes)
    if not seqs or steps == 0:
        return out.astype(log_probs.dtype)
    ext, skip, real, sizes, lengths = _batch(seqs, blank)
    emit = _emissions(lp_all, ext, real)
    alpha = _alphas(emit, skip)
    nll = _nlls(alpha, sizes, lengths)
    ab = alpha + _betas(emit, skip, sizes, lengths)  # (T, N, L)
    # per step and sequence, the log of the summed alpha * beta of each class's positions:
    # a maximum per class first (np.maximum.at), then the shifted exponentials' sums
    width = ext.shape[1]
    index = (
        np.arange(steps)[:, None, None],
        np.arange(n)[None, :, None],
        np.broadcast_to(ext[None], (steps, n, width)),
    )
    index = tuple(np.broadcast_to(i, (steps, n, width)) for i in index)
    top = np.full((steps, n, classes), _NEG_INF)
    np.maximum.at(top, index, ab)
    shift = np.where(np.isfinite(top), top, 0.0)
    total = np.zeros((steps, n, classes))
    with np.errstate(invalid="ignore", over="ignore"):
        np.add.at(total, index, np.exp(ab - shift[index]))
    with np.errstate(divide="ignore"):
        lcab = np.log(total) + shift
    used = (lengths > 0) & ~(zero_inf & np.isinf(nll))
    steps_live = np.arange(steps)[:, None] < lengths[None, :]  # (T, N)
    with np.errstate(invalid="ignore", over="ignore"):
        grads = (np.exp(lp_all) - np.exp(lcab + nll[None, :, None] - lp_all)) * grad[None, :, None]
    keep = steps_live & used[None, :]
    out[keep] = grads[keep]
    return out.astype(log_probs.dtype)


def _cost(in_types, out_types, attrs) -> Cost:
    steps, n, _ = in_types[0].shape
    labels = in_types[1].shape[-1] if in_types[1].ndim else 0
    return Cost(6 * steps * n * (2 * labels + 1), io_bytes(in_types, out_types))


def _backward_cost(in_types, out_types, attrs) -> Cost:
    steps, n, classes = in_types[1].shape
    labels = in_types[2].shape[-1] if in_types[2].ndim else 0
    return Cost(12 * steps * n * (2 * labels + 1) + 4 * steps * n * classes, 0)


def _vjp(c, g):
    lp, targets, input_lengths, target_lengths = c.inputs
    grad = apply(CTC_LOSS_BACKWARD, g, lp, targets, input_lengths, target_lengths, **c.attrs)
    return grad, None, None, None


CTC_LOSS = register(
    OpDef(
        name="ctc_loss",
        autocast=Autocast.FP32,
        kind="nn",
        infer=_infer,
        kernel=_kernel,
        fast=_fast,
        vjp=_vjp,
        cost=_cost,
        batch=None,
        doc="ctc_loss(log_probs (T, N, C), targets, input_lengths, target_lengths): each "
        "sequence's negative log-likelihood (N,) under CTC with the given blank",
    )
)

CTC_LOSS_BACKWARD = register(
    OpDef(
        name="ctc_loss_backward",
        kind="nn",
        infer=_backward_infer,
        kernel=_backward_kernel,
        fast=_backward_fast,
        cost=_backward_cost,
        batch=None,
        doc="ctc_loss_backward(grad (N,), log_probs, targets, input_lengths, target_lengths): "
        "PyTorch's CTC gradient with respect to log_probs",
    )
)
