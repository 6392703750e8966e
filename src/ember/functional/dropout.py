"""Dropout: elementwise (``dropout``) and whole-channel (``dropout1d/2d/3d``) as composites of
``bernoulli`` and a multiply.

In training, each element (or each channel of each sample) is kept with probability ``1 - p``
and scaled by ``1 / (1 - p)``, so the expected value is unchanged; outside training the input is
returned as is. Complex tensors pass where no mask is drawn (outside training, p = 0 or 1, no
elements), as in PyTorch, whose Bernoulli draw refuses them otherwise. Masks are
Bernoulli(1 - p) draws from the given ``generator`` (the default generator otherwise), so a seed
makes them reproducible, and PyTorch's after the same seed (its ``bernoulli_(1 - p)``: a double
uniform draw per element, ember/random_streams.py). PyTorch draws an elementwise mask into
``empty_like(input)``, which keeps a strided input's layout, in memory order: a transposed input
(the attention output of a batch_first MultiheadAttention, which a TransformerEncoderLayer
drops out) or a channels-last one gets its draws in that order too (`memory_order_mask`).
The gradient is the same mask times the same scale.
"""

from __future__ import annotations

import warnings

from ..errors import ArgumentError, ShapeError, user_stacklevel
from ..ops import _item_scalars as _items
from ..ops import api as E
from ..ops._registry import export
from ..ops._util import fmt_shape
from ..ops.promotion import to_tensor
from ..ops.random import bernoulli_scalar
from ._common import float_input, refuse_complex_draw


def _check_p(op: str, p) -> float:
    # (a traced .item() probability: the mask's draw and the scale need the number)
    _items.refuse(p, op, "p", "the probability as a number, to check it and scale by it")
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ArgumentError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")
    return p


def memory_order_mask(x, keep: float, generator):
    """Bernoulli(keep) draws of x's shape, made in the order of x's elements in memory (as
    PyTorch's ``empty_like(x).bernoulli_(keep)``: its strides sorted, largest first), so the
    mask of a strided view is PyTorch's."""
    shape = tuple(x.shape)
    if not all(isinstance(d, int) for d in shape) and x.is_contiguous():
        # (a symbolic size, which may not be compared with 1 while the graph is built: a
        # contiguous tensor's elements are in C order whatever its sizes)
        return bernoulli_scalar(shape, keep, dtype=x.dtype, generator=generator)
    strides = x.stride() if len(shape) > 1 else (1,) * len(shape)
    # dims from the slowest-varying in memory to the fastest (size-1 dims anywhere: they
    # hold one element)
    order = sorted(range(len(shape)), key=lambda d: (-strides[d] if shape[d] > 1 else 0, d))
    moving = [d for d in order if shape[d] > 1]  # (a dim of size 1 holds one element)
    if moving == sorted(moving):
        return bernoulli_scalar(shape, keep, dtype=x.dtype, generator=generator)
    permuted = tuple(shape[d] for d in order)
    drawn = bernoulli_scalar(permuted, keep, dtype=x.dtype, generator=generator)
    inverse = [order.index(d) for d in range(len(shape))]
    return E.permute(drawn, inverse)


def _masked(op: str, x, p: float, mask_shape: tuple, inplace: bool, generator):
    """``x * mask / (1 - p)`` with a Bernoulli(1 - p) mask of ``mask_shape`` (broadcast)."""
    if p == 1.0:
        scaled_mask = E.zeros(mask_shape, dtype=x.dtype)
    else:
        refuse_complex_draw(op, x)
        if mask_shape == tuple(x.shape):
            mask = memory_order_mask(x, 1.0 - p, generator)
        else:  # (a feature mask: PyTorch draws it into a fresh contiguous tensor)
            mask = bernoulli_scalar(mask_shape, 1.0 - p, dtype=x.dtype, generator=generator)
        scaled_mask = mask * (1.0 / (1.0 - p))
    if inplace:
        return x._inplace(op + "_", lambda t: t * scaled_mask)
    return x * scaled_mask


@export(functional=True)
def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False, *, generator=None):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``."""
    p = _check_p("dropout", p)
    if not training or p == 0.0:  # (the input itself, of any dtype, as PyTorch's)
        return to_tensor(input)
    x = float_input("dropout", input, complex_ok=True)
    return _masked("dropout", x, p, tuple(x.shape), inplace, generator)


def _feature_dropout(op: str, x, p, training, inplace, generator, spatial: int):
    """Drop whole channels: the mask has one entry per (sample, channel), or per channel for an
    unbatched input, broadcast over the ``spatial`` trailing dimensions."""
    x = float_input(op, x, complex_ok=True)
    p = _check_p(op, p)
    if x.ndim not in (spatial + 1, spatial + 2):
        raise ShapeError(
            f"expected a {spatial + 1}-D (unbatched) or {spatial + 2}-D (batched) input, got "
            f"shape {fmt_shape(x.shape)}",
            op=op,
        )
    if not training or p == 0.0:
        return x
    lead = x.ndim - spatial
    mask_shape = tuple(x.shape[:lead]) + (1,) * spatial
    return _masked(op, x, p, mask_shape, inplace, generator)


@export(functional=True, toplevel=False)
def dropout1d(
    input, p: float = 0.5, training: bool = True, inplace: bool = False, *, generator=None
):
    """Channel dropout for (N, C, L) or (C, L) inputs."""
    return _feature_dropout("dropout1d", input, p, training, inplace, generator, spatial=1)


@export(functional=True, toplevel=False)
def dropout2d(
    input, p: float = 0.5, training: bool = True, inplace: bool = False, *, generator=None
):
    """Channel dropout for (N, C, H, W) inputs: the mask has one entry per (sample, channel).

    As in PyTorch, a 3-D input is taken as (N, C, L), i.e. 1-D channel dropout (with a warning);
    other ranks are accepted with a warning and drop along the first two dimensions."""
    x = float_input("dropout2d", input, complex_ok=True)
    if x.ndim != 4:
        warnings.warn(
            f"dropout2d: received a {x.ndim}-D input; its first two dimensions are taken as "
            "(N, C) and whole channels are dropped. Use dropout1d for (N, C, L) inputs, and add "
            "a batch dimension to a (C, H, W) input",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        if x.ndim < 2:
            raise ShapeError(
                f"expected an (N, C, H, W) input, got shape {fmt_shape(x.shape)}", op="dropout2d"
            )
    return _feature_dropout("dropout2d", x, p, training, inplace, generator, spatial=x.ndim - 2)


@export(functional=True, toplevel=False)
def dropout3d(
    input, p: float = 0.5, training: bool = True, inplace: bool = False, *, generator=None
):
    """Channel dropout for (N, C, D, H, W) or (C, D, H, W) inputs."""
    return _feature_dropout("dropout3d", input, p, training, inplace, generator, spatial=3)
