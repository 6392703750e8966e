"""ONNX operators: the sampling family. GridSample (16, 20, 22: N-D, nearest/linear/cubic,
every padding mode), AffineGrid (20), DeformConv (19, 22), RoiAlign (10, 16, 22) and
NonMaxSuppression (10, 11). Attention is in attention.py, Resize and Upsample in resize.py,
the recurrent layers in recurrent.py.

Everything but NonMaxSuppression is written in ember ops on the node's tensors (differentiable,
captured); positions that depend only on shapes are NumPy constants. NonMaxSuppression's
selection decides its output's shape, so it runs in NumPy on the values (a captured model runs
eagerly), as does RoiAlign's adaptive sampling grid when the boxes are not known.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from .._convert import converter
from . import attention, resize  # noqa: F401  (register their converters)
from ._common import E, F, constant, given

# ---------------------------------------------------------------------------------------------
# GridSample (16: 4-D, bilinear/bicubic names; 20, 22: N-D, linear/cubic) and AffineGrid


def _reflect(v, lo: float, hi: float):
    """ONNX's reflection of a coordinate into [lo, hi] (by the near border, repeatedly)."""
    span = hi - lo
    if span <= 0:
        return E.zeros_like(v) + lo
    below = lo - v
    n = E.trunc(below / span)
    r = below - n * span
    from_below = E.where(E.remainder(n, 2.0) == 0, r + lo, hi - r)
    above = v - hi
    n = E.trunc(above / span)
    r = above - n * span
    from_above = E.where(E.remainder(n, 2.0) == 0, hi - r, r + lo)
    return E.where(v < lo, from_below, E.where(v > hi, from_above, v))


def _cubic_coeffs(t, a: float = -0.75) -> list:
    """Keys' cubic convolution weights of the four taps around a fraction ``t`` in [0, 1)."""
    s, u = t + 1, 1 - t
    return [
        ((s * a - 5 * a) * s + 8 * a) * s - 4 * a,
        ((t * (a + 2) - (a + 3)) * t) * t + 1,
        ((u * (a + 2) - (a + 3)) * u) * u + 1,
        (((2 - t) * a - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a,
    ]


def sample_points(flat, coords, dims, mode, padding, borders):
    """Interpolate ``flat`` (B, C, prod(dims)) at the pixel coordinates ``coords`` (one (B, Q)
    float tensor per spatial dimension) as ONNX's GridSample does: ``mode`` nearest, linear
    or cubic; a tap outside the image reads 0 (``zeros``), the nearest edge (``border``) or
    its reflection in ``borders`` (``reflection``). Returns (B, C, Q)."""
    per_dim = []
    for v, d, (lo, hi) in zip(coords, dims, borders):
        if mode == "nearest":
            taps = [(v, None)]
        else:
            base = E.floor(v)
            frac = v - base
            if mode == "linear":
                taps = [(base, 1 - frac), (base + 1, frac)]
            else:
                taps = [(base + (j - 1), w) for j, w in enumerate(_cubic_coeffs(frac))]
        fetched = []
        for index, weight in taps:
            valid = None
            if padding == "zeros":
                valid = (index >= 0) & (index <= d - 1)
            elif padding == "reflection":
                index = E.trunc(_reflect(index, lo, hi))
            index = E.cast(E.clamp(index, 0.0, float(d - 1)), _dt.int64)
            fetched.append((index, weight, valid))
        per_dim.append(fetched)
    strides = [int(np.prod(dims[i + 1 :])) for i in range(len(dims))]
    b, c = flat.shape[0], flat.shape[1]
    q = coords[0].shape[1]
    out = None
    for combo in np.ndindex(*[len(taps) for taps in per_dim]):
        index, weight, valid = None, None, None
        for i, j in enumerate(combo):
            idx, w, ok = per_dim[i][j]
            idx = idx * strides[i] if strides[i] != 1 else idx
            index = idx if index is None else index + idx
            if w is not None:
                weight = w if weight is None else weight * w
            if ok is not None:
                valid = ok if valid is None else valid & ok
        gathered = E.gather(flat, 2, E.broadcast_to(E.unsqueeze(index, 1), (b, c, q)))
        if weight is not None:
            gathered = gathered * E.unsqueeze(E.cast(weight, flat.dtype), 1)
        if valid is not None:
            gathered = E.where(E.unsqueeze(valid, 1), gathered, E.zeros_like(gathered))
        out = gathered if out is None else out + gathered
    return out


_GRID_MODES = {"bilinear": "linear", "bicubic": "cubic"}
_TORCH_MODES = {"linear": "bilinear", "cubic": "bicubic", "nearest": "nearest"}


@converter("GridSample", 16)
def _grid_sample(ctx, x, grid):
    """4-D and 5-D inputs (not 5-D cubic) run ember's grid_sample op (ops/grid_sample.py);
    other ranks, 5-D cubic and a grid of another dtype the composite of `sample_points`."""
    x, grid = ctx.tensor(x), ctx.tensor(grid)
    mode = ctx.attr("mode", "bilinear" if ctx.opset < 20 else "linear")
    mode = _GRID_MODES.get(mode, mode)
    padding = ctx.attr("padding_mode", "zeros")
    align = bool(ctx.attr("align_corners", 0))
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.error(f"unknown mode {ctx.attr('mode')!r}")
    if padding not in ("zeros", "border", "reflection"):
        raise ctx.error(f"unknown padding_mode {padding!r}")
    dims = [int(d) for d in x.shape[2:]]
    k = len(dims)
    if grid.ndim != k + 2 or grid.shape[-1] != k or grid.shape[0] != x.shape[0]:
        raise ctx.error(
            f"grid of shape {tuple(grid.shape)} does not fit input {tuple(x.shape)}: expected "
            f"(N, *out, {k})"
        )
    n, c = x.shape[0], x.shape[1]
    out_spatial = tuple(grid.shape[1:-1])
    if 0 in (n, c) or 0 in out_spatial or 0 in dims:
        return E.zeros((n, c, *out_spatial), dtype=x.dtype)
    if k in (2, 3) and (mode != "cubic" or k == 2) and grid.dtype is x.dtype:
        # PyTorch's sampling, which onnxruntime's kernel follows: the grid_sample op
        return F.grid_sample(x, grid, _TORCH_MODES[mode], padding, align_corners=align)
    work = x.dtype if x.dtype in (_dt.float32, _dt.float64) else _dt.float32
    points = E.reshape(E.cast(grid, work), (n, -1, k))
    coords, borders = [], []
    for i, d in enumerate(dims):
        g = E.select(points, 2, k - 1 - i)  # the grid lists x (the last axis) first
        v = (g + 1) / 2.0 * (d - 1) if align else ((g + 1) * d - 1) / 2.0
        lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
        if mode == "nearest":
            v = E.round(v)
        # a coordinate outside the image moves inside it first (ONNX's reference); cubic
        # applies the padding to each of its taps only, as onnxruntime and PyTorch (the
        # reference would move the coordinate; no conformance case has cubic with padding)
        if padding == "border" and mode != "cubic":
            v = E.where((v < lo) | (v > hi), E.clamp(v, 0.0, d - 1.0), v)
        elif padding == "reflection" and mode != "cubic":
            v = _reflect(v, lo, hi)
        if mode == "nearest":
            v = E.trunc(v)
        coords.append(v)
        borders.append((lo, hi))
    flat = E.reshape(E.cast(x, work), (n, c, -1))
    out = sample_points(flat, coords, dims, mode, padding, borders)
    out = E.reshape(out, (n, c, *out_spatial))
    return out if out.dtype is x.dtype else E.cast(out, x.dtype)


@converter("AffineGrid", 20)
def _affine_grid(ctx, theta, size):
    theta = ctx.tensor(theta)
    size = ctx.ints(size, "size")
    if len(size) not in (4, 5):
        raise ctx.error(f"size must have 4 or 5 entries, got {size}")
    return F.affine_grid(theta, size, align_corners=bool(ctx.attr("align_corners", 0)))


# ---------------------------------------------------------------------------------------------
# DeformConv (19, 22): a convolution whose every kernel tap reads the input at an offset
# position (bilinear, zeros outside), scaled by an optional mask


@converter("DeformConv", 19)
def _deform_conv(ctx, x, w, offset, b=None, mask=None):
    x, w, offset = ctx.tensor(x), ctx.tensor(w), ctx.tensor(offset)
    k = x.ndim - 2
    if k < 1 or w.ndim != x.ndim or offset.ndim != x.ndim:
        raise ctx.error(
            f"X {tuple(x.shape)}, W {tuple(w.shape)} and offset {tuple(offset.shape)} must "
            "share a rank of at least 3"
        )
    n, ic = x.shape[0], x.shape[1]
    oc = w.shape[0]
    kernel = list(ctx.attr("kernel_shape", None) or w.shape[2:])
    strides = list(ctx.attr("strides", None) or [1] * k)
    dilations = list(ctx.attr("dilations", None) or [1] * k)
    pads = list(ctx.attr("pads", None) or [0] * (2 * k))
    group = ctx.attr("group", 1)
    og = ctx.attr("offset_group", 1)
    dims = [int(d) for d in x.shape[2:]]
    out = [int(d) for d in offset.shape[2:]]
    taps = int(np.prod(kernel))
    if ic != w.shape[1] * group or oc % group or ic % og:
        raise ctx.error(
            f"channels do not fit: X has {ic}, W {tuple(w.shape)}, group {group}, offset_group {og}"
        )
    if offset.shape[1] != og * taps * k:
        raise ctx.error(f"offset has {offset.shape[1]} channels, expected {og * taps * k}")
    for i in range(k):
        span = (kernel[i] - 1) * dilations[i] + 1
        want = (dims[i] + pads[i] + pads[i + k] - span) // strides[i] + 1
        if out[i] != want:
            raise ctx.error(f"offset's spatial shape {out} does not fit the convolution")
    work = x.dtype if x.dtype in (_dt.float32, _dt.float64) else _dt.float32
    points = int(np.prod(out))
    off = E.reshape(E.cast(offset, work), (n * og, taps, k, points))
    grid_k = np.stack(np.meshgrid(*[np.arange(s) for s in kernel], indexing="ij"), -1)
    grid_o = np.stack(np.meshgrid(*[np.arange(s) for s in out], indexing="ij"), -1)
    coords = []
    for i in range(k):
        base = (
            grid_k[..., i].reshape(-1, 1) * dilations[i]
            + grid_o[..., i].reshape(1, -1) * strides[i]
            - pads[i]
        )
        v = E.select(off, 2, i) + constant(base.astype(np.float64), E.zeros((), dtype=work))
        coords.append(E.reshape(v, (n * og, taps * points)))
    flat = E.reshape(E.cast(x, work), (n * og, ic // og, -1))
    borders = [(0.0, d - 1.0) for d in dims]
    cols = sample_points(flat, coords, dims, "linear", "zeros", borders)
    cols = E.reshape(cols, (n, og, ic // og, taps, points))
    if given(mask):
        m = E.reshape(E.cast(ctx.tensor(mask), work), (n, og, 1, taps, points))
        cols = cols * m
    cols = E.reshape(cols, (n, group, (ic // group) * taps, points))
    weights = E.reshape(E.cast(w, work), (1, group, oc // group, (ic // group) * taps))
    y = E.reshape(E.matmul(weights, cols), (n, oc, *out))
    if given(b):
        y = y + E.reshape(E.cast(ctx.tensor(b), work), (1, oc) + (1,) * k)
    return y if y.dtype is x.dtype else E.cast(y, x.dtype)


# ---------------------------------------------------------------------------------------------
# RoiAlign (10: pixel corners; 16, 22: coordinate_transformation_mode)


def _roi_axis(v, size: int):
    """onnxruntime's bilinear taps along one axis: (low, high, weight of low, weight of high)
    with a sample beyond (-1, size) weighing 0 and one past the last pixel reading the last."""
    outside = (v < -1.0) | (v > float(size))
    v = E.clamp(v, min=0.0)
    low = E.floor(v)
    edge = low >= size - 1
    last = E.full_like(low, float(size - 1))
    low = E.where(edge, last, low)
    high = E.where(edge, last, low + 1)
    v = E.where(edge, low, v)
    w_high = v - low
    w_low = 1 - w_high
    zero = E.zeros_like(v)
    w_low = E.where(outside, zero, w_low)
    w_high = E.where(outside, zero, w_high)
    return E.cast(low, _dt.int64), E.cast(high, _dt.int64), w_low, w_high


@converter("RoiAlign", 10)
def _roi_align(ctx, x, rois, batch_indices):
    x, rois_t = ctx.tensor(x), ctx.tensor(rois)
    if x.ndim != 4 or rois_t.ndim != 2 or rois_t.shape[1] != 4:
        raise ctx.error(
            f"expected X (N, C, H, W) and rois (R, 4), got {tuple(x.shape)} and "
            f"{tuple(rois_t.shape)}"
        )
    mode = ctx.attr("mode", "avg")
    if mode not in ("avg", "max"):
        raise ctx.error(f"unknown mode {mode!r}")
    ph, pw = ctx.attr("output_height", 1), ctx.attr("output_width", 1)
    ratio = ctx.attr("sampling_ratio", 0)
    scale = ctx.attr("spatial_scale", 1.0)
    how = ctx.attr("coordinate_transformation_mode", "half_pixel" if ctx.opset >= 16 else "")
    half = how == "half_pixel"
    if ctx.opset >= 16 and how not in ("half_pixel", "output_half_pixel"):
        raise ctx.error(f"unknown coordinate_transformation_mode {how!r}")
    n, c, h, w = (int(d) for d in x.shape)
    r = rois_t.shape[0]
    if r == 0:
        return E.zeros((0, c, ph, pw), dtype=x.dtype)
    rois_t = E.cast(rois_t, x.dtype) if rois_t.dtype is not x.dtype else rois_t

    def geometry(boxes):
        """(start_y, start_x, height, width) per roi, in ember ops or NumPy alike (``boxes``
        (R, 4): x1, y1, x2, y2)."""
        shift = 0.5 if half else 0.0
        sx, sy = boxes[:, 0] * scale - shift, boxes[:, 1] * scale - shift
        ex, ey = boxes[:, 2] * scale - shift, boxes[:, 3] * scale - shift
        height, width = ey - sy, ex - sx
        return sy, sx, height, width

    sy, sx, rh, rw = geometry(rois_t)
    if not half:
        rh, rw = E.clamp(rh, min=1.0), E.clamp(rw, min=1.0)
    bin_h, bin_w = rh / ph, rw / pw
    if ratio > 0:
        gh = gw = None
        grid_h = grid_w = ratio
        count = float(ratio * ratio)
    else:
        # the number of samples per bin follows each roi's size: the largest decides the
        # sampling grid (which needs the rois' values), smaller rois mask the extra samples
        boxes = np.asarray(ctx.static(rois, "rois"), dtype=x.dtype.np).reshape(-1, 4)
        _, _, nh, nw = geometry(boxes)
        if not half:
            nh, nw = np.maximum(nh, 1.0), np.maximum(nw, 1.0)
        grid_h = max(int(np.ceil(nh / x.dtype.np.type(ph)).max()), 1)
        grid_w = max(int(np.ceil(nw / x.dtype.np.type(pw)).max()), 1)
        gh, gw = E.ceil(rh / ph), E.ceil(rw / pw)
        count = E.clamp(gh * gw, min=1.0)

    def positions(start, bin_size, pooled, grid, g):
        p = constant(np.arange(pooled).reshape(1, pooled, 1), x)
        i = constant(np.arange(grid).reshape(1, 1, grid) + 0.5, x)
        per = grid if g is None else E.reshape(g, (-1, 1, 1))
        start, bin_size = E.reshape(start, (-1, 1, 1)), E.reshape(bin_size, (-1, 1, 1))
        return start + p * bin_size + i * bin_size / per

    yy = positions(sy, bin_h, ph, grid_h, gh)  # (R, PH, Gy)
    xx = positions(sx, bin_w, pw, grid_w, gw)  # (R, PW, Gx)
    y_lo, y_hi, wy_lo, wy_hi = _roi_axis(yy, h)
    x_lo, x_hi, wx_lo, wx_hi = _roi_axis(xx, w)
    shape_y, shape_x = (r, ph, grid_h, 1, 1), (r, 1, 1, pw, grid_w)
    q = ph * grid_h * pw * grid_w
    batch = E.cast(ctx.tensor(batch_indices), _dt.int64)
    flat = E.index_select(E.reshape(x, (n, c, h * w)), 0, batch)  # (R, C, H * W)
    corners = []
    for yi, wy in ((y_lo, wy_lo), (y_hi, wy_hi)):
        for xi, wx in ((x_lo, wx_lo), (x_hi, wx_hi)):
            index = E.reshape(yi, shape_y) * w + E.reshape(xi, shape_x)
            weight = E.reshape(wy, shape_y) * E.reshape(wx, shape_x)
            index = E.broadcast_to(E.reshape(index, (r, 1, q)), (r, c, q))
            value = E.gather(flat, 2, index) * E.reshape(weight, (r, 1, q))
            corners.append(E.reshape(value, (r, c, ph, grid_h, pw, grid_w)))
    valid = None
    if gh is not None:
        iy = constant(np.arange(grid_h).reshape(1, 1, grid_h, 1, 1), x)
        ix = constant(np.arange(grid_w).reshape(1, 1, 1, 1, grid_w), x)
        valid = (iy < E.reshape(gh, (-1, 1, 1, 1, 1))) & (ix < E.reshape(gw, (-1, 1, 1, 1, 1)))
        valid = E.unsqueeze(valid, 1)  # (R, 1, 1, Gy, 1, Gx)
    if mode == "avg":
        total = corners[0] + corners[1] + corners[2] + corners[3]
        if valid is not None:
            total = E.where(valid, total, E.zeros_like(total))
        total = E.sum(total, dim=(3, 5))
        if gh is None:
            return total / count
        return total / E.reshape(count, (-1, 1, 1, 1))
    best = E.maximum(E.maximum(corners[0], corners[1]), E.maximum(corners[2], corners[3]))
    if valid is None:
        return E.amax(best, dim=(3, 5))
    best = E.where(valid, best, E.full_like(best, float("-inf")))
    best = E.amax(best, dim=(3, 5))
    return E.where(E.isneginf(best), E.zeros_like(best), best)


# ---------------------------------------------------------------------------------------------
# NonMaxSuppression (10, 11): the selection decides the output's shape, so it runs in NumPy
# on the boxes' and scores' values (a captured model runs eagerly)


def _corners(boxes: np.ndarray, center: bool):
    """(y_min, x_min, y_max, x_max) columns of (M, 4) boxes in either ONNX box format."""
    if center:
        xc, yc, bw, bh = boxes[:, 0], boxes[:, 1], boxes[:, 2] / 2, boxes[:, 3] / 2
        return yc - bh, xc - bw, yc + bh, xc + bw
    y1, x1, y2, x2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    return np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)


def _suppressed(corners, chosen: list[int], box: int, threshold: float) -> bool:
    y0, x0, y1, x1 = corners
    sel = np.asarray(chosen)
    ix = np.minimum(x1[sel], x1[box]) - np.maximum(x0[sel], x0[box])
    iy = np.minimum(y1[sel], y1[box]) - np.maximum(y0[sel], y0[box])
    inter = ix * iy
    area_box = (x1[box] - x0[box]) * (y1[box] - y0[box])
    area_sel = (x1[sel] - x0[sel]) * (y1[sel] - y0[sel])
    union = area_box + area_sel - inter
    ok = (ix > 0) & (iy > 0) & (inter > 0) & (area_box > 0) & (area_sel > 0) & (union > 0)
    with np.errstate(all="ignore"):
        iou = np.where(ok, inter / np.where(union > 0, union, 1), 0)
    return bool(np.any(ok & (iou > threshold)))


@converter("NonMaxSuppression", 10)
def _nms(ctx, boxes, scores, max_out=None, iou=None, score_threshold=None):
    boxes = np.asarray(ctx.static(boxes, "boxes"))
    scores = np.asarray(ctx.static(scores, "scores"))
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3:
        raise ctx.error(
            f"expected boxes (B, N, 4) and scores (B, C, N), got {boxes.shape}, {scores.shape}"
        )
    if scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise ctx.error(f"boxes {boxes.shape} and scores {scores.shape} do not fit")
    limit = ctx.ints(max_out, "max_output_boxes_per_class") if given(max_out) else []
    limit = limit[0] if limit else 0
    threshold = float(ctx.static(iou).reshape(-1)[0]) if given(iou) else 0.0
    floor = None
    if given(score_threshold):
        values = np.asarray(ctx.static(score_threshold)).reshape(-1)
        floor = float(values[0]) if values.size else None
    center = bool(ctx.attr("center_point_box", 0))
    selected = []
    for b in range(boxes.shape[0]):
        corners = _corners(boxes[b], center)
        for c in range(scores.shape[1]):
            s = scores[b, c]
            candidates = np.arange(s.shape[0])
            if floor is not None:
                candidates = candidates[s > floor]
            # highest score first, the lower index first among equal scores
            order = candidates[np.lexsort((candidates, -s[candidates]))]
            chosen: list[int] = []
            for box in order:
                if len(chosen) >= limit:
                    break
                if chosen and _suppressed(corners, chosen, int(box), threshold):
                    continue
                chosen.append(int(box))
                selected.append((b, c, int(box)))
    return np.asarray(selected, dtype=np.int64).reshape(-1, 3)
