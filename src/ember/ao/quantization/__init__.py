"""``ember.ao.quantization``: PyTorch's ``torch.ao.quantization`` eager-mode workflow with its
numerics (QuantStub, DeQuantStub, fuse_modules, prepare, convert, quantize_dynamic, qconfigs
and observers; ember.quantization's torch_*.py modules). ember's own post-training quantization
(``quantize(model, data)``, float8 weights, its fused int8 layers) is `ember.quantization`,
whose other names are here too."""

from ...quantization import *  # noqa: F403
from ...quantization import __all__ as _ember_names
from ...quantization import torch_fbgemm as fbgemm
from ...quantization import torch_modules as qmodules
from ...quantization import torch_observers as observer
from ...quantization.torch_observers import (
    HistogramObserver,
    MinMaxObserver,
    PerChannelMinMaxObserver,
    PlaceholderObserver,
)
from ...quantization.torch_workflow import (
    ConvReLU2d,
    DeQuantStub,
    LinearReLU,
    QConfig,
    QuantStub,
    convert,
    default_dynamic_qconfig,
    default_qconfig,
    fuse_modules,
    get_default_qconfig,
    prepare,
    quantize_dynamic,
)

__all__ = sorted(
    set(_ember_names)
    | {
        "ConvReLU2d", "DeQuantStub", "HistogramObserver", "LinearReLU", "MinMaxObserver",
        "PerChannelMinMaxObserver", "PlaceholderObserver", "QConfig", "QuantStub", "convert",
        "default_dynamic_qconfig", "default_qconfig", "fbgemm", "fuse_modules",
        "get_default_qconfig", "observer", "prepare", "qmodules", "quantize_dynamic",
    }
)  # fmt: skip
