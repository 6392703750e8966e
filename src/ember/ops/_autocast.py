"""Autocast's per-thread state and its casts: the ops layer's half of ``ember.autocast``
(ember/amp.py holds the public entry points and sets this state).

Where the policy lives. A primitive states its `Autocast` policy as its OpDef's ``autocast``
rule (ops/_rules.py); `apply` (ops/_registry.py) hands an enabled region's calls of such ops to
`Region.operands`, which casts the float operands with ordinary ``cast`` calls, so an eager tape
records them (each parameter's gradient comes back in its own dtype through the cast's VJP) and
a graph being captured holds them as nodes. A composite public function (a loss written from
primitives, ``F.linear``, ``stack``) declares its policy where it is defined with
`autocasts(...)`: the decorator casts the call's tensor arguments by the policy and runs the body
with autocast off, as PyTorch runs the kernel of an op on its lists with the autocast key
excluded. The rule of the *called* function decides, so ``F.mse_loss`` computes in float32 even
though it is built from ``sub`` and ``mean``, and ``ember.dot`` stays in float32 (PyTorch's
``dot`` is not on a list) though ember builds it from ``matmul``, which is.

Eligible operands are float32, float16 and bfloat16 tensors; float64 and non-float operands are
never cast (PyTorch's ``is_autocast_eligible``).

The weight cache: within the outermost region of a thread, the lower-precision cast of a float32
leaf that requires grad (a parameter) is made once and reused (PyTorch's ``cache_enabled``),
keyed also by its version counter (an in-place update makes a new cast) and the grad mode (a
cast made under ``no_grad`` has no tape). Only eager casts are cached: a graph being captured
gets one node per cast, which CSE merges.
"""

from __future__ import annotations

import contextlib
import functools
import threading

from .. import dtypes as dt
from ..errors import EmberError
from ._registry import TensorBase, _state, apply, building_graph, is_grad_enabled
from ._rules import Autocast

__all__ = ["Autocast", "Region", "autocasts", "suspended"]

_ELIGIBLE = (dt.float32, dt.float16, dt.bfloat16)
SUPPORTED = (dt.bfloat16, dt.float16)  # CPU autocast's dtypes, as PyTorch's


class _Local(threading.local):
    def __init__(self):
        self.dtype = dt.bfloat16  # the CPU autocast dtype (set even while disabled, as PyTorch)
        self.cache_enabled = True
        self.nesting = 0
        self.cache: dict = {}


local = _Local()


class Region:
    """An enabled autocast region: the dtype ops of the ``LOWER`` policy compute in."""

    __slots__ = ("dtype", "cache")

    def __init__(self, dtype, cache: bool):
        self.dtype = dtype
        self.cache = cache

    def __repr__(self) -> str:
        return f"Region({self.dtype}, cache={self.cache})"

    def operands(self, op, inputs: tuple, attrs: dict) -> tuple:
        """``op``'s operands cast by its rule (called by `apply`)."""
        policy = op.autocast
        if not isinstance(policy, Autocast):
            policy = policy(attrs)
        if policy is None or policy is Autocast.KEEP:
            return inputs
        target = self._target(policy, inputs, op.name)
        return tuple(self._cast(t, target, policy) for t in inputs)

    def arguments(self, policy: Autocast, args: tuple, kwargs: dict, name: str):
        """A composite's arguments cast by ``policy`` (tensors, and lists or tuples of them)."""
        if policy is Autocast.KEEP:
            return args, kwargs
        flat = [t for a in (*args, *kwargs.values()) for t in _tensors(a)]
        target = self._target(policy, flat, name)

        def cast(a):
            if isinstance(a, TensorBase):
                return self._cast(a, target, policy)
            if isinstance(a, (list, tuple)) and any(isinstance(x, TensorBase) for x in a):
                return type(a)(cast(x) for x in a) if type(a) in (list, tuple) else a
            return a

        return tuple(map(cast, args)), {k: cast(v) for k, v in kwargs.items()}

    def _target(self, policy: Autocast, tensors, name: str):
        if policy is Autocast.LOWER:
            return self.dtype
        if policy is Autocast.FP32:
            return dt.float32
        # PROMOTE: PyTorch's prioritize, starting from the region's dtype
        current = self.dtype
        for t in tensors:
            if not _eligible(t):
                continue
            if current is dt.float32 or t.dtype is dt.float32:
                current = dt.float32
            elif t.dtype is not self.dtype:
                raise EmberError(
                    f"autocast to {self.dtype} cannot promote a {t.dtype} operand (PyTorch "
                    "raises 'Unexpected floating ScalarType' here too): cast it to float32 "
                    f"or {self.dtype} first",
                    op=name,
                )
        return current

    def _cast(self, t, target, policy: Autocast):
        if not _eligible(t) or t.dtype is target:
            return t
        from .cast import _CAST  # (cast.py imports the elementwise ops, which may import us)

        cacheable = (
            self.cache
            and policy is Autocast.LOWER
            and t.dtype is dt.float32
            and getattr(t, "requires_grad", False)
            and getattr(t, "grad_fn", True) is None
            and not building_graph()
        )
        if not cacheable:
            return apply(_CAST, t, dtype=target)
        key = (id(t), target, is_grad_enabled())
        hit = local.cache.get(key)
        if hit is not None and hit[0] is t and hit[1] == t._vc[0]:
            return hit[2]
        out = apply(_CAST, t, dtype=target)
        local.cache[key] = (t, t._vc[0], out)
        return out


def _eligible(t) -> bool:
    return isinstance(t, TensorBase) and t.dtype in _ELIGIBLE


def _tensors(a):
    if isinstance(a, TensorBase):
        yield a
    elif isinstance(a, (list, tuple)):
        for x in a:
            if isinstance(x, TensorBase):
                yield x


def autocasts(policy):
    """Declare a composite public function's autocast policy: an `Autocast`, or a function of
    the call's arguments returning one (or None: autocast applies to the body's ops as usual).
    Inside an enabled region the decorated function casts its tensor arguments by the policy
    and runs with autocast off; outside, it costs one attribute read."""

    def wrap(fn):
        name = getattr(fn, "__name__", "function")

        @functools.wraps(fn)
        def run(*args, **kwargs):
            region = _state.autocast
            if region is None:
                return fn(*args, **kwargs)
            chosen = policy if isinstance(policy, Autocast) else policy(*args, **kwargs)
            if chosen is None:
                return fn(*args, **kwargs)
            args, kwargs = region.arguments(chosen, args, kwargs, name)
            _state.autocast = None
            try:
                return fn(*args, **kwargs)
            finally:
                _state.autocast = region

        run.autocast = policy
        return run

    return wrap


def region() -> Region | None:
    """This thread's enabled autocast region, or None."""
    return _state.autocast


def set_region(new: Region | None) -> Region | None:
    """Make ``new`` this thread's region; returns the previous one."""
    previous = _state.autocast
    _state.autocast = new
    return previous


@contextlib.contextmanager
def suspended():
    """Autocast off for a while (a backward pass: its ops compute in the dtypes the forward
    recorded, and a gradient flows back to each parameter in its own dtype through the casts'
    VJPs)."""
    previous = _state.autocast
    if previous is None:
        yield
        return
    _state.autocast = None
    try:
        yield
    finally:
        _state.autocast = previous


def run_suspended(fn, *args):
    """``fn(*args)`` with autocast off, as inside `suspended` (a function, not a generator's
    context manager: every backward pass starts here)."""
    previous = _state.autocast
    if previous is None:
        return fn(*args)
    _state.autocast = None
    try:
        return fn(*args)
    finally:
        _state.autocast = previous


def clear_cache() -> None:
    local.cache.clear()


def state_key():
    """What a captured function's graph depends on: the enabled region's dtype, or None (part
    of ember.function's cache key: a call inside a region must not reuse a graph captured
    outside one, nor one of another dtype)."""
    r = _state.autocast
    return None if r is None else r.dtype
