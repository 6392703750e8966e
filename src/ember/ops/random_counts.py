"""PyTorch's count samplers: ``torch.poisson(rates)`` and ``torch.binomial(count, prob)``, one
draw per element from an `ember.Generator` (``generator=``, the default one otherwise),
returned in the operands' floating dtype (half precision drawn in double and rounded). Both
draw PyTorch's streams (random_streams.poisson and .binomial: a seed gives PyTorch's counts).

As PyTorch's: a negative or NaN rate raises; ``binomial`` takes float ``count`` and ``prob`` of
one dtype, broadcasting; a count of 0 or less or a probability of 0 or less gives 0, a
probability of 1 or more the count itself, a NaN probability NaN, and a NaN count NaN (where
PyTorch's sampler does not return). ``poisson``'s derivative is zero (PyTorch's);
``binomial`` has none (backward raises, as PyTorch's "not implemented")."""

from __future__ import annotations

import numpy as np

from .. import random_streams as streams
from ..errors import ArgumentError, DTypeError
from ..random import resolve
from ..types import TensorType
from . import api as E
from ._registry import OpDef, apply, export, register
from ._util import broadcast_shapes, elementwise_cost, require_float, same_type
from .promotion import to_tensor

# --------------------------------------------------------------------------------- poisson


def _poisson_infer(rates, *, generator):
    require_float("poisson", rates)
    return same_type(rates)


def _poisson_kernel(rates, *, generator):
    lam = rates.astype(np.float64)
    if np.isnan(lam).any() or (lam < 0).any():
        raise ArgumentError(
            "invalid Poisson rate, expected rate to be non-negative (a rate is negative or NaN)",
            op="poisson",
        )
    return streams.poisson(np.ascontiguousarray(lam), generator).astype(rates.dtype)


_POISSON = register(
    OpDef(
        name="random_poisson",
        kind="random",
        infer=_poisson_infer,
        kernel=_poisson_kernel,
        vjp=lambda c, g: (E.zeros_like(g),),  # PyTorch's: zero
        save_inputs=(),
        cost=elementwise_cost(1),
        doc="poisson(rates): one Poisson draw per rate",
    )
)


@export
def poisson(input, generator=None):
    """``torch.poisson``: a Poisson draw with each element of ``input`` as its rate (float
    dtypes; the result has ``input``'s dtype). Its gradient is zero, as PyTorch's."""
    return apply(_POISSON, to_tensor(input), generator=resolve(generator))


# -------------------------------------------------------------------------------- binomial


def _binomial_infer(count, prob, *, generator):
    if not count.dtype.is_floating_point:
        raise ArgumentError(
            f"binomial only supports floating-point dtypes for count, got: {count.dtype}",
            op="binomial",
        )
    require_float("binomial", prob)
    if prob.dtype is not count.dtype:
        raise DTypeError(
            f"Found dtype {prob.dtype} but expected {count.dtype} (count and prob must share "
            "one dtype)",
            op="binomial",
        )
    return TensorType(broadcast_shapes("binomial", count.shape, prob.shape), count.dtype)


def _binomial_kernel(count, prob, *, generator):
    return streams.binomial(count, prob, generator)


_BINOMIAL = register(
    OpDef(
        name="random_binomial",
        kind="random",
        infer=_binomial_infer,
        kernel=_binomial_kernel,
        vjp=None,  # PyTorch: "derivative for aten::binomial is not implemented"
        cost=elementwise_cost(1),
        doc="binomial(count, prob): one binomial draw per element",
    )
)


@export
def binomial(count, prob, generator=None):
    """``torch.binomial``: the number of successes in ``count`` trials of probability
    ``prob`` (float tensors of one dtype, broadcasting), as floats."""
    return apply(_BINOMIAL, to_tensor(count), to_tensor(prob), generator=resolve(generator))
