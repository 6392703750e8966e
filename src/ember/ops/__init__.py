"""The op registry. Importing this package imports every op module in it (files whose names do
not start with an underscore), so adding an op never means editing an import list."""

import importlib
import pkgutil

from ..types import TensorType
from . import (
    _half,  # noqa: F401  (attaches each elementwise op's C loop as its fast rule)
    _limited,
)
from ._registry import CUSTOM_NAMESPACES, FUNCTIONAL, METHODS, PUBLIC, REGISTRY, OpDef, apply

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_") and _info.name != "api":
        importlib.import_module(f"{__name__}.{_info.name}")
_limited.declare()  # (the ops that take uint16/32/64: every op is registered by now)

__all__ = ["REGISTRY", "PUBLIC", "METHODS", "FUNCTIONAL", "OpDef", "TensorType", "apply"]


class _CustomNamespace:
    """``ember.ops.<namespace>``: the custom ops defined under it (``ember.library``)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, op: str):
        found = CUSTOM_NAMESPACES.get(self._name, {}).get(op)
        if found is None:
            raise AttributeError(f"no custom op {self._name}::{op} (ember.library.custom_op)")
        return found


def __getattr__(name: str):
    """PyTorch's ``torch.ops.<namespace>.<op>`` for custom ops; anything else is missing."""
    if name in CUSTOM_NAMESPACES:
        return _CustomNamespace(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
