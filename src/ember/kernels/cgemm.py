"""Matrix products on ember's thread pool: ember's own GEMM kernel, or NumPy's OpenBLAS called
single-threaded in each thread.

`matmul(a, b)` computes ``a @ b`` for float32/float64 operands that BLAS can read in place
(each matrix row-major or transposed, batches at one stride), or returns None where it does not
apply (no C compiler, another layout or dtype, an empty operand, a product small enough for one
thread, `BLAS_ONE_THREAD`) and the caller runs ``np.matmul``.

Threads. After a multi-threaded call OpenBLAS's workers spin, waiting for the next one, for
about 0.1 s; ember's compiled loops (kernels/cpool.py) then share the cores with a spinning
thread. So a large product is split into contiguous blocks (of batch entries, of the result's
rows, or of its columns), one per thread of ember's pool, each computed single-threaded. A
product below `split_flops` runs on the calling thread alone: that threshold comes from the
pool's wake-and-join cost and the product rate measured on this machine (kernels/gemm_tune.py).

Kernels. Each block runs ember's own GEMM (`_OWN_GEMM`: the register-blocked micro-kernel of
kernels/cmicro.py over packed panels) or the BLAS's gemm with OpenBLAS's thread setting at one,
whichever kernels/gemm_tune.py chose for a product of the nearest size on this machine (it
measures both once, keeps ember's own unless the BLAS's is clearly faster, and caches the
result; a BLAS build pinned to narrower kernels, or a CPU without 512-bit vectors, changes the
answer). ``EMBER_GEMM=own`` or ``blas`` overrides.

Few rows. A 2-d product of up to `gemm_tune.PACK_ROWS` rows (a batch of one, a small one, a
decoder's token, a short sequence) by a weight whose panels were packed once
(kernels/cprepack.py: a module's parameter) runs on that pack where that was measured
faster for its row count; otherwise it runs the kernel measured fastest for its row count:
`skinny`, with no packing at all (the blocked GEMM packs the whole of B per call, which for a
few rows can cost more than the product), or either blocked GEMM. In `skinny` each result is
a dot product of two contiguous rows where B is a linear layer's transposed weight, else rows of
B scaled and summed; B's columns are shared over the pool where the time to read B pays for
waking it.

Results equal NumPy's to float rounding: either kernel orders a sum differently from NumPy's
multi-threaded OpenBLAS. A product's rounding depends on its size (and this machine's tuning)
alone: `product_kernel` is the one choice of kernel that eager products and the C graph
runner's steps (kernels/csteps.py) both follow; a pack's product sums in the own GEMM's order,
so a weight's first product (unpacked) and its later ones agree; the BLAS's blocks are the
pool's blocks, one call each, whether the pool shares them or is busy.
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from .._env import setting
from . import cpool, cprepack, gemm_tune
from .blas_layout import BLAS_ONE_THREAD, blas_layout
from .cgemm_source import DISPATCH, OWN_GEMM, TILES
from .cstep import data_address

__all__ = [
    "available",
    "block_align",
    "gemm",
    "matmul",
    "own_kernel",
    "packed_linear",
    "runs_skinny",
    "skinny",
]
__all__ += ["PACKED", "full_blocks", "product_kernel", "skinny_rows"]
__all__ += ["skinny_shared", "skinny_unit", "split_flops", "tuning"]


_C = {np.dtype(np.float32): ("float", "s"), np.dtype(np.float64): ("double", "d")}

_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
_ARGS = [_P, _P, _I, _I, _I, _I, _L, _L, _L, _P, _L, _P, _L, _P, _L, _L, _L, _L, _L, _L, _P]
_SKINNY_ARGS = [_I, _L, _L, _L, _P, _L, _P, _L, _P, _L, _L, _P]


def _symbol(library, names):
    for name in names:
        try:
            return ctypes.cast(getattr(library, name), ctypes.c_void_p).value, name
        except AttributeError:
            continue
    return None, None


@functools.cache
def _functions(dtype: np.dtype):
    """(ember_gemm, the BLAS gemm's address or None, set_local's address or None, whether that
    setting is process-wide, the pool, whether the compiler targets 512-bit vectors,
    ember_skinny) for ``dtype``, or None (no compiler)."""
    from . import blas_threads, ccompile
    from .cmicro import MICRO

    if dtype not in _C or not ccompile.compiler_available():
        return None
    c_type, letter = _C[dtype]
    gemm = set_local = None
    blas_int = "long long"
    library = blas_threads.library()
    if library is not None:
        # NumPy's wheels ship OpenBLAS with 64-bit integers and prefixed names; a system
        # OpenBLAS has the plain CBLAS names and 32-bit ones
        gemm, name = _symbol(
            library,
            [f"scipy_cblas_{letter}gemm64_", f"cblas_{letter}gemm64_", f"cblas_{letter}gemm"],
        )
        set_local, _ = _symbol(library, ["openblas_set_num_threads_local"])
        if gemm is None or set_local is None:
            gemm = set_local = None
        elif not name.endswith("64_"):
            blas_int = "int"
    source = f"#define T {c_type}\n#define BLAS_INT {blas_int}\n" + MICRO + TILES
    source += OWN_GEMM + DISPATCH
    try:
        fn = ccompile.load(source, "ember_gemm", _ARGS)
        skinny = ccompile.load(source, "ember_skinny", _SKINNY_ARGS)
        width = ccompile.load(source, "ember_gemm_vector_bits", [ctypes.c_void_p])
    except ccompile.CompileError:
        return None
    bits = ctypes.c_int(0)
    width(ctypes.addressof(bits))
    process_wide = set_local is not None and not blas_threads.per_thread()
    return fn, gemm, set_local, process_wide, cpool.parallel_for(), bits.value >= 512, skinny


def _use_blas(blas_gemm, dtype, flops: int) -> bool:
    """Whether to call the BLAS's gemm rather than ember's own for a product of ``flops``
    (2 M N K, one matrix of a batch): ``EMBER_GEMM=blas|own`` decides; by default whichever
    ran the nearest size faster on this machine (kernels/gemm_tune.py)."""
    if blas_gemm is None:
        return False
    choice = setting("EMBER_GEMM")
    if choice in ("blas", "own"):
        return choice == "blas"
    return not tuning().own_faster(_name(dtype), flops)


def _name(dtype) -> str:
    """``dtype``'s name (a dict look-up for the GEMM's dtypes: ``dtype.name`` costs
    microseconds, which every product would pay)."""
    name = _NAMES.get(dtype)
    return np.dtype(dtype).name if name is None else name


def own_kernel(dtype) -> bool:
    """Whether a kernel built on the same micro-kernel with operands packed once for many
    products (kernels/crnn.py's) should run: ``EMBER_GEMM`` decides, else whether the compiler
    targets the 512-bit vectors the micro-kernel is written for. (`matmul`'s per-call choice,
    measured in kernels/gemm_tune.py, includes the packing such a kernel does not repeat.)"""
    functions = _functions(np.dtype(dtype))
    if functions is None:
        return False
    choice = setting("EMBER_GEMM")
    if choice in ("blas", "own") and functions[1] is not None:
        return choice == "own"
    return functions[1] is None or functions[5]


def tuning():
    """This machine's measured GEMM choices (kernels/gemm_tune.py: cached per machine)."""
    return gemm_tune.current()


def split_flops() -> int:
    """Multiply-adds x 2 from which a product is shared over the pool: where the time saved
    beats the pool's measured wake-and-join cost, at the pool's current thread count."""
    return tuning().split_flops(cpool.get_num_threads())


def skinny_rows(dtype=np.float32) -> int:
    """Products of at most this many rows run `skinny` (no packing): measured on this machine
    against the blocked GEMM."""
    return tuning().skinny_rows(np.dtype(dtype).name)


def runs_skinny(m: int, dtype=np.float32, n: int | None = None, b_transposed: bool = True) -> bool:
    """Whether a product of ``m`` rows (by ``n`` columns of a B stored transposed or not)
    runs `skinny`: the kernel measured fastest for that row count on this machine (what
    `matmul` runs; a C step of a linear layer follows it), where its blocks are as full as
    when it was measured."""
    dtype = np.dtype(dtype)
    if tuning().few_rows(_name(dtype), m) != gemm_tune.SKINNY:
        return False
    return n is None or full_blocks(m, n, b_transposed, dtype.itemsize)


def full_blocks(m: int, n: int, b_transposed: bool, itemsize: int) -> bool:
    """Whether `skinny` computes a product of ``m`` rows by ``n`` columns at the pace it was
    measured at (kernels/gemm_tune.py times it on a layer 512 wide). Its sums of B's rows
    (B not transposed) take four vectors of columns at a time: a product narrower than that
    (a classifier's 10 outputs, a weight gradient's 24) spends most of its multiplications on
    padding, for every four rows, and ran 3-5x slower than the blocked GEMM; only a single row,
    where packing B costs more than its product, keeps it."""
    return b_transposed or m == 1 or n >= 4 * (64 // itemsize)


def __getattr__(name: str):
    # the former constants, now measured (kernels/csteps.py and crnn.py read them)
    if name == "SPLIT_FLOPS":
        return split_flops()
    if name == "SKINNY_ROWS":
        return skinny_rows()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def available(dtype) -> bool:
    """Whether `matmul` runs ``dtype`` operands."""
    return _functions(np.dtype(dtype)) is not None


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


def result_buffer(out, shape: tuple, a: np.ndarray, b: np.ndarray):
    """``out`` where a product of ``a`` and ``b`` may be written into it (C-contiguous, of
    ``shape`` and ``a``'s dtype, sharing no memory with either operand), a new array when
    ``out`` is None, or None (the caller declines)."""
    if out is None:
        return np.empty(shape, a.dtype)
    if (
        out.shape != shape
        or out.dtype != a.dtype
        or not out.flags.c_contiguous
        or np.may_share_memory(out, a)
        or np.may_share_memory(out, b)
    ):
        return None
    return out


def _in_place(x: np.ndarray, batch: tuple):
    """(``x`` or a contiguous copy, its batch stride, its `blas_layout`) as the kernel reads it,
    or None where it cannot. Batch entries that are not one stride apart (attention's heads,
    split out of a wider axis) are copied together: NumPy's loop over them would call BLAS once
    per matrix, with its own threads, which then spin (see the module docstring)."""
    stride = _batch_stride(x, batch)
    if stride is None:
        x = np.ascontiguousarray(x)
        stride = _batch_stride(x, batch)
    layout = blas_layout(x)
    return None if stride is None or layout is None else (x, stride, layout)


def _split(count: int, m: int, n: int, itemsize: int) -> tuple[int, int, int]:
    """How the product is shared over the pool: (0 batch entries, 1 rows, 2 columns), the
    number of parts, and the unit a thread's share is a multiple of (whole 64-byte vectors of
    columns)."""
    if count > 1:
        return 0, count, 1
    if m >= n:
        return 1, m, 8
    return 2, n, 64 // itemsize


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray | None:
    """``a @ b`` (operands of at least 2 dimensions, the same float dtype) written into ``out``
    (C-contiguous, of the result's shape and dtype) or a new array; None where it does not
    apply (see the module docstring) or where the product is small enough that OpenBLAS runs
    it on one thread anyway (`BLAS_ONE_THREAD`)."""
    if a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.shape[-1] != b.shape[-2]:
        return None
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = ()
    if a.ndim > 2 or b.ndim > 2:
        batch = a.shape[:-2]
        if batch != b.shape[:-2]:  # (equal batches, attention's heads, skip NumPy's Python)
            try:
                batch = np.broadcast_shapes(batch, b.shape[:-2])
            except ValueError:
                return None
    count = math.prod(batch)
    # (an empty product is NumPy's too: zeros or an empty array)
    if m * k * n * count <= BLAS_ONE_THREAD:
        return None
    if vector_shaped(n, k):
        return None
    functions = _functions(a.dtype)
    if functions is None:
        return None
    if not batch and a.ndim == 2 and b.ndim == 2:
        kernel = product_kernel(m, n, k, a.dtype, lambda: _b_transposed(b))
        if kernel == PACKED:
            # a weight's panels packed once (kernels/cprepack.py), the same sums as OWN's:
            # packed at its second product, not its first (measured)
            done = _on_pack(a, b, out, 2 * m * n * k)
            if done is not None:
                return done
        elif kernel == gemm_tune.SKINNY:
            threaded = skinny_shared(m, n, k, a.itemsize)
            few = _skinny(functions, a, b, out, threaded=threaded)
            if few is not None:
                return few
        blas = kernel == gemm_tune.BLAS
    else:
        blas = _use_blas(functions[1], a.dtype, 2 * m * n * k)
    use_pool = 2 * m * n * k * count >= split_flops()
    return _blocked(functions, a, b, out, batch, blas=blas, threaded=use_pool)


_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}

# `product_kernel`'s answer where a pack is used once there is one: ember's own GEMM until then
# (a pack's product sums in the own GEMM's order, so a weight's first product and its later ones
# agree bit for bit)
PACKED = 3


def product_kernel(m: int, n: int, k: int, dtype, b_transposed) -> int:
    """The kernel of a 2-d product of ``m`` rows by ``n`` columns over ``k`` above
    `BLAS_ONE_THREAD`: `gemm_tune.SKINNY`, `gemm_tune.OWN`, `gemm_tune.BLAS` or `PACKED`; B
    stored transposed or not (``b_transposed``: a bool, or a function answering it, asked only
    where the answer matters). The one choice that eager products (`matmul`) and the C graph
    runner's steps (kernels/csteps.py) both follow, so that a product's rounding depends on its
    shape, never on the executor or on whether a pack exists yet. ``EMBER_GEMM=blas|own`` and
    ``EMBER_PREPACK=0|1`` override the measured choices (kernels/gemm_tune.py)."""
    forced = setting("EMBER_GEMM")
    prepack = setting("EMBER_PREPACK")
    shape = tuning()
    key = (m, n, k, dtype, forced, prepack, id(shape))
    answers = _kernels.get(key)
    if answers is None or answers[2] is not shape:  # (a tuning since: answer again)
        answers = _kernel_answers(m, n, k, np.dtype(dtype), forced, prepack) + (shape,)
        if len(_kernels) >= 4096:  # (bounded: a process may meet many sizes)
            _kernels.clear()
        _kernels[key] = answers
    if answers[0] == answers[1]:
        return answers[0]
    transposed = b_transposed() if callable(b_transposed) else b_transposed
    return answers[0] if transposed else answers[1]


# product_kernel's answers (B transposed, B not, the tuning they come from), by size and setting
_kernels: dict = {}


def _kernel_answers(m, n, k, dtype, forced, prepack) -> tuple[int, int]:
    name = _name(dtype)
    if _prepacked(name, m, forced, prepack):
        return PACKED, PACKED
    kernel = tuning().few_rows(name, m)
    functions = _functions(dtype)
    blas = _use_blas(functions[1], dtype, 2 * m * n * k)
    if kernel is not None and kernel != gemm_tune.SKINNY and forced not in ("blas", "own"):
        blas = kernel == gemm_tune.BLAS and functions[1] is not None
    other = gemm_tune.BLAS if blas else gemm_tune.OWN  # (the sizes' measured choice)
    if kernel != gemm_tune.SKINNY:
        return other, other
    return tuple(  # `skinny` where its blocks are as full as when it was measured
        kernel if full_blocks(m, n, transposed, dtype.itemsize) else other
        for transposed in (True, False)
    )


def _prepacked(name: str, m: int, forced: str, choice: str) -> bool:
    """Whether a product of ``m`` rows of the dtype ``name`` by a watched weight runs on its
    pack (kernels/cprepack.py): ``EMBER_PREPACK=0|1`` (``choice``) decides, else the measured
    choice; never where ``EMBER_GEMM=blas`` (``forced``) asks for the BLAS."""
    if m > gemm_tune.PACK_ROWS or m < 1 or forced == "blas":
        return False
    if choice == "0":
        return False
    return choice == "1" or tuning().prepacked(name, m)


def _blocked(functions, a, b, out, batch, *, blas: bool, threaded: bool) -> np.ndarray | None:
    """``a @ b`` (shapes checked by the caller) by `ember_gemm`: the BLAS's gemm or ember's
    own in each block, over the pool or on the calling thread alone; None where an operand's
    layout does not fit."""
    fn, blas_gemm, set_local, process_wide, pool, _, _ = functions
    gemm = blas_gemm if blas else None
    if gemm is None:
        set_local = None  # ember's own kernel makes no BLAS call
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    count = math.prod(batch)
    operands = _in_place(a, batch), _in_place(b, batch)
    if None in operands:
        return None
    (a, sa, la), (b, sb, lb) = operands
    shape = tuple(batch) + (m, n)
    out = result_buffer(out, shape, a, b)
    if out is None:
        return None
    split, parts, unit = _split(count, m, n, a.itemsize)
    use_pool = pool if threaded else None
    align = block_align(parts, unit)
    fn(
        gemm,
        set_local,
        int(process_wide),
        int(la[0]),
        int(lb[0]),
        split,
        m,
        n,
        k,
        data_address(a),
        la[1],
        data_address(b),
        lb[1],
        data_address(out),
        n,
        sa,
        sb,
        m * n,
        parts,
        align,
        use_pool,
    )
    return out


def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, b, out=out)``: `matmul` where it applies, else NumPy's."""
    result = matmul(a, b, out)
    return np.matmul(a, b, out=out) if result is None else result


def _on_pack(a, b, out, flops: int, bias=None):
    """``a @ b`` (+ ``bias`` per column) on the pack of ``b`` (kernels/cprepack.py: the same sums
    as the own GEMM's, packed at its second product unless ``EMBER_PREPACK=1``), shared over
    the pool from `split_flops`; None where ``b`` has no pack yet or the layouts do not fit."""
    entry = cprepack.lookup(b, first_sight=setting("EMBER_PREPACK") == "1")
    if entry is None:
        return None
    return cprepack.product(a, entry, out, threaded=flops >= split_flops(), bias=bias)


def packed_linear(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray | None:
    """``x @ w.T + bias`` (a linear layer: x (..., k) with rows contiguous, w (n, k), bias (n,)
    or None) where `product_kernel` runs such a product on the weight's pack: on the pack, the
    bias added in the same C call, or, before the weight is packed (`cprepack.lookup` packs a
    weight at its second product), ember's own GEMM as `matmul` runs it then. None elsewhere
    (another kernel, dtype or layout): the caller runs `matmul`. The route `matmul` would take,
    without its general layers: an eager ``nn.Linear`` at a few rows spends more in those than
    in the product."""
    dtype = x.dtype
    if dtype not in _NAMES or x.ndim < 2 or w.ndim != 2 or w.dtype != dtype or x.size == 0:
        return None
    k, n = x.shape[-1], w.shape[0]
    if x.ndim == 2:
        a = x
    elif x.flags.c_contiguous:
        a = x.reshape(x.size // k, k)
    else:
        return None
    m = a.shape[0]
    if m * k * n <= BLAS_ONE_THREAD or w.shape[1] != k or a.strides[1] != a.itemsize:
        return None
    functions = _functions(dtype)
    if functions is None:  # (no compiler: the caller's NumPy product)
        return None
    if product_kernel(m, n, k, dtype, True) != PACKED:
        return None
    if bias is not None and (
        bias.shape != (n,) or bias.dtype != dtype or not bias.flags.c_contiguous
    ):
        return None
    b, flops = w.T, 2 * m * n * k
    out = _on_pack(a, b, None, flops, bias)
    if out is None:  # (not packed yet: ember's own GEMM, as `matmul` runs it then)
        out = _blocked(functions, a, b, None, (), blas=False, threaded=flops >= split_flops())
        if out is not None and bias is not None:
            out += bias
    if out is None:
        return None
    return out if x.ndim == 2 else out.reshape(x.shape[:-1] + (n,))


def skinny(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray | None:
    """``a @ b`` by `ember_skinny` (no packing) for a 2-d ``a`` whose row count `runs_skinny`
    by a 2-d ``b``, each in a layout BLAS reads in place (`blas_layout`), written into ``out``
    (C-contiguous, the result's shape and dtype) or a new array; None where it does not
    apply."""
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.shape[1] != b.shape[0]:
        return None
    functions = _functions(a.dtype)
    if functions is None or not runs_skinny(a.shape[0], a.dtype):
        return None  # (the layouts the blocked GEMM takes: the same product, the same kernel)
    m, k = a.shape
    threaded = skinny_shared(m, b.shape[1], k, a.itemsize)
    return _skinny(functions, a, b, out, threaded=threaded)


def _skinny(functions, a, b, out, *, threaded: bool) -> np.ndarray | None:
    """`skinny`'s product, over the pool or on the calling thread alone."""
    m, k = a.shape
    n = b.shape[1]
    la, lb = blas_layout(a), blas_layout(b)
    if 0 in a.shape or 0 in b.shape or la is None or lb is None:
        return None
    if la[0]:  # a few rows read down columns: copied row by row first
        a, la = np.ascontiguousarray(a), (False, k)
    tb, ldb = int(lb[0]), lb[1]
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
    use_pool = functions[4] if threaded else None
    align = block_align(n, skinny_unit(bool(tb), a.itemsize))
    functions[6](
        tb, m, n, k, data_address(a), la[1], data_address(b), ldb, data_address(out), n, align,
        use_pool,
    )  # fmt: skip
    return out


def vector_shaped(n: int, k: int) -> bool:
    """Whether a product of ``n`` columns over ``k`` is left to NumPy's BLAS whatever its
    size: a matrix by a vector (``M @ v``, n = 1: gemv reads M once, where a GEMM packs all of
    M for one column, 40x gemv's time on a 4096x1024 float32 M) or an outer product (k = 1:
    ``g @ v.T``, M @ v's gradient, a multiply per element). The graph runner's step of such a
    product makes NumPy's call too (kernels/csteps.py `linear_step`), so both round alike."""
    return n == 1 or k == 1


def _b_transposed(b: np.ndarray) -> bool:
    """Whether `skinny` reads ``b`` as its transpose's rows (dot products), as `_skinny` does."""
    layout = blas_layout(b)
    return layout is not None and bool(layout[0])


def block_align(parts: int, unit: int) -> int:
    """The size of one block of ``parts`` per thread of the pool, in whole ``unit``s (each
    block packs its own copy of the operand it shares, so the pool's usual several chunks per
    thread would pack it several times over)."""
    per_thread = -(-parts // cpool.get_num_threads())
    return -(-per_thread // unit) * unit


def skinny_shared(m: int, n: int, k: int, itemsize: int) -> bool:
    """Whether `skinny` shares its columns over the pool: a large product, or a large b, read
    at the memory's pace (two threads draw more of it than one)."""
    threads = cpool.get_num_threads()
    shape = tuning()
    return 2 * m * n * k >= shape.split_flops(threads) or n * k * itemsize >= shape.split_bytes(
        threads
    )


def skinny_unit(transposed: bool, itemsize: int) -> int:
    """Columns per block of `skinny`'s kernel: four dot products, or whole vectors of a row."""
    return 4 if transposed else 64 // itemsize


gemm_tune.use_kernels(_functions, _blocked, _skinny)
