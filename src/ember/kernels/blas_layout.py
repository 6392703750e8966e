"""Which array layouts BLAS reads in place, and which products it runs on one thread (shared
by the NumPy reference kernels of the products, ops/linalg.py, and ember's own GEMM,
kernels/cgemm.py)."""

from __future__ import annotations

import numpy as np

__all__ = ["BLAS_ONE_THREAD", "blas_layout", "blas_ready"]

# multiply-adds (M * N * K, the whole batch) up to which OpenBLAS itself runs one thread
# (its interface's SMP threshold): NumPy's call is then as good as ember's GEMM (kernels/
# cgemm.py leaves such products to it), and cheaper to make
BLAS_ONE_THREAD = 1 << 18


def blas_layout(x: np.ndarray) -> tuple[bool, int] | None:
    """(transposed, leading dimension in elements) of the matrices in the last two dimensions
    of ``x`` as BLAS reads them in place: a unit stride in one of them, the other a whole row
    or column apart (a single row or column needs only its unit stride); None otherwise."""
    item = x.itemsize
    rows, cols = x.shape[-2:]
    s0, s1 = x.strides[-2:]
    if (s1 == item or cols == 1) and (rows == 1 or (s0 % item == 0 and s0 >= cols * item)):
        return False, max(s0 // item if rows > 1 else cols, cols, 1)
    if (s0 == item or rows == 1) and (cols == 1 or (s1 % item == 0 and s1 >= rows * item)):
        return True, max(s1 // item if cols > 1 else rows, rows, 1)
    return None


def blas_ready(a: np.ndarray) -> np.ndarray:
    """``a`` itself when BLAS can read each matrix in place (`blas_layout`), else a C-contiguous
    copy: NumPy's fallback loop for other layouts is far slower than the copy."""
    if a.ndim < 2 or blas_layout(a) is not None:
        return a
    return np.ascontiguousarray(a)
