"""The workspace of the compiled convolution kernels (`cconv`, `cconv_weight`,
`cconv_phases`): the bytes each allocates beyond its result, which the memory planner charges
(ops/conv.py's workspace rule)."""

from __future__ import annotations

import math

import numpy as np

from . import cconv, cconv_col2im
from .cconv_library import _BLOCKS, _MAX_WASTE, _MR
from .cconv_weight import _cl_blocks, _pointwise_by_sample, _windows_cover, cl_layout
from .conv_plan import Plan

__all__ = ["temporaries"]


def temporaries(
    op: str, a_shape: tuple, b_shape: tuple, p: Plan, groups: int, dtype, strided: bool = False
) -> int | None:
    """Bytes the compiled kernel of ``op`` (``conv``, ``conv_input_grad``, ``conv_weight_grad``)
    allocates beyond its result at its peak, for operands of shapes ``a_shape`` and ``b_shape``
    (as the op takes them) in ``dtype``; the scratch buffers it keeps between calls (the padded
    input) are not counted. None where it does not apply (the NumPy kernels run instead). Mirrors
    the allocations above: the forward's packed weight (zero-filled, then made contiguous: two
    at once; none for one 2-d group); the input gradient's flipped weight beside the forward's
    packing; the weight gradient's per-block partial sums and its finiteness mask of the
    result. ``strided``: the
    weight gradient's input is a strided view (a phase of a strided convolution's,
    kernels/cconv_phases.py), which the per-sample products and the channels-last copy first
    make contiguous."""
    dtype = np.dtype(dtype)
    if cconv._functions(dtype) is None or 0 in a_shape or 0 in b_shape:
        return None
    item = dtype.itemsize
    kk = math.prod(p.kernel)
    if op == "conv":
        if groups == 1 and len(a_shape) == 4:
            # one 2-d group: padded and packed on its step's scratch, kept between calls
            # (cconv._thread_step): the stride-1 input gradient's inner forward, a phase's
            return 0
        cout, cg = b_shape[0], a_shape[1] // groups
        return 2 * groups * -(-(cout // groups) // _MR) * _MR * cg * kk * item
    if op == "conv_weight_grad":
        n, c, cout = a_shape[0], a_shape[1], b_shape[1]
        if groups == 1 and _pointwise_by_sample(p, cout):
            from .cgemm import BLAS_ONE_THREAD

            if n * cout * c * math.prod(p.out_size) > BLAS_ONE_THREAD:  # (else declined)
                # the per-sample products, beside the input's contiguous copy
                return n * cout * c * item + (n * c * math.prod(p.in_size) * item if strided else 0)
        layout = cl_layout(c, p, item)
        if groups == 1 and layout is not None and _windows_cover(p):
            blocks = -(-n // -(-n // _cl_blocks()))
            per_offset = layout.offsets * (-(-cout // _MR) * _MR) * layout.cw * item
            found = (1 + blocks) * per_offset + cout * c * kk  # (+ np.isfinite's mask)
            if not strided:
                return found
            # the contiguous copy the channels-last transpose reads, freed before anything
            # else is made, the result included (which the caller counts beside this)
            return max(found, n * c * math.prod(p.in_size) * item - cout * c * kk * item)
    if (
        op == "conv_input_grad"
        and dtype.itemsize >= 4
        and cconv.col2im_runs(a_shape, b_shape, p, groups, dtype)
    ):
        # the gradient with its channels innermost and the weight's copy with its channels
        # innermost beside the product's result, a block of samples' columns (each pool
        # thread's sums of a sample, C's, not counted)
        n, cout, cg = a_shape[0], b_shape[0], b_shape[1]
        m = math.prod(p.out_size)
        block = cconv_col2im.sample_block(n, groups, m, cg * kk, item, cout // groups)
        return (n * cout * m + cout * cg * kk + groups * cg * kk * block * m) * item
    reach = [d * (k - 1) for d, k in zip(p.dilation, p.kernel)]
    lo = [r - low for r, low in zip(reach, p.lo)]
    if any(s != 1 for s in p.stride) or (op == "conv_input_grad" and any(v < 0 for v in lo)):
        from . import cconv_phases

        def inner(name, a, b, p2):
            # (a weight gradient's phase is a strided view of the input)
            return temporaries(name, a, b, p2, groups, dtype, name == "conv_weight_grad")

        return cconv_phases.temporaries(op, a_shape, b_shape, p, groups, item, inner)
    if op == "conv_input_grad":
        # the flipped weight, beside the forward convolution of gy with it (as conv_input_grad)
        cout, cg = b_shape[:2]
        nd = len(p.kernel)
        hi = [i - o - low + r for i, o, low, r in zip(p.in_size, p.out_size, lo, reach)]
        from .conv_plan import plan

        p2 = plan(p.out_size, p.kernel, (1,) * nd, tuple(zip(lo, hi)), p.dilation)
        if p2.out_size != p.in_size:
            return None
        flipped = (groups * cg, cout // groups) + tuple(p.kernel)
        inner = temporaries("conv", a_shape, flipped, p2, groups, dtype)
        return None if inner is None else math.prod(b_shape) * item + inner
    n, cout = a_shape[0], b_shape[1]
    c = a_shape[1]
    cg = c // groups
    mask = cout * cg * kk  # np.isfinite(gw): one byte an element
    grid = p.out_size[:1] + p.padded[1:]
    if math.prod(grid) > _MAX_WASTE * math.prod(p.out_size):
        return None
    blocks = -(-n // max(1, -(-n // _BLOCKS)))
    return blocks * (cout // groups) * cg * kk * item + mask
