"""ONNX's Gradient operator (domain ai.onnx.preview.training): the derivatives of one tensor of
the graph with respect to others, computed by ember's autograd over the nodes between them."""

from __future__ import annotations

from ... import autograd
from ...grad_mode import enable_grad
from .._convert import converter, is_symbolic
from ._common import E

DOMAIN = "ai.onnx.preview.training"


@converter("Gradient", 1, domain=DOMAIN, fold=False)
def _gradient(ctx, *values):
    xs, zs = list(ctx.attr("xs")), list(ctx.attr("zs", []))
    y_name = ctx.attr("y")
    if len(values) != len(xs) + len(zs):
        raise ctx.error(f"takes one input per name of xs and zs ({len(xs) + len(zs)})")
    with enable_grad():
        # the node's inputs are the values at which the derivative is taken: fresh leaves
        # stand for them, and the nodes between them and y run again over those leaves
        # (while a graph is built, the graph's autodiff differentiates with respect to any
        # value: the symbolic inputs themselves are the leaves)
        tensors = [ctx.tensor(v) for v in values]
        symbolic = any(is_symbolic(t) for t in tensors)
        if not symbolic:
            tensors = [t.detach() for t in tensors]
        leaves = tensors[: len(xs)]
        if not symbolic:
            leaves = [t.requires_grad_(True) for t in leaves]
        overrides = dict(zip(xs, leaves))
        overrides.update(zip(zs, tensors[len(xs) :]))
        grown = ctx.runner.replay(ctx.env, overrides, ctx.node)
        y = grown.get(y_name)
        if y is None or not (symbolic or getattr(y, "requires_grad", False)):
            return tuple(E.zeros_like(x) for x in leaves)
        grads = autograd.grad(y, leaves, grad_outputs=E.ones_like(y), allow_unused=True)
    return tuple(E.zeros_like(x) if g is None else g for x, g in zip(leaves, grads))
