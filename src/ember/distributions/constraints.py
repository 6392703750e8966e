"""Constraints: the sets parameters and values live in (``torch.distributions.constraints``).
``check(value)`` returns a boolean tensor over the batch (event dimensions reduced)."""

from __future__ import annotations

from ..ops.spectral import eigvalsh
from ._util import E, cholesky, finfo_eps

__all__ = [
    "Constraint",
    "boolean",
    "real",
    "real_vector",
    "positive",
    "nonnegative",
    "unit_interval",
    "simplex",
    "nonnegative_integer",
    "positive_integer",
    "integer_interval",
    "interval",
    "half_open_interval",
    "greater_than",
    "greater_than_eq",
    "less_than",
    "lower_cholesky",
    "positive_definite",
    "independent",
    "one_hot",
    "corr_cholesky",
    "lower_triangular",
    "square",
    "symmetric",
    "positive_semidefinite",
    "cat",
    "stack",
]


class Constraint:
    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self) -> str:
        return type(self).__name__.lstrip("_") + "()"


class _Real(Constraint):
    def check(self, value):
        return value == value  # False for NaN


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _GreaterThan(Constraint):
    def __init__(self, lower_bound, strict: bool = True):
        self.lower_bound = lower_bound
        self.strict = strict

    def check(self, value):
        return value > self.lower_bound if self.strict else value >= self.lower_bound

    def __repr__(self) -> str:  # (PyTorch's classes: GreaterThan, GreaterThanEq)
        name = "GreaterThan" if self.strict else "GreaterThanEq"
        return f"{name}(lower_bound={self.lower_bound})"


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self) -> str:
        return f"LessThan(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound, half_open: bool = False):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.half_open = half_open

    def check(self, value):
        upper = value < self.upper_bound if self.half_open else value <= self.upper_bound
        return (value >= self.lower_bound) & upper

    def __repr__(self) -> str:  # (PyTorch's classes: Interval, HalfOpenInterval)
        name = "HalfOpenInterval" if self.half_open else "Interval"
        return f"{name}(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound=None):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value):
        ok = (value % 1 == 0) & (value >= self.lower_bound)
        return ok if self.upper_bound is None else ok & (value <= self.upper_bound)

    def __repr__(self) -> str:  # (PyTorch's classes: IntegerInterval, IntegerGreaterThan)
        if self.upper_bound is None:
            return f"IntegerGreaterThan(lower_bound={self.lower_bound})"
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        lower = (value.tril() == value).all(-1).all(-1)
        n = value.shape[-1]
        diag = (value * E.eye(n, dtype=value.dtype)).sum(-1)
        return lower & (diag > 0).all(-1)


class _PositiveDefinite(Constraint):
    event_dim = 2

    def check(self, value):
        symmetric = ((value - value.transpose(-2, -1)).abs() < 1e-6).all(-1).all(-1)
        try:  # a non-positive pivot raises; a check answers False
            cholesky(value)
        except ValueError:
            return symmetric & False
        return symmetric


class _Independent(Constraint):
    def __init__(self, base: Constraint, reinterpreted_batch_ndims: int):
        self.base_constraint = base
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.event_dim = base.event_dim + reinterpreted_batch_ndims
        self.is_discrete = base.is_discrete

    def check(self, value):
        result = self.base_constraint.check(value)
        for _ in range(self.reinterpreted_batch_ndims):
            result = result.all(-1)
        return result

    def __repr__(self) -> str:
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return (value.tril() == value).all(-1).all(-1)


class _CorrCholesky(Constraint):
    """Lower Cholesky factors of correlation matrices: positive diagonal, unit-norm rows."""

    event_dim = 2

    def check(self, value):
        tol = 10 * finfo_eps(value.dtype) * value.shape[-1]
        row_norm = (value * value).sum(-1).sqrt()
        unit = ((row_norm - 1).abs() <= tol).all(-1)
        return _LowerCholesky().check(value) & unit


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        ok = value.shape[-1] == value.shape[-2]
        return E.full(tuple(value.shape[:-2]), ok, dtype=_bool())


class _Symmetric(_Square):
    def check(self, value):
        if value.shape[-1] != value.shape[-2]:
            return super().check(value)
        return E.isclose(value, value.transpose(-2, -1), atol=1e-6).all(-1).all(-1)


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        sym = super().check(value)
        if value.shape[-1] != value.shape[-2]:
            return sym
        return sym & (eigvalsh(value) >= 0).all(-1)


class _Cat(Constraint):
    """``cseq[i]`` on the slice of length ``lengths[i]`` along ``dim``."""

    def __init__(self, cseq, dim: int = 0, lengths=None):
        self.cseq = list(cseq)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        self.dim = dim
        self.event_dim = max(c.event_dim for c in self.cseq)
        self.is_discrete = any(c.is_discrete for c in self.cseq)

    def check(self, value):
        checks, start = [], 0
        for constraint, length in zip(self.cseq, self.lengths):
            checks.append(constraint.check(value.narrow(self.dim, start, length)))
            start += length
        return E.cat(checks, self.dim)


class _Stack(Constraint):
    """``cseq[i]`` on index ``i`` along ``dim``."""

    def __init__(self, cseq, dim: int = 0):
        self.cseq = list(cseq)
        self.dim = dim
        self.event_dim = max(c.event_dim for c in self.cseq)
        self.is_discrete = any(c.is_discrete for c in self.cseq)

    def check(self, value):
        parts = [value.select(self.dim, i) for i in range(value.shape[self.dim])]
        return E.stack([c.check(v) for c, v in zip(self.cseq, parts)], self.dim)


def _bool():
    from ..dtypes import bool_

    return bool_


boolean = _Boolean()
real = _Real()
real_vector = _Independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThan(0.0, strict=False)
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()
nonnegative_integer = _IntegerInterval(0)
positive_integer = _IntegerInterval(1)
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
one_hot = _OneHot()
integer_interval = _IntegerInterval
interval = _Interval
greater_than = _GreaterThan


def greater_than_eq(lower_bound):
    return _GreaterThan(lower_bound, strict=False)


def half_open_interval(lower_bound, upper_bound):
    return _Interval(lower_bound, upper_bound, half_open=True)


less_than = _LessThan
independent = _Independent
corr_cholesky = _CorrCholesky()
lower_triangular = _LowerTriangular()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
cat = _Cat
stack = _Stack
