"""Convolution primitives: ``conv`` (N spatial dimensions, NC* layout, PyTorch's weight layout)
and its two adjoints.

y = conv(x, w) is bilinear, so its gradients are two more bilinear maps defined by
<conv(x, w), gy> = <x, conv_input_grad(gy, w)> = <w, conv_weight_grad(x, gy)>:

* ``conv_input_grad(gy, w)``: the adjoint in x, a transposed convolution (also the kernel of
  conv_transpose*d);
* ``conv_weight_grad(x, gy)``: the adjoint in w.

Each of the three has its VJP written with the other two, so the family is closed under
differentiation and gradients of any order exist. The public functions (conv2d,
conv_transpose2d, ...) are in conv_functional.py. The reference kernels are the NumPy ones of
_conv_kernels.py, the specification; each op's ``fast`` rule runs the compiled C kernels of
kernels/cconv.py where they apply (float32/float64, any stride), tested against the NumPy ones
within float rounding (the sums run in another order); _conv_dispatch.py chooses between them.

Attributes, shared by the three: ``stride``, ``dilation`` (one int per spatial dimension),
``padding`` (a (before, after) pair per spatial dimension; "after" may be negative, which crops,
so that conv_transpose's output_padding is expressible), ``groups``. The adjoints also carry the
size they produce: ``in_size`` (spatial size of x) and ``kernel_size``.

``conv`` and ``conv_input_grad`` take an optional third operand, a bias per channel of the
result, added to the sums in the compute dtype before the result's one rounding: the public
functions pass it in half precision (PyTorch's bfloat16/float16 convolutions round once; a
separate add would round the convolution first), and add it after in float32/float64 (the
same bits, and the graph the passes fold and fuse). Its gradient is the result's gradient
summed over all but the channels.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..kernels.conv_plan import conv_geometry, conv_out_size
from ..types import TensorType
from . import _attr_rules as R
from . import _batching, _torch_flops, conv_epilogue
from . import _onnx_conv as oxc
from . import api as E
from ._conv_dispatch import (
    _compiled,
    _conv_fast,
    _conv_input_grad_fast,
    _conv_input_grad_kernel,
    _conv_kernel,
    _conv_weight_grad_fast,
    _conv_weight_grad_kernel,
    _workspace,
)
from ._registry import Cost, OpDef, apply, register
from ._rules import Autocast, ChannelWeights, Complex, Layout
from ._util import fmt_shape, io_bytes, numel, require_float_or_complex
from .conv_lift import lifted

# ----------------------------------------------------------------------------- shape rules


def label(kind: str, ndim: int) -> str:
    """The user-facing name of the operation for errors: conv2d, conv_transpose1d, ..."""
    return f"{kind}{ndim}d"


def _integer_convolution(a, w, dilation, transposed: bool) -> bool:
    """Whether PyTorch's CPU kernels compute this integer convolution (wrapping): its plain
    one takes every integer dtype, its dilated and transposed ones int64 only; none takes bool."""
    if not (a.dtype.is_integer and w.dtype.is_integer) or dt.bool_ in (a.dtype, w.dtype):
        return False
    return a.dtype is dt.int64 or not (transposed or any(d != 1 for d in dilation))


def _check_operands(name, a, w, groups, a_what, integers=False):
    """Checks shared by conv and its transpose: ranks, dtypes, groups (``integers``: integer
    operands allowed, `_integer_convolution`)."""
    if w.ndim < 3:
        raise ShapeError(
            f"weight of shape {fmt_shape(w.shape)} needs at least 3 dimensions", op=name
        )
    if a.ndim != w.ndim:
        raise ShapeError(
            f"expected a {w.ndim}-D {a_what} (N, C, {w.ndim - 2} spatial) to match the weight "
            f"of shape {fmt_shape(w.shape)}, got {a_what} of shape {fmt_shape(a.shape)}",
            op=name,
        )
    if not integers:
        require_float_or_complex(name, a, w)
    if a.dtype is not w.dtype:
        raise DTypeError(
            f"{a_what} ({a.dtype}) and weight ({w.dtype}) must have one dtype; convert one of "
            f"them, e.g. weight.to({a.dtype})",
            op=name,
        )
    if groups < 1 or w.shape[0] % groups:
        raise ShapeError(
            f"groups={groups} must be positive and divide the weight's first dimension "
            f"(weight of shape {fmt_shape(w.shape)})",
            op=name,
        )


def _check_size(name, out, expected, operands: str):
    """``out``: the convolution's output size; ``expected``: the size an operand has (None for
    conv itself); ``operands`` describes the shapes for the message."""
    if any(o < 1 for o in out):
        raise ShapeError(
            f"{operands}: the input (after padding) is smaller than the dilated kernel; the "
            f"output would have size {out}",
            op=name,
        )
    if expected is not None and tuple(expected) != tuple(out):
        raise ShapeError(
            f"{operands}: the convolution would produce spatial size {out}, not {tuple(expected)}",
            op=name,
        )


def _check_bias(name, bias, channels: int, dtype):
    """The optional bias operand: one value per output channel, of the operands' dtype."""
    if bias is None:
        return
    if tuple(bias.shape) != (channels,):
        raise ShapeError(
            f"bias of shape {fmt_shape(bias.shape)} must have shape ({channels},) "
            f"(one value per output channel)",
            op=name,
        )
    if bias.dtype is not dtype:
        raise DTypeError(f"bias ({bias.dtype}) must have the input's dtype ({dtype})", op=name)


def _conv_infer(x, w, bias=None, *, stride, padding, dilation, groups):
    xs, ws, dtype = x.shape, w.shape, x.dtype
    if (  # (every eager call passes here: the common case without the checks' calls)
        len(ws) >= 3
        and len(xs) == len(ws)
        and dtype is w.dtype
        and dtype.is_floating_point
        and (bias is None or (bias.dtype is dtype and tuple(bias.shape) == (ws[0],)))
        and groups >= 1
        and ws[0] % groups == 0
        and xs[1] == ws[1] * groups
    ):
        out = conv_out_size(xs[2:], ws[2:], stride, padding, dilation)
        if all(o >= 1 for o in out):
            return TensorType((xs[0], ws[0]) + out, dtype)
    name = label("conv", w.ndim - 2)
    _check_operands(name, x, w, groups, "input", _integer_convolution(x, w, dilation, False))
    _check_bias(name, bias, w.shape[0], x.dtype)
    if x.shape[1] != w.shape[1] * groups:
        raise ShapeError(
            f"input of shape {fmt_shape(x.shape)} has {x.shape[1]} channels, but weight of shape "
            f"{fmt_shape(w.shape)} with groups={groups} expects {w.shape[1] * groups} "
            f"(weight.shape[1] * groups)",
            op=name,
        )
    out = conv_out_size(x.shape[2:], w.shape[2:], stride, padding, dilation)
    for o in out:  # (the message is formatted only when it is raised)
        if o < 1:
            _check_size(name, out, None, f"input {fmt_shape(x.shape)}, weight {fmt_shape(w.shape)}")
    return TensorType((x.shape[0], w.shape[0]) + out, x.dtype)


def _input_grad_infer(gy, w, bias=None, *, stride, padding, dilation, groups, in_size):
    name = label("conv_transpose", w.ndim - 2)
    _check_operands(name, gy, w, groups, "input", _integer_convolution(gy, w, dilation, True))
    _check_bias(name, bias, w.shape[1] * groups, gy.dtype)
    if gy.shape[1] != w.shape[0]:
        raise ShapeError(
            f"input of shape {fmt_shape(gy.shape)} has {gy.shape[1]} channels, but weight of "
            f"shape {fmt_shape(w.shape)} expects {w.shape[0]} (weight.shape[0])",
            op=name,
        )
    out = conv_out_size(in_size, w.shape[2:], stride, padding, dilation)
    _check_size(
        name,
        out,
        gy.shape[2:],
        f"input {fmt_shape(gy.shape)}, weight {fmt_shape(w.shape)}, output size {in_size}",
    )
    return TensorType((gy.shape[0], w.shape[1] * groups) + tuple(in_size), gy.dtype)


def _weight_grad_infer(x, gy, *, stride, padding, dilation, groups, kernel_size):
    name = "conv_weight_grad"
    if x.ndim != gy.ndim or x.ndim < 3:
        raise ShapeError(
            f"input {fmt_shape(x.shape)} and output gradient {fmt_shape(gy.shape)} must have "
            "the same rank (at least 3)",
            op=name,
        )
    require_float_or_complex(name, x, gy)
    if x.dtype is not gy.dtype:
        raise DTypeError(f"input {x.dtype} and gradient {gy.dtype} must have one dtype", op=name)
    if x.shape[0] != gy.shape[0] or x.shape[1] % groups or gy.shape[1] % groups:
        raise ShapeError(
            f"input {fmt_shape(x.shape)} and output gradient {fmt_shape(gy.shape)} disagree on "
            f"the batch size, or their channels are not divisible by groups={groups}",
            op=name,
        )
    out = conv_out_size(x.shape[2:], kernel_size, stride, padding, dilation)
    _check_size(
        name,
        out,
        gy.shape[2:],
        f"input {fmt_shape(x.shape)}, output gradient {fmt_shape(gy.shape)}, "
        f"kernel size {kernel_size}",
    )
    return TensorType((gy.shape[1], x.shape[1] // groups) + tuple(kernel_size), x.dtype)


# ----------------------------------------------------------------------------------- VJPs


def _shared(attrs) -> dict:
    return {k: attrs[k] for k in ("stride", "padding", "dilation", "groups")}


# Shapes come from ctx.in_types: an input that only the other gradient reads may have been
# overwritten in place since, and touching it would raise.
#
# Complex operands: each of the three ops is bilinear, f(a, b), so PyTorch's conjugate
# Wirtinger gradient of a real loss is the real rule with the *other* operand conjugated,
# ga = F_a(g, conj(b)) (= conj(F_a(conj(g), b))); `E.conj` is the identity on real tensors.


def _sizes(ctx):
    x_type, w_type = ctx.in_types[:2]
    return tuple(x_type.shape[2:]), tuple(w_type.shape[2:])


def _bias_grad(ctx, g) -> tuple:
    """The bias operand's gradient where the call has one (the result's gradient summed over
    all but the channels, as the separate broadcast add's gradient was), else nothing."""
    if len(ctx.in_types) < 3:
        return ()
    if not ctx.needs_input_grad[2]:
        return (None,)
    channels = ctx.in_types[2].shape[0]
    summed = E.sum_to(g, (1, channels) + (1,) * (len(ctx.out_types[0].shape) - 2))
    return (E.reshape(summed, (channels,)),)


def _conv_vjp(ctx, gy):
    x, w = ctx.inputs[:2]
    nx, nw = ctx.needs_input_grad[:2]
    a = _shared(ctx.attrs)
    in_size, kernel_size = _sizes(ctx)
    gx = apply(CONV_INPUT_GRAD, gy, E.conj(w), in_size=in_size, **a) if nx else None
    gw = apply(CONV_WEIGHT_GRAD, E.conj(x), gy, kernel_size=kernel_size, **a) if nw else None
    return (gx, gw) + _bias_grad(ctx, gy)


def _input_grad_vjp(ctx, gz):
    # z = Bx^T(gy, w); <z, gz> = <gy, B(gz, w)> = <w, Bw^T(gz, gy)>
    gy, w = ctx.inputs[:2]
    ngy, nw = ctx.needs_input_grad[:2]
    a = _shared(ctx.attrs)
    kernel_size = tuple(ctx.in_types[1].shape[2:])
    d_gy = apply(CONV, gz, E.conj(w), **a) if ngy else None
    d_w = apply(CONV_WEIGHT_GRAD, gz, E.conj(gy), kernel_size=kernel_size, **a) if nw else None
    return (d_gy, d_w) + _bias_grad(ctx, gz)


def _weight_grad_vjp(ctx, gv):
    # v = Bw^T(x, gy); <v, gv> = <B(x, gv), gy> = <x, Bx^T(gy, gv)>
    x, gy = ctx.inputs
    nx, ngy = ctx.needs_input_grad
    a = _shared(ctx.attrs)
    in_size = tuple(ctx.in_types[0].shape[2:])
    d_x = apply(CONV_INPUT_GRAD, E.conj(gy), gv, in_size=in_size, **a) if nx else None
    d_gy = apply(CONV, E.conj(x), gv, **a) if ngy else None
    return d_x, d_gy


# ----------------------------------------------------------------------------------- costs
# FLOPs as torch.utils.flop_counter counts them (2 per multiply-add; bias not included).


def _conv_cost(in_types, out_types, attrs) -> Cost:
    x, w = in_types[:2]
    y = out_types[0]
    flops = 2 * y.shape[0] * y.shape[1] * numel(y.shape[2:]) * w.shape[1] * numel(w.shape[2:])
    return Cost(flops, io_bytes(in_types, out_types))


def _input_grad_cost(in_types, out_types, attrs) -> Cost:
    # a transposed convolution: torch counts it over the *input* (here gy) positions
    gy, w = in_types[:2]
    flops = 2 * gy.shape[0] * numel(gy.shape[2:]) * numel(w.shape)
    return Cost(flops, io_bytes(in_types, out_types))


def _weight_grad_cost(in_types, out_types, attrs) -> Cost:
    # each weight (cout, cin / groups, *kernel) sums a product per sample and output position:
    # the forward's multiply-adds. (torch.utils.flop_counter counts this gradient over all
    # input channels, groups times too many: a depthwise layer's weight gradient C times its
    # forward; its forward and input-gradient counts divide by groups, as these do.)
    x, gy = in_types
    cin = x.shape[1] // attrs.get("groups", 1)
    flops = 2 * x.shape[0] * cin * gy.shape[1] * numel(gy.shape[2:])
    flops *= numel(attrs["kernel_size"])
    return Cost(flops, io_bytes(in_types, out_types))


def _conv_c_step(node):
    """The C graph runner's step (runtime/cgraph.py) of a 1-d or 2-d one-group or depthwise
    convolution, with its bias operand where it has one."""
    x, w = (v.type for v in node.inputs[:2])
    if x.dtype != w.dtype or x.dtype != node.outputs[0].dtype:
        return None
    from ..kernels import cconv, cconv_constant, cdepthwise
    from ..kernels.cstep import CStep, function_address

    bias = len(node.inputs) > 2
    x_shape, w_shape, attrs = lifted(x.shape, w.shape, node.attrs)  # (1-d: height 1)
    p = conv_geometry(attrs, x_shape[2:], w_shape)
    if attrs["groups"] != 1:
        return cdepthwise.forward_step(x_shape, w_shape, p, attrs["groups"], x.dtype.np, bias)
    constant = cconv_constant.frozen_weight(node)  # (packed once)
    made = cconv.forward_step(x_shape, w_shape, p, x.dtype.np, False, weight_constant=constant)
    if made is None:
        return None
    step, args, keep = made
    slots = [(0, "in", 0), (1, "in", 1), (3, "out", 0)] + [(2, "in", 2)] * bias
    return CStep(function_address(step), args, slots, keep)


def _conv_compile(node):
    """Generated code's implementation of a convolution whose weight is a graph constant
    (kernels/cconv_constant.py), or None (the op's kernel runs)."""
    from ..kernels import cconv_constant

    return cconv_constant.compile_node(node, node.op.run)


def _bias_slot(in_types) -> int | None:
    """Where a per-channel shift goes: into the call's bias operand where it has one (a
    half-precision convolution with a bias), else added after (None)."""
    return 2 if len(in_types) > 2 else None


def _conv_channel_fold(in_types, attrs):
    """Output channel c reads weight row c alone, whatever the groups; the shift joins the
    bias operand, or is added after (the epilogue pass stores it with the convolution). A
    float32/float64 depthwise convolution gains the bias operand instead: its own kernel
    (kernels/cdepthwise.py) adds a bias to its sums as it stores them, the same sum the add
    would compute, fused with a clamp after it or not (an imported MobileNet's batch norms
    would otherwise each cost a pass of its own where the epilogue pass cannot fuse)."""
    slot = _bias_slot(in_types)
    if slot is None and _depthwise_gains_bias(in_types, attrs):
        slot = 2
    return ChannelWeights(weight=1, bias=slot)


def _depthwise_gains_bias(in_types, attrs) -> bool:
    from ..kernels.cdepthwise import multiplier

    x, w = in_types[:2]
    if x.dtype not in (dt.float32, dt.float64) or len(x.shape) != 4 or len(in_types) != 2:
        return False
    channels, groups = x.shape[1], attrs["groups"]
    return isinstance(channels, int) and multiplier(channels, tuple(w.shape), groups) is not None


def _input_grad_channel_fold(in_types, attrs):
    """The transposed convolution's weight is (Cin, Cout/groups, *K): output channel
    ``g * Cout/groups + j`` reads ``w[g * Cin/groups : (g + 1) * Cin/groups, j]``."""
    return ChannelWeights(weight=1, groups=attrs["groups"], axis=1, bias=_bias_slot(in_types))


_CONV_EPILOGUE = conv_epilogue.rule(_conv_infer, _compiled)


# attribute rules (ops/_attr_rules.py): what a graph file may hold
_CONV_GEOMETRY = {
    "stride": R.Ints(1, arity=(1, 3)),
    "padding": R.OneOf(R.Ints(0, arity=(1, 3)), R.Pairs(arity=(1, 3))),
    "dilation": R.Ints(1, arity=(1, 3)),
    "groups": R.Int(1),
}
CONV_ATTRS = _CONV_GEOMETRY
CONV_INPUT_GRAD_ATTRS = {**_CONV_GEOMETRY, "in_size": R.Ints(0, symbolic=True, arity=(1, 5))}
CONV_WEIGHT_GRAD_ATTRS = {**_CONV_GEOMETRY, "kernel_size": R.Ints(1, arity=(1, 3))}


CONV = register(
    OpDef(
        name="conv",
        attrs=CONV_ATTRS,
        layout=Layout((0, 1)),  # (channels-last in, out: PyTorch's)
        grad_fn="ConvolutionBackward0",
        autocast=Autocast.LOWER,
        onnx=oxc.onnx_conv,
        kind="nn",
        infer=_conv_infer,
        cached_infer=True,
        kernel=_conv_kernel,
        fast=_conv_fast,
        vjp=_conv_vjp,
        cost=_conv_cost,
        torch_flops=_torch_flops.convolution,
        # tools/flops.py: counted with convolutions
        batch=_batching.per_sample(),
        c_step=_conv_c_step,
        compile=_conv_compile,
        epilogue=_CONV_EPILOGUE,
        # output channel c reads weight row c only, whatever the groups
        channel_weight=lambda attrs: 1,
        channel_fold=_conv_channel_fold,
        flop_family="conv",
        workspace=_workspace,
        complex=Complex.GRADIENT,  # (NumPy's kernels; the C ones decline complex)
        doc="conv(x, w; stride, padding, dilation, groups): N-d cross-correlation, x of shape "
        "(N, C, *S), w of shape (Cout, C/groups, *K)",
    )
)


CONV_INPUT_GRAD = register(
    OpDef(
        name="conv_input_grad",
        attrs=CONV_INPUT_GRAD_ATTRS,
        layout=Layout((0, 1)),  # (channels-last in, out: PyTorch's)
        grad_fn="ConvolutionBackward0",  # (PyTorch's transposed convolution's node)
        autocast=Autocast.LOWER,
        onnx=oxc.onnx_conv_input_grad,
        kind="nn",
        infer=_input_grad_infer,
        cached_infer=True,
        kernel=_conv_input_grad_kernel,
        fast=_conv_input_grad_fast,
        vjp=_input_grad_vjp,
        cost=_input_grad_cost,
        torch_flops=_torch_flops.transposed_or_backward,
        # tools/flops.py: counted with convolutions
        batch=_batching.per_sample(),
        channel_fold=_input_grad_channel_fold,
        flop_family="conv",
        workspace=_workspace,
        complex=Complex.GRADIENT,  # (NumPy's kernels; the C ones decline complex)
        doc="conv_input_grad(gy, w; ..., in_size): the adjoint of conv in x (a transposed "
        "convolution producing spatial size in_size)",
    )
)


CONV_WEIGHT_GRAD = register(
    OpDef(
        name="conv_weight_grad",
        attrs=CONV_WEIGHT_GRAD_ATTRS,
        onnx=oxc.onnx_conv_weight_grad,
        kind="nn",
        infer=_weight_grad_infer,
        cached_infer=True,
        kernel=_conv_weight_grad_kernel,
        fast=_conv_weight_grad_fast,
        vjp=_weight_grad_vjp,
        cost=_weight_grad_cost,
        torch_flops=_torch_flops.convolution_backward,
        # tools/flops.py: counted with convolutions
        batch=_batching.per_sample((0, 1), partial=True),
        flop_family="conv",
        workspace=_workspace,
        complex=Complex.GRADIENT,  # (NumPy's kernels; the C ones decline complex)
        doc="conv_weight_grad(x, gy; ..., kernel_size): the adjoint of conv in w",
    )
)
