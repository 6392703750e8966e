"""PyTorch's keyword names for the operands of ``ember.*`` and ``ember.nn.functional.*``.

PyTorch names a function's first tensor ``input`` and a binary op's second ``other``
(``torch.add(input=a, other=b)``, ``F.linear(input=x, weight=w)``, ``F.pad(input=x, pad=p)``);
ember's op modules name them ``x``, ``y``, ``a``, ``b``. A few binary ops name their second
operand otherwise in PyTorch (``torch.pow(input, exponent)``, ``torch.mm(input, mat2)``,
``torch.dot(input, tensor)``, ``torch.mv(input, vec)``): `SECOND_OPERAND` lists those by public
name. `with_torch_keywords` gives the public namespaces (ember/__init__.py, nn/functional.py)
and the Tensor methods (_methods.py: ``x.add(other=y)``, ``x.mm(mat2=m)``) functions that also
take PyTorch's names. The tables themselves (``PUBLIC``, ``FUNCTIONAL``, ``METHODS``) keep the
plain functions, so ember's own calls (``ops.api``) and the operators (``x + y``) pay nothing.
"""

from __future__ import annotations

import functools
import inspect

from ..errors import ArgumentTypeError

__all__ = ["with_out", "with_torch_keywords"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_FIRST = ("x", "a", "t")  # ember's names for a first operand, PyTorch's ``input``
_SECOND = ("y", "b", "v")  # ember's names for a binary op's second operand, PyTorch's ``other``

# PyTorch's keyword for the second operand where it is not ``other`` (native_functions.yaml)
SECOND_OPERAND = {
    "pow": "exponent",
    "mm": "mat2",
    "bmm": "mat2",
    "dot": "tensor",
    "mv": "vec",
    "outer": "vec2",
    "ger": "vec2",
}


def _aliases(fn, name: str | None = None) -> dict:
    """{PyTorch's keyword: ``fn``'s parameter} for ``fn``'s operands: the first operand
    (``input``) and the one after it (``other``, or `SECOND_OPERAND`'s name for ``name``), and
    ``axis``/``keepdims`` for a ``dim``/``keepdim`` parameter. A first parameter ``condition``
    (``where``) is PyTorch's own name; the two after it are ``input`` and ``other``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    names = {p.name for p in params}
    # PyTorch's NumPy spellings of ``dim`` and ``keepdim`` (its argument parser's
    # numpy_compatibility_arg_names): ``torch.sort(x, axis=0)``, ``x.sum(1, keepdims=True)``
    aliases = {
        numpy_name: own
        for numpy_name, own in (("axis", "dim"), ("keepdims", "keepdim"))
        if own in names and numpy_name not in names
    }
    start = 1 if params and params[0].name == "condition" else 0
    first = params[start] if len(params) > start else None
    if first is None or first.kind not in _POSITIONAL or first.name not in _FIRST:
        return aliases
    if "input" not in names:
        aliases["input"] = first.name
    second = params[start + 1] if len(params) > start + 1 else None
    torch_second = SECOND_OPERAND.get(name, "other")
    if (
        second is not None
        and second.kind in _POSITIONAL
        and second.name in _SECOND
        and torch_second not in names
    ):
        aliases[torch_second] = second.name
    return aliases


def _renaming(fn, aliases: dict):
    """A function renaming PyTorch's keywords in a call's ``kwargs`` to ``fn``'s, in place."""

    def rename(kwargs):
        for torch_name, own in aliases.items():
            if torch_name in kwargs:
                if own in kwargs:
                    raise ArgumentTypeError(
                        f"{fn.__name__}() got both {torch_name}= and {own}= for one argument"
                    )
                kwargs[own] = kwargs.pop(torch_name)

    return rename


def _taking(fn, aliases: dict):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not kwargs:  # (the common call: nothing to rename)
            return fn(*args)
        for torch_name, own in aliases.items():  # (`_renaming`'s loop, inlined)
            if torch_name in kwargs:
                if own in kwargs:
                    raise ArgumentTypeError(
                        f"{fn.__name__}() got both {torch_name}= and {own}= for one argument"
                    )
                kwargs[own] = kwargs.pop(torch_name)
        return fn(*args, **kwargs)

    return call


# (function, its aliases) -> its public form: one per function and spelling of its operands,
# whichever namespace, so ``ember.relu is ember.nn.functional.relu`` still holds
_WRAPPED: dict = {}


def with_torch_keywords(table: dict, *, out: bool = False, aliases: bool = True) -> dict:
    """``table`` (name -> public function) with each function that names its operands other
    than PyTorch does wrapped to take PyTorch's names too; with ``out``, each function that
    has no ``out`` parameter of its own also takes PyTorch's ``out=`` (ops/_out.py); without
    ``aliases``, the operands keep their names (`with_out`)."""
    from ._out import taking_out

    result = {}
    for name, fn in table.items():
        if not callable(fn) or isinstance(fn, type):
            result[name] = fn
            continue
        names = _aliases(fn, name) if aliases else {}
        wants_out = out and _lacks_out(fn) and _may_take_out(name)
        key = (fn, tuple(sorted(names.items())), wants_out)
        if key not in _WRAPPED:
            if wants_out:  # (one wrapper renaming the keywords and taking out=)
                rename = _renaming(fn, names) if names else None
                _WRAPPED[key] = taking_out(fn, name, rename)
            else:
                _WRAPPED[key] = _taking(fn, names) if names else fn
        result[name] = _WRAPPED[key]
    return result


def with_out(table: dict) -> dict:
    """``table`` with PyTorch's ``out=`` on each function without its own, its operands' names
    as they are: the namespaces whose PyTorch names are ember's (``ember.linalg``'s ``A``,
    ``B``; ``ember.fft``, ``ember.special``)."""
    return with_torch_keywords(table, out=True, aliases=False)


# public functions PyTorch gives no ``out=``: tensors made from data, ``*_like``, in-place ones
_NO_OUT = frozenset({"tensor", "as_tensor", "asarray", "from_numpy", "from_dlpack", "frombuffer"})


def _may_take_out(name: str) -> bool:
    return name not in _NO_OUT and not name.endswith(("_like", "_")) and not name.startswith("_")


def _lacks_out(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "out" not in params
