"""Graph autodiff: `backward_graph_values`, ``ember.grad`` and ``ember.value_and_grad``.

This module owns reverse-mode differentiation of a *graph*. It has no gradient rules of its own:
for each call node on a path from the differentiated inputs to the outputs it calls the op's
registered ``vjp`` (the one eager autograd uses) with a context whose saved inputs and outputs
are symbolic tensors, while the `GraphBuilder` is the current mode. The VJP's ember ops are
therefore recorded as new nodes of the same graph, which makes the backward pass plain graph
data (printable, optimizable, compilable) and differentiable again: ``grad(grad(f))`` works
because the inner grad's backward nodes are ordinary ops that have VJPs too.

Invariants:

* only floating-point values carry gradients; integer and bool values are cut off;
* a value reached along several paths gets the sum of the gradients (added before its producer's
  VJP runs, since nodes are visited in reverse topological order);
* a missing cotangent of a multi-output node is zeros of that output's type;
* ``grad``/``value_and_grad`` differentiate with respect to *fresh* values: eager arguments become
  new graph inputs, and symbolic arguments (a nested grad) pass through a ``copy`` node, so a
  function closing over the same tensor sees it as a constant (no perturbation confusion).

Called on eager tensors, ``grad(fn)(*args)`` builds a graph of the forward and backward pass,
compiles it with the code generator and returns eager tensors. Called while a graph is being
built (on symbolic tensors, or inside ``ember.trace`` / another grad), it records into that
graph and returns symbolic tensors. No compiled graph is cached between calls: ``fn`` may read
Python state or closed-over tensors that change between calls, and a stale graph would be wrong
silently.
"""

from __future__ import annotations

import functools

from ..autograd import vjp_results
from ..capture.signature import parameter_names
from ..errors import AutogradError, DTypeError, EmberError, ShapeError
from ..graph import scope as _scope
from ..graph.builder import GraphBuilder
from ..graph.ir import Graph
from ..graph.symbolic_tensor import SymbolicTensor
from ..graph.tree import flatten, unflatten
from ..ops import _registry as _reg
from ..ops._registry import TensorBase, TensorType
from ..ops.copies import clone
from ..ops.creation import full, tensor
from ..runtime.codegen import compile_graph
from ..tensor import Tensor

__all__ = ["backward_graph_values", "grad", "value_and_grad"]


def _differentiable(value) -> bool:
    return value.type.dtype.is_floating_point


def _zeros(builder: GraphBuilder, type: TensorType) -> SymbolicTensor:
    with builder:
        return full(tuple(type.shape), fill_value=0, dtype=type.dtype)


def _grad_or_zeros(builder: GraphBuilder, grads: dict, value) -> SymbolicTensor:
    g = grads.get(id(value))
    return _zeros(builder, value.type) if g is None else g


class _GraphVJPContext:
    """What an op's VJP sees for one graph node: the eager tape `Node`'s interface, with the
    saved inputs/outputs as symbolic tensors of the builder (unsaved ones are None)."""

    __slots__ = ("op", "attrs", "inputs", "outputs", "in_types", "out_types", "needs_input_grad")

    def __init__(self, node, builder: GraphBuilder, needs: tuple):
        op = node.op
        saved_in = range(len(node.inputs)) if op.save_inputs is None else op.save_inputs
        saved_out = op.save_outputs or ()
        self.op = op
        self.attrs = node.attrs
        self.in_types = tuple(v.type for v in node.inputs)
        self.out_types = tuple(v.type for v in node.outputs)
        self.inputs = tuple(
            SymbolicTensor(v, builder) if i in saved_in else None for i, v in enumerate(node.inputs)
        )
        self.outputs = tuple(
            SymbolicTensor(v, builder) if i in saved_out else None
            for i, v in enumerate(node.outputs)
        )
        self.needs_input_grad = needs


def _depends_on(order, wrt_ids: set, stop: set) -> set:
    """ids of the floating values computed from a wrt value (the wrt values included), not
    counting the values in ``stop``."""
    depends = set(wrt_ids)
    for node in order:
        if node.kind == "call" and any(id(v) in depends for v in node.inputs):
            depends.update(id(v) for v in node.outputs if _differentiable(v) and id(v) not in stop)
    return depends


def _feeds(order, out_ids: set) -> set:
    """ids of the nodes whose outputs lead to an output value."""
    live, needed = set(out_ids), set()
    for node in reversed(order):
        if any(id(v) in live for v in node.outputs):
            needed.add(id(node))
            live.update(id(v) for v in node.inputs)
    return needed


def _as_symbolic(builder: GraphBuilder, g) -> SymbolicTensor:
    if isinstance(g, SymbolicTensor):
        return g
    with builder:  # an eager tensor or a Python number a VJP produced: a graph operand
        if isinstance(g, Tensor):
            return SymbolicTensor(builder.value_of(g), builder)
        return full((), fill_value=g)


def _accumulate(builder: GraphBuilder, grads: dict, value, g) -> None:
    g = _as_symbolic(builder, g)
    with builder:
        if tuple(g.shape) != tuple(value.type.shape):
            raise ShapeError(
                f"the VJP returned a gradient of shape {tuple(g.shape)} for %{value.name} of "
                f"shape {tuple(value.type.shape)}",
                op=value.node.target,
            )
        if g.dtype != value.type.dtype:
            g = g.to(value.type.dtype)
        previous = grads.get(id(value))
        grads[id(value)] = g if previous is None else previous + g


def backward_graph_values(
    builder: GraphBuilder, outputs, wrt, cotangents, stop: set | None = None
) -> list:
    """Record the backward pass of ``outputs`` with respect to ``wrt`` into ``builder``'s graph.

    ``outputs``, ``wrt`` and ``cotangents`` are symbolic tensors of ``builder`` (a cotangent per
    output, of its shape); no gradient flows through the values whose ids are in ``stop``.
    Returns one symbolic gradient per ``wrt`` tensor: zeros where no output depends on it.
    """
    out_values = [builder.value_of(o) for o in outputs]
    wrt_values = [builder.value_of(w) for w in wrt]
    order = builder.graph.topological_order()  # a snapshot: backward nodes are added below

    grads: dict = {}  # id(Value) -> SymbolicTensor
    for value, cotangent in zip(out_values, cotangents, strict=True):
        if _differentiable(value):
            _accumulate(builder, grads, value, cotangent)

    wrt_ids = {id(v) for v in wrt_values if _differentiable(v)}
    depends = _depends_on(order, wrt_ids, stop or set())
    needed = _feeds(order, {id(v) for v in out_values})
    for node in reversed(order):
        if node.kind != "call" or id(node) not in needed:
            continue
        needs = tuple(id(v) in depends for v in node.inputs)
        if not any(needs) or not any(id(v) in grads for v in node.outputs):
            continue
        if node.op.vjp is None:
            raise AutogradError(
                f"the op {node.op.name} (node %{node.name}) has no gradient (no VJP is defined)",
                op="grad",
            )
        # the backward nodes of ``node`` (and their accumulations) inherit its scope
        with _scope.entered(node.scope):
            _vjp_into(builder, grads, node, needs)
    return [_grad_or_zeros(builder, grads, v) for v in wrt_values]


def _vjp_into(builder: GraphBuilder, grads: dict, node, needs: tuple) -> None:
    """Record ``node``'s VJP and accumulate the gradients of its inputs into ``grads``."""
    filled = [_grad_or_zeros(builder, grads, v) for v in node.outputs]
    with builder:
        result = node.op.vjp(_GraphVJPContext(node, builder, needs), *filled)
    result = vjp_results(node.op, result, len(node.inputs), "grad")
    for value, need, g in zip(node.inputs, needs, result):
        if need and g is not None:
            _accumulate(builder, grads, value, g)


# ------------------------------------------------------------------------------ grad transforms


def _check_output(out, has_aux: bool, name: str):
    if has_aux:
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise EmberError(
                "with has_aux=True the function must return a pair (scalar output, aux), got "
                f"{type(out).__name__}",
                op=name,
            )
        out, aux = out
    else:
        aux = None
    if not isinstance(out, TensorBase):
        raise EmberError(
            f"the differentiated function must return a scalar tensor, got {type(out).__name__}",
            op=name,
        )
    if tuple(out.shape) != ():
        raise EmberError(
            f"the differentiated function must return a scalar (shape ()), got shape "
            f"{tuple(out.shape)}; reduce it (e.g. .sum() or .mean()) first",
            op=name,
        )
    if not out.dtype.is_floating_point:
        raise DTypeError(
            f"the differentiated function must return a floating-point scalar, got {out.dtype}",
            op=name,
        )
    return out, aux


def _check_wrt(arg, i: int, name: str):
    if isinstance(arg, float):  # a Python float is differentiable: a 0-d tensor of it
        return tensor(arg)
    if isinstance(arg, int):
        raise DTypeError(
            f"argument {i} is the Python int {arg!r}; only floating-point inputs can be "
            "differentiated (pass a float or leave it out of argnums)",
            op=name,
        )
    if not isinstance(arg, TensorBase):
        raise TypeError(
            f"{name}: argument {i} is differentiated (argnums) and must be a tensor, got "
            f"{type(arg).__name__}"
        )
    if not arg.dtype.is_floating_point:
        raise DTypeError(
            f"argument {i} has dtype {arg.dtype}; only floating-point inputs can be "
            "differentiated (cast it with .float() or leave it out of argnums)",
            op=name,
        )
    return arg


def _record(builder, fn, args, argnums, has_aux, name):
    """Run ``fn`` and its backward pass into ``builder``; ``args`` are already graph operands
    (the differentiated ones fresh values). Returns (value, aux, grads) as symbolic tensors.
    The differentiated arguments report ``requires_grad`` inside ``fn``, as a tensor being
    differentiated does eagerly (code that detaches what does not require grad keeps them)."""
    for i in argnums:
        args[i].requires_grad_()
    with builder:
        out = fn(*args)
    out, aux = _check_output(out, has_aux, name)
    with builder:
        out = SymbolicTensor(builder.value_of(out), builder)
        ones = full((), fill_value=1, dtype=out.dtype)
    grads = backward_graph_values(builder, [out], [args[i] for i in argnums], [ones])
    return out, aux, grads


def _symbolic_call(builder, fn, args, argnums, has_aux, name):
    args = list(args)
    with builder:
        for i in argnums:
            # a fresh value to differentiate: a closed-over use of the same tensor stays constant
            args[i] = clone(SymbolicTensor(builder.value_of(args[i]), builder))
    return _record(builder, fn, args, argnums, has_aux, name)


def _eager_call(fn, args, argnums, has_aux, name):
    graph_name = f"grad_{getattr(fn, '__name__', 'fn')}"
    builder = GraphBuilder(Graph(graph_name if graph_name.isidentifier() else "grad"))
    names = parameter_names(fn, len(args))
    graph_args, feeds = [], []
    for arg_name, arg in zip(names, args):
        if isinstance(arg, Tensor):
            graph_args.append(builder.input(TensorType(arg.shape, arg.dtype), arg_name))
            feeds.append(arg.numpy())
        else:
            graph_args.append(arg)
    out, aux, grads = _record(builder, fn, graph_args, argnums, has_aux, name)
    aux_leaves, _, aux_spec = flatten(aux, "the aux output", op=name) if has_aux else ([], [], None)
    builder.graph.set_outputs([builder.value_of(t) for t in [out, *aux_leaves, *grads]])
    compiled = compile_graph(builder.graph)
    results = [Tensor._wrap(r) for r in compiled(*feeds, *(t.numpy() for t in builder.captured))]
    value, rest = results[0], iter(results[1:])
    aux = unflatten(aux_spec, rest) if has_aux else None
    return value, aux, list(rest)


def _normalize_argnums(argnums) -> tuple[tuple[int, ...], bool]:
    if isinstance(argnums, int):
        return (argnums,), True
    argnums = tuple(argnums)
    if not argnums or not all(isinstance(a, int) for a in argnums):
        raise TypeError(f"argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    return argnums, False


def value_and_grad(fn, argnums=0, has_aux: bool = False):
    """A function returning ``(fn(*args), gradient)`` (``((value, aux), gradient)`` with
    ``has_aux``), the gradient of the scalar output with respect to the arguments ``argnums``
    (one tensor for an int, a tuple for a tuple), as in JAX."""
    nums, single = _normalize_argnums(argnums)
    name = "value_and_grad"

    @functools.wraps(fn)
    def wrapper(*args):
        for i in nums:
            if not -len(args) <= i < len(args):
                raise EmberError(
                    f"argnums {argnums!r} asks for argument {i}, but {len(args)} arguments "
                    "were given",
                    op=name,
                )
        positive = tuple(i % len(args) for i in nums)
        args = list(args)
        for i in positive:
            args[i] = _check_wrt(args[i], i, name)
        mode = _reg.current_mode()
        if isinstance(mode, GraphBuilder):
            value, aux, grads = _symbolic_call(mode, fn, args, positive, has_aux, name)
        else:
            value, aux, grads = _eager_call(fn, args, positive, has_aux, name)
        g = grads[0] if single else tuple(grads)
        return ((value, aux), g) if has_aux else (value, g)

    return wrapper


def grad(fn, argnums=0, has_aux: bool = False):
    """The gradient function of ``fn`` (a scalar-valued function of tensors), as ``jax.grad``:
    ``grad(fn)(x)`` is d fn / d x, with x's shape. Composable: ``grad(grad(f))``."""
    inner = value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def wrapper(*args):
        if has_aux:
            (_, aux), g = inner(*args)
            return g, aux
        return inner(*args)[1]

    return wrapper
