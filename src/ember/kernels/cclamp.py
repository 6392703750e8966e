"""The convolution stores' clamp epilogue as the C kernels read it (kernels/cconv_source.py's
``clamp_one``, kernels/cdepthwise_source.py's ``clamp_plane``): five doubles, lo, hi, whether a
value equal to lo becomes lo, whether one equal to hi becomes hi (ops/_rules.py's `Clamp`), and
how the store's ReLU mask compares the clamped value with zero (``mask_one``: 0, ``v > 0``; 1,
``v != 0``, NaN true, as a graph's ``ne(relu(x), 0)``), then the store's activation after the
clamp (kernels/cconv_activation.py: 1 or 0, then the bits of its loop's and its constants'
addresses), held at a fixed address for as long as the process runs, since C steps keep it in
their argument blocks."""

from __future__ import annotations

import math

import numpy as np

from .cstep import data_address

__all__ = ["clamp_address"]

# (lo, hi, lo takes ties, hi takes ties, mask v != 0, the bounds' signs, dtype) -> its block:
# few distinct clamps exist (ReLU, ReLU6, a model's hardtanh bounds), each kept
_CLAMPS: dict = {}
_RELU = (0.0, float("inf"), True, False)  # maximum(x, 0): NaN kept, -0.0 made 0.0
# no bound: a block that only says how the mask compares (a ``v != 0`` mask without a clamp)
UNBOUNDED = (float("-inf"), float("inf"), False, False)


def clamp_address(clamp, dtype) -> int:
    """The address of the C stores' clamp block for a ``dtype`` result, or 0 for none.
    ``clamp``: None or False (none), True (a ReLU), or the four values, and optionally a fifth:
    whether the mask is ``v != 0`` (else ``v > 0``), and a sixth: the activation applied after
    the clamp (a kernels/cconv_activation.py `Activation`, or None). The bounds are rounded to
    ``dtype`` first, as the unfused op's constants are (a half-precision result's too)."""
    if clamp is None or clamp is False:
        return 0
    clamp = _RELU if clamp is True else tuple(clamp)
    # (each bound's sign too: -0.0 == 0.0, but clamp(x, -0.0, 6) stores -0.0 below its bound
    # where clamp(x, 0.0, 6) stores 0.0, and one block must not serve both)
    signs = tuple(math.copysign(1.0, b) for b in clamp[:2])
    ne_mask = bool(clamp[4]) if len(clamp) > 4 else False
    activation = clamp[5] if len(clamp) > 5 else None
    key = (*clamp[:4], ne_mask, *signs, np.dtype(dtype).name, activation)
    block = _CLAMPS.get(key)
    if block is None:
        lo, hi = (float(np.asarray(b, np.float64).astype(dtype)) for b in clamp[:2])
        block = np.array(
            [lo, hi, float(clamp[2]), float(clamp[3]), float(ne_mask), 0.0, 0.0, 0.0], np.float64
        )
        if activation is not None:
            from .cconv_activation import loop_addresses

            addresses = loop_addresses(activation, dtype)
            if addresses is None:
                raise RuntimeError("a convolution store's activation without a C compiler")
            block[5] = 1.0
            block[6:].view(np.uint64)[:] = addresses  # (the bits, not the values)
        block = _CLAMPS.setdefault(key, block)
    return data_address(block)
