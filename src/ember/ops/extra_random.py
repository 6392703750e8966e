"""PyTorch's in-place random fills beyond uniform_ / normal_ / bernoulli_: exponential_,
geometric_, cauchy_, log_normal_ and random_, each an inverse-CDF transform (or a randint) of
ember's generators, written into the tensor under the in-place protocol (so they capture as
draws too). ``generator=`` takes an ember.Generator as PyTorch's take a torch.Generator.

exponential_, geometric_ and cauchy_ are PyTorch's CPU kernels: one double uniform draw per
element (53 bits of a 64-bit word, whatever the tensor's dtype), transformed in double as
ATen's ``transformation::`` helpers do, then rounded to the dtype, so a seed gives PyTorch's
values (``multinomial``, ``gumbel_softmax`` and ``distributions.Exponential`` draw through
exponential_); log_normal_ is ``exp`` of PyTorch's serial double normal draws.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, ArgumentTypeError, DTypeError
from . import _item_scalars as _items
from . import api as E
from ._registry import export
from .random import check_draw_range, in_fill_order, serial_normal


def _require_float(name, old):
    if not old.dtype.is_floating_point:
        raise DTypeError(f"{name} fills float tensors only, got {old.dtype}", op=name)


def _double_uniform(old, generator):
    """PyTorch's ``uniform_real_distribution<double>(0, 1)``: one double in [0, 1) per
    element, in memory order (the transforms below are computed on it in double)."""
    return E.uniform(0.0, 1.0, tuple(old.shape), generator=generator, dtype=dt.float64)


def standard_exponential(shape, dtype, generator=None):
    """What ``empty(shape, dtype=dtype).exponential_()`` holds: PyTorch's Exponential(1) draws
    (``-log1p(-u)`` of double uniforms, rounded to ``dtype``), for the samplers built on it
    (gumbel_softmax, distributions.Exponential)."""
    u = E.uniform(0.0, 1.0, tuple(shape), generator=generator, dtype=dt.float64)
    return E.cast(-E.log1p(-u), dtype)


def standard_cauchy(shape, dtype, generator=None):
    """What ``empty(shape, dtype=dtype).cauchy_()`` holds: PyTorch's standard Cauchy draws
    (``tan(pi * (u - 0.5))`` of double uniforms, rounded to ``dtype``)."""
    u = E.uniform(0.0, 1.0, tuple(shape), generator=generator, dtype=dt.float64)
    return E.cast(0.0 + 1.0 * E.tan(math.pi * (u - 0.5)), dtype)


def _exponential_(self, lambd: float = 1.0, *, generator=None):
    """Fill with draws from the exponential distribution of rate ``lambd``: PyTorch's
    ``-1 / lambd * log1p(-u)``."""

    def fill(old):
        _require_float("exponential_", old)
        u = _double_uniform(old, generator)
        scale = -1.0 / _items.number(lambd)  # (an item: its tensor)
        return E.cast(scale * E.log1p(-u), old.dtype)

    return self._inplace("exponential_", in_fill_order(self, fill))


def _geometric_(self, p: float, *, generator=None):
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    if not 0 < p < 1:
        raise ArgumentError(f"geometric_: p must be in (0, 1), got {p}")

    def fill(old):
        # PyTorch's ceil(log(u) / log1p(-p)); u = 0 (probability 2^-53) gives inf, as there
        trials = E.ceil(E.log(_double_uniform(old, generator)) / math.log1p(-p))
        return E.cast(trials, old.dtype)

    return self._inplace("geometric_", in_fill_order(self, fill))


def _cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator=None):
    """Fill with draws from the Cauchy distribution (location ``median``, scale ``sigma``)."""

    def fill(old):
        _require_float("cauchy_", old)
        u = _double_uniform(old, generator)
        return E.cast(float(median) + float(sigma) * E.tan(math.pi * (u - 0.5)), old.dtype)

    return self._inplace("cauchy_", in_fill_order(self, fill))


def _log_normal_(self, mean: float = 1.0, std: float = 2.0, *, generator=None):
    """Fill with ``exp`` of normal draws of ``mean`` and ``std``."""

    def fill(old):
        _require_float("log_normal_", old)
        # PyTorch's lognormal_distribution<double>: exp of serial double normal draws
        n = serial_normal(tuple(old.shape), float(mean), float(std), generator=generator)
        return E.cast(E.exp(n), old.dtype)

    return self._inplace("log_normal_", in_fill_order(self, fill))


def _default_top(dtype) -> int:
    """random_()'s exclusive bound without arguments: 2^mantissa + 1 for floats (every integer
    in [0, 2^mantissa] is exact), the largest value + 1 for integers, as PyTorch's."""
    if dtype.is_bool:
        return 2
    if dtype.is_floating_point:
        return 2 ** (ml_dtypes.finfo(dtype.np).nmant + 1) + 1
    return int(np.iinfo(dtype.np).max) + 1


def _random_(self, from_=None, to=None, *, generator=None, **kwargs):
    """Fill with integers drawn uniformly from [from, to) (``random_(to)``: [0, to);
    ``random_()``: [0, 2^mantissa] for floats, every non-negative value for integers)."""
    from_ = kwargs.pop("from", from_)
    if kwargs:
        raise ArgumentTypeError(f"random_() got unexpected arguments {sorted(kwargs)}")
    if to is None and from_ is not None:
        low, high = 0, int(from_)
    else:
        low, high = int(from_ or 0), to

    def fill(old):
        top = _default_top(old.dtype) if high is None else int(high)
        if top <= low:
            raise ArgumentError(f"random_ expects from < to, got from={low}, to={top}")
        if high is not None:
            check_draw_range("random_", low, top, old.dtype)
        draws = E.randint(low, top, tuple(old.shape), generator=generator, dtype=dt.int64)
        return E.cast(draws, old.dtype)

    return self._inplace("random_", in_fill_order(self, fill))


for _fn, _name in (
    (_exponential_, "exponential_"),
    (_geometric_, "geometric_"),
    (_cauchy_, "cauchy_"),
    (_log_normal_, "log_normal_"),
    (_random_, "random_"),
):
    export(_fn, name=_name, method=True, toplevel=False)
