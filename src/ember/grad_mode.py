"""Gradient-recording switches: ``no_grad``, ``enable_grad``, ``set_grad_enabled`` and
``is_grad_enabled`` (re-exported by ember.autograd and ember, as PyTorch's are). The flag itself
lives with the dispatcher (ops/_registry.py), which every mode reads."""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
import weakref

from .errors import AutogradError
from .ops import _registry as _reg

__all__ = [
    "detect_anomaly",
    "enable_grad",
    "inference_mode",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "no_grad",
    "set_detect_anomaly",
    "set_grad_enabled",
]


def is_grad_enabled() -> bool:
    return _reg.is_grad_enabled()


def _context_decorator(make_context, fn):
    """``fn`` run inside a fresh ``make_context()`` at each call, as PyTorch's
    ``context_decorator``: a generator function's body runs inside it at each resumption (and
    outside it between them: the caller's loop keeps its own mode), not just while the
    generator object is made; a class has its construction wrapped, with PyTorch's
    deprecation warning."""
    if inspect.isclass(fn):
        warnings.warn(
            "Decorating classes is deprecated and will be disabled in future versions. You "
            "should only decorate functions or methods. To preserve the current behavior of "
            "class decoration, you can directly decorate the `__init__` method and nothing else.",
            FutureWarning,
            stacklevel=3,
        )
        cls = fn
        fn = lambda *args, **kwargs: cls(*args, **kwargs)  # noqa: E731
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator_context(*args, **kwargs):
            gen = fn(*args, **kwargs)
            try:
                with make_context():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with make_context():
                            gen.close()
                        raise
                    except BaseException:
                        with make_context():
                            response = gen.throw(*sys.exc_info())
                    else:
                        with make_context():
                            response = gen.send(request)
            except StopIteration as stop:
                return stop.value

        return generator_context

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with make_context():
            return fn(*args, **kwargs)

    return wrapper


class set_grad_enabled:
    """Context manager, function and decorator (``@set_grad_enabled(False)``) that switches
    gradient recording on or off. Called, it switches at once, as PyTorch's; used as a
    decorator, it switches back and applies ``mode`` only inside the decorated function."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self.prev = _reg.set_grad_enabled_flag(self.mode)

    def __enter__(self):
        _reg.set_grad_enabled_flag(self.mode)
        return self

    def __exit__(self, *exc):
        _reg.set_grad_enabled_flag(self.prev)
        return False

    def __call__(self, fn):
        _reg.set_grad_enabled_flag(self.prev)
        mode = self.mode
        return _context_decorator(lambda: set_grad_enabled(mode), fn)

    def clone(self) -> set_grad_enabled:
        return set_grad_enabled(self.mode)

    def __repr__(self) -> str:
        return f"ember.set_grad_enabled(mode={self.mode})"


class _GradModeContext:
    """``with no_grad():``, ``@no_grad()`` and, as PyTorch allows, the bare ``@no_grad``."""

    enabled: bool

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)

    def __enter__(self):
        self.prev = _reg.set_grad_enabled_flag(self.enabled)
        return self

    def __exit__(self, *exc):
        _reg.set_grad_enabled_flag(self.prev)
        return False

    def __call__(self, fn):
        return _context_decorator(type(self), fn)

    def clone(self):
        return type(self)()


class no_grad(_GradModeContext):
    """Disable gradient recording in a ``with`` block or a decorated function."""

    enabled = False


class enable_grad(_GradModeContext):
    """Re-enable gradient recording inside a ``no_grad`` region."""

    enabled = True


_inference = [
    False
]  # whether an inference_mode(True) region is active (one flag, as the grad flag)


class InferenceVersion(list):
    """The version counter of an *inference tensor* (one made while an ``inference_mode(True)``
    region is active, as PyTorch's; ``Tensor.is_inference()`` reads it): bumping it, which every
    in-place write does, raises outside inference mode, with PyTorch's message. (ember's write
    has happened when it raises; PyTorch refuses before writing.)"""

    __slots__ = ()

    def __setitem__(self, index, value) -> None:
        if not _inference[0]:
            raise AutogradError(
                "Inplace update to inference tensor outside InferenceMode is not allowed. "
                "You can make a clone to get a normal tensor before doing inplace update.",
                op="inplace",
            )
        list.__setitem__(self, index, value)


class inference_mode:
    """``with ember.inference_mode():`` / ``@ember.inference_mode()`` / ``@ember.inference_mode``:
    run without recording gradients, as PyTorch's.

    ``mode=False`` switches inference mode off and records gradients again (PyTorch sets the
    gradient mode to ``not mode``), e.g. inside an inference region. Tensors made in inference
    mode are *inference tensors*, as PyTorch's (``is_inference()``; `InferenceVersion`): an
    in-place write to one outside inference mode, reading its ``_version`` or making it require
    grad raises PyTorch's error. (PyTorch also refuses to save one for backward; ember lets
    autograd read it.)
    """

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):  # bare @ember.inference_mode
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def __enter__(self):
        self._prev = (_reg.is_grad_enabled(), _inference[0])
        _inference[0] = self.mode
        _reg.set_grad_enabled_flag(not self.mode)  # PyTorch: grad mode is ``not mode``
        return self

    def __exit__(self, *exc):
        grad, inference = self._prev
        _reg.set_grad_enabled_flag(grad)
        _inference[0] = inference
        return False

    def __call__(self, fn):
        mode = self.mode
        return _context_decorator(lambda: inference_mode(mode), fn)

    def clone(self) -> inference_mode:
        return inference_mode(self.mode)


def is_inference_mode_enabled() -> bool:
    """Whether an ``inference_mode(True)`` region is active."""
    return _inference[0]


# ------------------------------------------------------------------------------ anomaly mode
class _Anomaly:
    """Anomaly detection's switches (read by the autograd engine, autograd.py)."""

    enabled = False
    check_nan = True
    stacks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # node -> forward stack


_anomaly = _Anomaly()


def is_anomaly_enabled() -> bool:
    return _anomaly.enabled


def is_anomaly_check_nan_enabled() -> bool:
    return _anomaly.check_nan


class set_detect_anomaly:
    """Switch anomaly detection on or off (a function call, or a context manager that restores
    the previous setting), as ``torch.autograd.set_detect_anomaly``. While on, each recorded op
    keeps the Python stack of the call that made it, and a backward step whose gradients hold
    NaN raises an AutogradError naming the op and that forward call (``check_nan=False``
    keeps the stacks only). It slows recording down: a debugging aid."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev = (_anomaly.enabled, _anomaly.check_nan)
        _anomaly.enabled, _anomaly.check_nan = bool(mode), bool(check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _anomaly.enabled, _anomaly.check_nan = self.prev
        return False


class detect_anomaly:
    """Context manager and decorator turning anomaly detection on (``torch.autograd.
    detect_anomaly``); see `set_detect_anomaly`."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        self._saved: list = []

    def __enter__(self):
        self._saved.append((_anomaly.enabled, _anomaly.check_nan))
        _anomaly.enabled, _anomaly.check_nan = True, self.check_nan
        return self

    def __exit__(self, *exc):
        _anomaly.enabled, _anomaly.check_nan = self._saved.pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


def record_creation(node) -> None:
    """Keep the user's stack at the creation of ``node`` (anomaly mode)."""
    import traceback

    _anomaly.stacks[node] = traceback.extract_stack()[:-3]


def check_gradients(node, grads) -> None:
    """Raise if a backward step of ``node`` produced NaN (anomaly mode)."""
    import numpy as np

    from .errors import AutogradError

    for i, g in enumerate(grads):
        if g is None:
            continue
        data = np.asarray(g._data)
        if data.dtype.kind == "f" and np.isnan(data).any():
            stack = _anomaly.stacks.get(node)
            where = ""
            if stack:
                frames = [f for f in stack if "/ember/" not in f.filename.replace("\\", "/")]
                where = "\nThe forward call that created it:\n" + "".join(
                    traceback_format(frames or stack)
                )
            raise AutogradError(
                f"Function '{node.name()}' returned nan values in its {i}th output.{where}",
                op="backward",
            )


def traceback_format(frames) -> list:
    import traceback

    return traceback.format_list(frames[-6:])
