"""ONNX's training preview operators (domain ``ai.onnx.preview.training``): the optimizer steps
Adagrad, Adam and Momentum (standard and Nesterov), in ember ops.

Each takes the learning rate R and the update count T (scalars), then the optimized tensors X,
their gradients G and their optimizer state (one or two tensors per X), each group listed for
every optimized tensor in turn (X1, X2, G1, G2, H1, H2, ...), and returns the new X's then the
new state in the same grouping. The count T decides a coefficient (``T > 0 ? ... : ...``): a
``where``, so a captured step keeps T an input.
"""

from __future__ import annotations

from .._convert import converter
from ._common import E

_DOMAIN = "ai.onnx.preview.training"


def _groups(ctx, args, per_tensor: int):
    """(R, T, [(X, G, state...) per optimized tensor]) from the node's inputs."""
    if len(args) < 2 + per_tensor or (len(args) - 2) % per_tensor:
        raise ctx.error(
            f"takes R, T and {per_tensor} tensors per optimized tensor, got {len(args)} inputs"
        )
    r, t = ctx.tensor(args[0]), ctx.tensor(args[1])
    n = (len(args) - 2) // per_tensor
    tensors = [ctx.tensor(a) for a in args[2:]]
    groups = [tuple(tensors[i + k * n] for k in range(per_tensor)) for i in range(n)]
    return r, t, groups


def _scalar(value, like):
    """A one-element input as a 0-d tensor of ``like``'s dtype."""
    value = E.reshape(value, ())
    return value if value.dtype == like.dtype else E.cast(value, like.dtype)


@converter("Adagrad", 1, domain=_DOMAIN)
def _adagrad(ctx, *args):
    decay = ctx.attr("decay_factor", 0.0)
    eps = ctx.attr("epsilon", 1e-6)
    norm = ctx.attr("norm_coefficient", 0.0)
    r, t, groups = _groups(ctx, args, 3)
    xs, hs = [], []
    for x, g, h in groups:
        rate = _scalar(r, x) / (_scalar(t, x) * decay + 1.0)
        g = x * norm + g
        h_new = h + g * g
        xs.append(x - rate * g / (E.sqrt(h_new) + eps))
        hs.append(h_new)
    return (*xs, *hs)


@converter("Adam", 1, domain=_DOMAIN)
def _adam(ctx, *args):
    alpha = ctx.attr("alpha", 0.9)
    beta = ctx.attr("beta", 0.999)
    eps = ctx.attr("epsilon", 1e-6)
    norm = ctx.attr("norm_coefficient", 0.0)
    norm_post = ctx.attr("norm_coefficient_post", 0.0)
    r, t, groups = _groups(ctx, args, 4)
    xs, vs, hs = [], [], []
    for x, g, v, h in groups:
        g = x * norm + g
        v_new = v * alpha + g * (1.0 - alpha)
        h_new = h * beta + g * g * (1.0 - beta)
        rate, count = _scalar(r, x), _scalar(t, x)
        # bias correction from the first update on; T = 0 keeps R (the count is clamped to 1
        # there so the unused side of the where divides by no zero)
        steps = E.maximum(count, E.ones_like(count))
        corrected = rate * E.sqrt(1.0 - beta**steps) / (1.0 - alpha**steps)
        rate = E.where(count > 0, corrected, rate)
        x_new = x - rate * (v_new / (E.sqrt(h_new) + eps))
        xs.append(x_new * (1.0 - norm_post))
        vs.append(v_new)
        hs.append(h_new)
    return (*xs, *vs, *hs)


@converter("Momentum", 1, domain=_DOMAIN)
def _momentum(ctx, *args):
    alpha = ctx.attr("alpha")
    beta = ctx.attr("beta")
    norm = ctx.attr("norm_coefficient")
    mode = ctx.attr("mode")
    if mode not in ("standard", "nesterov"):
        raise ctx.error(f"mode must be 'standard' or 'nesterov', got {mode!r}")
    r, t, groups = _groups(ctx, args, 3)
    xs, vs = [], []
    for x, g, v in groups:
        g = x * norm + g
        count = _scalar(t, x)
        # the gradient's coefficient is 1 in the first iteration
        scale = E.where(count > 0, E.full_like(count, beta), E.ones_like(count))
        v_new = v * alpha + g * scale
        rate = _scalar(r, x)
        step = v_new if mode == "standard" else g + v_new * alpha
        xs.append(x - rate * step)
        vs.append(v_new)
    return (*xs, *vs)
