"""``ember.func``: PyTorch's ``torch.func`` (function transforms) on ember.

* ``grad``, ``grad_and_value``: gradients on the tape with respect to ``argnums``, each a
  tensor or a tuple, list or dict of them (a dict of parameters, as per-sample gradients
  pass); ``grad_and_value`` returns ``(grad, value)`` (with ``has_aux``, ``(grad, (value,
  aux))``). Composable: inside another transform the result stays differentiable.
* ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``: on the tape (`ember.autograd` and
  ``ember.autograd.functional``); ``jacfwd`` computes the same Jacobian as ``jacrev`` (ember
  differentiates in reverse mode only).
* ``linearize(func, *primals)``: ``(func(*primals), jvp_fn)``; the forward pass and one
  backward pass (with ``create_graph``) run once, and each ``jvp_fn(*tangents)`` is one more
  backward pass through that backward (the double-vjp trick: exact, as ``jvp``).
* ``functional_call(module, params_and_buffers, args, kwargs)``: the module run with some of
  its parameters and buffers replaced by the given tensors (tied weights follow, as PyTorch's
  ``tie_weights=True``), restored afterwards even when the call raises.
* ``vmap(func, in_dims, out_dims, randomness)``: ``func`` mapped over a batch dimension. Each
  example runs as its own call and the results are stacked: any function vmaps (no per-op
  batching rule can be missing), at the cost of one call per example. ``randomness``:
  ``"error"`` (the default) raises when a call draws from the default generator, as PyTorch
  does; ``"different"`` lets every example draw its own numbers; ``"same"`` gives every
  example the same draws (the default generator is reset before each).
* ``stack_module_state(models)``: the models' parameters and buffers stacked by name.
* ``functionalize(func, remove=)``: ``func`` itself in a wrapper: its results, and its writes
  to its arguments, are what PyTorch's functionalized function gives (ember's transforms and
  capture already take in-place ops, which capture rewrites as functional ones).
"""

from __future__ import annotations

import functools

from . import autograd as _autograd
from . import autograd_functional as _functional
from .errors import ArgumentTypeError, EmberError, ShapeError
from .nn.utils.stateless import call_with_tensors
from .ops import api as E
from .ops._registry import TensorBase
from .random import default_generator
from .tensor import Tensor as _Tensor

__all__ = [
    "functional_call",
    "functionalize",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "linearize",
    "replace_all_batch_norm_modules_",
    "stack_module_state",
    "vjp",
    "vmap",
]


# ---------------------------------------------------------------------------- differentiation


def grad(func, argnums=0, has_aux: bool = False):
    """``torch.func.grad``: the gradient of the scalar ``func`` with respect to the arguments
    ``argnums`` (an int: one gradient; a tuple: a tuple), each a tensor or a tuple, list or
    dict of tensors (the gradient has its structure); with ``has_aux``, ``(grad, aux)``."""
    inner = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args):
        g, value = inner(*args)
        return (g, value[1]) if has_aux else g

    return wrapper


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """``torch.func.grad_and_value``: ``(grad, value)``, or ``(grad, (value, aux))``."""
    nums = argnums if isinstance(argnums, tuple) else (argnums,)

    @functools.wraps(func)
    def wrapper(*args):
        for n in nums:
            if not -len(args) <= n < len(args):
                raise ShapeError(
                    f"argnums {n} is out of range for {len(args)} arguments", op="func.grad"
                )
        chosen = [_leaves(args[n]) for n in nums]
        leaves = [leaf for part in chosen for leaf in part]
        # inside another transform (grad of grad, hessian) the inputs carry gradients already:
        # this gradient must then be differentiable in turn
        nested = any(leaf.requires_grad for leaf in leaves)
        outer = _autograd.is_grad_enabled()
        with _autograd.enable_grad():
            # (a leaf that does not require grad beside ones that do, a batch beside
            # parameters under argnums=(0, 1), becomes a fresh leaf of its own)
            fresh = [
                leaf if nested and leaf.requires_grad else leaf.detach().requires_grad_(True)
                for leaf in leaves
            ]
            full, k = list(args), 0
            for n, part in zip(nums, chosen):
                full[n] = _rebuild(args[n], iter(fresh[k : k + len(part)]))
                k += len(part)
            result = func(*full)
            value, aux = result if has_aux else (result, None)
            if not isinstance(value, TensorBase) or value.numel() != 1:
                raise ShapeError(
                    "the function must return a one-element tensor to take its gradient, got "
                    + (
                        f"shape {tuple(value.shape)}"
                        if isinstance(value, TensorBase)
                        else type(value).__name__
                    ),
                    op="func.grad",
                )
            # (differentiable too where the function reads other tensors that require grad)
            nested = nested or _keeps_graph(value, fresh, outer)
            grads = _autograd.grad(value, fresh, create_graph=nested, allow_unused=True)
        grads = [E.zeros_like(x) if g is None else g for g, x in zip(grads, fresh)]
        out, k = [], 0
        for n, part in zip(nums, chosen):
            out.append(_rebuild(args[n], iter(grads[k : k + len(part)])))
            k += len(part)
        g = tuple(out) if isinstance(argnums, tuple) else out[0]
        value = value if nested else value.detach()
        return (g, (value, aux)) if has_aux else (g, value)

    return wrapper


def _keeps_graph(result, fresh, grad_enabled: bool) -> bool:
    """Whether a derivative of ``result`` with respect to ``fresh`` must stay differentiable,
    as torch.func's transforms compose with autograd: with grad mode on (``grad_enabled``, the
    caller's), where ``result`` is computed from a tensor outside ``fresh`` (the detached
    inputs) that requires grad: a parameter the function reads. A graph value (inside a
    captured function) keeps it whenever grad mode is on. (Inputs that require grad themselves,
    inside hessian, keep it too: the callers check those.)"""
    if not grad_enabled:
        return False
    own = {id(x) for x in fresh}
    stack, seen = [], set()
    for t in _leaves(result):
        if not isinstance(t, _Tensor):
            return True
        if t.grad_fn is not None:
            stack.append(t.grad_fn)
        elif t.requires_grad and id(t) not in own:
            return True
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None)
        if variable is not None and id(variable) not in own:
            return True  # (a leaf that requires grad, outside the inputs)
        stack.extend(edge[0] for edge in node._edges if edge is not None)
    return False


def _leaves(tree) -> list:
    """The tensors of a tensor or a tuple, list or dict of them, in order."""
    if isinstance(tree, TensorBase):
        return [tree]
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in _leaves(item)]
    if isinstance(tree, dict):
        return [leaf for item in tree.values() for leaf in _leaves(item)]
    raise TypeError(
        f"a differentiated argument must be a tensor or a tuple, list or dict of tensors, got "
        f"{type(tree).__name__}"
    )


def _rebuild(tree, leaves):
    """``tree`` with its tensors replaced, in order, by ``leaves`` (an iterator)."""
    if isinstance(tree, TensorBase):
        return next(leaves)
    if isinstance(tree, (tuple, list)):
        return type(tree)(_rebuild(item, leaves) for item in tree)
    return {key: _rebuild(item, leaves) for key, item in tree.items()}


def _fresh_leaves(primals: tuple) -> tuple[list, tuple]:
    """The primals' tensors detached as new leaves that require grad, and the primals rebuilt
    on them (each primal a tensor or a tuple, list or dict of them: torch.func's pytrees)."""
    leaves = [leaf for p in primals for leaf in _leaves(p)]
    xs = [leaf.detach().requires_grad_(True) for leaf in leaves]
    it = iter(xs)
    return xs, tuple(_rebuild(p, it) for p in primals)


def vjp(func, *primals, has_aux: bool = False):
    """``torch.func.vjp``: ``(output, vjp_fn)`` (``(output, vjp_fn, aux)`` with ``has_aux``);
    ``vjp_fn(cotangents)`` (shaped as the output: a tensor, or a tuple, list or dict of them)
    returns a tuple with the vector-Jacobian product for each primal, shaped as that primal."""
    with _autograd.enable_grad():
        xs, rebuilt = _fresh_leaves(primals)
        result = func(*rebuilt)
    aux = None
    if has_aux:
        result, aux = result
    outputs = _leaves(result)

    def vjp_fn(cotangents):
        vs = _leaves(cotangents)
        if len(vs) != len(outputs):
            raise ShapeError(
                f"vjp_fn takes one cotangent per output ({len(outputs)}), got {len(vs)}",
                op="func.vjp",
            )
        grads = _autograd.grad(outputs, xs, vs, retain_graph=True, allow_unused=True)
        filled = iter([E.zeros_like(x) if g is None else g for g, x in zip(grads, xs, strict=True)])
        return tuple(_rebuild(p, filled) for p in primals)

    out = _rebuild(result, iter([o.detach() for o in outputs]))
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def jvp(func, primals: tuple, tangents: tuple, *, strict: bool = False, has_aux: bool = False):
    """``torch.func.jvp``: ``(func(*primals), J @ tangents)`` (and ``aux`` with ``has_aux``);
    each primal and its tangent a tensor or a tuple, list or dict of them, alike."""
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise ArgumentTypeError(
            "jvp: primals and tangents must be tuples (as torch.func.jvp's)", op="func.jvp"
        )
    if len(primals) != len(tangents):
        raise ShapeError(f"jvp: {len(primals)} primals but {len(tangents)} tangents", op="func.jvp")
    aux = []

    def plain(*xs):
        out = func(*xs)
        if has_aux:
            out, extra = out
            aux.append(extra)
        return out

    out, jvp_fn = linearize(plain, *primals)
    tangent = jvp_fn(*tangents)
    return (out, tangent, aux[-1]) if has_aux else (out, tangent)


def linearize(func, *primals):
    """``torch.func.linearize``: ``(func(*primals), jvp_fn)`` where ``jvp_fn(*tangents)`` is
    ``J @ tangents`` at ``primals``, shaped as ``func``'s output (a tensor or a tuple, list or
    dict of them; each primal and its tangent likewise). ``func`` runs once; each ``jvp_fn``
    call differentiates the recorded backward pass again (exact; see ``jvp``)."""
    for i, p in enumerate(primals):
        if not _leaves(p):
            raise ArgumentTypeError(
                f"linearize: primal {i} must be a tensor or hold tensors, got {type(p).__name__}",
                op="func.linearize",
            )
    with _autograd.enable_grad():
        xs, rebuilt = _fresh_leaves(primals)
        result = func(*rebuilt)
        outs = _leaves(result)
        diff = [o for o in outs if o.requires_grad]
        us = [E.zeros_like(o.detach()).requires_grad_(True) for o in diff]
        firsts = (
            _autograd.grad(diff, xs, us, retain_graph=True, create_graph=True, allow_unused=True)
            if diff
            else (None,) * len(xs)
        )

    def jvp_fn(*tangents):
        if len(tangents) != len(primals):
            raise ShapeError(
                f"jvp_fn takes one tangent per primal ({len(primals)}), got {len(tangents)}",
                op="func.linearize",
            )
        flat = [leaf for t in tangents for leaf in _leaves(t)]
        if len(flat) != len(xs):
            raise ShapeError(
                f"the tangents hold {len(flat)} tensors, the primals {len(xs)}",
                op="func.linearize",
            )
        for i, (t, x) in enumerate(zip(flat, xs)):
            if tuple(t.shape) != tuple(x.shape):
                raise ShapeError(
                    f"tangent {i} must be a tensor of the primal's shape {tuple(x.shape)}, "
                    f"got {tuple(t.shape)}",
                    op="func.linearize",
                )
        live = [(g, t) for g, t in zip(firsts, flat) if g is not None and g.requires_grad]
        with _autograd.enable_grad():
            res = (
                _autograd.grad(
                    [g for g, _ in live],
                    us,
                    [t.to(g.dtype) for g, t in live],
                    retain_graph=True,
                    allow_unused=True,
                )
                if live
                else (None,) * len(us)
            )
        by_output = {id(o): r for o, r in zip(diff, res)}
        tans = []
        for o in outs:
            r = by_output.get(id(o))
            tans.append(E.zeros_like(o.detach()) if r is None else r.detach())
        return _rebuild(result, iter(tans))

    return _rebuild(result, iter([o.detach() for o in outs])), jvp_fn


def _jacobian_of(func, argnums, has_aux: bool, name: str):
    nums = argnums if isinstance(argnums, tuple) else (argnums,)

    @functools.wraps(func)
    def wrapper(*args):
        aux = []

        def of_chosen(*chosen):
            full = list(args)
            for n, x in zip(nums, chosen, strict=True):
                full[n] = x
            out = func(*full)
            if has_aux:
                out, extra = out
                aux.append(extra)
            return out

        # each chosen argument a tensor or a pytree of them (a dict of parameters): the
        # Jacobian has the output's structure, each of its leaves the inputs' structure
        chosen = tuple(args[n] for n in nums)
        leaves = [leaf for c in chosen for leaf in _leaves(c)]
        outer = _autograd.is_grad_enabled()
        with _autograd.enable_grad():
            xs = _functional._prepare(tuple(leaves), outer)
            fresh = iter(xs)
            out = of_chosen(*(_rebuild(c, fresh) for c in chosen))
        # differentiable where the function reads tensors that require grad: the inputs
        # themselves (inside hessian), or others (the parameters a loss on the Jacobian trains)
        nested = any(x.requires_grad for x in leaves)  # (inside hessian)
        keep = nested or _keeps_graph(out, xs, outer)
        outs = tuple(_leaves(out))
        blocks = _functional.jacobian_of_output(outs, xs, True, keep)

        def by_input(per_leaf):
            parts = iter(per_leaf)
            rebuilt = [_rebuild(c, parts) for c in chosen]
            return tuple(rebuilt) if isinstance(argnums, tuple) else rebuilt[0]

        jac = _rebuild(out, iter([by_input(b) for b in blocks]))
        return (jac, aux[-1]) if has_aux else jac

    wrapper.__name__ = f"{name}({getattr(func, '__name__', 'func')})"
    return wrapper


def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size=None):
    """``torch.func.jacrev``: the Jacobian of ``func`` with respect to ``argnums``."""
    return _jacobian_of(func, argnums, has_aux, "jacrev")


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """``torch.func.jacfwd``: the same Jacobian as `jacrev` (computed in reverse mode)."""
    return _jacobian_of(func, argnums, has_aux, "jacfwd")


def hessian(func, argnums=0):
    """``torch.func.hessian``: the Jacobian of the Jacobian of ``func``."""
    return _jacobian_of(_jacobian_of(func, argnums, False, "jacrev"), argnums, False, "jacfwd")


# ------------------------------------------------------------------------------ modules


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):  # fmt: skip
    """``torch.func.functional_call``: ``module(*args, **kwargs)`` with the named parameters
    and buffers replaced by the given tensors for the call (a dict, or a tuple of dicts)."""
    return call_with_tensors(
        module,
        parameter_and_buffer_dicts,
        args,
        kwargs,
        tie_weights=tie_weights,
        strict=strict,
        op="func.functional_call",
    )


def stack_module_state(models) -> tuple[dict, dict]:
    """``torch.func.stack_module_state``: ``(params, buffers)``, each name mapped to the
    models' tensors stacked along a new first dimension (parameters detached, requiring grad)."""
    models = list(models)
    if not models:
        raise EmberError("needs at least one model", op="func.stack_module_state")
    params = {
        name: E.stack([dict(m.named_parameters())[name].detach() for m in models])
        for name, _ in models[0].named_parameters()
    }
    for p in params.values():
        p.requires_grad_(True)
    buffers = {
        name: E.stack([dict(m.named_buffers())[name] for m in models])
        for name, _ in models[0].named_buffers()
    }
    return params, buffers


def replace_all_batch_norm_modules_(root):
    """``torch.func.replace_all_batch_norm_modules_``: every batch norm in ``root`` (itself
    included) stops tracking running statistics (its buffers become None, so it normalizes with
    the batch's statistics in training and evaluation alike), in place; returns ``root``."""
    from .nn.normalization import _BatchNorm

    for module in root.modules():
        if isinstance(module, _BatchNorm) and module.track_running_stats:
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root


def functionalize(func, *, remove: str = "mutations"):
    """``torch.func.functionalize`` (see the module docstring)."""
    if remove not in ("mutations", "mutations_and_views"):
        raise ValueError(
            f"functionalize: remove must be 'mutations' or 'mutations_and_views', got {remove!r}"
        )

    @functools.wraps(func)
    def functionalized(*args, **kwargs):
        return func(*args, **kwargs)

    return functionalized


# -------------------------------------------------------------------------------------- vmap


def vmap(func, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None):
    """``torch.func.vmap`` (see the module docstring)."""
    if randomness not in ("error", "different", "same"):
        raise ValueError(f"vmap: randomness is 'error', 'different' or 'same', got {randomness!r}")

    @functools.wraps(func)
    def mapped(*args, **kwargs):
        dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise ShapeError(
                f"in_dims has {len(dims)} entries for {len(args)} positional arguments",
                op="vmap",
            )
        sizes = set()
        for arg, d in zip(args, dims):
            _batch_sizes(arg, d, sizes)
        if len(sizes) != 1:
            raise ShapeError(
                "the mapped dimensions must have one size, got "
                + (str(sorted(sizes)) if sizes else "no tensor to map over"),
                op="vmap",
            )
        (size,) = sizes
        start = default_generator.json_state()
        results = []
        for i in range(size):
            if randomness == "same":
                default_generator.set_state(start)
            before = default_generator.json_state()
            results.append(func(*(_select(a, d, i) for a, d in zip(args, dims)), **kwargs))
            if randomness == "error" and default_generator.json_state() != before:
                raise EmberError(
                    "the function drew random numbers; pass randomness='different' or 'same'",
                    op="vmap",
                )
        return _stack(results, out_dims)

    return mapped


def _batch_sizes(arg, d, sizes: set) -> None:
    if d is None:
        return
    if isinstance(arg, TensorBase):
        if not isinstance(d, int):
            raise ShapeError(f"in_dims for a tensor must be an int or None, got {d!r}", op="vmap")
        if arg.ndim == 0 or not -arg.ndim <= d < arg.ndim:
            raise ShapeError(
                f"in_dim {d} is out of range for a tensor of shape {tuple(arg.shape)}", op="vmap"
            )
        sizes.add(arg.shape[d])
    elif isinstance(arg, (tuple, list)):
        for k, item in enumerate(arg):
            _batch_sizes(item, d[k] if isinstance(d, (tuple, list)) else d, sizes)
    elif isinstance(arg, dict):
        for key, item in arg.items():
            _batch_sizes(item, d[key] if isinstance(d, dict) else d, sizes)


def _select(arg, d, i: int):
    if d is None:
        return arg
    if isinstance(arg, TensorBase):
        return E.select(arg, d, i)
    if isinstance(arg, (tuple, list)):
        return type(arg)(
            _select(item, d[k] if isinstance(d, (tuple, list)) else d, i)
            for k, item in enumerate(arg)
        )
    if isinstance(arg, dict):
        return {k: _select(v, d[k] if isinstance(d, dict) else d, i) for k, v in arg.items()}
    return arg


def _stack(results: list, out_dims):
    first = results[0]
    if isinstance(first, TensorBase):
        if not isinstance(out_dims, int):
            raise ShapeError(f"out_dims for a tensor must be an int, got {out_dims!r}", op="vmap")
        return E.stack(results, dim=out_dims)
    if isinstance(first, (tuple, list)):
        parts = [
            _stack(
                [r[k] for r in results],
                out_dims[k] if isinstance(out_dims, (tuple, list)) else out_dims,
            )
            for k in range(len(first))
        ]
        return tuple(parts) if isinstance(first, tuple) else parts
    if isinstance(first, dict):
        return {
            key: _stack(
                [r[key] for r in results], out_dims[key] if isinstance(out_dims, dict) else out_dims
            )
            for key in first
        }
    if isinstance(first, (int, float, bool)):
        return E.tensor(results)
    raise EmberError(
        f"the function returned a {type(first).__name__}; vmap stacks tensors (or tuples, lists "
        "and dicts of them)",
        op="vmap",
    )
