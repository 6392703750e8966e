"""Late-bound access to every exported op function, for VJPs and composites written in ember ops.

``from . import api as E`` then ``E.sum_to(g, shape)``: names resolve when called, so op modules
never depend on each other's import order.
"""

from ._registry import EXPORT_HOOKS, PUBLIC


def __getattr__(name: str):
    try:
        fn = PUBLIC[name]
    except KeyError:
        raise AttributeError(f"ember has no op function {name!r}") from None
    # kept as a module attribute, so later lookups skip this function (a VJP's every call
    # looks its ops up); `_forget` drops it should the name be exported again
    globals()[name] = fn
    _KEPT.add(name)
    return fn


_KEPT: set = set()  # the names `__getattr__` made module attributes


def _forget(name: str) -> None:
    if name in _KEPT:
        _KEPT.discard(name)
        del globals()[name]


EXPORT_HOOKS.append(_forget)
