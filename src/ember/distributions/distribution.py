"""The `Distribution` base class (``torch.distributions.Distribution``): shapes, sampling,
validation. Subclasses write ``log_prob``, ``entropy``, ``rsample`` and the moments in ember ops,
so they carry gradients eagerly and record under ``ember.function`` capture.

Validation (on by default, as in PyTorch; ``validate_args=False`` or
`Distribution.set_default_validate_args` turns it off) raises `ConstraintError` (an ember
error and a ``ValueError``, as PyTorch raises) naming the distribution and the argument. It reads
values, so it is skipped for symbolic tensors under capture.
"""

from __future__ import annotations

from ..errors import ArgumentError, ShapeError
from ..grad_mode import no_grad
from ..size import Size
from ._util import ConstraintError, is_eager, is_tensor

__all__ = ["Distribution"]


def _shape(shape) -> tuple:
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(s) for s in shape)


class Distribution:
    has_rsample = False
    has_enumerate_support = False
    _validate_args = True
    arg_constraints: dict = {}
    support = None

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        if value not in (True, False):
            raise ArgumentError("set_default_validate_args: expected True or False")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = _shape(batch_shape)
        self._event_shape = _shape(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if param not in self.__dict__:
                    continue  # derived lazily from the parameter given (probs from logits)
                value = self.__dict__[param]
                if value is None or not is_eager(value) or not hasattr(value, "shape"):
                    continue
                if not bool(constraint.check(value).all()):
                    raise ConstraintError(
                        f"expected parameter {param} of {type(self).__name__} of shape "
                        f"{tuple(value.shape)} to satisfy the constraint {constraint!r}, "
                        "but some values do not",
                        op=type(self).__name__,
                    )

    @property
    def batch_shape(self) -> Size:
        return Size(self._batch_shape)

    @property
    def event_shape(self) -> Size:
        return Size(self._event_shape)

    def expand(self, batch_shape, _instance=None):
        raise NotImplementedError(f"{type(self).__name__} does not implement expand")

    # the subclasses' vocabulary
    @property
    def mean(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """A sample without gradients (``rsample`` under ``no_grad`` where one exists)."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(
            f"{type(self).__name__} has no reparameterized sampler (rsample); use sample(), "
            "which carries no gradient"
        )

    def sample_n(self, n: int):
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob")

    def cdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def enumerate_support(self, expand: bool = True):
        raise NotImplementedError(f"{type(self).__name__} does not implement enumerate_support")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self):
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=()) -> tuple:
        return _shape(sample_shape) + self._batch_shape + self._event_shape

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"subclass {type(self).__name__} of {cls.__name__} that defines a custom "
                "__init__ must also define a custom expand"
            )
        return self.__new__(type(self)) if _instance is None else _instance

    def _validate_sample(self, value) -> None:
        """Raise unless ``value``'s shape broadcasts with the batch and event shapes and its
        values lie in the support."""
        name = type(self).__name__
        if not is_tensor(value):
            raise ConstraintError(
                f"{name}.log_prob: the value must be a tensor, got {type(value).__name__}",
                op=f"{name}.log_prob",
            )
        shape = tuple(value.shape)
        event = self._event_shape
        if len(shape) < len(event) or shape[len(shape) - len(event) :] != event:
            raise ShapeError(
                f"{name}.log_prob: the value's shape {shape} does not end in the event shape "
                f"{event}",
                op=f"{name}.log_prob",
            )
        actual = shape[: len(shape) - len(event)]
        expected = self._batch_shape
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ShapeError(
                    f"{name}.log_prob: the value's shape {shape} does not broadcast with the "
                    f"batch shape {expected} (event shape {event})",
                    op=f"{name}.log_prob",
                )
        support = self.support
        if support is None or not is_eager(value):
            return
        if not bool(support.check(value).all()):
            raise ConstraintError(
                f"{name}.log_prob: the value (shape {shape}) is outside the support "
                f"{support!r} of the distribution",
                op=f"{name}.log_prob",
            )

    def __repr__(self) -> str:
        params = []
        for name in self.arg_constraints:
            if name in self.__dict__ and self.__dict__[name] is not None:
                value = self.__dict__[name]
                shown = value if value.numel() == 1 else value.size()  # (PyTorch's form)
                params.append(f"{name}: {shown}")
        return f"{type(self).__name__}({', '.join(params)})"
