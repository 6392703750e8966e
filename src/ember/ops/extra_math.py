"""Issue 19's long tail of elementwise math, PyTorch's names.

Primitives with SciPy reference kernels, where no composite of ember's ops is accurate: lgamma,
digamma, polygamma, erfinv, erfc, i0 (and i1, log_ndtr for ``ember.special``), signbit, and the
binary hypot, logaddexp and logaddexp2. Composites written in ember's ops (so they
differentiate, capture and fuse through them): absolute, deg2rad, rad2deg, frac, heaviside,
sinc, xlogy, xlog1py, exp2, logit, clamp_min and clamp_max.

The float functions promote integer and bool tensors to the default float dtype first, as
PyTorch does; half-precision inputs are computed in float32 and rounded once (SciPy has no
half-precision special functions).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, KernelDTypeError
from ..types import TensorType
from . import _onnx
from . import api as E
from ._created_nan import positive_created_nan
from ._node_names import rename_node, renames
from ._registry import INPLACE, PUBLIC, OpDef, TensorBase, apply, export, is_traced, register
from ._rules import Complex
from ._util import elementwise_cost, require_float, same_type
from .binary import _binary, _binary_infer, _reduce_to
from .elementwise import _unary
from .promotion import promote, to_tensor

_HALF = (dt.float16.np, dt.bfloat16.np)


def _special():
    # SciPy is imported when a kernel first runs, not with ember (it costs ~0.2 s to import)
    import scipy.special

    return scipy.special


def _scipy(fn):
    """A kernel from a SciPy ufunc (a function, or the name of one in scipy.special, looked up
    when the kernel runs): half precision computed in float32, the IEEE edge values (NaN,
    infinities) returned without NumPy's warnings, as PyTorch gives them."""
    name = fn if isinstance(fn, str) else getattr(fn, "__name__", "kernel")

    def kernel(*arrays):
        f = getattr(_special(), fn) if isinstance(fn, str) else fn
        with np.errstate(all="ignore"):
            if arrays[0].dtype in _HALF:
                return f(*(a.astype(np.float32) for a in arrays)).astype(arrays[0].dtype)
            return np.asarray(f(*arrays)).astype(arrays[0].dtype, copy=False)

    kernel.__name__ = name
    return kernel


def _digamma(x):
    # PyTorch's digamma at a signed zero is the pole's side: -inf at +0, +inf at -0
    out = _special().psi(x)
    zero = x == 0
    if np.any(zero):
        out = np.where(zero, np.copysign(np.inf, -x), out)
    return out


def _lgamma(x):
    # log|Gamma| grows without bound towards -inf too (SciPy gives -inf there, PyTorch inf)
    out = _special().gammaln(x)
    return np.where(x == -np.inf, np.inf, out) if np.any(x == -np.inf) else out


_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_LN2 = math.log(2.0)

_unary("lgamma", _scipy(_lgamma), lambda c, g: (g * E.digamma(c.inputs[0]),))


@export(method=True, inplace=True)
def mvlgamma(input, p: int):
    """The multivariate log-gamma function of dimension ``p`` (PyTorch's ``mvlgamma``,
    ``ember.special.multigammaln``): ``p (p - 1) / 4 log(pi) + sum_j lgamma(x - j / 2)`` for
    j in 0..p-1."""
    x = to_tensor(input)
    if not x.dtype.is_floating_point:
        x = E.cast(x, dt.get_default_dtype())
    terms = E.stack([E.lgamma(x - j / 2) for j in range(int(p))], -1)
    return E.sum(terms, -1) + p * (p - 1) / 4 * math.log(math.pi)


_unary(
    "digamma",
    _scipy(_digamma),
    lambda c, g: (g * E.polygamma(1, c.inputs[0]),),
    doc="digamma(x): the logarithmic derivative of the gamma function; -inf at +0 and +inf "
    "at -0, NaN at the negative integers, as in PyTorch.",
)
_unary(
    "erfinv",
    _scipy("erfinv"),
    lambda c, g: (g * E.exp(c.outputs[0] * c.outputs[0]) * _SQRT_PI_OVER_2,),
    save="output",
)
# Numerical Recipes' erfcc: t exp(-z^2 + P(t)), t = 1 / (1 + |z| / 2), relative error below
# 1.2e-7 everywhere (about one float32 ulp), so its tail keeps its digits where 1 - erf(x)
# loses them all
_ERFC_COEFFICIENTS = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def _onnx_erfc(e, x):
    dtype = e.in_types[0].dtype
    if dtype.itemsize > 4:
        e.unsupported(f"in {dtype.name}: ONNX has no erfc, and its closed forms are float32's")
    f64 = dt.float64
    z = e.cast(x, f64)
    a = e.node("Abs", [z])
    t = e.node(
        "Reciprocal", [e.node("Add", [e.node("Mul", [a, e.scalar(0.5, f64)]), e.scalar(1, f64)])]
    )
    poly = e.scalar(_ERFC_COEFFICIENTS[-1], f64)
    for c in reversed(_ERFC_COEFFICIENTS[:-1]):  # Horner's scheme
        poly = e.node("Add", [e.node("Mul", [poly, t]), e.scalar(c, f64)])
    exponent = e.node("Sub", [poly, e.node("Mul", [z, z])])
    tail = e.node("Mul", [t, e.node("Exp", [exponent])])
    negative = e.node("Less", [z, e.scalar(0, f64)])
    out = e.node("Where", [negative, e.node("Sub", [e.scalar(2, f64), tail]), tail])
    return e.cast(out, dtype)


_unary(
    "erfc",
    _scipy("erfc"),
    lambda c, g: (g * E.exp(-c.inputs[0] * c.inputs[0]) * -_TWO_OVER_SQRT_PI,),
    onnx=_onnx.composite(_onnx_erfc),
)
I1 = _unary(
    "i1",
    _scipy("i1"),
    # d/dx I1(x) = I0(x) - I1(x) / x, whose limit at 0 is 1/2
    lambda c, g: (
        g
        * E.where(
            c.inputs[0] == 0,
            0.5,
            E.i0(c.inputs[0]) - c.outputs[0] / E.where(c.inputs[0] == 0, 1.0, c.inputs[0]),
        ),
    ),
    method=False,
    toplevel=False,  # ember.special.i1 only, as in PyTorch
)
I1.save_outputs = (0,)  # (_unary saves one of input and output; the VJP reads both)
_unary("i0", _scipy("i0"), lambda c, g: (g * apply(I1, c.inputs[0]),))
LOG_NDTR = _unary(
    "log_ndtr",
    _scipy("log_ndtr"),
    # d/dx log Phi(x) = phi(x) / Phi(x) = exp(-x^2 / 2 - log Phi(x)) / sqrt(2 pi)
    lambda c, g: (g * E.exp(c.inputs[0] * c.inputs[0] * -0.5 - c.outputs[0]) * _INV_SQRT_2PI,),
    method=False,
    toplevel=False,  # ember.special.log_ndtr only, as in PyTorch
)
LOG_NDTR.save_outputs = (0,)  # (as I1: the VJP reads input and output)


# -------------------------------------------------------------------------------- polygamma


def _polygamma_infer(x, *, n):
    require_float("polygamma", x)
    return same_type(x)


def _polygamma_kernel(x, *, n):
    if n == 0:
        return _scipy(_digamma)(x)
    return _scipy(lambda a: _special().polygamma(n, a))(x)


_POLYGAMMA = register(
    OpDef(
        name="polygamma",
        kind="elementwise",
        infer=_polygamma_infer,
        kernel=_polygamma_kernel,
        vjp=lambda c, g: (g * E.polygamma(c.attrs["n"] + 1, c.inputs[0]),),
        cost=elementwise_cost(20),
        save_inputs=(0,),
        doc="polygamma(x; n): the n-th derivative of digamma",
    )
)


def polygamma(n: int, input):
    """The ``n``-th derivative of the digamma function (PyTorch's argument order: n first)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise DTypeError(f"polygamma: n must be a non-negative int, got {n!r}", op="polygamma")
    x = to_tensor(input)
    if not x.dtype.is_floating_point:
        x = E.cast(x, dt.get_default_dtype())
    return apply(_POLYGAMMA, x, n=n)


def _polygamma_method(self, n: int):
    return polygamma(n, self)


export(polygamma)
export(_polygamma_method, name="polygamma", method=True, toplevel=False, inplace=True)


# ---------------------------------------------------------------------------------- signbit


def _signbit_infer(x):
    return TensorType(tuple(x.shape), dt.bool_)


_SIGNBIT = register(
    OpDef(
        name="signbit",
        kind="elementwise",
        infer=_signbit_infer,
        kernel=lambda x: np.signbit(x) if x.dtype != np.bool_ else np.zeros(x.shape, np.bool_),
        cost=elementwise_cost(1),
        doc="signbit(x): whether x's sign bit is set (True at -0.0), bool",
    )
)


@export(method=True)
def signbit(input):
    """Whether the sign bit is set, a bool tensor: True for negative values and -0.0 (and a
    NaN with its sign bit set), False for bools and unsigned integers."""
    return apply(_SIGNBIT, to_tensor(input))


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


# ------------------------------------------------------------------------------- composites


def _float(x):
    x = to_tensor(x)
    if not x.dtype.is_floating_point:
        x = E.cast(x, dt.get_default_dtype())
    return x


def _float_or_complex(x):
    """`_float`, complex tensors kept (the functions PyTorch computes in complex too)."""
    x = to_tensor(x)
    return x if x.dtype.is_complex else _float(x)


export(PUBLIC["abs"], name="absolute", method=True, inplace=True)


@export(method=True, inplace=True)
def deg2rad(input):
    """Degrees to radians; integer and bool tensors give the default float dtype."""
    return _float(input) * (math.pi / 180.0)


@export(method=True, inplace=True)
def rad2deg(input):
    """Radians to degrees; integer and bool tensors give the default float dtype."""
    return _float(input) * (180.0 / math.pi)


@export(method=True, inplace=True)
@renames("FracBackward0")
def frac(input):
    """The fractional part, ``x - trunc(x)``, keeping x's sign. Float tensors only, as in
    PyTorch. The gradient is 1."""
    x = to_tensor(input)
    if not x.dtype.is_floating_point:
        raise KernelDTypeError(f"frac is defined for float tensors only, got {x.dtype}", op="frac")
    return x - E.stop_gradient(E.trunc(x))


@export(method=True)
def heaviside(input, values):
    """The Heaviside step: 0 where input < 0, ``values`` where input == 0, 1 where input > 0
    (and 0 at NaN, as PyTorch's kernel gives). Both tensors of one dtype, as PyTorch requires;
    PyTorch defines no gradient, and ember's result is constant in both."""
    x, v = to_tensor(input), to_tensor(values)
    if x.dtype is not v.dtype:
        raise DTypeError(
            f"heaviside takes tensors of one dtype, got {x.dtype} and {v.dtype}", op="heaviside"
        )
    step = E.cast(x > 0, x.dtype)
    return E.stop_gradient(E.where(x == 0, v, step))


@export(method=True, inplace=True)
@renames("SincBackward0")
def sinc(input):
    """The normalized sinc, ``sin(pi x) / (pi x)``, 1 at 0 (where the gradient is 0); complex
    tensors too."""
    x = _float_or_complex(input)
    zero = x == 0
    safe = E.where(zero, 1.0, x) * math.pi
    return E.where(zero, 1.0, E.sin(safe) / safe)


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


@export(method=True, inplace=True)
@renames("Exp2Backward0")
def exp2(input):
    """``2 ** x``; integer and bool tensors give the default float dtype; complex tensors too."""
    x = _float_or_complex(input)
    return E.pow(2.0, x)


@export(method=True, inplace=True)
@renames("LogitBackward0")
def logit(input, eps: float | None = None):
    """``log(p / (1 - p))``; with ``eps`` the input is clamped to [eps, 1 - eps] first (and the
    gradient is 0 outside that range, as in PyTorch). Inside (0, 1) the gradient is PyTorch's;
    at 0 and 1 it is NaN (PyTorch's is inf), and outside [0, 1] it is finite where PyTorch's
    is NaN."""
    p = _float(input)
    if eps is not None:  # (a traced .item() eps: clamp takes it, ops/_item_scalars.py)
        eps = eps if is_traced(eps) else float(eps)
        p = E.clamp(p, eps, 1.0 - eps)
    return E.log(p / (1 - p))


@export(method=True, inplace=True)
def clamp_min(input, min):
    """``clamp(input, min=min)``."""
    return E.clamp(input, min=min)


@export(method=True, inplace=True)
def clamp_max(input, max):
    """``clamp(input, max=max)``."""
    return E.clamp(input, max=max)


# triu_ / tril_: the in-place spellings of the existing ops (looked up when called: the
# module defining them may be imported after this one)
def _triu(input, diagonal=0):
    return E.triu(input, diagonal)


def _tril(input, diagonal=0):
    return E.tril(input, diagonal)


INPLACE["triu_"] = _triu
INPLACE["tril_"] = _tril
