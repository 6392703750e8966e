"""``ember.nn.utils``: gradient clipping (PyTorch's formulas: the total norm is the norm of the
per-tensor norms; gradients are scaled by ``min(max_norm / (total + 1e-6), 1)``), and conversion
between a parameter list and one flat vector (``convert_parameters``); ``rnn`` (variable-length
sequences),
``parametrize`` and ``parametrizations`` (weight_norm, spectral_norm, orthogonal), ``prune``
(PyTorch's pruning utilities), the older hook-based ``weight_norm`` and ``spectral_norm``; the
clipping lives in ``clip_grad``, the deprecated ``stateless.functional_call`` in ``stateless``,
the convolution weights' memory formats in ``memory_format``."""

from __future__ import annotations

from . import (
    clip_grad,
    convert_parameters,
    fusion,
    memory_format,
    parametrizations,
    parametrize,
    prune,
    rnn,
    stateless,
)
from .clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .fusion import (
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
)
from .memory_format import (
    convert_conv2d_weight_memory_format,
    convert_conv3d_weight_memory_format,
)
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm


def skip_init(module_cls, *args, **kwargs):
    """PyTorch's ``skip_init``: a ``module_cls(*args, **kwargs)`` whose parameters and buffers
    hold unspecified values. (PyTorch skips the initializers by building on the meta device;
    ember builds the module as usual: any values satisfy the contract.)"""
    kwargs.pop("device", None)
    return module_cls(*args, **kwargs)


__all__ = [
    "clip_grad",
    "convert_parameters",
    "convert_conv2d_weight_memory_format",
    "convert_conv3d_weight_memory_format",
    "memory_format",
    "stateless",
    "clip_grad_norm",
    "clip_grad_norm_",
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
    "skip_init",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
    "parameters_to_vector",
    "remove_spectral_norm",
    "remove_weight_norm",
    "spectral_norm",
    "vector_to_parameters",
    "weight_norm",
]
