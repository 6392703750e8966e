"""Matrix products on ember's thread pool, each thread calling NumPy's OpenBLAS single-threaded.

`matmul(a, b)` computes ``a @ b`` for float32/float64 operands that BLAS can read in place
(each matrix row-major or transposed, batches at one stride), or returns None where it does not
apply (no C compiler, a BLAS other than OpenBLAS with the per-thread setting, another layout or
dtype, an empty operand) and the caller runs ``np.matmul``.

Why not NumPy's own threading. After a multi-threaded call OpenBLAS's workers spin, waiting
for the next one, for about 0.1 s; ember's compiled loops (runtime/cpool.py) then share the
cores with a spinning thread. On this project's 2-core machine that made the eager CNN step
1.3x slower (21.2 ms against 16.4 ms with ``OPENBLAS_NUM_THREADS=1``), while the MLP and GPT
steps, whose matmuls need both cores, were 1.6x and 1.4x slower single-threaded. Here a large
product is split into contiguous blocks (of batch entries, of the result's rows, or of its
columns) shared over ember's pool, whose idle threads block, and every block runs as one
single-threaded BLAS call (``openblas_set_num_threads_local(1)`` for its duration, restored
after): both cores for the matmul, and none spinning afterwards. A product below `SPLIT_FLOPS`
runs on the calling thread alone, where waking the pool would cost more than it saves.

Results equal NumPy's to the rounding of the sums' order (a block's sums are BLAS's own, and
BLAS orders them by its blocking of K, which splitting M or N leaves alone).
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from . import cpool

__all__ = ["SPLIT_FLOPS", "available", "matmul"]

# multiply-adds x 2 below which one thread runs the whole product (about 20 us of work on one
# core of the project's machine, against ~10 us to wake the pool and join it)
SPLIT_FLOPS = 1 << 22
# multiply-adds (M * N * K, the whole batch) up to which OpenBLAS itself runs one thread
# (its interface's SMP threshold): NumPy's call is then as good, and cheaper to make
BLAS_ONE_THREAD = 1 << 18

_C = {np.dtype(np.float32): ("float", "s"), np.dtype(np.float64): ("double", "d")}
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112

_SOURCE = r"""
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
typedef int (*set_local_fn)(int);
typedef void (*gemm_fn)(int, int, int, BLAS_INT, BLAS_INT, BLAS_INT, T, const T *, BLAS_INT,
                        const T *, BLAS_INT, T, T *, BLAS_INT);

/* split: 0 over batch entries, 1 over the result's rows, 2 over its columns */
struct job {
  gemm_fn gemm; set_local_fn set_local;
  int ta, tb, split;
  long m, n, k, lda, ldb, ldc, sa, sb, sc;
  const T *a, *b; T *c;
};

static void call(const struct job *j, long m, long n, const T *a, const T *b, T *c) {
  j->gemm(101, j->ta ? 112 : 111, j->tb ? 112 : 111, m, n, j->k, (T)1, a, j->lda, b, j->ldb,
          (T)0, c, j->ldc);
}

static void part(void *job_, long lo, long hi) {
  const struct job *j = job_;
  int previous = j->set_local(1);
  if (j->split == 0) {
    for (long i = lo; i < hi; i++)
      call(j, j->m, j->n, j->a + i * j->sa, j->b + i * j->sb, j->c + i * j->sc);
  } else if (j->split == 1) {  /* rows lo..hi of op(A) and of C */
    call(j, hi - lo, j->n, j->a + (j->ta ? lo : lo * j->lda), j->b, j->c + lo * j->ldc);
  } else {                      /* columns lo..hi of op(B) and of C */
    call(j, j->m, hi - lo, j->a, j->b + (j->tb ? lo * j->ldb : lo), j->c + lo);
  }
  j->set_local(previous);
}

void ember_gemm(void *gemm, void *set_local, int ta, int tb, int split, long m, long n, long k,
                const T *a, long lda, const T *b, long ldb, T *c, long ldc, long sa, long sb,
                long sc, long count, long align, ember_pool pool) {
  struct job j = {(gemm_fn)gemm, (set_local_fn)set_local, ta, tb, split, m, n, k,
                  lda, ldb, ldc, sa, sb, sc, a, b, c};
  if (pool) pool(part, &j, count, align);
  else part(&j, 0, count);
}
"""

_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
_ARGS = [_P, _P, _I, _I, _I, _L, _L, _L, _P, _L, _P, _L, _P, _L, _L, _L, _L, _L, _L, _P]


def _symbol(library, names):
    for name in names:
        try:
            return ctypes.cast(getattr(library, name), ctypes.c_void_p).value, name
        except AttributeError:
            continue
    return None, None


@functools.cache
def _functions(dtype: np.dtype):
    """(ember_gemm, the BLAS gemm's address, set_local's address, pool) for ``dtype``, or None."""
    from . import blas_threads, ccompile, cpool

    if dtype not in _C or not ccompile.compiler_available():
        return None
    library = blas_threads.library()
    if library is None:
        return None
    c_type, letter = _C[dtype]
    # NumPy's wheels ship OpenBLAS with 64-bit integers and prefixed names; a system OpenBLAS
    # has the plain CBLAS names and 32-bit ones
    gemm, name = _symbol(
        library, [f"scipy_cblas_{letter}gemm64_", f"cblas_{letter}gemm64_", f"cblas_{letter}gemm"]
    )
    set_local, _ = _symbol(library, ["openblas_set_num_threads_local"])
    if gemm is None or set_local is None:
        return None
    blas_int = "long long" if name.endswith("64_") else "int"
    source = f"#define T {c_type}\n#define BLAS_INT {blas_int}\n" + _SOURCE
    try:
        fn = ccompile.load(source, "ember_gemm", _ARGS, flags=("-O2", "-fPIC", "-shared"))
    except ccompile.CompileError:
        return None
    return fn, gemm, set_local, cpool.parallel_for()


def available(dtype) -> bool:
    """Whether `matmul` runs ``dtype`` operands."""
    return _functions(np.dtype(dtype)) is not None


def _layout(x: np.ndarray):
    """(transposed, leading dimension) of the matrices of ``x`` as BLAS reads them, or None."""
    item = x.itemsize
    rows, cols = x.shape[-2:]
    s0, s1 = x.strides[-2:]
    if (s1 == item or cols == 1) and (rows == 1 or (s0 % item == 0 and s0 >= cols * item)):
        return False, max(s0 // item if rows > 1 else cols, cols, 1)
    if (s0 == item or rows == 1) and (cols == 1 or (s1 % item == 0 and s1 >= rows * item)):
        return True, max(s1 // item if cols > 1 else rows, rows, 1)
    return None


def _batch_stride(x: np.ndarray, batch: tuple) -> int | None:
    """The one stride (in elements) between consecutive matrices of ``x`` broadcast to
    ``batch``, or None where its batch dimensions do not collapse to one."""
    lead = x.shape[:-2]
    if not lead or math.prod(lead) == 1:
        return 0
    if tuple(lead) != tuple(batch):
        return None
    strides = x.strides[:-2]
    for i in range(len(lead) - 1):
        if lead[i] > 1 and strides[i] != strides[i + 1] * lead[i + 1]:
            return None
    if strides[-1] % x.itemsize:
        return None
    return strides[-1] // x.itemsize


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray | None:
    """``a @ b`` (operands of at least 2 dimensions, the same float dtype) written into ``out``
    (C-contiguous, of the result's shape and dtype) or a new array; None where it does not
    apply (see the module docstring) or where the product is small enough that OpenBLAS runs
    it on one thread anyway (`BLAS_ONE_THREAD`)."""
    if a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.shape[-1] != b.shape[-2]:
        return None
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if m * k * n * max(math.prod(a.shape[:-2]), math.prod(b.shape[:-2])) <= BLAS_ONE_THREAD:
        return None
    functions = _functions(a.dtype)
    if functions is None:
        return None
    fn, gemm, set_local, pool = functions
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return None
    count = math.prod(batch)
    if 0 in (m, n, k, count):
        return None
    la, lb = _layout(a), _layout(b)
    sa, sb = _batch_stride(a, batch), _batch_stride(b, batch)
    if la is None or lb is None or sa is None or sb is None:
        return None
    shape = tuple(batch) + (m, n)
    if out is None:
        out = np.empty(shape, a.dtype)
    elif (
        out.shape != shape
        or out.dtype != a.dtype
        or not out.flags.c_contiguous
        or np.may_share_memory(out, a)
        or np.may_share_memory(out, b)
    ):
        return None
    if count > 1:
        split, parts, unit = 0, count, 1
    elif m >= n:
        split, parts, unit = 1, m, 8
    else:
        split, parts, unit = 2, n, 16
    use_pool = pool if 2 * m * n * k * count >= SPLIT_FLOPS else None
    # one block per thread: each block packs its own copy of the operand it shares, so the
    # pool's usual several chunks per thread would pack it several times over
    per_thread = -(-parts // cpool.get_num_threads())
    align = -(-per_thread // unit) * unit
    fn(
        gemm,
        set_local,
        int(la[0]),
        int(lb[0]),
        split,
        m,
        n,
        k,
        a.ctypes.data,
        la[1],
        b.ctypes.data,
        lb[1],
        out.ctypes.data,
        n,
        sa,
        sb,
        m * n,
        parts,
        align,
        use_pool,
    )
    return out
