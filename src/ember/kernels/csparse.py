"""A CSR matrix times a dense matrix in C: ``csr_mm(indptr, indices, data, x, rows)``.

Each result row is zeroed and gets ``data[k] * x[indices[k], :]`` added for its nonzeros in
order, the columns a SIMD loop (``-march=native``: the CPU's own vector width, compiled on the
machine that runs it); rows are shared over ember's thread pool (kernels/cpool.py), each row
written by one thread. The same sums in the same order as scipy.sparse's ``csr_matvecs`` (row
by row, nonzeros in order), which is the fallback where there is no compiler
(ops/_sparse_kernels.py). Returns None where it does not apply (no compiler, a dtype other
than float32 or float64).
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .cstep import data_address

__all__ = ["csr_mm"]

_C = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}

_SOURCE = r"""
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
struct job {
  const long long *indptr, *indices;
  const T *data, *x;
  T *out;
  long n;
};
static void rows(void *job_, long lo, long hi) {
  const struct job *j = job_;
  long n = j->n;
  for (long i = lo; i < hi; i++) {
    T *restrict o = j->out + i * n;
    for (long c = 0; c < n; c++) o[c] = 0;
    for (long long k = j->indptr[i]; k < j->indptr[i + 1]; k++) {
      const T a = j->data[k];
      const T *restrict xr = j->x + j->indices[k] * n;
#pragma omp simd
      for (long c = 0; c < n; c++) o[c] += a * xr[c];
    }
  }
}
void csr_mm(const long long *indptr, const long long *indices, const T *data, const T *x,
            T *out, long rows_, long n, long nnz, ember_pool pool) {
  struct job j = {indptr, indices, data, x, out, n};
  if (pool && rows_ > 1 && nnz * n > (1L << 16)) pool(rows, &j, rows_, 1);
  else rows(&j, 0, rows_);
}
"""


@functools.cache
def _function(dtype: np.dtype):
    from . import ccompile, cpool

    if not ccompile.compiler_available():
        return None
    source = f"#define T {_C[dtype]}\n" + _SOURCE
    p, n = ctypes.c_void_p, ctypes.c_long
    try:
        fn = ccompile.load(source, "csr_mm", [p] * 5 + [n] * 3 + [p])
    except ccompile.CompileError:
        return None
    return fn, cpool.parallel_for()


def csr_mm(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, x: np.ndarray, rows: int):
    """The (rows, x.shape[1]) product of the CSR matrix (indptr, indices: int64, data) with the
    dense matrix ``x``, or None where the C kernel does not apply. The caller guarantees the
    structure (indptr non-decreasing from 0 to nnz, column indices within x's rows)."""
    dtype = np.dtype(data.dtype)
    if dtype not in _C or x.dtype != dtype or x.ndim != 2:
        return None
    found = _function(dtype)
    if found is None:
        return None
    fn, pool = found
    data = np.ascontiguousarray(data)
    x = np.ascontiguousarray(x)
    out = np.empty((rows, x.shape[1]), dtype)
    if out.size == 0:
        return out
    fn(data_address(indptr), data_address(indices), data_address(data), data_address(x),
       data_address(out), rows, x.shape[1], data.size, pool)  # fmt: skip
    return out
