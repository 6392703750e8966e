"""PyTorch's ``torch.nn.utils.fusion``: a convolution or linear layer and the eval-mode
BatchNorm after it as one layer (the batch norm's scale folded into the weight, its shift into
the bias), PyTorch's formulas: ``w * gamma / sqrt(var + eps)`` per output channel and
``(b - mean) * gamma / sqrt(var + eps) + beta``. (ember's graph passes fold batch norms into
convolutions by themselves at inference, ops/batch_norm.py; these give the user the layer.)"""

from __future__ import annotations

import copy

from ...autograd import no_grad
from ...errors import EmberError
from ..parameter import Parameter

__all__ = [
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
]


def _check_eval(name: str, *modules) -> None:
    if any(m.training for m in modules):
        raise EmberError("fusion only for eval: call .eval() on both modules first", op=name)


def fuse_conv_bn_eval(conv, bn, transpose: bool = False):
    """A copy of ``conv`` (Conv*d, or ConvTranspose*d with ``transpose``) computing
    ``bn(conv(x))`` of the eval-mode ``bn``."""
    _check_eval("fuse_conv_bn_eval", conv, bn)
    if bn.running_mean is None or bn.running_var is None:
        raise EmberError("the batch norm keeps no running statistics", op="fuse_conv_bn_eval")
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose,
    )  # fmt: skip
    return fused


def fuse_conv_bn_weights(
    conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose: bool = False
):  # fmt: skip
    """(weight, bias) Parameters of the convolution computing conv then batch norm."""
    from ... import ops

    with no_grad():
        w_dtype = conv_w.dtype
        b_dtype = conv_b.dtype if conv_b is not None else w_dtype
        if conv_b is None:
            conv_b = ops.api.zeros_like(bn_rm)
        if bn_w is None:
            bn_w = ops.api.ones_like(bn_rm)
        if bn_b is None:
            bn_b = ops.api.zeros_like(bn_rm)
        scale = bn_w * (bn_rv + bn_eps).rsqrt()
        shape = [1, -1] if transpose else [-1, 1]
        shape += [1] * (conv_w.ndim - 2)
        weight = (conv_w * scale.reshape(shape)).to(w_dtype)
        bias = ((conv_b - bn_rm) * scale + bn_b).to(b_dtype)
    return Parameter(weight, conv_w.requires_grad), Parameter(bias, conv_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` computing ``bn(linear(x))`` of the eval-mode ``bn`` (BatchNorm1d
    over the linear layer's features, or of one feature broadcast)."""
    _check_eval("fuse_linear_bn_eval", linear, bn)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise EmberError(
            f"the linear layer's {linear.out_features} outputs and the batch norm's "
            f"{bn.num_features} features differ",
            op="fuse_linear_bn_eval",
        )
    if bn.running_mean is None or bn.running_var is None:
        raise EmberError("the batch norm keeps no running statistics", op="fuse_linear_bn_eval")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """(weight, bias) Parameters of the linear layer computing linear then batch norm."""
    from ... import ops

    with no_grad():
        if linear_b is None:
            linear_b = ops.api.zeros_like(bn_rm)
        scale = bn_w * (bn_rv + bn_eps).rsqrt()
        weight = linear_w * scale.unsqueeze(-1)
        bias = (linear_b - bn_rm) * scale + bn_b
    return Parameter(weight, linear_w.requires_grad), Parameter(bias, linear_b.requires_grad)
