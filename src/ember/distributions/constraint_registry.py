"""``torch.distributions.constraint_registry``: `biject_to` and `transform_to`, registries
from a constraint to the transform from the unconstrained reals onto it (``biject_to``:
bijective, for HMC-style reparameterization; ``transform_to``: any, for optimization), with
PyTorch's entries, and `ConstraintRegistry` for registering more."""

from __future__ import annotations

from ..errors import ArgumentTypeError
from . import constraints
from .transforms import AffineTransform, ComposeTransform, ExpTransform, SigmoidTransform
from .transforms_extra import (
    CatTransform,
    CorrCholeskyTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    SoftmaxTransform,
    StackTransform,
    StickBreakingTransform,
    identity_transform,
)

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    """Constraint (an instance or a class) -> factory ``factory(constraint) -> Transform``."""

    def __init__(self):
        self._registry: dict = {}

    def register(self, constraint, factory=None):
        """``register(constraint, factory)``, or ``@register(constraint)`` on the factory."""
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not isinstance(constraint, type) or not issubclass(constraint, constraints.Constraint):
            raise ArgumentTypeError(
                f"Expected constraint to be either a Constraint subclass or instance, but got "
                f"{constraint}"
            )
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint):
        for cls in type(constraint).__mro__:
            factory = self._registry.get(cls)
            if factory is not None:
                return factory(constraint)
        raise NotImplementedError(
            f"Cannot transform {type(constraint).__name__} constraints"
        ) from None


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


def _real(constraint):
    return identity_transform


def _independent(registry):
    def factory(constraint):
        base = registry(constraint.base_constraint)
        return IndependentTransform(base, constraint.reinterpreted_batch_ndims)

    return factory


def _greater_than(constraint):
    return ComposeTransform([ExpTransform(), AffineTransform(constraint.lower_bound, 1)])


def _less_than(constraint):
    return ComposeTransform([ExpTransform(), AffineTransform(constraint.upper_bound, -1)])


def _interval(constraint):
    lower, upper = constraint.lower_bound, constraint.upper_bound
    if isinstance(lower, (int, float)) and isinstance(upper, (int, float)):
        if lower == 0 and upper == 1:
            return SigmoidTransform()
    return ComposeTransform([SigmoidTransform(), AffineTransform(lower, upper - lower)])


def _cat(registry):
    def factory(constraint):
        parts = [registry(c) for c in constraint.cseq]
        return CatTransform(parts, constraint.dim, constraint.lengths)

    return factory


def _stack(registry):
    def factory(constraint):
        return StackTransform([registry(c) for c in constraint.cseq], constraint.dim)

    return factory


for _registry in (biject_to, transform_to):
    _registry.register(constraints.real, _real)
    _registry.register(constraints._Independent, _independent(_registry))
    _registry.register(constraints._GreaterThan, _greater_than)
    _registry.register(constraints._LessThan, _less_than)
    _registry.register(constraints._Interval, _interval)
    _registry.register(constraints.corr_cholesky, lambda c: CorrCholeskyTransform())
    _registry.register(constraints._Cat, _cat(_registry))
    _registry.register(constraints._Stack, _stack(_registry))
biject_to.register(constraints.simplex, lambda c: StickBreakingTransform())
transform_to.register(constraints.simplex, lambda c: SoftmaxTransform())
# (not bijections between spaces of one dimension: transform_to only, as PyTorch)
transform_to.register(constraints.lower_cholesky, lambda c: LowerCholeskyTransform())
transform_to.register(constraints.positive_definite, lambda c: PositiveDefiniteTransform())
transform_to.register(constraints.positive_semidefinite, lambda c: PositiveDefiniteTransform())
