"""Scopes: which module (and which composite function) a graph node came from.

While a graph is being recorded, a per-thread stack of scope names says where the user's code
is; the graph builder stores the innermost one on every call node it creates (``node.scope``,
None outside every scope). The tools read it: FLOPs per module (tools/flops.py), the summary,
the profiler and the graph viewer.

A scope string has two parts, ``"<module path>[:<function>]"``:

* the **module path** names modules as torch's ``ModuleTracker`` (and so ``FlopCounterMode``)
  does: the outermost module called by its class name, each submodule by its parent's path and
  its attribute name, e.g. ``"GPTBlock"``, ``"GPTBlock.qkv"``, ``"Sequential.1"``. Optimizer
  updates get the path ``"optimizer"``;
* an optional **function** after a colon: the composite function (built from primitives) whose
  body recorded the node, e.g. ``"GPTBlock:scaled_dot_product_attention"``. Only composites that
  declare themselves with `composite` get one.

Backward nodes inherit the scope of the forward node they differentiate (graph/autodiff.py
re-enters it with `entered` while that node's VJP records).

API: `recording` (is a graph being built?), `module` (Module.__call__), `composite` (a
decorator for composite functions), `entered` (re-enter a recorded or fixed scope),
`current`, and `split` / `module_path` / `function_of` to read a scope string.

Checkpoint regions: `checkpoint_region` (entered by ``ember.utils.checkpoint.checkpoint`` while
a graph is recorded) numbers a region; call nodes recorded inside it keep the number
(``node.region``; nested regions keep the outermost's, since recomputing the outer region
recomputes the inner), read by transforms/checkpoint.py. `current_region` gives it.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
from collections.abc import Callable, Iterator

from ..ops import _registry as _reg

__all__ = [
    "OPTIMIZER",
    "checkpoint_region",
    "composite",
    "current",
    "current_region",
    "entered",
    "function_of",
    "locating",
    "locations",
    "module",
    "module_path",
    "recording",
    "split",
]

OPTIMIZER = "optimizer"


class _Frame:
    """One entry of the stack: a scope string, and for a module's frame the module and (built
    on first need) the paths of its descendants, so a child finds its name in one look-up."""

    __slots__ = ("scope", "module", "_paths")

    def __init__(self, scope: str, module=None):
        self.scope = scope
        self.module = module
        self._paths: dict[int, str] | None = None

    def path_of(self, mod) -> str | None:
        if self._paths is None:
            self._paths = {}
            for qualified, sub in self.module.named_modules():
                self._paths.setdefault(id(sub), qualified)
        qualified = self._paths.get(id(mod))
        return None if qualified is None else f"{module_path(self.scope)}.{qualified}"


class _Stack(threading.local):
    def __init__(self):
        self.frames: list[_Frame] = []
        self.locate = 0  # > 0: call nodes record the user's file:line (`locations`)
        self.region: int | None = None  # the outermost checkpoint region entered


_region_ids = itertools.count(1)


_stack = _Stack()


def recording() -> bool:
    """Whether a graph is being recorded here (some mode is pushed over eager execution):
    scopes cost nothing in eager code because callers check this first."""
    return bool(_reg._state.modes)


def locating() -> bool:
    """Whether call nodes recorded now keep the user's file:line (``node.location``)."""
    return _stack.locate > 0


@contextlib.contextmanager
def locations() -> Iterator[None]:
    """Inside the block, recorded call nodes keep the user's file:line: walking the stack for
    it costs time on every op, so only a capture that reports it (the ONNX exporter) asks."""
    _stack.locate += 1
    try:
        yield
    finally:
        _stack.locate -= 1


def current_region() -> int | None:
    """The checkpoint region call nodes recorded now belong to, or None."""
    return _stack.region


@contextlib.contextmanager
def checkpoint_region() -> Iterator[int]:
    """Number the call nodes recorded inside the block as one checkpoint region (inside
    another region: as that one). Yields the region's number."""
    outer = _stack.region
    if outer is None:
        _stack.region = next(_region_ids)
    try:
        yield _stack.region
    finally:
        _stack.region = outer


def current() -> str | None:
    """The innermost scope, or None outside every scope."""
    frames = _stack.frames
    return frames[-1].scope if frames else None


def split(scope: str | None) -> tuple[str, str | None]:
    """``(module path, function or None)`` of a scope string ('' for no module)."""
    if not scope:
        return "", None
    path, _, function = scope.partition(":")
    return path, function or None


def module_path(scope: str | None) -> str:
    return split(scope)[0]


def function_of(scope: str | None) -> str | None:
    return split(scope)[1]


def _module_name(mod) -> str:
    """The scope path of ``mod`` called now: its path below the innermost module being called
    when it is a descendant of it (``"Outer.blocks.0"``, as torch's ModuleTracker names it),
    else its class name below that module's path."""
    for frame in reversed(_stack.frames):
        if frame.module is None:
            continue
        if frame.module is mod:  # a module calling itself again
            return module_path(frame.scope)
        return frame.path_of(mod) or f"{module_path(frame.scope)}.{type(mod).__name__}"
    return type(mod).__name__


@contextlib.contextmanager
def module(mod) -> Iterator[str]:
    """The scope of nn.Module ``mod`` while its forward runs (callers check `recording`)."""
    name = _module_name(mod)
    _stack.frames.append(_Frame(name, mod))
    try:
        yield name
    finally:
        _stack.frames.pop()


@contextlib.contextmanager
def entered(scope: str | None) -> Iterator[None]:
    """Make ``scope`` (a recorded node's scope, or a fixed one like `OPTIMIZER`) the current
    scope inside the block; None leaves the scope as it is."""
    if scope is None:
        yield
        return
    _stack.frames.append(_Frame(scope))
    try:
        yield
    finally:
        _stack.frames.pop()


def composite(name: str) -> Callable:
    """Decorator for a composite function: while a graph is recorded, the nodes its body
    creates get the scope ``"<module path>:<name>"`` (the outermost composite wins, so a
    composite calling another keeps the caller's name)."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def scoped(*args, **kwargs):
            if not recording() or function_of(current()) is not None:
                return fn(*args, **kwargs)
            with entered(f"{module_path(current())}:{name}"):
                return fn(*args, **kwargs)

        return scoped

    return wrap
