"""ONNX operators: the heavier neural-network family. Attention (opsets 23 to 25),
RotaryEmbedding, SwiGLU; Resize and Upsample; GridSample and AffineGrid; RoiAlign,
NonMaxSuppression, DeformConv. The recurrent layers are in recurrent.py.

Everything is written in ember ops on the node's tensors. Positions, weights and masks that
depend only on shapes and attributes are computed in NumPy once and become constants; only
values that decide a shape (Resize's sizes/scales, NonMaxSuppression's selections) need data,
which makes a captured model run eagerly.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as _dt
from .._convert import EMPTY, converter, ember_dtype, to_tensor
from ._common import E, F, dtype_np, np_dtype


def _given(value) -> bool:
    return value is not None and value is not EMPTY


def _const(array, like=None):
    """A constant tensor (in ``like``'s dtype when given)."""
    array = np.asarray(array)
    if like is not None:
        array = array.astype(dtype_np(like))
    return to_tensor(np.ascontiguousarray(array), "a constant")


# ---------------------------------------------------------------------------------------------
# Attention (23: the op; 24: nonpad_kv_seqlen; 25: sliding windows)


def _split_heads(ctx, t, heads, what):
    """(B, L, heads * E) -> (B, heads, L, E)."""
    if heads is None or heads <= 0:
        raise ctx.error(f"3-D {what} needs the q_num_heads and kv_num_heads attributes")
    b, length, hidden = t.shape
    if hidden % heads:
        raise ctx.error(f"{what}'s hidden size {hidden} is not a multiple of {heads} heads")
    return E.permute(E.reshape(t, (b, length, heads, hidden // heads)), (0, 2, 1, 3))


def _safe_softmax(x):
    """Softmax over the last axis with a fully -inf row giving zeros (ONNX's reference)."""
    m = E.amax(x, dim=-1, keepdim=True)
    m = E.where(E.isneginf(m), E.zeros_like(m), m)
    e = E.exp(x - m)
    s = E.sum(e, dim=-1, keepdim=True)
    return e / E.where(s == 0, E.ones_like(s), s)


def _offset_mask(q_len, kv_len, offset, allowed_fn):
    """A bool mask (q, kv) or (B, 1, q, kv) of the (query, key) pairs ``allowed_fn(diff)``
    keeps, where ``diff = i + offset - j``; ``offset`` an int or a (B,) tensor."""
    i = np.arange(q_len).reshape(q_len, 1)
    j = np.arange(kv_len).reshape(1, kv_len)
    if isinstance(offset, int):
        return _const(allowed_fn(i + offset - j))
    diff = E.reshape(offset, (-1, 1, 1, 1)) + _const((i - j).astype(np.int64))
    return allowed_fn(diff)


@converter("Attention", 23)
def _attention(ctx, q, k, v, mask=None, past_key=None, past_value=None, nonpad=None):
    q, k, v = ctx.tensor(q), ctx.tensor(k), ctx.tensor(v)
    if not (q.ndim == k.ndim == v.ndim) or q.ndim not in (3, 4):
        raise ctx.error(
            f"Q, K and V must all be 3-D or all 4-D, got ranks {q.ndim}, {k.ndim}, {v.ndim}"
        )
    three_d = q.ndim == 3
    q_heads = ctx.attr("q_num_heads", None)
    kv_heads = ctx.attr("kv_num_heads", None)
    if three_d:
        q = _split_heads(ctx, q, q_heads, "Q")
        k = _split_heads(ctx, k, kv_heads, "K")
        v = _split_heads(ctx, v, kv_heads, "V")
    dtype = q.dtype
    scale = ctx.attr("scale", None)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[3])
    # the reference scales Q and K by sqrt(scale) each, in the input's dtype
    root = float(np.asarray(math.sqrt(scale), dtype=dtype.np))
    if _given(past_key):
        k = E.cat([ctx.tensor(past_key, dtype), k], 2)
    if _given(past_value):
        v = E.cat([ctx.tensor(past_value, dtype), v], 2)
    present_k, present_v = k, v
    q_len, kv_len = q.shape[2], k.shape[2]
    past_len = ctx.tensor(past_key).shape[2] if _given(past_key) else 0

    # the additive bias: mask, causal frontier, sliding window, padding (None: all zero)
    bias = None
    if _given(mask):
        mask = ctx.tensor(mask)
        pad = kv_len - mask.shape[-1]
        if pad > 0:
            fill = False if mask.dtype is _dt.bool_ else float("-inf")
            mask = E.pad(mask, (0, pad), value=fill)
        if mask.dtype is _dt.bool_:
            bias = E.where(mask, _const(0.0, q), _const(-np.inf, q))
        else:
            bias = E.cast(mask, dtype) if mask.dtype is not dtype else mask
    nonpad_t = ctx.tensor(nonpad) if _given(nonpad) else None
    if nonpad_t is not None and _given(past_key):
        raise ctx.error("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    offset = E.cast(nonpad_t, _dt.int64) - q_len if nonpad_t is not None else past_len
    restrictions = []
    if ctx.attr("is_causal", 0):
        restrictions.append(lambda diff: diff >= 0)
    left = ctx.attr("left_window_size", -1)
    right = ctx.attr("right_window_size", -1)
    if left >= 0:
        restrictions.append(lambda diff: diff <= left)
    if right >= 0:
        restrictions.append(lambda diff: -diff <= right)
    for allowed_fn in restrictions:
        allowed = _offset_mask(q_len, kv_len, offset, allowed_fn)
        term = E.where(allowed, _const(0.0, q), _const(-np.inf, q))
        bias = term if bias is None else bias + term
    if nonpad_t is not None:
        keep = _const(np.arange(kv_len)) < E.reshape(E.cast(nonpad_t, _dt.int64), (-1, 1))
        term = E.where(E.reshape(keep, (-1, 1, 1, kv_len)), _const(0.0, q), _const(-np.inf, q))
        bias = term if bias is None else bias + term

    # grouped-query attention: each K/V head serves q_heads / kv_heads query heads
    hq, hk = q.shape[1], k.shape[1]
    if hq != hk:
        if hq % hk or v.shape[1] != hk:
            raise ctx.error(f"{hq} query heads cannot share {hk} key/value heads")
        k = E.repeat_interleave(k, hq // hk, dim=1)
        v = E.repeat_interleave(v, hq // hk, dim=1)

    softcap = ctx.attr("softcap", 0.0)
    mode = ctx.attr("qk_matmul_output_mode", 0)
    precision = ctx.attr("softmax_precision", None)
    qk_wanted = ctx.output_used(3)
    fast = dtype in (_dt.float32, _dt.float64)
    if softcap <= 0 and not qk_wanted and precision is None and fast:
        # ember's attention (one fused op without gradients); a float bias with a fully -inf
        # row gives zeros there as the reference's guard does (half precision follows the
        # reference's steps, whose roundings the fused op would not repeat)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)
    else:
        scores = E.matmul(q * root, E.transpose(k * root, 2, 3))
        if softcap > 0:
            scores = E.tanh(scores / softcap) * softcap
        qk = scores
        if bias is not None:
            scores = scores + bias
        if mode == 2:
            qk = scores
        if precision is not None:
            scores = E.cast(scores, ember_dtype(np_dtype(precision, ctx.label), ctx.label))
        weights = _safe_softmax(scores)
        if bias is not None:
            # the reference's guard decides on the bias alone (a NaN score stays masked)
            dead = E.isneginf(E.amax(bias, dim=-1, keepdim=True))
            weights = E.where(dead, E.zeros_like(weights), weights)
        if mode == 3:
            qk = weights
        weights = E.cast(weights, dtype) if weights.dtype is not dtype else weights
        y = E.matmul(weights, v)
        if qk.dtype is not dtype:
            qk = E.cast(qk, dtype)
    if three_d:
        b, h, length, e = y.shape
        y = E.reshape(E.permute(y, (0, 2, 1, 3)), (b, length, h * e))
    if not ctx.output_used(3):
        return y, present_k, present_v
    return y, present_k, present_v, qk


@converter("RotaryEmbedding", 23)
def _rotary_embedding(ctx, x, cos, sin, position_ids=None):
    x, cos, sin = ctx.tensor(x), ctx.tensor(cos), ctx.tensor(sin)
    shape = tuple(x.shape)
    if x.ndim == 4:  # (B, heads, L, E) -> (B, L, heads, E)
        x = E.permute(x, (0, 2, 1, 3))
    elif x.ndim == 3:
        heads = ctx.attr("num_heads", 0)
        if heads <= 0 or shape[2] % heads:
            raise ctx.error(f"a 3-D input needs num_heads dividing {shape[2]}, got {heads}")
        x = E.reshape(x, (shape[0], shape[1], heads, shape[2] // heads))
    else:
        raise ctx.error(f"the input must be 3-D or 4-D, got shape {shape}")
    head = x.shape[3]
    dim = ctx.attr("rotary_embedding_dim", 0) or head
    if dim % 2 or dim > head:
        raise ctx.error(f"rotary_embedding_dim {dim} must be even and at most {head}")
    if _given(position_ids):
        ids = ctx.tensor(position_ids)
        cos = E.reshape(E.index_select(cos, 0, E.reshape(ids, (-1,))), (*ids.shape, -1))
        sin = E.reshape(E.index_select(sin, 0, E.reshape(ids, (-1,))), (*ids.shape, -1))
    if cos.shape[-1] != dim // 2 or sin.shape[-1] != dim // 2:
        raise ctx.error(
            f"the caches' last dimension ({cos.shape[-1]}, {sin.shape[-1]}) must be "
            f"rotary_embedding_dim / 2 = {dim // 2}"
        )
    cos, sin = E.unsqueeze(cos, 2), E.unsqueeze(sin, 2)
    rotate = E.narrow(x, 3, 0, dim)
    interleaved = bool(ctx.attr("interleaved", 0))
    if interleaved:
        pairs = E.reshape(rotate, (*rotate.shape[:3], dim // 2, 2))
        x1, x2 = E.select(pairs, 4, 0), E.select(pairs, 4, 1)
    else:
        x1, x2 = E.narrow(rotate, 3, 0, dim // 2), E.narrow(rotate, 3, dim // 2, dim // 2)
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if interleaved:
        rotated = E.reshape(E.stack([real, imag], -1), tuple(rotate.shape))
    else:
        rotated = E.cat([real, imag], 3)
    if dim < head:
        rotated = E.cat([rotated, E.narrow(x, 3, dim, head - dim)], 3)
    if len(shape) == 3:
        return E.reshape(rotated, shape)
    return E.permute(rotated, (0, 2, 1, 3))


@converter("SwiGLU", 28)
def _swiglu(ctx, a, b):
    a, b = ctx.tensor(a), ctx.tensor(b)
    if tuple(a.shape) != tuple(b.shape):
        raise ctx.error(f"A {tuple(a.shape)} and B {tuple(b.shape)} must have one shape")
    return a * E.sigmoid(a * ctx.attr("alpha", 1.0)) * b


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


def _source_coords(how, out_int, scale, n_in, roi):
    """Each output position's coordinate in the input, and (tf_crop_and_resize) which fall
    outside it."""
    y = np.arange(out_int, dtype=np.float64)
    out_len = scale * n_in
    outside = None
    if how == "align_corners":
        x = np.zeros(out_int) if out_len == 1 else y * (n_in - 1) / (out_len - 1)
    elif how == "asymmetric":
        x = y / scale
    elif how == "tf_crop_and_resize":
        lo, hi = roi
        if out_len == 1:
            x = np.full(out_int, (hi - lo) * (n_in - 1) / 2)
        else:
            x = y * (hi - lo) * (n_in - 1) / (out_len - 1)
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
    return x, outside


def resize_taps(
    n_in, out_int, scale, *, mode, how, nearest_mode, cubic_a, exclude_outside, antialias, roi=None
):
    """(index (out, taps), weight (out, taps), outside (out,) or None) of one axis, in ONNX's
    reference arithmetic (edge-clamped neighbours)."""
    x, outside = _source_coords(how, out_int, scale, n_in, roi)
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


def resize_axis(x, axis, index, weight, outside=None, fill=0.0):
    """``x`` resized along ``axis`` with the taps of `resize_taps` (ember ops)."""
    out, taps = index.shape
    used = np.flatnonzero(np.any(weight != 0, axis=0))
    index, weight = index[:, used], weight[:, used]
    if (
        index.shape[1] == 1
        or np.all((weight == 0) | (weight == 1))
        and np.all(weight.sum(axis=1) == 1)
    ):
        # one source per output (nearest, or exact hits): a gather, no arithmetic
        pick = index[np.arange(out), np.argmax(weight, axis=1)]
        y = E.index_select(x, axis, _const(pick.astype(np.int64)))
    else:
        taps = index.shape[1]
        gathered = E.index_select(x, axis, _const(index.reshape(-1).astype(np.int64)))
        shape = list(x.shape)
        shape[axis : axis + 1] = [out, taps]
        gathered = E.reshape(gathered, tuple(shape))
        wshape = [1] * len(shape)
        wshape[axis], wshape[axis + 1] = out, taps
        y = E.sum(gathered * _const(weight.reshape(wshape), x), dim=axis + 1)
    if outside is not None and outside.any():
        mshape = [1] * x.ndim
        mshape[axis] = out
        y = E.where(_const(outside.reshape(mshape)), _const(fill, y), y)
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
        outs = [int(s * shape[a]) for s, a in zip(factor, axes)]
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
    if any(o == 0 for o in outs) or 0 in shape:
        final = list(shape)
        for a, o in zip(axes, outs):
            final[a] = o
        return E.zeros(tuple(final), dtype=out_dtype)
    compute = x
    if mode != "nearest" and out_dtype not in (_dt.float32, _dt.float64):
        compute = E.cast(x, _dt.float64 if not out_dtype.is_floating_point else _dt.float32)
    options = dict(
        mode=mode,
        how=how,
        nearest_mode=nearest_mode,
        cubic_a=ctx.attr("cubic_coeff_a", -0.75),
        exclude_outside=bool(ctx.attr("exclude_outside", 0)),
        antialias=bool(ctx.attr("antialias", 0)),
    )
    fill = ctx.attr("extrapolation_value", 0.0)
    for a, out, scale, axis_roi in zip(axes, outs, factor, rois):
        if math.isclose(scale, 1.0) and out == shape[a] and axis_roi == (0.0, 1.0):
            continue
        index, weight, outside = resize_taps(shape[a], out, scale, roi=axis_roi, **options)
        compute = resize_axis(compute, a, index, weight, outside, fill)
    if compute.dtype is not out_dtype:
        if not out_dtype.is_floating_point:
            info = np.iinfo(out_dtype.np)
            compute = E.clamp(E.round(compute), float(info.min), float(info.max))
        compute = E.cast(compute, out_dtype)
    elif compute is x:
        compute = E.clone(x)
    return compute


def _float_list(ctx, value, what):
    if not _given(value):
        return None
    array = np.asarray(ctx.static(value, what), dtype=np.float64).reshape(-1)
    return array if array.size else None


@converter("Resize", 10)
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


@converter("Resize", 11)
def _resize_11(ctx, x, roi=None, scales=None, sizes=None):
    mode = ctx.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.error(f"unknown mode {mode!r}")
    how = ctx.attr("coordinate_transformation_mode", "half_pixel")
    scales = _float_list(ctx, scales, "scales")
    size_list = None
    if _given(sizes):
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


@converter("Upsample", 7)
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


@converter("GridSample", 16)
def _grid_sample(ctx, x, grid):
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
        v = E.select(off, 2, i) + _const(base.astype(np.float64), E.zeros((), dtype=work))
        coords.append(E.reshape(v, (n * og, taps * points)))
    flat = E.reshape(E.cast(x, work), (n * og, ic // og, -1))
    borders = [(0.0, d - 1.0) for d in dims]
    cols = sample_points(flat, coords, dims, "linear", "zeros", borders)
    cols = E.reshape(cols, (n, og, ic // og, taps, points))
    if _given(mask):
        m = E.reshape(E.cast(ctx.tensor(mask), work), (n, og, 1, taps, points))
        cols = cols * m
    cols = E.reshape(cols, (n, group, (ic // group) * taps, points))
    weights = E.reshape(E.cast(w, work), (1, group, oc // group, (ic // group) * taps))
    y = E.reshape(E.matmul(weights, cols), (n, oc, *out))
    if _given(b):
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
        p = _const(np.arange(pooled).reshape(1, pooled, 1), x)
        i = _const(np.arange(grid).reshape(1, 1, grid) + 0.5, x)
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
        iy = _const(np.arange(grid_h).reshape(1, 1, grid_h, 1, 1), x)
        ix = _const(np.arange(grid_w).reshape(1, 1, 1, 1, grid_w), x)
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
    limit = ctx.ints(max_out, "max_output_boxes_per_class") if _given(max_out) else []
    limit = limit[0] if limit else 0
    threshold = float(ctx.static(iou).reshape(-1)[0]) if _given(iou) else 0.0
    floor = None
    if _given(score_threshold):
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


# ---------------------------------------------------------------------------------------------
# FlexAttention (ai.onnx.preview 1), LinearAttention (27), CausalConvWithState (27)


def _work_dtype(dtype):
    """float32 for half precision (and anything narrower), else the dtype itself."""
    return _dt.float64 if dtype is _dt.float64 else _dt.float32


def _precision(ctx, default):
    code = ctx.attr("softmax_precision", None)
    if code is None:
        return default
    return ember_dtype(np_dtype(code, ctx.label), ctx.label)


@converter("FlexAttention", 1, domain="ai.onnx.preview")
def _flex_attention(ctx, q, k, v):
    q, k, v = ctx.tensor(q), ctx.tensor(k), ctx.tensor(v)
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ctx.error("Q, K and V must be 4-D (batch, heads, sequence, head size)")
    hq, hk = q.shape[1], k.shape[1]
    if v.shape[1] != hk or v.shape[2] != k.shape[2] or k.shape[3] != q.shape[3]:
        raise ctx.error(f"Q {tuple(q.shape)}, K {tuple(k.shape)}, V {tuple(v.shape)} do not fit")
    if hq != hk:
        if hq % hk:
            raise ctx.error(f"{hq} query heads cannot share {hk} key/value heads")
        k = E.repeat_interleave(k, hq // hk, dim=1)
        v = E.repeat_interleave(v, hq // hk, dim=1)
    scale = ctx.attr("scale", None)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[3])
    root = float(np.asarray(np.sqrt(np.float32(scale)), dtype=q.dtype.np))
    scores = E.matmul(q * root, E.transpose(k * root, 2, 3))
    work = _precision(ctx, _work_dtype(q.dtype))
    scores = E.cast(scores, work) if scores.dtype is not work else scores
    if ctx.has_attr("score_mod"):
        (scores,) = ctx.run(ctx.subgraph("score_mod"), [scores])
        scores = ctx.tensor(scores, work)
    m = E.amax(scores, dim=-1, keepdim=True)
    e = E.exp(scores - m)
    probs = e / E.sum(e, dim=-1, keepdim=True)
    if ctx.has_attr("prob_mod"):
        (probs,) = ctx.run(ctx.subgraph("prob_mod"), [probs])
        probs = ctx.tensor(probs, work)
    out = E.matmul(probs, E.cast(v, work) if v.dtype is not work else v)
    return out if out.dtype is v.dtype else E.cast(out, v.dtype)


def _heads_time_major(t, heads):
    """(B, T, heads * D) -> (T, B, heads, D)."""
    b, steps, hidden = t.shape
    return E.permute(E.reshape(t, (b, steps, heads, hidden // heads)), (1, 0, 2, 3))


@converter("LinearAttention", 27)
def _linear_attention(ctx, q, k, v, past_state=None, decay=None, beta=None):
    rule = ctx.attr("update_rule", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ctx.error(f"unknown update_rule {rule!r}")
    hq, hk = ctx.attr("q_num_heads", 0), ctx.attr("kv_num_heads", 0)
    if hq <= 0 or hk <= 0 or hq % hk:
        raise ctx.error(f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hk})")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != _given(decay) or delta != _given(beta):
        raise ctx.error(
            f"update_rule {rule!r} {'needs' if gated else 'forbids'} decay and "
            f"{'needs' if delta else 'forbids'} beta"
        )
    q, k, v = ctx.tensor(q), ctx.tensor(k), ctx.tensor(v)
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ctx.error("query, key and value must be 3-D (B, T, heads * D)")
    out_dtype = q.dtype
    f32 = _dt.float32
    b, steps = q.shape[0], q.shape[1]
    dk, dv = q.shape[2] // hq, v.shape[2] // hk
    xs = [E.cast(_heads_time_major(t, h), f32) for t, h in ((q, hq), (k, hk), (v, hk))]
    if gated:
        g = ctx.tensor(decay)
        if g.ndim != 3 or g.shape[2] not in (hk, hk * dk):
            raise ctx.error(f"decay's last dimension must be {hk} or {hk * dk}")
        xs.append(E.cast(_heads_time_major(g, hk), f32))  # (T, B, H, 1 or dk)
    if delta:
        be = ctx.tensor(beta)
        if be.ndim != 3 or be.shape[2] not in (hk, 1):
            raise ctx.error(f"beta's last dimension must be {hk} or 1")
        xs.append(E.cast(_heads_time_major(be, be.shape[2]), f32))  # (T, B, H or 1, 1)
    if _given(past_state):
        past = ctx.tensor(past_state)
        if tuple(past.shape) != (b, hk, dk, dv):
            raise ctx.error(f"past_state must have shape {(b, hk, dk, dv)}")
        state_dtype, state = past.dtype, E.cast(past, f32)
    else:
        state_dtype, state = out_dtype, E.zeros((b, hk, dk, dv), dtype=f32)
    scale = ctx.attr("scale", 0.0) or 1.0 / math.sqrt(dk)
    group = hq // hk

    def step(s, inputs):
        q_t, k_t, v_t = inputs[:3]
        rest = list(inputs[3:])
        if gated:
            s = s * E.unsqueeze(E.exp(rest.pop(0)), -1)
        if delta:
            retrieved = E.squeeze(E.matmul(E.unsqueeze(k_t, 2), s), 2)
            v_t = rest.pop(0) * (v_t - retrieved)
        s = s + E.unsqueeze(k_t, -1) * E.unsqueeze(v_t, -2)
        read = s if group == 1 else E.repeat_interleave(s, group, dim=1)
        return s, E.squeeze(E.matmul(E.unsqueeze(q_t, 2), read), 2) * scale

    if steps == 0:
        out = E.zeros((b, 0, hq * dv), dtype=f32)
    else:
        state, outs = E.scan(step, state, tuple(xs))  # outs (T, B, Hq, dv)
        out = E.reshape(E.permute(outs, (1, 0, 2, 3)), (b, steps, hq * dv))
    out = out if out.dtype is out_dtype else E.cast(out, out_dtype)
    return out, state if state.dtype is state_dtype else E.cast(state, state_dtype)


@converter("CausalConvWithState", 27)
def _causal_conv_with_state(ctx, x, w, bias=None, past_state=None):
    x, w = ctx.tensor(x), ctx.tensor(w)
    activation = ctx.attr("activation", "none")
    if activation not in ("none", "silu", "swish"):
        raise ctx.error(f"unknown activation {activation!r}")
    if x.ndim != 3 or w.ndim != 3 or w.shape[0] != x.shape[1] or w.shape[1] != 1:
        raise ctx.error(
            f"expected input (B, C, L) and weight (C, 1, k), got {tuple(x.shape)} and "
            f"{tuple(w.shape)}"
        )
    b, c = x.shape[0], x.shape[1]
    taps = w.shape[2]
    if _given(past_state):
        past = ctx.tensor(past_state, x.dtype)
        if tuple(past.shape) != (b, c, taps - 1):
            raise ctx.error(f"past_state must have shape {(b, c, taps - 1)}")
    else:
        past = E.zeros((b, c, taps - 1), dtype=x.dtype)
    padded = E.cat([past, x], 2)
    work = _work_dtype(x.dtype)
    conv_in = padded if padded.dtype is work else E.cast(padded, work)
    bias_t = None if not _given(bias) else ctx.tensor(bias, work)
    y = E.conv1d(conv_in, E.cast(w, work) if w.dtype is not work else w, bias_t, groups=c)
    if activation != "none":
        if x.dtype is not work:  # the reference rounds the convolution to the input's dtype
            y = E.cast(E.cast(y, x.dtype), work)
        y = y * E.sigmoid(y)
    y = y if y.dtype is x.dtype else E.cast(y, x.dtype)
    return y, E.narrow(padded, 2, padded.shape[2] - (taps - 1), taps - 1)
