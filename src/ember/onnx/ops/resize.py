"""ONNX operators: Resize (opsets 10, 11, 13, 18, 19: nearest/linear/cubic, every coordinate
transformation, antialias, axes, keep_aspect_ratio_policy, scales or sizes) and the deprecated
Upsample (7, 9).

Resizing is separable: each resized axis is one gather of a few source positions per output
position and a weighted sum, in ember ops. The positions and weights depend only on the sizes,
scales and attributes, so they are computed in NumPy (float64, in ONNX's reference arithmetic)
and enter the graph as constants; scales, sizes and roi must be known (initializers or shape
arithmetic), otherwise a captured model runs eagerly. Integer results are the float ones cast
toward zero (ONNX's reference, onnxruntime); an 8- or 16-bit integer image (N, C, H, W) resized
bilinearly over H and W follows onnxruntime's float32 formula (UpsampleBilinear's four weighted
corners), so that a quantized model's resizing gives onnxruntime's values exactly.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as _dt
from .._convert import converter
from ._common import E, constant, given

# ---------------------------------------------------------------------------------------------
# Resize (10, 11, 13, 18, 19) and Upsample (7, 9; deprecated)
#
# Resizing is separable: each resized axis is one gather of ``taps`` source positions per
# output position and a weighted sum. The positions and weights depend on the sizes, scales
# and attributes alone, so they are computed here in NumPy (float64, as ONNX's reference) and
# enter the graph as constants.


def _nearest_weights(ratio, nearest_mode, downsample):
    """ONNX's two nearest-neighbour weights per ratio in (0, 1] (1 means an exact hit)."""
    exact = ratio == 1.0
    if nearest_mode == "round_prefer_floor":
        right = ratio > 0.5
    elif nearest_mode == "round_prefer_ceil":
        right = ratio >= 0.5
    elif nearest_mode == "floor":
        right = np.zeros_like(ratio, dtype=bool)
    elif nearest_mode == "ceil":
        right = np.ones_like(ratio, dtype=bool)
    elif nearest_mode == "simple":  # Upsample and Resize-10: ceil when shrinking, else floor
        right = np.full(ratio.shape, bool(downsample))
    else:
        raise ValueError(f"unknown nearest_mode {nearest_mode!r}")
    right = right | exact
    return np.stack([~right, right], axis=1).astype(np.float64)


def _cubic_weights(ratio, a):
    r = ratio[:, None]
    return np.concatenate(
        [
            ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
            ((a * ((1 - r) + 1) - 5 * a) * ((1 - r) + 1) + 8 * a) * ((1 - r) + 1) - 4 * a,
        ],
        axis=1,
    )


def _antialias_weights(ratio, scale, mode, a):
    """The stretched filter of antialiased downsampling (its footprint grows as 1 / scale)."""
    scale = min(scale, 1.0)
    if mode == "linear":
        start = int(np.floor(-1 / scale) + 1)
        args = (np.arange(start, 2 - start)[None, :] - ratio[:, None]) * scale
        w = np.clip(1 - np.abs(args), 0, 1)
    else:
        start = int(np.floor(-2 / scale) + 1)
        x = np.abs(scale * (np.arange(start, 2 - start)[None, :] - ratio[:, None]))
        w = np.where(
            x <= 1,
            (a + 2) * x**3 - (a + 3) * x**2 + 1,
            np.where(x < 2, a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a, 0.0),
        )
    return w / w.sum(axis=1, keepdims=True)


def _source_coords(how, out_int, scale, n_in, roi, dtype=np.float64):
    """Each output position's coordinate in the input, and (tf_crop_and_resize) which fall
    outside it.

    The two corner-aligned modes divide by the resized length less one, the length the output
    has (ONNX's text: "length_resized"; onnxruntime, and PyTorch's align_corners=True). ONNX's
    reference divides by ``scale * n_in`` instead, which differs where a scale does not give a
    whole length (9 * 1.5 resized to 13): there PyTorch's exports match onnxruntime only."""
    y = np.arange(out_int, dtype=dtype)
    scale, n_in = dtype(scale), dtype(n_in)
    out_len = scale * n_in
    outside = None
    if how == "align_corners":
        x = np.zeros(out_int) if out_int == 1 else y * (n_in - 1) / (out_int - 1)
    elif how == "asymmetric":
        x = y / scale
    elif how == "tf_crop_and_resize":
        lo, hi = roi
        if out_int == 1:
            x = np.full(out_int, (hi - lo) * (n_in - 1) / 2)
        else:
            x = y * (hi - lo) * (n_in - 1) / (out_int - 1)
        x = x + lo * (n_in - 1)
        outside = (x < 0) | (x > n_in - 1)
    elif how == "pytorch_half_pixel":
        x = np.full(out_int, -0.5) if out_len == 1 else (y + 0.5) / scale - 0.5
    elif how == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif how == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - out_int / out_len)
        x = offset + (y + 0.5) / scale - 0.5
    elif how == "tf_half_pixel_for_nn":  # opset 11 only
        x = (y + 0.5) / scale
    else:
        raise ValueError(f"unknown coordinate_transformation_mode {how!r}")
    return np.asarray(x, np.float64), outside


def resize_taps(
    n_in, out_int, scale, *, mode, how, nearest_mode, cubic_a, exclude_outside, antialias, roi=None
):
    """(index (out, taps), weight (out, taps), outside (out,) or None) of one axis, in ONNX's
    reference arithmetic (edge-clamped neighbours).

    Nearest neighbours take their coordinates in float32, as onnxruntime (and ONNX's
    reference, for a float32 scales tensor): a coordinate on a whole number there (3 / 0.6f
    is 5.0) may fall just below it in float64 (4.9999998), which picks the other pixel."""
    dtype = np.float32 if mode == "nearest" else np.float64
    x, outside = _source_coords(how, out_int, scale, n_in, roi, dtype)
    floor = np.floor(x)
    ratio = np.where(x == floor, 1.0, x - floor)
    if mode == "nearest":
        w = _nearest_weights(ratio, nearest_mode, scale < 1)
    elif antialias:
        w = _antialias_weights(ratio, scale, mode, cubic_a)
    elif mode == "linear":
        w = np.stack([1 - ratio, ratio], axis=1)
    else:
        w = _cubic_weights(ratio, cubic_a)
    taps = w.shape[1]
    pad = int(np.ceil(taps / 2))
    shifted = x + pad
    p = np.floor(shifted).astype(np.int64)
    frac = shifted - p
    if taps % 2 == 0:
        start = p + np.where(frac == 0, -(taps // 2), -(taps // 2) + 1)
    else:
        base = -((taps - 1) // 2)
        start = p + np.where(frac <= 0.5, base, base + 1)
    index = start[:, None] + np.arange(taps)[None, :] - pad
    if exclude_outside:
        w = np.where((index < 0) | (index >= n_in), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(index, 0, n_in - 1), w, outside


def _picks(weight) -> bool:
    """Whether taps of ``weight`` pick one source per output (no arithmetic)."""
    return bool(np.all((weight == 0) | (weight == 1)) and np.all(weight.sum(axis=1) == 1))


def resize_axis(x, axis, index, weight, outside=None, fill=0.0):
    """``x`` resized along ``axis`` with the taps of `resize_taps` (ember ops): one gather per
    tap and a weighted sum (a sum over a tap axis would be a slow strided reduction)."""
    out = index.shape[0]
    used = np.flatnonzero(np.any(weight != 0, axis=0))
    index, weight = index[:, used], weight[:, used]
    wshape = [1] * x.ndim
    wshape[axis] = out
    if _picks(weight):
        # one source per output (nearest, or exact hits): a gather, no arithmetic
        pick = index[np.arange(out), np.argmax(weight, axis=1)]
        y = E.index_select(x, axis, constant(pick.astype(np.int64)))
    else:
        y = None
        for tap in range(index.shape[1]):
            term = E.index_select(x, axis, constant(index[:, tap].astype(np.int64)))
            term = term * constant(weight[:, tap].reshape(wshape), x)
            y = term if y is None else y + term
        if y is None:  # every weight is 0 (exclude_outside with no tap inside)
            shape = list(x.shape)
            shape[axis] = out
            y = E.zeros(tuple(shape), dtype=x.dtype)
    if outside is not None and outside.any():
        mshape = [1] * x.ndim
        mshape[axis] = out
        y = E.where(constant(outside.reshape(mshape)), constant(fill, y), y)
    return y


def _resize(ctx, x, scales, sizes, roi, *, mode, how, nearest_mode, axes=None):
    x = ctx.tensor(x)
    rank = x.ndim
    shape = [int(d) for d in x.shape]
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
        raise ctx.error(f"axes {ctx.attr('axes', None)} are invalid for rank {rank}")
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    if sizes is not None:
        if len(sizes) != len(axes):
            raise ctx.error(f"sizes has {len(sizes)} entries for {len(axes)} axes")
        factor = [sizes[i] / shape[a] if shape[a] else 1.0 for i, a in enumerate(axes)]
        if policy != "stretch":
            if policy not in ("not_larger", "not_smaller"):
                raise ctx.error(f"unknown keep_aspect_ratio_policy {policy!r}")
            common = min(factor) if policy == "not_larger" else max(factor)
            factor = [common] * len(axes)
            sizes = [int(common * shape[a] + 0.5) for a in axes]
        outs = [int(s) for s in sizes]
    else:
        if len(scales) != len(axes):
            raise ctx.error(f"scales has {len(scales)} entries for {len(axes)} axes")
        factor = [float(s) for s in scales]
        if any(s <= 0 for s in factor):
            raise ctx.error(f"scales must be positive, got {factor}")
        # in float32, as onnxruntime and PyTorch's floor(n * 0.7) give 7 for 10 where
        # float64 gives 6.9999999 (0.7f is 0.69999999)
        outs = [int(np.float32(s) * np.float32(shape[a])) for s, a in zip(factor, axes)]
    if roi is not None and roi.size:
        roi = np.asarray(roi, np.float64).reshape(-1)
        if roi.size != 2 * len(axes):
            raise ctx.error(f"roi has {roi.size} entries, expected {2 * len(axes)}")
        rois = [(roi[i], roi[i + len(axes)]) for i in range(len(axes))]
    else:
        rois = [(0.0, 1.0)] * len(axes)
    if how == "tf_crop_and_resize" and roi is None:
        raise ctx.error("coordinate_transformation_mode tf_crop_and_resize needs roi")
    out_dtype = x.dtype
    final = list(shape)
    for a, o in zip(axes, outs):
        final[a] = o
    # before the taps: a scale read from a file may ask for more than the machine holds
    ctx.check_size(final, out_dtype.np)
    if any(o == 0 for o in outs) or 0 in shape:
        return E.zeros(tuple(final), dtype=out_dtype)
    if _ort_bilinear_applies(mode, how, out_dtype, shape, axes, outs, factor, rois, ctx):
        sizes, scales = dict(zip(axes, outs)), dict(zip(axes, factor))
        size = [sizes.get(a, shape[a]) for a in (2, 3)]
        return _ort_bilinear(x, size, [scales.get(a, 1.0) for a in (2, 3)], how)
    compute = x
    if mode != "nearest" and out_dtype not in (_dt.float32, _dt.float64):
        # 8- and 16-bit integers in float32, as onnxruntime (its results are the float32
        # ones truncated), wider ones in float64 (exact)
        narrow = out_dtype.is_floating_point or out_dtype.itemsize <= 2
        compute = E.cast(x, _dt.float32 if narrow else _dt.float64)
    options = dict(
        mode=mode,
        how=how,
        nearest_mode=nearest_mode,
        cubic_a=ctx.attr("cubic_coeff_a", -0.75),
        exclude_outside=bool(ctx.attr("exclude_outside", 0)),
        antialias=bool(ctx.attr("antialias", 0)),
    )
    fill = ctx.attr("extrapolation_value", 0.0)
    taps = [
        (a, out, resize_taps(shape[a], out, scale, roi=axis_roi, **options))
        for a, out, scale, axis_roi in zip(axes, outs, factor, rois)
        if not (math.isclose(scale, 1.0) and out == shape[a] and axis_roi == (0.0, 1.0))
    ]
    if all(_picks(weight) for _, _, (_, weight, _) in taps):
        # one source per output along every axis (nearest): the gathers' order does not change
        # a value, so the axes that shrink go first and the last axis before the others (its
        # gather copies elements one by one, the others whole rows): a 2x upsampling copies
        # half the elements one by one
        taps.sort(key=lambda t: (t[1] / shape[t[0]], -t[0]))
    for a, _, (index, weight, outside) in taps:
        compute = resize_axis(compute, a, index, weight, outside, fill)
    if compute.dtype is not out_dtype:
        if not out_dtype.is_floating_point:
            info = np.iinfo(out_dtype.np)
            # toward zero, as onnxruntime and ONNX's reference (a float result cast)
            compute = E.clamp(E.trunc(compute), float(info.min), float(info.max))
        compute = E.cast(compute, out_dtype)
    elif compute is x:
        compute = E.clone(x)
    return compute


_ORT_COORDS = ("align_corners", "asymmetric", "half_pixel", "pytorch_half_pixel")


def _ort_bilinear_applies(mode, how, dtype, shape, axes, outs, factor, rois, ctx) -> bool:
    """8- and 16-bit integer images (N, C, H, W) resized bilinearly over H and W alone: the
    case onnxruntime computes with its own float32 formula and truncates, where a quantized
    model's one-quantum differences would show."""
    if mode != "linear" or how not in _ORT_COORDS or len(shape) != 4:
        return False
    if ctx.attr("exclude_outside", 0) or ctx.attr("antialias", 0):
        return False
    if dtype.is_floating_point or dtype.itemsize > 2 or 0 in shape:
        return False
    sizes = dict(zip(axes, outs))
    if any(sizes.get(a, shape[a]) != shape[a] for a in (0, 1)) or 0 in outs:
        return False
    return all(r == (0.0, 1.0) for r in rois) and all(f > 0 for f in factor)


def _ort_axis(n_in: int, n_out: int, scale: float, how: str):
    """onnxruntime's source positions and weights along one axis, in float32 as it computes
    them (UpsampleBilinear): (index 1, index 2, weight of 2, weight of 1)."""
    f32 = np.float32
    y = np.arange(n_out, dtype=f32)
    s = f32(scale)
    with np.errstate(all="ignore"):
        if how == "align_corners":
            c = np.zeros(n_out, f32) if n_out == 1 else y * f32(n_in - 1) / f32(n_out - 1)
        elif how == "asymmetric":
            c = y / s
        elif how == "pytorch_half_pixel" and n_out == 1:
            c = np.zeros(n_out, f32)
        else:
            c = (y + f32(0.5)) / s - f32(0.5)
    c = np.clip(c, f32(0), f32(n_in - 1)).astype(f32)
    i1 = np.minimum(c.astype(np.int64), n_in - 1)
    i2 = np.minimum(i1 + 1, n_in - 1)
    d1 = np.abs(c - i1.astype(f32)).astype(f32)
    d2 = np.abs(c - i2.astype(f32)).astype(f32)
    same = i1 == i2
    d1[same], d2[same] = f32(0.5), f32(0.5)
    return i1, i2, d1, d2


def _ort_bilinear(x, outs, factor, how):
    """dx2*dy2*X11 + dx1*dy2*X21 + dx2*dy1*X12 + dx1*dy1*X22 in float32, truncated."""
    h_in, w_in = int(x.shape[2]), int(x.shape[3])
    y1, y2, dy1, dy2 = _ort_axis(h_in, int(outs[0]), factor[0], how)
    x1, x2, dx1, dx2 = _ort_axis(w_in, int(outs[1]), factor[1], how)
    xf = E.cast(x, _dt.float32)
    rows = [E.index_select(xf, 2, constant(i)) for i in (y1, y2)]
    corner = [[E.index_select(r, 3, constant(i)) for i in (x1, x2)] for r in rows]
    terms = [
        (np.outer(dy2, dx2), corner[0][0]),
        (np.outer(dy2, dx1), corner[0][1]),
        (np.outer(dy1, dx2), corner[1][0]),
        (np.outer(dy1, dx1), corner[1][1]),
    ]
    total = None
    for weight, value in terms:
        term = constant(weight.astype(np.float32)) * value
        total = term if total is None else total + term
    info = np.iinfo(x.dtype.np)
    total = E.clamp(E.trunc(total), float(info.min), float(info.max))
    return E.cast(total, x.dtype)


def _float_list(ctx, value, what):
    if not given(value):
        return None
    array = np.asarray(ctx.static(value, what), dtype=np.float64).reshape(-1)
    return array if array.size else None


@converter("Resize", 10, static_inputs=(1,))
def _resize_10(ctx, x, scales):
    mode = ctx.attr("mode", "nearest")
    how = "asymmetric"
    return _resize(
        ctx,
        x,
        _float_list(ctx, scales, "scales"),
        None,
        None,
        mode=mode,
        how=how,
        nearest_mode="simple",
    )


@converter("Resize", 11, static_inputs=(1, 2, 3))
def _resize_11(ctx, x, roi=None, scales=None, sizes=None):
    mode = ctx.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.error(f"unknown mode {mode!r}")
    how = ctx.attr("coordinate_transformation_mode", "half_pixel")
    scales = _float_list(ctx, scales, "scales")
    size_list = None
    if given(sizes):
        size_list = ctx.ints(sizes, "sizes") or None
    if (scales is None) == (size_list is None):
        raise ctx.error("exactly one of scales and sizes must be given")
    roi_array = _float_list(ctx, roi, "roi")
    if ctx.attr("antialias", 0) and mode == "nearest":
        raise ctx.error("antialias is defined for the linear and cubic modes only")
    axes = ctx.attr("axes", None)
    return _resize(
        ctx,
        x,
        scales,
        size_list,
        roi_array,
        mode=mode,
        how=how,
        nearest_mode=ctx.attr("nearest_mode", "round_prefer_floor"),
        axes=axes,
    )


@converter("Upsample", 7, static_inputs=(1,))
def _upsample(ctx, x, scales=None):
    if ctx.opset < 9:
        scale_list = np.asarray(ctx.attr("scales"), np.float64)
    else:
        scale_list = _float_list(ctx, scales, "scales")
    mode = ctx.attr("mode", "nearest")
    if mode == "bilinear":
        mode = "linear"
    if mode not in ("nearest", "linear"):
        raise ctx.error(f"unknown mode {mode!r}")
    return _resize(
        ctx, x, scale_list, None, None, mode=mode, how="asymmetric", nearest_mode="simple"
    )
