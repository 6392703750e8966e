"""A small 2-d product computed from C exactly as NumPy computes it: the C graph runner's step
for a product that eager mode and generated code hand to ``np.matmul``.

Why. Every executor must compute what generated code computes, bit for bit (runtime/auto.py
chooses among them by timing, so a result must not depend on the choice). A product small
enough that OpenBLAS runs it on one thread anyway (`cgemm.BLAS_ONE_THREAD`) is ``np.matmul``'s
in eager mode and in generated code (kernels/cgemm.py `gemm`: its call is cheaper than ember's
own); a C step running any other kernel rounds differently.

How. ``np.matmul`` of two matrices calls the BLAS that NumPy links (OpenBLAS, whose functions
kernels/cgemm.py already finds for its own use): a dot product for a 1x1 result, a
matrix-vector product (gemv) where the result has one row or one column, else gemm. The step
makes the same calls with the same arguments, then adds the bias and applies ReLU per element
as the eager kernels do (``out += bias``, ``np.maximum``).

Trust. Which calls NumPy makes is NumPy's business and may change between its versions, so
this module checks on first use, for each dtype, that the step equals ``np.matmul`` bit for bit
over the result shapes it distinguishes (one element, a row, a column, a matrix; B stored
transposed or not; short and long sums); where it does not, `available` is False and the
runner leaves such a graph to generated code. NumPy's calls follow its operands' layouts (a
transposed view is read with a transposing flag, which rounds differently from reading a
contiguous copy): the step holds only where generated code passes both operands C-contiguous
(the step's ``contiguous_inputs``, which runtime/cgraph.py checks against the graph's
layouts), and the same product by the same operand twice (``x @ x.T``: NumPy computes half of
it with syrk) has no step (`product_step`'s ``same_operand``).
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .cstep import BIAS_RELU, STEP_CALL, CStep, data_address, function_address, layout_operands

__all__ = ["available", "product_step"]

_SOURCE = r"""
/* NumPy's BLAS calls for out (m x n) = x (m x k) @ op(w), all row-major and contiguous: w is
   n x k when tb (a linear layer's weight), else k x n. Then + bias per column, then ReLU.
   args: x, w, bias (or 0), out, m, n, k, tb, relu, gemm, gemv, dot (CBLAS addresses) */
#define ROW_MAJOR 101
#define COL_MAJOR 102
#define NO_TRANS 111
#define TRANS 112
typedef void (*gemm_fn)(int, int, int, BLAS_INT, BLAS_INT, BLAS_INT, T, const T *, BLAS_INT,
                        const T *, BLAS_INT, T, T *, BLAS_INT);
typedef void (*gemv_fn)(int, int, BLAS_INT, BLAS_INT, T, const T *, BLAS_INT, const T *,
                        BLAS_INT, T, T *, BLAS_INT);
typedef T (*dot_fn)(BLAS_INT, const T *, BLAS_INT, const T *, BLAS_INT);

void ember_numpy_product(const long *a) {
  const T *x = (const T *)a[0], *w = (const T *)a[1], *bias = (const T *)a[2];
  T *out = (T *)a[3];
  long m = a[4], n = a[5], k = a[6], tb = a[7], relu = a[8];
  if (m == 1 && n == 1) /* a row by a column (w's one row, or its one column: both stride 1) */
    out[0] = ((dot_fn)a[11])(k, x, 1, w, 1);
  else if (m == 1) /* a row by a matrix: w's columns (tb: its rows) dotted with x */
    ((gemv_fn)a[10])(tb ? COL_MAJOR : ROW_MAJOR, TRANS, k, n, (T)1, w, tb ? k : n, x, 1, (T)0,
                     out, 1);
  else if (n == 1) /* a matrix by a column */
    ((gemv_fn)a[10])(COL_MAJOR, TRANS, k, m, (T)1, x, k, w, 1, (T)0, out, 1);
  else
    ((gemm_fn)a[9])(ROW_MAJOR, NO_TRANS, tb ? TRANS : NO_TRANS, m, n, k, (T)1, x, k, w,
                    tb ? k : n, (T)0, out, n);
  EMBER_BIAS_RELU(T, out, bias, m, n, relu);
}
"""

_C = {np.dtype(np.float32): ("float", "s"), np.dtype(np.float64): ("double", "d")}


@functools.cache
def _functions(dtype: np.dtype):
    """(the step's function, its CBLAS gemm, gemv and dot addresses) for ``dtype``, or None."""
    from . import blas_threads, ccompile
    from .cgemm import _symbol

    if dtype not in _C or not ccompile.compiler_available():
        return None
    library = blas_threads.library()
    if library is None:
        return None
    c_type, letter = _C[dtype]
    found, wide = [], True
    for routine in ("gemm", "gemv", "dot"):
        names = [f"scipy_cblas_{letter}{routine}64_", f"cblas_{letter}{routine}64_"]
        address, name = _symbol(library, names + [f"cblas_{letter}{routine}"])
        if address is None:
            return None
        found.append(address)
        wide = wide and name.endswith("64_")
    blas_int = "long long" if wide else "int"
    source = f"#define T {c_type}\n#define BLAS_INT {blas_int}\n" + BIAS_RELU + _SOURCE
    try:
        step = ccompile.load(source, "ember_numpy_product", [ctypes.c_void_p])
    except ccompile.CompileError:
        return None
    return (step, *found)


def _args(functions, m: int, n: int, k: int, tb: bool, relu: bool) -> list:
    return [0, 0, 0, 0, m, n, k, int(tb), int(relu), *functions[1:]]


# (m, n, k) checked against np.matmul: each branch of the step, sums short and long enough
# that a BLAS kernel's blocking shows (a gemv whose matrix OpenBLAS shares over its threads)
_SHAPES = ((1, 1, 1), (1, 1, 300), (1, 7, 5), (1, 300, 257), (6, 1, 33), (5, 9, 3), (9, 70, 200))


@functools.cache
def available(dtype) -> bool:
    """Whether the step equals ``np.matmul`` bit for bit on this machine for ``dtype`` (checked
    once per process: see the module docstring)."""
    dtype = np.dtype(dtype)
    functions = _functions(dtype)
    if functions is None:
        return False
    call = STEP_CALL(function_address(functions[0]))
    rng = np.random.default_rng(0)
    for m, n, k in _SHAPES:
        x = rng.standard_normal((m, k)).astype(dtype)
        for tb in (True, False):
            w = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
            out = np.empty((m, n), dtype)
            args = np.array(_args(functions, m, n, k, tb, False), np.int64)
            args[:4] = data_address(x), data_address(w), 0, data_address(out)
            call(data_address(args))
            if not np.array_equal(out, np.matmul(x, w.T if tb else w)):
                return False
    return True


def product_step(x, w, bias, out, *, transposed: bool, relu: bool, same_operand: bool):
    """The C step of ``x @ w.T`` (``transposed``) or ``x @ w`` (+ ``bias``, then ReLU) as NumPy
    computes it, for the types of a node's operands and result (inputs x, w, bias; output 0);
    None where NumPy's arithmetic cannot be matched (see the module docstring)."""
    dtype = out.dtype.np
    if not available(dtype) or same_operand:
        return None
    functions = _functions(dtype)
    n, k = (w.shape[0], w.shape[1]) if transposed else (w.shape[1], w.shape[0])
    m = int(np.prod(x.shape[:-1], dtype=np.int64))
    args = _args(functions, m, n, k, transposed, relu)
    slots = [(0, "in", 0), (1, "in", 1), (3, "out", 0)]
    slots += [(2, "in", 2)] if bias is not None else []
    step = CStep(function_address(functions[0]), np.array(args, np.int64), slots, (functions,))
    step.contiguous_inputs = layout_operands(x)  # (NumPy's calls follow its operands' layouts)
    return step
