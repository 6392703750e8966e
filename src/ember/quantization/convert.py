"""`quantize` (post-training static quantization), `quantize_dynamic` and BatchNorm folding.

`quantize(model, calibration_data, per_channel=True, method="minmax")`:

1. copies the model and puts the copy in eval mode (the caller's model is left as it was);
2. folds each BatchNorm2d into the Conv2d before it: in an `nn.Sequential`, a Conv2d directly
   followed by a BatchNorm2d; elsewhere the pairs named in ``fuse`` (``[("conv1", "bn1"), ...]``
   or with a third name, the ReLU after them, as PyTorch's ``fuse_modules``). The BatchNorm
   becomes an `Identity`;
3. runs the calibration data through the folded float model, an observer (observers.py,
   chosen by ``method``) watching the input of every Conv2d and Linear;
4. replaces each Conv2d / Linear with `QuantizedConv2d` / `QuantizedLinear` (modules.py):
   uint8 inputs with the observed scale and zero point, int8 weights (per output channel with
   ``per_channel``, else one scale per tensor), and a ReLU that directly follows it (in a
   Sequential, or named in ``fuse``) fused into its epilogue (the ReLU becomes an Identity);
   in a Sequential, a layer followed (through max pooling, flattening, identities) by another
   quantized layer hands it uint8 values directly (modules.py).

``weight_dtype="fp8_e4m3" | "fp8_e5m2"`` stores the weights as float8 with one scale per
output channel instead (`Float8Conv2d`, `Float8Linear`; float compute, no calibration of
activations).

`quantize_dynamic(model, {nn.Linear, nn.LSTM}, dtype=ember.int8)` replaces those layers with
int8-weight versions whose inputs are quantized at each call; nothing to calibrate.
"""

from __future__ import annotations

import copy

import numpy as np

from .. import dtypes as dt
from ..autograd import no_grad
from ..errors import QuantizationError
from ..nn.activation import ReLU
from ..nn.container import Sequential
from ..nn.conv import Conv2d
from ..nn.dropout import Dropout
from ..nn.flatten import Flatten
from ..nn.linear import Identity, Linear
from ..nn.normalization import BatchNorm2d
from ..nn.parameter import Parameter
from ..nn.pooling import MaxPool2d
from ..nn.rnn import LSTM
from ..tensor import Tensor
from .modules import (
    DynamicQuantizedLinear,
    DynamicQuantizedLSTM,
    Float8Conv2d,
    Float8Linear,
    QuantizedConv2d,
    QuantizedLinear,
)
from .observers import make_observer

__all__ = ["fold_batch_norm", "quantize", "quantize_dynamic"]

WEIGHT_DTYPES = ("int8", "fp8_e4m3", "fp8_e5m2")


def fold_batch_norm(conv: Conv2d, bn: BatchNorm2d) -> None:
    """Fold an eval-mode ``bn`` after ``conv`` into ``conv``'s weight and bias, in place:
    ``w' = w * g``, ``b' = (b - mean) * g + beta`` with ``g = gamma / sqrt(var + eps)``
    (float64, rounded once to the weight's dtype)."""
    if bn.running_mean is None:
        raise QuantizationError(
            "a BatchNorm2d without running statistics cannot be folded", op="quantize"
        )
    w = conv.weight.numpy(force=True)
    mean = bn.running_mean.numpy(force=True).astype(np.float64)
    var = bn.running_var.numpy(force=True).astype(np.float64)
    gamma = (
        np.ones_like(mean) if bn.weight is None else bn.weight.numpy(force=True).astype(np.float64)
    )
    beta = np.zeros_like(mean) if bn.bias is None else bn.bias.numpy(force=True).astype(np.float64)
    g = gamma / np.sqrt(var + bn.eps)
    b = np.zeros_like(mean) if conv.bias is None else conv.bias.numpy(force=True).astype(np.float64)
    folded_w = (w.astype(np.float64) * g.reshape(-1, 1, 1, 1)).astype(w.dtype)
    conv.weight = Parameter(Tensor(folded_w))
    conv.bias = Parameter(Tensor(((b - mean) * g + beta).astype(w.dtype)))


def _replace(root, target, new):
    """Put ``new`` wherever ``target`` is a child in ``root``'s tree; the new root (``new``
    where ``target`` is the root itself)."""
    if root is target:
        return new
    for module in list(root.modules()):
        for name, child in list(module.named_children()):
            if child is target:
                module.add_module(name, new)  # (in place: a Sequential keeps its order)
    return root


def _plan(model, fuse) -> tuple[list, set]:
    """BatchNorms to fold (conv, bn) and the layers a ReLU follows (by identity), from
    Sequential adjacency and ``fuse``; returns (pairs, relu_fused), the ReLUs to drop marked
    on the relu_fused entries as (layer, relu)."""
    pairs, relus = [], []
    for module in model.modules():
        if not isinstance(module, Sequential):
            continue
        kids = [m for _, m in module.named_children()]
        for i, m in enumerate(kids):
            if not isinstance(m, (Conv2d, Linear)):
                continue
            j = i + 1
            if isinstance(m, Conv2d) and j < len(kids) and isinstance(kids[j], BatchNorm2d):
                pairs.append((m, kids[j]))
                j += 1
            if j < len(kids) and isinstance(kids[j], ReLU):
                relus.append((m, kids[j]))
    for names in fuse or ():
        mods = [model.get_submodule(n) for n in names]
        layer = mods[0]
        if not isinstance(layer, (Conv2d, Linear)):
            raise QuantizationError(f"fuse {names}: {names[0]} is not a Conv2d or Linear",
                                    op="quantize")  # fmt: skip
        for m in mods[1:]:
            if isinstance(m, BatchNorm2d) and isinstance(layer, Conv2d):
                pairs.append((layer, m))
            elif isinstance(m, ReLU):
                relus.append((layer, m))
            else:
                raise QuantizationError(
                    f"fuse {names}: {type(m).__name__} cannot fuse into {type(layer).__name__}",
                    op="quantize",
                )
    return pairs, relus


def _batches(calibration_data):
    for item in calibration_data:
        if isinstance(item, (tuple, list)):
            item = item[0]
        yield item if isinstance(item, Tensor) else Tensor(np.asarray(item, np.float32))


def quantize(model, calibration_data, per_channel: bool = True, method: str = "minmax", *,
             weight_dtype: str = "int8", fuse=None):  # fmt: skip
    """A copy of ``model`` with its Conv2d and Linear layers run in int8 (see the module).
    ``calibration_data``: an iterable of input batches (tensors, arrays, or tuples whose first
    element is the input, as a DataLoader gives)."""
    if weight_dtype not in WEIGHT_DTYPES:
        raise QuantizationError(
            f"unknown weight_dtype {weight_dtype!r}; expected one of {WEIGHT_DTYPES}",
            op="quantize",
        )
    make_observer(method)  # an unknown method fails before any work
    model = copy.deepcopy(model).eval()
    pairs, relus = _plan(model, fuse)
    for conv, bn in pairs:
        fold_batch_norm(conv, bn)
        _replace(model, bn, Identity())
    layers = [m for m in model.modules() if isinstance(m, (Conv2d, Linear))]
    if weight_dtype != "int8":
        for m in layers:
            new = Float8Conv2d(m, weight_dtype) if isinstance(m, Conv2d) else None
            model = _replace(model, m, new or Float8Linear(m, weight_dtype))
        return model
    observers = {id(m): make_observer(method) for m in layers}
    hooks = [
        m.register_forward_pre_hook(
            lambda mod, args: observers[id(mod)](np.asarray(args[0].numpy(force=True)))
        )
        for m in layers
    ]
    try:
        seen = 0
        with no_grad():
            for x in _batches(calibration_data):
                model(x)
                seen += 1
    finally:
        for h in hooks:
            h.remove()
    if not seen:
        raise QuantizationError("the calibration set is empty", op="quantize")
    fused = {id(layer) for layer, _ in relus}
    for m in layers:
        scale, zp = observers[id(m)].calculate_qparams()
        kind = QuantizedConv2d if isinstance(m, Conv2d) else QuantizedLinear
        model = _replace(model, m, kind(m, scale, zp, per_channel=per_channel, relu=id(m) in fused))
    for _, relu in relus:
        _replace(model, relu, Identity())
    _chain(model)
    return model


_TRANSPARENT = (Identity, MaxPool2d, Flatten, Dropout)


def _chain(model) -> None:
    """In each Sequential, a quantized layer separated from the next quantized layer only by
    max pooling, flattening, dropout (eval) or identities hands it uint8 values (modules.py)."""
    quantized = (QuantizedConv2d, QuantizedLinear)
    for module in model.modules():
        if not isinstance(module, Sequential):
            continue
        kids = [m for _, m in module.named_children()]
        for i, m in enumerate(kids):
            if not isinstance(m, quantized):
                continue
            j = i + 1
            while j < len(kids) and isinstance(kids[j], _TRANSPARENT):
                j += 1
            if j < len(kids) and isinstance(kids[j], quantized):
                m.out_scale, m.out_zero_point = kids[j].x_scale, kids[j].x_zero_point


def quantize_dynamic(
    model,
    qconfig_spec=None,
    dtype=dt.int8,
    mapping=None,
    inplace: bool = False,
    *,
    per_channel: bool | None = None,
):
    """A copy of ``model`` whose `Linear` and `LSTM` layers (those types of ``qconfig_spec``,
    default both) keep int8 weights and quantize their inputs at each call. ``dtype``
    ember.qint8 (PyTorch's spelling, ``per_channel`` not given) is PyTorch's
    ``torch.ao.quantization.quantize_dynamic`` with its numerics (torch_workflow.py); ember.int8
    or "qint8" ember's own scheme (per-channel symmetric weights unless ``per_channel=False``);
    ``inplace=True`` changes ``model`` itself; ``mapping`` (PyTorch's own
    replacement classes) must be None."""
    if dtype is dt.qint8 and per_channel is None:  # (PyTorch's spelling: PyTorch's numerics)
        from .torch_workflow import quantize_dynamic as torch_quantize_dynamic

        return torch_quantize_dynamic(model, qconfig_spec, dtype, mapping, inplace)
    per_channel = True if per_channel is None else per_channel
    if mapping is not None:
        raise QuantizationError("mapping: ember replaces Linear and LSTM with its own layers; "
                                "pass mapping=None", op="quantize_dynamic")  # fmt: skip
    if dtype is not dt.qint8 and dtype not in (dt.int8, "qint8", "int8"):
        raise QuantizationError(f"dynamic quantization is int8, got dtype {dtype}",
                                op="quantize_dynamic")  # fmt: skip
    types = tuple(qconfig_spec) if qconfig_spec is not None else (Linear, LSTM)
    unknown = [t for t in types if t not in (Linear, LSTM)]
    if unknown:
        raise QuantizationError(f"quantize_dynamic handles Linear and LSTM, not {unknown}",
                                op="quantize_dynamic")  # fmt: skip
    model = (model if inplace else copy.deepcopy(model)).eval()
    for m in list(model.modules()):
        if isinstance(m, Linear) and Linear in types:
            model = _replace(model, m, DynamicQuantizedLinear(m, per_channel))
        elif isinstance(m, LSTM) and LSTM in types:
            model = _replace(model, m, DynamicQuantizedLSTM(m, per_channel))
    return model
