"""Binary elementwise math with PyTorch's gradients (split from ops/extra_math.py): hypot,
logaddexp, logaddexp2 (SciPy/NumPy reference kernels, float tensors only), and xlogy / xlog1py,
one op each so their gradients are PyTorch's derivatives.yaml formulas with its IEEE values at
0, NaN and infinities."""
from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeError, KernelDTypeError
from . import _onnx
from . import api as E
from ._created_nan import positive_created_nan
from ._node_names import rename_node
from ._registry import INPLACE, OpDef, TensorBase, apply, export, register
from ._rules import Complex
from ._util import elementwise_cost
from .binary import _binary, _binary_infer, _reduce_to
from .extra_math import _LN2, _scipy
from .promotion import promote

# ------------------------------------------------------------------------------ binary math


def _hypot_vjp(c, g):
    x, y = c.inputs
    out = c.outputs[0]
    # PyTorch's grad * x / hypot: NaN at the origin (0 / 0), as PyTorch 2.13 gives
    with np.errstate(invalid="ignore"):  # (silent, as PyTorch, when eager)
        return (E.sum_to(g * x / out, x.shape), E.sum_to(g * y / out, y.shape))


def _logaddexp_vjp(scale):
    def vjp(c, g):
        x, y = c.inputs
        d = (x - y) * scale if scale != 1.0 else x - y
        # (complex: the conjugated derivative, exp(x) / (exp(x) + exp(y)))
        gx, gy = g * E.conj(E.sigmoid(d)), g * E.conj(E.sigmoid(-d))
        return E.sum_to(gx, x.shape), E.sum_to(gy, y.shape)

    return vjp


def _logaddexp_kernel(x, y):
    """np.logaddexp; complex operands as PyTorch's CPU kernel (its _log_add_exp_helper): the
    operand of the larger real part is ``max``, the result ``max + log1p(exp(min - max))``; a
    NaN in either part of either operand gives NaN + NaN j; equal infinite real parts give
    ``min`` for -inf, ``log(exp(min) + exp(max))`` for +inf."""
    if not np.iscomplexobj(x):
        return _scipy(np.logaddexp)(x, y)
    x, y = np.broadcast_arrays(x, y)
    with np.errstate(all="ignore"):
        lo = np.where(x.real < y.real, x, y)
        hi = np.where(x.real < y.real, y, x)
        out = np.log1p(np.exp(lo - hi)) + hi
        same_inf = ~np.isfinite(lo.real) & (lo.real == hi.real)
        out = np.where(same_inf & (lo.real < 0), lo, out)
        out = np.where(same_inf & (lo.real > 0), np.log(np.exp(lo) + np.exp(hi)), out)
        nan = np.isnan(x) | np.isnan(y)  # (np.isnan of a complex: either part)
        out = np.where(nan, np.complex128(complex(np.nan, np.nan)), out)
    return np.asarray(out, x.dtype)


def _logaddexp_check(x, y):
    """logaddexp's operands: float or complex tensors (PyTorch computes it in complex too)."""
    if isinstance(x, TensorBase) and isinstance(y, TensorBase):
        if x.dtype.is_complex or y.dtype.is_complex:
            return
    _float_tensors("logaddexp")(x, y)


def _save_output(op):
    """Keep the result for the VJP too (_binary saves the inputs only)."""
    op.save_outputs = (0,)
    return op


def _float_tensors(name):
    def check(x, y):
        for t in (x, y):
            if not isinstance(t, TensorBase):
                raise DTypeError(f"{name} takes tensors, got {type(t).__name__}", op=name)
        # an integer operand promotes to the other's float dtype, as in PyTorch
        if not (x.dtype.is_floating_point or y.dtype.is_floating_point):
            raise KernelDTypeError(
                f"{name} is defined for float tensors, got {x.dtype} and {y.dtype}", op=name
            )

    return check


def _onnx_hypot(e, x, y):
    # scaled by the larger magnitude, as the kernel avoids overflow
    ax, ay = e.node("Abs", [x]), e.node("Abs", [y])
    big, small = e.node("Max", [ax, ay]), e.node("Min", [ax, ay])
    dtype = e.in_types[0].dtype
    zero, one = _onnx.scalar(e, 0, dtype), _onnx.scalar(e, 1, dtype)
    safe = e.node("Where", [e.node("Equal", [big, zero]), one, big])
    ratio = e.node("Div", [small, safe])
    root = e.node("Sqrt", [e.node("Add", [one, e.node("Mul", [ratio, ratio])])])
    out = e.node("Mul", [big, root])
    inf = e.node("Or", [e.node("IsInf", [x]), e.node("IsInf", [y])])
    return e.node("Where", [inf, _onnx.scalar(e, np.inf, dtype), out])


def _onnx_logaddexp(scale):
    """log(exp(x) + exp(y)) (base 2 with ``scale`` ln 2) as m + log1p(exp(-|x - y|))."""

    def rule(e, x, y):
        dtype = e.in_types[0].dtype
        m = e.node("Max", [x, y])
        d = e.node("Neg", [e.node("Abs", [e.node("Sub", [x, y])])])
        if scale != 1.0:
            d = e.node("Mul", [d, _onnx.scalar(e, scale, dtype)])
        tail = _onnx.log1p(e, e.node("Exp", [d]), dtype)
        if scale != 1.0:
            tail = e.node("Div", [tail, _onnx.scalar(e, scale, dtype)])
        out = e.node("Add", [m, tail])
        # equal infinities: x - y is NaN, the result the infinity itself
        same = e.node("Equal", [x, y])
        return e.node("Where", [e.node("And", [same, e.node("IsInf", [x])]), x, out])

    return rule


_save_output(
    _binary(
        "hypot",
        _scipy(np.hypot),
        _hypot_vjp,
        check=_float_tensors("hypot"),
        floating=True,
        bools=False,
        doc="hypot(x, y) = sqrt(x^2 + y^2) without overflow; float tensors only, as in PyTorch.",
        onnx=_onnx.composite(_onnx_hypot),
    )
)
_binary(
    "logaddexp",
    _logaddexp_kernel,
    _logaddexp_vjp(1.0),
    check=_logaddexp_check,
    floating=True,
    bools=False,
    doc="logaddexp(x, y) = log(exp(x) + exp(y)) without overflow; float and complex tensors "
    "(PyTorch's complex form: the larger real part's operand plus log1p(exp(min - max))).",
    onnx=_onnx.composite(_onnx_logaddexp(1.0)),
    complex=Complex.GRADIENT,
)
_binary(
    "logaddexp2",
    _scipy(np.logaddexp2),
    _logaddexp_vjp(_LN2),
    check=_float_tensors("logaddexp2"),
    floating=True,
    bools=False,
    doc="logaddexp2(x, y) = log2(2^x + 2^y) without overflow; float tensors only.",
    onnx=_onnx.composite(_onnx_logaddexp(_LN2)),
)

# (_binary gives every op an in-place method; PyTorch's tensors have no logaddexp_)
del INPLACE["logaddexp_"], INPLACE["logaddexp2_"]


# ------------------------------------------------------------------------ xlogy and xlog1py
# one op each, so their gradients are PyTorch's formulas (derivatives.yaml): for x
# ``xlogy(g, y)`` masked to 0 where x is 0 and y <= floor (log's 0, log1p's -1), for y
# ``g * x / y`` (``/ (y + 1)``), unmasked: an infinite g gives +-inf, 0 / 0 NaN and -0.0 keep
# their IEEE values there, as in PyTorch (a composite of selects gave other ones)


def _xlog_kernel(log):
    created = positive_created_nan(log)

    def kernel(x, y):
        """PyTorch's: NaN where y is NaN, +0 where x is 0, else x * log(y); 16-bit floats
        computed in float32, rounded once."""
        dtype = x.dtype
        if dtype.itemsize == 2:
            x, y = x.astype(np.float32), y.astype(np.float32)
        with np.errstate(all="ignore"):
            out = x * created(y)
        out = np.where(x == 0, out.dtype.type(0), out)
        out = np.where(np.isnan(y), out.dtype.type(np.nan), out)
        return np.asarray(out.astype(dtype, copy=False))

    return kernel


def _xlog_vjp(floor, shift):
    def vjp(c, g):
        x, y = c.inputs
        nx, ny = c.needs_input_grad
        gx = gy = None
        if nx:
            fill = E.logical_and(x == 0, y <= floor)
            gx = _reduce_to(E.where(fill, 0.0, apply(c.op, g, y)), c.in_types[0])
        if ny:
            gy = _reduce_to(g * x / (y + shift if shift else y), c.in_types[1])
        return gx, gy

    return vjp


def _xlog_onnx(op_type):
    def rule(e, x, y):
        dtype = e.out_types[0].dtype
        log = _onnx.log1p(e, y, dtype) if op_type == "Log1p" else e.node("Log", [y])
        product = e.node("Mul", [x, log])
        zero = e.node("Equal", [x, _onnx.scalar(e, 0, dtype)])
        out = e.node("Where", [zero, _onnx.scalar(e, 0, dtype), product])
        nan = e.node("IsNaN", [y])
        return e.node("Where", [nan, _onnx.scalar(e, math.nan, dtype), out])

    return _onnx.composite(rule)


def _xlog_op(name, log, floor, shift, onnx_log):
    return register(
        OpDef(
            name=name,
            kind="elementwise",
            infer=_binary_infer(name),
            kernel=_xlog_kernel(log),
            vjp=_xlog_vjp(floor, shift),
            cost=elementwise_cost(3),
            onnx=_xlog_onnx(onnx_log),
            doc=f"{name}(x, y): x * {'log1p' if shift else 'log'}(y), 0 where x is 0 and NaN "
            "where y is NaN, PyTorch's gradients.",
        )
    )


_XLOGY = _xlog_op("xlogy", np.log, 0.0, 0, "Log")
_XLOG1PY = _xlog_op("xlog1py", np.log1p, -1.0, 1, "Log1p")


def _xlog(op, node):
    """The public function; ``node``: PyTorch's node name pattern, its overload numbered 0
    for two tensors, 1 for a number x, 2 for a number y."""

    def fn(input, other):
        x, y = promote(input, other, floating=True)
        if x.dtype.is_complex:
            raise KernelDTypeError(
                f'"{op.name}_cpu" not implemented for complex tensors ({x.dtype})', op=op.name
            )
        overload = 2 if not isinstance(other, TensorBase) else 0
        overload = 1 if not isinstance(input, TensorBase) else overload
        return rename_node(apply(op, x, y), node.format(overload))

    fn.__name__ = fn.__qualname__ = op.name
    return fn


xlogy = _xlog(_XLOGY, "XlogyBackward{}")
xlogy.__doc__ = (
    "``x * log(y)``, 0 where x is 0 (unless y is NaN), with broadcasting and promotion to a "
    "float dtype. Either operand may be a Python number."
)
export(xlogy, method=True, inplace=True)
xlog1py = _xlog(_XLOG1PY, "SpecialXlog1PyBackward{}")
xlog1py.__doc__ = "``x * log1p(y)``, 0 where x is 0 (unless y is NaN); ember.special.xlog1py."
