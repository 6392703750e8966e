"""More of PyTorch's top-level functions that exported and older code calls, written over
nn.functional's and ember's ops: aten's ``native_layer_norm`` / ``native_batch_norm`` /
``native_group_norm`` (the output with the saved statistics), ``convolution`` and
``conv_tbc``, ``max_pool1d_with_indices``, the functional recurrent cells (``lstm_cell``,
``gru_cell``, ``rnn_tanh_cell``, ``rnn_relu_cell``), the dropouts' in-place spellings
(``dropout_``, ``alpha_dropout_``, ``feature_alpha_dropout_``) and ``feature_dropout``, the
in-place top-level forms ``index_put_``, ``gcd_``, ``lcm_``, ``addmv_``, ``conj_physical_``,
``as_strided_scatter``, ``nonzero_static``, ``empty_permuted``, ``get_device``,
``is_storage`` and ``set_default_tensor_type``."""

from __future__ import annotations

import warnings

from .. import dtypes as dt
from ..errors import ArgumentError, ArgumentTypeError, ShapeError, user_stacklevel
from ..ops import api as E
from ..ops._registry import FUNCTIONAL, export
from ..ops._util import fmt_shape, refuse_complex
from ..ops.promotion import to_tensor
from ..ops.random import bernoulli_scalar

# ------------------------------------------------------------------------------- norms


@export
def native_layer_norm(input, normalized_shape, weight, bias, eps: float):
    """``torch.native_layer_norm``: ``(output, mean, rstd)``, layer norm over the trailing
    ``normalized_shape`` and its statistics, shaped ``input.shape[:axis] + (1,) * k`` (rstd
    = 1 / sqrt(var + eps), the biased variance). All three differentiable."""
    x = to_tensor(input)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if tuple(x.shape[x.ndim - k :]) != shape or k > x.ndim:
        raise ShapeError(
            f"normalized_shape {list(shape)} does not match the trailing dimensions of input "
            f"of shape {fmt_shape(x.shape)}",
            op="native_layer_norm",
        )
    dims = tuple(range(x.ndim - k, x.ndim))
    out = FUNCTIONAL["layer_norm"](x, shape, weight, bias, eps)
    # (the statistics carry no gradient, as PyTorch's: outputs 1 and 2 are not differentiable)
    xd = E.detach(x)
    mean = E.mean(xd, dims, keepdim=True) if dims else xd
    var = E.var(xd, dims, keepdim=True, correction=0) if dims else E.zeros_like(xd)
    return out, mean, E.rsqrt(var + eps)


def _batch_dims(x):
    return (0,) + tuple(range(2, x.ndim))


@export
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """``torch.native_batch_norm``: ``(output, save_mean, save_invstd)``: in training the
    batch's per-channel mean and 1 / sqrt(biased var + eps) (the running statistics, if
    given, updated in place as `F.batch_norm` does); in evaluation both saved tensors are
    empty, as PyTorch's."""
    x = to_tensor(input)
    out = FUNCTIONAL["batch_norm"](
        x, running_mean, running_var, weight, bias, bool(training), momentum, eps
    )
    if not training:
        return out, E.zeros((0,), dtype=x.dtype), E.zeros((0,), dtype=x.dtype)
    dims = _batch_dims(x)
    xd = E.detach(x)  # (the saved statistics carry no gradient, as PyTorch's)
    mean = E.mean(xd, dims)
    var = E.var(xd, dims, correction=0)
    return out, mean, E.rsqrt(var + eps)


@export
def native_group_norm(input, weight, bias, N: int, C: int, HxW: int, group: int, eps: float):  # noqa: N803
    """``torch.native_group_norm``: ``(output, mean, rstd)``, group norm of ``input`` (N, C,
    *) with ``group`` groups and the per-(sample, group) statistics (N, group)."""
    x = to_tensor(input)
    if x.shape[0] != N or x.shape[1] != C or x.numel() != N * C * HxW:
        raise ShapeError(
            f"input of shape {fmt_shape(x.shape)} does not match N={N}, C={C}, HxW={HxW}",
            op="native_group_norm",
        )
    out = FUNCTIONAL["group_norm"](x, group, weight, bias, eps)
    # (the group's size spelled out: -1 is ambiguous for an empty batch, N == 0)
    grouped = E.reshape(x, (N, group, (C // group) * HxW))
    mean = E.mean(grouped, -1)
    var = E.var(grouped, -1, correction=0)
    return out, mean, E.rsqrt(var + eps)


# ------------------------------------------------------------------------ convolutions


@export
def convolution(
    input, weight, bias, stride, padding, dilation, transposed: bool, output_padding, groups: int
):
    """``torch.convolution``: aten's one convolution entry, every argument positional: the
    1-, 2- or 3-d convolution (or transposed convolution) that ``weight``'s rank selects.
    Complex tensors are refused, as PyTorch's aten entry does (its conv1d/2d/3d and
    conv_transpose*d take them, as ember's do)."""
    w = to_tensor(weight)
    refuse_complex("convolution", to_tensor(input), w)
    d = w.ndim - 2
    if d not in (1, 2, 3):
        raise ShapeError(
            f"weight of shape {fmt_shape(w.shape)}: expected 3, 4 or 5 dimensions",
            op="convolution",
        )
    if transposed:
        return FUNCTIONAL[f"conv_transpose{d}d"](
            input, w, bias, stride, padding, output_padding, groups, dilation
        )
    if any(
        p != 0 for p in ((output_padding,) if isinstance(output_padding, int) else output_padding)
    ):
        raise ArgumentError(
            "output_padding is only used by transposed convolutions", op="convolution"
        )
    return FUNCTIONAL[f"conv{d}d"](input, w, bias, stride, padding, dilation, groups)


@export
def conv_tbc(input, weight, bias, pad: int = 0):
    """``torch.conv_tbc``: a 1-d convolution of a (time, batch, channels) input with a
    (kernel width, in channels, out channels) weight and an (out channels,) bias, ``pad``
    zeros at both ends of time; the result is (time', batch, out channels)."""
    x, w = to_tensor(input), to_tensor(weight)
    if x.ndim != 3 or w.ndim != 3:
        raise ShapeError(
            f"conv_tbc expects a 3-d input and weight, got {fmt_shape(x.shape)} and "
            f"{fmt_shape(w.shape)}",
            op="conv_tbc",
        )
    if w.shape[1] != x.shape[2]:
        raise ShapeError(
            f"weight of shape {fmt_shape(w.shape)} takes {w.shape[1]} input channels, the "
            f"input {fmt_shape(x.shape)} has {x.shape[2]}",
            op="conv_tbc",
        )
    y = FUNCTIONAL["conv1d"](E.permute(x, (1, 2, 0)), E.permute(w, (2, 1, 0)), bias, 1, int(pad))
    return E.permute(y, (2, 0, 1))


@export
def max_pool1d_with_indices(
    input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode: bool = False
):
    """``torch.max_pool1d_with_indices``: ``(output, indices)`` of `F.max_pool1d` (an empty
    ``stride`` is the kernel size, as aten's)."""
    if stride == () or stride == [] or stride is None:
        stride = None
    return FUNCTIONAL["max_pool1d"](
        input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True
    )


# ----------------------------------------------------------------------------- dropouts


@export
def dropout_(input, p: float, train: bool):
    """``torch.dropout_(input, p, train)``: `F.dropout` in place."""
    return FUNCTIONAL["dropout"](input, p, train, inplace=True)


@export
def alpha_dropout_(input, p: float, train: bool):
    """``torch.alpha_dropout_(input, p, train)``: `F.alpha_dropout` in place."""
    return FUNCTIONAL["alpha_dropout"](input, p, train, inplace=True)


@export
def feature_alpha_dropout_(input, p: float, train: bool):
    """``torch.feature_alpha_dropout_(input, p, train)``: `F.feature_alpha_dropout` in
    place."""
    return FUNCTIONAL["feature_alpha_dropout"](input, p, train, inplace=True)


def _feature_dropout(op, input, p, train, inplace):
    x = to_tensor(input)
    if not 0.0 <= p <= 1.0:
        raise ArgumentError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")
    if x.ndim < 2:
        raise ShapeError(
            f"Feature dropout requires at least 2 dimensions in the input, got shape "
            f"{fmt_shape(x.shape)}",
            op=op,
        )
    if not train or p == 0.0:
        return x
    shape = tuple(x.shape[:2]) + (1,) * (x.ndim - 2)
    if p == 1.0:
        mask = E.zeros(shape, dtype=x.dtype)
    else:
        mask = bernoulli_scalar(shape, 1.0 - p, dtype=x.dtype) * (1.0 / (1.0 - p))
    if inplace:
        return x._inplace(op, lambda t: t * mask)
    return x * mask


@export
def feature_dropout(input, p: float, train: bool):
    """``torch.feature_dropout(input, p, train)``: whole features dropped: one Bernoulli(1 - p)
    draw per (dim 0, dim 1) entry of an input of at least 2 dimensions, broadcast over the
    rest, the kept ones scaled by 1 / (1 - p)."""
    return _feature_dropout("feature_dropout", input, p, train, False)


@export
def feature_dropout_(input, p: float, train: bool):
    """``torch.feature_dropout_``: `feature_dropout` in place."""
    return _feature_dropout("feature_dropout_", input, p, train, True)


# ----------------------------------------------------------------------- recurrent cells


def _linear(x, w, b):
    y = E.matmul(x, E.transpose(w, 0, 1))
    return y if b is None else y + b


def _check_cell(op, x, h, w_ih, w_hh, gates):
    if x.ndim not in (1, 2):
        raise ShapeError(f"input must be 1-d or 2-d, got shape {fmt_shape(x.shape)}", op=op)
    hidden = h.shape[-1]
    if w_ih.shape[0] != gates * hidden or w_hh.shape[0] != gates * hidden:
        raise ShapeError(
            f"w_ih {fmt_shape(w_ih.shape)} and w_hh {fmt_shape(w_hh.shape)} must have "
            f"{gates} x hidden size ({gates * hidden}) rows",
            op=op,
        )
    if w_ih.shape[1] != x.shape[-1]:
        raise ShapeError(
            f"input has {x.shape[-1]} features, w_ih {fmt_shape(w_ih.shape)} takes {w_ih.shape[1]}",
            op=op,
        )


@export
def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.lstm_cell``: one LSTM step, ``(h', c')`` from the input (batch, in) and
    ``hx = (h, c)``; gates i, f, g, o stacked in the weights' rows, as nn.LSTMCell's."""
    x, (h, c) = to_tensor(input), (to_tensor(hx[0]), to_tensor(hx[1]))
    w_ih, w_hh = to_tensor(w_ih), to_tensor(w_hh)
    _check_cell("lstm_cell", x, h, w_ih, w_hh, 4)
    gates = _linear(x, w_ih, b_ih) + _linear(h, w_hh, b_hh)
    i, f, g, o = E.chunk(gates, 4, -1)
    c_new = E.sigmoid(f) * c + E.sigmoid(i) * E.tanh(g)
    return E.sigmoid(o) * E.tanh(c_new), c_new


@export
def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.gru_cell``: one GRU step, h' from the input and h; gates r, z, n stacked in the
    weights' rows, as nn.GRUCell's."""
    x, h = to_tensor(input), to_tensor(hx)
    w_ih, w_hh = to_tensor(w_ih), to_tensor(w_hh)
    _check_cell("gru_cell", x, h, w_ih, w_hh, 3)
    ir, iz, in_ = E.chunk(_linear(x, w_ih, b_ih), 3, -1)
    hr, hz, hn = E.chunk(_linear(h, w_hh, b_hh), 3, -1)
    r = E.sigmoid(ir + hr)
    z = E.sigmoid(iz + hz)
    n = E.tanh(in_ + r * hn)
    return (1 - z) * n + z * h


def _rnn_cell(op, act, input, hx, w_ih, w_hh, b_ih, b_hh):
    x, h = to_tensor(input), to_tensor(hx)
    w_ih, w_hh = to_tensor(w_ih), to_tensor(w_hh)
    _check_cell(op, x, h, w_ih, w_hh, 1)
    return act(_linear(x, w_ih, b_ih) + _linear(h, w_hh, b_hh))


@export
def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.rnn_tanh_cell``: tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)."""
    return _rnn_cell("rnn_tanh_cell", E.tanh, input, hx, w_ih, w_hh, b_ih, b_hh)


@export
def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.rnn_relu_cell``: relu(x W_ih^T + b_ih + h W_hh^T + b_hh)."""
    return _rnn_cell("rnn_relu_cell", E.relu, input, hx, w_ih, w_hh, b_ih, b_hh)


# ------------------------------------------------------------ top-level in-place forms


@export
def index_put_(input, indices, values, accumulate: bool = False):
    """``torch.index_put_``: ``input.index_put_(indices, values, accumulate)``."""
    return input.index_put_(indices, values, accumulate)


@export
def gcd_(input, other):
    """``torch.gcd_``: ``input.gcd_(other)``."""
    return input.gcd_(other)


@export
def lcm_(input, other):
    """``torch.lcm_``: ``input.lcm_(other)``."""
    return input.lcm_(other)


@export
def addmv_(input, mat, vec, *, beta=1, alpha=1):
    """``torch.addmv_``: ``input.addmv_(mat, vec, beta=beta, alpha=alpha)``."""
    return input.addmv_(mat, vec, beta=beta, alpha=alpha)


@export(method=True)
def conj_physical_(input):
    """``torch.conj_physical_`` / ``x.conj_physical_()``: a complex tensor conjugated in place;
    a real one is returned unchanged."""
    if not input.dtype.is_complex:
        return input
    return input._inplace("conj_physical_", E.conj_physical)


def _memory_order(x):
    """None for a contiguous tensor (or one being recorded); the dims' memory order for a
    dense permuted one; a refusal for other layouts."""
    if getattr(x, "_data", None) is None or x.is_contiguous():  # (recorded: a graph value)
        return None
    if x.storage_offset() != 0 or not x.permute(x.dim_order()).is_contiguous():
        raise ArgumentError(
            f"the input (shape {fmt_shape(x.shape)}, strides {x.stride()}, offset "
            f"{x.storage_offset()}) is a view that does not cover its memory densely; call "
            ".contiguous() first",
            op="as_strided_scatter",
        )
    return x.dim_order()


@export
def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """``torch.as_strided_scatter``: a copy of ``input`` with ``src`` written where
    ``input.as_strided(size, stride, storage_offset)`` would view it, the positions counted
    over ``input``'s memory (its layout: a transposed input's memory order; views that do not
    cover their memory densely are refused). Differentiable in both: ``src``'s gradient is
    the viewed part of the output's, ``input``'s the rest (PyTorch 2.13's CPU backward gives
    the input the viewed part instead, a bug ember does not copy)."""
    x, s = to_tensor(input), to_tensor(src)
    size, stride = tuple(int(v) for v in size), tuple(int(v) for v in stride)
    if len(size) != len(stride):
        raise ShapeError(
            f"mismatch in length of strides and shape ({list(size)} and {list(stride)})",
            op="as_strided_scatter",
        )
    if tuple(s.shape) != size:
        raise ShapeError(
            f"expected src to have a size equal to the slice of self. src size = "
            f"{list(s.shape)}, slice size = {list(size)}",
            op="as_strided_scatter",
        )
    offset = 0 if storage_offset is None else int(storage_offset)
    order = _memory_order(x)
    if order is not None:  # positions count x's memory: scatter into x in its memory order
        inverse = [0] * len(order)
        for i, d in enumerate(order):
            inverse[d] = i
        out = as_strided_scatter(E.permute(x, order), s, size, stride, offset)
        return E.permute(out, tuple(inverse))
    positions = E.full(size, offset, dtype=dt.int64)
    for k, (n, step) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[k] = n
        positions = positions + E.reshape(E.arange(n) * step, shape)
    flat = E.reshape(x, (-1,))
    n = flat.shape[0]
    if positions.numel() and (
        offset < 0 or offset + sum((a - 1) * b for a, b in zip(size, stride)) >= n
    ):
        raise ShapeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset} "
            f"out of bounds for a tensor of {n} elements",
            op="as_strided_scatter",
        )
    out = E.index_put(flat, (E.reshape(positions, (-1,)),), E.reshape(E.cast(s, x.dtype), (-1,)))
    return E.reshape(out, tuple(x.shape))


@export(method=True)
def nonzero_static(input, *, size: int, fill_value: int = -1):
    """``torch.nonzero_static``: `nonzero`'s (n, ndim) indices cut or padded with
    ``fill_value`` to exactly ``size`` rows. Reads the data (eager, as `nonzero`)."""
    x = to_tensor(input)
    if not isinstance(size, int) or size < 0:
        raise ArgumentError(f"nonzero_static: 'size' must be a non-negative int, got {size!r}")
    found = E.nonzero(x)
    n = found.shape[0]
    if n >= size:
        return E.narrow(found, 0, 0, size)
    pad = E.full((size - n, x.ndim), int(fill_value), dtype=dt.int64)
    return E.cat([found, pad], 0)


@export
def empty_permuted(
    size,
    physical_layout,
    *,
    dtype=None,
    layout=None,
    device=None,
    requires_grad: bool = False,
    pin_memory: bool = False,
):
    """``torch.empty_permuted``: an uninitialized tensor of logical shape ``size`` whose
    memory holds its dimensions in ``physical_layout``'s order (outermost first): an
    ``empty`` of the permuted shape, viewed back."""
    size, order = tuple(int(v) for v in size), tuple(int(v) for v in physical_layout)
    if sorted(order) != list(range(len(size))):
        raise ShapeError(
            f"physical_layout {list(order)} is not a permutation of the {len(size)} dims",
            op="empty_permuted",
        )
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    physical = E.empty(*[size[d] for d in order], dtype=dtype)
    out = E.permute(physical, tuple(inverse))
    if requires_grad:
        out.requires_grad_(True)
    return out


# ---------------------------------------------------------------------------- placement


@export
def get_device(input) -> int:
    """``torch.get_device``: -1, a CPU tensor's device index (as ``x.get_device()``)."""
    return to_tensor(input).get_device()


@export
def is_storage(obj) -> bool:
    """``torch.is_storage``: False: ember has no storage objects (a tensor's memory is its
    NumPy array; ``x.numpy()`` shares it)."""
    return False


_DEFAULT_TYPES = {
    "FloatTensor": dt.float32,
    "DoubleTensor": dt.float64,
    "HalfTensor": dt.float16,
    "BFloat16Tensor": dt.bfloat16,
}


@export
def set_default_tensor_type(t) -> None:
    """``torch.set_default_tensor_type`` (deprecated in PyTorch, with its warning): the
    default floating dtype from a legacy tensor type (``ember.DoubleTensor``) or its name
    (``"torch.DoubleTensor"``); only floating types, as PyTorch's."""
    warnings.warn(
        "torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
        "torch.set_default_dtype() and torch.set_default_device() as alternatives.",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    name = t if isinstance(t, str) else getattr(t, "__name__", None)
    if not isinstance(name, str):
        raise ArgumentTypeError(
            f"set_default_tensor_type: expected a tensor type or its name, got {t!r}"
        )
    base = name.rsplit(".", 1)[-1]
    if base not in _DEFAULT_TYPES:
        raise ArgumentTypeError(
            f"only floating-point types are supported as the default type, got {name}"
        )
    dt.set_default_dtype(_DEFAULT_TYPES[base])
