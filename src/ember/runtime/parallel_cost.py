"""The parallel executor's cost model: how long a node takes here, and what running it beside
another node costs, measured on this machine.

Running two kernels at once only pays where each leaves cores idle. ember's matmuls take every
pool thread above a size (runtime/cgemm.py; a second one started meanwhile runs on its own
thread, BLAS single-threaded), as its fused C loops do above `cfuse.PARALLEL_MIN` elements;
small kernels and NumPy's elementwise loops run on one core and release the GIL. So the model
is calibrated, not assumed (`calibrate`):

* ``blas``: square float32 matmuls over a range of sizes, through the matmul op's kernel: the
  time of one call as generated code runs it (split over ember's pool, runtime/cgemm.py), its
  time as a parallel run's worker runs it (BLAS single-threaded, runtime/blas_threads.py, where
  OpenBLAS allows), and the *pair factor*, the wall time of two such calls run at once on two
  threads over the time of one (1: they overlap perfectly; 2 on two cores: no gain; above 2:
  they slow each other down, as GIL hand-offs do to short calls);
* ``numpy``: the same for an elementwise multiply, by bytes moved;
* ``handoff_s``: one cross-thread signal (a waiting thread woken by an Event), ``fork_s``: waking
  the pool's workers and joining them for one run, ``step_s``: the parallel runner's cost per
  node beyond generated code's.

A node is then estimated (`estimate`) from its op's ``kind`` and ``cost`` (FLOPs, bytes): kinds
``linalg`` and ``nn`` (matmuls, convolutions: BLAS) by the blas table at its FLOPs, the rest by
the numpy table at its bytes, and a loop compiled by ember (an op with a ``compile`` hook) long
enough for ember's pool counts as taking every pool thread. Long nodes whose pair factor says a
partner gains too little are *exclusive*: the scheduler never overlaps them with anything;
short ones are stretched by their pair factor wherever they may overlap.

Limits. Pair factors are measured for two kernels at once; with more workers the model assumes
the same factor. BLAS is calibrated with square matmuls, so a convolution (whose im2col copies
its FLOPs do not count) is predicted faster than it runs, which overstates the hand-offs'
share and errs toward sequential plans.

The calibration is cached per machine (CPU model, core count, NumPy and BLAS configuration) as
JSON in ember's cache directory (`ccompile.cache_dir`, ``$EMBER_CACHE_DIR``) and re-measured by
``calibrate(force=True)``.
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .._files import write_atomic
from .cpool import cpu_count, cpu_model

FORMAT_VERSION = "4"  # 3: matmuls timed through ember's kernel (runtime/cgemm.py); 4: its own GEMM
# overlapping nodes whose pair factor is above this fraction of the cores gains too little to
# pay for the hand-offs: they run alone
EXCLUSIVE_FRACTION = 0.8
# ... and that run long enough that waiting for the other workers costs little beside them (a
# shorter one is only stretched by its pair factor where it overlaps)
EXCLUSIVE_HANDOFFS = 5
_BLAS_SIZES = (16, 32, 48, 64, 96, 128, 192, 256, 384)
_NUMPY_SIZES = tuple(1 << k for k in range(8, 23, 2))
_SAMPLE_S = 0.002  # each timed sample runs a kernel about this long


@dataclass
class Calibration:
    """Measured costs of this machine (see the module docstring). Tables are rows of ``(size,
    seconds per call, seconds per call in a parallel run's worker, pair factor there)``, size
    in FLOPs (blas) or bytes (numpy)."""

    cores: int
    handoff_s: float
    fork_s: float
    step_s: float
    blas: list = field(default_factory=list)
    numpy: list = field(default_factory=list)
    machine: str = ""

    def __str__(self) -> str:
        lines = [
            f"calibration of {self.machine or 'this machine'}: {self.cores} cores, hand-off "
            f"{self.handoff_s * 1e6:.1f} us, fork/join {self.fork_s * 1e6:.1f} us, runner "
            f"{self.step_s * 1e6:.2f} us/node"
        ]
        for name, unit in (("blas", "FLOPs"), ("numpy", "bytes")):
            cells = [
                f"{s:.0e}:{t * 1e6:.1f}/{w * 1e6:.1f}us x{f:.2f}"
                for s, t, w, f in getattr(self, name)
            ]
            lines.append(f"  {name} ({unit}: time, in a worker, pair factor): " + ", ".join(cells))
        return "\n".join(lines)


@dataclass(frozen=True)
class NodeEstimate:
    """A node's predicted time in generated code and in a parallel run's worker, its pair
    factor there, and whether it must run alone."""

    seconds: float
    worker_seconds: float
    factor: float
    exclusive: bool
    reason: str


# --------------------------------------------------------------------------------- lookups
def _interpolate(table: list, size: float) -> tuple[float, float, float]:
    """(seconds, seconds in a worker, pair factor) at ``size``: log-log between measured rows;
    beyond the largest row times grow linearly with size (the rate of the largest), below the
    smallest they are the smallest's (a call costs at least its dispatch)."""
    size = max(float(size), 1.0)
    if size <= table[0][0]:
        return tuple(table[0][1:])
    if size >= table[-1][0]:
        s, t, w, f = table[-1]
        return t * size / s, w * size / s, f
    for row0, row1 in zip(table, table[1:]):
        s0, s1 = row0[0], row1[0]
        if s0 <= size <= s1:
            k = math.log(size / s0) / math.log(s1 / s0)
            t, w = (math.exp((1 - k) * math.log(row0[i]) + k * math.log(row1[i])) for i in (1, 2))
            return t, w, (1 - k) * row0[3] + k * row1[3]
    raise AssertionError("unreachable: the table is sorted by size")


def _elements(types) -> int:
    return max((int(np.prod(t.shape, dtype=np.int64)) for t in types), default=0)


def estimate(node, calibration: Calibration) -> NodeEstimate:
    """Predict ``node``'s time and concurrency from its op's kind and cost (a call node with
    concrete shapes)."""
    op = node.op
    in_types = [v.type for v in node.inputs]
    out_types = [v.type for v in node.outputs]
    if op.kind in ("random", "control"):
        # random draws must keep their order; control ops run nested graphs of unknown cost
        t = calibration.numpy[0][1]
        return NodeEstimate(t, t, 1.0, True, f"kind {op.kind}")
    cost = op.cost(in_types, out_types, node.attrs) if op.cost is not None else None
    flops, moved = (cost.flops, cost.bytes) if cost is not None else (0, 0)
    seconds, worker, factor = _interpolate(calibration.numpy, moved)
    why = "memory-bound"
    if op.kind in ("linalg", "nn"):
        itemsize = max((t.dtype.itemsize for t in out_types), default=4)
        scale = max(itemsize, 4) / 4  # calibrated in float32; doubles take twice as long
        t_flops, w_flops, f_flops = _interpolate(calibration.blas, flops)
        if t_flops * scale >= seconds:
            seconds, worker, factor, why = t_flops * scale, w_flops * scale, f_flops, "BLAS"
    if op.extra.get("compile") is not None and op.kind not in ("linalg", "nn"):
        from . import cfuse, cpool

        threads = cpool.get_num_threads()
        if _elements([*in_types, *out_types]) > cfuse.PARALLEL_MIN and threads > 1:
            factor, why = float(max(threads, calibration.cores)), "a loop on ember's pool"
    # a short call slowed by a partner loses less than a hand-off costs: not worth a barrier
    exclusive = (
        factor >= EXCLUSIVE_FRACTION * calibration.cores
        and worker >= EXCLUSIVE_HANDOFFS * calibration.handoff_s
    )
    return NodeEstimate(seconds, worker, factor, exclusive, why)


# ------------------------------------------------------------------------------ measurement
def _median_time(fn, samples: int) -> float:
    return statistics.median(_times(fn, samples))


def _best_time(fn, samples: int) -> float:
    """The fastest of ``samples`` runs: other processes on the machine only ever add time."""
    return min(_times(fn, samples))


def _times(fn, samples: int) -> list[float]:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def _measure(kernel, pool, samples: int = 5) -> tuple[float, float, float]:
    """(seconds per call, the same in a worker, pair factor there) of ``kernel()``: alone, then
    as a worker runs it (single-threaded BLAS), then on the calling thread and a pool worker at
    once."""
    from . import blas_threads

    kernel()
    once = _median_time(kernel, 3)
    reps = max(1, min(200, int(_SAMPLE_S / max(once, 1e-7))))

    def batch():
        for _ in range(reps):
            kernel()

    alone = _best_time(batch, samples)
    with blas_threads.single_threaded():
        worker = _best_time(batch, samples)
        pair = _best_time(lambda: pool.run_beside(batch, batch), samples)
    return alone / reps, worker / reps, max(1.0, pair / worker)


def _handoff(pool, rounds: int = 200) -> float:
    """Half a ping-pong between the calling thread and a worker through Events."""
    ping, pong = threading.Event(), threading.Event()

    def responder():
        for _ in range(rounds):
            ping.wait()
            ping.clear()
            pong.set()

    def caller():
        for _ in range(rounds):
            ping.set()
            pong.wait()
            pong.clear()

    total = _median_time(lambda: pool.run_beside(caller, responder), 3)
    return total / (2 * rounds)


def _runner_step(pool) -> float:
    """The parallel runner's per-node cost beyond generated code's, on a chain of tiny ops."""
    from ..dtypes import float32
    from ..graph.ir import Graph
    from ..ops._registry import REGISTRY, TensorType
    from .codegen import compile_graph
    from .parallel import run_steps, worker_steps

    graph = Graph("calibration_chain")
    value = graph.add_input(TensorType((4,), float32), "x")
    for _ in range(64):
        value = graph.add_call(REGISTRY["neg"], [value]).outputs[0]
    graph.set_outputs([value])
    x = np.ones(4, np.float32)
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    steps = worker_steps(graph, [calls], {})[0]
    codegen = compile_graph(graph)
    runner = _median_time(lambda: run_steps(graph, steps, [x]), 51)
    generated = _median_time(lambda: codegen(x), 51)
    return max(0.0, (runner - generated) / 64)


def machine_key() -> str:
    """What the calibration depends on: CPU model, cores, NumPy and its BLAS."""
    cpu = cpu_model()
    try:
        blas = json.dumps(np.show_config(mode="dicts").get("Build Dependencies", {}), default=str)
    except Exception:
        blas = ""
    cores = cpu_count()
    return f"{platform.node()}|{cpu}|{cores}|numpy {np.__version__}|{blas}|v{FORMAT_VERSION}"


def measure() -> Calibration:
    """Measure this machine now (about a second; nothing is cached)."""
    from ..ops.linalg import matmul_kernel
    from .parallel import worker_pool

    pool = worker_pool()
    rng = np.random.default_rng(0)
    blas = []
    for n in _BLAS_SIZES:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        blas.append((2.0 * n**3, *_measure(lambda a=a, b=b: matmul_kernel(a, b), pool)))
    elementwise = []
    for n in _NUMPY_SIZES:
        a = rng.standard_normal(n, dtype=np.float32)
        b = rng.standard_normal(n, dtype=np.float32)
        elementwise.append((12.0 * n, *_measure(lambda a=a, b=b: np.multiply(a, b), pool)))
    return Calibration(
        cores=cpu_count(),
        handoff_s=_handoff(pool),
        fork_s=_median_time(lambda: pool.run_beside(lambda: None, lambda: None), 51),
        step_s=_runner_step(pool),
        blas=_monotone(blas),
        numpy=_monotone(elementwise),
        machine=platform.node(),
    )


def _monotone(table: list) -> list:
    """Noise can make a size measure slower than a larger one: cap each time by those of the
    larger sizes, so interpolation never predicts that more work takes less time."""
    out, ceiling, worker_ceiling = [], float("inf"), float("inf")
    for size, seconds, worker, factor in reversed(table):
        ceiling, worker_ceiling = min(ceiling, seconds), min(worker_ceiling, worker)
        out.append((size, ceiling, worker_ceiling, factor))
    return out[::-1]


# ------------------------------------------------------------------------------------ cache
_loaded: dict[str, Calibration] = {}
_lock = threading.Lock()


def calibration_path():
    from .ccompile import cache_dir

    digest = hashlib.sha256(machine_key().encode()).hexdigest()[:16]
    return cache_dir() / f"parallel-calibration-{digest}.json"


def calibrate(force: bool = False) -> Calibration:
    """This machine's calibration: from memory, else from the cache file, else measured and
    cached. ``force=True`` measures again (after a hardware or load change) and replaces the
    cached one."""
    path = calibration_path()
    with _lock:
        if not force and str(path) in _loaded:
            return _loaded[str(path)]
        calibration = None if force else _read(path)
        if calibration is None:
            calibration = measure()
            _write(path, calibration)
        _loaded[str(path)] = calibration
        return calibration


def _read(path) -> Calibration | None:
    try:
        data = json.loads(path.read_text())
        if data.pop("format", None) != FORMAT_VERSION:
            return None
        data["blas"] = [tuple(r) for r in data["blas"]]
        data["numpy"] = [tuple(r) for r in data["numpy"]]
        return Calibration(**data)
    except (OSError, ValueError, TypeError, KeyError):
        return None  # missing or unreadable: measure again


def _write(path, calibration: Calibration) -> None:
    data = dict(asdict(calibration), format=FORMAT_VERSION)
    try:
        write_atomic(path, json.dumps(data, indent=1))
    except OSError:
        pass  # an unwritable cache costs a re-measurement next process, nothing else


__all__ = ["Calibration", "NodeEstimate", "calibrate", "calibration_path", "estimate", "measure"]
