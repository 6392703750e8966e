"""``ember.utils.checkpoint``: PyTorch's activation checkpointing (``torch.utils.checkpoint``).

`checkpoint(function, *args, use_reentrant=..., ...)` runs ``function`` without keeping the
values its backward pass would read, and recomputes them when the backward pass reaches it.

* **Non-reentrant** (``use_reentrant=False``, PyTorch's recommended form): the function runs
  with grad mode on, so the tape records its ops as usual, but under saved-tensor hooks
  (autograd.py `saved_tensors_hooks`): each value a recorded op's gradient reads is kept as a
  number, not the tensor (the function's tensor arguments excepted). The first time the
  backward pass unpacks one, the region is run again from its arguments (with the random
  state of the forward call restored, so dropout draws the same mask, and under the forward's
  autocast region, which backward otherwise leaves off), its saved values
  collected in the same order, and the k-th stands for the k-th; the recomputation stops once
  the last one is there (PyTorch's early stop). The original tape backpropagates through them,
  so keyword arguments, non-tensor arguments and outputs, tensors closed over (a module's
  parameters), nested checkpoints and ``autograd.grad`` work as without checkpointing, and the
  version counters of the original values still catch an in-place change after the region.
  ``determinism_check="default"`` compares each recomputed value's shape and dtype with the
  original's (`CheckpointError` otherwise).
* **Reentrant** (``use_reentrant=True``, PyTorch's default when the argument is left out, with
  its warning): an ``autograd.Function`` that runs ``function`` under ``no_grad`` and whose
  backward recomputes it with grad mode on and runs ``backward`` on the recomputed outputs.
  Gradients reach the tensors the region reads only through its tensor arguments (at least
  one must require grad, as PyTorch warns) and leaves; no keyword arguments, no
  ``autograd.grad``.

Under ``no_grad`` the function just runs. While a graph is recorded (``ember.function``,
``ember.compile``), the region's nodes are tagged (graph/scope.py `checkpoint_region`) and
transforms/checkpoint.py recomputes them in the compiled backward pass; ``ember.function``'s
``remat_policy`` picks what a region saves (`nothing_saveable`, `dots_saveable`, `save_only`,
re-exported here).
"""

from __future__ import annotations

import contextlib
import warnings

from .. import random as _random
from ..autograd import saved_tensors_hooks
from ..autograd_function import Function
from ..errors import ArgumentError, ArgumentTypeError, AutogradError, user_stacklevel
from ..grad_mode import enable_grad, is_grad_enabled, no_grad
from ..graph import scope as _scope
from ..ops import _autocast
from ..tensor import Tensor
from ..transforms.checkpoint import (
    RematPolicy,
    dots_saveable,
    everything_saveable,
    nothing_saveable,
    save_only,
)

__all__ = [
    "CheckpointError",
    "RematPolicy",
    "checkpoint",
    "checkpoint_sequential",
    "dots_saveable",
    "everything_saveable",
    "noop_context_fn",
    "nothing_saveable",
    "save_only",
]


class CheckpointError(AutogradError):
    """The recomputation of a checkpointed region did not match its first run (PyTorch's
    ``torch.utils.checkpoint.CheckpointError``)."""


def noop_context_fn():
    """The default ``context_fn``: no context around the forward run or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


_DETERMINISM = ("default", "none")


def _reentrant_warning(name: str) -> None:
    warnings.warn(
        f"ember.utils.checkpoint.{name}: the use_reentrant parameter should be passed "
        "explicitly. use_reentrant=False is recommended, but if you need to preserve the "
        "current default behavior (PyTorch 2.13's), you can pass use_reentrant=True. Refer to "
        "PyTorch's docs for the differences between the two variants.",
        stacklevel=user_stacklevel(),
    )


def checkpoint(
    function,
    *args,
    use_reentrant: bool | None = None,
    context_fn=noop_context_fn,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    **kwargs,
):
    """Run ``function(*args, **kwargs)`` keeping only its inputs for the backward pass, which
    recomputes the rest (see the module docstring). ``preserve_rng_state`` (keyword, default
    True): restore the random state of the forward run for the recomputation."""
    if use_reentrant is None:
        _reentrant_warning("checkpoint")
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if determinism_check not in _DETERMINISM:
        raise ArgumentError(
            f"determinism_check should be one of {', '.join(_DETERMINISM)}, but got "
            f"{determinism_check!r}"
        )
    if not callable(function):
        raise ArgumentTypeError(
            f"checkpoint: function must be callable, got {type(function).__name__}"
        )
    if use_reentrant:
        if kwargs:
            raise ArgumentError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not noop_context_fn or debug:
            raise ArgumentError(
                "Passing `context_fn` or `debug` is only supported when use_reentrant=False."
            )
    if _scope.recording():  # a graph is being recorded: tag the region (module docstring)
        with _scope.checkpoint_region():
            return function(*args, **kwargs)
    if use_reentrant:
        return _Reentrant.apply(function, preserve, *args)
    forward_context, recompute_context = context_fn()
    if not is_grad_enabled():
        with forward_context:
            return function(*args, **kwargs)
    region = _Region(
        function, args, kwargs, preserve, recompute_context, determinism_check, debug, early_stop
    )
    with forward_context, saved_tensors_hooks(region.pack, region.unpack, _check_version=True):
        return function(*args, **kwargs)


class _Stop(Exception):
    """Raised inside a recomputation once every saved value is back (early stop)."""


class _Region:
    """One non-reentrant checkpoint call: what it needs to run again, the shapes and dtypes of
    the values its tape saved (by number), and those values once recomputed."""

    def __init__(self, function, args, kwargs, preserve, context, check, debug, early_stop):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.arg_ids = {id(a) for a in args if isinstance(a, Tensor)}
        self.rng = _random.default_generator.json_state() if preserve else None
        self.autocast = _autocast.region()  # the recomputation runs under the same region
        self.context, self.check, self.debug = context, check, debug
        self.early_stop = early_stop
        self.meta: list = []  # per saved number: (shape, dtype, op that saved it)
        self.values: dict | None = None

    def pack(self, t):
        if id(t) in self.arg_ids:
            return t  # an argument: kept (the recomputation starts from it anyway)
        self.meta.append((tuple(t.shape), t.dtype))
        return len(self.meta) - 1

    def unpack(self, packed):
        if isinstance(packed, Tensor):
            return packed
        if self.values is None or packed not in self.values:
            self._recompute()
        return self.values[packed]

    def _recompute(self) -> None:
        values: dict = {}
        n = len(self.meta)

        def pack(t):
            # the recomputation's own tape keeps the same tensors (no copies): a backward
            # with create_graph=True differentiates through it, as through the original
            if id(t) not in self.arg_ids:
                values[len(values)] = t
                if self.early_stop and len(values) == n:
                    raise _Stop
            return t

        state = _random.default_generator.json_state()
        region = _autocast.set_region(self.autocast)
        try:
            if self.rng is not None:
                _random.default_generator.set_state(self.rng)
            with enable_grad(), self.context, saved_tensors_hooks(pack, _identity):
                self.function(*self.args, **self.kwargs)
        except _Stop:
            pass
        finally:
            _autocast.set_region(region)
            _random.default_generator.set_state(state)
        self._checked(values)
        self.values = values

    def _checked(self, values: dict) -> None:
        if len(values) != len(self.meta):
            raise CheckpointError(
                f"ember.utils.checkpoint: a different number of tensors was saved during the "
                f"original forward ({len(self.meta)}) and the recomputation ({len(values)}); "
                "the checkpointed function must compute the same ops when run again (no "
                "branching on global state)",
                op="checkpoint",
            )
        if self.check == "none":
            return
        wrong = [
            f"tensor {k}: saved {shape} {dtype}, recomputed {tuple(values[k].shape)} "
            f"{values[k].dtype}"
            for k, (shape, dtype) in enumerate(self.meta)
            if (shape, dtype) != (tuple(values[k].shape), values[k].dtype)
        ]
        if wrong:
            shown = wrong if self.debug else wrong[:3]
            raise CheckpointError(
                "ember.utils.checkpoint: recomputed values for the following tensors have "
                "different metadata than during the forward pass: " + "; ".join(shown),
                op="checkpoint",
            )


def _identity(t):
    return t


class _Reentrant(Function):
    """``use_reentrant=True``: PyTorch's ``CheckpointFunction``."""

    @staticmethod
    def forward(ctx, run_function, preserve, *args):
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn(
                "None of the inputs have requires_grad=True. Gradients will be None",
                stacklevel=user_stacklevel(),
            )
        ctx.run_function = run_function
        ctx.rng = _random.default_generator.json_state() if preserve else None
        ctx.autocast = _autocast.region()
        ctx.inputs = list(args)
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_indices])
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = t.detach().requires_grad_(t.requires_grad)
        state = _random.default_generator.json_state()
        region = _autocast.set_region(ctx.autocast)
        try:
            if ctx.rng is not None:
                _random.default_generator.set_state(ctx.rng)
            with enable_grad():
                outputs = ctx.run_function(*inputs)
        finally:
            _autocast.set_region(region)
            _random.default_generator.set_state(state)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        pairs = [
            (o, g)
            for o, g in zip(outputs, grads)
            if isinstance(o, Tensor) and o.requires_grad and g is not None
        ]
        if not pairs:
            raise AutogradError(
                "none of output has requires_grad=True, this checkpoint() is not necessary",
                op="checkpoint",
            )
        from ..autograd import backward

        backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(inp.grad if isinstance(inp, Tensor) else None for inp in inputs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """PyTorch's ``checkpoint_sequential``: ``functions`` (an ``nn.Sequential`` or a list of
    callables) run in ``segments`` chunks, each but the last checkpointed."""
    if use_reentrant is None:
        _reentrant_warning("checkpoint_sequential")
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ArgumentError("Unexpected keyword arguments: " + ",".join(kwargs))
    from ..nn import Sequential

    if isinstance(functions, Sequential):
        functions = list(functions.children())
    functions = list(functions)
    if not isinstance(segments, int) or segments < 1:
        raise ArgumentError(
            f"checkpoint_sequential: segments must be an int >= 1, got {segments!r}"
        )

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(
            run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve
        )
    return run(end + 1, len(functions) - 1)(input)
