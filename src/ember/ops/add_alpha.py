"""``add(x, y, alpha=a)`` and ``sub`` on floating tensors as PyTorch's CPU kernel computes them:
``x + a * y`` as one fused multiply-add, rounded once (ATen's vectorized ``fmadd(y, a, x)``,
and its scalar loop, which the compiler contracts the same way), where ``x + (a * y)`` as two
ops would round the product first and differ from PyTorch in the last bit of about one value
in five. ``a`` is first rounded to the tensors' dtype (PyTorch's ``alpha.to<scalar_t>()``);
``sub``'s is negated (``sub(x, y, alpha=a)`` is ``add(x, y, alpha=-a)`` in PyTorch).

float16 and bfloat16 tensors are widened to float32, fused there and rounded once to their
dtype, as PyTorch's vectorized loop does. PyTorch's scalar remainder of a loop (the last
``n mod 32`` elements where the other operand is one number) multiplies first; ember fuses
every element.

The NumPy kernel is the specification, computing the single rounding exactly without a
hardware FMA: a float32 product is exact in float64, and their sum is rounded to odd in
float64 (an error-free sum, then the last bit set where the sum was inexact), which a later
rounding to float32 rounds correctly; float64 follows Boldo and Melquiond's emulation (an
exact product by Dekker's splitting, an exact sum, the low parts added rounded to odd, the
high part plus that rounded once). Where Dekker's splitting could overflow or the product's
low part underflow (magnitudes beyond 2**995 or below 2**-960), and for infinities and NaN,
the float64 kernel computes ``x + a * y`` in two roundings. The C loops call the compiler's
fused multiply-add (``__builtin_fma``)."""

from __future__ import annotations

import numpy as np

from ..errors import KernelDTypeError
from ..kernels import cadd_alpha
from ..types import TensorType
from . import _attr_rules as R
from . import _onnx
from . import api as E
from ._half import elementwise_fast
from ._registry import OpDef, register
from ._util import broadcast_shapes, elementwise_cost, numel, require_same_dtype


def _infer(x, y, *, alpha):
    if y.dtype is not x.dtype:
        require_same_dtype("add", x, y)
    if not x.dtype.is_floating_point:
        raise KernelDTypeError(
            f"takes floating tensors, got {x.dtype} (integers: add and mul)", op="add_alpha"
        )
    shape = tuple(x.shape) if x.shape == y.shape else broadcast_shapes("add", x.shape, y.shape)
    return TensorType(shape, x.dtype)


def _two_sum(a, b):
    """``a + b`` rounded, and its exact error (Knuth's TwoSum: no ordering needed)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _odd(s, err):
    """``s + err`` (``s`` its rounding to nearest) rounded to odd: ``s`` itself where exact or
    where its last bit is 1, else its neighbour toward the exact value (whose last bit is 1)."""
    bits = s.view(np.int64)
    even = (bits & 1) == 0
    step = np.nextafter(s, np.where(err > 0, np.inf, -np.inf))
    return np.where((err != 0) & even & np.isfinite(s), step, s)


def _fma32(x, alpha, y):
    """float32 ``x + alpha * y`` rounded once: the product is exact in float64, and so is
    their sum's rounding to float64 then float32 but where that sum lands exactly halfway
    between two float32 values (or among float32's subnormals), which are rounded to odd first
    (see the module)."""
    p = np.float64(alpha) * y.astype(np.float64)  # (exact: 24 + 24 bits)
    wide = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        s = wide + p
        bits = s.view(np.int64) & _BELOW_FLOAT32
        doubtful = (bits == _FLOAT32_HALFWAY) | (np.abs(s) < _FLOAT32_TINY)
        if doubtful.any():
            wide, p = np.broadcast_arrays(wide, p)
            at = np.nonzero(doubtful)
            first, err = _two_sum(wide[at], p[at])
            s[at] = _odd(first, err)
    return s.astype(np.float32)


# a float64's 29 significand bits below float32's last, the pattern of a float32 halfway point,
# and float32's smallest normal magnitude (below it float32 keeps fewer bits)
_BELOW_FLOAT32 = (1 << 29) - 1
_FLOAT32_HALFWAY = 1 << 28
_FLOAT32_TINY = float(np.finfo(np.float32).tiny)


_SPLIT = 134217729.0  # 2**27 + 1, Veltkamp's splitting constant for 53-bit doubles


def _split(a):
    c = _SPLIT * a
    high = c - (c - a)
    return high, a - high


def _fused64(x, a, y):
    """Boldo and Melquiond's emulation of ``x + a * y`` rounded once, for operands whose
    product neither overflows in Dekker's splitting nor underflows (see the module)."""
    ph = a * y
    ah, al = _split(a)
    yh, yl = _split(y)
    pl = ((ah * yh - ph) + ah * yl + al * yh) + al * yl  # (Dekker: ph + pl == a * y)
    th, tl = _two_sum(x, ph)
    v, verr = _two_sum(tl, pl)
    return th + _odd(v, verr)


# (powers of two: scaling by them is exact away from the range's ends)
_SCALE = 2.0**64
_TINY_SCALE = 2.0**256


def _fma64(x, alpha, y):
    """float64 ``x + alpha * y`` rounded once: the emulation where it is exact; operands of
    magnitude near float64's largest scaled down by 2**64 first (a product past the range
    that ``x`` brings back); infinities and NaN as the FMA takes them (an infinite ``x`` plus a
    finite product is ``x``); a product below 2**-960 scaled up by 2**256 first (a zero
    product: ``x + 0``, its sign the FMA's)."""
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        # (alpha one number, or one per element: add_scaled's C loop test reads it so)
        x, y, a = np.broadcast_arrays(x, y, np.asarray(alpha, np.float64))
        ph = a * y
        magnitude = np.maximum(np.abs(y) * np.abs(a), np.abs(x))
        finite = np.isfinite(x) & np.isfinite(y)
        exact = finite & (magnitude < 2.0**995) & (np.abs(ph) > 2.0**-960)
        out = np.where(exact, _fused64(x, a, y), x + ph)
        large = finite & ~(magnitude < 2.0**995)
        if large.any():
            scaled = _fused64(x[large] / _SCALE, a[large], y[large] / _SCALE)
            out[large] = scaled * _SCALE
        tiny = finite & (np.abs(ph) <= 2.0**-960) & (magnitude < 2.0**700) & (y != 0)
        if tiny.any():  # (scaled up past the product's underflow; a subnormal result rounds
            # twice in the scaling back)
            scaled = _fused64(x[tiny] * _TINY_SCALE, a[tiny], y[tiny] * _TINY_SCALE)
            out[tiny] = scaled / _TINY_SCALE
        out = np.where(np.isinf(x) & np.isfinite(y) & np.isfinite(a), x, out)
    return out


def _block_elements(shape) -> int:
    """Elements the emulation works on at once (`_kernel`): whole rows of the result's first
    axis, as many as keep its temporaries (up to `_EMULATION_BYTES` per element) within about
    the L2 cache, at least one row; the whole result when it is that small or 0-d/1-row."""
    from ..kernels import cache_sizes

    n = numel(shape)
    if not all(isinstance(d, int) for d in shape) or len(shape) == 0 or shape[0] <= 1:
        return n  # (symbolic sizes: the planner's bound is the whole result)
    row = n // shape[0]
    rows = max(1, cache_sizes.l2_bytes() // (128 * max(row, 1)))
    return min(n, rows * row)


def _kernel(x, y, *, alpha):
    """The emulated fused multiply-add, a block of the result's rows at a time
    (`_block_elements`): elementwise, so the same bits as in one piece, with temporaries of a
    block's size rather than ten results' (a recorded Adam step's update of a large parameter
    without a compiler held ten times the parameter)."""
    shape = np.broadcast_shapes(np.shape(x), np.shape(y), np.shape(alpha))
    block = _block_elements(shape)
    if block >= numel(shape):
        return _kernel_whole(x, y, alpha)
    rows = block // (numel(shape) // shape[0])
    operands = np.broadcast_arrays(x, y, np.asarray(alpha))
    scalar = np.ndim(alpha) == 0
    out = np.empty(shape, x.dtype)
    for i in range(0, shape[0], rows):
        xs, ys, al = (a[i : i + rows] for a in operands)
        out[i : i + rows] = _kernel_whole(xs, ys, alpha if scalar else al)
    return out


def _kernel_whole(x, y, alpha):
    if x.dtype == np.float64:
        return np.asarray(_fma64(x, alpha, y), dtype=np.float64)
    if x.dtype == np.float32:
        out = _fma32(x, np.asarray(alpha, np.float32), y)
    else:  # float16, bfloat16: alpha rounded to their dtype, fused in float32, rounded once
        half = np.asarray(alpha, dtype=x.dtype).astype(np.float32)
        out = _fma32(x.astype(np.float32), half, y.astype(np.float32)).astype(x.dtype)
    shape = np.broadcast_shapes(x.shape, y.shape, np.shape(alpha))
    # (a broadcast view is read-only: the result is the user's tensor, written in place later)
    return out if out.shape == shape else np.broadcast_to(out, shape).copy()


# (the general C loop at every size where it is measured faster, once per size class: the
# exact emulation in NumPy takes about ten passes over the operands)
_loop = elementwise_fast("add_alpha", measured_from=1)


def _fast(x, y, *, alpha, out=None):
    """The direct kernel (kernels/cadd_alpha.py: operands of one shape or one of them a single
    value, float32/float64), else the general fused loop (half precision, broadcasting)."""
    # (alpha rounded to float32 by the C call's conversion, as the kernel rounds it)
    result = cadd_alpha.add_alpha(x, y, alpha, out)
    return _loop(x, y, alpha=alpha, out=out) if result is None else result


_fast.declines_complex = True


# bytes per element of a block (`_block_elements`) the NumPy kernel's emulation holds beyond its
# result, at its peak
# (tracemalloc, tests/plan/test_add_alpha_workspace.py): float32's float64 product, operands and
# sum with their bit tests; float64's splitting terms; 16-bit operands widened to float32 first
_EMULATION_BYTES = {4: 38, 8: 108, 2: 48}


def numpy_workspace(node, layouts=None) -> int:
    """The emulated fused multiply-add's temporaries, where the NumPy kernel runs (without a
    compiler; with one, the direct C call or the fused loop allocates only the result)."""
    from ..kernels import ccompile

    if ccompile.compiler_available():
        return 0
    out = node.outputs[0]
    item = out.dtype.itemsize
    block = _block_elements(tuple(out.shape))
    # (in blocks, each block's result is held until it is copied into the whole one)
    held = block * item if block < numel(out.shape) else 0
    return _EMULATION_BYTES.get(item, 0) * block + held


numpy_workspace.types_only = True  # (reads only the node's types: fused programs count it too)


def _reduce_to(g, t):
    """A broadcast gradient summed back to its input's shape."""
    return g if g.shape == t.shape else E.sum_to(g, t.shape)


def _vjp(c, g):
    """PyTorch's AddBackward0 with alpha: ``g`` to x, ``g * alpha`` to y (in y's dtype)."""
    nx, ny = c.needs_input_grad
    alpha = c.attrs["alpha"]
    return (
        _reduce_to(g, c.in_types[0]) if nx else None,
        _reduce_to(g * alpha, c.in_types[1]) if ny else None,
    )


def _onnx_add_alpha(e):
    """ONNX has no fused multiply-add: Mul then Add (two roundings, as the graph wrote before)."""
    scaled = e.node("Mul", [e.inputs[1], _onnx.scalar(e, e.attrs["alpha"], e.in_types[1].dtype)])
    return e.node("Add", [e.inputs[0], scaled])


ADD_ALPHA = register(
    OpDef(
        name="add_alpha",
        # (a real number: a file's bool alpha reached the C loop's template, a raw KeyError)
        attrs={"alpha": R.Float(nan=True)},
        kind="elementwise",
        infer=_infer,
        cached_infer=True,
        kernel=_kernel,
        vjp=_vjp,
        cost=elementwise_cost(2),
        save_inputs=(),
        workspace=numpy_workspace,
        # (GCC's builtin, spelled so cfuse neither declares it nor bakes alpha into the source:
        # one compiled loop serves every alpha, each a run-time constant)
        c="__builtin_fma{f} ({1}, {alpha}, {0})",
        onnx=_onnx_add_alpha,
        fast=_fast,
        grad_fn="AddBackward0",
        doc="add_alpha(x, y; alpha): x + alpha * y rounded once (PyTorch's fused multiply-add "
        "for add and sub with alpha on floating tensors)",
    )
)
