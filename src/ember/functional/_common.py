"""Helpers shared by the composite modules: PyTorch's ``reduction`` argument (and its legacy
``size_average`` / ``reduce`` spelling) and its application, dimension arguments, float-input
and shape checks with clear errors, and `concrete`, which gives value checks access to eager data.
"""

from __future__ import annotations

import warnings

from ..errors import ArgumentError, ComplexDTypeError, KernelDTypeError, ShapeError, user_stacklevel
from ..grad_mode import is_grad_enabled
from ..ops import api as E
from ..ops._util import fmt_shape, normalize_axis, numel, refuse_complex
from ..ops.promotion import to_tensor

REDUCTIONS = ("mean", "sum", "none")


def reduction_arg(
    op: str, reduction: str, size_average=None, reduce=None, allowed=REDUCTIONS
) -> str:
    """The reduction mode, translating PyTorch's deprecated ``size_average``/``reduce`` flags."""
    if size_average is not None or reduce is not None:
        warnings.warn(
            f"{op}: size_average and reduce are deprecated; use reduction='mean'|'sum'|'none'",
            DeprecationWarning,
            stacklevel=user_stacklevel(),
        )
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        if not reduce:
            return "none"
        return "mean" if size_average else "sum"
    if reduction not in allowed:
        raise ArgumentError(f"{op}: reduction must be one of {allowed}, got {reduction!r}")
    return reduction


def reduce_loss(loss, reduction: str):
    """Apply ``'mean'`` / ``'sum'`` / ``'none'`` to an elementwise loss."""
    if reduction == "none":
        return loss
    if reduction == "sum":
        return E.sum(loss)
    return E.mean(loss)


def float_input(
    op: str, x, what: str = "input", *, complex_ok: bool = False, integers: bool = False
):
    """``x`` as a tensor, which must be floating point (losses and norms are float-only), or
    complex with ``complex_ok`` (the functions PyTorch computes in complex too). With
    ``integers`` an integer tensor is taken as it is: the losses PyTorch computes on integers
    (margin ranking, cosine embedding, triplet margin, Poisson NLL) compute their integer terms,
    differences and products, in the integer dtype first (values that overflow it, uint8's
    1 - 2, wrap, as in PyTorch) and their float margin or eps then promotes them."""
    x = to_tensor(x)
    if complex_ok and x.dtype.is_complex:
        return x
    if integers and x.dtype.is_integer:
        return x
    if not x.dtype.is_floating_point:
        raise KernelDTypeError(
            f"{what} must be a floating-point tensor, got {x.dtype}; convert it with .float()",
            op=op,
        )
    return x


def refuse_complex_grad(op: str, x, advice: str = "") -> None:
    """A function PyTorch computes for complex tensors but cannot differentiate there (its
    embedding, silu, soft_margin_loss): a complex ``x`` that requires grad, while gradients
    are recorded, is refused in PyTorch's words."""
    if x.dtype.is_complex and x.requires_grad and is_grad_enabled():
        raise ComplexDTypeError(
            f"{op} does not support automatic differentiation for outputs with complex dtype "
            f"(as PyTorch){advice}",
            op=op,
        )


def refuse_complex_draw(op: str, x) -> None:
    """Dropout's mask draw on a complex tensor with elements: PyTorch's Bernoulli kernel
    refuses it (so its dropout works on complex tensors only where it draws nothing)."""
    if x.dtype.is_complex and numel(x.shape):
        refuse_complex(
            op, x, reason=f"a random mask for {x.dtype} (PyTorch's bernoulli_ refuses complex)"
        )


def check_same_shape(op: str, x, other, what: str) -> None:
    if tuple(x.shape) != tuple(other.shape):
        raise ShapeError(
            f"{what} of shape {fmt_shape(other.shape)} must have the input's shape "
            f"{fmt_shape(x.shape)}",
            op=op,
        )


def broadcast_target(op: str, x, target):
    """PyTorch's regression losses broadcast input and target (warning when shapes differ)."""
    if tuple(x.shape) != tuple(target.shape):
        warnings.warn(
            f"{op}: target shape {fmt_shape(target.shape)} differs from input shape "
            f"{fmt_shape(x.shape)}; they are broadcast, which is likely not intended",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        return E.broadcast_tensors(x, target)
    return x, target


def dim_arg(op: str, dim: int, ndim: int) -> int:
    return normalize_axis(op, dim, ndim)


def concrete(t):
    """The NumPy data of an eager tensor, else None (a symbolic tensor being traced has none,
    nor has a meta tensor).

    Used to validate values (target classes, probabilities) with a clear error where eager
    data is at hand, and to skip work that the data shows is not needed (masks when no target
    is ignored); results never depend on it."""
    from ..tensor import Tensor

    return t.numpy(force=True) if isinstance(t, Tensor) and not t.is_meta else None
