"""Elementwise unary math primitives. The promotion helpers every elementwise family uses
(`promote`, `to_tensor`, `scalar_array`) are in ops/promotion.py, binary arithmetic in
ops/binary.py, ``where`` and ``clip`` in ops/where.py, ``cast`` in ops/cast.py.

Primitives are strict: binary ops take operands of one dtype (shapes broadcast). The public
functions do the promotion (``dtypes.result_type``): they cast tensors and turn Python scalars
into constants of the result dtype, so ``float32_tensor * 2.5`` stays float32.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import KernelDTypeError
from ..types import TensorType
from . import _onnx, qtensor_ops
from . import _onnx_complex as cx
from . import _onnx_elementwise as ox
from . import api as E
from ._created_nan import negative_domain, positive_created_nan
from ._registry import (
    PUBLIC,
    REGISTRY,
    OpDef,
    apply,
    building_graph,
    export,
    register,
)
from ._rules import Clamp, Complex
from ._select import select_bits
from ._unrecorded import direct
from ._util import (
    elementwise_cost,
    half_precision,
    numel,
    require_float_or_complex,
    same_type,
    value_bytes,
    zero_input_grad,
)
from .promotion import to_tensor

# ------------------------------------------------------------------------------- unary ops


def _direct_inplace(fn, kernel, float_only: bool) -> None:
    """Mark a public function whose whole computation is one NumPy ufunc: its in-place method
    (``x.add_(y)``) may then run the ufunc straight into x's memory when no gradient is being
    recorded (see ``Tensor._inplace``), instead of computing a new array and copying it in."""
    if isinstance(kernel, np.ufunc):
        fn.ufunc = kernel
        fn.ufunc_float_only = float_only
    # (an elementwise op's out= refuses operands partly overlapping out, as PyTorch's
    # TensorIterator does: ops/_out.py, ops/_overlap.py)
    fn.out_overlap_refused = True


def _unary_infer(name, float_only, bools=False, real_result=False):
    def infer(x):
        if float_only:
            require_float_or_complex(name, x)
        if real_result and x.dtype.is_complex:  # (abs: the modulus)
            return TensorType(tuple(x.shape), dt.to_real(x.dtype))
        elif x.dtype is dt.bool_ and not bools:
            raise KernelDTypeError("not defined for bool tensors; cast with .int() first", op=name)
        return same_type(x)

    return infer


def _unary(
    name,
    kernel,
    vjp,
    *,
    float_only=True,
    save="input",
    flops=1,
    method=True,
    functional=False,
    toplevel=True,
    c=None,
    workspace=None,
    doc="",
    bools=False,
    onnx=None,
    complex=None,
    real_result=False,
    float8=False,
    grad_fn=None,
    clamp=None,
    quantized_form=None,
):
    """``c``: the op as a C expression over ``{0}`` for fused kernels (kernels/cfuse.py), with
    ``{T}`` the C type and ``{f}`` the math-function suffix ("f" for float32); ``workspace``: the
    kernel's rule for the memory planner (ops/_util.py, `value_bytes`); ``functional`` /
    ``toplevel``: exported to ``ember.nn.functional`` / ``ember``; ``complex``: the op's
    `Complex` rule (ops/_rules.py), ``real_result``: a complex operand gives a real result (the
    modulus); ``float8``: the op takes float8 operands (its ``float8`` rule); ``grad_fn``: its
    nodes' PyTorch name where that is not the op's own (ops/_node_names.py)."""
    op = register(
        OpDef(
            name=name,
            kind="elementwise",
            infer=_unary_infer(name, float_only, bools, real_result),
            cached_infer=True,
            kernel=kernel,
            vjp=vjp,
            cost=elementwise_cost(flops),
            save_inputs=(0,) if save == "input" else (),
            save_outputs=(0,) if save == "output" else (),
            doc=doc,
            c=c,
            workspace=workspace,
            onnx=onnx,
            complex=complex,
            float8=float8,
            grad_fn=grad_fn,
            clamp=clamp,
        )
    )

    def fn(x):
        x = to_tensor(x)
        try:
            dtype = x.dtype
            if float_only and not (dtype.is_floating_point or dtype.is_complex):
                # PyTorch's int-to-float promotion
                x = E.cast(x, dt.get_default_dtype())
            return apply(op, x)
        except KernelDTypeError:  # (a quantized tensor: its own form, where PyTorch has one)
            if quantized_form is None or not qtensor_ops.quantized_form((x,)):
                raise
            return quantized_form(x)

    fn.__name__ = fn.__qualname__ = name
    _direct_inplace(fn, kernel, float_only)
    fn.__doc__ = doc or f"Elementwise {name}."
    export(
        fn,
        name=name,
        method=method,
        functional=functional,
        toplevel=toplevel,
        inplace=method is not False,
    )
    return op


def _zero_grad(ctx, g):
    return (E.zeros_like(g),)


def _sigmoid_kernel(x):
    if x.dtype.kind == "c":  # (complex: the formula itself; its poles are the values')
        with np.errstate(all="ignore"):
            return (1 / (1 + np.exp(-x))).astype(x.dtype, copy=False)
    if x.dtype.itemsize == 2:  # (float16, bfloat16: in float32, rounded once, as PyTorch's)
        return _sigmoid_kernel(x.astype(np.float32)).astype(x.dtype)
    # the C expression's two overflow-free forms, sharing e = exp(-|x|): 1 / (1 + e) where
    # x >= 0, e / (1 + e) elsewhere. Both are n / (1 + e), the numerator n = fmax(e, x >= 0):
    # 1 where x >= 0 (e <= 1 there), e elsewhere (a NaN x gives NaN either way). One division
    # each, the C expression's bits, in six vectorized passes (NumPy's masked ufuncs and
    # np.where on a random mask ran this kernel ~25x slower; a selection on bits, 13 passes)
    with np.errstate(invalid="ignore"):  # (a NaN compares false, and stays NaN)
        e = _minus_abs(x)
        np.exp(e, out=e)
        d = np.add(e, 1, out=np.empty_like(e))
        np.fmax(e, np.greater_equal(x, 0).view(np.uint8), out=e, dtype=e.dtype)
        return np.divide(e, d, out=e)


def _minus_abs(x):
    """``-|x|`` (``copysign(x, -1)``) in a new contiguous array: for float dtypes, the sign
    bit set by an integer OR on the bits (the same bits; NumPy's copysign by a scalar runs
    several times slower than its bitwise loops)."""
    if x.dtype.kind != "f":
        return np.copysign(x, x.dtype.type(-1), out=np.empty_like(x))
    bits = np.dtype(f"u{x.itemsize}")
    e = np.empty(x.shape, x.dtype)
    np.bitwise_or(x.view(bits), bits.type(1) << bits.type(8 * x.itemsize - 1), out=e.view(bits))
    return e


def _sigmoid_workspace(node, layouts) -> int:
    """`_sigmoid_kernel`'s temporaries beyond its result (exp(-|x|), then the numerator, in
    the result's memory): the denominator 1 + e (one result) and the comparison's bytes; a
    16-bit result is computed in float32 beside it, its input widened, e and 1 + e (three
    float32 arrays, each twice the result's bytes)."""
    out = node.outputs[0]
    wide = 6 if out.dtype.itemsize == 2 else 1
    return wide * value_bytes(out) + numel(out.shape)


_sigmoid_workspace.types_only = True  # (reads only the node's types: fused programs count it too)


def _erf_kernel(x):
    from scipy.special import erf

    return erf(x).astype(x.dtype, copy=False)


def _erf_workspace(node, layouts) -> int:
    """`_erf_kernel`'s temporaries beyond the result: none in float32/float64; SciPy has no
    half-precision erf, so a half input is converted to float32 whole and the float32 result
    rounded: four result sizes beside the result (measured for float16 and bfloat16)."""
    out = node.outputs[0]
    return 4 * value_bytes(out) if half_precision(out) else 0


_erf_workspace.types_only = True  # (reads only the node's types: fused programs count it too)


def _relu_kernel(x):
    return np.maximum(x, x.dtype.type(0))


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _abs_vjp(c, g):
    x = c.inputs[0]
    if x.dtype.is_complex:  # the real gradient along z / |z| (0 at 0), PyTorch's
        return (g * E.sgn(x),)
    return (g * E.sign(x),)


NEG = _unary(
    "neg",
    np.negative,
    lambda c, g: (-g,),
    float_only=False,
    save="none",
    c="(-{0})",
    complex=Complex.GRADIENT,
    onnx=cx.pairs(_onnx.node("Neg"), _onnx.node("Neg")),
)
_unary(
    "abs",
    np.abs,
    _abs_vjp,
    float_only=False,
    c="fabs{f}({0})",
    complex=Complex.GRADIENT,
    real_result=True,
    onnx=cx.pairs(_onnx.node("Abs"), cx.magnitude),
    float8=True,
)


def _sign_kernel(x):
    """np.sign, with PyTorch's 0 for NaN (NumPy gives NaN)."""
    if x.dtype == np.bool_:
        return x.copy()
    out = np.sign(x)
    if dt.from_numpy_dtype(x.dtype).is_floating_point:
        return np.where(np.isnan(x), x.dtype.type(0), out)
    return out


_unary(
    "sign",
    _sign_kernel,
    _zero_grad,
    float_only=False,
    save="none",
    bools=True,
    onnx=ox.onnx_sign,
)
_unary(
    "exp",
    np.exp,
    lambda c, g: (g * E.conj(c.outputs[0]),),
    save="output",
    c="exp{f}({0})",
    complex=Complex.GRADIENT,
    onnx=cx.pairs(_onnx.node("Exp"), cx.exp),
)
_unary(
    "log",
    positive_created_nan(np.log),
    lambda c, g: (g / E.conj(c.inputs[0]),),
    c=negative_domain("log{f}({0})"),
    onnx=_onnx.node("Log"),
    complex=Complex.GRADIENT,
)
_unary(
    "log1p",
    np.log1p,
    onnx=_onnx.composite(ox.onnx_log1p),
    vjp=lambda c, g: (g / E.conj(c.inputs[0] + 1),),
    c="log1p{f}({0})",
    complex=Complex.GRADIENT,
    grad_fn="Log1PBackward0",  # (PyTorch's spelling)
)
_unary(
    "expm1",
    np.expm1,
    onnx=_onnx.composite(ox.onnx_expm1),
    vjp=lambda c, g: (g * E.conj(c.outputs[0] + 1),),
    save="output",
    c="expm1{f}({0})",
    complex=Complex.GRADIENT,
)
_unary(
    "sqrt",
    positive_created_nan(np.sqrt),
    lambda c, g: (g / (E.conj(c.outputs[0]) * 2),),
    save="output",
    c=negative_domain("sqrt{f}({0})"),
    complex=Complex.GRADIENT,
    onnx=_onnx.node("Sqrt"),
)
_unary(
    "rsqrt",
    lambda x: 1 / np.sqrt(x),
    lambda c, g: (g * E.conj(c.outputs[0] ** 3 * -0.5),),
    save="output",
    c="(({T})1 / sqrt{f}({0}))",
    complex=Complex.GRADIENT,
    onnx=_onnx.composite(ox.onnx_rsqrt),
)


def _reciprocal_kernel(x):
    """np.reciprocal; a complex zero's reciprocal is PyTorch's complex infinity, inf + nan j
    (NumPy's is nan + nan j)."""
    if not np.iscomplexobj(x):
        return np.reciprocal(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.reciprocal(x)
    zero = x == 0
    if zero.any():
        out = np.where(zero, np.asarray(complex(np.inf, np.nan), x.dtype), out)
    return out


_unary(
    "reciprocal",
    _reciprocal_kernel,
    lambda c, g: (-g * E.conj(c.outputs[0] * c.outputs[0]),),
    save="output",
    onnx=_onnx.node("Reciprocal"),
    complex=Complex.GRADIENT,
)
_unary(
    "sin",
    np.sin,
    lambda c, g: (g * E.conj(E.cos(c.inputs[0])),),
    c="sin{f}({0})",
    onnx=_onnx.node("Sin"),
    complex=Complex.GRADIENT,
)
_unary(
    "cos",
    np.cos,
    lambda c, g: (-g * E.conj(E.sin(c.inputs[0])),),
    c="cos{f}({0})",
    onnx=_onnx.node("Cos"),
    complex=Complex.GRADIENT,
)


def _result_grad(name: str, c, g, slope):
    """The gradient of sigmoid or tanh from its result: one op (ops/output_grads.py) for real
    floating dtypes, the composite ``g * conj(slope(y))`` for complex ones."""
    y = c.outputs[0]
    if y.dtype.is_complex or g.dtype != y.dtype:
        return g * E.conj(slope(y))
    return apply(REGISTRY[name], g, y)


_unary(
    "tanh",
    np.tanh,
    lambda c, g: (_result_grad("tanh_backward", c, g, lambda y: 1 - y * y),),
    save="output",
    functional=True,
    c="tanh{f}({0})",
    complex=Complex.GRADIENT,
    onnx=_onnx.node("Tanh"),
)
_unary(
    "sigmoid",
    _sigmoid_kernel,
    lambda c, g: (_result_grad("sigmoid_backward", c, g, lambda y: y * (1 - y)),),
    save="output",
    functional=True,
    flops=4,
    complex=Complex.GRADIENT,
    workspace=_sigmoid_workspace,
    quantized_form=qtensor_ops.sigmoid,
    # the kernel's two overflow-free forms sharing one exp(-|x|) and one division, n / (1 + e)
    # with the numerator n selected per element (1 where x >= 0, else e): each form's bits, at
    # one division per element rather than two (a select, not a branch: the loop vectorizes)
    c="({{ {T} e_ = exp{f}(-fabs{f}({0})); ({0} >= 0 ? ({T})1 : e_) / (({T})1 + e_); }})",
    onnx=_onnx.node("Sigmoid"),
)


def _relu_backward_infer(g, y):
    require_float_or_complex("relu_backward", g, y)
    if tuple(g.shape) != tuple(y.shape) or g.dtype != y.dtype:
        from ..errors import ShapeError

        raise ShapeError(f"the gradient {g} must have the result's type {y}", op="relu_backward")
    return same_type(y)


def _relu_backward_kernel(g, y):
    # +0.0 where y <= 0, g's bits elsewhere (a NaN y passes g, as PyTorch's threshold_backward):
    # one multiply of the bits by the mask (ops/_select.py), where np.where on a ReLU's random
    # mask runs several times slower
    return select_bits(np.less_equal(y, 0), np.zeros((), g.dtype), g)


def _onnx_relu_backward(e):
    g, y = e.inputs
    blocked = e.node("LessOrEqual", [y, e.scalar(0, e.in_types[1].dtype)])
    return e.node("Where", [blocked, e.scalar(0, e.in_types[0].dtype), g])


RELU_BACKWARD = register(
    OpDef(
        name="relu_backward",
        kind="elementwise",
        infer=_relu_backward_infer,
        cached_infer=True,
        kernel=_relu_backward_kernel,
        # linear in g under the same mask; piecewise constant in y: zeros there, as PyTorch's
        vjp=lambda c, a: (apply(RELU_BACKWARD, a, c.inputs[1]), zero_input_grad(c, 1)),
        cost=elementwise_cost(1),
        c="({1} <= 0 ? ({T})0 : {0})",
        onnx=_onnx_relu_backward,
        doc="relu_backward(g, y): +0.0 where the ReLU's result y <= 0, else g (NaN y: g); "
        "the eager tape's ReLU gradient in one pass (PyTorch's threshold_backward)",
    )
)


def _relu_vjp(c, g):
    y = c.outputs[0]
    # (nothing recorded, a signature relu_backward took before: its kernel, undispatched)
    out = direct(RELU_BACKWARD, g, y)
    if out is not None:
        return (out,)
    if not building_graph() and g.dtype is y.dtype and tuple(g.shape) == tuple(y.shape):
        # eagerly one pass, where the two ops below would make a mask and then select
        return (apply(RELU_BACKWARD, g, y),)
    # where(result != 0, g, 0), the form the pooling scatter and convolution epilogues fuse
    # (a graph's fused loop runs it in one pass): a ReLU's result is never negative, so this is
    # PyTorch's threshold_backward, a NaN result passing g
    return (E.where(y != 0, g, 0),)


_unary(
    "relu",
    _relu_kernel,
    _relu_vjp,
    float_only=False,
    save="output",
    doc="relu(x) = max(x, 0), NaN kept. Its gradient is 0 where the result is <= 0 and at NaN "
    "(PyTorch's passes the gradient at NaN).",
    # np.maximum(x, 0): NaN stays, a tie (-0.0) gives the second operand, 0.0
    c="((({0} > 0) | ({0} != {0})) ? {0} : ({T})0)",
    onnx=_onnx.composite(ox.onnx_relu),
    # (the expression's: NaN kept, -0.0 becomes 0.0)
    clamp=lambda attrs, constants: Clamp(0.0, float("inf"), True, False),
    quantized_form=qtensor_ops.relu,
)
_unary(
    "erf",
    _erf_kernel,
    lambda c, g: (g * E.exp(-c.inputs[0] * c.inputs[0]) * _TWO_OVER_SQRT_PI,),
    c="erf{f}({0})",
    workspace=_erf_workspace,
    onnx=_onnx.node("Erf"),
)


def _softsign_vjp(c, g):
    x = c.inputs[0]
    d = E.abs(x) + 1  # the derivative is 1 / (1 + |x|)^2, also at 0
    if c.in_types[0].dtype.is_complex:
        # z / d, d = 1 + |z| real (not holomorphic): the quotient's term and the modulus's,
        # PyTorch's gradient of its composite z / (|z| + 1), sgn(0) = 0
        return (g / d - E.real(g * E.conj(x)) * E.sgn(x) / (d * d),)
    # (x - x: NaN at +-inf, where PyTorch's quotient rule on its composite x / (1 + |x|) gives
    # inf / inf, and 0 elsewhere, so the one accurate formula 1 / d^2 holds for finite x)
    return (g / (d * d) + (x - x),)


_unary(
    "softsign",
    lambda x: x / (1 + np.abs(x)),
    _softsign_vjp,
    grad_fn="DivBackward0",  # (PyTorch's composite x / (1 + |x|) ends in a division)
    method=False,
    functional=True,
    toplevel=False,  # PyTorch's F.softsign only
    flops=3,
    c="({0} / (({T})1 + fabs{f}({0})))",  # the kernel's two roundings: bit for bit
    onnx=_onnx.node("Softsign"),
    complex=Complex.GRADIENT,
    doc="softsign(x): x / (1 + |x|), complex tensors too. Its gradient 1 / (1 + |x|)^2 is NaN "
    "at +-inf, as PyTorch's.",
)
_unary("floor", np.floor, _zero_grad, float_only=False, save="none", onnx=ox.onnx_float("Floor"))
_unary("ceil", np.ceil, _zero_grad, float_only=False, save="none", onnx=ox.onnx_float("Ceil"))
# ONNX's Round rounds half to even, as NumPy does
_unary("round", np.round, _zero_grad, float_only=False, save="none", onnx=ox.onnx_float("Round"))
_round_to_integers = PUBLIC["round"]


def _round(x, decimals: int = 0):
    """Round half to even; with ``decimals``, to that many decimal places (negative: to tens,
    hundreds, ...), computed as PyTorch does in the tensor's dtype: ``round(x * 10**d) /
    10**d`` (``round(x / 10**-d) * 10**-d`` for negative ``d``)."""
    decimals = int(decimals)
    if not decimals:
        return _round_to_integers(x)
    x = to_tensor(x)
    if not x.dtype.is_floating_point:
        raise KernelDTypeError(
            f"rounding to decimals needs a floating tensor, got {x.dtype}", op="round"
        )
    if x.dtype in (dt.float16, dt.bfloat16):
        # PyTorch's kernel scales, rounds and unscales a 16-bit value in float32, rounding
        # once (0.3496 in bfloat16 times 10 would round to 3.5 first, then to 4)
        return E.cast(_round(E.cast(x, dt.float32), decimals), x.dtype)
    scale = 10.0 ** abs(decimals)
    if decimals > 0:
        return _round_to_integers(x * scale) / scale
    return _round_to_integers(x / scale) * scale


_round.__name__ = _round.__qualname__ = "round"
export(_round, name="round", method=True, inplace=True)
_unary(
    "trunc",
    np.trunc,
    _zero_grad,
    float_only=False,
    save="none",
    onnx=_onnx.composite(ox.onnx_trunc),
)
