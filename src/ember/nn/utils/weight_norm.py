"""``ember.nn.utils.weight_norm`` / ``remove_weight_norm``: PyTorch's older weight normalization
(deprecated there in favour of ``parametrizations.weight_norm``): parameters ``<name>_g`` and
``<name>_v`` replace ``<name>``, and a forward pre-hook recomputes ``<name> = g * v / ||v||``
before every call. Kept because state_dicts saved with it (``weight_g`` / ``weight_v`` keys) are
common.
"""

from __future__ import annotations

import warnings

from ...errors import ArgumentError, user_stacklevel
from ..module import Module
from ..parameter import Parameter
from .parametrizations import _WeightNorm


class _WeightNormHook:
    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.norm = _WeightNorm(dim)

    def compute_weight(self, module: Module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return self.norm(g, v)

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Replace ``module.<name>`` by ``<name>_g`` (magnitude) and ``<name>_v`` (direction),
    recombined before each forward. Returns ``module``."""
    warnings.warn(
        "ember.nn.utils.weight_norm is deprecated in favor of "
        "ember.nn.utils.parametrizations.weight_norm (as in PyTorch).",
        FutureWarning,
        stacklevel=user_stacklevel(),
    )
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _WeightNormHook) and hook.name == name:
            raise RuntimeError(
                f"Cannot register two weight_norm hooks on the same parameter {name}"
            )
    hook = _WeightNormHook(name, dim)
    weight = getattr(module, name, None)
    if not isinstance(weight, Parameter):
        raise ArgumentError(f"Module '{type(module).__name__}' has no parameter '{name}'")
    g, v = hook.norm.right_inverse(weight.detach())
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(g.detach()))
    module.register_parameter(name + "_v", Parameter(v.detach()))
    setattr(module, name, hook.compute_weight(module))
    module.register_forward_pre_hook(hook)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo `weight_norm`: ``module.<name>`` becomes a plain parameter holding its current
    value."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _WeightNormHook) and hook.name == name:
            weight = hook.compute_weight(module).detach()
            module.__dict__.pop(name, None)
            del module._parameters[name + "_g"]
            del module._parameters[name + "_v"]
            setattr(module, name, Parameter(weight))
            del module._forward_pre_hooks[key]
            return module
    raise ArgumentError(f"weight_norm of '{name}' not found in {module}")


__all__ = ["remove_weight_norm", "weight_norm"]
