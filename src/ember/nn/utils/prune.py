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
(float, rounded). Random methods draw from ember's generator (not PyTorch's stream).
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod

from ...autograd import no_grad
from ...errors import ShapeError
from ...ops import api as E
from ..module import Module

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


def _validate_amount(amount) -> None:
    if not isinstance(amount, numbers.Real) or isinstance(amount, bool):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
        not isinstance(amount, numbers.Integral) and (float(amount) > 1.0 or float(amount) < 0.0)
    ):
        raise ValueError(
            f"amount={amount} should either be a float in the range [0, 1] or a non-negative "
            "integer"
        )


def _nparams_to_prune(amount, size: int) -> int:
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise ValueError(
                f"amount={amount} should be smaller than the number of parameters to prune={size}"
            )
        return int(amount)
    return round(amount * size)


def _channel_norms(t, n, dim: int):
    dims = [d for d in range(t.ndim) if d != (dim % t.ndim)]
    return E.norm(t, p=n, dim=dims)


def _channel_mask(t, dim: int, indices):
    """Ones on the channels ``indices`` along ``dim``, zeros elsewhere."""
    mask = E.zeros_like(t)
    index = [slice(None)] * t.ndim
    index[dim] = indices
    mask[tuple(index)] = 1
    return mask


class BasePruningMethod(ABC):
    """A way of computing a mask; `apply` prunes a module's tensor with it."""

    PRUNING_TYPE = "unstructured"
    _tensor_name: str

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The new mask for importance scores ``t``, on top of ``default_mask``."""

    def apply_mask(self, module: Module):
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return orig * mask.to(dtype=orig.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` with a new ``cls(*args, **kwargs)`` (combined with any
        pruning of it already there). Returns the method (or the container) now in use."""
        old, old_key = None, None
        for key, hook in module._forward_pre_hooks.items():
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
                if old is not None:
                    raise RuntimeError(f"more than one pruning hook on the tensor {name}")
                old, old_key = hook, key
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old is not None:  # (a new container: nothing changes unless the mask is made)
            methods = tuple(old) if isinstance(old, PruningContainer) else (old,)
            method = PruningContainer(*methods, method)
        orig = getattr(module, name)
        if importance_scores is not None and tuple(importance_scores.shape) != tuple(orig.shape):
            raise ShapeError(
                f"importance_scores of shape {tuple(importance_scores.shape)} should have the "
                f"shape of parameter {name}, {tuple(orig.shape)}",
                op="prune",
            )
        scores = importance_scores if importance_scores is not None else orig
        if old is None:
            default_mask = E.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        with no_grad():  # (first: a method that refuses the tensor leaves the module as it was)
            mask = method.compute_mask(scores.detach(), default_mask=default_mask)
        if old is None:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
        else:
            del module._forward_pre_hooks[old_key]
        module.register_buffer(name + "_mask", mask)
        setattr(module, name, method.apply_mask(module))
        module.register_forward_pre_hook(method)
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` times its mask (computed from ``importance_scores``, else from ``t``)."""
        scores = importance_scores if importance_scores is not None else t
        mask = default_mask if default_mask is not None else E.ones_like(t)
        with no_grad():
            mask = self.compute_mask(scores.detach(), default_mask=mask)
        return t * mask

    def remove(self, module: Module) -> None:
        """Make the pruning of ``module.<name>`` permanent: a plain parameter again."""
        name = self._tensor_name
        with no_grad():
            weight = self.apply_mask(module)
        module.__dict__.pop(name, None)
        orig = module._parameters[name + "_orig"]
        orig.data = weight.detach()
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


class PruningContainer(BasePruningMethod):
    """Successive pruning methods of one tensor: each new one prunes what the others kept."""

    def __init__(self, *args):
        self._pruning_methods: tuple = ()
        if len(args) == 1 and not isinstance(args[0], BasePruningMethod):
            args = tuple(args[0])
        for method in args:
            self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod) -> None:
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and getattr(self, "_tensor_name", method._tensor_name) != (
            method._tensor_name
        ):
            raise ValueError(
                f"Can only add pruning methods acting on the parameter named "
                f"'{self._tensor_name}' to PruningContainer. Found '{method._tensor_name}'"
            )
        self._tensor_name = method._tensor_name
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, i):
        return self._pruning_methods[i]

    def compute_mask(self, t, default_mask):
        method = self._pruning_methods[-1]
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            kept = default_mask == 1
            partial = method.compute_mask(t[kept], default_mask=default_mask[kept])
            new_mask = default_mask.clone()
            new_mask[kept] = partial.to(dtype=new_mask.dtype)
            return new_mask
        if kind == "structured":
            dim = method.dim % t.ndim
            others = [d for d in range(t.ndim) if d != dim]
            # the channels not yet pruned entirely
            alive = E.nonzero(default_mask.sum(dim=others) != 0).view(-1)
            index = [slice(None)] * t.ndim
            index[dim] = alive
            partial = method.compute_mask(t[tuple(index)], default_mask=default_mask[tuple(index)])
            new_mask = default_mask.clone()
            new_mask[tuple(index)] = partial.to(dtype=new_mask.dtype)
            return new_mask
        if kind == "global":
            return method.compute_mask(t, default_mask=default_mask)
        raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")


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
            raise ValueError(
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
            raise ValueError(
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
        raise TypeError("global_unstructured: importance_scores must be of type dict")
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
            raise TypeError(
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
    raise ValueError(
        f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed"
    )


def is_pruned(module: Module) -> bool:
    """Whether any submodule of ``module`` has a pruning hook."""
    return any(
        isinstance(hook, BasePruningMethod)
        for m in module.modules()
        for hook in m._forward_pre_hooks.values()
    )
