"""The long tail of PyTorch's loss classes over ``ember.nn.functional``'s losses:
SoftMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, MultiLabelMarginLoss,
PoissonNLLLoss, GaussianNLLLoss and HingeEmbeddingLoss (constructor arguments, attributes and
the ``weight`` buffer as in PyTorch)."""

from __future__ import annotations

import math
import warnings

from ..errors import ArgumentError, user_stacklevel
from ..tensor import Tensor
from . import functional as F
from .distance import PairwiseDistance
from .linear import Linear
from .loss import NLLLoss, _Loss, _WeightedLoss


class SoftMarginLoss(_Loss):
    """Two-class logistic loss ``log(1 + exp(-y x))`` for targets in {1, -1}."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Multi-label one-versus-all logistic loss, averaged over classes."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_soft_margin_loss(
            input, target, weight=self.weight, reduction=self.reduction
        )


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss (``p`` = 1 or 2) with an optional per-class ``weight``."""

    def __init__(
        self,
        p: int = 1,
        margin: float = 1.0,
        weight: Tensor | None = None,
        size_average=None,
        reduce=None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ArgumentError("only p == 1 and p == 2 supported")
        if weight is not None and weight.ndim != 1:
            raise ArgumentError(
                f"MultiMarginLoss: expected weight to be None or 1D tensor, got {weight.ndim}D "
                "instead"
            )
        self.p = p
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multi_margin_loss(
            input,
            target,
            p=self.p,
            margin=self.margin,
            weight=self.weight,
            reduction=self.reduction,
        )


class MultiLabelMarginLoss(_Loss):
    """Multi-class multi-label hinge loss; each target row ends at its first -1."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """Poisson negative log-likelihood (``log_input``, ``full`` Stirling term, ``eps``)."""

    def __init__(
        self,
        log_input: bool = True,
        full: bool = False,
        size_average=None,
        eps: float = 1e-8,
        reduce=None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return F.poisson_nll_loss(
            log_input,
            target,
            log_input=self.log_input,
            full=self.full,
            eps=self.eps,
            reduction=self.reduction,
        )


class GaussianNLLLoss(_Loss):
    """Gaussian negative log-likelihood; ``forward(input, target, var)``."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        self.full = full
        self.eps = eps

    def forward(self, input: Tensor, target: Tensor, var) -> Tensor:
        return F.gaussian_nll_loss(
            input, target, var, full=self.full, eps=self.eps, reduction=self.reduction
        )


class HingeEmbeddingLoss(_Loss):
    """``x`` for ``y = 1``, ``max(0, margin - x)`` for ``y = -1``."""

    def __init__(
        self, margin: float = 1.0, size_average=None, reduce=None, reduction: str = "mean"
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """PyTorch's deprecated alias of NLLLoss (which takes (N, C, H, W) inputs itself); it warns
    as PyTorch's does."""

    def __init__(self, *args, **kwargs) -> None:
        warnings.warn(
            "`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in "
            "replacement",
            FutureWarning,
            stacklevel=user_stacklevel(),
        )
        super().__init__(*args, **kwargs)


class TripletMarginWithDistanceLoss(_Loss):
    """The triplet margin loss over ``distance_function`` (a PairwiseDistance by default,
    registered as a submodule when it is a Module, as in PyTorch)."""

    def __init__(
        self,
        *,
        distance_function=None,
        margin: float = 1.0,
        swap: bool = False,
        reduction: str = "mean",
    ) -> None:
        super().__init__(None, None, reduction)
        if margin <= 0:
            raise ArgumentError(
                f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got "
                f"{margin} instead"
            )
        self.distance_function = (
            distance_function if distance_function is not None else PairwiseDistance()
        )
        self.margin = margin
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_with_distance_loss(
            anchor,
            positive,
            negative,
            distance_function=self.distance_function,
            margin=self.margin,
            swap=self.swap,
            reduction=self.reduction,
        )


class LinearCrossEntropyLoss(_WeightedLoss):
    """A `Linear` layer (``self.linear``, weight (C * prod(out_features), in_features)) and the
    cross entropy of its logits, as PyTorch's ``nn.LinearCrossEntropyLoss``: the weight is
    reshaped to (C, *out_features, in_features) for ``F.linear_cross_entropy``."""

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        *,
        out_features: tuple = (),
        bias: bool = False,
        device=None,
        dtype=None,
        reduction: str = "mean",
        weight: Tensor | None = None,
        ignore_index: int | None = None,
        label_smoothing: float = 0.0,
        options=None,
    ) -> None:
        from ..errors import EmberError, ShapeError

        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise ShapeError(
                f"expected weight shape {(num_classes,)}, got {tuple(weight.shape)}",
                op="LinearCrossEntropyLoss",
            )
        if not 0.0 <= label_smoothing <= 1.0:
            raise EmberError(
                f"expected label_smoothing in [0, 1], got {label_smoothing}",
                op="LinearCrossEntropyLoss",
            )
        super().__init__(weight, None, None, reduction)
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        rows = math.prod(self.out_features) * num_classes
        self.linear = Linear(in_features, rows, bias=bias, device=device, dtype=dtype)
        self.options = options

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        shape = (self.num_classes, *self.out_features)
        bias = self.linear.bias
        return F.linear_cross_entropy(
            input,
            self.linear.weight.reshape((*shape, self.linear.in_features)),
            target,
            linear_bias=None if bias is None else bias.reshape(shape),
            weight=self.weight,
            reduction=self.reduction,
            ignore_index=self.ignore_index,
            label_smoothing=self.label_smoothing,
            options=self.options,
        )

    def extra_repr(self) -> str:
        return (
            f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
            f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
            f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
            f"label_smoothing={self.label_smoothing}, options={self.options}"
        )
