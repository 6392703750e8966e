"""The op registry. Importing this package imports every op module in it (files whose names do
not start with an underscore), so adding an op never means editing an import list."""

import importlib
import pkgutil

from ..types import TensorType
from . import _half  # noqa: F401  (attaches each elementwise op's C loop as its fast rule)
from ._registry import FUNCTIONAL, METHODS, PUBLIC, REGISTRY, OpDef, apply

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_") and _info.name != "api":
        importlib.import_module(f"{__name__}.{_info.name}")

__all__ = ["REGISTRY", "PUBLIC", "METHODS", "FUNCTIONAL", "OpDef", "TensorType", "apply"]
