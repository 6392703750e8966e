"""Late-bound access to every exported op function, for VJPs and composites written in ember ops.

``from . import api as E`` then ``E.sum_to(g, shape)``: names resolve when called, so op modules
never depend on each other's import order.
"""

from ._registry import PUBLIC


def __getattr__(name: str):
    try:
        return PUBLIC[name]
    except KeyError:
        raise AttributeError(f"ember has no op function {name!r}") from None
