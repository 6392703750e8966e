"""The function transforms ``ember.grad`` and ``ember.value_and_grad`` (as ``jax.grad``).

``grad(fn)(*args)`` runs ``fn`` with a `GraphBuilder` recording and appends the backward pass
of its scalar output (graph/autodiff.py, `backward_graph_values`). Called on eager tensors, it
builds a graph of the forward and backward pass, compiles it with the code generator and returns
eager tensors. Called while a graph is being built (on symbolic tensors, or inside
``ember.trace`` / another grad), it records into that graph and returns symbolic tensors. No
compiled graph is cached between calls: ``fn`` may read Python state or closed-over tensors that
change between calls, and a stale graph would be wrong silently.

The transforms differentiate with respect to *fresh* values: eager arguments become new graph
inputs, and symbolic arguments (a nested grad) pass through a ``copy`` node, so a function
closing over the same tensor sees it as a constant (no perturbation confusion).
"""

from __future__ import annotations

import functools

from .. import dtypes as dt
from ..errors import DTypeError, EmberError
from ..grad_mode import enable_grad
from ..graph.autodiff import backward_graph_values
from ..graph.builder import GraphBuilder
from ..graph.ir import Graph
from ..graph.symbolic_tensor import SymbolicTensor
from ..graph.tree import flatten, unflatten
from ..ops import _registry as _reg
from ..ops._registry import TensorBase
from ..ops.copies import clone
from ..ops.creation import full, tensor
from ..runtime.codegen import compile_graph
from ..tensor import Tensor
from ..types import TensorType
from .signature import parameter_names

__all__ = ["grad", "value_and_grad"]


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
    if not dt.differentiable(arg.dtype):
        raise DTypeError(
            f"argument {i} has dtype {arg.dtype}; only floating-point and complex inputs can be "
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
    # as torch.func.grad: a no_grad region around the transform does not stop it, one inside
    # ``fn`` does
    with builder, enable_grad():
        out = fn(*args)
    out, aux = _check_output(out, has_aux, name)
    with builder:
        out = SymbolicTensor(builder.value_of(out), builder)
        ones = full((), fill_value=1, dtype=out.dtype)
    # values ``fn`` computed under no_grad pass no gradient on, as eagerly
    wrt = [args[i] for i in argnums]
    grads = backward_graph_values(builder, [out], wrt, [ones], builder.no_grad_values)
    return out, aux, grads


def _symbolic_call(builder, fn, args, argnums, has_aux, name):
    args = list(args)
    with builder:
        for i in argnums:
            # a fresh value to differentiate: a closed-over use of the same tensor stays constant
            args[i] = clone(SymbolicTensor(builder.value_of(args[i]), builder))
    # (the gradients are values of the enclosing graph, which may differentiate them again)
    builder.nested_grads += 1
    try:
        return _record(builder, fn, args, argnums, has_aux, name)
    finally:
        builder.nested_grads -= 1


def _eager_call(fn, args, argnums, has_aux, name):
    graph_name = f"grad_{getattr(fn, '__name__', 'fn')}"
    builder = GraphBuilder(Graph(graph_name if graph_name.isidentifier() else "grad"))
    names = parameter_names(fn, len(args))
    graph_args, feeds = [], []
    for arg_name, arg in zip(names, args):
        if isinstance(arg, Tensor):
            graph_args.append(builder.input(TensorType(arg.shape, arg.dtype), arg_name))
            feeds.append(arg._data)  # (read by the graph, not handed out)
        else:
            graph_args.append(arg)
    out, aux, grads = _record(builder, fn, graph_args, argnums, has_aux, name)
    aux_leaves, _, aux_spec = flatten(aux, "the aux output", op=name) if has_aux else ([], [], None)
    builder.graph.set_outputs([builder.value_of(t) for t in [out, *aux_leaves, *grads]])
    compiled = compile_graph(builder.graph)
    results = [Tensor._wrap(r) for r in compiled(*feeds, *(t._data for t in builder.captured))]
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
