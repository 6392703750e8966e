"""``ember.compile``: ``torch.compile``'s interface over `ember.function`.

``ember.compile(model)`` returns an `OptimizedModule`: an ``nn.Module`` holding the model as
``_orig_mod`` (as PyTorch's does), whose forward is the model's call captured by
``ember.function``. So the wrapper *is* a module: ``.parameters()``, ``.train()`` / ``.eval()``,
``.to()``, ``.state_dict()`` (keys prefixed ``_orig_mod.``, as in PyTorch) work as on any
module, other attributes (``compiled.fc1``) are read from the model, and a change of training
mode retraces (the training flags are part of ember.function's cache key). Calling it under
eager autograd records one node on the tape (the AOT forward and backward graphs), so
``loss.backward()`` outside fills the model's ``.grad`` as the uncompiled model would.

``ember.compile(fn)`` (also ``@ember.compile`` and ``@ember.compile(mode=...)``) returns the
compiled function.

How the arguments map, and where ember differs from PyTorch:

* ``backend``: ``"inductor"`` (the default), ``"ember"``, ``"aot_eager"`` and ``"cudagraphs"``
  compile with ember's default executor (``"auto"``: the fastest way per graph,
  runtime/auto.py); an ember executor name (``"codegen"``, ``"interpreter"``, ``"parallel"``,
  ``"arena"``, ``"auto"``) picks that executor;
  ``"eager"`` runs the function uncompiled behind the same wrapper (PyTorch's eager backend
  captures and then runs the captured Python eagerly; ember has nothing between the two). A
  callable backend is refused: ember's graphs are not FX graphs.
* ``mode``: ``"default"``, ``"reduce-overhead"``, ``"max-autotune"`` and
  ``"max-autotune-no-cudagraphs"`` all run ember's full pass pipeline (O3); there are no CUDA
  graphs or autotuned GPU kernels to choose between.
* ``options``: ember's own `ember.function` options (``executor``, ``opt_level``, ``verify``,
  ``memory_budget``, ``cache_size``, ``remat_policy``); inductor's settings
  (``"max_autotune"``, ``"triton.cudagraphs"``: those ``ember._inductor.config`` keeps) are
  accepted and change nothing, as setting them in the config does; another key is refused by
  name, as PyTorch refuses one it does not know.
* ``dynamic``: None (the default) traces the first call with static sizes and, as PyTorch's
  automatic dynamic shapes, a call whose tensors differ in some sizes once more with those
  dimensions symbolic, which then serves every size there (capture/automatic_dynamic.py;
  ``mark_dynamic`` hints make dimensions symbolic from the first call); False traces one graph
  per input shape (ember.function's cache, bounded); True traces once with a symbolic
  leading dimension (the batch) on every tensor argument, from the first call's shapes (a
  call whose tensors differ past dimension 0 or in dtype traces once more: ember's other
  sizes are static). PyTorch's ``dynamic=True`` makes every dimension symbolic.
* ``fullgraph``: ember always captures whole functions, never a partial graph. With
  ``fullgraph=True`` a function that cannot be captured (Python control flow on tensor values)
  raises `TraceError`; with the default False, like PyTorch falling back at a graph break, the
  function runs eagerly from then on, after one warning that names the reason.
* ``disable=True`` returns ``model_or_fn`` itself.

A capture that fails part way runs the call again eagerly (capture/undo.py first puts back
what the failed trace did to the Python state it reaches, and to Python's and NumPy's global
random generators, so each side effect happens once). A function that draws from those
generators (``random.random() < p``), or that seeds a generator (``torch.manual_seed``),
fails its capture here, where ``ember.function`` warns and bakes the one draw or seeding in:
PyTorch's compiled code draws and seeds on every call.

``module.compile(**same arguments)`` (PyTorch's ``Module.compile``) compiles the module's
forward in place: its instance's ``forward`` becomes a `_CompiledForward` (the class's forward
of the module through the same machinery); the module keeps its identity and state_dict keys.
"""

from __future__ import annotations

import functools
import warnings
import weakref

from .._inductor import is_setting as _is_inductor_setting
from ..errors import TraceError, user_stacklevel
from ..nn.module import _COMPILE_FORWARD, Module
from ..random import seeding_refused
from ..runtime.executors import EXECUTORS
from ..tensor import Tensor
from .automatic_dynamic import AutomaticDynamic
from .function import Function
from .function import reset_all as function_reset_all
from .prints import prints_recorded
from .signature import TensorSpec
from .trace import python_draws_refused

__all__ = ["OptimizedModule", "compile", "reset_all"]

_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_DEFAULT_BACKENDS = ("inductor", "ember", "aot_eager", "cudagraphs")
_OPTIONS = ("executor", "opt_level", "verify", "memory_budget", "cache_size", "remat_policy")


def _function_options(backend, mode, options) -> dict | None:
    """ember.function's keyword arguments for these compile arguments (None: run eagerly)."""
    if callable(backend):
        raise TypeError(
            "ember.compile: backend must be a name; a callable backend receives PyTorch FX "
            "graphs, which ember does not make (its graphs are ember.Graph)"
        )
    if mode is not None and mode not in _MODES:
        raise ValueError(f"ember.compile: mode must be one of {_MODES} or None, got {mode!r}")
    if backend == "eager":
        return None
    kwargs = {}
    if backend in EXECUTORS:
        kwargs["executor"] = backend
    elif backend not in _DEFAULT_BACKENDS:
        raise ValueError(
            f"ember.compile: unknown backend {backend!r}; give one of "
            f"{_DEFAULT_BACKENDS + ('eager',)} or an ember executor {tuple(EXECUTORS)}"
        )
    for key, value in dict(options or {}).items():
        if key in _OPTIONS:
            kwargs[key] = value
        elif not (isinstance(key, str) and _is_inductor_setting(key)):
            raise TypeError(
                f"ember.compile: option {key!r} is neither one of ember's "
                f"({', '.join(_OPTIONS)}) nor an inductor setting ember.compile accepts (see "
                "ember._inductor.config)"
            )
    return kwargs


_LIVE: weakref.WeakSet = weakref.WeakSet()  # every `_Compiled` not yet collected


def reset_all() -> None:
    """``torch.compiler.reset``: every compiled function and module captures afresh at its
    next call (ember.function's and ember.compile's caches emptied, failed captures retried)."""
    for compiled in list(_LIVE):
        compiled.reset()
    function_reset_all()


class _Compiled:
    """The compiled callable behind `compile`: ember.function, made on the first call when
    ``dynamic=True`` (the input signature comes from that call; a call whose tensors differ
    past the batch dimension or in dtype makes another, as PyTorch recompiles there), with
    the eager fallback."""

    def __init__(self, fn, kwargs: dict | None, dynamic, fullgraph: bool):
        self.fn = fn
        self.kwargs = kwargs
        self.dynamic = dynamic
        self.fullgraph = fullgraph
        eager = kwargs is None
        self.function: Function | None = None if dynamic or eager else Function(fn, **kwargs)
        self.dynamic_functions: dict = {}  # dynamic=True: the tensors' specs -> Function
        # dynamic=None: symbolic sizes for the dimensions that vary (capture/automatic_dynamic)
        self.automatic = None
        if dynamic is None and not eager:
            self.automatic = AutomaticDynamic(
                self.function, lambda specs: Function(fn, input_signature=specs, **kwargs)
            )
        # why it runs eagerly: backend="eager", or a capture that failed
        self.eager_reason: str | None = "backend='eager'" if eager else None
        _LIVE.add(self)

    def reset(self) -> None:
        """Capture afresh at the next call: the programs forgotten, a failed capture tried
        again, ``dynamic=True``'s signature taken from that call."""
        if self.kwargs is None:
            return
        self.eager_reason = None
        if self.dynamic:
            self.function = None
            self.dynamic_functions.clear()
        elif self.function is not None:
            self.function.reset()
        if self.automatic is not None:
            self.automatic.reset()

    def __call__(self, *args, **kwargs):
        if self.eager_reason is not None:
            return self.fn(*args, **kwargs)
        if self.dynamic:
            # one Function per shape past the batch and dtype of the tensors: where PyTorch's
            # dynamic=True finds a rank, dtype (or, here, a trailing size) its guards did not
            # see, it compiles again rather than refusing the call
            specs = _batch_specs(args, kwargs)
            key = tuple((s.shape, s.dtype) for s in specs)
            function = self.dynamic_functions.get(key)
            if function is None:
                function = Function(self.fn, input_signature=specs, **self.kwargs)
                self.dynamic_functions[key] = function
            self.function = function
        try:
            # (a draw from Python's or NumPy's generators fails the capture: eagerly, each
            # call draws anew, as PyTorch's compiled code does)
            # (a print while tracing is recorded into the graph, so it prints on each call,
            # as PyTorch's graph break at print does: capture/prints.py)
            with python_draws_refused(), seeding_refused(), prints_recorded():
                if self.automatic is not None:
                    return self.automatic(args, kwargs)
                return self.function(*args, **kwargs)
        except TraceError as error:
            if self.fullgraph:
                raise
            self.eager_reason = str(error)
            warnings.warn(
                f"ember.compile: {self.function.name} could not be captured whole and runs "
                f"eagerly from now on (fullgraph=True raises instead): {error}",
                stacklevel=user_stacklevel(),
            )
            return self.fn(*args, **kwargs)


def _dynamic(dynamic) -> bool | None:
    """``dynamic`` as `_Compiled` takes it: None (automatic dynamic shapes), True or False."""
    return None if dynamic is None else bool(dynamic)


def _batch_specs(args, kwargs) -> list:
    """Specs for ``dynamic=True``: each tensor argument's shape with dimension 0 symbolic."""
    specs = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, Tensor):
            shape = tuple(value.shape)
            specs.append(TensorSpec((None, *shape[1:]) if shape else (), value.dtype))
    return specs


class OptimizedModule(Module):
    """What ``ember.compile(module)`` returns: the module as ``_orig_mod``, called through its
    compiled forward (see the module docstring)."""

    def __init__(self, mod: Module, compiled: _Compiled):
        super().__init__()
        self._orig_mod = mod
        self.__dict__["_compiled"] = compiled

    def forward(self, *args, **kwargs):
        return self.__dict__["_compiled"](*args, **kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            modules = self.__dict__.get("_modules")
            if name.startswith("__") or not modules or "_orig_mod" not in modules:
                raise  # (copying or unpickling: no model to forward to yet)
            return getattr(modules["_orig_mod"], name)

    # copies and pickles carry the model and the compile arguments; the copy compiles afresh
    # (a compiled program holds locks and generated code, which do not copy)
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        compiled = state.pop("_compiled")
        state["_compile_args"] = (compiled.kwargs, compiled.dynamic, compiled.fullgraph)
        return state

    def __setstate__(self, state: dict) -> None:
        args = state.pop("_compile_args")
        self.__dict__.update(state)
        self.__dict__["_compiled"] = _Compiled(self._modules["_orig_mod"], *args)

    @property
    def compiled_function(self) -> Function | None:
        """The `ember.function` that runs the forward (its ``stats``, ``graph``, ``code``);
        None before the first call with ``dynamic=True``."""
        return self.__dict__["_compiled"].function


def compile(  # noqa: A001  (PyTorch's name)
    model_or_fn=None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend="inductor",
    mode: str | None = None,
    options: dict | None = None,
    disable: bool = False,
):
    """Compile a module or a function with ember's graph capture; see the module docstring for
    each argument and how it differs from ``torch.compile``."""
    if model_or_fn is None:
        return functools.partial(
            compile,
            fullgraph=fullgraph,
            dynamic=dynamic,
            backend=backend,
            mode=mode,
            options=options,
            disable=disable,
        )
    if not callable(model_or_fn):
        raise TypeError(f"ember.compile expects a Module or a function, got {model_or_fn!r}")
    kwargs = _function_options(backend, mode, options)
    if disable:
        return model_or_fn
    compiled = _Compiled(model_or_fn, kwargs, _dynamic(dynamic), bool(fullgraph))
    if isinstance(model_or_fn, Module):
        return OptimizedModule(model_or_fn, compiled)

    @functools.wraps(model_or_fn)
    def compiled_fn(*args, **kwargs):
        return compiled(*args, **kwargs)

    compiled_fn._compiled = compiled
    return compiled_fn


class _CompiledForward:
    """A module's forward compiled in place by ``Module.compile``: the class's forward of the
    module through `_Compiled`. Copies and pickles carry the module and the arguments and
    compile afresh (a compiled program does not copy)."""

    def __init__(self, module: Module, kwargs: dict | None, dynamic: bool, fullgraph: bool):
        self.module = module
        self.args = (kwargs, dynamic, fullgraph)

        def forward(*args, **kwargs):  # (the module in a closure cell: capture's state finds
            return type(module).forward(module, *args, **kwargs)  # it, and its hooks, there)

        forward.__name__ = forward.__qualname__ = f"{type(module).__name__}.forward"
        self.compiled = _Compiled(forward, kwargs, dynamic, fullgraph)

    def __call__(self, *args, **kwargs):
        return self.compiled(*args, **kwargs)

    def __reduce__(self):
        return (_CompiledForward, (self.module, *self.args))


def _compile_forward(
    module: Module,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend="inductor",
    mode: str | None = None,
    options: dict | None = None,
    disable: bool = False,
) -> None:
    """``Module.compile`` (see the module docstring)."""
    kwargs = _function_options(backend, mode, options)
    if disable:
        return
    forward = _CompiledForward(module, kwargs, _dynamic(dynamic), bool(fullgraph))
    module.__dict__["forward"] = forward


_COMPILE_FORWARD.append(_compile_forward)
