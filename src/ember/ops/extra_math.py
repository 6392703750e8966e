"""Issue 19's long tail of elementwise math, PyTorch's names: the primitives with SciPy
reference kernels, where no composite of ember's ops is accurate: lgamma, digamma, polygamma,
erfinv, erfc, i0 (and i1, log_ndtr and entr for ``ember.special``) and signbit; mvlgamma on
lgamma. The binary ones (hypot, logaddexp, logaddexp2, xlogy, xlog1py) are in
ops/math_binary.py, the composites (deg2rad, frac, sinc, exp2, logit, ...) in
ops/math_composites.py.

The float functions promote integer and bool tensors to the default float dtype first, as
PyTorch does; half-precision inputs are computed in float32 and rounded once (SciPy has no
half-precision special functions).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError
from ..types import TensorType
from . import _onnx
from . import api as E
from ._registry import OpDef, apply, export, register
from ._util import elementwise_cost, require_float, same_type
from .elementwise import _unary
from .promotion import to_tensor

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


def _epsilon(x) -> float:
    return float(ml_dtypes.finfo(x.dtype.np).eps)


def not_tiny(x):
    """``|x| > eps`` of x's dtype (false at NaN): where PyTorch's i1/i1e gradients divide."""
    return E.abs(x) > _epsilon(x)


def tiny_safe(x):
    """x where `not_tiny`, else the dtype's epsilon (a divisor the other branch discards)."""
    return E.where(not_tiny(x), x, E.full((), _epsilon(x), dtype=x.dtype))
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
    # d/dx I1(x) = I0(x) - I1(x) / x, whose limit at 0 is 1/2 (PyTorch's i1_backward: 1/2
    # wherever |x| is not above the dtype's epsilon, NaN included)
    lambda c, g: (
        g
        * E.where(
            not_tiny(c.inputs[0]),
            E.i0(c.inputs[0]) - c.outputs[0] / tiny_safe(c.inputs[0]),
            0.5,
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
# entr: PyTorch's derivatives.yaml formula ``grad * -(1 + log(x))``, unmasked: inf at 0, NaN
# for x < 0 and at NaN, -inf at inf (a composite of selects gave 0, 0, NaN and 1 there)
def _onnx_entr(e, x):
    # -x log x for x > 0, 0 at 0, -inf below, NaN kept (the last Where's fall-through)
    dtype = e.in_types[0].dtype
    zero = _onnx.scalar(e, 0, dtype)
    value = e.node("Neg", [e.node("Mul", [x, e.node("Log", [x])])])
    below = e.node("Where", [e.node("Less", [x, zero]), _onnx.scalar(e, -np.inf, dtype), x])
    rest = e.node("Where", [e.node("Equal", [x, zero]), zero, below])
    return e.node("Where", [e.node("Greater", [x, zero]), value, rest])


ENTR = _unary(
    "entr",
    _scipy("entr"),
    lambda c, g: (g * -(E.log(c.inputs[0]) + 1.0),),
    method=False,
    toplevel=False,  # ember.special.entr only, as in PyTorch
    grad_fn="SpecialEntrBackward0",
    onnx=_onnx.composite(_onnx_entr),
)


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
