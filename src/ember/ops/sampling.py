"""Sampling categories: ``multinomial`` (PyTorch's), a random primitive drawing from an
`ember.Generator` like the others in ops/random.py.

Each row of the input holds non-negative weights (they need not sum to 1). The draws are
PyTorch's CPU kernel's (random_streams.multinomial), so a seed gives PyTorch's samples: with
replacement every draw inverts the row's cumulative distribution at a uniform number, so a
category of weight 0 is never drawn; without replacement (and for a single sample) the draws
are the categories of the ``n`` largest keys ``w_i / E_i`` (``E_i`` standard exponential), in
decreasing order of key: an exponential race, which draws one category after another, each
with probability proportional to its weight among those not yet drawn.

The weights are data, so the checks PyTorch makes on them (finite, non-negative, a positive
sum) run in the kernel and raise there, eagerly and in a captured graph alike. Without
replacement, categories of weight 0 are drawn only once every positive one has been (as
PyTorch allows), in index order.
"""

from __future__ import annotations

import operator

import numpy as np

from .. import dtypes as dt
from .. import random_streams as streams
from ..errors import DTypeError, EmberError, ShapeError
from ..random import resolve
from ..types import TensorType
from ._registry import OpDef, apply, export, register
from ._util import elementwise_cost, fmt_shape
from .promotion import to_tensor


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


def _multinomial_kernel(p, *, num_samples, replacement, generator):
    w = np.ascontiguousarray(np.atleast_2d(p))
    _check_weights(w.astype(np.float64))
    out = streams.multinomial(w, num_samples, replacement, generator)
    return out.reshape(p.shape[:-1] + (num_samples,))


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
    ``generator`` (an `ember.Generator`; the default one when None). Not differentiable. The
    draws are PyTorch's: the same seed gives PyTorch's samples."""
    p = to_tensor(input)
    return apply(
        _MULTINOMIAL,
        p,
        num_samples=operator.index(num_samples),
        replacement=bool(replacement),
        generator=resolve(generator),
    )
