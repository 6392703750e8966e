"""Normalization layers' functional forms: layer_norm, rms_norm, batch_norm, instance_norm,
group_norm and normalize, as composites.

Statistics are biased (divide by n) for normalizing, as in PyTorch. batch_norm and instance_norm
in training update the running buffers in place under ``no_grad`` with PyTorch's rule:
``running = (1 - momentum) * running + momentum * batch_stat``, where the variance fed to
``running_var`` is the unbiased one (``n / (n - 1)`` times the biased). Parameters and running
statistics must have the input's dtype, as PyTorch's kernels require (`_refuse_mixed_dtypes`:
its messages), but float32 ones of a half-precision input select PyTorch's mixed-type kernels for
layer_norm and group_norm: the input widened to float32, everything computed there with the
parameters as they are, the result rounded once to the input's dtype (`_mixed`), the
parameters' gradients in float32. batch_norm (the one autocast leaves in half precision)
still rounds the parameters to the input's dtype: see the note in it.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .. import dtypes as dt
from ..autograd import no_grad
from ..errors import ArgumentError, DTypeError, ShapeError
from ..ops import _item_scalars as _items
from ..ops import api as E
from ..ops._registry import TensorBase, apply, constant, export
from ..ops._registry import _state as _reg_state
from ..ops._util import fmt_shape, numel
from ..ops.batch_norm import BATCH_NORM_EVAL, BATCH_NORM_TRAIN
from ..ops.group_norm import GROUP_NORM
from ..ops.layer_norm import LAYER_NORM
from ..ops.promotion import to_tensor
from ..tensor import Tensor
from ._common import dim_arg, float_input


def _param(op: str, p, x, shape: tuple, what: str, dtype=None):
    """An affine parameter or running buffer: a float tensor of ``shape`` in ``dtype`` (x's
    by default)."""
    if p is None:
        return None
    p = float_input(op, p, what, complex_ok=x.dtype.is_complex)
    if tuple(p.shape) != tuple(shape):
        raise ShapeError(
            f"{what} of shape {fmt_shape(p.shape)} does not match the expected shape "
            f"{fmt_shape(shape)} for an input of shape {fmt_shape(x.shape)}",
            op=op,
        )
    dtype = dtype or x.dtype
    return p if p.dtype is dtype else E.cast(p, dtype)


def _mixed(x, *params) -> bool:
    """Whether a half-precision ``x`` meets a float32 parameter or buffer: PyTorch's
    mixed-type normalization kernels compute in float32 with the parameters unrounded and
    round the result once to x's dtype (the composites below then run on x widened)."""
    return x.dtype in (dt.float16, dt.bfloat16) and any(
        isinstance(p, TensorBase) and p.dtype is dt.float32 for p in params
    )


_TORCH_TYPE_NAMES = {
    dt.float32: "Float",
    dt.float64: "Double",
    dt.bfloat16: "BFloat16",
    dt.float16: "Half",
}


def _refuse_mixed_dtypes(op: str, x, *params) -> None:
    """PyTorch's dtype rule of its normalization kernels (``weight, bias`` and, for
    batch_norm, the running statistics, in that order; None skipped): where the first given
    parameter has the input's dtype, every other must too; where it does not, the mixed-type
    kernels run, which take a half-precision input only and float32 parameters only."""
    given = [p for p in params if isinstance(p, TensorBase)]
    if not given:
        return
    if given[0].dtype is not x.dtype:
        if any(p.dtype is not dt.float32 for p in given):
            raise DTypeError(
                "mixed dtype (CPU): expect parameter to have scalar type of Float", op=op
            )
        if x.dtype not in (dt.float16, dt.bfloat16):
            raise DTypeError("mixed dtype (CPU): all inputs must share same datatype.", op=op)
        return
    for p in given:
        if p.dtype is not x.dtype:
            want = _TORCH_TYPE_NAMES.get(x.dtype, str(x.dtype))
            found = _TORCH_TYPE_NAMES.get(p.dtype, str(p.dtype))
            raise DTypeError(f"expected scalar type {want} but found {found}", op=op)


def _channel_view(p, ndim: int):
    """A per-channel (C,) tensor shaped to broadcast along dimension 1 of an ndim-D input."""
    return E.reshape(p, (p.shape[0],) + (1,) * (ndim - 2))


def _affine(y, weight, bias):
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def _moments(x, axes):
    """The centred input, the mean and the biased variance over ``axes`` (kept as size-1
    dims)."""
    mean = E.mean(x, axes, keepdim=True)
    centred = x - mean
    return centred, mean, E.mean(centred * centred, axes, keepdim=True)


def _normalized_axes(op: str, x, normalized_shape) -> tuple:
    if isinstance(normalized_shape, (int, np.integer)):
        shape = (int(normalized_shape),)
    else:
        shape = tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0 or x.ndim < k or tuple(x.shape[x.ndim - k :]) != shape:
        raise ShapeError(
            f"normalized_shape {fmt_shape(shape)} must match the trailing dimensions of the "
            f"input, but the input has shape {fmt_shape(x.shape)}",
            op=op,
        )
    return shape, tuple(range(x.ndim - k, x.ndim))


# ------------------------------------------------------------------------ layer and rms norm


@export(functional=True)
def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Normalize over the trailing ``normalized_shape`` dimensions, then scale and shift."""
    item = _items.is_item(eps)  # (a traced .item() eps: the composite takes its tensor)
    if not item and _plain_layer_norm(input, normalized_shape, weight, bias):
        # (every eager LayerNorm module's call: the checks below would pass and cast nothing)
        return apply(LAYER_NORM, input, weight, bias, eps=float(eps))
    x = float_input("layer_norm", input)
    _refuse_mixed_dtypes("layer_norm", x, weight, bias)
    if _mixed(x, weight, bias):
        y = layer_norm(E.cast(x, dt.float32), normalized_shape, weight, bias, eps)
        return E.cast(y, x.dtype)
    shape, axes = _normalized_axes("layer_norm", x, normalized_shape)
    weight = _param("layer_norm", weight, x, shape, "weight")
    bias = _param("layer_norm", bias, x, shape, "bias")
    if not item and all(isinstance(n, int) for n in shape) and math.prod(shape) > 0:
        # one pass forward and one backward (a missing weight or bias: a unit scale, no shift)
        unit = E.ones(shape, dtype=x.dtype) if weight is None else weight
        zero = E.zeros(shape, dtype=x.dtype) if bias is None else bias
        return apply(LAYER_NORM, x, unit, zero, eps=float(eps))
    centred, _, var = _moments(x, axes)
    return _affine(centred * E.rsqrt(var + _items.number(eps)), weight, bias)


def _plain_layer_norm(x, shape, weight, bias) -> bool:
    """Whether `layer_norm`'s operands need none of its conversions: tensors of one float32 or
    float64 dtype, ``shape`` a tuple of positive ints that is the weight's and the bias's shape
    and ends the input's."""
    if type(shape) is not tuple or not shape or not isinstance(x, TensorBase):
        return False
    dtype = x.dtype
    if dtype is not dt.float32 and dtype is not dt.float64:
        return False
    for n in shape:
        if type(n) is not int or n < 1:
            return False
    k = len(shape)
    xs = tuple(x.shape)
    if len(xs) < k or xs[len(xs) - k :] != shape:
        return False
    for p in (weight, bias):
        if not isinstance(p, TensorBase) or p.dtype is not dtype or tuple(p.shape) != shape:
            return False
    return True


@export(functional=True)
def rms_norm(input, normalized_shape, weight=None, eps: float | None = None):
    """``x / sqrt(mean(x**2) + eps)`` over the trailing dimensions, times ``weight``; ``eps``
    defaults to the machine epsilon of the input's dtype, float32's for bfloat16 and float16
    (which are computed in float32 and rounded once), as PyTorch's kernel does."""
    x = float_input("rms_norm", input, complex_ok=True)  # (PyTorch's x * x, not |x|^2)
    shape, axes = _normalized_axes("rms_norm", x, normalized_shape)
    weight = _param("rms_norm", weight, x, shape, "weight")
    if x.dtype is dt.bfloat16 or x.dtype is dt.float16:
        # computed in float32 and rounded once, the weight's product included, with float32's
        # epsilon by default: PyTorch's arithmetic (its kernel works in the wider type)
        if eps is None:
            eps = float(np.finfo(np.float32).eps)
        wide = None if weight is None else weight.to(dt.float32)
        return rms_norm(x.to(dt.float32), normalized_shape, wide, eps).to(x.dtype)
    if eps is None:
        eps = float(ml_dtypes.finfo(x.dtype.np).eps)
    y = x * E.rsqrt(E.mean(x * x, axes, keepdim=True) + _items.number(eps))
    return _affine(y, weight, None)


# ------------------------------------------------------------------------------- batch norm


def _channels(op: str, x, min_ndim: int = 2) -> int:
    if x.ndim < min_ndim:
        raise ShapeError(
            f"expected an input with at least {min_ndim} dimensions (N, C, ...), "
            f"got shape {fmt_shape(x.shape)}",
            op=op,
        )
    return x.shape[1]


def _update_running(running, batch_stat, momentum: float, factor=1.0) -> None:
    """``running = (1 - momentum) * running + momentum * (batch_stat * factor)`` in place,
    untracked (``factor``: the variance's ``n / (n - 1)``, a number or a 0-d tensor, 1 for
    the mean)."""
    if _update_running_now(running, batch_stat, momentum, factor):
        return
    with no_grad():
        stat = batch_stat.detach()
        if isinstance(factor, TensorBase) or factor != 1.0:
            stat = stat * factor
        stat = E.cast(stat, running.dtype)
        running.copy_(running * (1.0 - momentum) + stat * momentum)


_RUNNING_NOW = (np.dtype(np.float32), np.dtype(np.float64))


def _update_running_now(running, batch_stat, momentum, factor: float) -> bool:
    """The update above on the arrays, for a plain eager call (no mode, so nothing records
    it): the ops' own arithmetic (each product and the sum rounded to the buffer's dtype, the
    weak Python scalars taken in that dtype, as `promote` takes them) in NumPy's ufuncs
    directly instead of some eight op calls per buffer, and the buffer's version bumped as
    ``copy_`` bumps it. False (nothing done) for anything else: a graph being built, a tensor
    momentum, a buffer that is a view or needs a gradient, a statistic of another dtype."""
    if _reg_state.modes or type(momentum) is not float or not isinstance(running, Tensor):
        return False
    if isinstance(factor, TensorBase):
        return False
    r, stat = running._data, batch_stat._data
    dtype = r.dtype
    if (
        dtype not in _RUNNING_NOW
        or stat.dtype != dtype
        or stat.shape != r.shape
        or running._view_of is not None
        or running._requires_grad
        or not r.flags.writeable
    ):
        return False
    if factor != 1.0:
        stat = np.multiply(stat, np.asarray(factor, dtype))
    new = np.multiply(r, np.asarray(1.0 - momentum, dtype))
    new += np.multiply(stat, np.asarray(momentum, dtype))
    r[...] = new
    running._vc[0] += 1
    return True


def _momentum(op: str, momentum):
    """The update factor: a number, or a 0-d tensor (BatchNorm's cumulative average,
    1 / num_batches_tracked, a graph value inside a captured step)."""
    if momentum is None:
        raise ArgumentError(
            f"{op}: momentum=None (a cumulative average) needs the number of batches seen, which "
            "the module tracks; pass the factor it computes (1 / num_batches_tracked) as momentum"
        )
    if isinstance(momentum, TensorBase):
        if momentum.ndim != 0:
            raise ShapeError(
                f"momentum must be a number or a 0-d tensor, got shape {fmt_shape(momentum.shape)}",
                op=op,
            )
        return momentum
    return float(momentum)


@export(functional=True, toplevel=False)
def batch_norm(
    input,
    running_mean,
    running_var,
    weight=None,
    bias=None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
):
    """Normalize each channel (dimension 1) over the batch and spatial dimensions.

    Training: batch statistics, and the running buffers (if given) are updated in place.
    Evaluation: the running statistics are used."""
    if not training and _plain_eval(input, running_mean, running_var, weight, bias):
        # (every eager inference BatchNorm: the checks below would pass and cast nothing)
        operands = (input, running_mean, running_var, weight, bias)
        return apply(BATCH_NORM_EVAL, *operands, eps=float(eps))
    x = float_input("batch_norm", input)
    if x.numel() != 0:  # (PyTorch returns an empty batch before its dtype checks)
        _refuse_mixed_dtypes("batch_norm", x, weight, bias, running_mean, running_var)
    if x.ndim == 1 and x.shape[0] == 0:  # (PyTorch returns an empty input before its checks)
        return E.clone(x)
    c = _channels("batch_norm", x)
    running_mean = _running("batch_norm", running_mean, x, c, "running_mean")
    running_var = _running("batch_norm", running_var, x, c, "running_var")
    # a half-precision input with float32 parameters or buffers (autocast's CNN): the ops take
    # them in float32 beside the 16-bit data (PyTorch's mixed-type kernel: float32 statistics,
    # the parameters unrounded, the result rounded once). Widening the input instead, as
    # layer_norm and group_norm do, would save a float32 copy of every normalized activation.
    channel = dt.float32 if _mixed(x, weight, bias, running_mean, running_var) else x.dtype
    weight = _param("batch_norm", weight, x, (c,), "weight", channel)
    bias = _param("batch_norm", bias, x, (c,), "bias", channel)
    if not training:
        if running_mean is None or running_var is None:
            raise ArgumentError(
                "batch_norm: running_mean and running_var are needed in evaluation mode "
                "(training=False); pass them or use training=True"
            )
        mean, var = E.cast(running_mean, channel), E.cast(running_var, channel)
        weight, bias = _filled(weight, channel, c, 1.0), _filled(bias, channel, c, 0.0)
        return apply(BATCH_NORM_EVAL, x, mean, var, weight, bias, eps=float(eps))
    n = numel(x.shape) // max(c, 1)
    if n == 0:
        # an empty batch, as PyTorch's: an empty result, the running statistics unchanged,
        # zero gradients for the affine parameters
        around = (c,) + (1,) * (x.ndim - 2)
        weight, bias = _filled(weight, channel, c, 1.0), _filled(bias, channel, c, 0.0)
        return x * E.reshape(weight, around) + E.reshape(bias, around)
    if isinstance(n, int) and n == 1:  # (a symbolic count has no value to check yet)
        raise ArgumentError(
            f"batch_norm: expected more than 1 value per channel when training, got input of "
            f"shape {fmt_shape(x.shape)}"
        )
    y, mean, var = apply(
        BATCH_NORM_TRAIN,
        x,
        _filled(weight, channel, c, 1.0),
        _filled(bias, channel, c, 0.0),
        eps=float(eps),
    )
    if running_mean is not None or running_var is not None:
        m = _momentum("batch_norm", momentum)
        if running_mean is not None:
            _update_running(running_mean, mean, m)
        if running_var is not None:
            _update_running(running_var, var, m, _unbiased_factor(n, var.dtype))
    return y


def _unbiased_factor(n, dtype):
    """``n / (n - 1)``: a number, or for a count over a symbolic size (a batch traced with
    ``TensorSpec((None, ...))``) a 0-d tensor computed when the graph runs."""
    if isinstance(n, int):
        return n / (n - 1)
    count = to_tensor(n, dtype)
    return count / (count - 1)


def _plain_eval(x, *per_channel) -> bool:
    """Whether evaluation-mode `batch_norm`'s operands need none of its conversions: tensors
    of one float32 or float64 dtype, ``x`` with at least two dimensions and every per-channel
    operand given, of shape (C,)."""
    if issubclass(type(x), Tensor):  # eager operands: their arrays read, no Size made
        return _plain_eval_arrays(x, per_channel)
    if not isinstance(x, TensorBase):
        return False
    dtype = x.dtype
    if dtype is not dt.float32 and dtype is not dt.float64:
        return False
    shape = tuple(x.shape)
    if len(shape) < 2:
        return False
    channels = (shape[1],)
    if type(shape[1]) is not int:
        return False
    for p in per_channel:
        if not isinstance(p, TensorBase) or p.dtype is not dtype or tuple(p.shape) != channels:
            return False
    return True


_EVAL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _plain_eval_arrays(x, per_channel) -> bool:
    """`_plain_eval` of an eager ``x``, read off the arrays (every eager inference BatchNorm
    asks: its operands' ``shape`` and ``dtype`` properties cost it microseconds)."""
    data = x._data
    dtype = data.dtype
    shape = data.shape
    if (dtype != _EVAL_DTYPES[0] and dtype != _EVAL_DTYPES[1]) or len(shape) < 2:
        return False
    channels = (shape[1],)
    for p in per_channel:
        if not issubclass(type(p), Tensor):
            return False
        a = p._data
        if a.dtype != dtype or a.shape != channels:
            return False
    return True


def _filled(p, dtype, c: int, value: float):
    """An affine parameter, or a constant one of ``value`` (in ``dtype``) where none is given."""
    return p if p is not None else constant(np.full((c,), value, dtype.np))


def _running(op: str, buf, x, c: int, what: str):
    """A running-statistics buffer: validated, but kept as is (it is updated in place)."""
    if buf is None:
        return None
    buf = float_input(op, buf, what)
    if tuple(buf.shape) != (c,):
        raise ShapeError(
            f"{what} of shape {fmt_shape(buf.shape)} must have one entry per channel ({c}) "
            f"for an input of shape {fmt_shape(x.shape)}",
            op=op,
        )
    return buf


# ---------------------------------------------------------------------------- instance norm


@export(functional=True, toplevel=False)
def instance_norm(
    input,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
):
    """Normalize each channel of each sample over its spatial dimensions (N, C, ...).

    With ``use_input_stats`` the running buffers (if given) move towards the batch average of
    the per-instance statistics (unbiased variance), as PyTorch does; without it the running
    statistics are used."""
    x = float_input("instance_norm", input)
    # (PyTorch's instance_norm copies the running statistics into the input's dtype, so the
    # rule reads the affine parameters only)
    _refuse_mixed_dtypes("instance_norm", x, weight, bias)
    c = _channels("instance_norm", x, min_ndim=3)
    running_mean = _running("instance_norm", running_mean, x, c, "running_mean")
    running_var = _running("instance_norm", running_var, x, c, "running_var")
    weight = _param("instance_norm", weight, x, (c,), "weight")
    bias = _param("instance_norm", bias, x, (c,), "bias")
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ArgumentError(
                "instance_norm: use_input_stats=False needs running_mean and running_var"
            )
        mean, var = (
            b if b.dtype is x.dtype else E.cast(b, x.dtype) for b in (running_mean, running_var)
        )
        return batch_norm(x, mean, var, weight, bias, False, momentum, eps)
    axes = tuple(range(2, x.ndim))
    n = numel(x.shape[2:])
    if isinstance(n, int) and n <= 1:  # (a symbolic count has no value to check yet)
        raise ArgumentError(
            f"instance_norm: expected more than 1 spatial element when training, got input of "
            f"shape {fmt_shape(x.shape)}"
        )
    found = _instance_as_batch(x, weight, bias, eps)
    if found is not None:
        y, mean, var = found
        if running_mean is not None or running_var is not None:  # (N, C) per-instance stats
            mean, var = E.reshape(mean, tuple(x.shape[:2])), E.reshape(var, tuple(x.shape[:2]))
        batch_axes = (0,)
    else:
        centred, mean, var = _moments(x, axes)
        y = centred * E.rsqrt(var + _items.number(eps))
        y = _affine(
            y,
            None if weight is None else _channel_view(weight, x.ndim),
            None if bias is None else _channel_view(bias, x.ndim),
        )
        batch_axes = (0,) + tuple(range(2, x.ndim))  # average the per-instance stats over N
    if running_mean is not None or running_var is not None:
        m = _momentum("instance_norm", momentum)
        if running_mean is not None:
            _update_running(running_mean, E.mean(mean.detach(), batch_axes), m)
        if running_var is not None:
            _update_running(running_var, E.mean(var.detach(), batch_axes) * (n / (n - 1)), m)
    return y


def _instance_as_batch(x, weight, bias, eps):
    """Instance normalization as PyTorch computes it: the training batch norm of ``x`` seen as
    one sample of N * C channels (``batch_norm_train``'s one-pass kernels and fused backward),
    the affine parameters repeated per sample; ``(y, mean, var)``, the biased statistics of the
    N * C instances. None where that op does not take the call (sizes unknown while tracing, a
    traced eps, parameters of another dtype): the composite runs."""
    shape = tuple(x.shape)
    if not all(type(d) is int for d in shape) or not isinstance(eps, (int, float)):
        return None
    n, c = shape[:2]
    channel = x.dtype
    for p in (weight, bias):
        if p is not None and p.dtype != channel:
            return None

    def repeated(p, value):
        if p is None:
            return constant(np.full((n * c,), value, channel.np))
        return E.tile(p, n)

    y, mean, var = apply(
        BATCH_NORM_TRAIN,
        E.reshape(x, (1, n * c) + shape[2:]),
        repeated(weight, 1.0),
        repeated(bias, 0.0),
        eps=float(eps),
    )
    return E.reshape(y, shape), mean, var


# ------------------------------------------------------------------------------- group norm


@export(functional=True)
def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """Split the channels (dimension 1) into ``num_groups`` groups and normalize each group of
    each sample over its channels and spatial dimensions; then a per-channel affine."""
    x = float_input("group_norm", input)
    _refuse_mixed_dtypes("group_norm", x, weight, bias)
    if _mixed(x, weight, bias):
        return E.cast(group_norm(E.cast(x, dt.float32), num_groups, weight, bias, eps), x.dtype)
    c = _channels("group_norm", x)
    g = int(num_groups)
    if g <= 0 or c % g:
        raise ShapeError(
            f"the {c} channels of an input of shape {fmt_shape(x.shape)} cannot be split into "
            f"{num_groups} groups; num_groups must divide the channel count",
            op="group_norm",
        )
    per_group = [x.shape[0] * c // g, *x.shape[2:]]
    if all(isinstance(n, int) for n in per_group) and math.prod(per_group) == 1:
        # PyTorch's check: one value per group and channel has no variance
        raise ArgumentError(
            f"expected more than 1 value per channel, got input of shape {fmt_shape(x.shape)} "
            f"with {g} groups",
            op="group_norm",
        )
    weight = _param("group_norm", weight, x, (c,), "weight")
    bias = _param("group_norm", bias, x, (c,), "bias")
    # one op each way (ops/group_norm.py): the statistics and the affine in one pass; no
    # weight or bias: a unit scale and no shift
    if weight is None:
        weight = E.ones((c,), dtype=x.dtype)
    if bias is None:
        bias = E.zeros((c,), dtype=x.dtype)
    weight, bias = (v if v.dtype == x.dtype else E.cast(v, x.dtype) for v in (weight, bias))
    return apply(GROUP_NORM, x, weight, bias, groups=g, eps=float(eps))


# -------------------------------------------------------------------------------- normalize


@export(functional=True, toplevel=False)
def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None):
    """``x / max(||x||_p, eps)`` along ``dim`` (F.normalize). With ``out`` the result is also
    written into that tensor."""
    x = float_input("normalize", input, complex_ok=True)
    d = dim_arg("normalize", dim, max(x.ndim, 1))
    _items.refuse(p, "normalize", "p", "the norm's order as a number (it picks the computation)")
    p = float(p)
    eps = eps if _items.is_item(eps) else float(eps)  # (a traced .item(): clip takes it)
    if p == 2.0 and not x.dtype.is_complex:
        # sqrt(max(sum x^2, eps^2)) == max(norm, eps), and its gradient stays finite at x == 0;
        # 16-bit squares are summed in float32 and the norm rounded once, as PyTorch's norm
        # (in float16 the square of 300 overflows)
        wide = E.cast(x, dt.float32) if x.dtype in (dt.float16, dt.bfloat16) else x
        norm = E.sqrt(E.clip(E.sum(wide * wide, d, keepdim=True), min=eps * eps))
        norm = E.cast(norm, x.dtype) if wide is not x else norm
    else:
        norm = E.clip(_p_norm(x, p, d), min=eps)
    result = x / norm
    if out is not None:
        out.copy_(result)
        return out
    return result


def _p_norm(x, p: float, dim: int):
    a = E.abs(x)
    if p == float("inf"):
        return E.amax(a, dim, keepdim=True)
    if p == float("-inf"):
        return E.amin(a, dim, keepdim=True)
    if p == 1.0:
        return E.sum(a, dim, keepdim=True)
    if p == 0.0:
        return E.sum(E.cast(a != 0, a.dtype), dim, keepdim=True)  # (real, as |x| is)
    return E.pow(E.sum(E.pow(a, p), dim, keepdim=True), 1.0 / p)
