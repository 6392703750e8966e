"""PyTorch's ``torch.nn.attention.flex_attention``: attention whose scores a program modifies
with a ``score_mod(score, b, h, q_idx, kv_idx)`` and masks with a
``mask_mod(b, h, q_idx, kv_idx)``, each written elementwise over the indices.

ember computes it as PyTorch's eager (unfused) implementation does: the full scores
``query @ key^T * scale`` in float32 (float64 for float64 inputs), the score_mod applied, the
masked scores set to -inf, a softmax whose fully masked rows give zeros (not NaN), and the
product with the values in the inputs' dtype; the log-sum-exp of a fully masked row is -inf.
PyTorch vectorizes the mods with vmap over the four indices; ember calls them once on index
tensors shaped to broadcast against the (B, H, L, S) scores (``b`` (B,1,1,1), ``h`` (1,H,1,1),
``q_idx`` (1,1,L,1), ``kv_idx`` (1,1,1,S), int64), which is the same for mods made of
arithmetic, comparisons, ``torch.where`` and indexing of tensors by the indices; like vmap, it
refuses Python control flow on their values. Everything is ember ops, so gradients flow to the
query, key and value (PyTorch has no backward on the CPU) and to tensors a mod closes over, and
the call captures.

`BlockMask` holds the mask_mod and its block structure (which BLOCK_SIZE tiles hold any
unmasked position, which hold only unmasked ones); ember reads the mask_mod itself, element by
element, so the structure only answers the questions programs ask of it (``to_dense``,
``sparsity``, ``shape``, ``kv_num_blocks``, printing).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import NamedTuple

from ... import dtypes as dt
from ...errors import ArgumentError, ShapeError, UnsupportedError
from ...graph.tree import is_tensor
from ...ops import api as E
from ...tensor import Tensor

__all__ = [
    "AuxOutput",
    "AuxRequest",
    "BlockMask",
    "and_masks",
    "create_block_mask",
    "create_mask",
    "flex_attention",
    "noop_mask",
    "or_masks",
]

_DEFAULT_BLOCK = 128


class AuxRequest(NamedTuple):
    """Which extra outputs `flex_attention` returns (``return_aux=``)."""

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """The extra outputs `flex_attention` returned (None where not requested)."""

    lse: Tensor | None = None
    max_scores: Tensor | None = None


def noop_mask(b, h, q_idx, kv_idx) -> Tensor:
    """The mask_mod that masks nothing."""
    return E.ones((), dtype=dt.bool_)


def _score_identity(score, b, h, q_idx, kv_idx):
    return score


def _check_mods(mods, name: str) -> None:
    if not all(callable(m) for m in mods):
        raise ArgumentError(f"All inputs should be callable mask_mods: {mods}", op=name)


def or_masks(*mask_mods: Callable) -> Callable:
    """A mask_mod that lets a position through where any of ``mask_mods`` does."""
    _check_mods(mask_mods, "or_masks")

    def or_mask(b, h, q_idx, kv_idx):
        result = E.zeros((), dtype=dt.bool_)
        for mod in mask_mods:
            result = result | mod(b, h, q_idx, kv_idx)
        return result

    return or_mask


def and_masks(*mask_mods: Callable) -> Callable:
    """A mask_mod that lets a position through where all of ``mask_mods`` do."""
    _check_mods(mask_mods, "and_masks")

    def and_mask(b, h, q_idx, kv_idx):
        result = E.ones((), dtype=dt.bool_)
        for mod in mask_mods:
            result = result & mod(b, h, q_idx, kv_idx)
        return result

    return and_mask


def _indices(sizes) -> list:
    """b, h, q_idx, kv_idx: int64 ranges shaped to broadcast against (B, H, L, S)."""
    out = []
    for axis, n in enumerate(sizes):
        shape = [1, 1, 1, 1]
        shape[axis] = n
        out.append(E.arange(n).reshape(shape))
    return out


def _evaluate_mask(mask_mod: Callable, sizes) -> Tensor:
    mask = mask_mod(*_indices(sizes))
    if not is_tensor(mask):  # (a Python bool; a traced tensor while a call is captured)
        mask = E.tensor(mask)
    if mask.dtype != dt.bool_:
        raise ArgumentError(
            f"a mask_mod returns booleans (True: attend), got {mask.dtype}", op="flex_attention"
        )
    return E.broadcast_to(mask, tuple(sizes))


def create_mask(mod_fn: Callable, B, H, Q_LEN: int, KV_LEN: int, device="cpu") -> Tensor:  # noqa: N803
    """The dense (B, H, Q_LEN, KV_LEN) boolean mask of a mask_mod (B or H None: 1); a
    score_mod (five arguments) gives its scores of zeros instead."""
    sizes = (B or 1, H or 1, Q_LEN, KV_LEN)
    if _arity(mod_fn) == 5:
        scores = E.zeros(sizes, dtype=dt.float32)
        return E.broadcast_to(mod_fn(scores, *_indices(sizes)), sizes)
    return _evaluate_mask(mod_fn, sizes)


def _arity(fn: Callable) -> int:
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 4
    return sum(
        p.default is inspect.Parameter.empty and p.kind.name != "VAR_KEYWORD" for p in params
    )


def _block_size(value) -> tuple[int, int]:
    if isinstance(value, int):
        return (value, value)
    q, kv = value
    return (int(q), int(kv))


class BlockMask:
    """A mask_mod with its block structure over (B, H, Q_LEN, KV_LEN) in BLOCK_SIZE tiles
    (see the module docstring): ``kv_num_blocks`` / ``kv_indices`` count and list each query
    block's partly unmasked key blocks, ``full_kv_num_blocks`` / ``full_kv_indices`` its
    wholly unmasked ones, as PyTorch's int32 tensors."""

    def __init__(self, mask_mod: Callable, seq_lengths, block_size, dense_blocks, full_blocks):
        self.mask_mod = mask_mod
        self.seq_lengths = tuple(seq_lengths)
        self.BLOCK_SIZE = block_size
        partial = dense_blocks & ~full_blocks
        self.kv_num_blocks, self.kv_indices = _ordered(partial)
        self.full_kv_num_blocks, self.full_kv_indices = _ordered(full_blocks)
        self.q_num_blocks, self.q_indices = _ordered(partial.transpose(-2, -1))
        self.full_q_num_blocks, self.full_q_indices = _ordered(full_blocks.transpose(-2, -1))
        self._dense = dense_blocks

    @property
    def shape(self) -> tuple:
        return (*self.kv_num_blocks.shape[:2], *self.seq_lengths)

    def to_dense(self) -> Tensor:
        """(B, H, query blocks, key blocks) int32: 1 where a block holds an unmasked position."""
        return self._dense.to(dt.int32)

    def numel(self) -> int:
        """The number of positions the mask covers, B * H * Q_LEN * KV_LEN."""
        return math.prod(self.shape)

    def sparsity(self) -> float:
        """The percentage of positions in blocks a fused kernel skips, PyTorch's count: the
        computed blocks' full tiles against `numel` (negative where the lengths are shorter
        than a block, as PyTorch's)."""
        computed = int(self._dense.sum().item()) * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1]
        return 100.0 * (1.0 - computed / self.numel())

    def as_tuple(self) -> tuple:
        return (
            *self.seq_lengths,
            self.kv_num_blocks,
            self.kv_indices,
            self.full_kv_num_blocks,
            self.full_kv_indices,
            self.q_num_blocks,
            self.q_indices,
            self.full_q_num_blocks,
            self.full_q_indices,
            *self.BLOCK_SIZE,
            self.mask_mod,
        )

    def to_string(self, grid_size=(20, 20), limit: int = 4) -> str:
        dense = self._dense
        lines = []
        for b in range(min(dense.shape[0], limit)):
            for h in range(min(dense.shape[1], limit)):
                lines.append(f"({b}, {h})")
                for row in dense[b, h, : grid_size[0], : grid_size[1]].tolist():
                    lines.append("".join("██" if v else "  " for v in row))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n"
            f"{self.to_string()}\n)"
        )


def _ordered(blocks: Tensor) -> tuple[Tensor, Tensor]:
    """Per row, the number of set blocks and the block indices with the set ones first (in
    order), as PyTorch's ``_dense_to_ordered``."""
    counts = blocks.sum(-1).to(dt.int32)
    order = E.argsort(blocks.to(dt.int32), dim=-1, descending=True, stable=True)
    return counts, order.to(dt.int32)


def create_block_mask(
    mask_mod: Callable,
    B,  # noqa: N803
    H,  # noqa: N803
    Q_LEN: int,  # noqa: N803
    KV_LEN: int,  # noqa: N803
    device="cpu",
    BLOCK_SIZE=_DEFAULT_BLOCK,  # noqa: N803
    _compile: bool = False,
) -> BlockMask:
    """The `BlockMask` of ``mask_mod`` over (B, H, Q_LEN, KV_LEN) (B or H None: shared by
    every batch element or head)."""
    if not callable(mask_mod) or _arity(mask_mod) != 4:
        raise ArgumentError(
            "create_block_mask takes a mask_mod(b, h, q_idx, kv_idx); a score_mod belongs to "
            "flex_attention's score_mod",
            op="create_block_mask",
        )
    block = _block_size(BLOCK_SIZE)
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN)
    dense, full = _blocks(mask, block)
    return BlockMask(mask_mod, (Q_LEN, KV_LEN), block, dense, full)


def _blocks(mask: Tensor, block: tuple[int, int]) -> tuple[Tensor, Tensor]:
    """Which (query block, key block) tiles hold any unmasked position, and which only
    unmasked ones (a tile past the end counts its real positions only)."""
    b, h, q_len, kv_len = mask.shape
    nq, nkv = -(-q_len // block[0]), -(-kv_len // block[1])
    padded = E.zeros((b, h, nq * block[0], nkv * block[1]), dtype=dt.bool_)
    real = E.zeros((b, h, nq * block[0], nkv * block[1]), dtype=dt.bool_)
    padded[:, :, :q_len, :kv_len] = mask
    real[:, :, :q_len, :kv_len] = True
    tiles = (b, h, nq, block[0], nkv, block[1])
    any_set = padded.reshape(tiles).any(5).any(3)
    all_set = (padded | ~real).reshape(tiles).all(5).all(3)
    return any_set, all_set & any_set


def _check_inputs(query, key, value, block_mask, enable_gqa: bool) -> None:
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise UnsupportedError(
            "query, key and value must be 4-D (B, H, L, E) tensors, got "
            f"{tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}",
            op="flex_attention",
        )
    if query.shape[-1] != key.shape[-1]:
        raise ShapeError(
            f"Expect query and key/value to have the same embedding dimension but got "
            f"E={query.shape[-1]} and E={key.shape[-1]}.",
            op="flex_attention",
        )
    hq, hkv = query.shape[1], key.shape[1]
    if not enable_gqa and hq != hkv:
        raise ShapeError(
            f"Expect query and key/value to have the same number of heads but got Hq={hq} and "
            f"Hkv={hkv}. Try setting enable_gqa=True for GQA.",
            op="flex_attention",
        )
    if enable_gqa and hq % hkv != 0:
        raise ShapeError(
            f"Expect number of query heads to be a multiple of kv heads for GQA but got "
            f"Hq={hq} and Hkv={hkv}.",
            op="flex_attention",
        )
    bq, bkv = query.shape[0], key.shape[0]
    if bq != bkv and not (bq > 1 and bkv == 1 and block_mask and block_mask.shape[0] == bq):
        # (PyTorch's rule: a key batch of one is broadcast given a block mask of the query's)
        raise ShapeError(
            f"Expect query and key/value to have the same batch size, or block_mask and query "
            f"to have the same batch size, but got Bq={bq}, Bkv={bkv} and block_mask "
            f"{None if block_mask is None else block_mask.shape}.",
            op="flex_attention",
        )
    if block_mask is not None and tuple(block_mask.seq_lengths) != (
        query.shape[-2],
        key.shape[-2],
    ):
        raise ShapeError(
            f"block_mask was created for block_mask.shape={block_mask.shape} but got "
            f"q_len={query.shape[-2]} and kv_len={key.shape[-2]}; create a block mask for "
            "these lengths",
            op="flex_attention",
        )


def flex_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    score_mod: Callable | None = None,
    block_mask: BlockMask | None = None,
    scale: float | None = None,
    enable_gqa: bool = False,
    return_lse: bool = False,
    kernel_options: dict | None = None,
    *,
    return_aux: AuxRequest | None = None,
):
    """Attention of ``query`` (B, Hq, L, E) over ``key`` (B, Hkv, S, E) and ``value``
    (B, Hkv, S, Ev) with ``score_mod`` and ``block_mask``'s mask_mod applied to the scores (see
    the module docstring); returns (B, Hq, L, Ev), with the log-sum-exp (B, Hq, L) where
    ``return_lse`` or ``return_aux=AuxRequest(lse=True)`` asks. ``kernel_options`` tune
    PyTorch's fused kernels and change nothing here."""
    _check_inputs(query, key, value, block_mask, enable_gqa)
    if return_lse and return_aux is not None:
        raise ArgumentError(
            "Cannot specify both return_lse and return_aux. return_lse is deprecated, please "
            "use return_aux=AuxRequest(lse=True) instead.",
            op="flex_attention",
        )
    if return_lse:
        warnings.warn(
            "return_lse is deprecated; use return_aux=AuxRequest(lse=True) instead",
            FutureWarning,
            stacklevel=2,
        )
    batch, heads, q_len, embed = query.shape
    groups = heads // key.shape[1]
    if groups > 1:
        key = E.repeat_interleave(key, groups, dim=1)
        value = E.repeat_interleave(value, groups, dim=1)
    key = key.expand(batch, *key.shape[1:])
    value = value.expand(batch, *value.shape[1:])
    scale = 1.0 / math.sqrt(embed) if scale is None else scale
    working = dt.float64 if query.dtype == dt.float64 else dt.float32
    scores = E.matmul(query.to(working), key.to(working).transpose(-2, -1)) * scale
    sizes = tuple(scores.shape)
    index = _indices(sizes)
    modded = (score_mod or _score_identity)(scores, *index)
    modded = E.broadcast_to(modded, sizes).to(working)
    mask_mod = noop_mask if block_mask is None else block_mask.mask_mod
    mask = _evaluate_mask(mask_mod, sizes)
    masked = E.where(mask, modded, -math.inf)
    empty = ~mask.any(-1, keepdim=True)  # (rows with nothing to attend to: zeros, not NaN)
    safe = E.where(empty, 0.0, masked)
    probs = E.where(empty, 0.0, E.softmax(safe, dim=-1))
    out = E.matmul(probs.to(query.dtype), value.to(query.dtype))
    want_lse = return_lse or (return_aux is not None and return_aux.lse)
    want_max = return_aux is not None and return_aux.max_scores
    lse = E.where(empty[..., 0], -math.inf, E.logsumexp(safe, dim=-1)) if want_lse else None
    top = masked.max(-1).values if want_max else None
    if return_aux is not None:
        return out, AuxOutput(lse=lse, max_scores=top)
    return (out, lse) if return_lse else out
