"""The base of ``ember.nn.utils.prune`` (nn/utils/prune.py): `BasePruningMethod` (how a
module's tensor is pruned: ``<name>_orig``, ``<name>_mask`` and the forward pre-hook, computed
before anything changes) and `PruningContainer` (repeated pruning of one tensor), with the
amount and mask helpers the methods share.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod

from ...autograd import no_grad
from ...errors import ArgumentError, ArgumentTypeError, ShapeError
from ...ops import api as E
from ..module import Module


def _validate_amount(amount) -> None:
    if not isinstance(amount, numbers.Real) or isinstance(amount, bool):
        raise ArgumentTypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
        not isinstance(amount, numbers.Integral) and (float(amount) > 1.0 or float(amount) < 0.0)
    ):
        raise ArgumentError(
            f"amount={amount} should either be a float in the range [0, 1] or a non-negative "
            "integer"
        )


def _nparams_to_prune(amount, size: int) -> int:
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise ArgumentError(
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
            raise ArgumentTypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and getattr(self, "_tensor_name", method._tensor_name) != (
            method._tensor_name
        ):
            raise ArgumentError(
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
        raise ArgumentError(f"Unrecognized PRUNING_TYPE {kind}")
