"""The parallel executor's cost model: how long a node takes here, and what running it beside
another node costs, measured on this machine.

Running two kernels at once only pays where each leaves cores idle. ember's matmuls take every
pool thread above a size (kernels/cgemm.py; a second one started meanwhile runs on its own
thread, BLAS single-threaded), as its fused C loops do above `cfuse.PARALLEL_MIN` elements;
small kernels and NumPy's elementwise loops run on one core and release the GIL. So the model
is calibrated, not assumed (`calibrate`):

* ``blas``: square float32 matmuls over a range of sizes, through the matmul op's kernel: the
  time of one call as generated code runs it (split over ember's pool, kernels/cgemm.py), its
  time as a parallel run's worker runs it (BLAS single-threaded, kernels/blas_threads.py, where
  OpenBLAS allows), and the *pair factor*, the wall time of two such calls run at once on two
  threads over the time of one (1: they overlap perfectly; 2 on two cores: no gain; above 2:
  they slow each other down, as GIL hand-offs do to short calls);
* ``numpy``: the same for an elementwise multiply, by bytes moved;
* ``handoff_s``: one cross-thread signal (a waiting thread woken by an Event), ``fork_s``: waking
  the pool's workers and joining them for one run, ``step_s``: the parallel runner's cost per
  node beyond generated code's.

* for the C graph runner (runtime/cgraph.py), timed through the runner itself: ``c_run_s``,
  one run's fixed cost (two tiny steps on two threads, the Python around the call included),
  ``c_step_s``, its Python per node (outputs allocated, pointers written), and ``c_conv`` /
  ``c_copy``, 3x3 convolutions by FLOPs and copies by bytes: a step's time alone on one
  thread and the pair factor of two at once (no GIL between them: about 1 where the cores
  are free).

A node is then estimated (`estimate`) from its op's ``kind`` and ``cost`` (FLOPs, bytes): kinds
``linalg`` and ``nn`` (matmuls, convolutions: BLAS) by the blas table at its FLOPs, the rest by
the numpy table at its bytes, and a loop compiled by ember (an op with a ``compile`` hook) long
enough for ember's pool counts as taking every pool thread. Long nodes whose pair factor says a
partner gains too little are *exclusive*: the scheduler never overlaps them with anything;
short ones are stretched by their pair factor wherever they may overlap.

For a graph the C runner can run, each node's times are measured instead (``measured``):
on a small machine a convolution's Python preamble in generated code and its kernel's speed
per shape are far from a square matmul's, and the decision rests on them.

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
import threading
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as dataclass_fields

import numpy as np

from .._files import OWN_FILE_MODE, read_own_file, write_atomic
from ..kernels.cpool import cpu_count, cpu_model

FORMAT_VERSION = "6"  # 3: matmuls timed through ember's kernel (kernels/cgemm.py); 4: its own GEMM;
# 5: the C graph runner's costs; 6: a split no slower than one thread (parallel_measure)
# overlapping nodes whose pair factor is above this fraction of the cores gains too little to
# pay for the hand-offs: they run alone
EXCLUSIVE_FRACTION = 0.8
# ... and that run long enough that waiting for the other workers costs little beside them (a
# shorter one is only stretched by its pair factor where it overlaps)
EXCLUSIVE_HANDOFFS = 5


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
    # the C graph runner (runtime/cgraph.py): one run's fixed cost (two tiny steps on two
    # threads), its cost per node, and rows (FLOPs or bytes, seconds alone on one thread, pair
    # factor) of its convolution and copy steps, timed in C; empty without a compiler (then
    # nothing runs there)
    c_run_s: float = 0.0
    c_step_s: float = 0.0
    c_conv: list = field(default_factory=list)
    c_copy: list = field(default_factory=list)
    runner: str = "python"  # "c": the costs of the C graph runner (see `for_c_runner`)

    def for_c_runner(self) -> Calibration | None:
        """These costs as the C graph runner meets them, or None when they were not measured.
        Its steps run single-threaded, so a node costs its one-thread time and pair factor in a
        run, from the runner's own tables (and its usual time in generated code, the sequential
        estimate); a finished node costs its successors no hand-off (an atomic count a spinning
        thread sees at once); the run's fixed cost is ``c_run_s``, and ``c_step_s`` per node (its
        outputs allocated, its pointers written)."""
        if not self.c_conv or not self.c_copy:
            return None

        def rebase(table, c_rows):
            c_table = [(s, t, t, f) for s, t, f in c_rows]
            return [
                (size, seconds, *_interpolate(c_table, size)[1:]) for size, seconds, *_ in table
            ]

        return replace(
            self,
            handoff_s=0.0,
            fork_s=self.c_run_s,
            step_s=self.c_step_s,
            blas=rebase(self.blas, self.c_conv),
            numpy=rebase(self.numpy, self.c_copy),
            runner="c",
        )

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
    alone_seconds: float | None = None  # on the C runner with the pool free (its one thread)


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


def estimate(node, calibration: Calibration, measured: tuple | None = None) -> NodeEstimate:
    """Predict ``node``'s time and concurrency from its op's kind and cost (a call node with
    concrete shapes). ``measured``: its (seconds, seconds in a worker[, seconds alone with the
    pool free]) timed on this machine, which replace the tables' (the pair factor still comes
    from them)."""
    found = _estimate(node, calibration)
    if measured is None:
        return found
    seconds, worker, *alone = measured
    exclusive = _exclusive(found.factor, worker, calibration)
    reason = found.reason + ", measured"
    alone_s = alone[0] if alone else None
    return NodeEstimate(seconds, worker, found.factor, exclusive, reason, alone_s)


def scaled_to_measured(graph, calibration: Calibration, measured: dict) -> dict:
    """``measured`` (call position -> (seconds, seconds in a worker, seconds alone)) with the
    nodes it leaves out (measuring ran out of budget) priced by the tables scaled to this
    machine and graph: each table time times the median ratio of measured to table time over
    the measured nodes of the same op (of all measured nodes where none of that op was), so
    a large graph's unmeasured convolutions are not priced at what the square-product tables
    say (four times their time, which put a U-Net's C runner at twice generated code's)."""
    if not measured:
        return measured
    ratios: dict = {}
    for position, times in measured.items():
        table = _estimate(graph.nodes[position], calibration)
        alone = table.alone_seconds or table.worker_seconds
        for key in (graph.nodes[position].op.name, None):
            found = ratios.setdefault(key, ([], [], []))
            for got, want, side in zip(times, (table.seconds, table.worker_seconds, alone), found):
                if want > 0:
                    side.append(got / want)
    filled = dict(measured)
    for position, node in enumerate(graph.nodes):
        if node.kind != "call" or position in filled:
            continue
        sides = ratios.get(node.op.name) or ratios[None]
        table = _estimate(node, calibration)
        alone = table.alone_seconds or table.worker_seconds
        times = (table.seconds, table.worker_seconds, alone)
        if not all(sides):
            sides = ratios[None]
        if not all(sides):
            continue
        filled[position] = tuple(t * float(np.median(r)) for t, r in zip(times, sides))
    return filled


def _estimate(node, calibration: Calibration) -> NodeEstimate:
    op = node.op
    in_types = [v.type for v in node.inputs]
    out_types = [v.type for v in node.outputs]
    if op.kind in ("random", "control") or op.effect is not None:
        # random draws and collectives must keep their order; control ops run nested graphs
        # of unknown cost
        t = calibration.numpy[0][1]
        why = f"kind {op.kind}" if op.effect is None else "an effect"
        return NodeEstimate(t, t, 1.0, True, why)
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
    loop = op.compile is not None and op.kind not in ("linalg", "nn")
    if loop and calibration.runner != "c":  # (the C runner's steps run on one thread)
        from ..kernels import cfuse, cpool

        threads = cpool.get_num_threads()
        if _elements([*in_types, *out_types]) > cfuse.PARALLEL_MIN and threads > 1:
            factor, why = float(max(threads, calibration.cores)), "a loop on ember's pool"
    return NodeEstimate(seconds, worker, factor, _exclusive(factor, worker, calibration), why)


def _exclusive(factor: float, worker: float, calibration: Calibration) -> bool:
    """Whether a node runs alone: a partner would gain too little beside it (its pair factor),
    and it is long enough that waiting for the other workers costs little (a short call slowed
    by a partner loses less than a hand-off costs: not worth a barrier)."""
    return (
        factor >= EXCLUSIVE_FRACTION * calibration.cores
        and worker >= EXCLUSIVE_HANDOFFS * calibration.handoff_s
    )


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
    from .parallel_measure import measure_machine

    return Calibration(**measure_machine())


# ------------------------------------------------------------------------------------ cache
_loaded: dict[str, Calibration] = {}
_lock = threading.Lock()


def calibration_path():
    from ..kernels.ccompile import cache_dir

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
    """The calibration in ``path``, or None (measure again) when it is missing, unreadable,
    of another format, or damaged: valid JSON whose values are not what `measure` writes (the
    wrong kinds, negative or non-finite times, tables whose sizes do not rise)."""
    raw = read_own_file(path)  # (a cache file someone else could write is not read)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None  # missing or unreadable: measure again
    if not isinstance(data, dict) or data.pop("format", None) != FORMAT_VERSION:
        return None
    fields = {f.name for f in dataclass_fields(Calibration)}
    if set(data) != fields:
        return None
    if not (_is_count(data["cores"]) and data["cores"] >= 1):
        return None
    times = ("handoff_s", "fork_s", "step_s", "c_run_s", "c_step_s")
    if not all(_is_number(data[k]) and data[k] >= 0 for k in times):
        return None
    if not isinstance(data["machine"], str) or data["runner"] not in ("python", "c"):
        return None
    for table, width, required in (("blas", 4, True), ("numpy", 4, True)) + (
        ("c_conv", 3, False),
        ("c_copy", 3, False),
    ):
        rows = _table(data[table], width)
        if rows is None or (required and not rows):
            return None
        data[table] = rows
    return Calibration(**data)


def _is_count(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _table(rows, width: int) -> list | None:
    """``rows`` as tuples of ``width`` positive finite numbers with rising sizes (what
    `_interpolate` takes logs and ratios of), or None."""
    if not isinstance(rows, list):
        return None
    out = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == width):
            return None
        if not all(_is_number(x) and x > 0 for x in row):
            return None
        if out and row[0] <= out[-1][0]:
            return None
        out.append(tuple(row))
    return out


def _write(path, calibration: Calibration) -> None:
    data = dict(asdict(calibration), format=FORMAT_VERSION)
    try:
        write_atomic(path, json.dumps(data, indent=1), OWN_FILE_MODE)
    except OSError:
        pass  # an unwritable cache costs a re-measurement next process, nothing else


__all__ = [
    "Calibration",
    "NodeEstimate",
    "calibrate",
    "calibration_path",
    "estimate",
    "measure",
    "scaled_to_measured",
]
