"""The ``limited`` rule's ops: those PyTorch 2.13 has CPU kernels for on its uint16, uint32
and uint64 tensors ("shell" dtypes, dtypes.py `LIMITED_DTYPES`): casts, copies and data
movement, equality comparisons, bitwise and, or and xor, multiplication, and the integer
reductions (to int64, as for every integer dtype); sort's gather too. Any other op refuses
such an operand with a KernelDTypeError (a NotImplementedError), as PyTorch's kernels do
(ops/_registry.py `_refuse_special`). Declared here, after every op is registered, as one list
beside its reason, rather than one keyword in a dozen families' factories."""

from __future__ import annotations

from ._registry import REGISTRY

TAKES_LIMITED = (
    "cast", "copy", "reshape", "permute", "getitem", "broadcast_to", "concat", "split",
    "index", "eq", "ne", "mul", "bitwise_and", "bitwise_or", "bitwise_xor", "sum", "cumsum",
    "prod", "any", "all", "argsort", "gather", "unique", "view_dtype",
)  # fmt: skip


def declare() -> None:
    for name in TAKES_LIMITED:
        REGISTRY[name].limited = True
