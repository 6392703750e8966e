"""The matrix product's kernels (ops/linalg.py): `matmul_kernel`, the reference (NumPy's
product, its BLAS), and `matmul_fast` (ember's GEMM, kernels/cgemm.py), behind one wrapper
that never upcasts float32, passes layouts BLAS reads as they are and folds a batched left
operand times a matrix into one large product; and what they allocate (`product_workspace`).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..kernels.blas_layout import BLAS_ONE_THREAD, blas_ready
from ._util import half_precision, value_bytes

__all__ = [
    "half_gemm_runs",
    "half_plus_bias",
    "matmul_fast",
    "matmul_kernel",
    "packed_linear",
    "batch_copies",
    "product_workspace",
    "small_linear",
]


_HALF = (dt.float16.np, dt.bfloat16.np)


_cgemm: list = []  # kernels/cgemm.py, imported at the first product


def _ember_product(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    if not _cgemm:  # (an import statement here would cost a microsecond per product)
        from ..kernels import cgemm

        _cgemm.append(cgemm)
    return _cgemm[0].gemm(a, b, out)


def packed_linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None):
    """``x @ weight.T + bias`` on the weight's pack where ember's GEMM runs the product on one
    (kernels/cgemm.py `packed_linear`), else None."""
    if not _cgemm:
        from ..kernels import cgemm

        _cgemm.append(cgemm)
    return _cgemm[0].packed_linear(x, weight, bias)


# the dtypes whose products by few rows are NumPy's own (`small_linear`)
_NUMPY_PRODUCT = frozenset(np.dtype(t) for t in (np.float32, np.float64))


def small_linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None):
    """``x @ weight.T + bias`` for a 2-d float32/float64 ``x`` where the product is one that
    kernels/cgemm.py leaves to NumPy (at most its ``BLAS_ONE_THREAD`` multiply-adds, a layer at
    batch one), else None: what `packed_linear` (declining it) and `matmul_fast` then run,
    NumPy's product and the bias added in place, without their layers, which cost such a call
    about as much as the product."""
    dtype = x.dtype
    if x.ndim != 2 or dtype not in _NUMPY_PRODUCT or weight.dtype != dtype:
        return None
    if not _cgemm:
        from ..kernels import cgemm

        _cgemm.append(cgemm)
    if x.shape[0] * x.shape[1] * weight.shape[0] > _cgemm[0].BLAS_ONE_THREAD:
        return None
    # (a row-major weight's transpose is column-major, which BLAS reads in place: only another
    # layout asks `blas_ready`, whose Python costs such a product a tenth of its time)
    wt = weight.T if weight.flags.c_contiguous else blas_ready(weight.T)
    out = np.matmul(x if x.flags.c_contiguous else blas_ready(x), wt)
    if bias is not None:
        out += bias
    return out


def _numpy_product(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return np.matmul(a, b, out=out)


def _matmul(a, b, out, product) -> np.ndarray:
    """``a @ b`` through ``product`` (NumPy's, or ember's GEMM), never upcasting float32,
    reading layouts BLAS takes in place and folding a batched left operand times a 2-D right
    operand into one large product; ``out`` (the result's shape and dtype: an arena slot, see
    plan/arena.py) receives the result where given."""
    if a.dtype in _HALF:  # NumPy has no fast half-precision GEMM: compute in float32, round once
        result = _matmul(a.astype(np.float32), b.astype(np.float32), None, product)
        result = result.astype(a.dtype)
        if out is None:
            return result
        out[...] = result
        return out
    a, b = blas_ready(a), blas_ready(b)
    if b.ndim == 2 and a.ndim > 2 and not a.flags.c_contiguous:
        # a strided batch (a batch-first sequence seen sequence-first, as MultiheadAttention's
        # projections read it) would run as one small product per batch entry, each packing
        # all of b again: one copy of a (M*K values, against M*K*N multiply-adds) folds it
        a = np.ascontiguousarray(a)
    if b.ndim == 2 and a.ndim > 2 and a.flags.c_contiguous:
        # (..., M, K) @ (K, N) as one (prod(...) * M, K) GEMM instead of a loop of small ones
        # (not -1: a zero-size reshape cannot infer it; math.prod: np.prod costs microseconds)
        rows = math.prod(a.shape[:-1])
        flat = None if out is None else out.reshape(rows, b.shape[-1])
        result = product(a.reshape(rows, a.shape[-1]), b, flat)
        return result.reshape(a.shape[:-1] + (b.shape[-1],)) if out is None else out
    return product(a, b, out)


def matmul_kernel(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The ``matmul`` reference kernel: NumPy's product (its BLAS)."""
    return _matmul(a, b, out, _numpy_product)


def matmul_fast(
    a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, bias: np.ndarray | None = None
) -> np.ndarray:
    """The ``matmul`` kernel on ember's GEMM (kernels/cgemm.py: large products split over
    ember's thread pool, no BLAS threads left spinning), equal to the reference to rounding;
    half precision on kernels/chgemm.py (16-bit operands, float32 sums, one rounding), with
    ``bias`` (a vector per column, half precision only) added to the float32 sums before that
    rounding (`half_plus_bias`, PyTorch's arithmetic)."""
    if a.ndim == 2 and b.ndim == 2 and a.shape[0] * a.shape[1] * b.shape[1] <= BLAS_ONE_THREAD:
        if a.dtype not in _HALF:  # (ember's GEMM leaves such a product to NumPy: its layers
            # skipped, which cost an eager product at a few rows more than the product)
            # (a row-major or column-major matrix, a VJP's transposed operand, is one BLAS
            # reads in place: what `blas_ready` answers, without its layout arithmetic)
            a = a if a.flags.c_contiguous or a.flags.f_contiguous else blas_ready(a)
            b = b if b.flags.c_contiguous or b.flags.f_contiguous else blas_ready(b)
            result = np.matmul(a, b, out=out)
            if bias is not None:
                result += bias
            return result
    if a.dtype in _HALF:
        from ..kernels import chgemm

        result = chgemm.matmul(a, b, out, bias)
        if result is not None:
            return result
        if bias is not None:
            return half_plus_bias(a, b, bias, out, _ember_product)
    result = _matmul(a, b, out, _ember_product)
    if bias is not None:
        result += bias
    return result


def half_plus_bias(a, b, bias, out, product=_numpy_product) -> np.ndarray:
    """``a @ b + bias`` for half-precision operands as PyTorch's addmm and linear compute it:
    the product's float32 sums plus the bias (per column) in float32, rounded once to the
    operands' dtype; written into ``out`` where given."""
    wide = _matmul(a.astype(np.float32), b.astype(np.float32), None, product)
    wide += bias.astype(np.float32)
    if out is None:
        return wide.astype(a.dtype)
    out[...] = wide
    return out


def half_gemm_runs(value) -> bool:
    """Whether half-precision products of ``value``'s dtype run kernels/chgemm.py."""
    from ..kernels import chgemm

    return chgemm.available(value.dtype.np)


def product_workspace(a, b, out) -> int:
    """The kernels' temporaries beyond the result, for operand values ``a``, ``b`` and result
    ``out``: none in float32/float64 (BLAS reads the operands in place); in half precision the
    float32 copies of both operands beside the float32 product, then the product beside the
    rounded result (the copies are gone by then): ``max(2a + 2b + 2out, 3out) - out`` in the
    half-precision sizes; none where kernels/chgemm.py runs them."""
    if not half_precision(out) or half_gemm_runs(out):
        return 0  # (kernels/chgemm.py reads the 16-bit operands in place)
    a_bytes, b_bytes, out_bytes = value_bytes(a), value_bytes(b), value_bytes(out)
    return max(2 * a_bytes + 2 * b_bytes + out_bytes, 2 * out_bytes)


def batch_copies(a, b, out, strides) -> int:
    """Bytes of the operands ember's GEMM copies before a batched float32/float64 product:
    those whose matrices are not one stride apart (attention's heads split out of a wider
    axis: kernels/cgemm.py `_in_place`), ``strides(value)`` giving a value's strides in
    elements; 0 where the product stays NumPy's (no compiler, a small or vector-shaped one)."""
    if out.dtype not in (dt.float32, dt.float64) or len(out.shape) < 3:
        return 0
    sizes = tuple(a.shape) + tuple(b.shape)
    if len(a.shape) < 3 or len(b.shape) < 3 or not all(isinstance(d, int) for d in sizes):
        return 0  # (a batch times a matrix: folded into one product, `_matmul`)
    from ..kernels import cgemm

    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = tuple(out.shape[:-2])
    if m * k * n * math.prod(batch) <= BLAS_ONE_THREAD or cgemm.vector_shaped(n, k):
        return 0
    if cgemm._functions(out.dtype.np) is None:
        return 0
    copied = 0
    for v in (a, b):
        lead = tuple(v.shape[:-2])
        if math.prod(lead) == 1 or lead != batch:
            continue
        s = strides(v)[:-2]
        if any(d > 1 and s[i] != s[i + 1] * lead[i + 1] for i, d in enumerate(lead[:-1])):
            copied += value_bytes(v)
    return copied
