"""Resampling: ``interpolate`` (nearest, nearest-exact, linear, bilinear, trilinear, area),
``grid_sample`` (4-D and 5-D, the op of ops/grid_sample.py) and ``affine_grid``, with
PyTorch's signatures.

Everything here is a composite. ``interpolate`` works one spatial dimension at a time: the
source positions and weights depend on the sizes alone, so they are computed in NumPy (in
PyTorch's arithmetic: nearest's source index in float32, as its CPU kernel) and become
constants; a dimension is then one or two ``index_select``s and a weighted sum, whose gradient
scatters back through ``index_add``. ``grid_sample`` reads the grid's values: it is one op
(ops/grid_sample.py) with its backward op and C kernels. ``affine_grid`` is a product of the
affine maps with the constant base grid.
"""

from __future__ import annotations

import functools
import math
import warnings
from fractions import Fraction

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, DTypeError, ShapeError, UnsupportedError, user_stacklevel
from ..ops import _memory_format
from ..ops import api as E
from ..ops._autocast import Autocast, autocasts
from ..ops._linspace_values import linspace_values
from ..ops._node_names import rename_node, renames
from ..ops._registry import apply, export
from ..ops._util import fmt_shape, refuse_complex, require_kernel_dtype
from ..ops.grid_sample import GRID_SAMPLE
from ..ops.promotion import to_tensor
from ..ops.resample import LINEAR_RESAMPLE
from ..symbolic import SymDim, is_symbolic
from . import _resample_symbolic as _symbolic
from ._common import float_input

_LINEAR = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}  # (their dims)
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "area", "bicubic")


def _per_dim(op: str, what: str, value, dims: int) -> list:
    if isinstance(value, (tuple, list)):
        if len(value) != dims:
            raise ArgumentError(
                f"{op}: {what} must have {dims} entries for a {dims + 2}-D input, got {value!r}"
            )
        return list(value)
    return [value] * dims


def _scaled(n, scale: float):
    """``floor(n * scale)``; a symbolic size (``TensorSpec((None, "T"))``) by a whole scale."""
    if isinstance(n, SymDim):
        exact = Fraction(scale)
        small = exact.limit_denominator(1024)
        if small != exact or scale <= 0:
            raise ShapeError(
                f"scale_factor {scale} of the symbolic size {n} is no fraction with a small "
                "denominator, so floor(size * scale) has no form over it; give a scale such "
                "as 2, 0.5 or 1.5, an explicit size or a fixed size there",
                op="interpolate",
            )
        return (n * small.numerator) // small.denominator
    return int(math.floor(n * scale))


def _output_size(x, size, scale_factor, recompute):
    """The output's spatial sizes and the scales the kernels use (None: from the sizes)."""
    dims = x.ndim - 2
    if size is not None and scale_factor is not None:
        raise ArgumentError("interpolate: only one of size or scale_factor should be defined")
    if size is not None:
        if recompute:
            raise ArgumentError(
                "interpolate: recompute_scale_factor is not meaningful with an explicit size"
            )
        out = [
            s if isinstance(s, SymDim) else int(s)
            for s in _per_dim("interpolate", "size", size, dims)
        ]
        return out, [None] * dims
    if scale_factor is None:
        raise ArgumentError("interpolate: either size or scale_factor should be defined")
    scales = [float(s) for s in _per_dim("interpolate", "scale_factor", scale_factor, dims)]
    out = [_scaled(n, s) for n, s in zip(x.shape[2:], scales)]
    if recompute:
        return out, [None] * dims
    return out, scales


def _nearest_index(n_in: int, n_out: int, scale, exact: bool, dims: int) -> np.ndarray:
    """PyTorch's nearest_idx / nearest_exact_idx, in float32 as its CPU kernel computes them.
    Its 2-D nearest kernel copies where the size is kept and halves the index where it
    doubles, whatever the scale given; the 1-D and 3-D ones always apply the scale."""
    dst = np.arange(n_out)
    if not exact and dims == 2 and n_out == n_in:
        return dst
    if not exact and dims == 2 and n_out == 2 * n_in:
        return dst >> 1
    if scale is not None and scale > 0:
        s = np.float32(1.0 / scale)
    else:
        s = np.float32(n_in) / np.float32(n_out)
    if exact:  # floorf((dst + 0.5) * scale): the double product rounded to float first
        src = np.floor(((dst + 0.5) * np.float64(s)).astype(np.float32))
    else:
        src = np.floor(dst.astype(np.float32) * s)
    return np.minimum(src.astype(np.int64), n_in - 1)


def _source_scale(n_in: int, n_out: int, scale, align_corners: bool) -> float:
    """PyTorch's area_pixel_compute_scale: source positions per output position."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    if scale is not None and scale > 0:
        return 1.0 / scale
    return n_in / n_out


def _linear_weights(n_in: int, n_out: int, scale, align_corners: bool):
    """PyTorch's two source indices and weights of each output position (in float64). Where
    the size is kept the input is copied, whatever the scale given, as PyTorch's
    compute_source_index_and_lambda does."""
    if n_out == n_in:
        dst = np.arange(n_out)
        return dst, dst, np.ones(n_out), np.zeros(n_out)
    s = _source_scale(n_in, n_out, scale, align_corners)
    dst = np.arange(n_out, dtype=np.float64)
    real = s * dst if align_corners else np.maximum(s * (dst + 0.5) - 0.5, 0.0)
    i0 = np.minimum(np.floor(real).astype(np.int64), n_in - 1)
    lam1 = np.clip(real - i0, 0.0, 1.0)
    i1 = i0 + (i0 < n_in - 1)
    return i0, i1, 1.0 - lam1, lam1


def _cubic_weights(n_in: int, n_out: int, scale, align_corners: bool):
    """PyTorch's four source indices and weights of each output position for bicubic
    resampling: Keys' cubic convolution with a = -0.75 over the taps floor(x) - 1 ... + 2 of
    the source coordinate x (not clamped at 0, unlike linear's), indices clamped to the
    border."""
    s = _source_scale(n_in, n_out, scale, align_corners)
    dst = np.arange(n_out, dtype=np.float64)
    real = s * dst if align_corners else s * (dst + 0.5) - 0.5
    base = np.floor(real)
    t = real - base
    a = -0.75

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    weights = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    indices = [np.clip(base.astype(np.int64) - 1 + k, 0, n_in - 1) for k in range(4)]
    return indices, weights


def _aa_filter(mode: str):
    if mode == "bilinear":
        return lambda x: np.maximum(1.0 - np.abs(x), 0.0)
    a = -0.5  # (PyTorch's antialiased bicubic takes PIL's a, not Keys' -0.75)

    def cubic(x):
        x = np.abs(x)
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))

    return cubic


def _antialias_weights(n_in: int, n_out: int, scale, align_corners: bool, mode: str):
    """PyTorch's separable antialiased filter (UpSampleKernel.cpp's _compute_weights_aa): each
    output position i reads the sources around its centre scale * (i + 0.5) within the filter's
    support, stretched by the scale when downsampling, the weights normalized to sum 1. Returns
    the taps' indices and weights, one (n_out,) pair per tap (0-weight taps past a window)."""
    s = _source_scale(n_in, n_out, scale, align_corners)
    half = 1.0 if mode == "bilinear" else 2.0  # (interp_size / 2)
    support = half * s if s >= 1.0 else half
    invscale = 1.0 / s if s >= 1.0 else 1.0
    taps = int(math.ceil(support)) * 2 + 1
    centre = s * (np.arange(n_out, dtype=np.float64) + 0.5)
    start = np.maximum(np.trunc(centre - support + 0.5).astype(np.int64), 0)
    stop = np.minimum(np.trunc(centre + support + 0.5).astype(np.int64), n_in)
    j = np.arange(taps)[:, None]
    inside = j < (stop - start)[None, :]
    w = np.where(inside, _aa_filter(mode)((j + start - centre + 0.5) * invscale), 0.0)
    total = w.sum(0)
    w = np.where(total != 0.0, w / np.where(total != 0.0, total, 1.0), w)
    index = np.minimum(j + start, n_in - 1)
    return list(index), list(w)


def _along(x, axis: int, values: np.ndarray):
    """``values`` shaped to broadcast along ``axis`` of ``x``, in x's dtype."""
    shape = [1] * x.ndim
    shape[axis] = len(values)
    return to_tensor(values.reshape(shape).astype(x.dtype.np))


# the modes whose 16-bit inputs PyTorch interpolates in float32, rounding once
_NARROW_IN_FLOAT32 = ("bicubic",)


@export(functional=True, toplevel=False)
def interpolate(
    input,
    size=None,
    scale_factor=None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
):
    """Resize the spatial dimensions of a (N, C, *spatial) input to ``size``, or by
    ``scale_factor`` (then the output size is ``floor(in * scale)`` and, unless
    ``recompute_scale_factor``, the kernels use the given scale as PyTorch's do). Modes:
    ``nearest`` and ``nearest-exact`` (3-D to 5-D), ``linear`` (3-D), ``bilinear`` (4-D),
    ``trilinear`` (5-D), ``bicubic`` (4-D), ``area`` (adaptive average pooling).
    ``antialias=True`` (bilinear and bicubic, 4-D) uses PyTorch's separable antialiased filter:
    stretched by the scale when downsampling, normalized per output; on upsampling it is plain
    bilinear, and for bicubic PIL's a = -0.5 instead of -0.75, as PyTorch's. (PyTorch 2.13's
    ``lanczos`` mode is not implemented.) Complex tensors are refused in every mode, as
    PyTorch's kernels refuse them."""
    x = to_tensor(input)
    refuse_complex("interpolate", x)
    if mode not in _MODES:
        raise UnsupportedError(f"unknown mode {mode!r}; expected one of {_MODES}", op="interpolate")
    if mode in ("nearest", "nearest-exact"):  # (PyTorch's nearest kernels: floats and uint8)
        require_kernel_dtype("interpolate", x, integers=(dt.uint8,))
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise ArgumentError(
                "interpolate: align_corners option can only be set with the interpolating "
                "modes: linear | bilinear | bicubic | trilinear"
            )
    elif align_corners is None:
        align_corners = False
    if antialias and (mode not in ("bilinear", "bicubic") or x.ndim != 4):
        raise ArgumentError(
            "interpolate: the antialias option is restricted to bilinear and bicubic modes "
            f"and a 4-D input (got mode {mode!r}, shape {fmt_shape(x.shape)})"
        )
    if x.ndim not in (3, 4, 5):
        raise UnsupportedError(
            f"expected a 3-D, 4-D or 5-D (N, C, *spatial) input, got shape {fmt_shape(x.shape)}",
            op="interpolate",
        )
    dims = x.ndim - 2
    if mode in _LINEAR and _LINEAR[mode] != dims:
        raise UnsupportedError(
            f"mode {mode!r} needs a {_LINEAR[mode] + 2}-D input, got shape {fmt_shape(x.shape)}",
            op="interpolate",
        )
    recompute = bool(recompute_scale_factor) or (mode == "area" and size is None)
    out, scales = _output_size(x, size, scale_factor, recompute)
    if any(o <= 0 for o in out):
        raise ShapeError(
            f"output size {tuple(out)} must be positive (input shape {fmt_shape(x.shape)})",
            op="interpolate",
        )
    if mode == "area":
        return getattr(E, f"adaptive_avg_pool{dims}d")(x, tuple(out))
    symbolic = [n for n in (*x.shape[2:], *out) if isinstance(n, SymDim)]
    if symbolic and antialias:
        raise ShapeError(
            f"mode {mode!r} builds its sampling taps from the spatial sizes, and {symbolic[0]} is "
            "symbolic (no value while the graph is built); give that dimension a fixed size",
            op="interpolate",
        )
    if mode in _LINEAR and not x.dtype.is_floating_point:
        raise DTypeError(
            f"mode {mode!r} needs a floating-point input, got {x.dtype}", op="interpolate"
        )
    source = x
    narrow = None
    if mode in _NARROW_IN_FLOAT32 and x.dtype in (dt.float16, dt.bfloat16):
        # PyTorch interpolates 16-bit values in float32 along every axis and rounds once;
        # rounding each tap's product, sum and axis in 16 bits drifts by several ulps
        narrow, x = x.dtype, E.cast(x, dt.float32)
    for d in range(dims):
        axis, n_in = d + 2, x.shape[d + 2]
        if isinstance(n_in, SymDim) or isinstance(out[d], SymDim):
            k = _symbolic.whole_factor(n_in, out[d], mode, align_corners)
            if mode == "bicubic":
                x = _symbolic.cubic_taps(x, axis, out[d], scales[d], align_corners)
            elif k is None and mode in _LINEAR:  # (a linear mode at another ratio)
                x = _symbolic.linear_taps(x, axis, out[d], scales[d], align_corners)
            elif k is None:
                exact = mode == "nearest-exact"
                x = _symbolic.nearest_taps(x, axis, out[d], scales[d], exact)
            else:
                x = _symbolic.upsample(x, axis, k, linear=mode in _LINEAR)
            continue
        if mode in ("nearest", "nearest-exact"):
            index = _nearest_index(n_in, out[d], scales[d], mode == "nearest-exact", dims)
            if not np.array_equal(index, np.arange(n_in)):
                x = E.index_select(x, axis, to_tensor(index))
            continue
        if antialias and out[d] == n_in:
            continue  # PyTorch's antialiased kernels copy a kept size, whatever the scale
        if antialias or mode == "bicubic":
            if antialias:
                taps, weights = _antialias_weights(n_in, out[d], scales[d], align_corners, mode)
            else:
                taps, weights = _cubic_weights(n_in, out[d], scales[d], align_corners)
            terms = [
                E.index_select(x, axis, to_tensor(i)) * _along(x, axis, w)
                for i, w in zip(taps, weights)
            ]
            x = terms[0]
            for term in terms[1:]:
                x = x + term
            continue
        taps = _linear_taps(n_in, out[d], scales[d], align_corners, x.dtype.np)
        if taps is None:
            continue  # the identity
        # take(x, i0) * w0 + take(x, i1) * w1 along the axis, as one op (ops/resample.py)
        x = apply(LINEAR_RESAMPLE, x, *(to_tensor(a) for a in taps), axis=axis)
    if narrow is not None:
        x = E.cast(x, narrow)
    x = _memory_format.keep_format(x, source)  # (PyTorch's kernels keep the format)
    return rename_node(x, _node_name(mode, dims, antialias), source)


def _node_name(mode: str, dims: int, antialias: bool) -> str:
    """PyTorch's node of an interpolation: its upsample kernel's (UpsampleBilinear2DBackward0)."""
    kind = {
        "nearest": "Nearest",
        "nearest-exact": "NearestExact",
        "linear": "Linear",
        "bilinear": "Bilinear",
        "bicubic": "Bicubic",
        "trilinear": "Trilinear",
    }[mode]
    return f"Upsample{kind}{dims}D{'Aa' if antialias else ''}Backward0"


@functools.lru_cache(maxsize=256)
def _linear_taps(n_in: int, n_out: int, scale, align_corners: bool, dtype):
    """`_linear_weights` with the weights in ``dtype``, or None where they copy the input;
    kept per size, read-only (a model resizes the same sizes at every call)."""
    i0, i1, w0, w1 = _linear_weights(n_in, n_out, scale, align_corners)
    if np.array_equal(i0, np.arange(n_in)) and not w1.any():
        return None
    taps = (i0, i1, w0.astype(dtype), w1.astype(dtype))
    for a in taps:
        a.flags.writeable = False
    return taps


@export(functional=True, toplevel=False)
def upsample(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None):
    """`interpolate` under its deprecated name (PyTorch warns the same way)."""
    warnings.warn(
        "nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    return interpolate(input, size, scale_factor, mode, align_corners)


@export(functional=True, toplevel=False)
def upsample_nearest(input, size=None, scale_factor=None):
    """``interpolate(mode='nearest')`` under its deprecated name."""
    warnings.warn(
        "nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate instead.",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    return interpolate(input, size, scale_factor, mode="nearest")


@export(functional=True, toplevel=False)
def upsample_bilinear(input, size=None, scale_factor=None):
    """``interpolate(mode='bilinear', align_corners=True)`` under its deprecated name."""
    warnings.warn(
        "nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate instead.",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ----------------------------------------------------------------------------- grid_sample


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def grid_sample(
    input,
    grid,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
):
    """Sample a (N, C, H, W) or (N, C, D, H, W) input at the (N, Ho, Wo, 2) or
    (N, Do, Ho, Wo, 3) ``grid`` of normalized (x, y[, z]) positions in [-1, 1], giving
    (N, C, Ho, Wo) or (N, C, Do, Ho, Wo). Modes ``bilinear`` (trilinear for 5-D input),
    ``nearest`` and ``bicubic`` (4-D; Keys' cubic convolution, a = -0.75, over the 4 x 4 pixels
    around each position, each moved into the image by the padding mode as PyTorch's); padding
    ``zeros``, ``border`` or ``reflection``. Differentiable twice with respect to the input and
    (bilinear, bicubic) the grid: ops/grid_sample.py. A NaN or infinite grid value gives what
    PyTorch's 4-D kernel gives, in 5-D too (PyTorch's 5-D kernel reads 0 there, and clips NaN to
    the far border)."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ArgumentError(
            "grid_sample: expected mode to be 'bilinear', 'nearest' or 'bicubic', "
            f"but got: {mode!r}"
        )
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ArgumentError(
            "grid_sample: expected padding_mode to be 'zeros', 'border', or 'reflection', "
            f"but got: {padding_mode!r}"
        )
    if align_corners is None:
        warnings.warn(
            "grid_sample: the default align_corners is False (since PyTorch 1.3.0); pass "
            "align_corners explicitly to silence this warning",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        align_corners = False
    x = float_input("grid_sample", input)
    g = float_input("grid_sample", grid, "grid")
    if g.dtype is not x.dtype:
        raise DTypeError(
            f"grid ({g.dtype}) must have the input's dtype ({x.dtype})", op="grid_sample"
        )
    return apply(
        GRID_SAMPLE,
        x,
        g,
        mode=mode,
        padding_mode=padding_mode,
        align_corners=bool(align_corners),
    )


def _base_coords(steps: int, align_corners: bool, dtype) -> np.ndarray:
    """PyTorch's: linspace(-1, 1) in theta's dtype, times (steps - 1), divided by steps, each
    rounded to the dtype as there (so a coordinate a nearest-mode sample rounds is PyTorch's)."""
    if steps <= 1:
        return np.zeros(max(steps, 0), dtype)
    r = linspace_values(-1.0, 1.0, steps, dtype)
    if align_corners:
        return r
    return ((r * r.dtype.type(steps - 1)).astype(dtype) / r.dtype.type(steps)).astype(dtype)


@export(functional=True, toplevel=False)
@renames("AffineGridGeneratorBackward0")
def affine_grid(theta, size, align_corners: bool | None = None):
    """The (N, H, W, 2) (or (N, D, H, W, 3)) sampling grid of the affine maps ``theta``
    ((N, 2, 3) or (N, 3, 4)) for an output of ``size`` (N, C, H, W) (or (N, C, D, H, W))."""
    if align_corners is None:
        warnings.warn(
            "affine_grid: the default align_corners is False (since PyTorch 1.3.0); pass "
            "align_corners explicitly to silence this warning",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        align_corners = False
    t = to_tensor(theta)
    if not t.dtype.is_floating_point:
        raise DTypeError(f"theta must be floating point, got {t.dtype}", op="affine_grid")
    # (the batch may be a symbolic size, a graph's dynamic batch: the grid is a product by
    # theta; the spatial sizes make the NumPy base grid, so they must be numbers)
    size = [s if is_symbolic(s) else int(s) for s in size]
    spatial = len(size) - 2
    if spatial not in (2, 3):
        raise ArgumentError(f"affine_grid: size must have 4 or 5 entries, got {size}")
    if any(is_symbolic(s) for s in size[1:]):
        raise ShapeError(
            f"affine_grid: the sizes after the batch must be numbers while a graph is built, "
            f"got {tuple(str(s) for s in size)}; give the image fixed spatial sizes",
            op="affine_grid",
        )
    if t.ndim != 3 or tuple(t.shape[1:]) != (spatial, spatial + 1) or t.shape[0] != size[0]:
        raise ShapeError(
            f"expected a batch of {size[0]} affine matrices of shape ({spatial}, {spatial + 1}) "
            f"for size {tuple(size)}, got theta of shape {fmt_shape(t.shape)}",
            op="affine_grid",
        )
    if min(s for s in size if not is_symbolic(s)) <= 0:
        raise ArgumentError(f"affine_grid: expected a positive output size, got {size}")
    if align_corners and min(size[2:]) == 1:
        warnings.warn(
            "Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
            "align_corners=True. This is not an intended use case of affine_grid. See the "
            "documentation of affine_grid for details.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    coords_1d = [_base_coords(s, align_corners, t.dtype.np) for s in size[:1:-1]]
    axes = np.meshgrid(*coords_1d, indexing="ij")
    # meshgrid over (W, H[, D]) with "ij": transpose to (D, H, W) order, then x, y, z, 1
    coords = [a.transpose(tuple(range(spatial))[::-1]) for a in axes]
    base = np.stack(coords + [np.ones_like(coords[0])], axis=-1).reshape(-1, spatial + 1)
    grid = E.matmul(to_tensor(base.astype(t.dtype.np)), E.transpose(t, 1, 2))
    return E.reshape(grid, (size[0], *size[2:], spatial))
