"""``ember.special``: PyTorch's torch.special namespace over ember's ops (so every function
differentiates and captures as they do): erf, erfc, erfcx, erfinv, expit, logit, gammaln,
gammainc, gammaincc, digamma, psi, polygamma, multigammaln, zeta, xlogy, xlog1py, logsumexp,
log_softmax, softmax, entr, sinc, i0, i0e, i1, i1e, ndtr, ndtri, log_ndtr, log1p, expm1, exp2,
round, and the Bessel functions and orthogonal polynomials of ops/special_functions.py (which,
as PyTorch's, carry no gradient).
"""

from __future__ import annotations

import math

from . import dtypes as dt
from .ops import api as E
from .ops import extra_math as _m
from .ops import math_binary as _binary_math
from .ops import special_functions as _sf
from .ops._registry import apply
from .ops._torch_keywords import with_out as _with_out
from .ops.promotion import to_tensor

__all__ = [
    "airy_ai",
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammainc",
    "gammaincc",
    "gammaln",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "multigammaln",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "round",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "sinc",
    "softmax",
    "spherical_bessel_j0",
    "xlog1py",
    "xlogy",
    "zeta",
]


def _float(x):
    x = to_tensor(x)
    return x if x.dtype.is_floating_point else E.cast(x, dt.get_default_dtype())


def erf(input):
    """The error function."""
    return E.erf(input)


def erfc(input):
    """The complementary error function, 1 - erf(x), accurate where erf(x) is near 1."""
    return E.erfc(input)


def erfinv(input):
    """The inverse error function."""
    return E.erfinv(input)


def expit(input):
    """The logistic sigmoid."""
    return E.sigmoid(_float(input))


def logit(input, eps: float | None = None):
    """The inverse of expit (see ember.logit)."""
    return E.logit(input, eps)


def gammaln(input):
    """log|Gamma(x)| (ember.lgamma)."""
    return E.lgamma(input)


def digamma(input):
    """The digamma function (ember.digamma)."""
    return E.digamma(input)


psi = digamma


def polygamma(n: int, input):
    """The n-th derivative of digamma."""
    return E.polygamma(n, input)


def multigammaln(input, p: int):
    """The multivariate log-gamma function of dimension ``p``:
    ``p (p - 1) / 4 log(pi) + sum_j lgamma(x - j / 2)`` for j in 0..p-1."""
    return E.mvlgamma(_float(input), p)


def xlogy(input, other):
    """``x * log(y)``, 0 where x is 0 (see ember.xlogy)."""
    return E.xlogy(input, other)


def xlog1py(input, other):
    """``x * log1p(y)``, 0 where x is 0 (unless y is NaN)."""
    return _binary_math.xlog1py(input, other)


def logsumexp(input, dim, keepdim: bool = False):
    """log(sum(exp(x))) over ``dim`` without overflow."""
    return E.logsumexp(input, dim, keepdim)


def softmax(input, dim: int, *, dtype=None):
    """Softmax along ``dim`` (``dtype`` casts the input first)."""
    return E.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim: int, *, dtype=None):
    """Log-softmax along ``dim`` (``dtype`` casts the input first)."""
    return E.log_softmax(input, dim, dtype=dtype)


def entr(input):
    """The elementwise entropy ``-x log x``: 0 at 0, -inf for x < 0."""
    return apply(_m.ENTR, _float(input))


def sinc(input):
    """The normalized sinc (see ember.sinc)."""
    return E.sinc(input)


def i0(input):
    """The modified Bessel function of the first kind, order 0."""
    return E.i0(input)


def i1(input):
    """The modified Bessel function of the first kind, order 1."""
    return apply(_m.I1, _float(input))


def ndtr(input):
    """The standard normal CDF, ``erfc(-x / sqrt 2) / 2``."""
    return E.erfc(_float(input) * -math.sqrt(0.5)) * 0.5


def log_ndtr(input):
    """log of the standard normal CDF, accurate far into the lower tail."""
    return apply(_m.LOG_NDTR, _float(input))


def log1p(input):
    """log(1 + x)."""
    return E.log1p(input)


def expm1(input):
    """exp(x) - 1."""
    return E.expm1(input)


def exp2(input):
    """2 ** x."""
    return E.exp2(input)


def round(input, *, decimals: int = 0):  # noqa: A001
    """Round half to even (to ``decimals`` places)."""
    return E.round(input, decimals)


# scaled Bessel and error functions, the normal quantile (with PyTorch's gradients)
i0e = _sf.special_function("i0e")
i1e = _sf.special_function("i1e")
ndtri = _sf.special_function("ndtri")
erfcx = _sf.special_function("erfcx")
# Bessel functions (no gradient, as PyTorch's)
airy_ai = _sf.special_function("airy_ai")
bessel_j0 = _sf.special_function("bessel_j0")
bessel_j1 = _sf.special_function("bessel_j1")
bessel_y0 = _sf.special_function("bessel_y0")
bessel_y1 = _sf.special_function("bessel_y1")
modified_bessel_i0 = _sf.special_function("modified_bessel_i0")
modified_bessel_i1 = _sf.special_function("modified_bessel_i1")
modified_bessel_k0 = _sf.special_function("modified_bessel_k0")
modified_bessel_k1 = _sf.special_function("modified_bessel_k1")
scaled_modified_bessel_k0 = _sf.special_function("scaled_modified_bessel_k0")
scaled_modified_bessel_k1 = _sf.special_function("scaled_modified_bessel_k1")
spherical_bessel_j0 = _sf.special_function("spherical_bessel_j0")
# orthogonal polynomials p_n(input), n a tensor or a number (no gradient, as PyTorch's)
chebyshev_polynomial_t = _sf.special_function("chebyshev_polynomial_t")
chebyshev_polynomial_u = _sf.special_function("chebyshev_polynomial_u")
chebyshev_polynomial_v = _sf.special_function("chebyshev_polynomial_v")
chebyshev_polynomial_w = _sf.special_function("chebyshev_polynomial_w")
shifted_chebyshev_polynomial_t = _sf.special_function("shifted_chebyshev_polynomial_t")
shifted_chebyshev_polynomial_u = _sf.special_function("shifted_chebyshev_polynomial_u")
shifted_chebyshev_polynomial_v = _sf.special_function("shifted_chebyshev_polynomial_v")
shifted_chebyshev_polynomial_w = _sf.special_function("shifted_chebyshev_polynomial_w")
hermite_polynomial_h = _sf.special_function("hermite_polynomial_h")
hermite_polynomial_he = _sf.special_function("hermite_polynomial_he")
laguerre_polynomial_l = _sf.special_function("laguerre_polynomial_l")
legendre_polynomial_p = _sf.special_function("legendre_polynomial_p")


def gammainc(input, other):
    """The regularized lower incomplete gamma function P(input, other) (ember.igamma)."""
    return _sf.igamma(input, other)


def gammaincc(input, other):
    """The regularized upper incomplete gamma function Q(input, other) (ember.igammac)."""
    return _sf.igammac(input, other)


def zeta(input, other):
    """The Hurwitz zeta function zeta(input, other); a gradient in ``other`` only, as
    PyTorch's."""
    from .ops.promotion import promote

    return apply(_sf.ZETA, *promote(input, other, floating=True))


# PyTorch's ``out=`` on each function without its own (ops/_out.py)
globals().update(_with_out({_name: globals()[_name] for _name in __all__}))
