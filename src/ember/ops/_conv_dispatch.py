"""Which kernels run the convolution ops of ops/conv.py: the NumPy reference (ops/_conv_kernels.py,
the specification) or the C kernels (kernels/cconv*.py, cdepthwise*.py) where they apply;
half-precision operands widened and rounded in C; depthwise convolutions routed to their own
kernels first; and the NumPy path's half-precision workspace for the memory planner.
"""

from __future__ import annotations

from ..kernels.conv_plan import compute_dtype, conv_geometry
from ._conv_kernels import conv_forward as _forward_kernel
from ._conv_kernels import conv_input_grad as _input_grad_kernel
from ._conv_kernels import conv_weight_grad as _weight_grad_kernel
from ._util import half_precision, numel, value_bytes

# -------------------------------------------------------------------------------- kernels


def _in_compute(*arrays):
    dtype = compute_dtype(arrays[0].dtype)
    return [a.astype(dtype, copy=False) for a in arrays]


def _in_compute_c(*arrays):
    """`_in_compute` with half precision widened in C (kernels/chalf.py: NumPy's float16
    conversion runs at a fraction of memory speed)."""
    from ..kernels import chalf

    if compute_dtype(arrays[0].dtype) == arrays[0].dtype:
        return list(arrays)
    return [chalf.to_float32(a) for a in arrays]


def _rounded_c(result, dtype):
    """A float32 result rounded to the operands' half-precision ``dtype`` in C."""
    from ..kernels import chalf

    if result is None or result.dtype == dtype:
        return result
    return chalf.from_float32(result, dtype)


def _compiled(module: str = "cconv"):
    """kernels/cconv.py, or its sibling ``module`` (cconv_weight, cconv_workspace,
    cdepthwise), imported on first use: loading them looks for the compiler."""
    found = _LOADED.get(module)
    if found is None:  # (once: every eager convolution passes here)
        from ..kernels import cconv, cconv_weight, cconv_workspace, cdepthwise

        _LOADED.update(
            cconv=cconv,
            cconv_weight=cconv_weight,
            cconv_workspace=cconv_workspace,
            cdepthwise=cdepthwise,
        )
        found = _LOADED[module]
    return found


_LOADED: dict = {}


def _kernels(weight_shape, reference, compiled: str):
    """The (reference, fast) kernels of one of the three ops: operands in their compute dtype
    (float32 for half precision), the geometry from ``weight_shape(a, b, attrs) -> (in_size,
    w_shape)``, then the NumPy kernel ``reference`` or ``cconv.<compiled>`` (None where it
    does not apply), plus the optional ``bias`` per channel of the result (the forward and
    the transposed convolution's: added to the sums in the compute dtype), the result rounded
    once to the operands' dtype (PyTorch's half-precision convolutions)."""

    def run(a, b, bias, attrs, impl):
        ac, bc = _in_compute(a, b)
        p = conv_geometry(attrs, *weight_shape(a, b, attrs))
        result = impl(ac, bc, p, attrs["groups"])
        if result is None:
            return None
        if bias is not None:  # (the kernels' results are fresh arrays)
            result += _in_compute(bias)[0].reshape((1, -1) + (1,) * (result.ndim - 2))
        return result.astype(a.dtype, copy=False)

    def kernel(a, b, bias=None, **attrs):
        return run(a, b, bias, attrs, reference)

    def fast(a, b, bias=None, **attrs):
        p = conv_geometry(attrs, *weight_shape(a, b, attrs))
        result = _depthwise_first(compiled, a, b, p, attrs["groups"], bias)
        if result is not None or compute_dtype(a.dtype) == a.dtype:
            return result
        # half precision otherwise: widened and rounded in C (kernels/chalf.py), computed in
        # float32, the bias added to the float32 result (the C store's float32 addition)
        wide = _in_compute_c(a, b) + ([] if bias is None else _in_compute_c(bias))
        result = _depthwise_first(compiled, *wide[:2], p, attrs["groups"], *wide[2:])
        return _rounded_c(result, a.dtype)

    return kernel, fast


def _depthwise_weight(x_shape, cout: int, attrs) -> bool:
    """Whether a weight gradient of these shapes is a depthwise convolution's."""
    from ..kernels import cdepthwise

    groups = attrs["groups"]
    w_shape = (cout, x_shape[1] // groups) + tuple(attrs["kernel_size"])
    return cdepthwise.multiplier(x_shape[1], w_shape, groups) is not None


def _reads_half(x_shape, cout: int, p, attrs) -> bool:
    """Whether the compiled weight gradient reads these half-precision operands itself (the
    depthwise kernel does; kernels/cconv_weight.py's where it says so)."""
    from ..kernels import cconv_weight

    if _depthwise_weight(x_shape, cout, attrs):
        return True
    return cconv_weight.reads_half(tuple(x_shape), cout, p, attrs["groups"])


def _depthwise_first(compiled: str, a, b, p, groups, bias=None):
    """kernels/cdepthwise.py's ``compiled`` kernel for a depthwise convolution, else
    kernels/cconv.py's (``bias``: the forward and input gradient's, None for the weight
    gradient)."""
    extra = () if bias is None else (bias,)
    if groups > 1:  # (a depthwise convolution has more than one group)
        result = getattr(_compiled("cdepthwise"), compiled)(a, b, p, groups, *extra)
        if result is not None:
            return result
    module = "cconv_weight" if compiled == "conv_weight_grad" else "cconv"
    return getattr(_compiled(module), compiled)(a, b, p, groups, *extra)


_conv_kernel, _conv_fast = _kernels(
    lambda x, w, attrs: (x.shape[2:], w.shape), _forward_kernel, "conv_forward"
)
_conv_input_grad_kernel, _conv_input_grad_fast = _kernels(
    lambda gy, w, attrs: (attrs["in_size"], w.shape), _input_grad_kernel, "conv_input_grad"
)
_conv_weight_grad_kernel, _conv_weight_grad_fast = _kernels(
    lambda x, gy, attrs: (
        x.shape[2:],
        (gy.shape[1], x.shape[1] // attrs["groups"]) + tuple(attrs["kernel_size"]),
    ),
    _weight_grad_kernel,
    "conv_weight_grad",
)


def _full_workspace(node, out) -> int:
    """A float32/float64 convolution's temporaries beyond its result: the compiled input and
    weight gradients' (`cconv_workspace.temporaries`: the input gradient's flipped weight or
    col2im columns, the weight gradient's per-block partial sums), allocated and freed within
    the call, so a training step's peak can sit on one (a ResNet-18 step's stride-2 input
    gradient: 2.75 MiB of columns). None for the forward, whose packed weight is a parameter's,
    kept between calls (kernels/cconv_packs.py), its padded input scratch likewise; none for
    grouped convolutions, which the depthwise kernels run, nor for the NumPy kernels, whose
    columns are scratch kept between calls."""
    if node.op.name == "conv" or node.attrs["groups"] != 1:
        return 0
    if not _compiled().available(out.dtype.np):
        return 0
    a_shape, b_shape = (tuple(v.shape) for v in node.inputs[:2])
    if not all(isinstance(d, int) for d in a_shape + b_shape):
        return 0
    attrs = node.attrs
    if node.op.name == "conv_input_grad":
        p = conv_geometry(attrs, attrs["in_size"], b_shape)
    else:
        w_shape = (b_shape[1], a_shape[1]) + tuple(attrs["kernel_size"])
        p = conv_geometry(attrs, a_shape[2:], w_shape)
    found = _compiled("cconv_workspace").temporaries(
        node.op.name, a_shape, b_shape, p, 1, out.dtype.np
    )
    return found or 0


def _widened_col2im(node) -> bool:
    """Whether a half-precision input gradient runs kernels/cconv_col2im.py's product and
    col2im, which cconv.py leaves to the widened float32 operands."""
    if node.op.name != "conv_input_grad":
        return False
    a_shape, b_shape = (tuple(v.shape) for v in node.inputs[:2])
    if not all(isinstance(d, int) for d in a_shape + b_shape):
        return False
    from ..kernels import cconv

    p = conv_geometry(node.attrs, node.attrs["in_size"], b_shape)
    return cconv.col2im_runs(a_shape, b_shape, p, node.attrs["groups"], node.inputs[0].dtype.np)


def _workspace(node, layouts) -> int:
    """The three kernels' temporaries beyond the result. In float32/float64 (`_full_workspace`):
    the compiled gradients' temporaries; the forward's none. In half precision: none where the
    compiled forward and input gradient read and write it; the
    compiled weight gradient that reads it keeps its float32 result and temporaries. Else
    in half precision `_in_compute`'s float32 copies of both operands, alive throughout; inside the
    float32 computation the compiled kernel's temporaries (`cconv_workspace.temporaries`) beside its
    float32 result, or NumPy's im2col's comparison of the input with the one its cached columns
    were built from (a bool array of the input's size, before the result exists); at the end
    the float32 result beside the rounded one."""
    out = node.outputs[0]
    if not half_precision(out):
        return _full_workspace(node, out)
    weight_grad = node.op.name == "conv_weight_grad"
    if not weight_grad and _compiled().available(out.dtype.np) and not _widened_col2im(node):
        # the forward reads and writes the 16-bit values, as it does float32's; the input
        # gradient likewise, beside its 16-bit flipped weight (`_full_workspace`'s rule)
        return 0 if node.op.name == "conv" else _full_workspace(node, out)
    operands = 2 * sum(value_bytes(v) for v in node.inputs)
    result = value_bytes(out)
    rounding = 2 * result + result
    a_shape, b_shape = (tuple(v.shape) for v in node.inputs[:2])
    if not all(isinstance(d, int) for d in a_shape + b_shape):
        return operands + rounding - result
    attrs = node.attrs
    if node.op.name == "conv":
        p = conv_geometry(attrs, a_shape[2:], b_shape)
    elif node.op.name == "conv_input_grad":
        p = conv_geometry(attrs, attrs["in_size"], b_shape)
    else:
        w_shape = (b_shape[1], a_shape[1] // attrs["groups"]) + tuple(attrs["kernel_size"])
        p = conv_geometry(attrs, a_shape[2:], w_shape)
    compiled = _compiled("cconv_workspace").temporaries(
        node.op.name, a_shape, b_shape, p, attrs["groups"], compute_dtype(out.dtype.np)
    )
    if compiled is not None and weight_grad and _depthwise_weight(a_shape, b_shape[1], attrs):
        from ..kernels import cdepthwise, cpool

        if cdepthwise.weight_grad_wide(a_shape, b_shape, p, attrs["groups"], out.dtype.np):
            return 2 * result  # (kernels/cdepthwise_wide.py's float32 gradient, rounded once)
        # kernels/cdepthwise.py's peak comes before the 16-bit result exists: its blocks'
        # double partial sums (one block a sample, at most four a thread), their double total
        # and its float32 rounding (twice the result), counted here beyond the result
        blocks = max(1, min(a_shape[0], 4 * cpool.get_num_threads()))
        return (blocks + 1) * 4 * result + 2 * result - result
    if compiled is not None and weight_grad and _reads_half(a_shape, b_shape[1], p, attrs):
        # the float32 gradient (two results) beside the kernel's temporaries, before the
        # 16-bit result exists; then beside the result as it is rounded
        return result + max(compiled, result)
    if compiled is not None:
        computing = 2 * result + compiled
    else:  # NumPy's kernels: all else they use is scratch kept between calls
        computing = numel(a_shape) if node.op.name != "conv_input_grad" else 0
    return operands + max(computing, rounding) - result
