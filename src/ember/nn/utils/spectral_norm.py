"""``ember.nn.utils.spectral_norm`` / ``remove_spectral_norm``: PyTorch's older spectral
normalization (a forward pre-hook; ``parametrizations.spectral_norm`` is the newer form).
The parameter ``<name>_orig`` replaces ``<name>``, buffers ``<name>_u`` / ``<name>_v`` hold the
singular-vector estimates, and before every call ``<name> = <name>_orig / sigma`` with
``sigma = u . (W v)``, ``W`` the weight seen as a matrix (``dim`` first). In training mode each
call first runs ``n_power_iterations`` steps (``v`` then ``u``, PyTorch's order, which differs
from the parametrization's) writing the buffers in place. Kept because GAN code and its
state_dicts (``weight_orig`` / ``weight_u`` / ``weight_v`` keys) use it widely.
"""

from __future__ import annotations

from ...autograd import no_grad
from ...errors import ArgumentError
from ...ops import api as E
from .. import functional as F
from ..conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..module import Module
from ..parameter import Parameter
from .parametrizations import weight_matrix


class _SpectralNormHook:
    def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float) -> None:
        if n_power_iterations <= 0:
            raise ArgumentError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.name = name
        self.n_power_iterations = n_power_iterations
        self.dim = dim
        self.eps = eps

    def compute_weight(self, module: Module, do_power_iteration: bool):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        matrix = weight_matrix(weight, self.dim)
        if do_power_iteration:
            with no_grad():
                frozen = matrix.detach()
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(E.mv(frozen.T, u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(E.mv(frozen, v), dim=0, eps=self.eps))
            # the buffers change at the next call; the gradient must see these values
            u, v = u.clone(), v.clone()
        sigma = (u * E.mv(matrix, v)).sum()
        return weight / sigma

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Replace ``module.<name>`` by ``<name>_orig`` divided by its largest singular value,
    estimated by power iteration before each forward. ``dim`` defaults to 1 for transposed
    convolutions, 0 otherwise. Returns ``module``."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _SpectralNormHook) and hook.name == name:
            raise RuntimeError(
                f"Cannot register two spectral_norm hooks on the same parameter {name}"
            )
    weight = module._parameters.get(name)
    if not isinstance(weight, Parameter):
        raise ArgumentError(f"Module '{type(module).__name__}' has no parameter '{name}'")
    if dim is None:
        transposed = (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)
        dim = 1 if isinstance(module, transposed) else 0
    if dim >= weight.ndim or dim < -weight.ndim:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [-{weight.ndim}, "
            f"{weight.ndim - 1}] but got {dim})"
        )
    hook = _SpectralNormHook(name, n_power_iterations, dim % weight.ndim, eps)
    with no_grad():
        h, w = weight_matrix(weight, hook.dim).shape
        # random starting vectors, as PyTorch's; load a state_dict to reproduce another run
        u = F.normalize(E.randn(h, dtype=weight.dtype), dim=0, eps=eps)
        v = F.normalize(E.randn(w, dtype=weight.dtype), dim=0, eps=eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(hook)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo `spectral_norm`: ``module.<name>`` becomes a plain parameter holding the normalized
    weight (without a further power iteration)."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _SpectralNormHook) and hook.name == name:
            with no_grad():
                weight = hook.compute_weight(module, do_power_iteration=False)
            module.__dict__.pop(name, None)
            del module._parameters[name + "_orig"]
            del module._buffers[name + "_u"]
            del module._buffers[name + "_v"]
            setattr(module, name, Parameter(weight.detach()))
            del module._forward_pre_hooks[key]
            return module
    raise ArgumentError(f"spectral_norm of '{name}' not found in {module}")


__all__ = ["remove_spectral_norm", "spectral_norm"]
