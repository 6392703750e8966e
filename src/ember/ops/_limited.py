"""The ``limited`` rule's ops: those PyTorch 2.13 has CPU kernels for on its uint16, uint32
and uint64 tensors ("shell" dtypes, dtypes.py `LIMITED_DTYPES`): casts, copies and data
movement, equality comparisons, bitwise and, or and xor, multiplication, and the integer
reductions (to int64, as for every integer dtype); sort's gather too. Any other op refuses
such an operand with a KernelDTypeError (a NotImplementedError), as PyTorch's kernels do
(ops/_registry.py `_refuse_special`). Declared here, after every op is registered, as one list
beside its reason, rather than one keyword in a dozen families' factories."""

from __future__ import annotations

from ._registry import REGISTRY, limited_refusal

TAKES_LIMITED = (
    "cast", "copy", "reshape", "permute", "getitem", "broadcast_to", "concat", "split",
    "index", "eq", "ne", "mul", "bitwise_and", "bitwise_or", "bitwise_xor", "sum", "cumsum",
    "prod", "any", "all", "argsort", "gather", "unique", "view_dtype", "where",
    "unique_consecutive", "tile", "pad", "diagonal_view", "unfold_view", "as_strided_view",
    "isfinite", "isnan", "isinf", "cumprod",
)  # fmt: skip


def refuse_limited(name: str, *operands) -> None:
    """A public function PyTorch has no kernel for on uint16/uint32/uint64 (topk, isin,
    arange's dtype, ...) refuses such an operand or dtype by its own name, where the
    primitives it is built of (sort's gather, a cast) would take it. Other operands pass."""
    for v in operands:
        dtype = getattr(v, "dtype", v)
        if getattr(dtype, "limited", False):
            raise limited_refusal(name, dtype)


def declare() -> None:
    for name in TAKES_LIMITED:
        REGISTRY[name].limited = True
