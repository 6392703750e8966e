"""Composite functions built from primitives (activations, normalization, losses, attention).

A composite is written in ember ops only, so it runs in every mode and differentiates through
its primitives' VJPs. Importing this package imports every module in it; each module exports its
functions (``ops._registry.export``) to ``ember.*`` and/or ``ember.nn.functional.*``.
"""

import importlib
import pkgutil

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
