"""The C steps of the graph runner (runtime/cgraph.py) that belong to no kernel module of their
own: concatenation, reshapes and views (copies: the runner's arrays are contiguous),
linear layers (bias and ReLU included) and products by a matrix, on ember's GEMM kernels
(kernels/cgemm.py), and a sequence of steps run as one (a product, then its epilogue's loop).
The convolution's and max pooling's steps live with their kernels (kernels/cconv.py,
kernels/cpooling.py).

Each builder takes the node (or its types) and returns a `CStep` (kernels/cstep.py), or None
where the step does not apply; the ops' ``c_step`` rules call them.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .axes import kernel_axis
from .cstep import BIAS_RELU, CStep, function_address, layout_operands

__all__ = ["concat_step", "copy_step", "linear_step", "strided_copy_step", "sequence_step"]

_SOURCE = r"""
#include <stdint.h>
#include <string.h>
/* out (m x n) = x (m x k) @ op(w) (w^T, w being n x k, when tb; else w, k x n) with ember's
   own GEMM (kernels/cgemm.py), or its kernel for few rows when given, then + bias per column,
   then ReLU (NaN and -0.0 stay, as np.maximum leaves them). Its columns are shared over the
   pool when one is given and free (a run on one thread); else this thread computes it all.
   args: x, w, bias (or 0), out, the dtype's ember_gemm, m, n, k, tb, ldb, relu, its
   ember_skinny (or 0), the pool (or 0), the columns' alignment, the GEMM's split and count,
   then the BLAS's gemm (or 0: ember's own), its set_local and whether that is process-wide */
typedef void (*ember_gemm_fn)(void *, void *, int, int, int, int, long, long, long, const void *,
                              long, const void *, long, void *, long, long, long, long, long,
                              long, void *);
typedef void (*ember_skinny_fn)(int, long, long, long, const void *, long, const void *, long,
                                void *, long, long, void *);
#define LINEAR_STEP(T, NAME)                                                                 \
  void NAME(const long *a) {                                                                 \
    const T *bias = (const T *)a[2];                                                         \
    T *out = (T *)a[3];                                                                      \
    long m = a[5], n = a[6], k = a[7], relu = a[10];                                         \
    if (a[11])                                                                               \
      ((ember_skinny_fn)a[11])((int)a[8], m, n, k, (const void *)a[0], k, (const void *)a[1],  \
                               a[9], out, n, a[13], (void *)a[12]);                          \
    else                                                                                     \
      ((ember_gemm_fn)a[4])((void *)a[16], (void *)a[17], (int)a[18], 0, (int)a[8],         \
                            (int)a[14], m, n, k, (const void *)a[0], k, (const void *)a[1],  \
                            a[9], out, n, 0, 0, 0, a[15], a[13], (void *)a[12]);             \
    EMBER_BIAS_RELU(T, out, bias, m, n, relu);                                               \
  }
LINEAR_STEP(float, ember_linear_step_f32)
LINEAR_STEP(double, ember_linear_step_f64)

/* a copy of ``n`` bytes (a reshape: the runner's arrays are contiguous); nothing where the
   output is the input's own memory (the runner's arena may place them so). args: out, in, n */
void ember_copy_step(const long *a) {
  if (a[0] != a[1]) memcpy((char *)a[0], (const char *)a[1], (size_t)a[2]);
}

/* a strided copy (a view's elements, copied): the C-contiguous output, of shape ``shape``,
   reads its element i at offset + sum(i_d * stride_d) bytes of the input (strides may be 0 or
   negative). args: out, in, ndim (1 to 16), itemsize, offset, the shape, the strides.
   The last two dimensions are one block per outer index (a row of the block per element of
   the second-to-last), and a row whose elements are one run is copied as one unit of its
   bytes: a permutation's short innermost runs (a pixel shuffle's 2 elements) would otherwise
   pay the outer index's arithmetic, or a call of memcpy, every run. */
typedef struct { uint64_t lo, hi; } ember_u128;
#define STRIDED_ROWS(TYPE)                                                           \
  for (long r = 0; r < rows; r++, out += n * sizeof(TYPE)) {                         \
    const char *s = src + r * rstep;                                                 \
    TYPE *o = (TYPE *)out;                                                           \
    for (long i = 0; i < n; i++) memcpy(o + i, s + i * estep, sizeof(TYPE));         \
  }
/* the block's `inner` columns (each `rows` elements in a run, columns `step` bytes apart)
   written interleaved: out[r * inner + i] = column i's element r (spelled out per column
   count, constant strides the vectorizer turns into shuffles) */
#define ZIP_INTO(TYPE, K)                                                            \
  {                                                                                  \
    TYPE *o = (TYPE *)out;                                                           \
    for (long r = 0; r < rows; r++)                                                  \
      for (long i = 0; i < K; i++) o[r * K + i] = ((const TYPE *)(src + i * step))[r]; \
  }
#define ZIP_COLUMNS(TYPE)                                                            \
  {                                                                                  \
    if (inner == 2)                                                                  \
      ZIP_INTO(TYPE, 2)                                                              \
    else if (inner == 3)                                                             \
      ZIP_INTO(TYPE, 3)                                                              \
    else                                                                             \
      ZIP_INTO(TYPE, 4)                                                              \
  }
void ember_strided_copy_step(const long *a) {
  char *out = (char *)a[0];
  const char *in = (const char *)a[1] + a[4];
  long nd = a[2], size = a[3], idx[16] = {0}, outer = 1;
  const long *shape = a + 5, *stride = a + 5 + nd;
  long inner = shape[nd - 1], step = stride[nd - 1];
  long rows = nd > 1 ? shape[nd - 2] : 1, rstep = nd > 1 ? stride[nd - 2] : 0;
  long lead = nd > 1 ? nd - 2 : 0; /* the dimensions outside the blocks */
  /* a row's units: its elements, or its one run when they are contiguous */
  long unit = step == size ? inner * size : size, n = step == size ? 1 : inner;
  long estep = step == size ? unit : step;
  for (long d = 0; d < lead; d++) outer *= shape[d];
  /* rows of 2 to 4 elements far apart whose columns are runs (a pixel shuffle's or a tiled
     transposed convolution's interleave: the block's rows read down its columns): the
     block's few columns zipped, each read as a run and written every `inner` elements */
  const int zip = nd > 1 && inner >= 2 && inner <= 4 && rstep == size && step != size &&
                  (size == 4 || size == 8);
  for (long o = 0; o < outer; o++) {
    const char *src = in;
    for (long d = 0; d < lead; d++) src += idx[d] * stride[d];
    if (zip) {
      if (size == 4)
        ZIP_COLUMNS(uint32_t)
      else
        ZIP_COLUMNS(uint64_t)
      out += rows * inner * size;
    } else if (n == 1 && rstep == unit) { /* the whole block is one run */
      memcpy(out, src, (size_t)(rows * unit));
      out += rows * unit;
    } else if (unit == 4) {
      STRIDED_ROWS(uint32_t)
    } else if (unit == 8) {
      STRIDED_ROWS(uint64_t)
    } else if (unit == 16) {
      STRIDED_ROWS(ember_u128)
    } else if (unit == 2) {
      STRIDED_ROWS(uint16_t)
    } else if (unit == 1) {
      STRIDED_ROWS(uint8_t)
    } else {
      for (long r = 0; r < rows; r++, out += n * unit)
        for (long i = 0; i < n; i++)
          memcpy(out + unit * i, src + r * rstep + i * estep, (size_t)unit);
    }
    for (long d = lead - 1; d >= 0 && ++idx[d] == shape[d]; d--) idx[d] = 0;
  }
}

/* steps run one after another, their argument blocks inline: a count, then per step its
   function, its block's length and the block */
typedef void (*ember_step)(const long *args);
void ember_sequence_step(const long *a) {
  for (long i = 0, at = 1; i < a[0]; i++, at += 2 + a[at + 1]) ((ember_step)a[at])(a + at + 2);
}

/* concat along an axis: per input, ``outer`` rows of ``len`` bytes, side by side in the
   output's rows of ``row`` bytes. args: out, inputs, outer, row, then (pointer, len) each */
void ember_concat_step(const long *a) {
  char *out = (char *)a[0];
  long k = a[1], outer = a[2], row = a[3], offset = 0;
  for (long i = 0; i < k; i++) {
    const char *src = (const char *)a[4 + 2 * i];
    long len = a[5 + 2 * i];
    for (long o = 0; o < outer; o++) memcpy(out + o * row + offset, src + o * len, len);
    offset += len;
  }
}
"""


@functools.cache
def _library():
    """(the concat step, the copy step, the linear steps by dtype, the sequence step, the
    strided copy step), or None without a compiler."""
    from . import ccompile

    if not ccompile.compiler_available():
        return None
    p = [ctypes.c_void_p]
    try:
        source = BIAS_RELU + _SOURCE
        concat = ccompile.load(source, "ember_concat_step", p)
        copy = ccompile.load(source, "ember_copy_step", p)
        linear = {
            np.dtype(dtype): ccompile.load(source, f"ember_linear_step_{name}", p)
            for dtype, name in ((np.float32, "f32"), (np.float64, "f64"))
        }
        sequence = ccompile.load(source, "ember_sequence_step", p)
        strided = ccompile.load(source, "ember_strided_copy_step", p)
    except ccompile.CompileError:
        return None
    return concat, copy, linear, sequence, strided


def strided_copy_step(itemsize: int, shape: tuple, strides: tuple, offset: int) -> CStep | None:
    """The C step of a view op's node (kernels' callers work out the view): the output, of
    ``shape``, holds the elements the view reads at ``offset`` + ``strides`` (bytes) from its
    C-contiguous input (the runner's arrays are contiguous)."""
    library = _library()
    if library is None or not 1 <= len(shape) <= 16 or 0 in shape:
        return None
    args = [0, 0, len(shape), itemsize, offset, *shape, *strides]
    slots = [(0, "out", 0), (1, "in", 0)]
    return CStep(function_address(library[4]), np.array(args, np.int64), slots, (library,))


def sequence_step(steps: list, slots: list) -> CStep | None:
    """One step running ``steps`` (`CStep`s) in order, their argument blocks copied inline
    (a block's own pointers lead to memory its ``keep`` holds, never into the block).
    ``slots[i]``: step i's slots as the combined step's node sees them, ``(slot, role, index)``
    per slot of that step's block, or ``(slot, address)`` for memory of the caller's own
    (a scratch array it keeps alive through the result's ``keep``)."""
    library = _library()
    if library is None or any(s is None for s in steps):
        return None
    args, combined, keep = [len(steps)], [], [library]
    for step, mapped in zip(steps, slots):
        base = len(args) + 2
        block = [int(x) for x in step.args]
        for entry in mapped:
            if len(entry) == 2:  # (slot, address): fixed memory
                block[entry[0]] = entry[1]
            else:
                combined.append((base + entry[0], entry[1], entry[2]))
        args += [step.fn, len(block), *block]
        keep.append(step.keep)
    return CStep(function_address(library[3]), np.array(args, np.int64), combined, tuple(keep))


def concat_step(node) -> CStep | None:
    """The C step of a ``concat`` node (its inputs and output share a dtype)."""
    library = _library()
    if library is None or any(v.type.dtype != node.outputs[0].dtype for v in node.inputs):
        return None
    out = node.outputs[0].type
    # (a graph file's axis -1 made the inner extent the whole output: the copy wrote past it)
    axis = kernel_axis(node.attrs["axis"], len(out.shape))
    if axis is None:
        return None
    itemsize = out.dtype.np.itemsize
    outer = int(np.prod(out.shape[:axis], dtype=np.int64))
    inner = int(np.prod(out.shape[axis + 1 :], dtype=np.int64))
    lengths = [v.type.shape[axis] * inner * itemsize for v in node.inputs]
    args = [0, len(node.inputs), outer, out.shape[axis] * inner * itemsize]
    for length in lengths:
        args += [0, length]
    slots = [(0, "out", 0)] + [(4 + 2 * i, "in", i) for i in range(len(node.inputs))]
    return CStep(function_address(library[0]), np.array(args, np.int64), slots, (library,))


def copy_step(node) -> CStep | None:
    """The C step of a node whose output is its input's bytes (a ``reshape``; a
    ``broadcast_to`` that only adds dimensions of one); None where the output has another
    number of elements than the input (a real broadcast: copying the output's size of bytes
    would read past the input)."""
    library = _library()
    x, out = node.inputs[0].type, node.outputs[0].type
    if library is None or x.dtype != out.dtype:
        return None
    size = int(np.prod(out.shape, dtype=np.int64)) * out.dtype.np.itemsize
    if size != int(np.prod(x.shape, dtype=np.int64)) * x.dtype.np.itemsize:
        return None
    args = np.array([0, 0, size], np.int64)
    slots = [(0, "out", 0), (1, "in", 0)]
    return CStep(function_address(library[1]), args, slots, (library,), same_bytes=True)


def linear_step(
    x,
    w,
    bias,
    out,
    *,
    transposed: bool,
    relu: bool = False,
    same_operand: bool = False,
    frozen: np.ndarray | None = None,
) -> CStep | None:
    """The C step of ``x @ w.T`` (``transposed``, w being (n, k): a ``linear``) or ``x @ w``
    (w (k, n): a 2-d ``matmul``), plus ``bias`` per output column when given (its type, or
    None), then ReLU when ``relu``: the types of the node's operands and result. The node's
    inputs are x, w (and the bias) in that order, its output 0; ``same_operand``: x and w are
    one value. The step computes what eager mode and generated code compute, bit for bit: a
    product that they hand to NumPy as NumPy does (kernels/cnumpy_product.py), any other on the
    kernel `cgemm.product_kernel` chooses for its size (a pack's product: ember's own GEMM,
    which sums in the same order), from operands laid out as in generated code where the
    kernel reads them by their layouts (the step's ``contiguous_inputs``). ``frozen``: w's
    array where w is a frozen graph constant (kernels/cconv_constant.py `frozen_weight`): where
    ember's own GEMM runs, the step packs it once and multiplies by the pack (the same sums).
    None where it does not apply."""
    from . import cgemm, cnumpy_product, cpool

    library = _library()
    dtype = out.dtype.np
    types = [x, w, out] + ([bias] if bias is not None else [])
    if library is None or dtype not in library[2] or any(t.dtype.np != dtype for t in types):
        return None
    if len(w.shape) != 2 or len(x.shape) < 1 or 0 in x.shape or 0 in w.shape:
        return None
    if bias is not None and tuple(bias.shape) != (out.shape[-1],):
        return None
    n, k = (w.shape[0], w.shape[1]) if transposed else (w.shape[1], w.shape[0])
    m = int(np.prod(x.shape[:-1], dtype=np.int64))
    if m * n * k <= cgemm.BLAS_ONE_THREAD:  # (NumPy's product, as `cgemm.matmul` leaves it)
        return cnumpy_product.product_step(
            x, w, bias, out, transposed=transposed, relu=relu, same_operand=same_operand
        )
    functions = cgemm._functions(dtype)
    if functions is None:
        return None
    kernel = cgemm.product_kernel(m, n, k, dtype, transposed)
    if cgemm.vector_shaped(n, k) and not (transposed and kernel == cgemm.PACKED):
        # (NumPy's product, as `cgemm.matmul` leaves it: a linear layer whose weight's pack
        # runs it takes the pack, eagerly and here)
        return cnumpy_product.product_step(
            x, w, bias, out, transposed=transposed, relu=relu, same_operand=same_operand
        )
    if frozen is not None and kernel in (cgemm.gemm_tune.OWN, cgemm.PACKED):
        step = _packed_step(frozen.T if transposed else frozen, m, bias, relu)
        if step is not None:
            return step
    few = kernel == cgemm.gemm_tune.SKINNY
    blas = kernel == cgemm.gemm_tune.BLAS and functions[1] is not None
    itemsize = dtype.itemsize
    if few:  # (as `cgemm.skinny` and `cgemm.matmul` share their columns)
        big = cgemm.skinny_shared(m, n, k, itemsize)
        split, count, unit = 2, n, cgemm.skinny_unit(transposed, itemsize)
    else:  # (the blocks `cgemm.matmul` gives the pool: rows, or columns)
        big = 2 * m * n * k >= cgemm.split_flops()
        split, count, unit = cgemm._split(1, m, n, itemsize)
    align = cgemm.block_align(count, unit) if big else 1
    pool = cpool.parallel_for() if big else None
    if not big:
        split, count = 0, 1  # (one call)
    gemm = function_address(functions[0])
    args = [0, 0, 0, 0, gemm, m, n, k, int(transposed), k if transposed else n, int(relu)]
    args += [function_address(functions[6]) if few else 0, pool or 0, align, split, count]
    if blas:
        args += [functions[1], functions[2] or 0, int(functions[3])]
    else:
        args += [0, 0, 0]
    step = library[2][dtype]
    slots = [(0, "in", 0), (1, "in", 1), (3, "out", 0)]
    slots += [(2, "in", 2)] if bias is not None else []
    made = CStep(function_address(step), np.array(args, np.int64), slots, (library, functions))
    if kernel != cgemm.gemm_tune.OWN and kernel != cgemm.PACKED:
        # `skinny` and the BLAS read each operand by its layout (a transposed view is another
        # order of sums than its contiguous copy); ember's own GEMM packs both whatever they are
        made.contiguous_inputs = layout_operands(x)
    return made


def _packed_step(b: np.ndarray, m: int, bias, relu: bool) -> CStep | None:
    """The step of a product of ``m`` rows by ``b`` (k x n: a frozen constant, or its
    transpose) packed now, once (kernels/cprepack.py), plus the bias, then ReLU."""
    from . import cgemm, cprepack

    entry = cprepack.pack(b)
    if entry is None:
        return None
    threaded = 2 * m * entry.n * entry.k >= cgemm.split_flops()
    fn, args, keep = cprepack.step_args(entry, m, relu=relu, threaded=threaded)
    slots = [(0, "in", 0), (3, "out", 0)] + ([(2, "in", 2)] if bias is not None else [])
    return CStep(fn, np.array(args, np.int64), slots, keep)
