"""The connectionist temporal classification loss (Graves et al., 2006) as two primitives:
``ctc_loss`` (each sequence's negative log-likelihood, by the alpha recursion) and
``ctc_loss_backward`` (its gradient, by the alpha and beta recursions).

Both kernels work in log space in NumPy, one sequence at a time, vectorized over the extended
target (the labels with blanks around and between them). The gradient is PyTorch's: for
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


def _alpha(lp, ext, skip, steps):
    """log alpha, (steps, len(ext))."""
    size = len(ext)
    alpha = np.full((max(steps, 1), size), _NEG_INF)
    if steps == 0:
        return alpha
    alpha[0, 0] = lp[0, ext[0]]
    if size > 1:
        alpha[0, 1] = lp[0, ext[1]]
    for t in range(1, steps):
        prev = alpha[t - 1]
        acc = prev.copy()
        acc[1:] = np.logaddexp(acc[1:], prev[:-1])
        acc[2:] = np.where(skip[2:], np.logaddexp(acc[2:], prev[:-2]), acc[2:])
        alpha[t] = acc + lp[t, ext]
    return alpha


def _beta(lp, ext, skip, steps):
    """log beta (PyTorch's convention: including the emission at t), (steps, len(ext))."""
    size = len(ext)
    beta = np.full((max(steps, 1), size), _NEG_INF)
    if steps == 0:
        return beta
    beta[steps - 1, size - 1] = lp[steps - 1, ext[size - 1]]
    if size > 1:
        beta[steps - 1, size - 2] = lp[steps - 1, ext[size - 2]]
    # position s may step to s + 2 when s + 2 may be reached from s
    skip_from = np.zeros(size, bool)
    skip_from[:-2] = skip[2:]
    for t in range(steps - 2, -1, -1):
        nxt = beta[t + 1]
        acc = nxt.copy()
        acc[:-1] = np.logaddexp(acc[:-1], nxt[1:])
        acc[:-2] = np.where(skip_from[:-2], np.logaddexp(acc[:-2], nxt[2:]), acc[:-2])
        beta[t] = acc + lp[t, ext]
    return beta


def _nll(alpha, steps, size):
    if steps == 0:
        return np.inf if size > 1 else 0.0
    last = alpha[steps - 1]
    total = last[size - 1] if size == 1 else np.logaddexp(last[size - 1], last[size - 2])
    return -total


def _kernel(log_probs, targets, input_lengths, target_lengths, *, blank, concatenated, zero_inf):
    lp_all = log_probs.astype(np.float64)
    steps, n, classes = log_probs.shape
    out = np.empty(n, np.float64)
    seqs = _sequences(targets, input_lengths, target_lengths, concatenated, steps, classes)
    for i, (t_len, labels) in enumerate(seqs):
        ext, skip = _extended(labels, blank)
        lp = lp_all[:, i, :]
        out[i] = _nll(_alpha(lp, ext, skip, t_len), t_len, len(ext))
    if zero_inf:
        out[np.isinf(out)] = 0.0
    return out.astype(log_probs.dtype)


def _backward_infer(grad, log_probs, *rest, blank, concatenated, zero_inf):
    return TensorType(tuple(log_probs.shape), log_probs.dtype)


def _backward_kernel(
    grad, log_probs, targets, input_lengths, target_lengths, *, blank, concatenated, zero_inf
):
    lp_all = log_probs.astype(np.float64)
    steps, n, classes = log_probs.shape
    out = np.zeros(lp_all.shape, np.float64)
    seqs = _sequences(targets, input_lengths, target_lengths, concatenated, steps, classes)
    for i, (t_len, labels) in enumerate(seqs):
        if t_len == 0:
            continue
        ext, skip = _extended(labels, blank)
        lp = lp_all[:t_len, i, :]
        alpha = _alpha(lp, ext, skip, t_len)
        nll = _nll(alpha, t_len, len(ext))
        if zero_inf and np.isinf(nll):
            continue
        ab = alpha + _beta(lp, ext, skip, t_len)
        lcab = np.full((t_len, classes), _NEG_INF)
        for s, label in enumerate(ext):
            lcab[:, label] = np.logaddexp(lcab[:, label], ab[:, s])
        with np.errstate(invalid="ignore", over="ignore"):
            out[:t_len, i, :] = (np.exp(lp) - np.exp(lcab + nll - lp)) * grad[i]
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
        cost=_backward_cost,
        batch=None,
        doc="ctc_loss_backward(grad (N,), log_probs, targets, input_lengths, target_lengths): "
        "PyTorch's CTC gradient with respect to log_probs",
    )
)
