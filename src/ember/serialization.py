"""``ember.serialization``: torch.serialization's names (``torch.serialization.load``/``save``
and the allowlist of a program's own classes that a checkpoint may hold, io/safe_globals.py)."""

from .io import load, save
from .io.safe_globals import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals

__all__ = [
    "load",
    "save",
    "add_safe_globals",
    "clear_safe_globals",
    "get_safe_globals",
    "safe_globals",
]
