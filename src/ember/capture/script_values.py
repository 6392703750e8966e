"""Values as ``ember.script``'s run-time helpers see them (capture/script_runtime.py,
capture/script_loops.py): `Undefined` (a variable with no value, which raises when used),
whether a value is staged (a tensor while a graph is built), and the kinds a converted
statement's variables are sorted into: 'T' a tensor or a nest of only tensors, 'P' a Python
value, 'U' undefined. Also the small constructors staging uses (0-d tensors of Python numbers,
zeros of a nest's structure) and the descriptions error messages print.
"""

from __future__ import annotations

from ..errors import ScriptError
from ..graph.builder import GraphBuilder
from ..ops._registry import TensorBase, current_mode
from .script_analysis import RETVAL

_INTERNAL = "_ember_"


class Undefined:
    """The value of a variable that has none: unbound before a converted statement, or set on
    one side of a staged branch only. Any use raises (UnboundLocalError, or `ScriptError` with
    the reason)."""

    __slots__ = ("name", "reason", "location")

    def __init__(self, name: str, reason: str | None = None, location: str | None = None):
        self.name, self.reason, self.location = name, reason, location

    def error(self) -> Exception:
        if self.reason is None:
            return UnboundLocalError(
                f"cannot access local variable {self.name!r} where it is not associated with a "
                "value"
            )
        return ScriptError(
            f"variable {self.name!r} has no value here: {self.reason}",
            op="script",
            location=self.location,
        )

    def _fail(self, *args, **kwargs):
        raise self.error()

    def __getattr__(self, attr):
        raise self.error()

    def __repr__(self) -> str:
        return f"<undefined {self.name}>"

    __hash__ = object.__hash__
    __bool__ = __int__ = __float__ = __index__ = __len__ = __iter__ = __call__ = _fail
    __getitem__ = __setitem__ = __array__ = __neg__ = __pos__ = __abs__ = __invert__ = _fail
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __matmul__ = _fail
    __rmatmul__ = __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = _fail
    __mod__ = __rmod__ = __pow__ = __rpow__ = __and__ = __rand__ = __or__ = __ror__ = _fail


NO_RETURN = Undefined(RETVAL)  # the return value before any return statement ran


class _Retry(Exception):
    """Internal: a first trace found a fixable disagreement; trace again with the fix."""


# ------------------------------------------------------------------------------ kinds


def tracing() -> bool:
    return isinstance(current_mode(), GraphBuilder)


def staged(x) -> bool:
    return isinstance(x, TensorBase) and tracing()


def _leaves(v) -> list:
    if isinstance(v, (tuple, list)):
        return [leaf for o in v for leaf in _leaves(o)]
    if isinstance(v, dict):
        return [leaf for o in v.values() for leaf in _leaves(o)]
    return [v]


def _kind(v) -> str:
    """'U' (no value), 'T' (a tensor or a nest of only tensors) or 'P' (a Python value)."""
    if isinstance(v, Undefined):
        return "U"
    leaves = _leaves(v)
    if leaves and all(isinstance(x, TensorBase) for x in leaves):
        return "T"
    return "P"


def _struct(v):
    if isinstance(v, TensorBase):
        return (tuple(v.shape), v.dtype)
    if isinstance(v, dict):
        return (dict, tuple((k, _struct(o)) for k, o in v.items()))
    return (type(v), tuple(_struct(o) for o in v))


def _describe(v) -> str:
    from ..graph.printer import format_type
    from ..types import TensorType

    if isinstance(v, TensorBase):
        return format_type(TensorType(tuple(v.shape), v.dtype))
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(o)}" for k, o in v.items()) + "}"
    if isinstance(v, (tuple, list)) and _kind(v) == "T":
        return "(" + ", ".join(_describe(o) for o in v) + ")"
    return f"the {type(v).__name__} {v!r}"


def _same_python(a, b) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # arrays, tensors inside containers: not comparable as one bool
        return False


def _number(v) -> bool:
    return isinstance(v, (bool, int, float))


def _scalar(*values):
    """A 0-d tensor of ``values[0]`` with a dtype that fits all of ``values``."""
    from .. import dtypes
    from ..ops.creation import tensor

    if all(isinstance(v, bool) for v in values):
        dtype = dtypes.bool_
    elif all(isinstance(v, int) for v in values):
        dtype = dtypes.int64
    else:
        dtype = dtypes.get_default_dtype()
    return tensor(values[0], dtype=dtype)


def _zeros_like_struct(v):
    from ..ops.creation import zeros

    if isinstance(v, TensorBase):
        return zeros(*v.shape, dtype=v.dtype)
    if isinstance(v, dict):
        return {k: _zeros_like_struct(o) for k, o in v.items()}
    return type(v)(_zeros_like_struct(o) for o in v)


def _site(construct: str, location: str) -> str:
    return f"`{construct}` at {location}"


def _refuse_in_try(in_try: bool, construct: str, location: str) -> None:
    if in_try:
        raise ScriptError(
            f"a tensor-dependent `{construct}` inside `try`: exceptions cannot be caught around "
            "graph control flow; move the `try` out of the converted code",
            op="script",
            location=location,
        )
