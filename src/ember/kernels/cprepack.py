"""Weights packed once: products of a few dozen rows by a weight that has not changed since its
panels were packed.

ember's own GEMM (kernels/cgemm.py) packs all of its right operand into the micro-kernel's
panels at every call; for a linear layer at inference (tens of rows: a batch of one through a
transformer, a small batch through an MLP) that packing costs a large share of the product.
Here a weight's panels (kernels/cpanels.py's packing, which the recurrent layers use too:
panels of NR columns, each k x NR) are packed once and reused while the weight is unchanged.

Which arrays. Only arrays `watch`ed with a version counter (nn.Parameter watches its data with
the tensor's counter, which every in-place update through ember bumps: ops, optimizers,
``ember.function``'s writebacks, ``load_state_dict``). A graph's constants are not watched: a
constant may be the memory of a NumPy array its caller still writes (``from_numpy`` or
``as_tensor`` inside a trace), and the graph does not say which ones it owns. A product's
right operand is found by its base array (a linear layer reads ``weight.T``, a view of the
weight). A pack is used only while the array is alive, the view has the same address, shape
and strides, and the counter still reads the version it was packed at; else it is packed
again. Writes that bypass the counter are never trusted: an array that has been handed out
writable (``Tensor.numpy()``, ``np.asarray(tensor)``: the tensor layer calls `exposed`) or that
a tensor shares with its caller (``from_numpy``, ``as_tensor``, a Parameter made from a NumPy
array) is never packed, its packs dropped; ember's own readers of a parameter's array (saving a
checkpoint, the zoo's copies) read it without exposing it.

Programs that write into their inputs. A compiled training step may compute a parameter's new
value into the parameter's own array and bump its counter only after the call
(capture/state.py); a product in the same call reading the new value would find the old pack.
Such calls run inside `paused()` (capture/graph_function.py, capture/static.py), during which no
pack is used anywhere in the process (worker threads included).

Memory. The packs take about the watched weights' size; they are bounded by `budget_bytes`
(``EMBER_PREPACK_BYTES``, else `DEFAULT_BUDGET_BYTES`), least recently used out first, and each
call that uses one charges it to the running program (kernels/conv_plan.py `charge`: the memory
plan counts it among what ember holds between calls), as it does the row panels' scratch.

Whether a product of m rows runs on a pack is measured (kernels/gemm_tune.py: the packed
product against the fastest unpacked kernel at each row count, up to `gemm_tune.PACK_ROWS`);
``EMBER_PREPACK=0`` turns packs off, ``=1`` uses them wherever they apply.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
import weakref
from collections import OrderedDict

import numpy as np

from .conv_plan import charge
from .cpanels import aligned
from .cstep import data_address

__all__ = [
    "DEFAULT_BUDGET_BYTES",
    "available",
    "exposed",
    "budget_bytes",
    "clear",
    "held_bytes",
    "lookup",
    "pack",
    "paused",
    "product",
    "watch",
]

# the packs' default bound: a few times the weights of the models a CPU runs at inference
DEFAULT_BUDGET_BYTES = 256 * 2**20
_MR = 8  # cmicro.py's rows per panel of A

_local = threading.local()  # this thread's packed rows of A (`_rows`)
_lock = threading.RLock()  # (re-entered by a weakref callback run while it is held)
# id(array) -> (weakref to it, its version counter: a one-element list, or None: never packed)
_watched: dict = {}
_packs: OrderedDict = OrderedDict()  # key -> _Pack, least recently used first
# key -> (weakref to the watched array, the version a product read unpacked): `lookup` packs
# a version seen before (its ``first_sight=False``); bounded, cleared when full
_seen: dict = {}
_MAX_SEEN = 4096
_held = [0]  # bytes of the packs
_paused = [0]  # programs now writing into their inputs (see the module docstring)
_CONSTANT = (0,)  # the counter of a pack made for one use (`pack` called directly)
# arrays handed out writable or shared with a caller before anything watched them (`exposed`)
_exposed: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class _Pack:
    """One weight's panels: ``bp`` (at address ``at``), packed from a (k x n) operand of
    ``dtype`` viewing the array ``ref()`` when its ``counter`` read ``version``."""

    __slots__ = ("bp", "at", "dtype", "ref", "version", "counter", "k", "n", "nbytes", "run")

    def __init__(self, bp, ref, counter, version, k, n, run):
        self.bp, self.ref, self.counter, self.version = bp, ref, counter, version
        self.at, self.dtype, self.run = data_address(bp), bp.dtype, run
        self.k, self.n, self.nbytes = k, n, bp.nbytes


def budget_bytes() -> int:
    """The most bytes the packs hold (``EMBER_PREPACK_BYTES``, else `DEFAULT_BUDGET_BYTES`)."""
    text = os.environ.get("EMBER_PREPACK_BYTES", "")
    try:
        value = int(text) if text else DEFAULT_BUDGET_BYTES
    except ValueError:
        value = DEFAULT_BUDGET_BYTES
    return max(0, value)


def exposed(array, *, early: bool = False) -> None:
    """``array`` (or what it views) can now be written without a version counter seeing it
    (handed out by ``Tensor.numpy()``, shared with the caller by ``from_numpy``): the watched
    array it views, if any, is never packed again and its packs go. ``early``: also remember
    the array itself, so that a later `watch` of it (a Parameter made over it) is refused."""
    x = array
    while type(x) is np.ndarray:
        entry = _watched.get(id(x))
        if entry is not None and entry[0]() is x:
            if entry[1] is not None:
                with _lock:
                    _watched[id(x)] = (entry[0], None)
                    for key in [k for k in _packs if k[0] == id(x)]:
                        _held[0] -= _packs.pop(key).nbytes
            return
        if early:
            _exposed[id(x)] = x
        x = x.base


def watch(array: np.ndarray, counter) -> None:
    """Let products by ``array`` (or a view of it) use packed panels while ``counter[0]`` (the
    owning tensor's version counter) keeps the value it had when they were packed."""
    if type(array) is not np.ndarray:
        return
    key = id(array)
    x = array
    while type(x) is np.ndarray:  # (shared with a caller before: never packed)
        if _exposed.get(id(x)) is x:
            counter = None
            break
        x = x.base

    def forget(_ref, key=key):  # the array is gone: its entry and its packs go too
        with _lock:
            entry = _watched.get(key)
            if entry is not None and entry[0]() is None:
                _watched.pop(key, None)
            for pack_key in [p for p in _packs if p[0] == key and _packs[p].ref() is None]:
                _held[0] -= _packs.pop(pack_key).nbytes

    with _lock:
        entry = _watched.get(key)
        if entry is not None and entry[0]() is array and entry[1] is not counter:
            # two tensors with counters of their own over one array: a write through either
            # may leave the other's counter standing, so the array is never packed
            counter = None
        _watched[key] = (weakref.ref(array, forget), counter)


def held_bytes() -> int:
    """Bytes the packs hold now."""
    return _held[0]


def clear() -> None:
    """Drop every pack (they are packed again on use)."""
    with _lock:
        _packs.clear()
        _seen.clear()
        _held[0] = 0


class paused:
    """Within the block no pack is used, in any thread (a program writing into its inputs
    runs; see the module docstring)."""

    __slots__ = ()

    def __enter__(self):
        with _lock:
            _paused[0] += 1
        return self

    def __exit__(self, *exc):
        with _lock:
            _paused[0] -= 1
        return False


def _owner(b: np.ndarray):
    """(the watched array ``b`` views, its weakref, its counter), or None."""
    x = b
    while x is not None:
        entry = _watched.get(id(x))
        if entry is not None:
            ref, counter = entry
            if ref() is x and counter is not None:
                return x, ref, counter
            return None
        x = x.base
        if type(x) is not np.ndarray:
            return None
    return None


def _held_now(key) -> bool:
    return key[1] in _packs


def lookup(b: np.ndarray, *, first_sight: bool = True, packer=None):
    """The current pack of ``b`` (a 2-d float32/float64 operand that views a watched array),
    packing it now if it has none or a stale one; None where ``b`` is not watched, packs are
    paused or off, the budget cannot hold it, or there is no packed kernel. With
    ``first_sight=False`` a version is packed only when it is seen a second time: a weight that
    changes between its products (a training step's, updated every step) is never packed, as
    its pack would serve one product and cost more than the product's own packing.
    ``packer``: another kernel's layout instead of the product's panels, a module-level
    function ``b -> packed array`` (``b`` of any rank; its packs kept apart from the
    product's, by the same rules; the entry's ``run`` is then None, its ``k`` and ``n`` the
    first dimension and the product of the others)."""
    if _paused[0] or not _watched or (b.ndim != 2 and packer is None):
        return None
    found = _owner(b)
    if found is None:
        return None
    owner, ref, counter = found
    key = (id(owner), _address(b) if b.size else 0, b.shape, b.strides, b.dtype.char, packer)
    entry = _packs.get(key)
    if entry is not None and entry.ref() is owner and entry.version == counter[0]:
        try:
            _packs.move_to_end(key)
        except KeyError:  # (dropped by another thread meanwhile: still good for this call)
            return entry
        _charge(key, entry)
        return entry
    if not first_sight:
        seen = _seen.get(key)
        if seen is None or seen[0]() is not owner or seen[1] != counter[0]:
            if len(_seen) >= _MAX_SEEN:
                _seen.clear()
            _seen[key] = (ref, counter[0])
            return None
        _seen.pop(key, None)
    entry = pack(b, ref, counter) if packer is None else _packed_by(packer, b, ref, counter)
    if entry is None:
        return None
    with _lock:
        old = _packs.pop(key, None)
        if old is not None:
            _held[0] -= old.nbytes
        budget = budget_bytes()
        while _packs and _held[0] + entry.nbytes > budget:
            _, dropped = _packs.popitem(last=False)
            _held[0] -= dropped.nbytes
        if entry.nbytes > budget:
            return entry  # used for this call only
        _packs[key] = entry
        _held[0] += entry.nbytes
    _charge(key, entry)
    return entry


def _address(x: np.ndarray) -> int:
    """``data_address(x)``, cheaper for a contiguous array or the transpose of one (a linear
    layer's ``weight.T``): every product by a watched weight asks."""
    if x.flags.c_contiguous:
        return data_address(x)
    if x.flags.f_contiguous:
        return data_address(x.T)
    return data_address(x)


def _charge(key, entry) -> None:
    charge(("prepack", key), entry.nbytes, _held_now)


def _rows_held(key) -> bool:
    rows = getattr(_local, "rows", None)
    return rows is not None and rows.nbytes == key[1]


def _rows(values: int, dtype) -> int:
    """The address of this thread's buffer for the product's packed rows of A (kept between
    calls, grown as needed: a fresh one per call costs page faults), charged to the running
    program like the kernels' other scratch (kernels/conv_plan.py)."""
    rows = getattr(_local, "rows", None)
    nbytes = values * dtype.itemsize
    if rows is None or rows.nbytes < nbytes:
        rows = _local.rows = np.empty(-(-nbytes // 4096) * 4096, np.uint8)
        _local.rows_at = data_address(rows)
    charge(("prepack rows", rows.nbytes), rows.nbytes, _rows_held)
    return _local.rows_at


# The product on a pack: kernels/cpanels.py's packing and its kernels (the micro-kernel on full
# panels of MR rows, `few_panel` for a block of up to FEW rows), with the rows past the last
# full panel of MR run by `few_panel` instead of padded to MR: 65 rows (a ViT's tokens at batch
# one) are eight full panels and one row, not nine panels of which seven rows are zeros.
_PRODUCT = r"""
/* `micro` on the first two vectors of a panel's NR columns (b and acc keep NR's stride): a last
   panel of at most two vectors of columns (128 float32 columns are panels of 48, 48 and 32:
   the last one computed as 32, not 48) */
static void micro_two(long kc, const T *restrict a, const T *restrict b, T *restrict acc,
                      int first) {
  vec c[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
    for (int v = 0; v < 2; v++) c[i][v] = first ? (vec){0} : *(vec *)(acc + i * NR + v * VL);
  for (long p = 0; p < kc; p++) {
    vec b0 = *(const vec *)b, b1 = *(const vec *)(b + VL);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      T s = a[i];
      c[i][0] += s * b0;
      c[i][1] += s * b1;
    }
    a += MR;
    b += NR;
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
    for (int v = 0; v < 2; v++) *(vec *)(acc + i * NR + v * VL) = c[i][v];
}

struct prepacked { const T *ap, *a; long m, full, k, n; const T *bp; T *c; };

static void prepacked_panels(void *job, long lo, long hi) {
  const struct prepacked *j = job;
  long k = j->k, mp = j->full / MR;
  T *tiles = tiles_of((size_t)(mp > 0 ? mp : 1) * MR * NR * sizeof(T));
  for (long jp = lo; jp < hi; jp++) {
    long j0 = jp * NR, nr = j->n - j0 < NR ? j->n - j0 : NR;
    const T *b = j->bp + jp * k * NR;
    if (mp > 0) {
      for (long p0 = 0; p0 < k; p0 += KC) {
        long kc = k - p0 < KC ? k - p0 : KC;
        for (long ip = 0; ip < mp; ip++) {
          const T *ai = j->ap + ip * MR * k + p0 * MR;
          T *to = j->c + ip * MR * j->n + j0; /* a whole panel's tiles: summed in place */
          if (nr == NR) micro3_c(kc, ai, b + p0 * NR, to, j->n, p0 == 0);
          else if (nr == 2 * VL) micro2_c(kc, ai, b + p0 * NR, to, j->n, p0 == 0);
          else if (nr < 2 * VL) micro_two(kc, ai, b + p0 * NR, tiles + ip * MR * NR, p0 == 0);
          else micro(kc, ai, b + p0 * NR, tiles + ip * MR * NR, p0 == 0);
        }
      }
      if (nr != NR && nr != 2 * VL) /* (the others were summed where they lie) */
        for (long i = 0; i < j->full; i++)
          memcpy(j->c + i * j->n + j0, tiles + (i / MR) * MR * NR + (i % MR) * NR,
                 nr * sizeof(T));
    }
    for (long i0 = j->full; i0 < j->m; i0 += FEW) {
      const T *a = j->a + i0 * k;
      T *c = j->c + i0 * j->n + j0;
      /* the row count a compile-time constant in each case, so the sums live in registers */
      switch (j->m - i0 < FEW ? j->m - i0 : FEW) {
        case 1: few_panel(1, a, k, b, c, j->n, nr); break;
        case 2: few_panel(2, a, k, b, c, j->n, nr); break;
        case 3: few_panel(3, a, k, b, c, j->n, nr); break;
        default: few_panel(4, a, k, b, c, j->n, nr); break;
      }
    }
  }
}

/* c (m x n, row-major) = a (m x k, row-major) @ b, b packed by ember_rnn_pack; ap holds the
   full panels of MR rows of a, packed here; panels of b shared over the pool when given */
void ember_prepacked_product(const T *a, long m, long k, long n, const T *bp, T *c, T *ap,
                             ember_pool pool) {
  long count = (n + NR - 1) / NR, full = m / MR * MR;
  for (long i0 = 0; i0 < full; i0 += MR) {
    T *to = ap + i0 * k;
    const T *from = a + i0 * k;
    long p = 0;
#if defined(__AVX512F__)
    if (TRANSPOSE8) /* (float32: sixteen steps at a time, kernels/cgemm_source.py's TILES) */
      for (; p + 16 <= k; p += 16) {
        f16 t[8];
        transpose8x16((const float *)from + p, k, t);
        for (int q = 0; q < 8; q++) *(uf16 *)((float *)to + p * MR + 16 * q) = t[q];
      }
#endif
    for (; p < k; p++)
#pragma GCC unroll 8
      for (long r = 0; r < MR; r++) to[p * MR + r] = from[r * k + p];
  }
  struct prepacked j = {ap, a, m, full, k, n, bp, c};
  if (pool && count > 1) pool(prepacked_panels, &j, count, 1);
  else prepacked_panels(&j, 0, count);
}

/* ember_prepacked_product, then + bias per column (an eager linear layer's bias added in the
   same pass over the result as NumPy's ``out += bias``: the same single rounding) */
void ember_prepacked_linear(const T *a, long m, long k, long n, const T *bp, T *c, T *ap,
                            ember_pool pool, const T *bias) {
  ember_prepacked_product(a, m, k, n, bp, c, ap, pool);
  EMBER_BIAS_RELU(T, c, bias, m, n, 0);
}

/* the C graph runner's step of a product by a frozen constant's pack (kernels/csteps.py),
   then + bias per column, then ReLU, as the linear step does. args: x, (w: not read), bias
   (or 0), out, m, k, n, the panels, the step's own rows scratch, the pool (or 0), relu */
void ember_prepacked_step(const long *a) {
  const T *bias = (const T *)a[2];
  T *out = (T *)a[3];
  long m = a[4], n = a[6], relu = a[10];
  ember_prepacked_product((const T *)a[0], m, a[5], n, (const T *)a[7], out, (T *)a[8],
                          (ember_pool)a[9]);
  EMBER_BIAS_RELU(T, out, bias, m, n, relu);
}
"""


def source_text() -> str:
    """The C source of the packing and the product (without ``T``: each dtype defines it)."""
    from .cgemm_source import TILES
    from .cmicro import MICRO
    from .cpanels import PACKED

    # (a pack's product sums each result in the order of k, as ember's own GEMM does: a weight's
    # first product, unpacked, and its later ones, packed, agree bit for bit; the C graph
    # runner's steps, which run the own GEMM, agree with both)
    from .cstep import BIAS_RELU

    return "#define FEW_IN_ORDER\n" + BIAS_RELU + MICRO + TILES + PACKED + _PRODUCT


@functools.cache
def _functions(dtype: np.dtype):
    """(pack, product, the pool) for ``dtype``, or None (no compiler, another dtype)."""
    from . import ccompile, cpool

    c_type = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}.get(dtype)
    if c_type is None or not ccompile.compiler_available():
        return None
    source = f"#define T {c_type}\n" + source_text()
    p, n = ctypes.c_void_p, ctypes.c_long
    try:
        pack = ccompile.load(source, "ember_rnn_pack", [p, n, n, n, n, p])
        run = ccompile.load(source, "ember_prepacked_product", [p, n, n, n, p, p, p, p])
        step = ccompile.load(source, "ember_prepacked_step", [p])
        linear = ccompile.load(source, "ember_prepacked_linear", [p, n, n, n, p, p, p, p, p])
    except ccompile.CompileError:
        return None
    return pack, run, cpool.parallel_for(), step, linear


def available(dtype) -> bool:
    """Whether products by packed weights run for ``dtype``."""
    return _functions(np.dtype(dtype)) is not None


def pack(b: np.ndarray, ref=None, counter=_CONSTANT) -> _Pack | None:
    """``b`` (k x n) packed into the micro-kernel's panels now (the version read before the
    copy, so that a write meanwhile makes the pack stale, never wrongly current); None where
    there is no packed kernel for its dtype."""
    functions = _functions(np.dtype(b.dtype))
    if functions is None or b.ndim != 2 or 0 in b.shape:
        return None
    if any(s % b.itemsize for s in b.strides):
        return None
    version = counter[0]
    k, n = b.shape
    nr = 3 * (64 // b.itemsize)  # cmicro.py's NR: three vectors of 64 bytes
    bp = aligned(-(-n // nr) * k * nr, b.dtype)
    sp, sj = (s // b.itemsize for s in b.strides)
    functions[0](data_address(b), k, n, sp, sj, data_address(bp))
    return _Pack(bp, ref or (lambda: None), counter, version, k, n, functions[1:3])


def step_args(entry: _Pack, m: int, *, relu: bool, threaded: bool):
    """(the step function's address, its argument block, what it keeps alive) of the C graph
    runner's product of ``m`` rows by the pack ``entry`` (kernels/csteps.py: a frozen
    constant's weight, packed once); slots 0, 2 and 3 take x, the bias and the result."""
    from .cstep import function_address

    pool = entry.run[1]
    step = _functions(entry.dtype)[3]
    rows = aligned(max(1, m // _MR * _MR * entry.k), entry.dtype)  # (the step's own)
    args = [0, 0, 0, 0, m, entry.k, entry.n, entry.at, data_address(rows)]
    args += [(pool or 0) if threaded else 0, int(relu)]
    return function_address(step), args, (entry, rows, step)


def _packed_by(packer, b: np.ndarray, ref, counter) -> _Pack | None:
    """``b`` packed by ``packer`` now (the version read before the copy, as `pack`)."""
    version = counter[0]
    bp = packer(b)
    if bp is None:
        return None
    return _Pack(bp, ref, counter, version, b.shape[0], b.size // max(1, b.shape[0]), None)


def product(a: np.ndarray, entry: _Pack, out: np.ndarray | None, *, threaded: bool, bias=None):
    """``a @ b`` for the ``b`` whose pack is ``entry``: ``a`` (m x k) with unit stride along
    its rows, written into ``out`` (C-contiguous m x n) or a new array; None where the layouts
    do not fit. ``bias``: a contiguous vector of n values of a's dtype added to every row in
    C (a linear layer's), or None."""
    m, k = a.shape
    if k != entry.k or m == 0 or a.dtype != entry.dtype:
        return None
    if a.strides != (k * a.itemsize, a.itemsize):
        if a.strides[-1] != a.itemsize:
            return None
        a = np.ascontiguousarray(a)
    n = entry.n
    if out is None:
        out = np.empty((m, n), a.dtype)
    elif (
        out.shape != (m, n)
        or out.dtype != a.dtype
        or not out.flags.c_contiguous
        or np.may_share_memory(out, a)
    ):
        return None
    run, pool = entry.run
    ap = _rows(max(1, m // _MR * _MR * k), entry.dtype)
    if bias is None:
        run(data_address(a), m, k, n, entry.at, data_address(out), ap, pool if threaded else None)
        return out
    if bias.shape != (n,) or bias.dtype != a.dtype or not bias.flags.c_contiguous:
        return None
    _functions(entry.dtype)[4](
        data_address(a),
        m,
        k,
        n,
        entry.at,
        data_address(out),
        ap,
        pool if threaded else None,
        data_address(bias),
    )
    return out
