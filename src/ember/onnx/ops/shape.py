"""Shape ONNX operators: Shape, Size, Reshape, Flatten, (Un)Squeeze, Transpose, Concat, Split,
Slice, Expand, Tile, ConstantOfShape, Range, Pad, DepthToSpace, SpaceToDepth, CenterCropPad,
Trilu, EyeLike and Col2Im.

A model's shape arithmetic (Shape -> Gather -> Concat -> Reshape) reaches these converters as
static NumPy arrays of any integer dtype and is folded by running them eagerly; sizes, axes and
pads are always read with ``ctx.ints`` (a symbolic one makes the model run eagerly).

Data movement works for every ONNX element type: a static tensor of a type ember has no tensors
for (strings, unsigned 16/32/64-bit, float8, complex) is moved through `move`, which applies the
same ember ops to the *positions* of its elements (int64 tensors) and then picks the elements
at the resulting positions in NumPy.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from .._convert import NeedsData, converter, ember_dtype, is_static, supported_dtype
from ._common import E, axis, dtype_np, np_dtype

# ---------------------------------------------------------------------------------------------
# values of any element type


def foreign(value) -> bool:
    """A static value of an element type ember has no tensors for."""
    return is_static(value) and not supported_dtype(value.dtype)


def shape_of(ctx, value) -> tuple[int, ...]:
    """A value's shape as ints (a symbolic size makes the model run eagerly)."""
    try:
        return tuple(int(d) for d in value.shape)
    except (TypeError, ValueError):
        raise NeedsData(
            f"{ctx.label}: the input's shape {tuple(value.shape)} is symbolic"
        ) from None


def move(ctx, fn, *values, fill=None):
    """``fn(*tensors)`` for a data-movement ``fn`` (its outputs are input elements, or ``fill``
    where ``fn`` pads with the value it is given). Tensors and arrays of ember's dtypes run ``fn``
    on ember tensors; static arrays of other types run it on the int64 positions of their
    elements (the padding value then being -1), and the result picks those elements in NumPy."""
    if not any(foreign(v) for v in values if v is not None):
        tensors = [None if v is None else ctx.tensor(v) for v in values]
        return fn(*tensors) if fill is None else fn(*tensors, fill)
    arrays = [np.asarray(ctx.static(v, "the data")) for v in values]
    offset, positions = 0, []
    for a in arrays:
        positions.append(
            ctx.tensor(np.arange(offset, offset + a.size, dtype=np.int64).reshape(a.shape))
        )
        offset += a.size
    flat = np.concatenate([a.reshape(-1) for a in arrays]) if len(arrays) > 1 else arrays[0].ravel()
    out = fn(*positions) if fill is None else fn(*positions, -1)

    def pick(index):
        index = ctx.static(index, "positions")
        taken = flat[np.maximum(index, 0)] if flat.size else np.zeros(index.shape, flat.dtype)
        if fill is not None:
            taken = np.where(index < 0, np.asarray(fill, flat.dtype), taken).astype(flat.dtype)
        return taken

    if isinstance(out, (tuple, list)):
        return tuple(pick(o) for o in out)
    return pick(out)


# ---------------------------------------------------------------------------------------------
# shapes


@converter("Shape", 1)
def _shape(ctx, x):
    dims = np.asarray(shape_of(ctx, x), dtype=np.int64)
    if ctx.opset < 15:
        return dims
    rank = len(dims)
    start, end = ctx.attr("start", 0), ctx.attr("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return dims[start:end].copy()


@converter("Size", 1)
def _size(ctx, x):
    return np.asarray(int(np.prod(shape_of(ctx, x), dtype=np.int64)), dtype=np.int64)


def reshape_target(ctx, in_shape, spec, allowzero: bool) -> tuple[int, ...]:
    """ONNX's output shape: 0 copies the input's size there (unless allowzero), -1 is
    inferred."""
    out = []
    for i, d in enumerate(spec):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                raise ctx.error(f"shape {spec} copies dimension {i}, the input has {len(in_shape)}")
            d = in_shape[i]
        elif d < -1:
            raise ctx.error(f"shape {spec} holds a negative size {d}")
        out.append(int(d))
    if out.count(-1) > 1:
        raise ctx.error(f"shape {spec} infers more than one dimension")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        total = int(np.prod(in_shape, dtype=np.int64))
        if known == 0 or total % known:
            raise ctx.error(f"cannot reshape {tuple(in_shape)} to {tuple(spec)}")
        out[out.index(-1)] = total // known
    if int(np.prod(out, dtype=np.int64)) != int(np.prod(in_shape, dtype=np.int64)):
        raise ctx.error(f"cannot reshape {tuple(in_shape)} to {tuple(spec)}")
    return tuple(out)


@converter("Reshape", 1)
def _reshape(ctx, x, shape=None):
    if ctx.opset < 5:
        spec = [int(d) for d in ctx.attr("shape")]
    else:
        spec = ctx.ints(shape, "Reshape's shape")
    target = reshape_target(ctx, shape_of(ctx, x), spec, bool(ctx.attr("allowzero", 0)))
    return move(ctx, lambda t: E.reshape(t, target), x)


@converter("Flatten", 1)
def _flatten(ctx, x):
    dims = shape_of(ctx, x)
    a = ctx.attr("axis", 1)
    if not -len(dims) <= a <= len(dims):
        raise ctx.error(f"axis {a} is out of range for rank {len(dims)}")
    a = a + len(dims) if a < 0 else a
    target = (int(np.prod(dims[:a], dtype=np.int64)), int(np.prod(dims[a:], dtype=np.int64)))
    return move(ctx, lambda t: E.reshape(t, target), x)


def _axes_of(ctx, axes_input, name="axes"):
    """The axes of (Un)Squeeze and friends: an attribute before opset 13, then an input."""
    if ctx.opset < 13:
        value = ctx.attr(name, None)
        return None if value is None else [int(a) for a in value]
    if axes_input is None:
        return None
    return ctx.ints(axes_input, name)


@converter("Squeeze", 1)
def _squeeze(ctx, x, axes=None):
    dims = shape_of(ctx, x)
    chosen = _axes_of(ctx, axes)
    if chosen is None:
        drop = {i for i, d in enumerate(dims) if d == 1}
    else:
        drop = {axis(a, len(dims), ctx) for a in chosen}
        for a in drop:
            if dims[a] != 1:
                raise ctx.error(f"cannot squeeze dimension {a} of size {dims[a]} (shape {dims})")
    target = tuple(d for i, d in enumerate(dims) if i not in drop)
    return move(ctx, lambda t: E.reshape(t, target), x)


@converter("Unsqueeze", 1)
def _unsqueeze(ctx, x, axes=None):
    dims = shape_of(ctx, x)
    chosen = _axes_of(ctx, axes)
    if chosen is None:
        raise ctx.error("axes are required")
    rank = len(dims) + len(chosen)
    added = {axis(a, rank, ctx) for a in chosen}
    if len(added) != len(chosen):
        raise ctx.error(f"axes {chosen} repeat an axis")
    rest = iter(dims)
    target = tuple(1 if i in added else next(rest) for i in range(rank))
    return move(ctx, lambda t: E.reshape(t, target), x)


@converter("Transpose", 1)
def _transpose(ctx, x):
    rank = len(shape_of(ctx, x))
    perm = ctx.attr("perm", None)
    perm = list(range(rank))[::-1] if perm is None else [axis(p, rank, ctx) for p in perm]
    if sorted(perm) != list(range(rank)):
        raise ctx.error(f"perm {perm} is not a permutation of {rank} axes")
    return move(ctx, lambda t: E.permute(t, perm), x)


@converter("Concat", 1)
def _concat(ctx, *xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        raise ctx.error("needs at least one input")
    rank = len(shape_of(ctx, xs[0]))
    a = axis(ctx.attr("axis", 1) if ctx.opset < 4 else ctx.attr("axis"), rank, ctx)
    if len(xs) > 1 and not foreign(xs[0]):
        # a static input of another integer dtype (shape arithmetic mixes int32 and int64)
        want = dtype_np(xs[0])
        xs = [x.astype(want) if is_static(x) and x.dtype != want else x for x in xs]
    return move(ctx, lambda *ts: E.cat(list(ts), a), *xs)


@converter("Split", 1)
def _split(ctx, x, split=None):
    dims = shape_of(ctx, x)
    a = axis(ctx.attr("axis", 0), len(dims), ctx)
    n = dims[a]
    if ctx.opset >= 13 or (ctx.opset < 2 and split is not None):
        sizes = None if split is None else ctx.ints(split, "Split's split")
    else:
        sizes = ctx.attr("split", None)
        sizes = None if sizes is None else [int(s) for s in sizes]
    if sizes is None:
        parts = ctx.attr("num_outputs", None) if ctx.opset >= 18 else None
        if parts is None:
            # equal parts, one per output (opset 18 asks for num_outputs; older models and
            # lenient writers leave it out)
            parts = ctx.num_outputs
            if n % parts:
                raise ctx.error(f"cannot split a dimension of {n} into {parts} equal parts")
        elif parts != ctx.num_outputs or parts < 1:
            raise ctx.error(f"num_outputs {parts} but the node has {ctx.num_outputs} outputs")
        # (num_outputs: parts of ceil(n / parts), the last ones smaller)
        chunk = -(-n // parts)
        sizes = [min(chunk, max(n - i * chunk, 0)) for i in range(parts)]
    if sum(sizes) != n or any(s < 0 for s in sizes):
        raise ctx.error(f"split sizes {sizes} do not add up to the dimension's {n}")
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()

    def parts_of(t):
        lead = (slice(None),) * a
        return tuple(E.getitem(t, lead + (slice(lo, hi),)) for lo, hi in zip(bounds, bounds[1:]))

    return move(ctx, parts_of, x)


def slice_bounds(start: int, end: int, step: int, n: int) -> slice:
    """ONNX's Slice clamping for one axis as a Python slice of a dimension of ``n``."""
    if step == 0:
        raise ValueError("a slice step of 0")
    start = start + n if start < 0 else start
    end = end + n if end < 0 else end
    if step > 0:
        return slice(min(max(start, 0), n), min(max(end, 0), n), step)
    start = min(max(start, 0), n - 1)
    end = min(max(end, -1), n - 1)
    return slice(start, None if end < 0 else end, step)


@converter("Slice", 1)
def _slice(ctx, x, starts=None, ends=None, axes=None, steps=None):
    dims = shape_of(ctx, x)
    if ctx.opset < 10:
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        axes = ctx.attr("axes", None)
        steps = [1] * len(starts)
    else:
        starts, ends = ctx.ints(starts, "Slice's starts"), ctx.ints(ends, "Slice's ends")
        axes = None if axes is None else ctx.ints(axes, "Slice's axes")
        steps = [1] * len(starts) if steps is None else ctx.ints(steps, "Slice's steps")
    axes = list(range(len(starts))) if axes is None else [axis(a, len(dims), ctx) for a in axes]
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.error("starts, ends, axes and steps must have one entry per sliced axis")
    if len(set(axes)) != len(axes):
        raise ctx.error(f"axes {axes} repeat an axis")
    index = [slice(None)] * len(dims)
    for s, e, a, st in zip(starts, ends, axes, steps):
        if st == 0:
            raise ctx.error("a step of 0")
        index[a] = slice_bounds(int(s), int(e), int(st), dims[a])
    return move(ctx, lambda t: E.getitem(t, tuple(index)), x)


@converter("Expand", 8)
def _expand(ctx, x, shape):
    spec = ctx.ints(shape, "Expand's shape")
    try:
        target = np.broadcast_shapes(shape_of(ctx, x), tuple(spec))
    except ValueError:
        raise ctx.error(f"cannot broadcast {shape_of(ctx, x)} with {tuple(spec)}") from None
    ctx.check_size(target, dtype_np(x))
    return move(ctx, lambda t: E.broadcast_to(t, target), x)


@converter("Tile", 1)
def _tile(ctx, x, repeats, tile_axis=None):
    dims = shape_of(ctx, x)
    if ctx.opset < 6:  # Tile(input, tiles, axis): repeat `tiles` times along `axis`
        reps = [1] * len(dims)
        reps[axis(ctx.ints(tile_axis, "Tile's axis")[0], len(dims), ctx)] = ctx.ints(
            repeats, "Tile's tiles"
        )[0]
    else:
        reps = ctx.ints(repeats, "Tile's repeats")
    if len(reps) != len(dims) or any(r < 0 for r in reps):
        raise ctx.error(f"repeats {reps} must hold one count >= 0 per dimension of {dims}")
    ctx.check_size([d * r for d, r in zip(dims, reps)], dtype_np(x))
    return move(ctx, lambda t: E.tile(t, *reps), x)


# ---------------------------------------------------------------------------------------------
# creation


@converter("ConstantOfShape", 9)
def _constant_of_shape(ctx, shape):
    dims = tuple(ctx.ints(shape, "ConstantOfShape's shape"))
    if any(d < 0 for d in dims):
        raise ctx.error(f"negative size in shape {dims}")
    value = ctx.attr("value", None)
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    if value.size != 1:
        raise ctx.error("value must hold one element")
    ctx.check_size(dims, value.dtype)
    if not supported_dtype(value.dtype):
        return np.full(dims, value.reshape(-1)[0], dtype=value.dtype)
    return E.full(dims, value.reshape(-1)[0].item(), dtype=ember_dtype(value.dtype, ctx.label))


@converter("Range", 11, static_inputs=(0, 1, 2))
def _range(ctx, start, limit, delta):
    want = dtype_np(start)
    scalars = [ctx.static(v, "Range's bounds").reshape(-1) for v in (start, limit, delta)]
    if any(s.size != 1 for s in scalars):
        raise ctx.error("start, limit and delta must be scalars")
    compute = want
    if want.kind == "f" and want.itemsize < 4 or want.name == "bfloat16":
        stash = ctx.attr("stash_type", 1) if ctx.opset >= 27 else None
        compute = np.dtype(np.float64 if stash == 11 else np.float32) if stash else want
    s, lim, d = (v.astype(compute)[0] for v in scalars)
    if d == 0:
        raise ctx.error("delta is 0")
    if compute.kind in "iu":
        count = max(-(-(int(lim) - int(s)) // int(d)), 0)
    else:
        count = max(int(np.ceil((float(lim) - float(s)) / float(d))), 0)
    ctx.check_size([count], want)
    if not supported_dtype(want):
        return (s + np.arange(count, dtype=compute) * d).astype(want)
    dtype = ember_dtype(compute, ctx.label)
    out = E.add(
        E.mul(E.arange(count, dtype=dtype), ctx.tensor(np.asarray(d, compute))),
        ctx.tensor(np.asarray(s, compute)),
    )
    return out if compute == want else E.cast(out, ember_dtype(want, ctx.label))


@converter("EyeLike", 9)
def _eye_like(ctx, x):
    dims = shape_of(ctx, x)
    if len(dims) != 2:
        raise ctx.error(f"the input must be 2-D, got shape {dims}")
    code = ctx.attr("dtype", None)
    want = dtype_np(x) if code is None else np_dtype(code, ctx.label)
    k = int(ctx.attr("k", 0))
    rows, cols = dims
    if not supported_dtype(want):
        return np.eye(rows, cols, k, dtype=want)
    # ones where column - row == k
    r = E.reshape(E.arange(rows, dtype=_dt.int64), (rows, 1))
    c = E.reshape(E.arange(cols, dtype=_dt.int64), (1, cols))
    return E.cast(E.eq(E.sub(c, r), k), ember_dtype(want, ctx.label))


@converter("Trilu", 14)
def _trilu(ctx, x, k=None):
    dims = shape_of(ctx, x)
    if len(dims) < 2:
        raise ctx.error(f"the input must be at least 2-D, got shape {dims}")
    upper = bool(ctx.attr("upper", 1))
    if k is not None and not is_static(k):
        # a k known only at run time: the kept triangle as a mask (the shape does not depend
        # on k, so the model stays capturable)
        rows, cols = dims[-2:]
        offset = ctx.tensor(np.arange(cols)[None, :] - np.arange(rows)[:, None])
        kk = E.reshape(E.cast(ctx.tensor(k), _dt.int64), ())
        keep = E.ge(offset, kk) if upper else E.le(offset, kk)
        t = ctx.tensor(x)
        return E.where(keep, t, E.zeros_like(t))
    diagonal = 0 if k is None else ctx.ints(k, "Trilu's k")[0]
    if foreign(x):
        rows, cols = dims[-2:]
        keep = np.triu(np.ones((rows, cols), bool), diagonal)
        keep = keep if upper else np.tril(np.ones((rows, cols), bool), diagonal)
        return np.where(keep, x, np.zeros((), x.dtype)).astype(x.dtype)
    t = ctx.tensor(x)
    return E.triu(t, diagonal) if upper else E.tril(t, diagonal)


# ---------------------------------------------------------------------------------------------
# padding


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


def pad_value(ctx, x, pairs, mode, value):
    """``x`` padded by (before, after) pairs per dimension with ONNX's Pad semantics (those of
    onnxruntime where the spec is silent): negative sizes crop first; edge and wrap may pad
    past the dimension's size (wrap repeating the period), reflect too (repeated reflection, as
    NumPy's); in constant mode a crop past the data leaves only the padding value."""
    if mode not in _PAD_MODES:
        raise ctx.error(f"unknown mode {mode!r}")
    dims = shape_of(ctx, x)
    out_shape = tuple(n + lo + hi for n, (lo, hi) in zip(dims, pairs))
    if any(d < 0 for d in out_shape):
        raise ctx.error(f"pads {pairs} crop more than the shape {dims}")
    # output position i reads input position i - before: past a crop no position is read
    overcrop = any(n + min(lo, 0) + min(hi, 0) < 0 for n, (lo, hi) in zip(dims, pairs))
    if overcrop and mode != "constant" and 0 not in out_shape:
        raise ctx.error(f"pads {pairs} crop more than the shape {dims}")
    crop = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi) in zip(dims, pairs))
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]

    def padded(t, fill=None):
        fill = value if fill is None else fill
        if overcrop or 0 in out_shape:
            return E.full(out_shape, fill, dtype=t.dtype)
        t = E.getitem(t, crop)
        if not any(lo or hi for lo, hi in grow):
            return t
        if mode == "constant":
            return E.pad(t, _torch_pads(grow), "constant", fill)
        for d, (lo, hi) in enumerate(grow):
            if (lo or hi) and t.shape[d] == 0:
                raise ctx.error(f"cannot {mode}-pad the empty dimension {d}")
        if mode != "reflect":  # edge and wrap read position clip(i) and i mod n: any size
            return E.pad(t, _torch_pads(grow), _PAD_MODES[mode])
        for d, (lo, hi) in enumerate(grow):
            while lo or hi:
                # at most n - 1 at a time: reflecting the padded tensor again continues the
                # pattern NumPy's reflect makes
                n = t.shape[d]
                step_lo, step_hi = min(lo, max(n - 1, 1)), min(hi, max(n - 1, 1))
                pairs_d = [(0, 0)] * len(grow)
                pairs_d[d] = (step_lo, step_hi)
                # (one element reflects to itself)
                t = E.pad(t, _torch_pads(pairs_d), "replicate" if n == 1 else "reflect")
                lo, hi = lo - step_lo, hi - step_hi
        return t

    if mode == "constant":
        return move(ctx, padded, x, fill=value)
    return move(ctx, padded, x)


def _torch_pads(pairs) -> list[int]:
    """(before, after) pairs per dimension as PyTorch's last-dimension-first list."""
    out = []
    for lo, hi in reversed(pairs):
        out += [int(lo), int(hi)]
    return out


@converter("Pad", 1)
def _pad(ctx, x, pads=None, constant_value=None, axes=None):
    rank = len(shape_of(ctx, x))
    mode = ctx.attr("mode", "constant")
    if ctx.opset < 11:
        raw = [int(p) for p in ctx.attr("paddings" if ctx.opset < 2 else "pads")]
        value = ctx.attr("value", 0.0)
    else:
        raw = ctx.ints(pads, "Pad's pads")
        value = 0
        if constant_value is not None and is_static(constant_value):
            cv = np.asarray(constant_value).reshape(-1)
            value = cv[0].item() if cv.size else 0
        elif constant_value is not None and mode == "constant":
            value = constant_value  # a tensor: see pad_value
    chosen = (
        list(range(rank))
        if axes is None
        else [axis(a, rank, ctx) for a in ctx.ints(axes, "Pad's axes")]
    )
    if len(raw) != 2 * len(chosen):
        raise ctx.error(f"pads {raw} must hold two entries per padded axis ({len(chosen)})")
    pairs = [(0, 0)] * rank
    for i, a in enumerate(chosen):
        pairs[a] = (raw[i], raw[i + len(chosen)])
    if is_static(value) or not hasattr(value, "shape"):
        if not foreign(x):
            kind = dtype_np(x).kind
            value = bool(value) if kind == "b" else (int(value) if kind in "iu" else float(value))
        return pad_value(ctx, x, pairs, mode, value)
    # a padding value known only at run time: pad with zeros, then put it where the padding
    # is (which positions those are is static)
    out = pad_value(ctx, x, pairs, mode, 0)
    inside = np.ones([n + min(lo, 0) + min(hi, 0) for n, (lo, hi) in zip(shape_of(ctx, x), pairs)])
    border = np.pad(
        inside == 0, [(max(lo, 0), max(hi, 0)) for lo, hi in pairs], constant_values=True
    )
    return E.where(ctx.tensor(border), E.reshape(E.cast(ctx.tensor(value), out.dtype), ()), out)


@converter("CenterCropPad", 18)
def _center_crop_pad(ctx, x, shape):
    dims = shape_of(ctx, x)
    sizes = ctx.ints(shape, "CenterCropPad's shape")
    chosen = ctx.attr("axes", None)
    chosen = list(range(len(dims))) if chosen is None else [axis(a, len(dims), ctx) for a in chosen]
    if len(sizes) != len(chosen):
        raise ctx.error(f"shape {sizes} must hold one size per axis {chosen}")
    pairs = [(0, 0)] * len(dims)
    for a, want in zip(chosen, sizes):
        diff = want - dims[a]  # > 0 pads, < 0 crops; the odd element goes to the end
        if diff >= 0:
            pairs[a] = (diff // 2, diff - diff // 2)
        else:
            lo = (-diff) // 2
            pairs[a] = (-lo, -(-diff - lo))
    return pad_value(ctx, x, pairs, "constant", 0 if dtype_np(x).kind != "f" else 0.0)


# ---------------------------------------------------------------------------------------------
# rearranging blocks


@converter("DepthToSpace", 1)
def _depth_to_space(ctx, x):
    dims = shape_of(ctx, x)
    if len(dims) != 4:
        raise ctx.error(f"the input must be 4-D, got shape {dims}")
    b, c, h, w = dims
    s = int(ctx.attr("blocksize"))
    if s <= 0 or c % (s * s):
        raise ctx.error(f"channels {c} are not a multiple of blocksize {s} squared")
    mode = ctx.attr("mode", "DCR") if ctx.opset >= 11 else "DCR"
    if mode == "DCR":
        split, perm = (b, s, s, c // (s * s), h, w), (0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        split, perm = (b, c // (s * s), s, s, h, w), (0, 1, 4, 2, 5, 3)
    else:
        raise ctx.error(f"unknown mode {mode!r}")
    target = (b, c // (s * s), h * s, w * s)
    return move(ctx, lambda t: E.reshape(E.permute(E.reshape(t, split), perm), target), x)


@converter("SpaceToDepth", 1)
def _space_to_depth(ctx, x):
    dims = shape_of(ctx, x)
    if len(dims) != 4:
        raise ctx.error(f"the input must be 4-D, got shape {dims}")
    b, c, h, w = dims
    s = int(ctx.attr("blocksize"))
    if s <= 0 or h % s or w % s:
        raise ctx.error(f"height and width {h, w} are not multiples of blocksize {s}")
    mode = ctx.attr("mode", "DCR")
    if mode == "DCR":
        perm = (0, 3, 5, 1, 2, 4)
    elif mode == "CRD":
        perm = (0, 1, 3, 5, 2, 4)
    else:
        raise ctx.error(f"unknown mode {mode!r}")
    split = (b, c, h // s, s, w // s, s)
    target = (b, c * s * s, h // s, w // s)
    return move(ctx, lambda t: E.reshape(E.permute(E.reshape(t, split), perm), target), x)


@converter("Col2Im", 18)
def _col2im(ctx, x, image_shape, block_shape):
    """The adjoint of im2col in any number of spatial dimensions: each column entry is added
    at its image position (a scatter-add at positions computed from the static geometry)."""
    image = ctx.ints(image_shape, "Col2Im's image_shape")
    block = ctx.ints(block_shape, "Col2Im's block_shape")
    nd = len(image)
    dil = [int(v) for v in ctx.attr("dilations", [1] * nd)]
    strides = [int(v) for v in ctx.attr("strides", [1] * nd)]
    pads = [int(v) for v in ctx.attr("pads", [0] * (2 * nd))]
    if len(block) != nd or len(dil) != nd or len(strides) != nd or len(pads) != 2 * nd:
        raise ctx.error("image_shape, block_shape, dilations, strides and pads disagree in rank")
    dims = shape_of(ctx, x)
    if len(dims) != 3:
        raise ctx.error(f"the input must be (N, C * prod(block_shape), L), got shape {dims}")
    n, cb, length = dims
    kernel = int(np.prod(block))
    if kernel == 0 or cb % kernel:
        raise ctx.error(f"dimension 1 ({cb}) is not a multiple of prod(block_shape) {kernel}")
    channels = cb // kernel
    padded = [image[i] + pads[i] + pads[i + nd] for i in range(nd)]
    blocks = [(padded[i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    if int(np.prod(blocks)) != length or min(blocks) < 1:
        raise ctx.error(f"{length} blocks given, the geometry makes {blocks}")
    # position in the padded image of every (kernel offset, block) pair
    k_idx = np.indices(block).reshape(nd, -1)  # (nd, kernel)
    b_idx = np.indices(blocks).reshape(nd, -1)  # (nd, L)
    coords = k_idx[:, :, None] * np.asarray(dil)[:, None, None] + (
        b_idx[:, None, :] * np.asarray(strides)[:, None, None]
    )  # (nd, kernel, L)
    flat = np.ravel_multi_index(tuple(coords), padded)  # (kernel, L)
    area = int(np.prod(padded))
    index = flat[None] + (np.arange(channels) * area)[:, None, None]  # (C, kernel, L)
    index = np.broadcast_to(index.reshape(1, -1), (n, channels * kernel * length))
    t = ctx.tensor(x)
    out = E.zeros((n, channels * area), dtype=t.dtype)
    out = E.scatter_add(out, 1, ctx.tensor(np.ascontiguousarray(index)), E.reshape(t, (n, -1)))
    out = E.reshape(out, (n, channels, *padded))
    crop = (slice(None), slice(None)) + tuple(slice(pads[i], pads[i] + image[i]) for i in range(nd))
    return E.getitem(out, crop)
