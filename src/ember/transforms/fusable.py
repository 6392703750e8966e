"""Which elementwise calls a fused C loop can run: shared by fusion (transforms/fuse.py) and
matmul epilogues (transforms/epilogue.py), which fusion plans with to choose its groups."""

from __future__ import annotations

from .. import dtypes as dt
from ..kernels.ccompile import compiler_available
from ..ops._registry import native_code

__all__ = ["FUSABLE_DTYPES", "fusable", "fusable_dtypes"]

# (half precision: 16-bit loads and stores, float arithmetic, kernels/cfuse.py)
HALF = (dt.bfloat16, dt.float16)
FUSABLE_DTYPES = (dt.float32, dt.float64, dt.bool_, *HALF)
_WITHOUT_C = (dt.float32, dt.float64, dt.bool_)


def fusable_dtypes() -> tuple:
    """Half precision fuses only into C loops: without a compiler a fused group runs NumPy
    instruction by instruction, and an op alone keeps its own kernel and workspace rule (a
    half-precision op's NumPy kernel widens to float32: the planner counts that there)."""
    return FUSABLE_DTYPES if compiler_available() else _WITHOUT_C


def fusable(node) -> bool:
    """Whether ``node`` is an elementwise call a fused loop can compute."""
    if node.kind != "call" or node.op.kind != "elementwise" or node.op.c is None:
        return False
    if len(node.outputs) != 1 or not native_code(node):
        return False
    dtypes = fusable_dtypes()
    return all(v.dtype in dtypes for v in list(node.inputs) + node.outputs)
