"""PyTorch's top-level spellings of nn.functional's functions (``torch.cosine_similarity``,
``torch.kl_div``, ``torch.batch_norm``, ...) with the top-level signatures, which differ from
the functional ones where aten's do: ``reduction`` is aten's integer enum (0 none, 1 mean,
2 sum), and its default is 0: PyTorch's top-level losses do not reduce unless asked,
``torch.embedding`` takes the weight first with ``padding_idx=-1`` for none,
``torch.batch_norm`` / ``instance_norm`` take every argument positionally (``cudnn_enabled``
is accepted and has no effect), the dropouts' ``train`` is required; plus the small top-level
functions ``row_stack``, ``range``, ``scalar_tensor``, ``fill``, ``detach``, ``is_same_size``,
``is_signed``, ``is_inference`` and ``typename``.
"""

from __future__ import annotations

import math
import warnings

from .. import dtypes as dt
from ..errors import ArgumentError, EmberError, user_stacklevel
from ..grad_mode import InferenceVersion
from ..ops import api as E
from ..ops._registry import FUNCTIONAL, TensorBase, export
from ..ops.promotion import to_tensor
from .distance import margin_ranking_terms

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(name: str, value) -> str:
    if isinstance(value, str) and value in _REDUCTIONS.values():
        return value  # (ember also takes functional's spelling)
    try:
        return _REDUCTIONS[int(value)]
    except (KeyError, TypeError, ValueError):
        raise ArgumentError(
            f"{name}: reduction must be 0 (none), 1 (mean) or 2 (sum), got {value!r}"
        ) from None


def _same(name: str):
    """The functional function itself, also as ``ember.<name>`` (same signature as torch's)."""
    export(FUNCTIONAL[name], name=name, functional=True)


for _name in (
    "cosine_similarity",
    "pairwise_distance",
    "pixel_shuffle",
    "pixel_unshuffle",
    "channel_shuffle",
    "bilinear",
):
    _same(_name)


@export
def embedding(weight, indices, padding_idx: int = -1, scale_grad_by_freq=False, sparse=False):
    """``torch.embedding``: rows of ``weight`` at ``indices`` (weight first; a negative
    ``padding_idx`` means none, a non-negative one gets no gradient)."""
    return FUNCTIONAL["embedding"](
        indices,
        weight,
        padding_idx=padding_idx if padding_idx >= 0 else None,
        scale_grad_by_freq=scale_grad_by_freq,
        sparse=sparse,
    )


@export
def kl_div(input, target, reduction=0, *, log_target: bool = False):
    """``torch.kl_div``: F.kl_div with aten's integer reduction (none by default; 1 is the
    elementwise mean, not F's batchmean)."""
    return FUNCTIONAL["kl_div"](
        input, target, reduction=_reduction("kl_div", reduction), log_target=log_target
    )


@export
def ctc_loss(
    log_probs,
    targets,
    input_lengths,
    target_lengths,
    blank: int = 0,
    reduction=0,
    zero_infinity: bool = False,
):
    """``torch.ctc_loss``: F.ctc_loss with aten's integer reduction."""
    return FUNCTIONAL["ctc_loss"](
        log_probs,
        targets,
        input_lengths,
        target_lengths,
        blank=blank,
        reduction=_reduction("ctc_loss", reduction),
        zero_infinity=zero_infinity,
    )


@export
def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=0):
    """``torch.binary_cross_entropy_with_logits``: pos_weight before the integer reduction."""
    return FUNCTIONAL["binary_cross_entropy_with_logits"](
        input,
        target,
        weight=weight,
        pos_weight=pos_weight,
        reduction=_reduction("binary_cross_entropy_with_logits", reduction),
    )


@export
def batch_norm(
    input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled=True
):
    """``torch.batch_norm``: every argument positional, weight and bias before the statistics;
    ``cudnn_enabled`` has no effect on the CPU."""
    return FUNCTIONAL["batch_norm"](
        input, running_mean, running_var, weight, bias, bool(training), momentum, eps
    )


@export
def instance_norm(
    input,
    weight,
    bias,
    running_mean,
    running_var,
    use_input_stats,
    momentum,
    eps,
    cudnn_enabled=True,
):
    """``torch.instance_norm``: every argument positional (``cudnn_enabled`` has no effect)."""
    return FUNCTIONAL["instance_norm"](
        input, running_mean, running_var, weight, bias, bool(use_input_stats), momentum, eps
    )


@export
def alpha_dropout(input, p: float, train: bool):
    """``torch.alpha_dropout(input, p, train)``."""
    return FUNCTIONAL["alpha_dropout"](input, p, train)


@export
def feature_alpha_dropout(input, p: float, train: bool):
    """``torch.feature_alpha_dropout(input, p, train)``."""
    return FUNCTIONAL["feature_alpha_dropout"](input, p, train)


@export
def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """``torch.poisson_nll_loss``: every argument positional, the reduction an integer."""
    return FUNCTIONAL["poisson_nll_loss"](
        input,
        target,
        log_input=log_input,
        full=full,
        eps=eps,
        reduction=_reduction("poisson_nll_loss", reduction),
    )


@export
def hinge_embedding_loss(input, target, margin: float = 1.0, reduction=0):
    """``torch.hinge_embedding_loss`` with the integer reduction."""
    return FUNCTIONAL["hinge_embedding_loss"](
        input, target, margin=margin, reduction=_reduction("hinge_embedding_loss", reduction)
    )


@export
def cosine_embedding_loss(input1, input2, target, margin: float = 0.0, reduction=0):
    """``torch.cosine_embedding_loss`` with the integer reduction."""
    return FUNCTIONAL["cosine_embedding_loss"](
        input1,
        input2,
        target,
        margin=margin,
        reduction=_reduction("cosine_embedding_loss", reduction),
    )


@export
def margin_ranking_loss(input1, input2, target, margin: float = 0.0, reduction=0):
    """``torch.margin_ranking_loss`` with the integer reduction; as aten's op, the operands
    broadcast (F.margin_ranking_loss wants one rank)."""
    reduction = _reduction("margin_ranking_loss", reduction)
    return margin_ranking_terms(input1, input2, target, margin, reduction, same_ndim=False)


@export
def triplet_margin_loss(
    anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction=0
):
    """``torch.triplet_margin_loss`` with the integer reduction."""
    return FUNCTIONAL["triplet_margin_loss"](
        anchor,
        positive,
        negative,
        margin=margin,
        p=p,
        eps=eps,
        swap=swap,
        reduction=_reduction("triplet_margin_loss", reduction),
    )


@export
def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training: bool = False, generator=None):
    """``torch.rrelu``: F.rrelu without ``inplace``."""
    return FUNCTIONAL["rrelu"](input, lower, upper, training, generator=generator)


@export
def constant_pad_nd(input, pad, value=0):
    """``torch.constant_pad_nd``: F.pad with mode "constant" (negative pads crop)."""
    return FUNCTIONAL["pad"](input, list(pad), mode="constant", value=value)


@export
def row_stack(tensors):
    """PyTorch's alias of ``vstack``."""
    return E.vstack(tensors)


@export
def range(start, end, step=1, *, dtype=None, requires_grad=False):  # noqa: A001 (torch's name)
    """Deprecated in PyTorch (and warned about, as there): values from ``start`` to ``end``
    *inclusive* by ``step``, in the default float dtype unless ``dtype`` is given;
    ``floor((end - start) / step) + 1`` values."""
    warnings.warn(
        "ember.range is deprecated, as torch.range is: its end is inclusive, unlike Python's "
        "range; use ember.arange, which produces values in [start, end).",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    if step == 0:
        raise ArgumentError("step must be nonzero", op="range")
    if (end - start) * step < 0:
        raise ArgumentError("upper bound and lower bound inconsistent with step sign", op="range")
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    count = math.floor((float(end) - float(start)) / float(step)) + 1
    steps = E.arange(count, dtype=dt.float64)
    out = (steps * float(step) + float(start)).to(d)
    return out.requires_grad_() if requires_grad else out


@export
def scalar_tensor(s, *, dtype=None, requires_grad=False):
    """A 0-d tensor holding ``s``, in the default float dtype unless ``dtype`` is given (an
    int or bool too, unlike ``ember.tensor``)."""
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if d in (dt.float16, dt.bfloat16) and type(s) in (int, float) and not -65504 <= s <= 65504:
        # (PyTorch's scalar_tensor writes a number beyond a 16-bit dtype's range as an
        # infinity, where full refuses it; float32 refuses it too)
        out = E.cast(E.full((), float(s), dtype=dt.float64), d)
    else:
        out = E.full((), s, dtype=d)
    return out.requires_grad_() if requires_grad else out


@export
def fill(input, value):
    """A new tensor of the input's shape and dtype filled with ``value`` (a number or a 0-d
    tensor, which then gets the gradient: the sum of the result's)."""
    x = to_tensor(input)
    if isinstance(value, TensorBase):
        if value.ndim != 0:
            raise EmberError(
                f"fill only supports a 0-dimension value tensor, but got one with {value.ndim} "
                "dimension(s)",
                op="fill",
            )
        value = value.to(x.dtype)
    else:
        value = E.full((), value, dtype=x.dtype)
    # a select rather than a fresh tensor: as PyTorch's, the result stays in the input's graph
    # (a zero gradient to it) and the value's gradient is the sum of the result's
    everywhere = E.full(x.shape, True, dtype=dt.bool_)
    return E.where(everywhere, value, x)


@export
def detach(input):
    """``input.detach()``: the same values, cut from the graph."""
    return to_tensor(input).detach()


@export(method=True)
def is_same_size(input, other) -> bool:
    """Whether two tensors have the same shape."""
    return tuple(input.shape) == tuple(other.shape)


@export(method=True)
def is_signed(input) -> bool:
    """Whether the tensor's dtype is signed (floats and the signed integers; not uint8, bool)."""
    return input.dtype.is_signed


@export(method=True)
def is_inference(input) -> bool:
    """Whether ``input`` is an inference tensor: made while an ``ember.inference_mode()`` region
    was active (a view of one is one too; a view made there of an ordinary tensor is not), as
    PyTorch's (grad_mode.py `InferenceVersion`)."""
    return type(getattr(to_tensor(input), "_vc", None)) is InferenceVersion


@export
def typename(obj) -> str:
    """PyTorch's name of an object's type: ``x.type()`` for a tensor ("torch.FloatTensor"),
    else the object's module and qualified name (builtins bare)."""
    if isinstance(obj, TensorBase):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"
