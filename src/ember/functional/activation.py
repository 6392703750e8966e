"""Activation functions as composites of elementwise primitives (PyTorch's ``F.gelu``,
``F.silu``, ``F.leaky_relu``, ``F.elu``, ``F.softplus``, ...).

Gradients at the non-smooth points follow PyTorch's conventions, which the choice of primitive
encodes: ``where(x > 0, ...)`` gives the left branch's slope at 0 (leaky_relu, elu, prelu), nested
``where`` on ``<=``/``>=`` gives a zero gradient exactly at the clipping points (hardtanh, relu6,
hardsigmoid), and logsigmoid's op (ops/log_sigmoid.py) keeps its gradient 0.5 at 0 and its
second derivative smooth there.

Branches that could overflow (``exp`` of a large positive input in elu/softplus) read a masked
input, so the unused branch never produces inf and its zero gradient never meets an inf (which
would make 0 * inf = NaN).

``inplace=True`` computes the result and writes it into the input through the tensor's in-place
protocol (as PyTorch's in-place activations, it is an error on a leaf that requires grad).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, ShapeError
from ..ops import _item_scalars as _items
from ..ops import api as E
from ..ops._autocast import Autocast, autocasts
from ..ops._node_names import rename_node, renames
from ..ops._registry import TensorBase, apply, building_graph, export
from ..ops._util import check_fill_value, fmt_shape
from ..ops.gelu import GELU, GELU_TANH
from ..ops.glu import GLU
from ..ops.hardtanh import HARDTANH
from ..ops.log_sigmoid import LOG_SIGMOID
from ..ops.piecewise import HARDSIGMOID, HARDSWISH, LEAKY_RELU
from ..ops.prelu import PRELU
from ..ops.promotion import to_tensor
from ..ops.shrink import HARDSHRINK, SOFTSHRINK, THRESHOLD
from ..ops.smooth_activations import ELU, SILU, SOFTPLUS
from . import _item_activations as IA
from ._common import dim_arg, float_input, refuse_complex_grad

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
# PyTorch's SELU constants (Klambauer et al., 2017)
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _maybe_inplace(name: str, x, inplace: bool, fn):
    """``fn(x)``, or with ``inplace`` the same value written into ``x`` (returned)."""
    if inplace:
        return x._inplace(name + "_", fn)
    return fn(x)


def _activation(name: str, x):
    return float_input(name, x)


def _wide(fn, x):
    """``fn(x)``, computed in float32 for a half-precision ``x`` (bfloat16, float16) and rounded
    once to its dtype, as PyTorch's CPU kernels compute 16-bit values: a composite's
    intermediates rounded to 16 bits each would add a rounding per op, and lose what a
    cancellation leaves (gelu's ``erf(x / sqrt 2) + 1`` at x = -2: two bits of bfloat16)."""
    if x.dtype is dt.bfloat16 or x.dtype is dt.float16:
        return fn(x.to(dt.float32)).to(x.dtype)
    return fn(x)


def _gelu_erf(x):
    return x * (E.erf(x * _SQRT1_2) + 1) * 0.5


def _gelu_tanh(x):
    inner = (x + x * x * x * 0.044715) * _SQRT_2_OVER_PI
    return x * (E.tanh(inner) + 1) * 0.5


@export(functional=True, toplevel=False)
def gelu(input, approximate: str = "none"):
    """Gaussian error linear unit: ``x * Phi(x)``; ``approximate='tanh'`` uses the tanh form."""
    x = _activation("gelu", input)
    if approximate not in ("none", "tanh"):
        raise ArgumentError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if not building_graph() or x.dtype is dt.bfloat16 or x.dtype is dt.float16:
        # eagerly one pass each way (ops/gelu.py); in 16 bits also in a graph: the op
        # computes in float32 and rounds once, as PyTorch's, and keeps only its 16-bit input for
        # the backward, where the composite widened to float32 would keep float32
        # intermediates (twice an autocast step's saved activations)
        return apply(GELU if approximate == "none" else GELU_TANH, x)
    # in a graph the composite's elementwise ops fuse with their neighbours' (a linear's
    # epilogue, forward and backward), which the primitive, having no C expression, cannot
    return (_gelu_erf if approximate == "none" else _gelu_tanh)(x)


@export(functional=True, toplevel=False)
def silu(input, inplace: bool = False):
    """``x * sigmoid(x)`` (swish): one op each way (ops/smooth_activations.py); complex
    tensors too, as the composite, without a gradient, as PyTorch's."""
    x = float_input("silu", input, complex_ok=True)
    if x.dtype.is_complex:
        refuse_complex_grad("silu", x, ": compute it as x * sigmoid(x)")
        return _maybe_inplace("silu", x, inplace, lambda t: t * E.sigmoid(t))
    return _maybe_inplace("silu", x, inplace, lambda t: apply(SILU, t))


@export(functional=True, toplevel=False)
def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    """``x`` where positive, else ``negative_slope * x`` (the gradient at 0 is the slope)."""
    x = _activation("leaky_relu", input)
    if _items.any_item(negative_slope):  # (a traced .item(): functional/_item_activations.py)
        return _maybe_inplace("leaky_relu", x, inplace, lambda t: IA.leaky_relu(t, negative_slope))
    slope = float(negative_slope)
    return _maybe_inplace("leaky_relu", x, inplace, lambda t: apply(LEAKY_RELU, t, slope=slope))


def _elu_core(x, alpha: float, input_scale: float = 1.0, scale: float = 1.0):
    """``scale * x`` where positive, else ``expm1(x * input_scale) * alpha * scale``: one op
    each way (ops/smooth_activations.py); at 0 the gradient is the negative side's, ``alpha *
    scale * input_scale`` (PyTorch's convention)."""
    return apply(ELU, x, alpha=alpha, scale=scale, input_scale=input_scale)


@export(functional=True, toplevel=False)
def elu(input, alpha: float = 1.0, inplace: bool = False):
    """Exponential linear unit: ``x`` if positive, else ``alpha * (exp(x) - 1)``."""
    x = _activation("elu", input)
    if _items.any_item(alpha):
        alpha = IA.operand(alpha, x, "elu", "alpha")
        return _maybe_inplace("elu", x, inplace, lambda t: IA.elu(t, alpha))
    return _maybe_inplace("elu", x, inplace, lambda t: _elu_core(t, float(alpha)))


@export(functional=True)
def selu(input, inplace: bool = False):
    """Scaled ELU with PyTorch's constants: ``scale * elu(x, alpha)``."""
    x = _activation("selu", input)
    return _maybe_inplace(
        "selu", x, inplace, lambda t: _elu_core(t, _SELU_ALPHA, scale=_SELU_SCALE)
    )


@export(functional=True)
@renames(lambda input, alpha=1.0, inplace=False: None if inplace else "CeluBackward0")
def celu(input, alpha: float = 1.0, inplace: bool = False):
    """``x`` if positive, else ``alpha * (exp(x / alpha) - 1)``."""
    x = _activation("celu", input)
    if _items.any_item(alpha):  # (a zero alpha, which the item does not show, gives NaN)
        alpha = IA.operand(alpha, x, "celu", "alpha")
        return _maybe_inplace("celu", x, inplace, lambda t: IA.elu(t, alpha, 1.0 / alpha))
    alpha = float(alpha)
    if alpha == 0:
        raise ArgumentError("celu: alpha must not be 0")
    return _maybe_inplace("celu", x, inplace, lambda t: _elu_core(t, alpha, 1.0 / alpha))


@export(functional=True, toplevel=False)
def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``."""
    x = _activation("softplus", input)
    if _items.any_item(beta, threshold):
        return IA.softplus(x, beta, threshold)
    return apply(SOFTPLUS, x, beta=float(beta), threshold=float(threshold))


def _clamp_strict(x, lo: float, hi: float):
    """clamp whose gradient is zero at the bounds themselves (PyTorch's hardtanh backward): one
    op each way (ops/hardtanh.py), eagerly and in graphs, where it fuses with its neighbours."""
    return apply(HARDTANH, x, lo=lo, hi=hi)


@export(functional=True, toplevel=False)
def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    """Clamp into ``[min_val, max_val]`` (gradient 0 at and beyond the bounds)."""
    if (  # (every ReLU6 layer: a float tensor, float bounds in order that fit float16: the op)
        not inplace
        and type(min_val) is float
        and type(max_val) is float
        and -65504.0 <= min_val <= max_val <= 65504.0
        and isinstance(input, TensorBase)
        and input.dtype.is_floating_point
    ):
        return apply(HARDTANH, input, lo=min_val, hi=max_val)
    if isinstance(input, TensorBase) and input.dtype.is_integer and not inplace:
        # PyTorch's hardtanh keeps an integer tensor's dtype (bounds truncated to it), and
        # refuses an unsigned one with a bound negative once truncated (the default -1)
        lo, hi = int(min_val), int(max_val)
        if min_val > max_val:
            raise ArgumentError(
                f"min_val cannot be greater than max_val ({min_val} > {max_val})", op="hardtanh"
            )
        if input.dtype.np.kind == "u" and (lo < 0 or hi < 0):
            raise ArgumentError(
                f"cannot do hardtanh on an unsigned type with negative limits (min_val "
                f"{min_val}, max_val {max_val}, {input.dtype})",
                op="hardtanh",
            )
        return E.clamp(input, lo, hi)
    x = _activation("hardtanh", input)
    if _items.any_item(min_val, max_val):  # (bounds in the wrong order, unseen, give max_val)
        return _maybe_inplace("hardtanh", x, inplace, lambda t: IA.hardtanh(t, min_val, max_val))
    lo, hi = float(min_val), float(max_val)
    if lo > hi:
        raise ArgumentError(f"hardtanh: min_val ({lo}) must not exceed max_val ({hi})")
    for bound in (lo, hi):  # (1e5 for a float16 tensor: refused, as PyTorch)
        check_fill_value("hardtanh", bound, x.dtype)
    if lo != lo or hi != hi:  # (a NaN bound: NaN everywhere, PyTorch's clamp)
        return _maybe_inplace("hardtanh", x, inplace, lambda t: E.clamp(t, lo, hi))
    return _maybe_inplace("hardtanh", x, inplace, lambda t: _clamp_strict(t, lo, hi))


@export(functional=True, toplevel=False)
def relu6(input, inplace: bool = False):
    """``min(max(x, 0), 6)`` (hardtanh on [0, 6])."""
    return hardtanh(input, 0.0, 6.0, inplace)


@export(functional=True, toplevel=False)
def hardsigmoid(input, inplace: bool = False):
    """``relu6(x + 3) / 6``, a piecewise-linear sigmoid (one op each way: ops/piecewise.py).
    Its float64 gradient is 1/6 in float64 (PyTorch's multiplies by float32's 1/6, 3e-8
    relative off)."""
    x = _activation("hardsigmoid", input)
    return _maybe_inplace("hardsigmoid", x, inplace, lambda t: apply(HARDSIGMOID, t))


@export(functional=True, toplevel=False)
def hardswish(input, inplace: bool = False):
    """``x * relu6(x + 3) / 6``; at -3 and 3 the gradient is the outer pieces' (0 and 1), as in
    PyTorch. At -inf the result is 0, the value of every x <= -3 (PyTorch's is
    -inf * 0 = NaN)."""
    x = _activation("hardswish", input)
    return _maybe_inplace("hardswish", x, inplace, lambda t: apply(HARDSWISH, t))


@export(functional=True, toplevel=False)
def mish(input, inplace: bool = False):
    """``x * tanh(softplus(x))``."""
    x = _activation("mish", input)
    out = _maybe_inplace("mish", x, inplace, lambda t: _wide(lambda u: u * E.tanh(softplus(u)), t))
    return out if inplace else rename_node(out, "MishBackward0")


@export(functional=True, toplevel=False)
def tanhshrink(input):
    """``x - tanh(x)`` (integers promoted to the default float, as in PyTorch)."""
    x = to_tensor(input)
    return x - E.tanh(x)  # (PyTorch's composite too: tanh rounded before the difference)


@export(functional=True, toplevel=False)
def logsigmoid(input):
    """``log(sigmoid(x))``, computed stably as PyTorch computes it, ``min(x, 0) -
    log1p(exp(-|x|))``: one op each way (ops/log_sigmoid.py); the gradient ``sigmoid(-x)``
    (0.5 at 0) and its own derivative are PyTorch's."""
    x = _activation("logsigmoid", input)
    return rename_node(apply(LOG_SIGMOID, x), "LogSigmoidBackward0")


@export(functional=True)
def threshold(input, threshold: float, value: float, inplace: bool = False):
    """``value`` where ``x <= threshold``, else ``x`` (NaN stays NaN, as in PyTorch); one op
    each way (ops/shrink.py), whose gradient differentiates again to zeros in ``x``."""
    x = to_tensor(input)
    if not x.dtype.is_integer:
        # (integer tensors are thresholded as they are, PyTorch's CPU kernel's; bool refused)
        x = _activation("threshold", x)
    if _items.any_item(threshold, value):
        return _maybe_inplace("threshold", x, inplace, lambda t: IA.threshold(t, threshold, value))
    if x.dtype.is_integer:  # (PyTorch converts both to the tensor's dtype, checking the range)
        check_fill_value("threshold", threshold, x.dtype)
        check_fill_value("threshold", value, x.dtype)
    th, v = float(threshold), float(value)
    if x.dtype.is_floating_point:  # (PyTorch converts the value to the tensor's dtype, the
        # threshold to float32 unless the tensor is float64: a finite one beyond is refused)
        check_fill_value("threshold", v, x.dtype)
        check_fill_value("threshold", th, dt.float64 if x.dtype is dt.float64 else dt.float32)
    if x.dtype.is_integer and math.isfinite(th) and math.isfinite(v):
        # PyTorch casts both to the tensor's dtype first: C's truncation (-0.5 is 0), wrapping
        # (-1 is uint8's 255)
        th, v = (float(np.int64(int(a)).astype(x.dtype.np)) for a in (th, v))
    return _maybe_inplace(
        "threshold", x, inplace, lambda t: apply(THRESHOLD, t, threshold=th, value=v)
    )


@export(functional=True, method=True)
def hardshrink(input, lambd: float = 0.5):
    """0 where ``-lambd <= x <= lambd``, else ``x`` (NaN stays NaN, as in PyTorch)."""
    x = _activation("hardshrink", input)
    if _items.any_item(lambd):
        return IA.hardshrink(x, lambd)
    return apply(HARDSHRINK, x, lambd=float(lambd))


@export(functional=True, toplevel=False)
def softshrink(input, lambd: float = 0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    x = _activation("softshrink", input)
    if _items.any_item(lambd):
        return IA.softshrink(x, lambd)
    lambd = float(lambd)
    if lambd < 0:
        raise ArgumentError(f"softshrink: lambd must be non-negative, got {lambd}")
    return apply(SOFTSHRINK, x, lambd=lambd)


@export(functional=True, toplevel=False)
def glu(input, dim: int = -1):
    """Gated linear unit: split ``dim`` in halves ``a, b`` and return ``a * sigmoid(b)``."""
    x = _activation("glu", input)
    d = dim_arg("glu", dim, x.ndim)
    if x.shape[d] % 2:
        raise ShapeError(
            f"dimension {dim} of shape {fmt_shape(x.shape)} must have an even size to be halved",
            op="glu",
        )
    if x.dtype.itemsize == 2:  # (16 bits: computed in float32, rounded once, as PyTorch's)
        a, b = E.chunk(x, 2, d)
        return _wide(lambda u: u * E.sigmoid(b.to(u.dtype)), a)
    return apply(GLU, x, axis=d)


@export(functional=True, method=True)
@autocasts(Autocast.LOWER)
def prelu(input, weight):
    """``x`` where positive, else ``weight * x``; ``weight`` has 1 element or one per channel
    (dimension 1 of the input)."""
    x = _activation("prelu", input)
    w = float_input("prelu", weight, "weight")
    if w.dtype is not x.dtype:
        w = E.cast(w, x.dtype)
    n = w.numel()
    if w.ndim > 1 or (n != 1 and (x.ndim < 2 or x.shape[1] != n)):
        channels = x.shape[1] if x.ndim >= 2 else 1
        raise ShapeError(
            f"weight of shape {fmt_shape(w.shape)} must have 1 element or one per channel "
            f"({channels} for an input of shape {fmt_shape(x.shape)})",
            op="prelu",
        )
    if n != 1:
        w = E.reshape(w, (n,) + (1,) * (x.ndim - 2))
    elif w.ndim:
        w = E.reshape(w, ())
    return apply(PRELU, x, w)


@export(functional=True, toplevel=False)
def relu(input, inplace: bool = False):
    """``max(x, 0)`` (NaN kept); ``inplace=True`` writes it into ``input`` and returns it
    (``ember.relu`` is the same function without the flag, as ``torch.relu``)."""
    x = to_tensor(input)
    return x._inplace("relu_", E.relu) if inplace else E.relu(x)


@export(functional=True)
def relu_(input):
    """In-place relu: writes ``max(x, 0)`` into ``input`` and returns it."""
    return to_tensor(input)._inplace("relu_", E.relu)


def _functional_inplace(fn, name):
    def inplace_fn(input, *args, **kwargs):
        return fn(input, *args, inplace=True, **kwargs)

    inplace_fn.__name__ = inplace_fn.__qualname__ = name
    inplace_fn.__doc__ = f"In-place {fn.__name__}: writes the result into ``input``."
    return inplace_fn


for _fn in (elu, leaky_relu, hardtanh, threshold, celu, selu):
    export(
        _functional_inplace(_fn, _fn.__name__ + "_"),
        functional=True,
        toplevel=_fn in (threshold, celu, selu),
    )
