"""Grid sampling as one op each way (spatial transformers, optical-flow warping, deformable
sampling, NeRF-style feature lookups).

* ``grid_sample(x, grid; mode, padding_mode, align_corners)``: x (N, C, H, W) or
  (N, C, D, H, W), grid (N, Ho, Wo, 2) or (N, Do, Ho, Wo, 3) of normalized (x, y[, z])
  positions; the result (N, C, *grid's spatial). Modes ``bilinear`` (trilinear in 5-D),
  ``nearest``, ``bicubic`` (4-D only, as PyTorch); paddings ``zeros``, ``border``,
  ``reflection``. PyTorch's CPU kernels' arithmetic (ops/_grid_taps.py says how a grid value
  becomes the pixels read and their weights).
* ``grid_sample_backward(x, grid, g; ..., output_mask)`` gives ``(dx, dgrid)``, PyTorch's
  grid_sampler_2d/3d_backward: ``output_mask`` says which are wanted (the other is zeros);
  nearest's grid gradient is 0, bicubic's ignores the padding of its pixels (integers).

As a composite of gathers per tap it ran about 200 eager ops, 4-8x PyTorch's time. The NumPy
kernels (ops/_grid_sample_kernels.py) are the specification; the C kernels
(kernels/cgrid_sample.py) follow them operation for operation. The backward op's VJP, the
second derivative (gradient penalties through a spatial transformer, PyTorch's
grid_sampler_2d_double_backward), is ops/_grid_sample_second.py's, in ember ops. Half
precision is computed in float32 and rounded once (PyTorch's 16-bit kernel rounds as it goes:
a few ulps apart).
"""

from __future__ import annotations

from ..errors import ShapeError, UnsupportedError
from ..types import TensorType
from . import _batching
from . import _grid_sample_kernels as K
from ._registry import Cost, OpDef, apply, register
from ._util import fmt_shape, io_bytes, numel, require_float, require_same_dtype, value_bytes

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")
_TAPS = {"bilinear": 2, "nearest": 1, "bicubic": 4}  # per spatial axis


def _check(op: str, x, grid, mode, padding_mode, align_corners) -> tuple:
    """The output's shape, after PyTorch's checks (grid_sampler's messages)."""
    if mode not in MODES:
        raise UnsupportedError(f"unknown mode {mode!r}; expected one of {MODES}", op=op)
    if padding_mode not in PADDINGS:
        raise UnsupportedError(
            f"unknown padding_mode {padding_mode!r}; expected one of {PADDINGS}", op=op
        )
    if not isinstance(align_corners, bool):
        raise ShapeError(f"align_corners must be a bool, got {align_corners!r}", op=op)
    require_float(op, x, grid)
    require_same_dtype(op, x, grid)
    xs, gs = tuple(x.shape), tuple(grid.shape)
    if len(xs) not in (4, 5) or len(gs) != len(xs):
        raise ShapeError(
            f"expected a 4-D or 5-D input and a grid with as many dimensions, got input "
            f"{fmt_shape(xs)} and grid {fmt_shape(gs)}",
            op=op,
        )
    dims = len(xs) - 2
    if gs[0] != xs[0]:
        raise ShapeError(
            f"expected grid and input to have same batch size, got input {fmt_shape(xs)} and "
            f"grid {fmt_shape(gs)}",
            op=op,
        )
    if gs[-1] != dims:
        raise ShapeError(
            f"expected grid to have size {dims} in last dimension, got grid {fmt_shape(gs)}",
            op=op,
        )
    for d, size in enumerate(xs[2:]):
        if isinstance(size, int) and size <= 0:
            raise ShapeError(
                f"expected input to have non-empty spatial dimensions, but input has sizes "
                f"{fmt_shape(xs)} with dimension {d + 2} being empty",
                op=op,
            )
    if mode == "bicubic" and dims != 2:
        raise UnsupportedError(
            f"bicubic interpolation only supports 4-D input, got {fmt_shape(xs)}", op=op
        )
    return (xs[0], xs[1], *gs[1:-1])


def _gs_infer(x, grid, *, mode, padding_mode, align_corners):
    shape = _check("grid_sample", x, grid, mode, padding_mode, align_corners)
    return TensorType(shape, x.dtype)


def _gs_grad_infer(x, grid, g, *, mode, padding_mode, align_corners, output_mask):
    op = "grid_sample_backward"
    shape = _check(op, x, grid, mode, padding_mode, align_corners)
    require_same_dtype(op, x, g)
    if tuple(g.shape) != shape:
        raise ShapeError(
            f"the gradient {fmt_shape(g.shape)} must have the output's shape {fmt_shape(shape)}",
            op=op,
        )
    if not (isinstance(output_mask, tuple) and len(output_mask) == 2):
        raise ShapeError(f"output_mask must be a pair of bools, got {output_mask!r}", op=op)
    return TensorType(tuple(x.shape), x.dtype), TensorType(tuple(grid.shape), x.dtype)


def _gs_kernel(x, grid, *, mode, padding_mode, align_corners):
    return K.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


def _gs_grad_kernel(x, grid, g, *, mode, padding_mode, align_corners, output_mask):
    return K.grid_sample_backward(
        x, grid, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners,
        output_mask=output_mask,
    )  # fmt: skip


def _gs_fast(x, grid, *, mode, padding_mode, align_corners):
    from ..kernels import cgrid_sample

    return cgrid_sample.grid_sample(x, grid, mode, padding_mode, align_corners)


def _gs_grad_fast(x, grid, g, *, mode, padding_mode, align_corners, output_mask):
    from ..kernels import cgrid_sample

    return cgrid_sample.grid_sample_backward(
        x, grid, g, mode, padding_mode, align_corners, output_mask
    )


def _sampling(attrs) -> dict:
    return {k: attrs[k] for k in ("mode", "padding_mode", "align_corners")}


def _gs_vjp(c, g):
    x, grid = c.inputs
    nx, ngrid = c.needs_input_grad
    if not (nx or ngrid):
        return None, None
    dx, dgrid = apply(
        GRID_SAMPLE_BACKWARD, x, grid, g, output_mask=(bool(nx), bool(ngrid)), **c.attrs
    )
    return (dx if nx else None), (dgrid if ngrid else None)


def _gs_grad_vjp(c, a, b):
    from ._grid_sample_second import backward_vjp

    return backward_vjp(c, a, b, GRID_SAMPLE, GRID_SAMPLE_BACKWARD)


def _taps(in_types, attrs) -> int:
    return _TAPS[attrs["mode"]] ** (len(in_types[0].shape) - 2)


def _gs_cost(in_types, out_types, attrs) -> Cost:
    """A multiply-add per tap per output value, and the taps' weights per point."""
    taps = _taps(in_types, attrs)
    points = numel(in_types[1].shape)
    return Cost(
        2 * taps * numel(out_types[0].shape) + 8 * taps * points, io_bytes(in_types, out_types)
    )


def _gs_grad_cost(in_types, out_types, attrs) -> Cost:
    """The input gradient's multiply-add per tap per value, the grid's one per axis too."""
    taps = _taps(in_types, attrs)
    dims = len(in_types[0].shape) - 2
    values = numel(in_types[2].shape)
    return Cost(2 * taps * values * (1 + dims), io_bytes(in_types, out_types))


def _gs_workspace(node, layouts) -> int:
    """The C kernels: a few rows of taps per thread and, for a small batch, partial grid
    gradients (at most 8 grids). NumPy's: the gathered values and the weighted sums, a few
    outputs' sizes in float32 or float64."""
    from ..kernels import cgrid_sample

    x = node.inputs[0]
    out = node.inputs[2] if len(node.inputs) == 3 else node.outputs[0]
    widen = max(K.compute_dtype(x.dtype.np).itemsize // x.dtype.itemsize, 1)
    if cgrid_sample.available(x.dtype.np):
        return 8 * value_bytes(node.inputs[1]) * widen
    return (3 + len(x.shape)) * value_bytes(out) * widen


# ---------------------------------------------------------------------------------- ONNX

_ONNX20_MODES = {"bilinear": "linear", "bicubic": "cubic", "nearest": "nearest"}


def _onnx_grid_sample(e):
    """GridSample: opset 16's 4-D form (modes bilinear/nearest/bicubic), opset 20's N-D one
    (linear/nearest/cubic); onnxruntime implements PyTorch's arithmetic."""
    x, grid = e.inputs
    a = e.attrs
    if e.opset < 16:
        e.unsupported("before opset 16 (GridSample)")
    if len(e.in_types[0].shape) == 5 and e.opset < 20:
        e.unsupported("for a 5-D input before opset 20 (GridSample's N-D form)")
    mode = _ONNX20_MODES[a["mode"]] if e.opset >= 20 else a["mode"]
    return e.node(
        "GridSample",
        [x, grid],
        mode=mode,
        padding_mode=a["padding_mode"],
        align_corners=int(a["align_corners"]),
    )


def _onnx_grid_sample_backward(e):
    from ._grid_sample_onnx import grid_sample_backward

    return grid_sample_backward(e)


GRID_SAMPLE_BACKWARD = register(
    OpDef(
        name="grid_sample_backward",
        kind="nn",
        onnx=_onnx_grid_sample_backward,
        infer=_gs_grad_infer,
        kernel=_gs_grad_kernel,
        fast=_gs_grad_fast,
        vjp=_gs_grad_vjp,
        cost=_gs_grad_cost,
        num_outputs=2,
        workspace=_gs_workspace,
        batch=_batching.per_sample((0, 1, 2), outputs=2),
        doc="grid_sample_backward(x, grid, g; mode, padding_mode, align_corners, output_mask): "
        "(dx, dgrid) of grid_sample",
    )
)

GRID_SAMPLE = register(
    OpDef(
        name="grid_sample",
        grad_fn=lambda attrs, in_types: f"GridSampler{len(in_types[0].shape) - 2}DBackward0",
        kind="nn",
        infer=_gs_infer,
        kernel=_gs_kernel,
        fast=_gs_fast,
        vjp=_gs_vjp,
        cost=_gs_cost,
        workspace=_gs_workspace,
        batch=_batching.per_sample((0, 1)),
        onnx=_onnx_grid_sample,
        doc="grid_sample(x, grid; mode, padding_mode, align_corners): x (N, C, *spatial) "
        "interpolated at the grid's normalized positions (N, *out, dims)",
    )
)
