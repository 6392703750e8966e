"""PyTorch's eager-mode quantization workflow (``torch.ao.quantization``): `QuantStub` /
`DeQuantStub` mark where a model's values become quantized and float again; `fuse_modules`
folds Conv2d + BatchNorm2d (eval) and fuses a following ReLU (``ConvReLU2d``, ``LinearReLU``);
`prepare` gives each quantizable module (a stub, Conv2d, Linear and the fused ones) with a
``qconfig`` an observer of its output (``activation_post_process``); calibration runs the
model; `convert` swaps them for the quantized modules (torch_modules.py) with the observers'
parameters and the weights quantized by the qconfig's weight observer. `quantize_dynamic`
swaps Linear and LSTM layers for dynamic quantized ones (qint8 per-tensor weights, as PyTorch).
`get_default_qconfig` gives PyTorch's per backend: "x86"/"fbgemm" (histogram activations with
reduce_range, per-channel symmetric weights) and "qnnpack" (no reduce_range, per-tensor)."""

from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np

from .. import dtypes as dt
from ..errors import QuantizationError
from ..nn import (
    LSTM,
    AdaptiveAvgPool2d,
    BatchNorm2d,
    Conv2d,
    Identity,
    Linear,
    Module,
    ReLU,
    Sequential,
)
from ..ops import qtensor as Q
from ..tensor import Tensor
from . import torch_lstm as qlstm
from . import torch_modules as QM
from . import torch_observers as O

_F = np.float32


class QConfig(NamedTuple):
    """Observer factories for a module's output (``activation``) and its weight."""

    activation: object
    weight: object


def get_default_qconfig(backend: str = "x86", version: int = 0) -> QConfig:
    """PyTorch's default post-training static qconfig for ``backend``."""
    if backend in ("x86", "fbgemm"):
        return QConfig(
            O.HistogramObserver.with_args(reduce_range=True),
            O.PerChannelMinMaxObserver.with_args(
                dtype=dt.qint8, qscheme=Q.QSCHEMES["per_channel_symmetric"]
            ),
        )
    if backend == "qnnpack":
        return QConfig(
            O.HistogramObserver.with_args(reduce_range=False),
            O.MinMaxObserver.with_args(dtype=dt.qint8, qscheme=Q.QSCHEMES["per_tensor_symmetric"]),
        )
    raise QuantizationError(
        f"unknown backend {backend!r}: x86, fbgemm or qnnpack", op="get_default_qconfig"
    )


default_dynamic_qconfig = QConfig(
    O.PlaceholderObserver.with_args(dtype=dt.float32, is_dynamic=True),
    O.MinMaxObserver.with_args(dtype=dt.qint8, qscheme=Q.QSCHEMES["per_tensor_symmetric"]),
)
default_qconfig = get_default_qconfig("x86")


class _Stub(Module):
    """The identity until `convert` replaces it; holds an optional qconfig."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig is not None:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class QuantStub(_Stub):
    """Where values become quantized (the identity until `convert`)."""


class DeQuantStub(_Stub):
    """Where quantized values become float again (the identity until `convert`)."""


class ConvReLU2d(Sequential):
    """A Conv2d and a ReLU fused by `fuse_modules` (``torch.ao.nn.intrinsic.ConvReLU2d``)."""


class LinearReLU(Sequential):
    """A Linear and a ReLU fused by `fuse_modules` (``torch.ao.nn.intrinsic.LinearReLU``)."""


def _get(model, name: str):
    m = model
    for part in name.split("."):
        m = getattr(m, part)
    return m


def _set(model, name: str, new) -> None:
    parent, _, leaf = name.rpartition(".")
    setattr(_get(model, parent) if parent else model, leaf, new)


def _fold_bn(conv: Conv2d, bn: BatchNorm2d) -> Conv2d:
    """PyTorch's fuse_conv_bn_eval: ``w * (gamma / sqrt(var + eps))`` per output channel and the
    bias ``(b - mean) / sqrt(var + eps) * gamma + beta``, in float32."""
    fused = copy.deepcopy(conv)
    w = conv.weight.detach().numpy().astype(_F)
    b = conv.bias.detach().numpy().astype(_F) if conv.bias is not None else np.zeros(w.shape[0], _F)
    mean, var = bn.running_mean.numpy().astype(_F), bn.running_var.numpy().astype(_F)
    gamma = bn.weight.detach().numpy().astype(_F) if bn.weight is not None else np.ones_like(mean)
    beta = bn.bias.detach().numpy().astype(_F) if bn.bias is not None else np.zeros_like(mean)
    rsqrt = _F(1) / np.sqrt(var + _F(bn.eps))
    from ..nn import Parameter

    fused.weight = Parameter(Tensor(w * (gamma * rsqrt).reshape(-1, 1, 1, 1)))
    fused.bias = Parameter(Tensor((b - mean) * rsqrt * gamma + beta))
    return fused


def fuse_modules(
    model, modules_to_fuse, inplace: bool = False, fuser_func=None, fuse_custom_config_dict=None
):
    """Fuse each list of dotted module names (Conv2d, BatchNorm2d[, ReLU]; Conv2d, ReLU;
    Linear, ReLU) into its first module, the others replaced by Identity; eval mode for
    BatchNorm, as PyTorch's."""
    model = model if inplace else copy.deepcopy(model)
    groups = (
        modules_to_fuse
        if modules_to_fuse and isinstance(modules_to_fuse[0], (list, tuple))
        else [modules_to_fuse]
    )
    for names in groups:
        mods = [_get(model, n) for n in names]
        kinds = tuple(type(m) for m in mods)
        if kinds[:2] == (Conv2d, BatchNorm2d):
            if mods[1].training:
                raise QuantizationError(
                    "fusing BatchNorm needs eval mode (use eval())", op="fuse_modules"
                )
            fused = _fold_bn(mods[0], mods[1])
            if kinds[2:] == (ReLU,):
                fused = ConvReLU2d(fused, mods[2])
            elif kinds[2:]:
                raise QuantizationError(
                    f"cannot fuse {[k.__name__ for k in kinds]}", op="fuse_modules"
                )
        elif kinds == (Conv2d, ReLU):
            fused = ConvReLU2d(mods[0], mods[1])
        elif kinds == (Linear, ReLU):
            fused = LinearReLU(mods[0], mods[1])
        else:
            raise QuantizationError(f"cannot fuse {[k.__name__ for k in kinds]}", op="fuse_modules")
        _set(model, names[0], fused)
        for n in names[1:]:
            _set(model, n, Identity())
    return model


_OBSERVED = (QuantStub, Conv2d, Linear, ConvReLU2d, LinearReLU)


def _propagate(module, qconfig) -> None:
    qconfig = getattr(module, "qconfig", qconfig)
    if qconfig is not None:
        module.qconfig = qconfig
    children = [] if isinstance(module, (ConvReLU2d, LinearReLU)) else module.children()
    for child in children:
        _propagate(child, qconfig)


def _observe(module, inputs, output):
    module.activation_post_process(output)


def prepare(model, inplace: bool = False, allow_list=None, observer_non_leaf_module_list=None,
            prepare_custom_config_dict=None):  # fmt: skip
    """Attach an output observer (the qconfig's activation) to every quantizable module."""
    model = model if inplace else copy.deepcopy(model)
    _propagate(model, None)
    for m in model.modules():
        if isinstance(m, _OBSERVED) and getattr(m, "qconfig", None) is not None:
            if not hasattr(m, "activation_post_process"):
                m.activation_post_process = m.qconfig.activation()
                m.register_forward_hook(_observe)
    return model


def _weight(module, qconfig):
    w = module.weight.detach().numpy().astype(_F)
    obs = qconfig.weight()
    obs(w)
    scales, zps = obs.calculate_qparams()
    per_channel = isinstance(obs, O.PerChannelMinMaxObserver)
    return QM.quantize_weight(w, np.asarray(scales), np.asarray(zps), per_channel)


def _bias(module):
    return None if module.bias is None else module.bias.detach().numpy()


def _quantized(m):
    """The quantized module replacing prepared module ``m``, or None."""
    if isinstance(m, DeQuantStub):
        return QM.DeQuantize()
    qconfig = getattr(m, "qconfig", None)
    if isinstance(m, AdaptiveAvgPool2d) and not isinstance(m, QM.QuantizedAdaptiveAvgPool2d):
        return QM.QuantizedAdaptiveAvgPool2d(m.output_size)
    if qconfig is None or not hasattr(m, "activation_post_process"):
        return None
    scale, zp = m.activation_post_process.calculate_qparams()
    scale, zp = float(np.asarray(scale).reshape(-1)[0]), int(np.asarray(zp).reshape(-1)[0])
    if isinstance(m, QuantStub):
        return QM.Quantize(scale, zp, dt.quint8)
    inner = m[0] if isinstance(m, (ConvReLU2d, LinearReLU)) else m
    qw = _weight(inner, qconfig)
    if isinstance(inner, Linear):
        cls = QM.LinearReLU if isinstance(m, LinearReLU) else QM.Linear
        return cls(qw, _bias(inner), scale, zp)
    if inner.padding_mode != "zeros" or isinstance(inner.padding, str):
        raise QuantizationError("quantized Conv2d takes numeric zero padding", op="convert")
    cls = QM.ConvReLU2d if isinstance(m, ConvReLU2d) else QM.Conv2d
    return cls(
        qw, _bias(inner), scale, zp, inner.stride, inner.padding, inner.dilation, inner.groups
    )


def convert(module, mapping=None, inplace: bool = False, remove_qconfig: bool = True, **kwargs):
    """Swap each prepared module for its quantized one (see the module docstring)."""
    module = module if inplace else copy.deepcopy(module)
    for name, child in list(module.named_children()):
        new = _quantized(child)
        if new is None:
            convert(child, inplace=True)
        else:
            setattr(module, name, new)
    return module


def quantize_dynamic(model, qconfig_spec=None, dtype=dt.qint8, mapping=None, inplace: bool = False):
    """PyTorch's dynamic quantization: each Linear and LSTM (of the types in ``qconfig_spec``)
    becomes a dynamic quantized one with qint8 per-tensor symmetric weights, its inputs
    quantized to quint8 per call (reduce_range, as the x86 engine)."""
    if dtype is not dt.qint8:
        raise QuantizationError(
            f"dynamic quantization to {dtype}: ember has qint8", op="quantize_dynamic"
        )
    types = set(qconfig_spec) if qconfig_spec is not None else {Linear, LSTM}
    model = model if inplace else copy.deepcopy(model)

    def weight(w):
        obs = default_dynamic_qconfig.weight()
        obs(w)
        scales, zps = obs.calculate_qparams()
        return QM.quantize_weight(w, np.asarray(scales), np.asarray(zps), False)

    def swap(module):
        for name, child in list(module.named_children()):
            if type(child) is Linear and Linear in types:
                qw = weight(child.weight.detach().numpy().astype(_F))
                setattr(module, name, QM.DynamicLinear(qw, _bias(child)))
            elif type(child) is LSTM and LSTM in types:
                setattr(module, name, qlstm.LSTM(child, weight))
            else:
                swap(child)

    swap(model)
    return model
