"""Randomized and channel-wise activations and regularizers as composites: ``rrelu`` (and
``rrelu_``), ``alpha_dropout``, ``feature_alpha_dropout``, ``channel_shuffle`` and
``local_response_norm``, with PyTorch's signatures and formulas.

Random draws come from ember's generators (the default one, or ``generator=``), so
``ember.manual_seed`` makes them repeatable; they are not PyTorch's streams, so a seeded run
draws different values than PyTorch's.
"""

from __future__ import annotations

import math

from ..errors import ShapeError
from ..ops import _item_scalars as _items
from ..ops import api as E
from ..ops._node_names import rename_node
from ..ops._registry import apply, export
from ..ops._util import fmt_shape
from ..ops.piecewise import LEAKY_RELU
from ..ops.promotion import to_tensor
from ..ops.random import bernoulli_scalar
from ..ops.rrelu_noise import rrelu_slopes
from ..random import resolve
from ._common import float_input, refuse_complex_draw
from .dropout import _check_p, memory_order_mask


@export(functional=True, toplevel=False)
def rrelu(
    input,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    inplace: bool = False,
    *,
    generator=None,
):
    """Randomized leaky ReLU: ``x`` where ``x > 0``, else ``a * x``; in training each element
    draws its slope ``a`` from U(lower, upper) (the gradient uses the same slopes), outside
    training ``a = (lower + upper) / 2``."""
    x = float_input("rrelu", input)
    if _items.any_item(lower, upper):  # (traced .item()s: their tensors)
        lower, upper = (
            _items.scalar(v, x.dtype, "rrelu", f) if _items.is_item(v) else float(v)
            for v, f in ((lower, "lower"), (upper, "upper"))
        )
        unit = E.rand(tuple(x.shape), generator=generator, dtype=x.dtype) if training else 0.5
        slope = lower + (upper - lower) * unit
    elif training:  # (PyTorch's draws: one per element that is not positive, in order)
        slope = rrelu_slopes(x.detach(), lower, upper, resolve(generator))
    else:
        # outside training: leaky_relu's op with the middle slope (PyTorch's eval rrelu), one
        # pass each way where the selection below took three
        slope = (float(lower) + float(upper)) / 2
        if x.dtype.is_floating_point and math.isfinite(slope):
            middle = slope

            def leaky(t):
                return apply(LEAKY_RELU, t, slope=middle)

            if inplace:
                return x._inplace("rrelu_", leaky)
            return rename_node(leaky(x), "RreluWithNoiseBackward0")

    def fn(t):
        return E.where(t > 0, t, t * slope)

    return x._inplace("rrelu_", fn) if inplace else fn(x)


@export(functional=True, toplevel=False)
def rrelu_(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False):
    """In-place rrelu: writes the result into ``input`` and returns it."""
    return rrelu(input, lower, upper, training, inplace=True)


# -SELU's alpha times its scale: the value a SELU unit saturates to
_ALPHA_PRIME = 1.7580993408473766


def _alpha_dropout(op: str, x, p: float, mask_shape: tuple, inplace: bool, generator):
    """PyTorch's alpha dropout: dropped units take SELU's saturation value, then an affine map
    ``a * (.) + b`` restores zero mean and unit variance: ``x * m * a + (m - 1) * α' a + α' a p``
    with ``m`` ~ Bernoulli(1 - p) and ``a = 1 / sqrt((α'^2 p + 1)(1 - p))``."""
    if p == 1.0:
        fn = lambda t: t * 0.0  # noqa: E731 (PyTorch returns zeros for p = 1)
    else:
        refuse_complex_draw(op, x)
        # PyTorch's noise.bernoulli_(1 - p): a double uniform draw per entry (dropout's)
        if mask_shape == tuple(x.shape):  # (empty_like(input): drawn in its memory order)
            keep = memory_order_mask(x, 1.0 - p, generator)
        else:
            keep = bernoulli_scalar(mask_shape, 1.0 - p, dtype=x.dtype, generator=generator)
        a = 1.0 / math.sqrt((_ALPHA_PRIME**2 * p + 1) * (1 - p))
        shift = (keep - 1.0) * (_ALPHA_PRIME * a) + _ALPHA_PRIME * a * p

        def fn(t):
            return t * (keep * a) + shift

    return x._inplace(op + "_", fn) if inplace else fn(x)


@export(functional=True, toplevel=False)
def alpha_dropout(
    input, p: float = 0.5, training: bool = False, inplace: bool = False, *, generator=None
):
    """Dropout for SELU networks: keeps the input's mean and variance (see `_alpha_dropout`);
    the identity outside training or for ``p = 0``."""
    p = _check_p("alpha_dropout", p)
    if not training or p == 0.0:  # (the input itself, of any dtype, as PyTorch's)
        return to_tensor(input)
    x = float_input("alpha_dropout", input, complex_ok=True)
    return _alpha_dropout("alpha_dropout", x, p, tuple(x.shape), inplace, generator)


@export(functional=True, toplevel=False)
def feature_alpha_dropout(
    input, p: float = 0.5, training: bool = False, inplace: bool = False, *, generator=None
):
    """Alpha dropout of whole channels: one mask entry per (sample, channel) of an input of at
    least 2 dimensions (N, C, ...), broadcast over the rest."""
    op = "feature_alpha_dropout"
    p = _check_p(op, p)
    if not training or p == 0.0:  # (the input itself, of any rank and dtype, as PyTorch's)
        return to_tensor(input)
    x = float_input(op, input, complex_ok=True)
    if x.ndim < 2:
        raise ShapeError(
            f"feature dropout requires at least 2 dimensions in the input, got shape "
            f"{fmt_shape(x.shape)}",
            op=op,
        )
    mask_shape = tuple(x.shape[:2]) + (1,) * (x.ndim - 2)
    return _alpha_dropout(op, x, p, mask_shape, inplace, generator)


@export(functional=True, toplevel=False)
def channel_shuffle(input, groups: int):
    """Rearrange the C channels of an (N, C, *) input as (groups, C / groups) transposed:
    channel ``g * (C / groups) + i`` moves to ``i * groups + g`` (ShuffleNet)."""
    op = "channel_shuffle"

    x = to_tensor(input)
    groups = int(groups)
    if x.ndim <= 2:
        raise ShapeError(
            f"channel_shuffle expects input with > 2 dims, got shape {fmt_shape(x.shape)}", op=op
        )
    if groups <= 0 or x.shape[1] % groups:
        raise ShapeError(
            f"number of channels ({x.shape[1]}) must be divisible by groups ({groups})", op=op
        )
    n, c, rest = x.shape[0], x.shape[1], tuple(x.shape[2:])
    y = E.reshape(x, (n, groups, c // groups) + rest)
    return E.reshape(E.transpose(y, 1, 2), (n, c) + rest)


@export(functional=True, toplevel=False)
def native_channel_shuffle(input, groups: int):
    """PyTorch's name for the same shuffle as `channel_shuffle` (its native kernel); ember's
    differentiates, where PyTorch's has no derivative."""
    return channel_shuffle(input, groups)


@export(functional=True, toplevel=False)
def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
    """``x / (k + alpha * mean(x^2 over size neighbouring channels))^beta`` over dimension 1 of
    an input of at least 3 dimensions; the window is zero-padded (size // 2 before, (size - 1)
    // 2 after) and always divides by ``size``, as PyTorch's average pooling does."""
    op = "local_response_norm"
    x = float_input(op, input)
    if x.ndim < 3:
        raise ShapeError(
            f"expected 3D or higher dimensionality input, got shape {fmt_shape(x.shape)}", op=op
        )
    if x.size == 0:
        return x
    size = int(size)
    c = x.shape[1]
    sq = x * x
    pads = [0, 0] * (x.ndim - 2) + [size // 2, (size - 1) // 2]
    padded = E.pad(sq, pads)
    window = E.narrow(padded, 1, 0, c)
    for i in range(1, size):
        window = window + E.narrow(padded, 1, i, c)
    div = E.pow(window * (float(alpha) / size) + float(k), float(beta))
    return x / div
