"""Adam and AdamW (decoupled weight decay), with AMSGrad and maximize.

The update is PyTorch's single-tensor, non-capturable ``torch.optim.Adam`` step::

    t = t + 1
    g = -grad if maximize else grad
    p = p * (1 - lr * weight_decay)                (AdamW: decoupled weight decay)
    g = g + weight_decay * p                       (Adam: L2 penalty in the gradient)
    m = lerp(m, g, 1 - beta1)
    v = fma((1 - beta2) * g, g, beta2 * v)          (float64: the product rounded first)
    v_max = maximum(v_max, v)                      (amsgrad; v_max replaces v below)
    p = p + (-(lr / (1 - beta1**t)) * m) / (sqrt(v) / sqrt(1 - beta2**t) + eps)

``g + weight_decay * p`` is PyTorch's ``add(alpha=)`` and the lerp its ``lerp_`` kernel, each one
fused multiply-add rounded once (optim/_common.py `add_scaled`, ops/pointwise_composite.py
`lerp_fused`), the second moment its ``addcmul_`` kernel's fused multiply-add
(optim/_common.py `addcmul_fused_`); the last line is its ``addcdiv_(m, denom,
value=-step_size)``, ``p + (value * m) / denom`` in that order. PyTorch's single-tensor step
(its default on CPU tensors) and its multi-tensor one round alike. PyTorch's float32 ``sqrt``
is MKL's vector sqrt, not correctly rounded (one unit in the last place from IEEE's on about
one value in five), which no portable kernel reproduces: with a correctly rounded sqrt in
PyTorch's step, ember's equals it bit for bit, and with its own the two agree to a few units
in the last place (tests/test_sem59_optim_rounding.py, tests/optim/test_sem60_adam_order.py).
A recorded step (its hyper-parameters graph values) rounds their products first
(`add_scaled`). The bias corrections are computed in Python floats (double precision) from the
step count, as PyTorch does. ``lr``, ``betas``, ``eps`` and ``weight_decay`` are runtime values
of a recorded step (optim/optimizer.py `Optimizer._hyper`). State per parameter: ``'step'``
(float32 0-d tensor), ``'exp_avg'``, ``'exp_avg_sq'`` and, with amsgrad, ``'max_exp_avg_sq'``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ops import api as E
from ..tensor import Tensor
from ._common import add_scaled, addcmul_fused_, check_flags
from ._multi_tensor import adam_step
from .optimizer import (
    Optimizer,
    OptimizerError,
    as_operand,
    check_number,
    lerp_,
    new_step_counter,
)

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """``Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
    maximize=False, decoupled_weight_decay=False)``, as ``torch.optim.Adam``."""

    sparse_grad_error = "Adam does not support sparse gradients, please consider SparseAdam instead"

    runtime_hyperparameters = ("lr", "betas", "eps", "weight_decay")

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "betas": tuple(betas) if isinstance(betas, (list, tuple)) else betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            "maximize": maximize,
            "decoupled_weight_decay": decoupled_weight_decay,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict[str, Any]) -> None:
        check_flags(type(self).__name__, group)
        op = type(self).__name__
        check_number(op, "lr", group["lr"], tensor_ok=True)
        if isinstance(group["lr"], Tensor) and group["foreach"] and not group["capturable"]:
            # PyTorch's rule (its multi-tensor kernels take lr as a number unless capturable)
            raise OptimizerError(
                "lr as a Tensor is not supported for capturable=False and foreach=True", op=op
            )
        check_number(op, "eps", group["eps"])
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise OptimizerError(f"betas must be a pair (beta1, beta2), got {betas!r}", op=op)
        tensors = [isinstance(b, Tensor) for b in betas]
        if any(tensors):  # PyTorch's Tensor betas: both or neither, as its rules
            if not all(tensors):
                raise OptimizerError("betas must be either both floats or both Tensors", op=op)
            for i, b in enumerate(betas):
                if group["foreach"] and not group["capturable"]:
                    raise OptimizerError(
                        f"betas[{i}] as a Tensor is not supported for capturable=False and "
                        "foreach=True",
                        op=op,
                    )
                check_number(op, f"betas[{i}]", b, high=1.0, tensor_ok=True)
            # (one-element tensors kept as 0-d ones, as PyTorch's _to_scalar; the step reads
            # their values through _hyper)
            group["betas"] = tuple(b.reshape(()) if b.ndim else b for b in betas)
        else:
            check_number(op, "betas[0]", betas[0], high=1.0)
            check_number(op, "betas[1]", betas[1], high=1.0)
        check_number(op, "weight_decay", group["weight_decay"])

    def _branch_facts(self, group: dict[str, Any]) -> tuple:
        # (lerp's form: the first moment's weight 1 - beta1 below 0.5 or not)
        beta1 = group["betas"][0]
        beta1 = float(beta1.item()) if isinstance(beta1, Tensor) else beta1
        return (group["weight_decay"] != 0, abs(1 - beta1) < 0.5)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        decayed, near_start = self._branch_facts(group)
        lr = self._hyper(group, "lr")
        beta1, beta2 = self._hyper(group, "betas", 0), self._hyper(group, "betas", 1)
        eps = self._hyper(group, "eps")
        weight_decay = self._hyper(group, "weight_decay") if decayed else None
        amsgrad, maximize = group["amsgrad"], group["maximize"]
        decoupled = group["decoupled_weight_decay"]
        values = {"lr": lr, "beta1": beta1, "beta2": beta2, "eps": eps}
        values["weight_decay"] = weight_decay
        if adam_step(self, group, params, (decayed, near_start), values):
            return  # one C call for the group (optim/_multi_tensor.py); else the ops below
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = new_step_counter()
                state["exp_avg"] = E.zeros_like(p)
                state["exp_avg_sq"] = E.zeros_like(p)
            if amsgrad and "max_exp_avg_sq" not in state:  # amsgrad may be switched on later
                state["max_exp_avg_sq"] = E.zeros_like(p)
            step = self._step_counter(state)
            g = -p.grad if maximize else p.grad
            if decayed:
                if decoupled:
                    p.mul_(as_operand(1 - lr * weight_decay, p))
                else:
                    g = add_scaled(g, p, weight_decay)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            lerp_(exp_avg, g, 1 - beta1, near_start)
            exp_avg_sq.mul_(as_operand(beta2, p))
            addcmul_fused_(exp_avg_sq, g * as_operand(1 - beta2, p), g)

            bias_correction1 = 1 - beta1**step
            bias_correction2_sqrt = (1 - beta2**step) ** 0.5
            neg_step_size = as_operand(-(lr / bias_correction1), p)
            bias_correction2_sqrt = as_operand(bias_correction2_sqrt, p)
            if amsgrad:
                second = state["max_exp_avg_sq"]
                second.maximum_(exp_avg_sq)
            else:
                second = exp_avg_sq
            denom = second.sqrt() / bias_correction2_sqrt + as_operand(eps, p)
            # (PyTorch's addcdiv_(m, denom, value=-step_size): p + (-step_size * m) / denom)
            p.add_(neg_step_size * exp_avg / denom)


class AdamW(Adam):
    """``AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
    amsgrad=False, *, maximize=False, foreach=None, capturable=False, differentiable=False,
    fused=None)``: Adam with decoupled weight decay, as ``torch.optim.AdamW`` (the
    implementation switches as in optim/_common.py)."""

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        for group in self.param_groups:  # AdamW always decouples, whatever the dict says
            group["decoupled_weight_decay"] = True
