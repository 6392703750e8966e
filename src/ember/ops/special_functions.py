"""torch.special's Bessel functions, scaled Bessel and error functions, the incomplete gamma and
Hurwitz zeta functions and the classical orthogonal polynomials, as elementwise primitives
(``ember.special`` exposes them under PyTorch's names; ``igamma``/``igammac`` are top-level
and Tensor methods too, as in PyTorch).

Kernels: SciPy's (scipy.special) for the functions, as ops/extra_math.py's; the polynomials by
PyTorch's own algorithms (ATen's Math.h): the three-term recurrence from degree 0 and 1, with
its closed values at the interval's ends, the degree ``n`` taken as an integer (truncated) and
0 for a negative one.

Gradients where PyTorch has them: ``i0e``, ``i1e``, ``ndtri``, ``erfcx``; ``igamma``/``igammac``
and ``zeta`` in their second argument only (PyTorch defines none in the first, and neither does
ember: that operand gets no gradient). PyTorch's Bessel functions and polynomials carry no
gradient at all (their results do not require grad): ``ember.special`` detaches their inputs,
so the results are the same constants here.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, UnsupportedError
from ..types import TensorType
from . import api as E
from ._registry import REGISTRY, OpDef, apply, export, register
from ._util import broadcast_shapes, elementwise_cost
from .elementwise import _unary
from .extra_math import _scipy, _special, not_tiny, tiny_safe
from .promotion import promote, to_tensor

__all__ = ["POLYNOMIALS", "UNDIFFERENTIATED"]

_SQRT_2PI = math.sqrt(2 * math.pi)
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _scipy_of(fn):
    """A kernel of a function of scipy.special built when it first runs (SciPy is imported
    lazily, as ops/extra_math.py's)."""

    def kernel(x):
        return _scipy(fn(_special()))(x)

    return kernel


# ------------------------------------------------------------------- with PyTorch's gradients

I0E = _unary(
    "special_i0e",
    _scipy("i0e"),
    # d/dx exp(-|x|) I0(x) = I1e(x) - sign(x) I0e(x)
    lambda c, g: (g * (apply(I1E, c.inputs[0]) - E.sign(c.inputs[0]) * c.outputs[0]),),
    method=False,
    toplevel=False,
)
I0E.save_outputs = (0,)
I1E = _unary(
    "special_i1e",
    _scipy("i1e"),
    # d/dx exp(-|x|) I1(x) = I0e(x) - I1e(x) (sign(x) + 1/x), 1/2 at 0
    # (PyTorch's i1e_backward: 1/2 wherever |x| is not above the dtype's epsilon, NaN too)
    lambda c, g: (
        g
        * E.where(
            not_tiny(c.inputs[0]),
            apply(I0E, c.inputs[0])
            - c.outputs[0] * (E.sign(c.inputs[0]) + 1 / tiny_safe(c.inputs[0])),
            0.5,
        ),
    ),
    method=False,
    toplevel=False,
)
I1E.save_outputs = (0,)
NDTRI = _unary(
    "special_ndtri",
    _scipy("ndtri"),
    # the inverse of the normal CDF: 1 / phi(ndtri(p)) = sqrt(2 pi) exp(ndtri(p)^2 / 2)
    lambda c, g: (g * E.exp(c.outputs[0] * c.outputs[0] * 0.5) * _SQRT_2PI,),
    save="output",
    method=False,
    toplevel=False,
)
ERFCX = _unary(
    "special_erfcx",
    _scipy("erfcx"),
    # d/dx exp(x^2) erfc(x) = 2 x erfcx(x) - 2 / sqrt(pi)
    lambda c, g: (g * (2 * c.inputs[0] * c.outputs[0] - _TWO_OVER_SQRT_PI),),
    method=False,
    toplevel=False,
)
ERFCX.save_outputs = (0,)

# ------------------------------------------------------------------------- without gradients

_BESSEL = {
    "special_airy_ai": lambda s: lambda x: s.airy(x)[0],
    "special_bessel_j0": lambda s: s.j0,
    "special_bessel_j1": lambda s: s.j1,
    "special_bessel_y0": lambda s: s.y0,
    "special_bessel_y1": lambda s: s.y1,
    "special_modified_bessel_i0": lambda s: s.i0,
    "special_modified_bessel_i1": lambda s: s.i1,
    "special_modified_bessel_k0": lambda s: s.k0,
    "special_modified_bessel_k1": lambda s: s.k1,
    "special_scaled_modified_bessel_k0": lambda s: s.k0e,
    "special_scaled_modified_bessel_k1": lambda s: s.k1e,
    "special_spherical_bessel_j0": lambda s: lambda x: s.spherical_jn(0, x),
}
for _name, _fn in _BESSEL.items():
    _unary(_name, _scipy_of(_fn), None, method=False, toplevel=False, save="none")


# ------------------------------------------------------------------------------ polynomials


def _degrees(n: np.ndarray) -> np.ndarray:
    """The degree as PyTorch takes it: truncated to an integer."""
    with np.errstate(invalid="ignore"):
        return np.trunc(n).astype(np.int64) if n.dtype.kind == "f" else n.astype(np.int64)


def _recurrence(first, second, step, x, n):
    """p_n(x) per element from p_0 = ``first``, p_1 = ``second`` and p_{k+1} = step(k, p_k,
    p_{k-1}) for k >= 1 (k the degree reached), 0 for a negative degree."""
    x, n = np.broadcast_arrays(x, n)
    prev = np.broadcast_to(np.asarray(first(x), np.float64), x.shape).astype(np.float64)
    cur = np.broadcast_to(np.asarray(second(x), np.float64), x.shape).astype(np.float64)
    out = np.where(n == 0, prev, cur)
    top = int(n.max()) if n.size else 0
    with np.errstate(all="ignore"):
        for k in range(1, top):
            nxt = step(k, cur, prev, x)
            prev, cur = cur, nxt
            out = np.where(n == k + 1, cur, out)
    return np.where(n < 0, 0.0, out)


def _chebyshev(shift: float, kind: str):
    """T, U, V or W of ``2x - 1`` (shifted) or of x: p_{k+1} = 2y p_k - p_{k-1}, with PyTorch's
    closed values at y = +-1."""
    one = {"t": lambda y: y, "u": lambda y: 2 * y, "v": lambda y: 2 * y - 1}
    one["w"] = lambda y: 2 * y + 1

    def evaluate(x, n):
        y = x * 2 - 1 if shift else x
        value = _recurrence(lambda y: 1.0, one[kind], lambda k, q, p, y: 2 * y * q - p, y, n)
        # the ends, as PyTorch writes them (exact where the recurrence rounds)
        if kind == "t":
            at_plus, at_minus = 1.0, np.where(n % 2 == 0, 1.0, -1.0)
        elif kind == "u":
            at_plus, at_minus = n + 1.0, np.where(n % 2 == 0, n + 1.0, -(n + 1.0))
        elif kind == "v":
            at_plus, at_minus = 1.0, np.where(n % 2 == 0, 2.0 * n + 1, -(2.0 * n + 1))
        else:
            at_plus, at_minus = 2.0 * n + 1, np.where(n % 2 == 0, 1.0, -1.0)
        value = np.where((y == 1) & (n >= 0), at_plus, value)
        return np.where((y == -1) & (n >= 0), at_minus, value)

    return evaluate


def _hermite_h(x, n):
    return _recurrence(
        lambda x: 1.0, lambda x: 2 * x, lambda k, q, p, x: 2 * x * q - 2 * k * p, x, n
    )


def _hermite_he(x, n):
    return _recurrence(lambda x: 1.0, lambda x: x, lambda k, q, p, x: x * q - k * p, x, n)


def _laguerre(x, n):
    value = _recurrence(
        lambda x: 1.0,
        lambda x: 1 - x,
        lambda k, q, p, x: ((2 * k + 1 - x) * q - k * p) / (k + 1),
        x,
        n,
    )
    return np.where((x == 0) & (n >= 0), 1.0, value)


def _legendre(x, n):
    value = _recurrence(
        lambda x: 1.0, lambda x: x, lambda k, q, p, x: ((2 * k + 1) * x * q - k * p) / (k + 1), x, n
    )
    value = np.where((x == 1) & (n >= 0), 1.0, value)
    return np.where((x == -1) & (n >= 0), np.where(n % 2 == 0, 1.0, -1.0), value)


POLYNOMIALS = {
    "chebyshev_polynomial_t": _chebyshev(0, "t"),
    "chebyshev_polynomial_u": _chebyshev(0, "u"),
    "chebyshev_polynomial_v": _chebyshev(0, "v"),
    "chebyshev_polynomial_w": _chebyshev(0, "w"),
    "shifted_chebyshev_polynomial_t": _chebyshev(1, "t"),
    "shifted_chebyshev_polynomial_u": _chebyshev(1, "u"),
    "shifted_chebyshev_polynomial_v": _chebyshev(1, "v"),
    "shifted_chebyshev_polynomial_w": _chebyshev(1, "w"),
    "hermite_polynomial_h": _hermite_h,
    "hermite_polynomial_he": _hermite_he,
    "laguerre_polynomial_l": _laguerre,
    "legendre_polynomial_p": _legendre,
}


def _binary_infer(name):
    def infer(x, y):
        if x.dtype != y.dtype or not x.dtype.is_floating_point:
            raise DTypeError(
                f"operands must share a floating dtype, got {x.dtype} and {y.dtype}", op=name
            )
        return TensorType(broadcast_shapes(name, x.shape, y.shape), x.dtype)

    return infer


def _polynomial_kernel(evaluate):
    def kernel(x, n):
        dtype = x.dtype
        wide = x.astype(np.float64)
        return evaluate(wide, _degrees(n)).astype(dtype)

    return kernel


for _name, _evaluate in POLYNOMIALS.items():
    register(
        OpDef(
            name=f"special_{_name}",
            kind="elementwise",
            infer=_binary_infer(_name),
            kernel=_polynomial_kernel(_evaluate),
            cost=elementwise_cost(8),
            doc=f"special_{_name}(x, n): PyTorch's {_name}, by its recurrence (no gradient)",
        )
    )

# ------------------------------------------------------------ incomplete gamma, Hurwitz zeta


def _scipy2(name: str):
    def kernel(a, x):
        f = getattr(_special(), name)
        with np.errstate(all="ignore"):
            if a.dtype in (dt.float16.np, dt.bfloat16.np):
                wide = f(a.astype(np.float32), x.astype(np.float32))
                return _TORCH_EDGES[name](a, x, wide).astype(a.dtype)
            return np.asarray(_TORCH_EDGES[name](a, x, f(a, x))).astype(a.dtype, copy=False)

    return kernel


def _igamma_edges(lower: bool):
    """PyTorch's calc_igamma / calc_igammac special cases, in its order (ATen's Math.h): its
    comparisons with a NaN operand are false, so P(nan, 0) is 0 and P(inf, nan) 0 there, where
    SciPy gives NaN."""

    def edges(a, x, out):
        low, high = (0.0, 1.0) if lower else (1.0, 0.0)
        nan = np.nan
        rules = [
            ((x < 0) | (a < 0), nan),
            ((a == 0) & (x > 0), high),
            (a == 0, nan),
            (x == 0, low),
            (np.isinf(a) & np.isinf(x), nan),
            (np.isinf(a), low),
            (np.isinf(x), high),
        ]
        result = np.asarray(out).copy()
        decided = np.zeros(result.shape, dtype=bool)
        for where, value in rules:
            now = np.broadcast_to(where, result.shape) & ~decided
            result[now] = value
            decided |= now
        return result

    return edges


def _zeta_edges(x, q, out):
    # (PyTorch's series gives NaN at q = +inf, where the function's limit, SciPy's, is 0)
    return np.where(np.isposinf(q) & (x > 1), np.nan, out)


_TORCH_EDGES = {
    "gammainc": _igamma_edges(True),
    "gammaincc": _igamma_edges(False),
    "zeta": _zeta_edges,
}


def _gamma_density(a, x):
    """d/dx P(a, x) = x^(a-1) exp(-x) / Gamma(a)."""
    return E.exp((a - 1) * E.log(x) - x - E.lgamma(a))


def _second(name: str, c, g, operand):
    """The gradient of the second operand only, summed over the axes it was broadcast along.
    PyTorch defines none in the first, and raises where one is wanted: so does ember (a silent
    None would leave a trained first operand unchanged)."""
    if c.needs_input_grad[0]:
        raise UnsupportedError(
            f"the derivative for '{name}: input' (its first operand) is not implemented, as in "
            "PyTorch; detach that operand, or differentiate in the second only",
            op=name,
        )
    return (None, g if tuple(g.shape) == tuple(operand.shape) else E.sum_to(g, operand.shape))


def _second_only(name: str, scipy_name: str, second_grad, doc: str) -> OpDef:
    """A binary op of SciPy's ``scipy_name`` with a gradient in its second operand only:
    ``second_grad(first, second)`` is the derivative there."""
    return register(
        OpDef(
            name=name,
            kind="elementwise",
            infer=_binary_infer(name),
            kernel=_scipy2(scipy_name),
            vjp=lambda c, g: _second(name, c, g * second_grad(*c.inputs), c.inputs[1]),
            cost=elementwise_cost(40),
            doc=doc,
        )
    )


IGAMMA = _second_only(
    "igamma",
    "gammainc",
    _gamma_density,
    "igamma(a, x): the regularized lower incomplete gamma function P(a, x)",
)
IGAMMAC = _second_only(
    "igammac",
    "gammaincc",
    lambda a, x: -_gamma_density(a, x),
    "igammac(a, x): the regularized upper incomplete gamma function Q(a, x)",
)
# d/dq zeta(x, q) = -x zeta(x + 1, q)
ZETA = _second_only(
    "special_zeta",
    "zeta",
    lambda x, q: -x * apply(ZETA, x + 1, q),
    "special_zeta(x, q): the Hurwitz zeta function",
)


@export(method=True, inplace=True)
def igamma(input, other):
    """The regularized lower incomplete gamma function P(input, other) (torch.igamma); a
    gradient in ``other`` only, as PyTorch's."""
    return apply(IGAMMA, *promote(input, other, floating=True))


@export(method=True, inplace=True)
def igammac(input, other):
    """The regularized upper incomplete gamma function Q(input, other) (torch.igammac); a
    gradient in ``other`` only, as PyTorch's."""
    return apply(IGAMMAC, *promote(input, other, floating=True))


def special_function(name: str):
    """The public function of ``ember.special.<name>`` for the ops here."""
    if name in POLYNOMIALS:
        op = REGISTRY[f"special_{name}"]

        def polynomial(input, n):
            x, degree = promote(input, n, floating=True)
            return apply(op, x.detach(), degree.detach())

        polynomial.__name__ = polynomial.__qualname__ = name
        polynomial.__doc__ = f"PyTorch's torch.special.{name}(input, n) (no gradient)."
        return polynomial
    op = REGISTRY[f"special_{name}"]
    detach = f"special_{name}" in UNDIFFERENTIATED

    def fn(input):
        x = to_tensor(input)
        if not x.dtype.is_floating_point:
            x = E.cast(x, dt.get_default_dtype())
        return apply(op, x.detach() if detach else x)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"PyTorch's torch.special.{name}" + (" (no gradient)." if detach else ".")
    return fn


# the ops whose results carry no gradient, as PyTorch's
UNDIFFERENTIATED = frozenset(_BESSEL) | {f"special_{n}" for n in POLYNOMIALS}
