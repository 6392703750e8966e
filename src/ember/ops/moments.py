"""The reductions composed from the primitives of ops/reduce.py: ``mean``, ``var``, ``std``
(with PyTorch's ``unbiased``/``correction`` rules) and ``logsumexp`` (shifted by the maximum,
so large inputs do not overflow). They take the same ``dim``/``axis`` and
``keepdim``/``keepdims`` arguments as the primitives.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import ArgumentTypeError
from . import api as E
from . import qtensor_ops
from ._node_names import rename_node
from ._registry import apply, export
from ._util import (
    require_float,
    require_float_or_complex,
)
from .cast import requested_cast
from .promotion import to_tensor
from .reduce import _MAX, _SUM, _args, reduced_shape, sum
from .variance import VAR


def _count(x, axes) -> int:
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


@export(method=True)
def mean(x, dim=None, keepdim=False, *, axis=None, keepdims=None, dtype=None):
    """Arithmetic mean over ``dim`` (floating tensors only, as in PyTorch)."""
    x = to_tensor(x)
    if qtensor_ops.held(x):
        # (the values' mean quantized back with the input's parameters, as PyTorch)
        return qtensor_ops.mean(x, dim, keepdim, axis=axis, keepdims=keepdims)
    if dtype is not None:
        x = requested_cast(x, dtype)  # (complex to real: PyTorch's real part, warned)
    require_float_or_complex("mean", x)
    axes, keep = _args("mean", x, dim, axis, keepdim, keepdims)
    total = apply(_SUM, x, axes=axes, keepdims=keep)
    n = _count(x, axes)
    out = total / n if n else total * float("nan")  # the mean of nothing is NaN
    return rename_node(out, "MeanBackward0" if dim is None and axis is None else "MeanBackward1")


@export(method=True)
def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, keepdims=None):
    """Variance over ``dim`` with Bessel's ``correction`` (1 by default, as in PyTorch), or
    PyTorch's older ``unbiased`` flag, positional after dim as in PyTorch's overload
    (``x.var(1, True)`` is unbiased, not keepdim; ``x.var(False)`` the biased variance of
    every element).

    Computed from the data shifted by its mean ``m``, with the shift's own rounding
    corrected: ``(sum(d * d) - sum(d) ** 2 / n) / (n - correction)`` for ``d = x - m``
    (ops/variance.py). A plain two-pass formula loses the digits by which ``m`` missed the
    mean (1.4e-4 relative in float32 when the mean is 10^4 standard deviations); this keeps
    float32 within ~1e-7, as PyTorch's Welford accumulation in double does. The gradient is
    PyTorch's ``2 / (n - correction) * g * (x - mean(x))`` (so an infinite ``g`` gives
    +-inf, not NaN), differentiable again. A complex tensor's
    variance is the mean squared modulus of its deviations, real: its real and imaginary
    parts' variances summed."""
    x = to_tensor(x)
    correction = _correction(dim, unbiased, correction)
    if isinstance(dim, bool):  # var(x, unbiased)
        dim = None
    if x.dtype.is_complex:
        kwargs = dict(keepdim=keepdim, correction=correction, axis=axis, keepdims=keepdims)
        return var(E.real(x), dim, **kwargs) + var(E.imag(x), dim, **kwargs)
    require_float("var", x)
    if x.dtype is dt.bfloat16 or x.dtype is dt.float16:  # (in float32, rounded once)
        kwargs = dict(keepdim=keepdim, correction=correction, axis=axis, keepdims=keepdims)
        return rename_node(
            E.cast(var(E.cast(x, dt.float32), dim, **kwargs), x.dtype), "VarBackward0"
        )
    axes, keep = _args("var", x, dim, axis, keepdim, keepdims)
    # (one op: its value the shifted sums above, its gradient PyTorch's var_backward)
    return apply(VAR, x, axes=axes, keepdims=keep, correction=float(correction))


def _correction(dim, unbiased, correction) -> float:
    """The Bessel correction of var/std's arguments: ``correction`` (default 1), or the
    ``unbiased`` flag (given positionally, it may sit in ``dim``'s place)."""
    if isinstance(dim, bool):
        if unbiased is not None:
            raise ArgumentTypeError(
                "var/std: unbiased given twice (positionally as dim, and by name)"
            )
        unbiased = dim
    if unbiased is not None:
        if correction is not None:
            raise ArgumentTypeError("var/std: give either unbiased or correction, not both")
        return 1 if unbiased else 0
    return 1 if correction is None else correction


@export(method=True)
def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, keepdims=None):
    """Standard deviation over ``dim`` (sqrt of `var`; the same arguments)."""
    correction = _correction(dim, unbiased, correction)
    if isinstance(dim, bool):
        dim = None
    kwargs = dict(keepdim=keepdim, correction=correction, axis=axis, keepdims=keepdims)
    x = to_tensor(x)
    if x.dtype is dt.bfloat16 or x.dtype is dt.float16:  # (in float32, rounded once)
        return E.cast(_root(var(E.cast(x, dt.float32), dim, **kwargs)), x.dtype)
    return rename_node(_root(var(x, dim, **kwargs)), "StdBackward0")


def _root(v):
    """``sqrt(v)`` whose gradient is 0 where v is 0: PyTorch's std_backward masks a zero
    standard deviation (a constant feature), where sqrt's own gradient (inf) times var's (0)
    would give NaN."""
    zero = v == 0
    return E.where(zero, 0.0, E.sqrt(E.where(zero, 1.0, v)))


@export(method=True)
def logsumexp(x, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """log(sum(exp(x))) over ``dim``, computed stably by shifting by the maximum. Integer and
    bool tensors are promoted to the default float dtype; over an empty dimension the result
    is -inf (the log of an empty sum), as in PyTorch. ``dim=()`` reduces every dimension, like
    `sum` (PyTorch 2.13 fails on it with a shape error)."""
    x = to_tensor(x)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = E.cast(x, dt.get_default_dtype())
    axes, keep = _args("logsumexp", x, dim, axis, keepdim, keepdims)
    if _count(x, axes) == 0:
        return sum(x, axes, keepdim=keep) + float("-inf")
    # the shift cancels in value and in gradient, so it needs no history; complex tensors
    # shift by the largest real part (PyTorch's), the log the principal one
    shift = apply(_MAX, E.real(x).detach(), axes=axes, keepdims=True)
    shift = E.where(E.isfinite(shift), shift, 0)
    total = sum(E.exp(x - shift), axes, keepdim=True)
    out = E.log(total) + shift
    out = out if keep else E.reshape(out, reduced_shape(x.shape, axes, False))
    return rename_node(out, "LogsumexpBackward0")
