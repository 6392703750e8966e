"""PyTorch's keyword names for the operands of ``ember.*`` and ``ember.nn.functional.*``.

PyTorch names a function's first tensor ``input`` and a binary op's second ``other``
(``torch.add(input=a, other=b)``, ``F.linear(input=x, weight=w)``, ``F.pad(input=x, pad=p)``);
ember's op modules name them ``x``, ``y``, ``a``, ``b``. `with_torch_keywords` gives the public
namespaces (ember/__init__.py, nn/functional.py) functions that also take PyTorch's names. The
tables themselves (``PUBLIC``, ``FUNCTIONAL``) keep the plain functions, so ember's own calls
(``ops.api``) and Tensor methods pay nothing.
"""

from __future__ import annotations

import functools
import inspect

__all__ = ["with_torch_keywords"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_FIRST = ("x", "a", "t")  # ember's names for a first operand, PyTorch's ``input``
_SECOND = ("y", "b")  # ember's names for a binary op's second operand, PyTorch's ``other``


def _aliases(fn) -> dict:
    """{PyTorch's keyword: ``fn``'s parameter} for ``fn``'s first two operands."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    names = {p.name for p in params}
    aliases = {}
    first = params[0] if params else None
    if (
        first is not None
        and first.kind in _POSITIONAL
        and first.name in _FIRST
        and "input" not in names
    ):
        aliases["input"] = params[0].name
        if len(params) > 1 and params[1].kind in _POSITIONAL and params[1].name in _SECOND:
            if "other" not in names:
                aliases["other"] = params[1].name
    return aliases


def _taking(fn, aliases: dict):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if kwargs:
            for torch_name, own in aliases.items():
                if torch_name in kwargs:
                    if own in kwargs:
                        raise TypeError(
                            f"{fn.__name__}() got both {torch_name}= and {own}= for one argument"
                        )
                    kwargs[own] = kwargs.pop(torch_name)
        return fn(*args, **kwargs)

    return call


_WRAPPED: dict = {}  # function -> its public form (one per function, whichever namespace)


def with_torch_keywords(table: dict) -> dict:
    """``table`` (name -> public function) with each function that names its operands other
    than PyTorch does wrapped to take PyTorch's names too (one wrapper per function, so
    ``ember.relu is ember.nn.functional.relu`` still holds)."""
    result = {}
    for name, fn in table.items():
        if not callable(fn) or isinstance(fn, type):
            result[name] = fn
            continue
        if fn not in _WRAPPED:
            aliases = _aliases(fn)
            _WRAPPED[fn] = _taking(fn, aliases) if aliases else fn
        result[name] = _WRAPPED[fn]
    return result
