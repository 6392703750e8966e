"""``ember.autograd.functional``: PyTorch's higher-level derivatives of a function of tensors
(``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``hvp``, ``vhp``), built on the tape's
`ember.autograd.grad` (eager only); and ``gradcheck`` / ``gradgradcheck``, attached as
``ember.autograd.gradcheck`` / ``gradgradcheck``.

Signatures and return structures follow ``torch.autograd.functional``: a tensor (not a tuple)
for ``inputs`` gives results without the per-input tuple, and likewise for the outputs. The
Jacobian is computed row by row in reverse mode (one backward per output element); ``jvp``
uses the double-vjp trick. ``vectorize=True`` is accepted and computes the same result the same
way. ``strict=True`` raises `AutogradError` where an output does not depend on an input, as
PyTorch does; otherwise such blocks are zeros.
"""

from __future__ import annotations

import numpy as np

from .autograd_grad import grad as _grad
from .dtypes import float64, to_real
from .errors import AutogradError, ShapeError, UnsupportedError
from .grad_mode import enable_grad
from .ops import api as E
from .ops._registry import TensorBase
from .ops.concat import stack
from .tensor import Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp", "gradcheck", "gradgradcheck"]


def _tuple(x, what: str, fn: str) -> tuple[bool, tuple]:
    is_tuple = isinstance(x, (tuple, list))
    items = tuple(x) if is_tuple else (x,)
    for i, t in enumerate(items):
        if not isinstance(t, TensorBase):  # (a graph value too, inside a captured function)
            raise TypeError(
                f"autograd.functional.{fn}: {what} {i} must be a Tensor, got {type(t).__name__}"
            )
    return is_tuple, items


def _prepare(inputs: tuple, create_graph: bool) -> tuple:
    # keep the caller's history only when the result must be differentiable again
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(True))
    return tuple(out)


def _finish(values, create_graph: bool):
    return tuple(v if v is None or create_graph else v.detach() for v in values)


def _grads(outputs, inputs, grad_outputs, create_graph, strict, fn):
    wanted = [o for o in outputs if o.requires_grad]
    if not wanted:
        grads = (None,) * len(inputs)
    else:
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
        grads = _grad(
            [o for o, _ in pairs],
            inputs,
            [g for _, g in pairs],
            retain_graph=True,
            create_graph=create_graph,
            allow_unused=True,
        )
    result = []
    for i, (g, x) in enumerate(zip(grads, inputs)):
        if g is None:
            if strict:
                raise AutogradError(
                    f"the output of the function does not depend on input {i} (strict=True)",
                    op=f"autograd.functional.{fn}",
                )
            g = Tensor._wrap(np.zeros(x.shape, x.dtype.np))
        result.append(g)
    return tuple(result)


def _vector(v, outputs: tuple, fn: str, what: str) -> tuple:
    if v is None:
        for o in outputs:
            if o.numel() != 1:
                raise ShapeError(
                    f"autograd.functional.{fn}: v can be omitted only when the {what} has one "
                    f"element, got shape {tuple(o.shape)}",
                    op=f"autograd.functional.{fn}",
                )
        return tuple(Tensor._wrap(np.ones(o.shape, o.dtype.np)) for o in outputs)
    _, vs = _tuple(v, "v", fn)
    if len(vs) != len(outputs) or any(
        tuple(a.shape) != tuple(b.shape) for a, b in zip(vs, outputs)
    ):
        raise ShapeError(
            f"autograd.functional.{fn}: v has shapes {[tuple(a.shape) for a in vs]}, expected "
            f"{[tuple(b.shape) for b in outputs]}",
            op=f"autograd.functional.{fn}",
        )
    return vs


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), v^T J)``."""
    in_tuple, xs = _tuple(inputs, "input", "vjp")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out = func(*xs)
        out_tuple, outs = _tuple(out, "output", "vjp")
        vs = _vector(v, outs, "vjp", "output")
        grads = _grads(outs, xs, vs, create_graph, strict, "vjp")
    outs = _finish(outs, create_graph)
    grads = _finish(grads, create_graph)
    return (outs if out_tuple else outs[0]), (grads if in_tuple else grads[0])


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), J v)``, by differentiating ``u -> u^T J`` with respect to ``u``."""
    in_tuple, xs = _tuple(inputs, "input", "jvp")
    vs = _vector(v, xs, "jvp", "input")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out = func(*xs)
        out_tuple, outs = _tuple(out, "output", "jvp")
        us = tuple(Tensor._wrap(np.zeros(o.shape, o.dtype.np)).requires_grad_(True) for o in outs)
        g_in = _grads(outs, xs, us, True, strict, "jvp")
        pairs = [(g, w) for g, w in zip(g_in, vs) if g.requires_grad]
        if pairs:
            res = _grad(
                [g for g, _ in pairs],
                us,
                [w for _, w in pairs],
                retain_graph=True,
                create_graph=create_graph,
                allow_unused=True,
            )
        else:
            res = (None,) * len(us)
        res = tuple(
            r if r is not None else Tensor._wrap(np.zeros(o.shape, o.dtype.np))
            for r, o in zip(res, outs)
        )
    outs = _finish(outs, create_graph)
    res = _finish(res, create_graph)
    return (outs if out_tuple else outs[0]), (res if out_tuple else res[0])


def jacobian(
    func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"
):
    """The Jacobian of ``func`` at ``inputs``: for output ``i`` and input ``j`` a tensor of shape
    ``outputs[i].shape + inputs[j].shape``. ``strategy`` is PyTorch's choice of how to compute
    the same matrix; ember builds it from reverse-mode rows either way, after PyTorch's checks
    of the forward-mode arguments (``vectorize=True``, no ``create_graph``)."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise UnsupportedError(
            f"jacobian: strategy must be 'forward-mode' or 'reverse-mode', got {strategy!r}",
            op="autograd.functional.jacobian",
        )
    if strategy == "forward-mode" and not vectorize:
        raise UnsupportedError(
            "jacobian: strategy='forward-mode' is only implemented for vectorize=True",
            op="autograd.functional.jacobian",
        )
    if strategy == "forward-mode" and create_graph:
        raise UnsupportedError(
            "jacobian: create_graph=True and strategy='forward-mode' are not supported together",
            op="autograd.functional.jacobian",
        )
    if strategy == "forward-mode" and strict:
        raise AutogradError(
            "jacobian: strict=True and strategy='forward-mode' are not supported together (as "
            "in PyTorch); set strict=False or strategy='reverse-mode'",
            op="autograd.functional.jacobian",
        )
    in_tuple, xs = _tuple(inputs, "input", "jacobian")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out = func(*xs)
        return jacobian_of_output(out, xs, in_tuple, create_graph, strict)


def jacobian_of_output(out, xs, in_tuple: bool, create_graph: bool, strict: bool = False):
    """`jacobian`'s blocks of ``out``, computed from the inputs ``xs`` (that require grad)."""
    with enable_grad():
        out_tuple, outs = _tuple(out, "output", "jacobian")
        blocks = []
        for o in outs:
            flat = o.reshape(-1)
            rows = [[] for _ in xs]
            for k in range(flat.shape[0]):
                gs = _grads((flat[k],), xs, (None,), create_graph, strict, "jacobian")
                for j, g in enumerate(gs):
                    rows[j].append(g)
            per_input = []
            for j, x in enumerate(xs):
                shape = tuple(o.shape) + tuple(x.shape)
                if rows[j]:
                    block = _stack(rows[j]).reshape(shape)
                else:
                    block = Tensor._wrap(np.zeros(shape, x.dtype.np))
                per_input.append(block if create_graph else block.detach())
            blocks.append(tuple(per_input) if in_tuple else per_input[0])
    return tuple(blocks) if out_tuple else blocks[0]


def _stack(tensors):
    return stack(tensors)


def hessian(
    func,
    inputs,
    create_graph=False,
    strict=False,
    vectorize=False,
    outer_jacobian_strategy="reverse-mode",
):
    """The Hessian of a scalar function: for inputs ``i``, ``j`` a tensor of shape
    ``inputs[i].shape + inputs[j].shape``. ``vectorize`` and ``outer_jacobian_strategy`` go to
    the outer `jacobian`, as PyTorch's (the same matrix; its checks: ``"forward-mode"`` needs
    ``vectorize=True`` and neither ``create_graph`` nor ``strict``)."""
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise UnsupportedError(
            f"hessian: outer_jacobian_strategy must be 'forward-mode' or 'reverse-mode', got "
            f"{outer_jacobian_strategy!r}",
            op="autograd.functional.hessian",
        )
    in_tuple, xs = _tuple(inputs, "input", "hessian")

    def gradient(*args):
        out = func(*args)
        _, outs = _tuple(out, "output", "hessian")
        if len(outs) != 1 or outs[0].numel() != 1:
            raise ShapeError(
                "hessian: the function must return a single tensor with one element",
                op="autograd.functional.hessian",
            )
        g = _grads(outs, args, (None,), True, strict, "hessian")
        return g if in_tuple else g[0]

    x = xs if in_tuple else xs[0]
    return jacobian(gradient, x, create_graph, strict, vectorize, outer_jacobian_strategy)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), v^T H)`` for a scalar ``func``."""
    in_tuple, xs = _tuple(inputs, "input", "vhp")
    vs = _vector(v, xs, "vhp", "input")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out = func(*xs)
        _, outs = _tuple(out, "output", "vhp")
        if len(outs) != 1 or outs[0].numel() != 1:
            raise ShapeError(
                "vhp: the function must return a single tensor with one element",
                op="autograd.functional.vhp",
            )
        g = _grads(outs, xs, (None,), True, strict, "vhp")
        res = _grads(g, xs, vs, create_graph, strict, "vhp")
    res = _finish(res, create_graph)
    value = outs[0] if create_graph else outs[0].detach()
    return value, (res if in_tuple else res[0])


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), H v)``; the Hessian is symmetric, so this equals `vhp`."""
    return vhp(func, inputs, v, create_graph, strict)


def gradcheck(
    func,
    inputs,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    **_ignored,
) -> bool:
    """PyTorch's ``torch.autograd.gradcheck``: compare the tape's Jacobian of ``func`` with
    central finite differences, for every floating input that requires grad (use float64).
    Returns True, or raises `AutogradError` (PyTorch: ``GradcheckError``) naming the output,
    the input and the worst element; ``raise_exception=False`` returns False instead. PyTorch's
    other options (``fast_mode``, ``check_*``, ...) are accepted and ignored."""
    xs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    checked = [i for i, x in enumerate(xs) if isinstance(x, Tensor) and x.requires_grad]

    def outputs_of(args):
        out = func(*args)
        return out if isinstance(out, (tuple, list)) else (out,)

    analytic = []  # per output, per checked input: (numel_out, numel_in)
    with enable_grad():
        outs = outputs_of(xs)
        for o in outs:
            flat = o.reshape(-1)
            rows = []
            for k in range(flat.shape[0]):
                if not flat.requires_grad:
                    rows.append([np.zeros(xs[i].numel()) for i in checked])
                    continue
                gs = _grad(
                    flat[k],
                    [xs[i] for i in checked],
                    retain_graph=True,
                    allow_unused=True,
                )
                rows.append(
                    [
                        np.zeros(xs[i].numel()) if g is None else g.numpy(force=True).reshape(-1)
                        for i, g in zip(checked, gs)
                    ]
                )
            analytic.append(rows)
    for j, i in enumerate(checked):
        base = xs[i].detach().numpy().astype(np.float64)
        for e in range(base.size):
            values = []
            for sign in (1.0, -1.0):
                moved = base.copy().reshape(-1)
                moved[e] += sign * eps
                args = list(xs)
                args[i] = Tensor(moved.reshape(base.shape).astype(xs[i].dtype.np))
                values.append([o.detach().numpy().reshape(-1) for o in outputs_of(args)])
            for n, (hi, lo) in enumerate(zip(*values)):
                numeric = (hi - lo) / (2 * eps)
                exact = np.array([row[j][e] for row in analytic[n]])
                if not np.allclose(exact, numeric, rtol=rtol, atol=atol):
                    if not raise_exception:
                        return False
                    worst = int(np.argmax(np.abs(exact - numeric)))
                    raise AutogradError(
                        f"Jacobian mismatch for output {n} with respect to input {i}, element "
                        f"{e}: analytical {exact[worst]!r} vs numerical {numeric[worst]!r} "
                        f"(output element {worst})",
                        op="gradcheck",
                    )
    return True


def _random_cotangent(out):
    """PyTorch's: ``make_tensor(shape, low=-1, high=1)`` in the output's dtype (double for a
    non-floating one), uniform draws from the default generator, so the draws after a
    gradgradcheck follow PyTorch's as well."""
    d = out.dtype if out.dtype.is_floating_point or out.dtype.is_complex else float64
    shape = tuple(out.shape)
    if d.is_complex:  # (uniform real and imaginary parts, as make_tensor's view_as_real)
        pairs = E.uniform(-1.0, 1.0, (*shape, 2), dtype=to_real(d))
        return E.view_as_complex(pairs).requires_grad_(True)
    return E.uniform(-1.0, 1.0, shape, dtype=d).requires_grad_(True)


def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    **_ignored,
) -> bool:
    """PyTorch's ``torch.autograd.gradgradcheck``: `gradcheck` of the function that maps
    (inputs, grad_outputs) to the gradients of ``func``'s outputs (taken with
    ``create_graph=True``), so second derivatives are compared with finite differences of the
    first. Without ``grad_outputs``, random ones requiring grad, drawn as PyTorch's
    ``make_tensor`` draws them (`_random_cotangent`)."""
    xs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    with enable_grad():
        outs = func(*xs)
    outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
    if grad_outputs is None:
        grad_outputs = tuple(_random_cotangent(o) for o in outs if o.requires_grad)
    gos = tuple(grad_outputs) if isinstance(grad_outputs, (tuple, list)) else (grad_outputs,)
    n = len(xs)
    # the inputs differentiated: those that require grad (gradcheck's finite differences call
    # the function on detached copies: they are made leaves again here)
    wrt_at = [i for i, x in enumerate(xs) if isinstance(x, Tensor) and x.requires_grad]

    def first_derivatives(*args):
        inner, cotangents = list(args[:n]), args[n:]
        with enable_grad():
            for i in wrt_at:
                if not inner[i].requires_grad:
                    inner[i] = inner[i].detach().requires_grad_(True)
            results = func(*inner)
            results = tuple(results) if isinstance(results, (tuple, list)) else (results,)
            wrt = [inner[i] for i in wrt_at]
            # (an input a result does not reach: a zero gradient, constant in every argument)
            return _grads(results, wrt, cotangents, True, False, "gradgradcheck")

    return gradcheck(
        first_derivatives, xs + gos, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception
    )
