"""``ember.nn.grad``: PyTorch's ``torch.nn.grad``, the gradients of a convolution with
respect to its input and its weight, for hand-written backward passes (a custom
``autograd.Function`` that recomputes a convolution). Each is the gradient the convolution's
own backward computes (`ember.autograd.grad` of ``conv{1,2,3}d`` at that input or weight, the
``conv_input_grad`` / ``conv_weight_grad`` ops), so it equals what autograd would give."""

from __future__ import annotations

from ..errors import ShapeError
from ..grad_mode import enable_grad
from ..ops import _registry

__all__ = [
    "conv1d_input",
    "conv1d_weight",
    "conv2d_input",
    "conv2d_weight",
    "conv3d_input",
    "conv3d_weight",
]


def _gradient(dims: int, wrt: str, size, other, grad_output, stride, padding, dilation, groups):
    from .. import autograd
    from . import functional as F

    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[dims]
    op = f"conv{dims}d_{wrt}"
    size = tuple(int(s) for s in size)
    if len(size) != dims + 2:
        raise ShapeError(
            f"the {wrt} size must have {dims + 2} dimensions, got {size}", op=f"nn.grad.{op}"
        )
    zeros = _registry.PUBLIC["zeros"]
    with enable_grad():
        free = zeros(*size, dtype=grad_output.dtype).requires_grad_()
        fixed = other.detach()
        pair = (free, fixed) if wrt == "input" else (fixed, free)
        out = conv(*pair, None, stride, padding, dilation, groups)
        if tuple(out.shape) != tuple(grad_output.shape):
            raise ShapeError(
                f"grad_output has shape {tuple(grad_output.shape)}, the convolution gives "
                f"{tuple(out.shape)}",
                op=f"nn.grad.{op}",
            )
        (grad,) = autograd.grad(out, free, grad_output)
    return grad


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """``conv1d``'s gradient with respect to an input of ``input_size``."""
    return _gradient(1, "input", input_size, weight, grad_output, stride, padding, dilation, groups)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """``conv1d``'s gradient with respect to a weight of ``weight_size``."""
    args = (stride, padding, dilation, groups)
    return _gradient(1, "weight", weight_size, input, grad_output, *args)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """``conv2d``'s gradient with respect to an input of ``input_size``."""
    return _gradient(2, "input", input_size, weight, grad_output, stride, padding, dilation, groups)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """``conv2d``'s gradient with respect to a weight of ``weight_size``."""
    args = (stride, padding, dilation, groups)
    return _gradient(2, "weight", weight_size, input, grad_output, *args)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """``conv3d``'s gradient with respect to an input of ``input_size``."""
    return _gradient(3, "input", input_size, weight, grad_output, stride, padding, dilation, groups)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """``conv3d``'s gradient with respect to a weight of ``weight_size``."""
    args = (stride, padding, dilation, groups)
    return _gradient(3, "weight", weight_size, input, grad_output, *args)
