"""Custom autograd functions: ``ember.autograd.Function``, PyTorch's API for a forward pass with a
hand-written backward.

A subclass defines ``forward`` and ``backward`` as static methods; ``MyFn.apply(*args)`` runs
``forward`` with grad mode off and, when grad mode is on and a tensor argument requires grad,
makes one tape node (`BackwardCFunction`, which is also the ``ctx`` that ``forward`` saw) the
``grad_fn`` of every floating-point output. The engine in ``autograd.py`` runs that node like any
other: its ``apply`` calls the user's ``backward(ctx, *grad_outputs)`` and checks what comes back
(one gradient per ``forward`` argument; ``None`` for non-tensor arguments; shapes must match, or
reduce to, the argument's shape). Both PyTorch styles work: ``forward(ctx, *args)``, and
``forward(*args)`` with a separate ``setup_context(ctx, inputs, output)``.

Capture: while a graph is built with gradients on, ``apply`` records ``forward``'s ops with
gradients off on cut copies of the arguments (graph autodiff must not differentiate them: the
user's backward says what their gradient is) and passes the differentiable outputs through one
``autograd_function`` node (ops/function_call.py) whose VJP calls ``backward``, with the saved
tensors rebound to the node's operands; so ``ember.function``, ``ember.compile``, ``ember.grad``
and a captured training step use the hand-written backward, as eager autograd does. A saved
argument is the argument itself, so gradients of gradients flow through it. An argument
``forward`` wrote in place and marked dirty (``mark_dirty``) is rebound, as by an in-place op,
to the node's output for it, and returned itself; with gradients off the graph records
``forward``'s ops as they are.

This module sits above ``autograd.py`` (it builds on the engine's edges); ``ember/__init__.py``
attaches `Function`, `FunctionCtx` and `once_differentiable` to ``ember.autograd``.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from . import autograd_node_hooks as _node_hooks
from . import dtypes as _dt
from ._views import MULTI_OUTPUT
from .autograd_accumulate import _sequence
from .autograd_node import _edge
from .errors import AutogradError, ShapeError
from .grad_mode import is_grad_enabled, no_grad
from .ops import _node_names
from .ops import _registry as _reg
from .ops._registry import TensorBase
from .ops.copies import stop_gradient
from .ops.creation import full
from .ops.function_call import AUTOGRAD_FUNCTION
from .ops.reduce import sum_to
from .ops.sparse_tensor import SparseTensor
from .tensor import Tensor
from .types import TensorType

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable"]

_FREED = object()


class _ForwardOnlyCtx:
    """The ``ctx`` of a Function recorded into a graph with gradients off: forward's marks are
    accepted and nothing is kept for a backward that never runs."""

    def __init__(self, needs_input_grad: tuple) -> None:
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        pass

    def mark_dirty(self, *tensors) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)

    def save_for_forward(self, *tensors) -> None:
        """PyTorch's ``ctx.save_for_forward`` (tensors for a ``jvp`` staticmethod): accepted
        and kept. ember's forward-mode AD derives tangents from ``backward`` (double vjp,
        autograd_forward_ad.py), so ``jvp`` is not called and what it would read is unused."""
        self.saved_for_forward = tensors


class FunctionCtx:
    """What ``forward`` / ``setup_context`` receive as ``ctx``: saves tensors for ``backward``
    and takes the marks PyTorch's context takes. Any other attribute may be set on it freely."""

    def __init__(self, needs_input_grad: tuple = ()):
        self._saved = ()
        self._non_differentiable: set = set()
        self._dirty: set = set()
        self.materialize_grads = True
        self.needs_input_grad = needs_input_grad

    def save_for_backward(self, *tensors) -> None:
        """Keep ``tensors`` (or ``None``s) for ``backward``; an in-place change to one of them
        before ``backward`` reads it makes ``saved_tensors`` raise."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward: argument {i} is a {type(t).__name__}; only tensors and "
                    "None can be saved (keep other values as attributes of ctx)"
                )
        self._saved = tuple(None if t is None else (t, t._vc[0]) for t in tensors)

    def save_for_forward(self, *tensors) -> None:
        """PyTorch's ``ctx.save_for_forward`` (tensors for a ``jvp`` staticmethod): accepted
        and kept. ember's forward-mode AD derives tangents from ``backward`` (double vjp,
        autograd_forward_ad.py), so ``jvp`` is not called and what it would read is unused."""
        self.saved_for_forward = tensors

    @property
    def saved_tensors(self) -> tuple:
        if self._saved is _FREED:
            raise AutogradError(
                f"trying to backward through {self.name()} a second time, but its saved tensors "
                "were freed by the first backward; pass retain_graph=True to the first backward",
                op="backward",
            )
        result = []
        for i, entry in enumerate(self._saved):
            if entry is None:
                result.append(None)
                continue
            t, version = entry
            if t._vc[0] != version:
                raise AutogradError(
                    f"saved tensor {i} of {self.name()} was modified by an in-place operation "
                    f"(it is at version {t._vc[0]}; it was saved at version {version}); "
                    "clone() it before modifying it",
                    op="backward",
                )
            result.append(t)
        return tuple(result)

    def mark_non_differentiable(self, *tensors) -> None:
        """These outputs get no gradient (``requires_grad=False``); ``backward`` still receives
        a gradient argument for each, zeros unless ``set_materialize_grads(False)``."""
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors) -> None:
        """These inputs were modified in place by ``forward`` and are returned as outputs."""
        self._dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        """With False, ``backward`` gets ``None`` (not zeros) for outputs that got no gradient."""
        self.materialize_grads = bool(value)

    def name(self) -> str:
        return "FunctionCtx"


class BackwardCFunction(FunctionCtx):
    """The tape node of one ``Function.apply`` call (and that call's ``ctx``); the engine in
    ``autograd.py`` runs it through the same interface as its own nodes."""

    def __init__(self, cls, args: tuple, record: bool):
        needs = tuple(record and isinstance(a, Tensor) and a._requires_grad for a in args)
        super().__init__(needs)
        self._cls = cls
        self._arg_types = tuple(
            TensorType(a._data.shape, a.dtype) if isinstance(a, Tensor) else None for a in args
        )
        self._edges = tuple(_edge(a) if n else None for a, n in zip(args, needs))
        self.out_types: tuple = ()
        self._pre_hooks = None
        self._retained = None
        self._extras = None
        self._seq = next(_sequence)

    def name(self) -> str:
        return f"{self._cls.__name__}Backward"

    def __repr__(self) -> str:
        return f"<{self.name()}>"

    def release(self) -> None:
        self._saved = _FREED

    register_hook = _node_hooks.register_hook
    register_prehook = _node_hooks.register_prehook
    metadata = _node_hooks.metadata
    next_functions = _node_hooks.next_functions

    _register_output_hook = _node_hooks.register_output_hook

    def apply(self, grads: list) -> tuple:
        # a second backward without retain_graph fails only if backward reads saved tensors
        if self.materialize_grads:
            grads = [
                g if g is not None or t is None else Tensor._wrap(np.zeros(t.shape, t.dtype.np))
                for g, t in zip(grads, self.out_types)
            ]
        result = self._cls.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n = len(self._arg_types)
        _result_count_error(self._cls, result, n)
        return tuple(self._checked(i, g) for i, g in enumerate(result[:n]))

    def _checked(self, i: int, g):
        return _checked_gradient(
            self._cls, i, g, self._arg_types[i], self.needs_input_grad[i], Tensor
        )


def _checked_gradient(cls, i: int, g, expected, needed: bool, tensor_type):
    """Gradient ``g`` that ``cls.backward`` returned for argument ``i`` (of type ``expected``,
    None for a non-tensor argument), checked and fit to the argument's shape and dtype; None
    where none is ``needed``."""
    where = f"{cls.__name__}.backward"
    if g is None:
        return None
    if expected is None:
        raise AutogradError(
            f"{where} returned a gradient for argument {i}, which is not a tensor; "
            "return None for it",
            op="backward",
        )
    if not needed:
        return None
    if isinstance(g, SparseTensor) and tensor_type is Tensor:  # a sparse gradient, as PyTorch's
        if g.shape != tuple(expected.shape):
            raise ShapeError(
                f"{where} returned a sparse gradient of size {tuple(g.shape)} for argument {i} "
                f"of shape {tuple(expected.shape)}",
                op="backward",
            )
        return g if g.dtype == expected.dtype else g.to(expected.dtype)
    if not isinstance(g, tensor_type):
        raise AutogradError(
            f"{where} returned a {type(g).__name__} for argument {i}; expected a tensor",
            op="backward",
        )
    shape = tuple(expected.shape)
    if tuple(g.shape) != shape:
        try:
            ok = np.broadcast_shapes(shape, tuple(g.shape)) == tuple(g.shape)
        except ValueError:
            ok = False
        if not ok:
            raise ShapeError(
                f"{where} returned a gradient of shape {tuple(g.shape)} for argument {i} "
                f"of shape {shape}",
                op="backward",
            )
        g = sum_to(g, shape)
    if g.dtype != expected.dtype:
        g = g.to(expected.dtype)
    return g


def _result_count_error(cls, result: tuple, n: int) -> None:
    if len(result) < n or any(g is not None for g in result[n:]):
        raise AutogradError(
            f"{cls.__name__}.backward returned {len(result)} gradients, but forward "
            f"took {n} arguments; return one per argument (None for those without one)",
            op="backward",
        )


class Function:
    """Base class of custom autograd functions (PyTorch's ``torch.autograd.Function``).

    Subclass it with ``@staticmethod forward(ctx, *args)`` and
    ``@staticmethod backward(ctx, *grad_outputs)``, or with ``forward(*args)`` plus
    ``setup_context(ctx, inputs, output)``; call it as ``MyFn.apply(*args)``. ``backward``
    returns one gradient per ``forward`` argument. Captured graphs call the same ``backward``
    (see the module docstring).
    """

    def __init__(self, *args, **kwargs):
        raise AutogradError(
            f"{type(self).__name__} is a custom autograd Function: call it as "
            f"{type(self).__name__}.apply(...), not by making an instance",
            op="Function",
        )

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward as a staticmethod")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError(
            "a Function subclass must define backward as a staticmethod to be differentiated"
        )

    vjp = backward

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Overridden (with a ``forward`` that takes no ctx) in the separate-setup style."""
        raise NotImplementedError

    @classmethod
    def _new_style(cls) -> bool:
        return cls.setup_context is not Function.setup_context

    @classmethod
    def apply(cls, *args, **kwargs):
        if cls._new_style():
            # as PyTorch: keywords and defaults bind to forward's signature, so setup_context
            # and backward see every argument positionally
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args = bound.args
        elif kwargs:
            raise TypeError(
                f"{cls.__name__}.apply takes positional arguments only (keywords need the "
                f"setup_context style, as in PyTorch), got keywords {sorted(kwargs)}"
            )
        capturing = _reg.current_mode() is not _reg._base_mode[0]
        if not is_grad_enabled() and (
            capturing or any(isinstance(a, TensorBase) and not isinstance(a, Tensor) for a in args)
        ):
            # nothing is differentiated: the graph records forward's ops as they are
            ctx = _ForwardOnlyCtx(tuple(False for _ in args))
            if cls._new_style():
                out = cls.forward(*args)
                cls.setup_context(ctx, args, out)
                return out
            return cls.forward(ctx, *args)
        if capturing or any(isinstance(a, TensorBase) and not isinstance(a, Tensor) for a in args):
            return _apply_recorded(cls, args)
        record = is_grad_enabled() and any(isinstance(a, Tensor) and a._requires_grad for a in args)
        # (its class PyTorch's: MyExpBackward for a Function MyExp)
        node_cls = _node_names.node_class(BackwardCFunction, f"{cls.__name__}Backward")
        ctx = node_cls(cls, args, record)
        with no_grad():
            if cls._new_style():
                out = cls.forward(*args)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args)
        if ctx._dirty:
            _bump_dirty(ctx, args)
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        if not record:
            return out
        wrapped = []
        types = []
        for i, o in enumerate(outs):
            if not isinstance(o, Tensor):
                wrapped.append(o)
                types.append(None)
                continue
            differentiable = id(o) not in ctx._non_differentiable and _dt.differentiable(o.dtype)
            if id(o) not in ctx._dirty and (any(o is a for a in args) or o._requires_grad):
                # an input (or a tensor with history of its own) returned as it is: the output
                # is a new alias of it, so that tensor keeps its own history
                alias = Tensor._wrap(o._data)
                alias._vc = o._vc
                o = alias
            elif id(o) in ctx._dirty and o.grad_fn is None and o._requires_grad:
                raise AutogradError(
                    f"{cls.__name__}: a leaf tensor that requires grad was modified in place "
                    "(mark_dirty) by forward",
                    op=f"{cls.__name__}.apply",
                )
            if differentiable:
                o.grad_fn = ctx
                o._output_nr = i
                o._requires_grad = True
                if id(o) not in ctx._dirty:
                    _mark_view(o, args)
            elif id(o) in ctx._dirty:
                o.grad_fn = None
                o._requires_grad = False
            wrapped.append(o)
            types.append(TensorType(o._data.shape, o.dtype))
        # outputs that are not tensors get no gradient; backward sees None for them
        ctx.out_types = tuple(types)
        return wrapped[0] if single else tuple(wrapped)


def _mark_view(out: Tensor, args: tuple) -> None:
    """An output whose memory is an input's (returned as it is, or a view made inside forward)
    refuses in-place writes with history, as PyTorch's (its history could not follow one):
    `_views.refuse_multi_output` names the Function."""
    for a in args:
        if isinstance(a, Tensor) and np.may_share_memory(out._data, a._data):
            out._view_of = (a, MULTI_OUTPUT)
            return


def _bump_dirty(ctx: FunctionCtx, args: tuple) -> None:
    """As PyTorch's ``Function.apply``: each input that ``mark_dirty`` names gets one version
    more (besides its in-place ops' own bumps), and what ``forward`` saved of it is saved at
    that version (it is the output)."""
    bumped = set()
    for a in args:
        if isinstance(a, Tensor) and id(a) in ctx._dirty and id(a._vc) not in bumped:
            bumped.add(id(a._vc))
            a._vc[0] += 1
    if bumped and ctx._saved is not _FREED:
        ctx._saved = tuple(
            (entry[0], entry[0]._vc[0])
            if entry is not None and id(entry[0]._vc) in bumped
            else entry
            for entry in ctx._saved
        )


class _RecordedCtx(FunctionCtx):
    """The ``ctx`` of a Function recorded into a graph with gradients on: it keeps what
    ``forward`` saved as it is (symbolic tensors have no version counters), and while
    ``backward`` runs, ``saved_tensors`` are the values the differentiating pass gave the node."""

    def __init__(self, cls, needs_input_grad: tuple):
        super().__init__(needs_input_grad)
        self._cls = cls
        self._kept: tuple = ()
        self._bound: tuple | None = None

    def save_for_backward(self, *tensors) -> None:
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, TensorBase):
                raise TypeError(
                    f"save_for_backward: argument {i} is a {type(t).__name__}; only tensors and "
                    "None can be saved (keep other values as attributes of ctx)"
                )
        self._kept = tensors

    @property
    def saved_tensors(self) -> tuple:
        return self._kept if self._bound is None else self._bound

    def name(self) -> str:
        return f"{self._cls.__name__}Backward"


class _RecordedBackward:
    """The ``backward`` attribute of one ``autograd_function`` node (ops/function_call.py):
    calls the Function's ``backward`` on the gradients of the node's results."""

    def __init__(self, cls, ctx: _RecordedCtx, args: tuple, diff: list, outs: tuple, slots: list):
        self.cls = cls
        self.ctx = ctx
        self.arg_types = tuple(
            TensorType(tuple(a.shape), a.dtype) if isinstance(a, TensorBase) else None for a in args
        )
        self.diff = diff  # the positions of the arguments that are the node's first operands
        self.saved_pattern = tuple(t is not None for t in ctx._kept)
        self.out_types = tuple(
            TensorType(tuple(o.shape), o.dtype) if isinstance(o, TensorBase) else None for o in outs
        )
        self.slots = slots  # the positions of the forward's outputs the node passes

    def vjp(self, context, grads) -> tuple:
        ctx, cls = self.ctx, self.cls
        inputs = context.inputs
        n_diff = len(self.diff)
        saved = iter(inputs[n_diff : n_diff + sum(self.saved_pattern)])
        needs = [False] * len(self.arg_types)
        for k, i in enumerate(self.diff):
            needs[i] = bool(context.needs_input_grad[k])
        ctx.needs_input_grad = tuple(needs)
        given = [None] * len(self.out_types)
        for j, g in zip(self.slots, grads):
            given[j] = g
        if ctx.materialize_grads:  # the outputs the node does not pass get zeros, as eagerly
            for j, t in enumerate(self.out_types):
                if given[j] is None and t is not None:
                    given[j] = full(t.shape, fill_value=0, dtype=t.dtype)
        ctx._bound = tuple(next(saved) if kept else None for kept in self.saved_pattern)
        try:
            result = cls.backward(ctx, *given)
        finally:
            ctx._bound = None
        if not isinstance(result, tuple):
            result = (result,)
        _result_count_error(cls, result, len(self.arg_types))
        checked = [
            _checked_gradient(cls, i, g, self.arg_types[i], needs[i], TensorBase)
            for i, g in enumerate(result[: len(self.arg_types)])
        ]
        return tuple(checked[i] for i in self.diff) + (None,) * (len(inputs) - n_diff)


def _cut(arg):
    """``arg`` without its history, for ``forward`` to record its ops on; it still says whether
    it requires a gradient, as PyTorch's forward sees its inputs (with grad mode off)."""
    inner = stop_gradient(arg)
    inner._requires_grad = arg.requires_grad
    return inner


def _apply_recorded(cls, args: tuple):
    """``cls.apply(*args)`` while a graph is built with gradients on (or eagerly, through the
    same node, where ``staged_apply`` asks): ``forward``'s ops recorded with gradients off on
    cut copies of the arguments, and its differentiable outputs passed through one
    ``autograd_function`` node (ops/function_call.py) whose VJP is ``backward``. A saved
    argument is saved as the argument itself, so a gradient of the gradient flows through it;
    a saved output is the forward's value, through which none flows."""
    diff = [
        i for i, a in enumerate(args) if isinstance(a, TensorBase) and _dt.differentiable(a.dtype)
    ]
    ctx = _RecordedCtx(cls, tuple(i in diff for i in range(len(args))))
    with no_grad():
        inner = tuple(_cut(a) if i in diff else a for i, a in enumerate(args))
        if cls._new_style():
            out = cls.forward(*inner)
            cls.setup_context(ctx, args, out)
        else:
            out = cls.forward(ctx, *inner)
    single = not isinstance(out, tuple)
    outs = (out,) if single else tuple(out)
    dirty = _dirty_arguments(cls, ctx, args, inner, outs)
    slots = [
        j
        for j, o in enumerate(outs)
        if isinstance(o, TensorBase)
        and _dt.differentiable(o.dtype)
        and id(o) not in ctx._non_differentiable
    ]
    if not diff or not slots:
        return _written_back(out, single, outs, dirty)
    # (a dirty argument is saved as forward left it: its new value, as PyTorch saves it)
    original = {id(t): a for t, a in zip(inner, args) if t is not a and id(t) not in ctx._dirty}
    ctx._kept = tuple(None if t is None else original.get(id(t), t) for t in ctx._kept)
    backward = _RecordedBackward(cls, ctx, args, diff, outs, slots)
    operands = [args[i] for i in diff] + [t for t in ctx._kept if t is not None]
    operands += [outs[j] for j in slots]
    passed = _reg.apply(
        AUTOGRAD_FUNCTION,
        *operands,
        function=cls.__name__,
        outputs=len(slots),
        backward=backward,
    )
    outs = list(outs)
    for j, p in zip(slots, passed):
        outs[j] = p
    return _written_back(outs[0] if single else tuple(outs), single, outs, dirty)


def _dirty_arguments(cls, ctx, args: tuple, inner: tuple, outs: tuple) -> dict:
    """{output position: argument} for the arguments ``forward`` wrote in place and marked
    dirty (it wrote their cut copies; each must be returned, as PyTorch requires)."""
    dirty = {}
    for i, t in enumerate(inner):
        if id(t) not in ctx._dirty:
            continue
        hit = [j for j, o in enumerate(outs) if o is t]
        if not hit:
            raise AutogradError(
                f"{cls.__name__}.forward marked argument {i} dirty (mark_dirty) but does not "
                "return it",
                op=f"{cls.__name__}.apply",
            )
        if args[i] is not t:
            dirty[hit[0]] = args[i]
    return dirty


def _written_back(out, single: bool, outs, dirty: dict):
    """``out`` with each dirty argument rebound, as an in-place op rebinds its tensor, to the
    output ``forward`` returned for it (through the node: its history is the custom
    backward), and returned itself in that output's place, as PyTorch returns it."""
    if not dirty:
        return out
    outs = list(outs)
    for j, arg in dirty.items():
        arg._inplace("mark_dirty", lambda _old, new: new, outs[j])
        outs[j] = arg
    return outs[0] if single else tuple(outs)


def staged_apply(cls, *args):
    """``cls.apply(*args)`` through the ``autograd_function`` node even eagerly (the tape then
    runs its VJP): what a graph records, for tests of the node as an op."""
    return _apply_recorded(cls, args)


def once_differentiable(backward):
    """Decorate a ``backward`` that is not itself differentiable: it runs with grad mode off,
    so a ``create_graph=True`` backward through it yields gradients without history."""

    @functools.wraps(backward)
    def wrapper(ctx, *grad_outputs):
        with no_grad():
            return backward(ctx, *grad_outputs)

    return wrapper
