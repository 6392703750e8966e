"""Bijective transforms and `TransformedDistribution` (``torch.distributions.transforms``):
Exp, Affine, Sigmoid, Tanh, Compose and their inverses (``t.inv``), each with
``log_abs_det_jacobian``; and LogNormal, a Normal under ExpTransform. The other transforms
are in transforms_extra.py."""

from __future__ import annotations

import copy
import math

from ..errors import ArgumentError, ArgumentTypeError
from . import constraints
from ._util import E, clipped_sigmoid, finfo_eps, finfo_tiny, sum_rightmost
from .continuous import Normal
from .distribution import Distribution, _shape

__all__ = [
    "Transform",
    "ExpTransform",
    "AffineTransform",
    "SigmoidTransform",
    "TanhTransform",
    "ComposeTransform",
    "TransformedDistribution",
    "LogNormal",
]


def _softplus(x):
    return x.clamp(min=0) + (-x.abs()).exp().log1p()


class Transform:
    """``y = t(x)``, ``x = t.inv(y)``, ``t.log_abs_det_jacobian(x, y)`` elementwise over
    ``event_dim`` (summed by `TransformedDistribution`).

    ``cache_size=1`` keeps the last pair, as PyTorch's: the inverse of the ``y`` a call just
    returned is that call's ``x`` (the same tensor object), not a recomputation, which matters
    where the inverse is inexact: a tanh-squashed policy's ``log_prob`` of the action it just
    drew reads the pre-tanh value, finite where ``atanh`` of a rounded ``+-1`` is not."""

    bijective = True
    sign = 1
    domain = constraints.real
    codomain = constraints.real

    def __init__(self, cache_size: int = 0):
        if cache_size not in (0, 1):
            raise ArgumentError(f"cache_size must be 0 or 1, got {cache_size!r}")
        self._cache_size = cache_size
        self._cached_x_y = (None, None)
        self.event_dim = getattr(self, "event_dim", 0)

    @property
    def cache_size(self) -> int:
        return getattr(self, "_cache_size", 0)  # (a subclass that skipped __init__: none)

    @property
    def inv(self):
        return _InverseTransform(self)

    def with_cache(self, cache_size: int = 1):
        """This transform with another cache size: itself if it has that size, else a copy
        (sharing its parameters) with an empty cache."""
        if self.cache_size == cache_size:
            return self
        if cache_size not in (0, 1):
            raise ArgumentError(f"cache_size must be 0 or 1, got {cache_size!r}")
        new = copy.copy(self)  # (through __getstate__: no cached pair)
        new._cache_size = cache_size
        return new

    def __call__(self, x):
        if self.cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = (x, y)
        return y

    def _inv_call(self, y):
        if self.cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = (x, y)
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_cached_x_y"] = (None, None)  # (PyTorch's: a pickled transform keeps no pair)
        return state

    def __repr__(self) -> str:
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform: Transform):
        super().__init__(transform.cache_size)
        self._inv = transform
        self.event_dim = transform.event_dim
        self.domain, self.codomain = transform.codomain, transform.domain

    @property
    def inv(self):
        return self._inv

    def with_cache(self, cache_size: int = 1):
        return self._inv.with_cache(cache_size).inv

    def __call__(self, x):
        return self._inv._inv_call(x)  # the forward transform's cache, read backwards

    def _inv_call(self, y):
        return self._inv(y)

    def _call(self, x):
        return self._inv._inverse(x)

    def _inverse(self, y):
        return self._inv._call(y)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._inv!r})"


class ExpTransform(Transform):
    def __eq__(self, other):  # PyTorch: transforms of one kind are equal
        return isinstance(other, ExpTransform)

    __hash__ = Transform.__hash__

    codomain = constraints.positive

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class AffineTransform(Transform):
    def __eq__(self, other):
        """Equal parameters (PyTorch's ``AffineTransform.__eq__``)."""
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                if a != b:
                    return False
            elif not bool((E.as_tensor(a) == E.as_tensor(b)).all()):
                return False
        return True

    __hash__ = Transform.__hash__

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0):
        self.event_dim = event_dim
        super().__init__(cache_size)
        self.loc = loc
        self.scale = scale

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        scale = self.scale
        if isinstance(scale, (int, float)):
            result = E.full_like(x, math.log(abs(scale)))
        else:
            result = scale.abs().log()
            result = result.expand(*x.shape) if tuple(result.shape) != tuple(x.shape) else result
        return sum_rightmost(result, self.event_dim)


class SigmoidTransform(Transform):
    def __eq__(self, other):  # PyTorch: transforms of one kind are equal
        return isinstance(other, SigmoidTransform)

    __hash__ = Transform.__hash__

    codomain = constraints.unit_interval

    def _call(self, x):
        return clipped_sigmoid(x)

    def _inverse(self, y):
        y = y.clamp(min=finfo_tiny(y.dtype), max=1 - finfo_eps(y.dtype))
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -_softplus(-x) - _softplus(x)


class TanhTransform(Transform):
    def __eq__(self, other):  # PyTorch: transforms of one kind are equal
        return isinstance(other, TanhTransform)

    __hash__ = Transform.__hash__

    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        # atanh; PyTorch also does not clamp here (cache_size=1 avoids the inverse)
        return 0.5 * ((1 + y).log() - (1 - y).log())

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2), stably, as PyTorch
        return 2.0 * (math.log(2.0) - x - _softplus(-2.0 * x))


class ComposeTransform(Transform):
    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = Transform.__hash__

    def __init__(self, parts, cache_size: int = 0):
        # (PyTorch's: a caching composition caches in each part, where the inverse reads it)
        self.parts = [p.with_cache(cache_size) for p in parts] if cache_size else list(parts)
        self.event_dim = max((p.event_dim for p in self.parts), default=0)
        super().__init__(cache_size)

    @property
    def inv(self):
        return ComposeTransform([p.inv for p in reversed(self.parts)])

    def with_cache(self, cache_size: int = 1):
        if self.cache_size == cache_size:
            return self
        return ComposeTransform(self.parts, cache_size=cache_size)

    def __repr__(self) -> str:  # (PyTorch's layout: one part a line)
        return type(self).__name__ + "(\n    " + ",\n    ".join(map(repr, self.parts)) + "\n)"

    def _call(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def _inverse(self, y):
        for part in reversed(self.parts):
            y = part.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        total = 0
        for part in self.parts:
            y_part = part(x)
            term = part.log_abs_det_jacobian(x, y_part)
            total = total + sum_rightmost(term, self.event_dim - part.event_dim)
            x = y_part
        return total


class TransformedDistribution(Distribution):
    """``base_distribution`` pushed through ``transforms`` (applied in order). ``log_prob``
    inverts the transforms and subtracts their log-Jacobians; ``rsample`` exists where the base
    has one. A transform made with ``cache_size=1`` gives ``log_prob`` of the sample it just
    drew that sample's ``x`` without inverting (`Transform`)."""

    arg_constraints: dict = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            transforms = [transforms]
        self.transforms = list(transforms)
        for t in self.transforms:
            if not isinstance(t, Transform):
                raise ArgumentTypeError(
                    f"TransformedDistribution: expected Transforms, got {type(t).__name__}"
                )
        self.base_dist = base_distribution
        shape = tuple(base_distribution.batch_shape + base_distribution.event_shape)
        for t in self.transforms:  # (a transform may change the event's size: StickBreaking)
            shape = tuple(t.forward_shape(shape))
        event_dim = max(
            [len(base_distribution.event_shape)]
            + [max(t.event_dim, t.codomain.event_dim) for t in self.transforms]
        )
        cut = len(shape) - event_dim
        super().__init__(shape[:cut], shape[cut:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(TransformedDistribution, _instance)
        batch_shape = _shape(batch_shape)
        shape = batch_shape + tuple(self._event_shape)
        for t in reversed(self.transforms):
            shape = tuple(t.inverse_shape(shape))
        base_event = len(self.base_dist.event_shape)
        new.base_dist = self.base_dist.expand(shape[: len(shape) - base_event])
        new.transforms = self.transforms
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def support(self):
        return self.transforms[-1].codomain if self.transforms else self.base_dist.support

    def sample(self, sample_shape=()):
        x = self.base_dist.sample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def rsample(self, sample_shape=()):
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value):
        if self._validate_args:  # (PyTorch's: the support first, so LogNormal refuses 0)
            self._validate_sample(value)
        event_dim = len(self._event_shape)
        log_prob = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            event_dim += t.domain.event_dim - t.codomain.event_dim
            term = t.log_abs_det_jacobian(x, y)
            log_prob = log_prob - sum_rightmost(term, event_dim - t.event_dim)
            y = x
        base = self.base_dist.log_prob(y)
        return log_prob + sum_rightmost(base, event_dim - len(self.base_dist.event_shape))

    def cdf(self, value):
        for t in reversed(self.transforms):
            value = t.inv(value)
        value = self.base_dist.cdf(value)
        sign = 1
        for t in self.transforms:
            sign = sign * t.sign
        return value if sign == 1 else 1 - value

    def icdf(self, value):
        sign = 1
        for t in self.transforms:
            sign = sign * t.sign
        value = self.base_dist.icdf(value if sign == 1 else 1 - value)
        for t in self.transforms:
            value = t(value)
        return value


class LogNormal(TransformedDistribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        return self.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale.pow(2)).exp()

    @property
    def variance(self):
        s2 = self.scale.pow(2)
        return s2.expm1() * (2 * self.loc + s2).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc
