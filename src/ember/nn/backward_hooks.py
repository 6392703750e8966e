"""Module backward hooks: ``register_full_backward_hook`` (``hook(module, grad_input,
grad_output)``, which may return a replacement ``grad_input``) and
``register_full_backward_pre_hook`` (``hook(module, grad_output)``, which may return a
replacement ``grad_output``), as in PyTorch.

How: the module's tensor inputs and outputs pass through an identity (a copy) whose gradient
hook sees exactly the gradient of this module's use of them, as PyTorch's BackwardHook does
with an identity autograd Function. ``grad_input`` has one entry per positional argument (None
for non-tensors and for tensors that need no gradient); when no input needs a gradient the hook
runs once ``grad_output`` is known, with ``grad_input`` all None, as in PyTorch.

Where ember differs: the hooks run in eager mode only (a module with backward hooks refuses to
be captured by ``ember.function``/``trace``); and each tensor's gradient is replaced as it is
computed, so a hook may replace ``grad_input`` (or a pre-hook ``grad_output``) only for a module
with one tensor input (output) that needs a gradient: replacing the gradient of one of several
raises an `EmberError` rather than being silently dropped.
"""

from __future__ import annotations

from ..errors import EmberError
from ..grad_mode import is_grad_enabled
from ..graph import scope as _scope
from ..ops import api as E
from ..tensor import Tensor
from ._global_hooks import _global_backward_hooks, _global_backward_pre_hooks


def _needs_grad(value) -> bool:
    # with gradients off (no_grad inference) no backward will run: nothing to watch, as in
    # PyTorch, whose hooks then leave the call alone
    return isinstance(value, Tensor) and value.requires_grad and is_grad_enabled()


def _as_tuple(value, what: str, size: int) -> tuple:
    value = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(value) != size:
        raise EmberError(
            f"a backward hook returned {len(value)} {what} gradient(s), expected {size}",
            op="register_full_backward_hook",
        )
    return value


class BackwardHookState:
    """One forward call's bookkeeping: the input and output gradients as they arrive."""

    def __init__(self, module) -> None:
        if _scope.recording() and is_grad_enabled():
            raise EmberError(
                f"{module._get_name()} has backward hooks, which run in eager mode only; "
                "remove them before capturing with ember.function or ember.trace",
                op="register_full_backward_hook",
            )
        self.module = module
        self.n_args = 0
        self.input_grads: dict[int, Tensor | None] = {}
        self.waiting_inputs: set[int] = set()
        self.grad_outputs: tuple | None = None

    # ------------------------------------------------------------------ inputs
    def setup_inputs(self, args: tuple) -> tuple:
        self.n_args = len(args)
        out = list(args)
        for i, a in enumerate(args):
            if _needs_grad(a):
                out[i] = E.clone(a)
                out[i].register_hook(lambda g, i=i: self._on_input_grad(i, g))
                self.waiting_inputs.add(i)
        self.n_grad_inputs = len(self.waiting_inputs)
        return tuple(out)

    def _on_input_grad(self, i: int, g):
        self.input_grads[i] = g
        self.waiting_inputs.discard(i)
        if self.waiting_inputs:
            return None
        grads = tuple(self.input_grads.get(k) for k in range(self.n_args))
        result = self._run_hooks(grads)
        changed = [k for k in range(self.n_args) if result[k] is not grads[k]]
        if any(k != i for k in changed):
            raise EmberError(
                "a backward hook replaced the gradient of one of several inputs; ember replaces "
                "grad_input only for modules with one tensor input that needs a gradient",
                op="register_full_backward_hook",
            )
        return result[i] if i in changed else None

    def _run_hooks(self, grads: tuple) -> tuple:
        for hook in [*_global_backward_hooks.values(), *self.module._backward_hooks.values()]:
            result = hook(self.module, grads, self.grad_outputs)
            if result is not None:
                grads = _as_tuple(result, "input", self.n_args)
        return grads

    # ----------------------------------------------------------------- outputs
    def setup_outputs(self, output):
        single = not isinstance(output, (tuple, list))
        outs = (output,) if single else tuple(output)
        self.n_outputs = len(outs)
        self.output_grads: list = [None] * len(outs)
        self.waiting_outputs = {j for j, o in enumerate(outs) if _needs_grad(o)}
        wrapped = list(outs)
        for j in self.waiting_outputs:
            wrapped[j] = E.clone(outs[j])
            wrapped[j].register_hook(lambda g, j=j: self._on_output_grad(j, g))
        if single:
            return wrapped[0]
        return type(output)(wrapped) if isinstance(output, list) else tuple(wrapped)

    def _on_output_grad(self, j: int, g):
        self.output_grads[j] = g
        self.waiting_outputs.discard(j)
        if self.waiting_outputs:
            return None
        grads = tuple(self.output_grads)
        pre_hooks = [
            *_global_backward_pre_hooks.values(),
            *self.module._backward_pre_hooks.values(),
        ]
        for hook in pre_hooks:
            result = hook(self.module, grads)
            if result is not None:
                grads = _as_tuple(result, "output", self.n_outputs)
        changed = [k for k in range(self.n_outputs) if grads[k] is not self.output_grads[k]]
        if any(k != j for k in changed):
            raise EmberError(
                "a backward pre-hook replaced the gradient of one of several outputs; ember "
                "replaces grad_output only for modules with one output that needs a gradient",
                op="register_full_backward_pre_hook",
            )
        self.grad_outputs = grads
        if self.n_grad_inputs == 0:  # nothing upstream: the hooks run now, as in PyTorch
            self._run_hooks((None,) * self.n_args)
        return grads[j] if j in changed else None
