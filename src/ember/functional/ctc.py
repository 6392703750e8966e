"""``ctc_loss`` (PyTorch's F.ctc_loss) over the ``ctc_loss`` primitive (ops/ctc.py).

The primitive gives each sequence's negative log-likelihood; this module normalises the
arguments (lengths as tensors or sequences of ints, an unbatched (T, C) input) and applies the
reduction: ``'mean'`` divides each loss by its target length (at least 1) and averages over the
batch, as PyTorch does.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import DTypeError
from ..ops import api as E
from ..ops._autocast import Autocast, autocasts
from ..ops._registry import apply, export
from ..ops.ctc import CTC_LOSS
from ..ops.promotion import to_tensor
from ._common import float_input, reduction_arg


def _lengths(value, what: str):
    if isinstance(value, (list, tuple, int, np.ndarray)):
        value = to_tensor(np.asarray(value, dtype=np.int64))
    t = to_tensor(value)
    if not t.dtype.is_integer:
        raise DTypeError(f"{what} must hold integers, got {t.dtype}", op="ctc_loss")
    return E.cast(t, dtypes.int64) if t.dtype is not dtypes.int64 else t


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def ctc_loss(
    log_probs,
    targets,
    input_lengths,
    target_lengths,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
):
    """The CTC loss of ``log_probs`` (T, N, C) (log-softmax outputs; or unbatched (T, C))
    against ``targets``, padded (N, S) or concatenated 1-D, with each sequence's
    ``input_lengths`` and ``target_lengths``. ``zero_infinity`` replaces the infinite losses of
    impossible alignments (and their gradients) by 0. The gradient with respect to
    ``log_probs`` is PyTorch's (see ops/ctc.py): exact for the logits when ``log_probs`` is a
    ``log_softmax``."""
    red = reduction_arg("ctc_loss", reduction)
    lp = float_input("ctc_loss", log_probs, "log_probs")
    tg = to_tensor(targets)
    if not tg.dtype.is_integer:
        raise DTypeError(f"targets must be an integer tensor, got {tg.dtype}", op="ctc_loss")
    unbatched = lp.ndim == 2
    il = _lengths(input_lengths, "input_lengths")
    tl = _lengths(target_lengths, "target_lengths")
    if unbatched:
        lp = E.unsqueeze(lp, 1)
        il, tl = E.reshape(il, (1,)), E.reshape(tl, (1,))
        concatenated = False
        tg = E.reshape(tg, (1, -1))
    else:
        concatenated = tg.ndim == 1
    if tg.dtype is not dtypes.int64:
        tg = E.cast(tg, dtypes.int64)
    nll = apply(
        CTC_LOSS,
        lp,
        tg,
        il,
        tl,
        blank=int(blank),
        concatenated=concatenated,
        zero_inf=bool(zero_infinity),
    )
    if unbatched:
        nll = E.reshape(nll, ())
    if red == "none":
        return nll
    if red == "sum":
        return E.sum(nll)
    per_label = nll / E.clamp(E.cast(tl if not unbatched else E.reshape(tl, ()), lp.dtype), min=1)
    return E.mean(per_label)
