"""Elementwise math written as composites of ember's ops, PyTorch's names (split from
ops/extra_math.py): absolute, deg2rad, rad2deg, frac, heaviside, sinc, exp2, clamp_min,
clamp_max and the in-place triu_/tril_; and logit and sinc, ops (their gradients PyTorch's). The
composites differentiate, capture and fuse through the ops they are made of; integer and bool
inputs are promoted to the default float dtype first, as PyTorch does."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, KernelDTypeError
from . import _onnx
from . import api as E
from ._created_nan import positive_created_nan
from ._node_names import renames
from ._registry import INPLACE, PUBLIC, OpDef, apply, export, is_traced, register
from ._rules import Complex
from ._util import elementwise_cost, require_float, require_float_or_complex, same_type
from .promotion import to_tensor

_HALF = (dt.float16.np, dt.bfloat16.np)

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


# sinc: one op, so its gradient is PyTorch's sinc_backward, ``g * conj(s cos s - sin s) /
# conj(pi x^2)`` with s = pi x, and 0 where ``pi x^2`` is 0: the composite's autodiff,
# ``g (cos(s) / s - sin(s) / s^2) pi``, subtracts two values of order 1/s that overflow or lose
# every digit at tiny x (-inf at 1e-300 in float64, NaN at 1e-40 in float32, PyTorch's 0)


def _sinc_infer(x):
    require_float_or_complex("sinc", x)
    return same_type(x)


def _sinc_kernel(x):
    # PyTorch's kernel: 1 at 0, else sin(pi x) / (pi x), computed in float32 for 16-bit floats
    wide = x.astype(np.float32) if x.dtype in _HALF else x
    zero = wide == 0
    with np.errstate(all="ignore"):
        s = np.where(zero, wide.dtype.type(1), wide) * wide.dtype.type(math.pi)
        out = np.where(zero, wide.dtype.type(1), np.sin(s) / s)
    return out.astype(x.dtype, copy=False)


def _sinc_vjp(c, g):
    x = c.inputs[0]
    s = x * math.pi
    squared = x * x * math.pi
    out = g * E.conj(s * E.cos(s) - E.sin(s)) / E.conj(squared)
    return (E.where(squared == 0, E.zeros((), dtype=out.dtype), out),)


def _onnx_sinc(e):
    x = e.inputs[0]
    dtype = e.in_types[0].dtype
    zero, one = _onnx.scalar(e, 0, dtype), _onnx.scalar(e, 1, dtype)
    is_zero = e.node("Equal", [x, zero])
    s = e.node("Mul", [e.node("Where", [is_zero, one, x]), _onnx.scalar(e, math.pi, dtype)])
    return e.node("Where", [is_zero, one, e.node("Div", [e.node("Sin", [s]), s])])


_SINC = register(
    OpDef(
        name="sinc",
        kind="elementwise",
        infer=_sinc_infer,
        cached_infer=True,
        kernel=_sinc_kernel,
        vjp=_sinc_vjp,
        cost=elementwise_cost(4),
        save_inputs=(0,),
        onnx=_onnx_sinc,
        complex=Complex.GRADIENT,
        grad_fn="SincBackward0",
        doc="sinc(x): sin(pi x) / (pi x), 1 at 0; float and complex tensors",
    )
)


@export(method=True, inplace=True)
def sinc(input):
    """The normalized sinc, ``sin(pi x) / (pi x)``, 1 at 0; complex tensors too. The gradient
    is PyTorch's: 0 wherever ``pi x^2`` underflows to 0."""
    return apply(_SINC, _float_or_complex(input))


@export(method=True, inplace=True)
@renames("Exp2Backward0")
def exp2(input):
    """``2 ** x``; integer and bool tensors give the default float dtype; complex tensors too."""
    x = _float_or_complex(input)
    return E.pow(2.0, x)


# logit: one op, so its gradient is PyTorch's logit_backward: ``g / (x (1 - x))``, ``g * inf``
# at 0 and 1 and NaN outside [0, 1] without eps, 0 outside [eps, 1 - eps] with it (a
# composite of log and a division gave NaN at 0 and 1 and finite values outside [0, 1])


def _logit_infer(x, *, eps):
    require_float("logit", x)
    return same_type(x)


_POSITIVE_NAN_LOG = positive_created_nan(np.log)


def _logit_kernel(x, *, eps):
    # (16-bit floats: each step computed in float32 and rounded to the dtype, as PyTorch's
    # kernel does its scalar_t arithmetic)
    dtype = x.dtype
    half = dtype in _HALF
    with np.errstate(all="ignore"):
        if eps is not None:  # (np.clip keeps NaN, as PyTorch's comparisons do)
            x = np.clip(x, dtype.type(eps), dtype.type(1 - eps)).astype(dtype, copy=False)
        wide = x.astype(np.float32) if half else x
        rest = (1 - wide).astype(dtype).astype(wide.dtype) if half else 1 - wide
        ratio = (wide / rest).astype(dtype).astype(wide.dtype) if half else wide / rest
    # (a NaN the log creates from a negative ratio is PyTorch's +NaN, not NumPy's -NaN:
    # ops/_created_nan.py)
    return _POSITIVE_NAN_LOG(ratio).astype(dtype, copy=False)


def _logit_vjp(c, g):
    x, eps = c.inputs[0], c.attrs["eps"]
    lo, hi, fill = (0.0, 1.0, float("nan")) if eps is None else (eps, 1.0 - eps, 0.0)
    outside = E.logical_or(x < lo, x > hi)
    inner = g / (x * (1 - x))
    if eps is None:  # (PyTorch's kernel: g * inf at 0 and 1, -0.0 included)
        ends = E.logical_or(x == 0, x == 1)
        inner = E.where(ends, g * E.full((), float("inf"), dtype=g.dtype), inner)
    return (E.where(outside, E.full((), fill, dtype=g.dtype), inner),)


def _onnx_logit(e):
    x, eps = e.inputs[0], e.attrs["eps"]
    dtype = e.in_types[0].dtype
    if eps is not None:
        lo, hi = _onnx.scalar(e, eps, dtype), _onnx.scalar(e, 1 - eps, dtype)
        x = e.node("Min", [e.node("Max", [x, lo]), hi])
    one = _onnx.scalar(e, 1, dtype)
    return e.node("Log", [e.node("Div", [x, e.node("Sub", [one, x])])])


_LOGIT = register(
    OpDef(
        name="logit",
        kind="elementwise",
        infer=_logit_infer,
        kernel=_logit_kernel,
        vjp=_logit_vjp,
        cost=elementwise_cost(3),
        save_inputs=(0,),
        onnx=_onnx_logit,
        grad_fn="LogitBackward0",
        doc="logit(x; eps): log(x / (1 - x)), x clamped to [eps, 1 - eps] first where eps is "
        "not None; float tensors",
    )
)


@export(method=True, inplace=True)
@renames("LogitBackward0")
def logit(input, eps: float | None = None):
    """``log(p / (1 - p))``; with ``eps`` the input is clamped to [eps, 1 - eps] first. The
    gradient is PyTorch's: ``g / (p (1 - p))``, NaN outside [0, 1] (without eps), 0 outside
    [eps, 1 - eps] (with it)."""
    p = _float(input)
    if is_traced(eps):  # (a traced .item() eps: clamp takes it, ops/_item_scalars.py)
        return E.log(E.clamp(p, eps, 1.0 - eps) / (1 - E.clamp(p, eps, 1.0 - eps)))
    return apply(_LOGIT, p, eps=None if eps is None else float(eps))


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
