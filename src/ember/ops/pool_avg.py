"""Average pooling: the primitive ``avg_pool`` and its adjoint ``avg_pool_backward`` (each the
other's VJP: the map is linear), and the public avg_pool1d/2d/3d (also in ember.nn.functional).

Semantics are torch's: stride defaults to kernel_size; padding (at most half the kernel) adds
zeros; with ``count_include_pad`` the divisor counts the padding inside the window (but not the
overhang that ceil_mode adds past it); otherwise only the real elements; ``divisor_override``
replaces the divisor. The divisor of a window is a product of per-dimension lengths.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import dtypes as dt
from ..errors import ShapeError
from ..kernels.conv_plan import compute_dtype, scratch
from ..kernels.pool_geometry import pad_input, padded_extent, pool_out_size
from ..types import TensorType
from . import _attr_rules as R
from . import _onnx_conv as oxc
from ._autocast import Autocast, autocasts
from ._node_names import pool_node_name
from ._registry import Cost, OpDef, apply, export, register
from ._rules import Layout
from ._util import half_precision, io_bytes, numel, require_float, value_bytes
from .conv_functional import int_tuple
from .pool_window import check_pool_args, unbatch, window_slices
from .promotion import to_tensor


def _geometry(in_size, kernel, stride, padding, ceil_mode):
    out = tuple(
        pool_out_size(n, k, s, p, 1, ceil_mode)
        for n, k, s, p in zip(in_size, kernel, stride, padding)
    )
    if not all(isinstance(n, int) for n in (*in_size, *out)):
        return out, None  # (the extent a kernel reads: known when the sizes are)
    return out, padded_extent(in_size, kernel, stride, padding, (1,) * len(kernel), out)


@functools.lru_cache(maxsize=256)
def _divisor(in_size, out, kernel, stride, padding, count_include_pad, override, dtype):
    """The divisor of every window, an array of the output's spatial shape (read-only: kept
    per geometry, as a model pools the same sizes at every call)."""
    div = _divisors(in_size, out, kernel, stride, padding, count_include_pad, override, dtype)
    div.flags.writeable = False
    return div


def _divisors(in_size, out, kernel, stride, padding, count_include_pad, override, dtype):
    if override is not None:
        return np.asarray(override, dtype)
    div = np.ones((), np.int64)
    for axis, (n, o, k, s, p) in enumerate(zip(in_size, out, kernel, stride, padding)):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        if count_include_pad:
            length = end - start
        else:
            length = np.minimum(end, n) - np.maximum(start, 0)
        shape = [1] * len(out)
        shape[axis] = o
        div = div * length.reshape(shape)
    return div.astype(dtype)


def _attrs_geometry(in_size, attrs):
    kernel, stride, padding = attrs["kernel"], attrs["stride"], attrs["padding"]
    out, extent = _geometry(in_size, kernel, stride, padding, attrs["ceil_mode"])
    return kernel, stride, padding, out, extent


def _avg_kernel(x, **attrs):
    dtype = compute_dtype(x.dtype)
    xc = x.astype(dtype, copy=False)
    kernel, stride, padding, out, extent = _attrs_geometry(x.shape[2:], attrs)
    xp = pad_input(xc, padding, extent, 0, "avgpool")
    total = None
    for _, sl in window_slices(kernel, stride, (1,) * len(kernel), out):
        window = xp[(Ellipsis,) + sl]
        if total is None:
            total = window.copy()
        else:
            total += window
    div = _divisor(
        tuple(x.shape[2:]),
        out,
        kernel,
        stride,
        padding,
        attrs["count_include_pad"],
        attrs["divisor_override"],
        dtype,
    )
    if total.dtype.kind in "iu":
        # PyTorch's integer average: C's division, truncated toward zero
        quotient = np.abs(total) // np.abs(div)
        return np.where((total < 0) != (div < 0), -quotient, quotient).astype(x.dtype)
    total /= div
    return total.astype(x.dtype, copy=False)


def _avg_divisors(in_size, attrs, out, dtype) -> np.ndarray:
    """Every output position's divisor (its spatial shape, ``dtype``), as `_avg_kernel`
    divides by."""
    div = _divisor(
        tuple(in_size),
        out,
        attrs["kernel"],
        attrs["stride"],
        attrs["padding"],
        attrs["count_include_pad"],
        attrs["divisor_override"],
        dtype,
    )
    return np.broadcast_to(div, out)


def _avg_fast(x, **attrs):
    """The C kernel (kernels/cavg_pool.py: float32/float64, 1-d to 3-d, `_avg_kernel`'s bits),
    or None."""
    from ..kernels import cavg_pool

    if x.dtype not in (np.float32, np.float64):
        return None
    found = _c_geometry(tuple(x.shape[2:]), tuple(sorted(attrs.items())), x.dtype)
    return None if found is None else cavg_pool.avg_pool(x, *found)


@functools.lru_cache(maxsize=256)
def _c_geometry(in_size: tuple, attrs: tuple, dtype):
    """(the C kernel's geometry block, every output position's divisor, contiguous), or None:
    kept per geometry, as a model pools the same sizes at every call (an eager call otherwise
    spends longer building them than a small pooling takes)."""
    from ..kernels import cavg_pool

    attrs = dict(attrs)
    kernel, stride, padding, out, _ = _attrs_geometry(in_size, attrs)
    geometry = cavg_pool.lifted_geometry(in_size, out, kernel, stride, padding)
    if geometry is None:
        return None
    div = np.ascontiguousarray(_avg_divisors(in_size, attrs, out, dtype))
    geometry.flags.writeable = div.flags.writeable = False
    return geometry, div


def _avg_c_step(node):
    """The graph runner's step of an ``avg_pool`` node (float32/float64), or None."""
    from ..kernels import cavg_pool

    x, y = node.inputs[0].type, node.outputs[0].type
    dtype = np.dtype(x.dtype.np)
    if dtype not in (np.float32, np.float64) or not all(isinstance(d, int) for d in x.shape):
        return None
    attrs = node.attrs
    in_size, out = tuple(x.shape[2:]), tuple(y.shape[2:])
    geometry = cavg_pool.lifted_geometry(
        in_size, out, attrs["kernel"], attrs["stride"], attrs["padding"]
    )
    if geometry is None:
        return None
    div = _avg_divisors(in_size, attrs, out, dtype)
    return cavg_pool.avg_pool_c_step(x.shape[0] * x.shape[1], dtype, geometry, div)


def _avg_backward_kernel(g, *, in_size, **attrs):
    dtype = compute_dtype(g.dtype)
    kernel, stride, padding, out, extent = _attrs_geometry(in_size, attrs)
    div = _divisor(
        tuple(in_size),
        out,
        kernel,
        stride,
        padding,
        attrs["count_include_pad"],
        attrs["divisor_override"],
        dtype,
    )
    share = g.astype(dtype, copy=False) / div
    acc = scratch("avgpool_grad", g.shape[:2] + tuple(extent), dtype)
    acc.fill(0)
    for _, sl in window_slices(kernel, stride, (1,) * len(kernel), out):
        acc[(Ellipsis,) + sl] += share
    inner = tuple(slice(p, p + n) for p, n in zip(padding, in_size))
    return acc[(slice(None), slice(None)) + inner].astype(g.dtype)


def _avg_infer(x, **attrs):
    name = f"avg_pool{len(attrs['kernel'])}d"
    if x.dtype is not dt.int64:  # (int64: PyTorch's CPU kernel's integer averages)
        require_float(name, x)
    out = check_pool_args(
        name,
        x,
        attrs["kernel"],
        attrs["stride"],
        attrs["padding"],
        (1,) * len(attrs["kernel"]),
        attrs["ceil_mode"],
    )
    return TensorType(tuple(x.shape[:2]) + out, x.dtype)


def _avg_backward_infer(g, *, in_size, **attrs):
    name = "avg_pool_backward"
    require_float(name, g)
    out, _ = _geometry(
        in_size, attrs["kernel"], attrs["stride"], attrs["padding"], attrs["ceil_mode"]
    )
    if tuple(g.shape[2:]) != out:
        raise ShapeError(
            f"gradient of spatial size {tuple(g.shape[2:])} does not match the pooled size {out} "
            f"of an input of size {in_size}",
            op=name,
        )
    return TensorType(tuple(g.shape[:2]) + tuple(in_size), g.dtype)


def _window_cost(windows: int, attrs, in_types, out_types) -> Cost:
    # one add per window element and one division per window
    return Cost(windows * (numel(attrs["kernel"]) + 1), io_bytes(in_types, out_types))


def _avg_cost(in_types, out_types, attrs) -> Cost:
    return _window_cost(numel(out_types[0].shape), attrs, in_types, out_types)


def _avg_backward_cost(in_types, out_types, attrs) -> Cost:
    return _window_cost(numel(in_types[0].shape), attrs, in_types, out_types)


def _avg_vjp(ctx, g):
    in_size = tuple(ctx.in_types[0].shape[2:])
    return (apply(AVG_POOL_BACKWARD, g, in_size=in_size, **ctx.attrs),)


def _avg_backward_vjp(ctx, g):
    attrs = {k: v for k, v in ctx.attrs.items() if k != "in_size"}
    return (apply(AVG_POOL, g, **attrs),)


def _avg_workspace(node, layouts) -> int:
    """`_avg_kernel`'s temporaries beyond the result: none counted in float32/float64 (the
    running total becomes the result). Half precision sums a float32 copy of the input into a
    float32 total, both alive while the total is rounded."""
    x, out = node.inputs[0], node.outputs[0]
    return 2 * value_bytes(x) + 2 * value_bytes(out) if half_precision(x) else 0


def _avg_backward_workspace(node, layouts) -> int:
    """`_avg_backward_kernel`'s half-precision temporaries beyond the result: each window's
    share of the gradient, in float32 (none counted in float32/float64)."""
    g = node.inputs[0]
    return 2 * value_bytes(g) if half_precision(g) else 0


def _onnx_avg_pool(e):
    a = e.attrs
    if a["divisor_override"] is not None:
        e.unsupported("with divisor_override")
    return e.node(
        "AveragePool",
        e.inputs,
        kernel_shape=list(a["kernel"]),
        strides=list(a["stride"]),
        pads=list(a["padding"]) * 2,
        ceil_mode=int(a["ceil_mode"]),
        count_include_pad=int(a["count_include_pad"]),
    )


_POOL_ATTRS = {
    "kernel": R.Ints(1, arity=(1, 3)),
    "stride": R.Ints(1, arity=(1, 3)),
    "padding": R.Ints(0, arity=(1, 3)),
    "ceil_mode": R.Bool(),
    "count_include_pad": R.Bool(),
    "divisor_override": R.Optional(R.Int(-(2**31), 2**31)),
}
AVG_POOL_ATTRS = _POOL_ATTRS  # (attribute rules, ops/_attr_rules.py: what a file may hold)
AVG_POOL_BACKWARD_ATTRS = {**_POOL_ATTRS, "in_size": R.Ints(0, symbolic=True, arity=(1, 5))}


AVG_POOL = register(
    OpDef(
        name="avg_pool",
        attrs=AVG_POOL_ATTRS,
        layout=Layout((0,)),  # (channels-last in, out: PyTorch's)
        grad_fn=lambda attrs, in_types: pool_node_name("AvgPool{}DBackward0", in_types),
        onnx=_onnx_avg_pool,
        kind="nn",
        infer=_avg_infer,
        kernel=_avg_kernel,
        fast=_avg_fast,
        c_step=_avg_c_step,
        vjp=_avg_vjp,
        cost=_avg_cost,
        save_inputs=(),
        workspace=_avg_workspace,
        doc="avg_pool(x; kernel, stride, padding, ceil_mode, count_include_pad, "
        "divisor_override): N-d average pooling",
    )
)


def _onnx_avg_pool_backward(e):
    a = e.attrs
    (g,) = e.inputs
    kernel, stride, padding, in_size = a["kernel"], a["stride"], a["padding"], a["in_size"]
    channels = e.in_types[0].shape[1]
    out = e.in_types[0].shape[2:]
    exact = a["count_include_pad"] or not any(padding)
    if a["ceil_mode"] or not exact or not isinstance(channels, int):
        e.unsupported("with ceil_mode or a divisor that varies by window")
    divisor = a["divisor_override"] or int(np.prod(kernel))
    dtype = e.in_types[0].dtype
    ones = np.full((channels, 1, *kernel), 1.0 / divisor, dtype=dtype.np)
    ones_1 = [1] * len(kernel)
    pads, zeros = oxc.onnx_transposed_pads(e, in_size, out, kernel, stride, ones_1, padding)
    y = e.node(
        "ConvTranspose",
        [g, e.constant(ones)],
        strides=list(stride),
        pads=oxc.onnx_pads(pads),
        group=channels,
    )
    return oxc.onnx_pad_end(e, y, zeros, in_size)


AVG_POOL_BACKWARD = register(
    OpDef(
        name="avg_pool_backward",
        attrs=AVG_POOL_BACKWARD_ATTRS,
        layout=Layout((0,)),  # (channels-last in, out: PyTorch's)
        onnx=_onnx_avg_pool_backward,
        kind="nn",
        infer=_avg_backward_infer,
        kernel=_avg_backward_kernel,
        vjp=_avg_backward_vjp,
        cost=_avg_backward_cost,
        save_inputs=(),
        workspace=_avg_backward_workspace,
        doc="avg_pool_backward(g; ..., in_size): the adjoint of avg_pool (spreads each "
        "window's gradient over its elements)",
    )
)


def _avg_pool_nd(nd: int):
    name = f"avg_pool{nd}d"

    def avg_pool(
        input,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode=False,
        count_include_pad=True,
        divisor_override=None,
    ):
        x, unbatched = unbatch(name, to_tensor(input), nd)
        kernel = int_tuple(name, "kernel_size", kernel_size, nd)
        empty = stride is None or (isinstance(stride, (tuple, list)) and not stride)
        if divisor_override is not None and int(divisor_override) == 0:
            raise ShapeError("divisor_override must be non-zero", op=name)
        y = apply(
            AVG_POOL,
            x,
            kernel=kernel,
            stride=kernel if empty else int_tuple(name, "stride", stride, nd),
            padding=int_tuple(name, "padding", padding, nd, positive=False),
            ceil_mode=bool(ceil_mode),
            count_include_pad=bool(count_include_pad),
            divisor_override=None if divisor_override is None else int(divisor_override),
        )
        return y.reshape(tuple(y.shape[1:])) if unbatched else y

    avg_pool.__name__ = avg_pool.__qualname__ = name
    avg_pool.__doc__ = (
        f"{nd}-D average pooling like torch.nn.functional.{name} (stride defaults to kernel_size)."
    )
    if nd == 3:  # on PyTorch's fp32 list (the 1-d and 2-d pools are not)
        avg_pool = autocasts(Autocast.FP32)(avg_pool)
    return export(avg_pool, name=name, functional=True)


avg_pool1d = _avg_pool_nd(1)
avg_pool2d = _avg_pool_nd(2)
avg_pool3d = _avg_pool_nd(3)
