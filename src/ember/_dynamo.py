"""``ember._dynamo``: the names of PyTorch's ``torch._dynamo`` that training scripts reach for,
on ember's capture (`ember.compile`, `ember.function`).

``reset`` empties every compiled function's and module's cache (``torch.compiler.reset``).
``config`` holds the settings scripts assign: ``cache_size_limit`` / ``recompile_limit`` are
the number of programs an `ember.function` keeps (its ``DEFAULT_CACHE_SIZE``); the others are
kept as given and change nothing, because ember has no counterpart to steer:
``suppress_errors`` (a capture that fails already runs eagerly, unless ``fullgraph=True``),
``capture_scalar_outputs`` and ``capture_dynamic_output_shape_ops`` (``.item()`` and
data-dependent shapes are always captured), ``verbose``, ``automatic_dynamic_shapes``,
``assume_static_by_default``, ``optimize_ddp``. An unknown setting is refused by name.
``mark_dynamic``, ``maybe_mark_dynamic`` and ``mark_static`` record their hint on the tensor
(as PyTorch does), which `ember.compile`'s automatic dynamic shapes read (its default
``dynamic=None``, capture/automatic_dynamic.py): a dimension marked dynamic on the first call's
tensors is symbolic from the start, one marked static is never made symbolic (another size there
traces once more). A hint never changes a result.
``disable``, ``allow_in_graph`` and ``is_compiling`` are `ember.compiler`'s; ``optimize``
(PyTorch's older spelling) returns `ember.compile` with that backend; ``explain`` reports what
capturing a call gives (capture/explain.py).
"""

from __future__ import annotations

from . import compiler
from ._missing import module_getattr
from .capture import function as _function
from .capture.compiled import reset_all
from .capture.explain import explain

__all__ = [
    "allow_in_graph",
    "config",
    "disable",
    "explain",
    "is_compiling",
    "mark_dynamic",
    "mark_static",
    "maybe_mark_dynamic",
    "optimize",
    "reset",
]

disable = compiler.disable
allow_in_graph = compiler.allow_in_graph
is_compiling = compiler.is_compiling


def reset() -> None:
    """Every compiled function and module captures afresh at its next call."""
    reset_all()


class _Config:
    """``torch._dynamo.config`` (see the module docstring)."""

    _KEPT = {
        "suppress_errors": False,
        "verbose": False,
        "capture_scalar_outputs": True,
        "capture_dynamic_output_shape_ops": True,
        "automatic_dynamic_shapes": True,
        "assume_static_by_default": True,
        "optimize_ddp": True,
        "specialize_int": False,
        "inline_inbuilt_nn_modules": True,
    }

    def __init__(self):
        object.__setattr__(self, "_values", dict(self._KEPT))

    @property
    def cache_size_limit(self) -> int:
        return int(_function.DEFAULT_CACHE_SIZE)

    @cache_size_limit.setter
    def cache_size_limit(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"cache_size_limit is a number of programs >= 1, got {value!r}")
        _function.DEFAULT_CACHE_SIZE = value

    recompile_limit = cache_size_limit

    def __getattr__(self, name: str):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(
            f"torch._dynamo.config has no setting {name!r} in ember; it keeps "
            f"{', '.join(sorted([*values, 'cache_size_limit', 'recompile_limit']))}"
        )

    def __setattr__(self, name: str, value) -> None:
        if isinstance(getattr(type(self), name, None), property):
            object.__setattr__(self, name, value)
        elif name in self._values:
            self._values[name] = value
        else:
            self.__getattr__(name)  # (refused by name)


config = _Config()


def _mark(t, index, attribute: str) -> None:
    indices = [index] if isinstance(index, int) else list(index)
    for i in indices:
        if not isinstance(i, int) or not -t.ndim <= i < max(t.ndim, 1):
            raise IndexError(f"{attribute}: tensor of {t.ndim} dimensions has no dimension {i}")
    marked = set(getattr(t, attribute, ()))
    marked.update(i % max(t.ndim, 1) for i in indices)
    setattr(t, attribute, marked)


def mark_dynamic(t, index, *, min=None, max=None) -> None:  # noqa: A002
    """Record ``index`` (a dimension or a list of them) as dynamic on ``t`` (a hint)."""
    _mark(t, index, "_dynamo_dynamic_indices")


maybe_mark_dynamic = mark_dynamic


def mark_static(t, index=None) -> None:
    """Record ``index`` (every dimension when None) as static on ``t`` (a hint)."""
    _mark(t, range(t.ndim) if index is None else index, "_dynamo_static_indices")


def optimize(backend="inductor", *, nopython: bool = False, dynamic=None, **kwargs):
    """``torch._dynamo.optimize(backend)(fn)``: `ember.compile` with that backend
    (``nopython=True`` is ``fullgraph=True``)."""
    from .capture.compiled import compile as compile_

    def wrap(fn):
        return compile_(fn, backend=backend, fullgraph=nopython, dynamic=dynamic)

    return wrap


__getattr__ = module_getattr(__name__, globals())
