"""Sampling categories: ``multinomial`` (PyTorch's), a random primitive drawing from an
`ember.Generator` like the others in ops/random.py.

Each row of the input holds non-negative weights (they need not sum to 1). With replacement
every draw inverts the row's cumulative distribution at a uniform number, so a category of
weight 0 is never drawn. Without replacement the draws are the categories of the ``n``
smallest keys ``E_i / w_i`` (``E_i`` standard exponential), in increasing order of key: an
exponential race, which draws one category after another, each with probability proportional
to its weight among those not yet drawn, the distribution of PyTorch's sequential draws.

The weights are data, so the checks PyTorch makes on them (finite, non-negative, a positive
sum) run in the kernel and raise there, eagerly and in a captured graph alike. Without
replacement, categories of weight 0 are drawn only once every positive one has been (as
PyTorch allows), in index order.
"""

from __future__ import annotations

import operator

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, EmberError, ShapeError
from ..random import resolve
from ..types import TensorType
from ._registry import OpDef, apply, export, register
from ._util import elementwise_cost, fmt_shape
from .elementwise import to_tensor


def _multinomial_infer(p, *, num_samples, replacement, generator):
    if not p.dtype.is_floating_point:
        raise DTypeError(f"the weights must be a floating tensor, got {p.dtype}", op="multinomial")
    if p.ndim not in (1, 2):
        raise ShapeError(
            f"the weights must be 1-D or 2-D, got shape {fmt_shape(p.shape)}", op="multinomial"
        )
    categories = p.shape[-1]
    if categories == 0:
        raise ShapeError("the weights have no categories", op="multinomial")
    if num_samples <= 0:
        raise ShapeError(f"num_samples must be positive, got {num_samples}", op="multinomial")
    if not replacement and num_samples > categories:
        raise ShapeError(
            f"cannot draw {num_samples} samples without replacement from {categories} categories",
            op="multinomial",
        )
    return TensorType(tuple(p.shape[:-1]) + (num_samples,), dt.int64)


def _check_weights(w: np.ndarray) -> None:
    if not np.isfinite(w).all():
        raise EmberError("the weights hold inf or NaN", op="multinomial")
    if (w < 0).any():
        raise EmberError("the weights hold negative values", op="multinomial")
    if (w.sum(axis=-1) <= 0).any():
        raise EmberError("a row of weights sums to zero", op="multinomial")


def _double_uniforms(generator, count: int) -> np.ndarray:
    """PyTorch's uniform doubles in [0, 1): 53 bits of a 64-bit draw each."""
    words = generator.words64(count)
    words &= np.uint64((1 << 53) - 1)
    return words.astype(np.float64) * 2.0**-53


def _multinomial_kernel(p, *, num_samples, replacement, generator):
    """PyTorch's CPU draws. With replacement (and more than one sample): each row's
    cumulative weights (summed in its dtype, float32 or double, and divided by the total),
    and per sample a uniform double, the first category whose cumulative weight reaches it.
    Otherwise (and for one sample): exponential keys -log1p(-u), the weights divided by
    them, the largest first (argmax for one sample)."""
    w = np.atleast_2d(p)
    _check_weights(w.astype(np.float64))
    rows, n = w.shape
    acc = np.float64 if w.dtype == np.float64 else np.float32
    if replacement and num_samples > 1:
        cdf = np.cumsum(w.astype(acc), axis=1, dtype=acc)
        cdf /= cdf[:, -1:]
        u = _double_uniforms(generator, rows * num_samples).reshape(rows, num_samples)
        out = np.stack(
            [np.searchsorted(cdf[r].astype(np.float64), u[r], side="left") for r in range(rows)]
        )
        out = np.minimum(out, n - 1)  # (rounding could leave the last cumulative below 1)
        # a draw of exactly 0 lands on a leading category of weight 0: the next one holds it
        zero = np.take_along_axis(w, out, axis=1) == 0
        if zero.any():
            for r, c in zip(*np.nonzero(zero)):
                out[r, c] = min(np.searchsorted(cdf[r], u[r, c], side="right"), n - 1)
    else:
        keys = -np.log1p(-_double_uniforms(generator, rows * n)).reshape(rows, n)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = w.astype(acc) / keys.astype(acc)
        if num_samples == 1:
            out = np.argmax(ratio, axis=1)[:, None]
        else:  # (weight 0: ratio 0, last, in index order)
            out = np.argsort(-ratio, axis=1, kind="stable")[:, :num_samples]
    return out.astype(np.int64).reshape(p.shape[:-1] + (num_samples,))


_MULTINOMIAL = register(
    OpDef(
        name="random_multinomial",
        kind="random",
        infer=_multinomial_infer,
        kernel=_multinomial_kernel,
        cost=elementwise_cost(1),
        batch=None,
        doc="random_multinomial(p, num_samples, replacement, generator): category indices "
        "drawn by the weights in each row of p",
    )
)


@export(method=True)
def multinomial(input, num_samples: int, replacement: bool = False, *, generator=None):  # noqa: A002
    """``num_samples`` category indices (int64) drawn from each row of ``input`` (1-D or 2-D
    non-negative weights, normalized per row), with or without ``replacement`` (without: no
    category twice in a row, at most as many samples as categories; categories of weight 0
    come last, in index order). Draws from
    ``generator`` (an `ember.Generator`; the default one when None), as PyTorch's CPU kernel
    draws: the same seed gives PyTorch's samples. Not differentiable."""
    p = to_tensor(input)
    return apply(
        _MULTINOMIAL,
        p,
        num_samples=operator.index(num_samples),
        replacement=bool(replacement),
        generator=resolve(generator),
    )
