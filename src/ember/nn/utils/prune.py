"""``ember.nn.utils.prune``: PyTorch's pruning utilities, with its names and its bookkeeping.

Pruning ``module.<name>`` moves the parameter to ``<name>_orig``, keeps a mask in the buffer
``<name>_mask`` and recomputes ``module.<name> = <name>_orig * <name>_mask`` in a forward
pre-hook before every call (so gradients reach the kept entries of ``<name>_orig`` only, and a
captured step reads the product as any plain tensor attribute). Pruning the same tensor again
combines the masks in a `PruningContainer`: the new method sees only the entries (or, for
structured methods, the channels) still kept. `remove` makes the pruning permanent.

Masks are computed as PyTorch's: unstructured methods drop the ``amount`` entries of least
importance (``torch.topk(..., largest=False)`` over the flattened scores), structured ones keep
the channels of largest L-n norm along ``dim``; ``amount`` is a count (int) or a fraction
(float, rounded). Random methods draw from ember's generator, whose stream is PyTorch's
(random_unstructured's mask after the same seed is PyTorch's).
"""

from __future__ import annotations

from ...autograd import no_grad
from ...errors import ArgumentError, ArgumentTypeError, ShapeError
from ...ops import api as E
from ..module import Module
from ._prune_base import (
    BasePruningMethod,
    PruningContainer,
    _channel_mask,
    _channel_norms,
    _nparams_to_prune,
    _validate_amount,
)

__all__ = [
    "BasePruningMethod",
    "CustomFromMask",
    "Identity",
    "L1Unstructured",
    "LnStructured",
    "PruningContainer",
    "RandomStructured",
    "RandomUnstructured",
    "custom_from_mask",
    "global_unstructured",
    "identity",
    "is_pruned",
    "l1_unstructured",
    "ln_structured",
    "random_structured",
    "random_unstructured",
    "remove",
]


class Identity(BasePruningMethod):
    """Keep everything (a mask of ones)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class RandomUnstructured(BasePruningMethod):
    """Drop ``amount`` entries chosen at random."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        n = t.numel()
        k = _nparams_to_prune(self.amount, n)
        mask = default_mask.clone()
        if k != 0:
            drop = E.topk(E.rand(n), k).indices
            mask.view(-1)[drop] = 0
        return mask

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Drop the ``amount`` entries of smallest absolute value."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        n = t.numel()
        k = _nparams_to_prune(self.amount, n)
        mask = default_mask.clone()
        if k != 0:
            drop = E.topk(E.abs(t).reshape(-1), k, largest=False).indices
            mask.view(-1)[drop] = 0
        return mask

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Drop ``amount`` channels along ``dim`` chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim: int = -1):
        _validate_amount(amount)
        self.amount, self.dim = amount, dim

    def compute_mask(self, t, default_mask):
        if t.ndim <= 1:
            raise ArgumentError(
                "Structured pruning can only be applied to multidimensional tensors. Found "
                f"tensor of shape {tuple(t.shape)} with {t.ndim} dims"
            )
        size = t.shape[self.dim]
        k = _nparams_to_prune(self.amount, size)
        if k == 0:
            return default_mask
        keep = E.topk(E.rand(size), size - k).indices
        return _channel_mask(t, self.dim, keep) * default_mask.to(dtype=t.dtype)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Drop the ``amount`` channels along ``dim`` of smallest L-``n`` norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim: int = -1):
        _validate_amount(amount)
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask(self, t, default_mask):
        if t.ndim <= 1:
            raise ArgumentError(
                "Structured pruning can only be applied to multidimensional tensors. Found "
                f"tensor of shape {tuple(t.shape)} with {t.ndim} dims"
            )
        size = t.shape[self.dim]
        k = _nparams_to_prune(self.amount, size)
        if k == 0:
            return default_mask
        keep = E.topk(_channel_norms(t, self.n, self.dim), size - k, largest=True).indices
        return _channel_mask(t, self.dim, keep) * default_mask.to(dtype=t.dtype)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(
            module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores
        )


class CustomFromMask(BasePruningMethod):
    """A given mask."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise ShapeError(
                f"the mask's shape {tuple(self.mask.shape)} differs from the tensor's "
                f"{tuple(default_mask.shape)}",
                op="prune.custom_from_mask",
            )
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module: Module, name: str) -> Module:
    Identity.apply(module, name)
    return module


def random_unstructured(module: Module, name: str, amount) -> Module:
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: Module, name: str, amount, importance_scores=None) -> Module:
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: Module, name: str, amount, dim: int) -> Module:
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module: Module, name: str, amount, n, dim, importance_scores=None) -> Module:
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module: Module, name: str, mask) -> Module:
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs) -> None:
    """Prune the (module, name) pairs of ``parameters`` together: ``pruning_method`` (an
    unstructured method class) ranks all their entries at once."""
    parameters = list(parameters)
    importance_scores = importance_scores or {}
    if not isinstance(importance_scores, dict):
        raise ArgumentTypeError("global_unstructured: importance_scores must be of type dict")
    with no_grad():
        scores = E.cat(
            [importance_scores.get((m, n), getattr(m, n)).reshape(-1) for m, n in parameters]
        )
        default = E.cat(
            [getattr(m, n + "_mask", E.ones_like(getattr(m, n))).reshape(-1) for m, n in parameters]
        ).to(dtype=scores.dtype)
        container = PruningContainer()
        container._tensor_name = "temp"
        method = pruning_method(**kwargs)
        method._tensor_name = "temp"
        if method.PRUNING_TYPE != "unstructured":
            raise ArgumentTypeError(
                'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found '
                f"method {pruning_method} of type {method.PRUNING_TYPE}"
            )
        container.add_pruning_method(method)
        final = container.compute_mask(scores, default)
    start = 0
    for m, n in parameters:
        p = getattr(m, n)
        custom_from_mask(m, n, mask=final[start : start + p.numel()].view_as(p))
        start += p.numel()


def remove(module: Module, name: str) -> Module:
    """Make the pruning of ``module.<name>`` permanent and drop its hook."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ArgumentError(
        f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed"
    )


def is_pruned(module: Module) -> bool:
    """Whether any submodule of ``module`` has a pruning hook."""
    return any(
        isinstance(hook, BasePruningMethod)
        for m in module.modules()
        for hook in m._forward_pre_hooks.values()
    )
