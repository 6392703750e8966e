"""Matrix products of bfloat16 and float16 operands in C (kernels/chgemm_source.py): the
operands read in 16 bits, converted while the panels are packed, summed in float32, each result
rounded once to the operands' dtype (PyTorch's semantics for a half-precision matmul), with an
optional bias per column added to the float32 sum before its one rounding, as PyTorch does.

bfloat16 runs AVX512_BF16's dot products of pairs where the compiler targets them
(``-march=native`` on such a CPU); ``EMBER_BF16_DOT=0`` forces the portable kernel (float32
panels) for tests and comparisons. `uses_pairs(dtype)` says which one runs.

Products are shared over ember's pool as kernels/cgemm.py shares float32 ones (blocks of batch
entries, rows or columns, one per thread), from the same measured threshold (`split_flops`).

A 2-d product of fewer rows than the micro-kernel's MR runs without packing (dot products of
the 16-bit rows, or sums of rows): the blocked kernel would pad the rows to MR and convert all
of B into panels per call.

`matmul(a, b, out, bias)` returns None where it does not apply (no compiler, operands of
another dtype or of different dtypes, a layout that is neither row-major nor transposed, an
empty product) and the caller runs the reference's way (float32 through NumPy).
"""

from __future__ import annotations

import ctypes
import functools
import math
import os

import numpy as np

from . import chalf
from .blas_layout import blas_layout
from .cstep import data_address

__all__ = ["available", "linear", "matmul", "uses_pairs"]

_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
_ARGS = [_I, _I, _I, _L, _L, _L, _P, _L, _P, _L, _P, _L, _L, _L, _L, _P, _L, _L, _P]
_FEW_ARGS = [_I, _L, _L, _L, _P, _L, _P, _L, _P, _L, _P, _L, _P]
# the micro-kernel's rows (kernels/cmicro.py's MR): fewer rows run `ember_hgemm_few`, which
# does not pad them to MR
_MR = 8


def _pairs_allowed() -> bool:
    return os.environ.get("EMBER_BF16_DOT", "") != "0"


@functools.cache
def _functions(dtype: np.dtype, pairs_allowed: bool):
    """(ember_hgemm, whether it runs AVX512_BF16's dot products, ember_hgemm_few) for
    ``dtype``, or None."""
    from . import ccompile
    from .chgemm_source import HALF_GEMM
    from .cmicro import MICRO

    kind = chalf.HALF.get(dtype)
    if kind is None or not ccompile.compiler_available():
        return None
    source = f"#define T float\n#define HKIND {kind}\n"
    if not pairs_allowed:
        source += "#define EMBER_NO_BF16_DOT\n"
    source += chalf.CONVERT + MICRO + HALF_GEMM
    try:
        fn = ccompile.load(source, "ember_hgemm", _ARGS)
        few = ccompile.load(source, "ember_hgemm_few", _FEW_ARGS)
        probe = ccompile.load(source, "ember_hgemm_pairs", [_P])
    except ccompile.CompileError:
        return None
    pairs = ctypes.c_int(0)
    probe(ctypes.addressof(pairs))
    return fn, bool(pairs.value), few


def available(dtype) -> bool:
    """Whether `matmul` runs ``dtype`` (bfloat16, float16) operands."""
    return _functions(np.dtype(dtype), _pairs_allowed()) is not None


def uses_pairs(dtype) -> bool:
    """Whether ``dtype``'s products run AVX512_BF16's dot products here (else float32 panels)."""
    functions = _functions(np.dtype(dtype), _pairs_allowed())
    return functions is not None and functions[1]


def matmul(
    a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, bias: np.ndarray | None = None
) -> np.ndarray | None:
    """``a @ b`` (+ ``bias``, a vector of one value per column) for bfloat16 or float16
    operands of at least 2 dimensions and one dtype, written into ``out`` (C-contiguous, the
    result's shape and dtype) or a new array; None where it does not apply."""
    from . import cgemm

    if a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.shape[-1] != b.shape[-2]:
        return None
    functions = _functions(a.dtype, _pairs_allowed())
    if functions is None:
        return None
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if bias is not None and (bias.dtype != a.dtype or bias.shape not in ((n,), (1, n))):
        return None
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return None
    count = math.prod(batch)
    if 0 in (m, n, k, count):
        return None
    if b.ndim == 2 and a.ndim > 2:  # (..., M, K) @ (K, N) as one product of all the rows
        if out is not None and not out.flags.c_contiguous:
            return None
        flat = None if out is None else out.reshape(-1, n)  # (a view: written in place)
        result = matmul(np.reshape(a, (-1, k)), b, flat, bias)
        if result is None or out is not None:
            return None if result is None else out
        return result.reshape(a.shape[:-1] + (n,))
    if not batch and m < _MR:
        return _few(functions, a, b, out, bias)
    operands = [cgemm._in_place(x, batch) for x in (a, b)]
    for i, x in enumerate((a, b)):
        if operands[i] is None:  # batch dimensions broadcast partly: copied out in full
            full = np.broadcast_to(x, tuple(batch) + x.shape[-2:])
            operands[i] = cgemm._in_place(np.ascontiguousarray(full), batch)
    (a, sa, la), (b, sb, lb) = operands
    shape = tuple(batch) + (m, n)
    out = cgemm.result_buffer(out, shape, a, b)
    if out is None:
        return None
    if bias is not None:
        bias = np.ascontiguousarray(bias.reshape(n))
    split, parts, unit = cgemm._split(count, m, n, 4)
    from . import cpool

    threaded = 2 * m * n * k * count >= cgemm.split_flops()
    pool = cpool.parallel_for() if threaded else None
    align = cgemm.block_align(parts, unit) if threaded else parts
    functions[0](
        int(la[0]), int(lb[0]), split, m, n, k, data_address(a), la[1], data_address(b), lb[1],
        data_address(out), n, sa, sb, m * n, None if bias is None else data_address(bias),
        parts, align, pool,
    )  # fmt: skip
    return out


def _few(functions, a, b, out, bias):
    """``a @ b`` (+ ``bias``) for fewer rows than the micro-kernel's MR: `ember_hgemm_few`."""
    from . import cgemm, cpool

    (m, k), n = a.shape, b.shape[1]
    lb = blas_layout(b)
    if lb is None:
        return None
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    if out is None:
        out = np.empty((m, n), a.dtype)
    elif (
        out.shape != (m, n)
        or out.dtype != a.dtype
        or not out.flags.c_contiguous
        or np.may_share_memory(out, a)
        or np.may_share_memory(out, b)
    ):
        return None
    if bias is not None:
        bias = np.ascontiguousarray(bias.reshape(n))
    threaded = cgemm.skinny_shared(m, n, k, a.itemsize)
    pool = cpool.parallel_for() if threaded else None
    align = cgemm.block_align(n, cgemm.skinny_unit(bool(lb[0]), 4)) if threaded else n
    functions[2](
        int(lb[0]), m, n, k, data_address(a), k, data_address(b), lb[1], data_address(out), n,
        None if bias is None else data_address(bias), align, pool,
    )  # fmt: skip
    return out


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None):
    """``F.linear``'s ``x @ weight.T + bias`` in half precision (`matmul`), or None."""
    return matmul(x, weight.T, None, bias)
