"""AdaptiveLogSoftmaxWithLoss (Grave et al., efficient softmax approximation): a head over the
``cutoffs[0]`` most frequent classes plus one entry per tail cluster, and per cluster a
two-layer projection (``in_features // div_value ** (i + 1)`` wide) over its classes, with
PyTorch's parameter names, reprs, ``forward`` (returning ``(output, loss)``), ``log_prob`` and
``predict``.

Where ember differs: ``forward`` evaluates every tail cluster on every row and selects each
row's cluster with a mask, rather than gathering the rows of each cluster first (which needs
the targets' values while building the computation). Values and gradients are PyTorch's, and
the layer captures under ``ember.function``; the cost is the full tail computation, so the
speed advantage of the adaptive softmax over a full softmax is smaller than in PyTorch.
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import ArgumentError, EmberError, ShapeError
from ..functional._common import concrete
from ..ops import api as E
from ..tensor import Tensor
from . import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module


class _ASMoutput(NamedTuple):
    output: Tensor
    loss: Tensor


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax: ``forward(input, target)`` gives each row's target log-probability
    and their negated mean."""

    def __init__(
        self,
        in_features: int,
        n_classes: int,
        cutoffs,
        div_value: float = 4.0,
        head_bias: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ArgumentError("cutoffs should be a sequence of length larger than 0")
        if (
            cutoffs != sorted(cutoffs)
            or min(cutoffs) <= 0
            or max(cutoffs) > n_classes - 1
            or len(set(cutoffs)) != len(cutoffs)
            or any(int(c) != c for c in cutoffs)
        ):
            raise ArgumentError(
                "cutoffs should be a sequence of unique, positive integers sorted in an "
                "increasing order, where each value is between 1 and n_classes-1"
            )
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, head_bias, device, dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(
                Sequential(
                    Linear(in_features, hsz, False, device, dtype),
                    Linear(hsz, osz, False, device, dtype),
                )
            )

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for projection in self.tail:
            for layer in projection:
                layer.reset_parameters()

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        op = "AdaptiveLogSoftmaxWithLoss"
        batched = target_.ndim == 1
        if target_.ndim == 1:
            if input_.ndim != 2 or input_.shape[0] != target_.shape[0]:
                raise ShapeError(
                    f"expected a 2-D input with one row per target, got input "
                    f"{tuple(input_.shape)} and target {tuple(target_.shape)}",
                    op=op,
                )
            x, target = input_, target_
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise ShapeError("a 0-D target needs a 1-D input", op=op)
            x, target = E.unsqueeze(input_, 0), E.unsqueeze(target_, 0)
        else:
            raise ShapeError("0-D or 1-D target tensor expected, multi-target not supported", op=op)
        data = concrete(target)
        if data is not None and data.size and (data.min() < 0 or data.max() >= self.n_classes):
            raise EmberError(
                f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                f"[{data.min()}, {data.max()}] were found.",
                op=op,
            )
        head_logprob = F.log_softmax(self.head(x), dim=1)
        shortlist = target < self.shortlist_size
        # the head column each row reads: its class in the shortlist, else its cluster's entry
        column = E.where(shortlist, target, 0)
        output = E.zeros(tuple(target.shape), dtype=head_logprob.dtype)
        for i in range(self.n_clusters):
            low, high = self.cutoffs[i], self.cutoffs[i + 1]
            in_cluster = (target >= low) & (target < high)
            column = E.where(in_cluster, self.shortlist_size + i, column)
            cluster_logprob = F.log_softmax(self.tail[i](x), dim=1)
            relative = E.unsqueeze(E.clip(target - low, 0, high - low - 1), 1)
            local = E.squeeze(E.gather(cluster_logprob, 1, relative), 1)
            output = output + E.where(in_cluster, local, 0.0)
        output = output + E.squeeze(E.gather(head_logprob, 1, E.unsqueeze(column, 1)), 1)
        loss = E.mean(-output)
        if not batched:
            output = E.squeeze(output, 0)
        return _ASMoutput(output, loss)

    def _get_full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, : self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            head_entry = head_logprob[:, self.shortlist_size + i : self.shortlist_size + i + 1]
            parts.append(cluster_logprob + head_entry)
        return E.cat(parts, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """Log-probabilities of every class: (N, n_classes) for an (N, in_features) input."""
        batched = input.ndim == 2
        x = input if batched else E.unsqueeze(input, 0)
        out = self._get_full_log_prob(x, self.head(x))
        return out if batched else E.squeeze(out, 0)

    def predict(self, input: Tensor) -> Tensor:
        """The most likely class of each row."""
        return E.argmax(self.log_prob(input), dim=-1)
