"""More of PyTorch's everyday spellings: the aliases (subtract, multiply, divide, true_divide,
negative, positive, greater, less, not_equal, ..., fix, swapdims, arccosh ...), div's
``rounding_mode``, the inverse hyperbolic functions (primitives, as ops/pointwise.py's), and
small composites of ember's ops: isneginf, isposinf, rsub, float_power,
ldexp, aminmax, inner, vdot, diagflat, unflatten, isin, bincount, narrow_copy, cov, corrcoef
and Tensor.trace.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import ArgumentError, DTypeError, ShapeError
from . import _onnx
from . import api as E
from ._autocast import Autocast, autocasts
from ._limited import refuse_limited
from ._node_names import rename_node, renames
from ._registry import PUBLIC, building_graph, export
from ._rules import Complex
from ._util import normalize_axis, refuse_complex, size_from_values
from .checks import check
from .elementwise import _unary
from .promotion import promote, to_tensor

aminmax_t = return_types.aminmax


def _alias(target: str, name: str, method=True, inplace=True):
    # (looked up when called: the target's module may be imported after this one)
    def alias(*args, **kwargs):
        return PUBLIC[target](*args, **kwargs)

    alias.__name__ = alias.__qualname__ = name
    alias.__doc__ = f"PyTorch's alias of ``{target}``."
    export(alias, name=name, method=method, inplace=inplace)
    return alias


# ----------------------------------------------------------------------- div rounding_mode

_DIV = PUBLIC["div"]


def div(input, other, *, rounding_mode: str | None = None):
    """``input / other`` (true division, a float result). ``rounding_mode="trunc"`` rounds the
    quotient towards zero and ``"floor"`` down (floor_divide), keeping an integer dtype for
    integer operands, as in PyTorch; their gradient is 0."""
    if rounding_mode is None:
        return _DIV(input, other)
    if rounding_mode == "floor":
        return E.floor_divide(input, other)
    if rounding_mode != "trunc":
        raise ArgumentError(
            f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}"
        )
    x, y = promote(input, other)
    if x.dtype.is_floating_point:
        # the gradient is 0 (PyTorch's); trunc's zero gradient reaches the quotient, whose own
        # gradient would be 0 / 0 where y is 0, so that quotient divides by 1 there instead
        zero = E.eq(y, 0)
        safe = E.where(zero, x.detach() / y.detach(), x / E.where(zero, 1.0, y))
        return E.trunc(safe)
    # exact for integers: x - fmod(x, y) is a multiple of y
    return E.floor_divide(x - E.fmod(x, y), y)


# ember.div, x.div and ``/`` (which looks div up by name) take rounding_mode here; ``/=`` and
# x.div_ without it keep the op's direct in-place route (one ufunc into x's memory)
for _attr in ("ufunc", "ufunc_float_only"):
    if hasattr(_DIV, _attr):
        setattr(div, _attr, getattr(_DIV, _attr))
export(div, name="div", method=True, inplace=True)
export(div, name="divide", method=True, inplace=True)
export(div, name="true_divide", method=True, inplace=True)

_alias("sub", "subtract")
_alias("mul", "multiply")
_alias("neg", "negative")
_alias("trunc", "fix")
_alias("transpose", "swapdims", inplace=False)
_alias("gt", "greater")
_alias("ge", "greater_equal")
_alias("lt", "less")
_alias("le", "less_equal")
_alias("ne", "not_equal")


@export(method=True)
def positive(input):
    """``input`` itself (PyTorch's unary plus; refused for bool, as there)."""
    x = to_tensor(input)
    if x.dtype is dt.bool_:
        raise DTypeError("positive is not defined for bool tensors", op="positive")
    return x


# ------------------------------------------------------------------- inverse hyperbolics


def _quiet(ufunc):
    def kernel(x):
        with np.errstate(all="ignore"):
            return ufunc(x)

    kernel.__name__ = ufunc.__name__
    return kernel


_unary(
    "asinh",
    _quiet(np.arcsinh),
    lambda c, g: (g * E.conj(E.rsqrt(c.inputs[0] * c.inputs[0] + 1)),),
    method=("asinh", "arcsinh"),
    complex=Complex.GRADIENT,
    c="asinh{f}({0})",
    onnx=_onnx.node("Asinh"),
)
_unary(
    "acosh",
    _quiet(np.arccosh),
    # 1 / (sqrt(z - 1) sqrt(z + 1)): acosh's principal branch (rsqrt(z^2 - 1) leaves it for
    # complex z; for real z >= 1 the two agree)
    lambda c, g: (g * E.conj(E.rsqrt(c.inputs[0] - 1) * E.rsqrt(c.inputs[0] + 1)),),
    method=("acosh", "arccosh"),
    complex=Complex.GRADIENT,
    c="acosh{f}({0})",
    onnx=_onnx.node("Acosh"),
)
_unary(
    "atanh",
    _quiet(np.arctanh),
    lambda c, g: (g / E.conj(1 - c.inputs[0] * c.inputs[0]),),
    method=("atanh", "arctanh"),
    complex=Complex.GRADIENT,
    c="atanh{f}({0})",
    onnx=_onnx.node("Atanh"),
)
for _name in ("asinh", "acosh", "atanh"):
    export(PUBLIC[_name], name="arc" + _name[1:])


# ------------------------------------------------------------------------------ composites


@export(method=True)
def isposinf(input):
    """Where the input is +inf (bool). Complex tensors are refused, as PyTorch does."""
    x = to_tensor(input)
    refuse_complex("isposinf", x, reason="isposinf does not support complex inputs (as PyTorch)")
    return x == float("inf") if x.dtype.is_floating_point else E.zeros(x.shape, dtype=dt.bool_)


@export(method=True)
def isneginf(input):
    """Where the input is -inf (bool). Complex tensors are refused, as PyTorch does."""
    x = to_tensor(input)
    refuse_complex("isneginf", x, reason="isneginf does not support complex inputs (as PyTorch)")
    return x == float("-inf") if x.dtype.is_floating_point else E.zeros(x.shape, dtype=dt.bool_)


@export
def rsub(input, other, *, alpha=1):
    """``other - alpha * input``."""
    return rename_node(E.sub(other, input, alpha=alpha), "RsubBackward0", input, other)


@export(method=True, inplace=True)
def float_power(input, exponent):
    """``input ** exponent`` in float64 (PyTorch's: both operands become double first), or in
    complex128 where either is complex (a complex tensor or a Python complex exponent)."""
    x = to_tensor(input)
    scalar = isinstance(exponent, (int, float, complex))
    if (
        x.dtype.is_complex
        or isinstance(exponent, complex)
        or (not scalar and to_tensor(exponent).dtype.is_complex)
    ):
        dtype, kind = dt.complex128, complex
    else:
        dtype, kind = dt.float64, float
    x = E.cast(x, dtype)
    e = kind(exponent) if scalar else E.cast(to_tensor(exponent), dtype)
    return E.pow(x, e)


@export(method=True, inplace=True)
def ldexp(input, other):
    """``input * 2 ** other``, a float result."""
    x, e = promote(input, other, floating=True)
    return x * E.pow(2.0, e)


@export(method=True)
def aminmax(input, *, dim=None, keepdim: bool = False):
    """``(min, max)`` as a named tuple, over all elements or ``dim``."""
    x = to_tensor(input)
    if dim is None:
        return aminmax_t(E.amin(x), E.amax(x))
    return aminmax_t(E.amin(x, dim, keepdim), E.amax(x, dim, keepdim))


@export(method=True)
def inner(input, other):
    """The inner product over the last dims (0-d operands multiply)."""
    a, b = to_tensor(input), to_tensor(other)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return E.tensordot(a, b, ([-1 + a.ndim], [-1 + b.ndim]))


@export(method=True)
def vdot(input, other):
    """The dot product of two 1-d tensors (of one dtype, as in PyTorch), the first
    conjugated: ``sum(conj(input) * other)``."""
    a, b = to_tensor(input), to_tensor(other)
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(
            f"vdot takes 1-d tensors, got {tuple(a.shape)} and {tuple(b.shape)}", op="vdot"
        )
    return E.dot(E.conj(a), b)


@export(method=True)
def diagflat(input, offset: int = 0):
    """A matrix with the flattened input on its ``offset`` diagonal."""
    return E.diag_embed(E.reshape(to_tensor(input), (-1,)), offset)


@export(method=True)
def unflatten(input, dim: int, sizes):
    """Split dim ``dim`` into ``sizes`` (one may be -1)."""
    x = to_tensor(input)
    axis = normalize_axis("unflatten", dim, x.ndim)
    return E.reshape(x, (*x.shape[:axis], *tuple(sizes), *x.shape[axis + 1 :]))


@export(method=True)
def narrow_copy(input, dim: int, start: int, length: int):
    """A copy of ``narrow(input, dim, start, length)``."""
    return E.clone(E.narrow(input, dim, start, length))


@export
def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False):
    """Whether each element of ``elements`` is among ``test_elements`` (either may be a
    scalar), a bool tensor of elements' shape; ``invert`` negates."""
    x = to_tensor(elements)
    t = E.reshape(to_tensor(test_elements), (-1,))
    refuse_limited("isin", x, t)
    for v in (x, t):
        refuse_complex(
            "isin", v, reason=f"Unsupported input type encountered for isin(): {v.dtype}"
        )
    x_, t_ = promote(x, t)
    found = E.any(E.unsqueeze(x_, -1) == t_, -1) if t.shape[0] else E.zeros(x.shape, dtype=dt.bool_)
    return E.logical_not(found) if invert else found


@export(method=True)
def bincount(input, weights=None, minlength: int = 0):
    """How often each value of a 1-d non-negative integer tensor occurs (summing ``weights``
    instead of 1 when given). The length, max(input) + 1, depends on the values, so under
    capture it needs them (ember.function refuses it, as it does .item()); with ``minlength``
    a captured graph's length is minlength, each run checking that the values lie below it
    (`check`: the graph raises otherwise), the counts per class of ``minlength=num_classes``."""
    x = to_tensor(input)
    if x.ndim != 1 or x.dtype.is_floating_point or x.dtype is dt.bool_:
        raise DTypeError(
            f"bincount takes a 1-d integer tensor, got {x.dtype} of shape {tuple(x.shape)}",
            op="bincount",
        )
    if minlength > 0 and building_graph():
        inside = E.logical_and(x >= 0, x < int(minlength))
        message = (
            f"bincount: a captured bincount with minlength={minlength} takes values in "
            f"[0, {minlength}); a larger value would lengthen the result"
        )
        return _counts(check(x, inside, message), weights, int(minlength))
    top = (
        size_from_values(
            E.amax(x), "bincount", "the largest value plus one", "use one_hot(x, n).sum(0)"
        )
        if x.shape[0]
        else -1
    )
    size = max(int(minlength), top + 1)
    if x.shape[0] and int(E.amin(x).item()) < 0:
        raise ShapeError("bincount takes non-negative values", op="bincount")
    return _counts(x, weights, size)


def _counts(x, weights, size: int):
    index = E.cast(x, dt.int64)
    if weights is None:
        return E.scatter_add(E.zeros((size,), dtype=dt.int64), 0, index, E.ones_like(index))
    w = to_tensor(weights)
    out_dtype = w.dtype if w.dtype.is_floating_point else dt.float64
    w = E.cast(w, out_dtype)
    return E.scatter_add(E.zeros((size,), dtype=out_dtype), 0, index, w)


@autocasts(Autocast.FP32)
@renames("TraceBackward0")
def _trace(self):
    """The sum of the main diagonal of a matrix (``torch.trace``, Tensor.trace; ``ember.trace``
    called on a function is graph capture, capture/trace.py, which sends tensors here)."""
    x = to_tensor(self)
    if x.ndim != 2:
        raise ShapeError(f"trace takes a matrix, got shape {tuple(x.shape)}", op="trace")
    if x.dtype is dt.bool_:
        raise DTypeError("trace is not defined for bool tensors (as in PyTorch)", op="trace")
    refuse_limited("trace", x)
    d = E.sum(E.diagonal(x))
    return d


export(_trace, name="trace", method=True)


@export(method=True)
def cov(input, *, correction: int = 1, fweights=None, aweights=None):
    """The covariance matrix of the variables in the rows of ``input`` (observations in the
    columns), with frequency and analytic weights as NumPy's / PyTorch's."""
    x = to_tensor(input)
    if x.ndim > 2:
        raise ShapeError(f"cov takes at most 2 dims, got {tuple(x.shape)}", op="cov")
    if x.ndim < 2:
        x = E.reshape(x, (1, -1))
    if x.dtype is dt.bool_:
        raise DTypeError("cov is not defined for bool tensors (as in PyTorch)", op="cov")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = E.cast(x, dt.get_default_dtype())
    n = x.shape[1]
    w = None
    weight_dtype = dt.to_real(x.dtype)  # (the weights of complex variables are real)
    if fweights is not None:
        w = E.cast(to_tensor(fweights), weight_dtype)
    if aweights is not None:
        a = E.cast(to_tensor(aweights), weight_dtype)
        w = a if w is None else w * a
    if w is None:
        mean = E.mean(x, 1, True)
        total = float(n)
        norm = total - correction
    else:
        total = E.sum(w)
        mean = E.sum(x * w, 1, True) / total
        if correction == 0:
            norm = total
        elif aweights is None:
            norm = total - correction
        else:
            norm = total - correction * E.sum(w * a) / total
    centred = x - mean
    weighted = centred if w is None else centred * w
    # (complex variables: the conjugate of the second factor, sum_k w_k x_ik conj(x_jk))
    out = E.matmul(weighted, E.transpose(E.conj(centred), 0, 1)) / norm
    # (one variable's covariance is 0-d whatever input's rank, as PyTorch's squeeze gives it)
    return E.squeeze(out) if out.shape == (1, 1) else out


@export(method=True)
def corrcoef(input):
    """Pearson correlation coefficients of the rows' variables, clipped to [-1, 1] (complex
    ones: the real and imaginary parts each, as PyTorch's)."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = E.sqrt(E.real(E.diagonal(c)))  # (a complex variance is real)
    out = c / E.unsqueeze(d, 1) / E.unsqueeze(d, 0)
    if out.dtype.is_complex:
        return E.complex(E.clamp(E.real(out), -1.0, 1.0), E.clamp(E.imag(out), -1.0, 1.0))
    return E.clamp(out, -1.0, 1.0)
