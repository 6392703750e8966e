"""Module backward hooks: ``register_full_backward_hook`` (``hook(module, grad_input,
grad_output)``, which may return a replacement ``grad_input``) and
``register_full_backward_pre_hook`` (``hook(module, grad_output)``, which may return a
replacement ``grad_output``), as in PyTorch.

How, as PyTorch's BackwardHook: the module's tensor inputs, and then its tensor outputs, pass
through one identity autograd Function each (`BackwardHookFunction`, outputs aliasing their
inputs), applied where some tensor of the group requires grad. The outputs' node runs first in
backward: it gets ``grad_output`` (None for an output that got no gradient: unused, or needing
none), runs the pre-hooks, and, where no input requires grad, the hooks with ``grad_input`` all
None (with PyTorch's warning). The inputs' node then gets every input's gradient at once, zeros
for an input that needs none or whose path got none (PyTorch materializes them too), runs the
hooks, and passes on what they return. ``grad_input`` has one entry per positional argument
(None for non-tensors); a module whose output is neither a tensor nor a tuple (a list, a dict)
gets no hook calls, as PyTorch's. The identities' outputs alias their inputs, so an in-place op
on one with history (``ReLU(inplace=True)`` on the module's input) is refused, as PyTorch
refuses it.

Where ember differs: the hooks run in eager mode only (a module with backward hooks refuses to
be captured by ``ember.function``/``trace``).
"""

from __future__ import annotations

import warnings

from ..autograd_function import Function
from ..autograd_node_hooks import check_hook_value
from ..errors import EmberError, TraceError, user_stacklevel
from ..grad_mode import is_grad_enabled
from ..graph import scope as _scope
from ..tensor import Tensor
from ._global_hooks import _global_backward_hooks, _global_backward_pre_hooks


class BackwardHookFunction(Function):
    """Its tensors as they are (aliases); its backward is ``ctx.on_grads``'s."""

    @staticmethod
    def forward(ctx, on_grads, materialize, *tensors):
        ctx.on_grads = on_grads
        ctx.set_materialize_grads(materialize)
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None, None, *ctx.on_grads(grads))


def _check_count(result, what: str, size: int, given: tuple) -> tuple:
    if len(result) != size:
        grads = "grad_output" if what == "pre hook" else "grad_input"
        raise EmberError(
            f"Backward {what} returned an invalid number of {grads}, "
            f"got {len(result)}, but expected {size}",
            op="register_full_backward_hook",
        )
    for before, after in zip(given, result):
        # (PyTorch's module hooks run inside its node hook named "hook", the name its
        # engine's dtype and size check reports)
        check_hook_value(None, before, after, name="hook")
    return tuple(result)


def _through(args, on_grads, materialize: bool):
    """``args`` with its tensors replaced by `BackwardHookFunction`'s outputs, and their
    positions; the same args and None where no tensor requires grad (or gradients are off)."""
    index = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    if not is_grad_enabled() or not any(args[i].requires_grad for i in index):
        return args, None
    outs = BackwardHookFunction.apply(on_grads, materialize, *[args[i] for i in index])
    new = list(args)
    for i, t in zip(index, outs):
        new[i] = t
    return tuple(new), index


def _pack(index, values, size: int) -> tuple:
    packed = [None] * size
    for i, v in zip(index, values):
        packed[i] = v
    return tuple(packed)


class BackwardHookState:
    """One forward call's bookkeeping: the identities around it and ``grad_output``."""

    def __init__(self, module) -> None:
        if _scope.recording() and is_grad_enabled():
            # (a TraceError: ember.compile runs such a module eagerly, as PyTorch's compile
            # breaks its graph there)
            raise TraceError(
                f"{module._get_name()} has backward hooks, which run in eager mode only; "
                "remove them before capturing with ember.function or ember.trace",
                op="register_full_backward_hook",
            )
        self.module = module
        self.n_args = 0
        self.input_index = None
        self.n_outputs = 0
        self.output_index = None
        self.grad_outputs: tuple | None = None

    def _hooks(self) -> list:
        return [*_global_backward_hooks.values(), *self.module._backward_hooks.values()]

    # ------------------------------------------------------------------ inputs
    def setup_inputs(self, args: tuple) -> tuple:
        self.n_args = len(args)
        args, self.input_index = _through(args, self._on_input_grads, True)
        return args

    def _on_input_grads(self, grads: tuple) -> tuple:
        if self.grad_outputs is None:  # (the outputs got no gradient)
            return grads
        packed = _pack(self.input_index, grads, self.n_args)
        for hook in self._hooks():
            result = hook(self.module, packed, self.grad_outputs)
            if result is not None:
                packed = _check_count(result, "hook", self.n_args, packed)
        self.grad_outputs = None
        return tuple(packed[i] for i in self.input_index)

    # ----------------------------------------------------------------- outputs
    def setup_outputs(self, output):
        # as PyTorch's: a tensor or a tuple's tensors; any other output (a list, a dict) is one
        # non-tensor value, so the hooks never see its gradients and do not run
        single = not isinstance(output, tuple)
        outs = (output,) if single else tuple(output)
        self.n_outputs = len(outs)
        outs, self.output_index = _through(outs, self._on_output_grads, False)
        if single:
            return outs[0]
        return outs if type(output) is tuple else type(output)(*outs)  # (a namedtuple)

    def _on_output_grads(self, grads: tuple) -> tuple:
        packed = _pack(self.output_index, grads, self.n_outputs)
        for hook in [
            *_global_backward_pre_hooks.values(),
            *self.module._backward_pre_hooks.values(),
        ]:
            result = hook(self.module, packed)
            if result is not None:
                packed = _check_count(result, "pre hook", self.n_outputs, packed)
        self.grad_outputs = packed
        if self.input_index is None:  # no input requires grad: the hooks run now
            warnings.warn(
                "Full backward hook is firing when gradients are computed with respect to "
                "module outputs since no inputs require gradients.",
                stacklevel=user_stacklevel(),
            )
            nones = (None,) * self.n_args
            for hook in self._hooks():
                result = hook(self.module, nones, packed)
                if result is not None and not (
                    isinstance(result, tuple) and all(g is None for g in result)
                ):
                    raise EmberError(
                        "Backward hook for Modules where no input requires gradient should "
                        "always return None or None for all gradients.",
                        op="register_full_backward_hook",
                    )
            self.grad_outputs = None
        return tuple(packed[i] for i in self.output_index)
