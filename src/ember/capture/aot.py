"""Eager gradients through a compiled graph (AOT autograd).

A compiled function called with gradients enabled, whose outputs depend on tensors that require
grad (a model's parameters, an argument with ``requires_grad``), must give outputs that eager
``backward()`` can differentiate, as ``torch.compile`` does. At trace time `add_backward`
records, after the function's own nodes, the backward pass of its floating outputs with respect
to those tensors (the registry's VJPs, via graph/autodiff.py), fed by one cotangent input per
output. The joint graph is then split where the backward begins (transforms/partition.py):

* each call runs only the **forward** graph, which also returns the activations the backward
  needs (checkpoint regions and ``remat_policy`` recompute some in the backward graph instead:
  transforms/checkpoint.py runs on the joint graph before the split), and gives its floating
  outputs one tape node whose inputs are the differentiable tensors;
* when eager autograd reaches that node, its VJP applies a one-off op whose kernel runs the
  **backward** graph on the saved activations and the cotangents.

That backward op has no VJP of its own: a second derivative through a compiled function raises
the usual "no VJP" error instead of silently returning a wrong one. A tensor the backward reads
that was modified in place between the call and ``backward()`` raises too, as in eager.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import AutogradError
from ..graph import interpreter
from ..graph.autodiff import backward_graph_values, depends_on
from ..graph.symbolic_tensor import SymbolicTensor
from ..ops._registry import Cost, OpDef, apply
from ..ops._rules import Complex
from ..ops.copies import clone
from ..types import TensorType

__all__ = ["add_backward", "AutogradPlan"]


def differentiable_inputs(graph, feeds, leaves) -> list[int]:
    """Positions of the graph inputs fed with eager tensors that require grad (captured ones or
    arguments)."""
    positions = []
    for position, feed in enumerate(feeds):
        tensor = feed.eager_tensor(leaves)
        if (
            tensor is not None
            and tensor.requires_grad
            and dt.differentiable(graph.inputs[position].type.dtype)
        ):
            positions.append(position)
    return positions


def add_backward(builder, user_values, wrt_positions) -> tuple | None:
    """Record the backward pass of the floating ``user_values`` with respect to the graph inputs
    at ``wrt_positions``. Returns (backward_start, cotangent input values, gradient values, the
    indices of the ``wrt_positions`` no gradient reaches, per floating user value whether a
    gradient flows to it), or None when no output depends on those inputs."""
    graph = builder.graph
    floating = [v for v in user_values if dt.differentiable(v.type.dtype)]
    wrt = [graph.inputs[p] for p in wrt_positions]
    # (through differentiable ops: a detached result, or one computed under no_grad, carries no
    # gradient and does not require grad, as PyTorch's)
    connected = depends_on(builder, floating, wrt, builder.no_grad_values)
    if not any(connected):
        return None
    start = len(graph.nodes)
    cotangents = [builder.input(v.type, f"grad_{v.name}") for v in floating]
    grads = backward_graph_values(
        builder,
        [SymbolicTensor(v, builder) for v in floating],
        [SymbolicTensor(w, builder) for w in wrt],
        cotangents,
        builder.no_grad_values,
        unreached := [],
    )
    # a gradient the backward does not compute (a cotangent passed through, ``t + 1``'s, or a
    # forward value) is copied by a backward node: the partition returns the backward's
    # outputs from its own nodes, and would otherwise leave it to the forward
    produced = {id(v) for node in graph.nodes[start:] if node.kind != "input" for v in node.outputs}
    values = []
    for g in grads:
        if id(builder.value_of(g)) not in produced:
            with builder:
                g = clone(g)
        values.append(builder.value_of(g))
    return start, [c.value for c in cotangents], values, unreached, connected


class AutogradPlan:
    """The forward and backward graphs of a joint graph, and how to feed them (see the module
    docstring). ``n_forward_outputs``: how many joint outputs the forward produces (the user's
    outputs and the writebacks); ``cotangents``: the joint input positions of the cotangents,
    in the order of the floating user outputs; ``wrt``: the joint input positions
    differentiated, in the order of the backward graph's outputs. ``options``: the
    `CompileOptions` both graphs are optimized (``opt_level``, checked on the joint graph's
    input arrays ``check`` when given) and run (``executor``) with."""

    def __init__(
        self,
        joint,
        backward_start,
        n_forward_outputs,
        cotangents,
        wrt,
        options,
        check=None,
        unreached=(),
        connected=None,
    ):
        from ..transforms import checkpoint
        from ..transforms.partition import partition

        self.checkpoint = None  # what checkpoint regions or the policy moved to the backward
        if options.remat_policy is not None or checkpoint.has_regions(joint):
            joint, self.checkpoint = checkpoint.recompute(
                joint, options.remat_policy, backward_start=backward_start
            )
        from ..transforms.pipeline import passes_for
        from ..transforms.scatter_masks import SCATTER_MASKS, move_masks

        if SCATTER_MASKS in passes_for(options.opt_level):
            # before the partition decides what the forward saves: a ReLU's mask read at max
            # pooling's winners is computed from the pooled values, not saved at full size
            move_masks(joint, start=backward_start)
        if options.opt_level:
            from ..transforms.forward_masks import compute_masks_forward

            # a ReLU's mask saved rather than its float result, where only the mask is read
            backward_start = compute_masks_forward(joint, backward_start)
        self.forward, self.backward = partition(joint, backward_start)
        position = {v.name: i for i, v in enumerate(joint.inputs)}
        self.forward_inputs = [position[v.name] for v in self.forward.inputs]
        self.n_forward_outputs = n_forward_outputs
        self.n_saved = len(self.forward.outputs) - n_forward_outputs
        self.backward_inputs = [position[v.name] for v in self.backward.inputs[self.n_saved :]]
        self.cotangents = {p: k for k, p in enumerate(cotangents)}
        self.wrt = wrt
        self.wrt_types = [joint.inputs[p].type for p in wrt]
        # the wrt inputs no gradient reaches: their gradient is None, not zeros, as PyTorch's
        # (an optimizer skips a parameter whose .grad is None: no decay, no momentum step)
        self.unreached = frozenset(unreached)
        # per floating output, whether it depends on a differentiated input (the others do not
        # require grad, as PyTorch's)
        self.connected = connected
        self.pass_stats = []
        if options.opt_level:
            self._optimize(options.opt_level, check)
        self.executor = options.runner
        self.forward_program = self.executor.prepare(self.forward)
        self.backward_program = self.executor.prepare(self.backward)
        self.op = OpDef(
            name="compiled_function",
            kind="control",
            infer=None,
            kernel=None,
            vjp=self._vjp,
            cost=lambda *a: Cost(0, 0),
            save_inputs=(),
            doc="a call of a compiled function whose backward is its AOT backward graph",
            complex=Complex.GRADIENT,  # (its graphs' ops checked the rule when recorded)
        )
        self.backward_op = OpDef(
            name="compiled_function_backward",
            kind="control",
            infer=self._backward_infer,
            kernel=self._backward_kernel,
            vjp=None,
            cost=lambda *a: Cost(0, 0),
            num_outputs=len(wrt),
            doc="the AOT backward graph of a compiled function",
            complex=Complex.GRADIENT,
        )

    def _optimize(self, level, joint_arrays) -> None:
        """Run the pass pipeline on the forward and the backward graph (their inputs and
        outputs stay, so the feeding above holds). ``joint_arrays``: the joint graph's input
        arrays (cotangents None) to check each pass on, or None; the backward is checked on the
        forward's saved values and cotangents of ones."""
        from ..transforms.pipeline import optimize

        check = None
        if joint_arrays is not None:
            check = [joint_arrays[p] for p in self.forward_inputs]
        self.forward, forward_stats = optimize(self.forward, level, check=check, label="forward")
        if check is not None:
            results = interpreter.run(self.forward, check)
            outputs, saved = results[: self.n_forward_outputs], results[self.n_forward_outputs :]
            # the k-th cotangent belongs to the k-th floating output (they come first)
            floating = [
                r for r, v in zip(outputs, self.forward.outputs) if dt.differentiable(v.dtype)
            ]
            check = list(saved)
            for v, p in zip(self.backward.inputs[self.n_saved :], self.backward_inputs):
                if p in self.cotangents:
                    check.append(np.ones_like(floating[self.cotangents[p]], dtype=v.dtype.np))
                else:
                    check.append(joint_arrays[p])
        self.backward, backward_stats = optimize(
            self.backward, level, check=check, label="backward"
        )
        self.pass_stats = forward_stats + backward_stats

    @property
    def parallel_plans(self) -> dict:
        """The parallel executor's plans of the forward and the backward graph."""
        return {
            "forward": self.executor.parallel_plan(self.forward_program),
            "backward": self.executor.parallel_plan(self.backward_program),
        }

    def run_forward(self, arrays: list) -> tuple[list, list]:
        """(the joint graph's forward-produced outputs, the saved activations)."""
        results = self.forward_program(*[arrays[p] for p in self.forward_inputs])
        return results[: self.n_forward_outputs], results[self.n_forward_outputs :]

    def attach(self, outputs, arrays, saved, tensors, sources) -> None:
        """Give the floating ``outputs`` (eager tensors) one tape node over ``tensors`` (the
        eager tensors at the ``wrt`` positions), keeping what the backward will read and the
        versions of the tensors it reads (``sources``: joint input position -> eager tensor)."""
        from ..autograd_node import Node

        floating = [t for t in outputs if dt.differentiable(t.dtype)]
        feeds = {p: arrays[p] for p in self.backward_inputs if p not in self.cotangents}
        versions = [(sources[p], sources[p]._vc[0]) for p in feeds if p in sources]
        attrs = {"saved": saved, "feeds": feeds, "versions": versions, "tensors": tensors}
        node = Node(
            self.op, attrs, tensors, floating, [TensorType(t.shape, t.dtype) for t in floating]
        )
        for i, t in enumerate(floating):
            if self.connected is not None and not self.connected[i]:
                continue
            t.grad_fn = node
            t._output_nr = i
            t._requires_grad = True

    def _vjp(self, ctx, *cotangents):
        for tensor, version in ctx.attrs["versions"]:
            if tensor._vc[0] != version:
                raise AutogradError(
                    f"a tensor of shape {tuple(tensor.shape)} that the compiled function read "
                    f"was modified in place (version {version} -> {tensor._vc[0]}) before "
                    "backward(); its gradient would use the new values",
                    op="backward",
                )
        # the differentiated tensors are inputs too (their arrays are unused): a create_graph
        # backward then links the gradients to them, so differentiating again reaches this
        # op's missing VJP and says so, instead of treating the gradients as constants
        grads = apply(
            self.backward_op,
            *cotangents,
            *ctx.attrs["tensors"],
            saved=ctx.attrs["saved"],
            feeds=ctx.attrs["feeds"],
        )
        grads = grads if isinstance(grads, tuple) else (grads,)
        if self.unreached:
            grads = tuple(None if i in self.unreached else g for i, g in enumerate(grads))
        return grads

    def _backward_infer(self, *operands, saved, feeds):
        return tuple(self.wrt_types) if len(self.wrt_types) != 1 else self.wrt_types[0]

    def _backward_kernel(self, *operands, saved, feeds):
        cotangents = operands[: len(self.cotangents)]
        arrays = list(saved)
        for p in self.backward_inputs:
            arrays.append(cotangents[self.cotangents[p]] if p in self.cotangents else feeds[p])
        results = [np.asarray(r) for r in self.backward_program(*arrays)]
        return results[0] if len(results) == 1 else tuple(results)


def eager_sources(feeds: list, leaves: list) -> dict:
    """Joint input position -> the eager tensor fed there in this call (arguments and
    captured tensors)."""
    sources = {}
    for p, feed in enumerate(feeds):
        tensor = feed.eager_tensor(leaves)
        if tensor is not None:
            sources[p] = tensor
    return sources
