"""This machine's GEMM choices, measured once and cached (kernels/cgemm.py follows them).

Which kernel runs a product (ember's own GEMM or the BLAS's, each single-threaded in a block),
how few rows go to the packing-free `skinny` kernel, and from what size a product is shared
over the pool depend on the CPU, its caches and the BLAS build: a choice tuned by hand on one
machine was 1.3-5x off on another. So they are measured here, on the calling thread, in a few
hundred milliseconds on first use:

- ``products``: per dtype, own and BLAS times (medians of several, interleaved) of a few
  products from small batched ones (attention's heads) to a large one, and which kernel runs
  them; a product takes the choice of the nearest size (in log FLOPs).
- ``few``: per dtype and row count from 1 to `PACK_ROWS`, which of `skinny` (no packing),
  ember's own blocked GEMM and the BLAS's runs a linear layer's product, timed with and
  without a transposed weight: few rows take that kernel (the own GEMM packs all of B per
  call, which can cost more than the product).
- ``packed``: per dtype and the same row counts, whether the product by a weight packed once
  (kernels/cprepack.py; its packing not timed: it is paid once per weight) runs rather than
  that kernel: a product by a watched weight then runs on its pack.

Robust to a loaded machine (other processes on the cores made the choices flip from one
calibration to the next): every timing is this thread's CPU time (`time.thread_time`), each
candidate is timed several times interleaved with the others, and a choice changes only where
another kernel is `clearly_faster` (its slower quartile below the faster quartile of the one
held): the one held is the previous calibration's (``calibrate(force=True)``), else the one
doing least work (ember's own GEMM rather than the BLAS's, the packed weight rather than a
kernel that packs it again). Close calls thus keep a stable answer, which either way costs
little.
- ``wake_s``: what the pool's wake and join add to a product (medians: the typical cost,
  not the rare call in which another process held a core); ``flops_per_s`` (the large
  product's rate) and ``bytes_per_s`` (`skinny`'s rate reading a large B): sharing a product of
  time T over p threads pays where T (1 - 1/p) > wake_s, which gives the FLOPs and B sizes from
  which `matmul` and `skinny` share their work.

The result is cached as JSON in ember's cache directory (`ccompile.cache_dir`), keyed by the
machine (CPU model, core count, NumPy and its BLAS, the compiler's flags, the kernels'
source); a file that is
missing, of another machine or format, or whose values are not what `measure` writes (files
are not trusted) is measured again and replaced. ``calibrate(force=True)`` measures again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from .._files import OWN_FILE_MODE, read_own_file, write_atomic
from .timing import choose, clearly_faster, interleaved
from .timing import median as _median

__all__ = [
    "BLAS",
    "OWN",
    "PACK_ROWS",
    "SKINNY",
    "GemmTuning",
    "calibrate",
    "calibration_path",
    "choose",
    "clearly_faster",
    "machine_key",
    "measure",
]

FORMAT_VERSION = 4  # 2: row counts up to PACK_ROWS, and ``packed``; 3: medians, choices held;
# 4: the wake cost a median (files of 3 may hold a mean a loaded machine inflated)
DTYPES = ("float32", "float64")
# (M, K, N, batch) of the timed products: attention-sized batches up to a linear layer's size,
# and one whose operands outgrow L2 (3 MiB of float32: the own GEMM's cache blocking, or the
# BLAS's, decides there; a product of 256 lies in L2 whole, and its choice was every larger
# product's)
_PRODUCTS = ((64, 64, 64, 16), (128, 128, 128, 4), (256, 256, 256, 2), (512, 512, 512, 1))
# row counts of linear layers' products tried, rising (a batch of one to a transformer's few
# dozen tokens)
_FEW_ROWS = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128)
PACK_ROWS = _FEW_ROWS[-1]
# m -> the index of the first row count measured at or above m (every product asks)
_AT = tuple(next(i for i, rows in enumerate(_FEW_ROWS) if rows >= m) for m in range(PACK_ROWS + 1))
SKINNY, OWN, BLAS = 0, 1, 2
_SKINNY_K = _SKINNY_N = 512  # a linear layer's in and out features
_STREAM = 1024  # B (square, this many rows) read by `skinny` for the memory rate
_NEVER = 1 << 62
_WAKE_SAMPLES = 64
# (kernels/cgemm.py's functions for a dtype, its blocked product, its `skinny` product: given by
# `use_kernels` when it loads, so that this module does not import it)
_kernels: tuple = ()


def use_kernels(functions, blocked, skinny) -> None:
    """The kernels `measure` times (kernels/cgemm.py hands them over as it loads)."""
    global _kernels
    _kernels = (functions, blocked, skinny)


_SAMPLE_S = 3e-4  # each timing repeats a product to last about this long
_SAMPLES = 7  # timings of each candidate (quartiles of seven)


@dataclass(frozen=True)
class GemmTuning:
    machine: str
    wake_s: float
    flops_per_s: float
    bytes_per_s: float
    # dtype name -> ((flops of one matrix, own seconds, BLAS seconds, 1 where BLAS runs), ...)
    products: dict
    few: dict  # dtype name -> the fastest kernel (SKINNY, OWN, BLAS) at each of _FEW_ROWS
    # dtype name -> whether a packed weight's product beat that kernel (1) or not (0), each row
    packed: dict = field(default_factory=dict)
    # (dtype, flops) -> `own_faster`'s answer: every product asks, and a model asks for few sizes
    _answers: dict = field(default_factory=dict, compare=False, repr=False)

    def own_faster(self, dtype: str, flops: int) -> bool:
        """Whether ember's own kernel runs products of ``flops``: the choice measured at the
        nearest product (in log; its times where a row holds no choice)."""
        key = (dtype, flops)
        answer = self._answers.get(key)
        if answer is None:
            rows = self.products.get(dtype)
            answer = True
            if rows:
                x = math.log(max(flops, 1))
                row = min(rows, key=lambda row: abs(math.log(row[0]) - x))
                answer = not row[3] if len(row) > 3 else row[1] <= row[2]
            if len(self._answers) < 4096:  # (bounded: a process may meet many sizes)
                self._answers[key] = answer
        return answer

    def _worth(self, threads: int) -> float:
        """Seconds of single-threaded work from which ``threads`` threads save more than the
        pool's wake and join cost."""
        if threads <= 1:
            return math.inf
        return self.wake_s * threads / (threads - 1)

    def split_flops(self, threads: int) -> int:
        worth = self._worth(threads)
        return _NEVER if math.isinf(worth) else max(1, min(_NEVER, int(worth * self.flops_per_s)))

    def split_bytes(self, threads: int) -> int:
        worth = self._worth(threads)
        return _NEVER if math.isinf(worth) else max(1, min(_NEVER, int(worth * self.bytes_per_s)))

    def few_rows(self, dtype: str, m: int) -> int | None:
        """The fastest kernel (SKINNY, OWN or BLAS) measured for a 2-d product of ``m`` rows
        (the next row count measured at or above it), None above the row counts measured."""
        codes = self.few.get(dtype)
        if not codes or m > PACK_ROWS or m < 0:
            return None
        at = _AT[m]
        return codes[at] if at < len(codes) else None  # (a table of fewer row counts: none)

    def prepacked(self, dtype: str, m: int) -> bool:
        """Whether a 2-d product of ``m`` rows by a weight packed once ran faster than the
        fastest kernel that packs nothing ahead (the next row count measured at or above)."""
        codes = self.packed.get(dtype)
        if not codes or m > PACK_ROWS or m < 1:
            return False
        at = _AT[m]
        return at < len(codes) and bool(codes[at])

    def skinny_rows(self, dtype: str) -> int:
        """The most rows up to which `skinny` ran fastest at every row count measured."""
        most = 0
        for rows, code in zip(_FEW_ROWS, self.few.get(dtype, ())):
            if code != SKINNY:
                break
            most = rows
        return most


@functools.cache
def machine_key() -> str:
    from . import ccompile
    from .cpool import cpu_count, cpu_model

    try:
        blas = json.dumps(np.show_config(mode="dicts").get("Build Dependencies", {}), default=str)
    except Exception:
        blas = ""
    from .cgemm_source import DISPATCH, OWN_GEMM, TILES
    from .cmicro import MICRO
    from .cprepack import source_text

    flags = " ".join(getattr(ccompile, "DEFAULT_FLAGS", ()))
    # (the kernels' source too: a changed kernel is measured again)
    text = MICRO + TILES + OWN_GEMM + DISPATCH + source_text()
    source = hashlib.sha256(text.encode()).hexdigest()[:16]
    return (
        f"{cpu_model()}|{cpu_count()}|numpy {np.__version__}|{blas}|{flags}|{source}"
        f"|v{FORMAT_VERSION}"
    )


# ------------------------------------------------------------------------------ measuring
def _samples(fns) -> list[list[float]]:
    return interleaved(fns, _SAMPLES, sample_s=_SAMPLE_S)


def _held(previous, table: str, name: str, at: int, default: int) -> int:
    """The choice ``previous`` (a tuning measured before on this machine, or None) holds in
    ``table`` for dtype ``name`` at index ``at``, else ``default``."""
    codes = getattr(previous, table, {}).get(name) if previous is not None else None
    if not codes or at >= len(codes):
        return default
    code = codes[at]
    if table != "products":
        return code
    return code[3] if len(code) > 3 else int(code[1] > code[2])  # (a row of times alone)


def _measure_dtype(functions, dtype, rng, previous=None):
    """(products, few, packed, the large product's rate, `skinny`'s rate reading a large B) for
    ``dtype``; each choice stays ``previous``'s (else the kernel doing least work: ember's own,
    the packed weight) unless another is `clearly_faster`."""
    _, _blocked, _skinny = _kernels

    name = np.dtype(dtype).name
    has_blas = functions[1] is not None
    rows = []
    for at, (m, k, n, count) in enumerate(_PRODUCTS):
        a = rng.standard_normal((count, m, k)).astype(dtype)
        b = rng.standard_normal((count, k, n)).astype(dtype)
        out = np.empty((count, m, n), dtype)
        batch = (count,)

        def own(a=a, b=b, out=out, batch=batch):
            _blocked(functions, a, b, out, batch, blas=False, threaded=False)

        def blas(a=a, b=b, out=out, batch=batch):
            _blocked(functions, a, b, out, batch, blas=True, threaded=False)

        times = _samples([own, blas] if has_blas else [own])
        pick = choose(times, _held(previous, "products", name, at, 0)) if has_blas else 0
        t_own, t_blas = (_median(t) / count for t in (times[0], times[-1]))
        rows.append((2 * m * k * n, t_own, t_blas, pick))
    rate = rows[-1][0] / min(rows[-1][1:3])

    from . import cprepack

    weight = rng.standard_normal((_SKINNY_N, _SKINNY_K)).astype(dtype)
    plain = np.ascontiguousarray(weight.T)
    pack = cprepack.pack(weight.T)  # (the same panels from either form)
    codes, packed = [], []
    for at, m in enumerate(_FEW_ROWS):
        a = rng.standard_normal((m, _SKINNY_K)).astype(dtype)
        fns = []
        for b in (weight.T, plain):  # a linear layer's product, and its input gradient's form
            fns.append(lambda a=a, b=b: _skinny(functions, a, b, None, threaded=False))
            fns.append(
                lambda a=a, b=b: _blocked(functions, a, b, None, (), blas=False, threaded=False)
            )
            if has_blas:
                fns.append(
                    lambda a=a, b=b: _blocked(functions, a, b, None, (), blas=True, threaded=False)
                )
        width = len(fns) // 2
        if pack is not None:
            fns.append(lambda a=a: cprepack.product(a, pack, None, threaded=False))
        times = _samples(fns)
        # (each round's two forms summed: they were timed side by side)
        total = [[x + y for x, y in zip(times[i], times[i + width])] for i in range(width)]
        held = _held(previous, "few", name, at, OWN)
        code = choose(total, held if held < width else OWN)  # SKINNY, OWN, BLAS in order
        codes.append(code)
        # (the packed product runs both forms alike: its panels are the same)
        win = 0
        if pack is not None:
            both = [2 * t for t in times[-1]]
            win = 1 - choose([both, total[code]], 1 - _held(previous, "packed", name, at, 1))
        packed.append(win)
    big = rng.standard_normal((_STREAM, _STREAM)).astype(dtype)
    row = rng.standard_normal((1, _STREAM)).astype(dtype)
    stream = _median(_samples([lambda: _skinny(functions, row, big, None, threaded=False)])[0])
    return tuple(rows), tuple(codes), tuple(packed), rate, big.nbytes / stream


def _measure_wake(functions) -> float:
    """What sharing a tiny batched product over the pool adds to running it alone: the
    difference of the medians. (The mean was ruled by the few calls in which another process
    held a core: calibrations of one 2-core machine cached 0.1 to 356 us, the last keeping
    every product under 150 MFLOP on one thread for as long as the file lived; the median
    stayed under 1 us at a load of 14 on its 2 cores.) Measured with at least two threads where the
    machine has two CPUs, whatever the pool's count now (the file serves later processes
    too)."""
    from . import cpool

    before = cpool.get_num_threads()
    threads = max(before, min(2, cpool.cpu_count()))
    if functions[4] is None or threads <= 1:
        return 0.0
    _blocked = _kernels[1]
    count = 2 * threads
    a = np.ones((count, 8, 8), np.float32)
    b = np.ones((count, 8, 8), np.float32)
    out = np.empty((count, 8, 8), np.float32)
    alone, shared = [], []
    if threads != before:
        cpool.set_num_threads(threads)
    try:
        for _ in range(_WAKE_SAMPLES):
            for threaded, times in ((False, alone), (True, shared)):
                start = time.perf_counter()
                _blocked(functions, a, b, out, (count,), blas=False, threaded=threaded)
                times.append(time.perf_counter() - start)
    finally:
        if threads != before:
            cpool.set_num_threads(before)
    return max(0.0, _median(shared) - _median(alone))


def measure(previous: GemmTuning | None = None) -> GemmTuning | None:
    """Measure this machine now (nothing is cached); None where ember's GEMM does not run
    (no C compiler). Each choice stays ``previous``'s (a tuning of this machine measured
    before) unless another kernel is clearly faster (`choose`)."""
    if not _kernels:
        return None
    _functions = _kernels[0]
    rng = np.random.default_rng(0)
    products, few, packed = {}, {}, {}
    rate = stream = None
    first = None
    for name in DTYPES:
        functions = _functions(np.dtype(name))
        if functions is None:
            continue
        first = first or functions
        rows, codes, wins, r, s = _measure_dtype(functions, np.dtype(name), rng, previous)
        products[name], few[name], packed[name] = rows, codes, wins
        if rate is None:  # float32's rates: the dtype most products run in
            rate, stream = r, s
    if first is None:
        return None
    wake = _measure_wake(first)
    return GemmTuning(machine_key(), wake, rate, stream, products, few, packed)


# --------------------------------------------------------------------------------- cache
_loaded: dict[str, GemmTuning] = {}
_lock = threading.Lock()
_current: GemmTuning | None = None  # the last one `calibrate` gave (`current`'s fast path)


def current() -> GemmTuning:
    """`calibrate()`'s tuning, without looking at the cache directory again once there is one
    (every product asks for it)."""
    return _current or calibrate()


def calibration_path():
    from .ccompile import cache_dir

    digest = hashlib.sha256(machine_key().encode()).hexdigest()[:16]
    return cache_dir() / f"gemm-calibration-{digest}.json"


def calibrate(force: bool = False) -> GemmTuning:
    """This machine's tuning: from memory, else from the cache file, else measured and
    cached. ``force=True`` measures again, each choice held unless another kernel is now
    clearly faster (`measure`'s ``previous``). Where ember's GEMM cannot run, a tuning that
    keeps every product on one thread and off `skinny`."""
    global _current
    path = calibration_path()
    with _lock:
        if not force and str(path) in _loaded:
            _current = _loaded[str(path)]
            return _current
        held = _loaded.get(str(path)) or _read(path)
        tuning = None if force else held
        if tuning is None:
            tuning = measure(held) if held is not None else measure()
            if tuning is None:
                return GemmTuning(machine_key(), math.inf, 1.0, 1.0, {}, {})
            try:
                write_atomic(path, json.dumps(_to_json(tuning)), OWN_FILE_MODE)
            except OSError:  # (a full or read-only disk: the tuning holds for this process)
                pass
        _loaded[str(path)] = _current = tuning
        return tuning


def _to_json(tuning: GemmTuning) -> dict:
    return {
        "format": FORMAT_VERSION,
        "machine": tuning.machine,
        "wake_s": tuning.wake_s,
        "flops_per_s": tuning.flops_per_s,
        "bytes_per_s": tuning.bytes_per_s,
        "products": {k: [list(r) for r in v] for k, v in tuning.products.items()},
        "few": {k: list(v) for k, v in tuning.few.items()},
        "packed": {k: list(v) for k, v in tuning.packed.items()},
    }


def _number(x, positive: bool = True) -> bool:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return ok and (x > 0 if positive else x >= 0)


def _read(path) -> GemmTuning | None:
    """The tuning in ``path``, or None (measure again) where it is missing, unreadable, of
    another machine or format, or holds values `measure` does not write."""
    raw = read_own_file(path)  # (a cache file someone else could write is not read)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None
    keys = {"format", "machine", "wake_s", "flops_per_s", "bytes_per_s", "products", "few"}
    keys.add("packed")
    if not isinstance(data, dict) or set(data) != keys:
        return None
    if data["format"] != FORMAT_VERSION or data["machine"] != machine_key():
        return None
    if not (_number(data["wake_s"], False) and data["wake_s"] < 1.0):
        return None
    if not (_number(data["flops_per_s"]) and _number(data["bytes_per_s"])):
        return None
    products, few, packed = data["products"], data["few"], data["packed"]
    if not all(isinstance(x, dict) for x in (products, few, packed)):
        return None
    if not set(products) == set(few) == set(packed) or not set(products) <= set(DTYPES):
        return None
    checked, codes, wins = {}, {}, {}
    for name, rows in products.items():
        if not isinstance(rows, list) or len(rows) != len(_PRODUCTS):
            return None
        for row in rows:
            if not (isinstance(row, list) and len(row) == 4 and all(map(_number, row[:3]))):
                return None
            if not (type(row[3]) is int and row[3] in (0, 1)):
                return None
        if any(b[0] <= a[0] for a, b in zip(rows, rows[1:])):
            return None
        checked[name] = tuple(tuple(row) for row in rows)
        kernels = few[name]
        if not (isinstance(kernels, list) and len(kernels) == len(_FEW_ROWS)):
            return None
        if not all(type(code) is int and code in (SKINNY, OWN, BLAS) for code in kernels):
            return None
        codes[name] = tuple(kernels)
        flags = packed[name]
        if not (isinstance(flags, list) and len(flags) == len(_FEW_ROWS)):
            return None
        if not all(type(flag) is int and flag in (0, 1) for flag in flags):
            return None
        wins[name] = tuple(flags)
    return GemmTuning(
        data["machine"], data["wake_s"], data["flops_per_s"], data["bytes_per_s"], checked,
        codes, wins,
    )  # fmt: skip
