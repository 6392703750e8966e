"""Measuring this machine for the parallel executor's cost model (runtime/parallel_cost.py
says what is measured and why): kernels timed alone, in a worker and two at once, the pool's
hand-offs, and the C graph runner's own costs, timed through the runner itself."""

from __future__ import annotations

import platform
import threading

import numpy as np

from ..kernels.cpool import cpu_count
from .timing import _best_time, _median_time

__all__ = ["measure_machine"]

_SAMPLE_S = 0.002  # each timed sample runs a kernel about this long
_NUMPY_SIZES = tuple(1 << k for k in range(8, 23, 2))
_BLAS_SIZES = (16, 32, 48, 64, 96, 128, 192, 256, 384)


def _measure(kernel, pool, samples: int = 5) -> tuple[float, float, float]:
    """(seconds per call, the same in a worker, pair factor there) of ``kernel()``: alone, then
    as a worker runs it (single-threaded BLAS), then on the calling thread and a pool worker at
    once."""
    from ..kernels import blas_threads

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
    return _split_time(alone, worker) / reps, worker / reps, max(1.0, pair / worker)


def _split_time(alone: float, worker: float) -> float:
    """A kernel's time as one call runs it (split over ember's pool above a size), at most its
    time on one thread (``worker``). A split slower than one thread measured a busy machine,
    not this one: a pool thread waiting for a core that another process holds waits a
    scheduler slice, milliseconds, at every call (a test worker beside the calibration made a
    128x128 product take 32 ms against 0.2 ms on one thread), and the calibration is cached
    for good, while the load passes."""
    return min(alone, worker)


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
    from ..ops.elementwise import NEG
    from ..types import TensorType
    from .codegen import compile_graph
    from .workers import run_steps, worker_steps

    graph = Graph("calibration_chain")
    value = graph.add_input(TensorType((4,), float32), "x")
    for _ in range(64):
        value = graph.add_call(NEG, [value]).outputs[0]
    graph.set_outputs([value])
    x = np.ones(4, np.float32)
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    steps = worker_steps(graph, [calls], {})[0]
    codegen = compile_graph(graph)
    runner = _median_time(lambda: run_steps(graph, steps, [x]), 51)
    generated = _median_time(lambda: codegen(x), 51)
    return max(0.0, (runner - generated) / 64)


def measure_machine() -> dict:
    """The fields of a `parallel_cost.Calibration` of this machine, measured now (about a
    second; nothing is cached)."""
    from ..ops.linalg import MATMUL
    from .workers import worker_pool

    pool = worker_pool()
    rng = np.random.default_rng(0)
    blas = []
    for n in _BLAS_SIZES:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        blas.append((2.0 * n**3, *_measure(lambda a=a, b=b: MATMUL.run(a, b), pool)))
    elementwise = []
    for n in _NUMPY_SIZES:
        a = rng.standard_normal(n, dtype=np.float32)
        b = rng.standard_normal(n, dtype=np.float32)
        elementwise.append((12.0 * n, *_measure(lambda a=a, b=b: np.multiply(a, b), pool)))
    c_run, c_step, c_conv, c_copy = _c_runner_costs()
    return dict(
        cores=cpu_count(),
        handoff_s=_handoff(pool),
        fork_s=_median_time(lambda: pool.run_beside(lambda: None, lambda: None), 51),
        step_s=_runner_step(pool),
        blas=_monotone(blas),
        numpy=_monotone(elementwise),
        machine=platform.node(),
        c_run_s=c_run,
        c_step_s=c_step,
        c_conv=c_conv,
        c_copy=c_copy,
    )


# the C runner's pair tables: 3x3 convolutions ((batch, channels, size), steps per chain) and
# copies (bytes, steps per chain), the chains long enough that a thread's wake-up (once per
# run) and the timing noise of the Python around a run weigh little beside the steps
_C_CONVS = (((2, 16, 8), 32), ((4, 16, 16), 16), ((8, 32, 16), 4), ((8, 64, 16), 2))
_C_COPIES = ((1 << 16, 32), (1 << 20, 16), (1 << 24, 2))
_C_CHAIN = 8  # steps per chain of the tiny ones that time the runner's own costs


def _c_runner_costs() -> tuple[float, float, list, list]:
    """(the C graph runner's fixed cost per run on two threads, its cost per node (the arrays
    it allocates and the pointers it writes), its convolution rows and its copy rows: (FLOPs or
    bytes, seconds alone on one thread, pair factor)), or (0, 0, [], []) without a compiler.
    Each row times a graph of two independent chains of steps run by the runner on one thread
    and on two, less the fixed costs of two chains of tiny steps."""
    from ..dtypes import float32
    from ..graph.ir import Graph
    from ..ops.conv import CONV
    from ..ops.shape import RESHAPE
    from ..types import TensorType
    from . import cgraph

    def pair(op, shapes, attrs, back=None, chain=_C_CHAIN):
        """Runner programs (one thread, two) of two independent chains of ``chain`` ``op``
        nodes on one input (``back``: the attributes taking a node's output back to its
        input's shape), and the inputs."""
        graph = Graph("calibration_pair")
        inputs = [graph.add_input(TensorType(s, float32), f"x{i}") for i, s in enumerate(shapes)]
        ends = []
        for _ in "ab":
            value = inputs[0]
            for k in range(chain):
                step_attrs = attrs if k % 2 == 0 or back is None else back
                value = graph.add_call(op, [value, *inputs[1:]], step_attrs).outputs[0]
            ends.append(value)
        graph.set_outputs(ends)
        if cgraph.c_steps(graph) is None:
            return None
        programs = [
            cgraph.CGraphProgram(graph, cgraph.c_steps(graph), threads=threads)
            for threads in (1, 2)
        ]
        return programs, [np.ones(s, np.float32) for s in shapes]

    tiny = pair(RESHAPE, [(4,)], {"shape": (2, 2)}, {"shape": (4,)}, chain=1)
    if tiny is None:
        return 0.0, 0.0, [], []
    (_, two), arrays = tiny
    c_run = _per_call(lambda: two(*arrays))
    (one, two), arrays = pair(RESHAPE, [(4,)], {"shape": (2, 2)}, {"shape": (4,)})
    fixed1 = _per_call(lambda: one(*arrays))
    fixed2 = _per_call(lambda: two(*arrays))
    c_step = max(0.0, (fixed2 - c_run) / (2 * _C_CHAIN - 2))

    def row(size, made, chain):
        (one, two), arrays = made
        extra1, extra2 = (fixed1 - c_run) / _C_CHAIN * chain, (fixed2 - c_run) / _C_CHAIN * chain
        alone = max((_per_call(lambda: one(*arrays)) - c_run - extra1) / (2 * chain), 1e-7)
        both = (_per_call(lambda: two(*arrays)) - c_run - extra2) / chain
        # (two steps at once take at least one's time and at most two's, noise aside)
        return size, alone, min(2.0, max(1.0, both / alone))

    convs, copies = [], []
    attrs = {"stride": (1, 1), "padding": ((1, 1), (1, 1)), "dilation": (1, 1), "groups": 1}
    for (n, c, h), chain in _C_CONVS:
        made = pair(CONV, [(n, c, h, h), (c, c, 3, 3)], attrs, chain=chain)
        if made is None:
            return 0.0, 0.0, [], []
        convs.append(row(2.0 * n * c * c * 9 * h * h, made, chain))
    for size, chain in _C_COPIES:
        shapes = {"shape": (size // 8, 2)}, {"shape": (size // 4,)}
        made = pair(RESHAPE, [(size // 4,)], *shapes, chain=chain)
        copies.append(row(float(size), made, chain))
    return c_run, c_step, _monotone_rows(convs), _monotone_rows(copies)


def _per_call(fn, samples: int = 5) -> float:
    """The fastest per-call time of ``fn`` over ``samples`` batches of about _SAMPLE_S."""
    fn()
    reps = max(1, min(500, int(_SAMPLE_S / max(_median_time(fn, 3), 1e-7))))

    def batch():
        for _ in range(reps):
            fn()

    return _best_time(batch, samples) / reps


def _monotone_rows(rows: list) -> list:
    return [(size, t, f) for size, t, _, f in _monotone([(s, t, t, f) for s, t, f in rows])]


def _monotone(table: list) -> list:
    """Noise can make a size measure slower than a larger one: cap each time by those of the
    larger sizes, so interpolation never predicts that more work takes less time."""
    out, ceiling, worker_ceiling = [], float("inf"), float("inf")
    for size, seconds, worker, factor in reversed(table):
        ceiling, worker_ceiling = min(ceiling, seconds), min(worker_ceiling, worker)
        out.append((size, ceiling, worker_ceiling, factor))
    return out[::-1]
