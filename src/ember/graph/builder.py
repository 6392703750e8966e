"""`GraphBuilder`: the dispatch mode that records ops into a `Graph` instead of running them.

While a builder is the current mode (``with builder:``), every ``ops._registry.apply`` call adds a
call node whose output types come from the op's rule (so shape and dtype errors surface at the
user's line, as in eager) and returns `SymbolicTensor`s. An eager `Tensor` met as an operand is
*captured*: it becomes a graph input, fed with the tensor's current data at every run (so a
traced model sees its parameters' later values). ``builder.captured`` lists them in input order.
Python scalars and arrays that ops turn into constants become constant nodes.

State is functionalized. An in-place op on an eager tensor (``p.sub_(lr * g)``, a running mean
update, an optimizer buffer) does not touch the tensor's memory while the graph is built: the
builder records the new value and from then on reads that value wherever the tensor is used
(``rebound``). Whoever runs the graph writes those values back after each run. Reading the data
of a rebound tensor in Python (``.item()``, ``bool()``) would see the stale value, so it raises
`TraceError`.

``tensor.backward()`` on a symbolic tensor records the backward pass into the same graph (the
ops' own VJPs, via graph/autodiff.py) and sets ``.grad`` of every leaf it reaches to a symbolic
tensor, accumulating onto an existing gradient as eager autograd does; then it calls the
leaves' post-accumulate-grad hooks, as the eager engine does, with ``.grad`` symbolic (what
they record lands in the graph: DistributedDataParallel's bucket all-reduces), and then the
``backward_callbacks`` queued during the pass. Leaves are the captured
eager tensors that require grad and the graph inputs declared with ``requires_grad``; values
recorded under ``no_grad`` carry no gradient. The position of the first backward node is kept
(``backward_start``): it is where AOT partitioning splits forward from backward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _views, dtypes
from ..errors import TraceError, user_location
from ..ops import _registry as _reg
from ..ops._util import fit_inplace_result
from ..ops.sparse_tensor import SparseTensor
from ..tensor import GRAD_SLOT, Tensor
from ..types import TensorType
from . import scope as _scope
from .autodiff import backward_graph_values
from .symbolic_tensor import SymbolicTensor

if TYPE_CHECKING:
    from .ir import Graph


class GraphBuilder(_reg.Mode):
    def __init__(self, graph: Graph):
        self.graph = graph
        self.captured: list[Tensor] = []
        self._captured_values: dict[int, object] = {}  # id(tensor) -> its input Value
        self._current: dict[int, object] = {}  # id(tensor) -> the Value standing for it now
        self.rebound: dict[int, Tensor] = {}  # eager tensors updated in place, in update order
        # id(array) -> the captured eager tensors holding that array: a parameter and its
        # ``.data`` / ``.detach()`` aliases, which an in-place update rebinds together
        self._aliases: dict[int, list[Tensor]] = {}
        self.value_reads: list[Tensor] = []  # eager tensors whose values Python read
        self.capture_names: dict[int, str] = {}  # id(tensor) -> input name (module parameters)
        self.capture_grads: dict[int, object] = {}  # id(tensor) -> its .grad when captured
        self.no_grad_values: set[int] = set()  # ids of values recorded with grad disabled
        # whether the backward being recorded is differentiated again (a grad with
        # create_graph): VJPs with a fused first-order path read it (ops/recurrent.py)
        self.differentiable_backward = False
        self.value_hooks: dict = {}  # id(Value) -> {key: hook}: register_hook of graph values
        # id(Value) -> the message backward through the value raises when the backward graph
        # runs: calls PyTorch refuses to differentiate (`refuse_gradient`)
        self.gradient_refusals: dict[int, str] = {}
        self.grad_inputs: list[SymbolicTensor] = []  # symbolic inputs that require grad
        self.retained: list[SymbolicTensor] = []  # values with history that retain_grad()
        self.backward_start: int | None = None  # node count when backward() first ran
        # the values backward() ran from (the losses): what the forward pass computes, which
        # transforms/checkpoint.py finds the forward from when the step returns no loss
        self.backward_roots: list = []
        self.grad_of: dict[int, Tensor] = {}  # id(captured .grad tensor) -> its owner
        self.stepped_optimizers: dict = {}  # id -> (optimizer, its state before its step)
        # called once after the next recorded backward has set every .grad and run the leaves'
        # post-accumulate-grad hooks (DistributedDataParallel checks its reduction finished)
        self.backward_callbacks: list = []
        # how many ember.grad transforms nested in this graph are recording their function
        # now: their gradients stay differentiable (JAX's semantics), so code choosing between
        # a fused op whose backward has no VJP of its own and a differentiable-to-any-order
        # form (nn/rnn.py) picks the latter while this is non-zero
        self.nested_grads = 0
        # the function's own tensor arguments (id(Value) -> their position among the call's
        # tensor leaves), and the values of those the capture specializes on (id(Value) ->
        # array): what `SymbolicTensor.host_value` answers with, or asks for
        self.argument_values: dict[int, int] = {}
        self.host_values: dict[int, object] = {}

    # -------- entering and leaving
    def __enter__(self) -> GraphBuilder:
        _reg.push_mode(self)
        return self

    def __exit__(self, *exc) -> bool:
        popped = _reg.pop_mode()
        assert popped is self, "graph builders must be exited in the order they were entered"
        return False

    # -------- operands
    def input(
        self, type: TensorType, name: str | None = None, requires_grad: bool = False
    ) -> SymbolicTensor:
        """A new graph input of ``type``, as a symbolic tensor (a backward leaf with
        ``requires_grad``)."""
        t = SymbolicTensor(self.graph.add_input(type, name), self)
        if requires_grad:
            t._requires_grad = True
            self.grad_inputs.append(t)
        return t

    def capture(self, tensor: Tensor, name: str | None = None):
        """The graph value standing for eager ``tensor``: its latest functionalized value, or a
        new graph input the first time it is met."""
        value = self._current.get(id(tensor))
        if value is None:
            name = name or self.capture_names.get(id(tensor), "captured")
            value = self.graph.add_input(TensorType(tensor.shape, tensor.dtype), name)
            self._captured_values[id(tensor)] = value
            self._current[id(tensor)] = value
            self.capture_grads[id(tensor)] = GRAD_SLOT.__get__(tensor, Tensor)
            self.captured.append(tensor)
            aliases = self._aliases.setdefault(id(tensor._data), [])
            updated = next((t for t in aliases if id(t) in self.rebound), None)
            aliases.append(tensor)
            if updated is not None:  # (``p.data.copy_(v)`` before p is read: p reads v)
                value = self._current[id(tensor)] = self._current[id(updated)]
                self.rebound[id(tensor)] = tensor
        return value

    def input_value(self, tensor: Tensor):
        """The graph input a captured eager tensor is fed through (None if never captured)."""
        return self._captured_values.get(id(tensor))

    def refuse_gradient(self, tensor, message: str) -> None:
        """Make a gradient through ``tensor`` (a value of this graph) raise ``message`` where
        the backward graph runs, not where graph autodiff records it (at capture time): a
        call PyTorch has no derivative for, or whose backward fails on its operands
        (ops/_saved_operands.py `refuses_backward`; graph/autodiff.py records the check)."""
        if isinstance(tensor, SymbolicTensor) and tensor.builder is self:
            self.gradient_refusals[id(tensor.value)] = message

    # -------- functionalized state (see the module docstring)
    def inplace(self, tensor: Tensor, name: str, fn, args, kwargs) -> Tensor:
        """``tensor.<name>(*args)`` on an eager tensor: record the new value, rebind to it."""
        current = SymbolicTensor(self.capture(tensor), self)
        result = fn(current, *args, **kwargs)
        if not isinstance(result, SymbolicTensor):
            result = SymbolicTensor(self.value_of(result), self)
        result = fit_inplace_result(name, result, tensor)
        # the tensor and every alias of its memory (``p`` after ``p.data.copy_(v)``) read it
        for alias in self._aliases[id(tensor._data)]:
            self._current[id(alias)] = result.value
            self.rebound[id(alias)] = alias
        return tensor

    def take_updates(self) -> list:
        """The pending functionalized updates as (tensor, new value) pairs, in update order.
        Afterwards no tensor is rebound: each reads its graph input (its stored data) again."""
        updates = [(t, self._current[id(t)]) for t in self.rebound.values()]
        for t in self.rebound.values():
            self._current[id(t)] = self._captured_values[id(t)]
        self.rebound.clear()
        return updates

    def note_optimizer(self, optimizer) -> None:
        """Called by ``Optimizer.step`` while recording: remember the optimizer and its state
        as it was, so a failed capture can put it back."""
        if id(optimizer) not in self.stepped_optimizers:
            state = {p: dict(s) for p, s in optimizer.state.items()}
            self.stepped_optimizers[id(optimizer)] = (optimizer, state)

    def restore_optimizers(self) -> None:
        """Undo what recorded optimizer steps did to their optimizers' Python state."""
        for optimizer, state in self.stepped_optimizers.values():
            optimizer.state.clear()
            optimizer.state.update((p, dict(s)) for p, s in state.items())

    def check_read(self, tensor: Tensor, what: str) -> None:
        """Refuse a Python read of an eager tensor whose value the graph has changed; note
        the others (``value_reads``: the graph bakes in what they held, so whoever caches it
        must key it on those values)."""
        self.value_reads.append(tensor)
        if id(tensor) in self.rebound:
            raise TraceError(
                f"{what} of a tensor of shape {tuple(tensor.shape)} that the graph being built "
                "updated in place reads its old value; keep the value in the graph (use ember "
                "ops on it) or read it after the graph runs"
            )

    def scalar(self, tensor):
        """A step counter's value for scalar arithmetic: a float64 0-d symbolic tensor (eager
        code uses a Python float; see ``ops._registry.scalar_value``)."""
        from ..dtypes import float64

        return SymbolicTensor(self.value_of(tensor), self).to(float64)

    # -------- recorded backward passes
    def backward(self, output, gradient=None, inputs=None) -> None:
        """``output.backward(gradient)`` while building: see the module docstring."""
        if self.backward_start is None:
            self.backward_start = len(self.graph.nodes)
        gradient = self._cotangent(output, gradient, TraceError, "backward", "a gradient argument")
        if inputs is None:
            leaves = [t for t in self.captured if t.requires_grad and t.grad_fn is None]
            leaves += self.grad_inputs
            leaves += self.retained  # (their gradients: the cotangents reaching them)
        else:
            leaves = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        out_value = self.value_of(output)
        if not any(out_value is v for v in self.backward_roots):
            self.backward_roots.append(out_value)
        reached = self._ancestors(out_value)
        # a leaf rebound under no_grad since it was captured (see _ancestors) also takes the
        # gradient of its uses before that, as the eager leaf does
        earlier = [
            (k, v)
            for k, t in enumerate(leaves)
            if isinstance(t, Tensor)
            and (v := self._captured_values.get(id(t))) is not None
            and v is not self.value_of(t)
            and id(v) in reached
        ]
        kept = [t for t in leaves if id(self.value_of(t)) in reached]
        if not kept and not earlier:
            return
        values = [self.value_of(t) if id(self.value_of(t)) in reached else None for t in leaves]
        grads = [None] * len(leaves)
        # (the earlier values in a pass of their own: with both as targets, the current value's
        # gradient would flow on through the no_grad update into the earlier one)
        for targets in ([(k, v) for k, v in enumerate(values) if v is not None], earlier):
            if not targets:
                continue
            wrt = [SymbolicTensor(v, self) for _, v in targets]
            found = backward_graph_values(self, [output], wrt, [gradient], self.no_grad_values)
            for (k, _), g in zip(targets, found):
                grads[k] = g if grads[k] is None else grads[k] + g
        pairs = [(t, g) for t, g in zip(leaves, grads) if g is not None]
        if not pairs:
            return
        leaves, grads = zip(*pairs)
        with self:
            for leaf, g in zip(leaves, grads):
                # each leaf its own tensor: two leaves may get one graph value (an LSTM's two
                # biases), and an in-place op on one's .grad (clipping) must not change the other
                g = SymbolicTensor(self.value_of(g), self)
                hooks = getattr(leaf, "_hooks", None)  # an eager leaf's register_hook
                for hook in list(hooks.values()) if hooks else ():
                    replaced = hook(g)
                    if replaced is not None:
                        g = replaced
                if isinstance(leaf.grad, SparseTensor):
                    # a sparse .grad (F.embedding(sparse=True)'s) from an earlier call: adding
                    # to it here would bake its values into the graph as a constant
                    raise TraceError(
                        f"a recorded backward accumulates onto a {type(leaf.grad).__name__} "
                        "gradient the function did not make (a sparse embedding's .grad "
                        "left from an earlier call): zero the gradients before backward, "
                        "inside or outside the function",
                        op="backward",
                    )
                if isinstance(leaf.grad, Tensor) and id(leaf.grad) not in self._current:
                    self.grad_of[id(leaf.grad)] = leaf  # fed with the owner's .grad at run time
                leaf.grad = g if leaf.grad is None else leaf.grad + g
            for leaf in leaves:  # as the eager engine does, once the leaf's .grad is final
                hooks = getattr(leaf, "_post_hooks", None)
                for hook in list(hooks.values()) if hooks else ():
                    hook(leaf)
            callbacks, self.backward_callbacks = self.backward_callbacks, []
            for callback in callbacks:
                callback()

    def _cotangent(self, output, gradient, error, op: str, argument: str):
        """``gradient`` as a symbolic tensor of this graph; for a scalar ``output`` without one,
        the constant 1. A non-scalar output without one raises ``error``."""
        from ..ops.creation import full

        if gradient is not None:
            return (
                gradient
                if isinstance(gradient, SymbolicTensor)
                else SymbolicTensor(self.value_of(gradient), self)
            )
        if tuple(output.shape) != ():
            raise error(
                f"a non-scalar output of shape {tuple(output.shape)} needs {argument}", op=op
            )
        with self:
            return full((), fill_value=1, dtype=output.dtype)

    def grad(
        self, outputs, inputs, grad_outputs, allow_unused: bool, create_graph: bool = False
    ) -> tuple:
        """``ember.autograd.grad(outputs, inputs, grad_outputs)`` while building: the backward
        pass is recorded into the graph (in ember ops, so differentiable again: create_graph
        holds by construction), and no ``.grad`` is touched. An input no output depends on
        gets None with ``allow_unused``, else an AutogradError, as eagerly. With
        ``create_graph`` (and grad mode on) the floating gradients require grad, as eagerly:
        code that differentiates them again (a Hessian as a Jacobian of a Jacobian) checks."""
        from ..errors import AutogradError

        cotangents = [
            self._cotangent(
                out,
                grad_outputs[k] if k < len(grad_outputs) else None,
                AutogradError,
                f"grad of output {k}",
                "grad_outputs",
            )
            for k, out in enumerate(outputs)
        ]
        reached = set()
        for out in outputs:
            reached |= self._ancestors(self.value_of(out))
        used = [id(self.value_of(t)) in reached for t in inputs]
        for i, hit in enumerate(used):
            if not hit and not allow_unused:
                raise AutogradError(
                    f"input {i} was not used to compute the outputs; pass allow_unused=True "
                    "to get None for it",
                    op="grad",
                )
        wrt = [SymbolicTensor(self.value_of(t), self) for t in inputs]
        outs = [SymbolicTensor(self.value_of(o), self) for o in outputs]
        start = len(self.graph.nodes)
        differentiable = create_graph and _reg.is_grad_enabled()
        outer, self.differentiable_backward = self.differentiable_backward, differentiable
        try:
            grads = backward_graph_values(self, outs, wrt, cotangents, self.no_grad_values)
        finally:
            self.differentiable_backward = outer
        if not differentiable:
            # without create_graph the backward pass records no history, as eagerly (it runs
            # under no_grad there): an AOT backward or a later grad does not differentiate it
            # again (a gradient returned from a compiled function, an op with no second
            # derivative on the way)
            for node in self.graph.nodes[start:]:
                self.no_grad_values.update(id(v) for v in node.outputs)
        results = []
        for g, hit in zip(grads, used):
            result = SymbolicTensor(self.value_of(g), self) if hit else None
            if result is not None and differentiable and _differentiable(result.dtype):
                result._requires_grad = True  # (with history: not a leaf)
            results.append(result)
        return tuple(results)

    def _ancestors(self, value) -> set:
        """ids of the values ``value`` is computed from along differentiable paths (PyTorch's
        rule for which leaves a backward reaches: not through a detach, nor through an integer
        or boolean value such as an argmax, whose leaves keep a None ``.grad``)."""
        seen, stack = set(), [value]
        while stack:
            v = stack.pop()
            if id(v) in seen:
                continue
            seen.add(id(v))
            # a value made with gradients off passes none on, but is itself reached: a leaf
            # rebound to it under no_grad (an embedding's max_norm renorm of its weight) takes
            # the gradient of its uses since, as the eager leaf does
            if (
                v.node.kind == "call"
                and id(v) not in self.no_grad_values
                and not v.node.op.stops_gradient
                and dtypes.differentiable(v.type.dtype)
            ):
                stack.extend(v.node.inputs)
        return seen

    def value_of(self, t):
        if isinstance(t, SymbolicTensor):
            if t.builder is not self:
                raise TraceError(
                    f"%{t.value.name} belongs to another graph being built; pass it in as an "
                    "input instead of closing over it"
                )
            return t.value
        if isinstance(t, Tensor):
            return self.capture(t)
        raise TypeError(f"expected an ember tensor, got {type(t).__name__}")

    # -------- the Mode protocol
    def apply(self, op: _reg.OpDef, inputs: tuple, attrs: dict):
        for t in inputs:
            # a view whose base was updated in place since reads the base's new value
            if (
                isinstance(t, SymbolicTensor)
                and t._view_of is not None
                and t.builder is self
                and _views.is_stale(t)
            ):
                _views.refresh(t)
        values = [self.value_of(t) for t in inputs]
        node = self.graph.add_call(op, values, attrs)
        node.scope = _scope.current()
        node.region = _scope.current_region()
        if _scope.locating():
            node.location = user_location()
        outs = [SymbolicTensor(v, self) for v in node.outputs]
        if not _reg._state.grad_enabled:
            self.no_grad_values.update(id(v) for v in node.outputs)
        elif not op.stops_gradient and any(getattr(t, "_requires_grad", False) for t in inputs):
            # requires_grad as eagerly: the floating and complex results of an op on a tensor
            # that requires one (user code branches on it: hooks, checkpointing, Functions)
            for out in outs:
                if _differentiable(out.value.type.dtype):
                    out._requires_grad = True
        source = inputs[0] if op.view else None
        # views are followed within one graph (a loop body's view of an outer value is not)
        if source is not None and (
            not isinstance(source, SymbolicTensor) or source.builder is self
        ):
            for out in outs:
                _views.record(out, source, op, attrs)
        return outs[0] if op.num_outputs == 1 else tuple(outs)

    def constant(self, array) -> SymbolicTensor:
        return SymbolicTensor(self.graph.add_constant(array), self)


def _differentiable(dtype) -> bool:
    """Whether a result of this dtype carries gradients, as eager.py's ``_FLOATING``: the
    floating-point and the complex dtypes."""
    return dtype.is_floating_point or dtype.is_complex
