"""Pieces the optimizers share (the implementation switches: all; the rest: Adadelta, Adamax,
NAdam, RAdam, Rprop and ASGD).

* PyTorch's implementation switches (``foreach``, ``capturable``, ``differentiable``,
  ``fused``; every optimizer takes those PyTorch's takes): accepted and kept in the param
  groups, so ``state_dict()`` has the keys PyTorch's has. SGD, Adam and AdamW run an eager
  step as one multi-tensor C call per group unless ``foreach=False`` (optim/_multi_tensor.py;
  the same arithmetic as their per-tensor ops, which ``foreach=False`` runs); the other
  optimizers have one implementation of each update. Every step can be recorded into a graph
  by ``ember.function`` (``capturable`` changes nothing; nor does ``fused``: ember's compiled
  steps fuse the update's loops by themselves), and a step always runs under ``no_grad``, so
  ``differentiable=True`` is refused.
* ``addcmul_`` / ``addcdiv_`` in ember ops, with PyTorch's CPU kernels' order of operations
  (``self + value * t1 * t2`` and ``self + value * t1 / t2``), so float64 updates agree to the
  last bits.
* `is_eager`, for decisions on a value the update computes from its state (RAdam's
  ``rho_t > 5``, ASGD's ``mu != 1``). Eagerly that value is a Python float and the decision a
  Python branch, as in PyTorch; while a step is recorded it is a symbolic scalar, and the
  optimizer computes both sides and joins them with ``where`` (PyTorch's ``capturable`` form),
  so the recorded graph is right at every step and not only at the one it was traced at.
"""

from __future__ import annotations

from typing import Any

from .. import dtypes as dt
from ..ops import api as E
from ..ops._registry import apply
from ..ops.add_scaled import ADD_SCALED
from ..tensor import Tensor
from .optimizer import OptimizerError, as_operand, check_number

__all__ = [
    "addcdiv_",
    "addcmul_",
    "check_betas",
    "check_flags",
    "is_eager",
    "refuse_complex",
    "to_float32",
]


def check_flags(op: str, group: dict[str, Any]) -> None:
    """Refuse implementation switches ember cannot honour (see the module docstring)."""
    foreach = group.get("foreach")
    if foreach not in (None, True, False):
        raise OptimizerError(f"foreach must be None, True or False, got {foreach!r}", op=op)
    if group.get("capturable", False) not in (True, False):
        raise OptimizerError(
            f"capturable must be True or False, got {group.get('capturable')!r}", op=op
        )
    fused = group.get("fused")
    if fused not in (None, True, False):
        raise OptimizerError(f"fused must be None, True or False, got {fused!r}", op=op)
    if group.get("differentiable", False):
        raise OptimizerError(
            "differentiable=True is not supported: ember runs every optimizer step under "
            "no_grad, so a step cannot be differentiated through",
            op=op,
        )


def refuse_complex(op: str, param_group):
    """``param_group`` (its params read once, if an iterator) after checking it holds no complex
    parameter: for the optimizers PyTorch writes for real parameters only (Adafactor,
    SparseAdam), which the base class would otherwise update as real pairs."""
    if not isinstance(param_group, dict):
        return param_group  # (add_param_group reports it)
    params = param_group.get("params")
    if params is not None and not isinstance(params, (Tensor, list, tuple)):
        params = list(params)
        param_group = {**param_group, "params": params}
    for i, p in enumerate([params] if isinstance(params, Tensor) else params or []):
        if isinstance(p, Tensor) and p.dtype.is_complex:
            raise OptimizerError(
                f"Complex params at index {i}: {op} does not support complex parameters", op=op
            )
    return param_group


def check_betas(op: str, group: dict[str, Any]) -> None:
    """Raise `OptimizerError` unless ``betas`` is a pair of numbers in [0, 1)."""
    betas = group["betas"]
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise OptimizerError(f"betas must be a pair (beta1, beta2), got {betas!r}", op=op)
    check_number(op, "betas[0]", betas[0], high=1.0)
    check_number(op, "betas[1]", betas[1], high=1.0)


def add_scaled(target: Tensor, other: Tensor, alpha, *, inplace: bool = False) -> Tensor:
    """``target + alpha * other`` as PyTorch's ``add(other, alpha=alpha)``: eagerly (``alpha`` a
    Python float, floating tensors) one fused multiply-add rounded once (ops/add_alpha.py), as
    ATen's CPU kernel computes it; a symbolic ``alpha`` (a recorded step) too, by the op
    taking it as an operand (ops/add_scaled.py)."""
    if isinstance(alpha, float) and target.dtype.is_floating_point:
        return target.add_(other, alpha=alpha) if inplace else target.add(other, alpha=alpha)
    if target.dtype in (dt.float32, dt.float64) and other.dtype is target.dtype:
        # (a recorded step's alpha, a graph value: the same single rounding, ops/add_scaled.py)
        fused = apply(ADD_SCALED, target, other, as_operand(alpha, target))
        return target.copy_(fused) if inplace else fused
    scaled = other * as_operand(alpha, target)
    return target.add_(scaled) if inplace else target + scaled


def addcmul_(target: Tensor, t1: Tensor, t2: Tensor, value) -> Tensor:
    """``target += value * t1 * t2`` in place (``Tensor.addcmul_(t1, t2, value=value)``)."""
    return target.add_(t1 * as_operand(value, target) * t2)


def addcmul_fused_(target: Tensor, scaled: Tensor, t2: Tensor) -> Tensor:
    """``target = fma(scaled, t2, target)`` in place: PyTorch's CPU ``addcmul_(t1, t2,
    value=v)`` with ``scaled = v * t1`` (its kernel's fused multiply-add, rounded once).
    float32 is summed in float64, where the product is exact; rounding the float64 sum to
    float32 differs from the fused single rounding only where that sum was itself rounded onto
    a float32 tie (about one value in 2**29); float64 (and 16-bit floats) round the product
    first."""
    if target.dtype is not dt.float32:
        return target.add_(scaled * t2)
    wide = E.cast(scaled, dt.float64) * E.cast(t2, dt.float64) + E.cast(target, dt.float64)
    return target.copy_(E.cast(wide, dt.float32))


def addcdiv_(target: Tensor, t1: Tensor, t2: Tensor, value) -> Tensor:
    """``target += value * t1 / t2`` in place (``Tensor.addcdiv_(t1, t2, value=value)``)."""
    return target.add_(t1 * as_operand(value, target) / t2)


def is_eager(scalar) -> bool:
    """Whether a hyper-parameter or state-derived scalar is a plain Python number (an eager
    step) rather than a symbolic scalar (a step being recorded)."""
    return isinstance(scalar, (int, float))


def to_float32(scalar):
    """A scalar rounded to float32, as ``torch.as_tensor(python_float)`` makes it: a float32
    0-d tensor, eager or symbolic."""
    if is_eager(scalar):
        return Tensor(float(scalar), dtype=dt.float32)
    return scalar.to(dt.float32)
