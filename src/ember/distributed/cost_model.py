"""A cost model of data-parallel (and pipeline) training beyond this machine: the alpha-beta model
of collectives, with a network's latency and bandwidth as parameters (the named `NETWORKS`, or
measured here by `measure_network` under ``mpiexec``), and a step-time predictor that gives the
scaling efficiency of N ranks from one rank's measured compute time.

All-reduce of ``n`` bytes on ``N`` ranks, latency ``alpha`` (s a message), bandwidth ``beta``
(bytes/s a link, each direction), reduction speed ``gamma`` (s a byte added; 0 by default, a
network-bound job):

* ring (reduce-scatter then all-gather, bandwidth-optimal; large messages):
  ``2(N-1) alpha + 2 (N-1)/N n / beta + (N-1)/N n gamma``
* recursive doubling (log2 N exchanges of the whole message; small messages):
  ``ceil(log2 N) (alpha + n / beta + n gamma)``
* binary tree (reduce to a root, then broadcast): ``2 ceil(log2 N) (alpha + n / beta) +
  ceil(log2 N) n gamma``
* "auto": the fastest of the three, as MPI libraries and NCCL switch algorithms by size.

Data-parallel step (weak scaling: the per-rank batch fixed, so compute time does not change
with N): gradients are all-reduced in buckets (DDP's ``bucket_cap_mb``) while backward runs;
``overlap`` of backward's time (``backward_fraction`` of the step's compute) hides communication,
except the last bucket's, which starts when backward ends. ``step = compute + exposed``,
``exposed = max(allreduce - overlap * backward, last bucket)``; the scaling efficiency is
``compute / step`` (throughput per rank against one rank's).

Pipeline (GPipe and 1F1B have the same bubble): ``(M + S - 1) (t_stage + t_p2p)`` for M
microbatches on S stages, the bubble ``(S-1)/(M+S-1)``.

What it leaves out (so it is an upper bound on efficiency): stragglers and jitter, contention
with other jobs, the host's time launching collectives, compute slowed by communication sharing
memory bandwidth, and hierarchical networks (nodes of several GPUs): one flat network here.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

__all__ = [
    "NETWORKS",
    "Network",
    "StepPrediction",
    "allreduce_time",
    "data_parallel_step",
    "fit_allreduce",
    "fit_latency_bandwidth",
    "measure_network",
    "pipeline_step_time",
    "scaling_table",
]

GBIT = 1e9 / 8  # bytes per second in one Gb/s


@dataclass(frozen=True)
class Network:
    """A flat network: per-message ``latency`` (s), per-link ``bandwidth`` (bytes/s, each
    direction), ``gamma`` (s per byte reduced)."""

    name: str
    bandwidth: float
    latency: float
    gamma: float = 0.0

    def __str__(self) -> str:
        return (
            f"{self.name} ({self.bandwidth / GBIT:.0f} Gb/s = {self.bandwidth / 1e9:.2f} GB/s, "
            f"{self.latency * 1e6:.1f} us)"
        )


# Typical figures (named parameters, not measurements): MPI over TCP on Ethernet pays tens of
# microseconds a message; RDMA (RoCE, InfiniBand) a few or about one.
NETWORKS = {
    "ethernet-25g": Network("25 Gb/s Ethernet (TCP)", 25 * GBIT, 25e-6),
    "roce-25g": Network("25 Gb/s RoCE", 25 * GBIT, 5e-6),
    "ethernet-100g": Network("100 Gb/s Ethernet (TCP)", 100 * GBIT, 15e-6),
    "roce-100g": Network("100 Gb/s RoCE", 100 * GBIT, 3e-6),
    "infiniband-200g": Network("200 Gb/s InfiniBand HDR", 200 * GBIT, 1.5e-6),
}

ALGORITHMS = ("ring", "recursive_doubling", "tree", "auto")


def _steps(ranks: int) -> int:
    return math.ceil(math.log2(ranks))


def allreduce_time(nbytes: float, ranks: int, network: Network, algorithm: str = "auto") -> float:
    """Seconds to all-reduce ``nbytes`` over ``ranks`` (see the module docstring)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    if ranks == 1 or nbytes == 0:
        return 0.0
    a, b, g, n = network.latency, network.bandwidth, network.gamma, float(nbytes)
    times = {
        "ring": 2 * (ranks - 1) * a + 2 * (ranks - 1) / ranks * n / b + (ranks - 1) / ranks * n * g,
        "recursive_doubling": _steps(ranks) * (a + n / b + n * g),
        "tree": 2 * _steps(ranks) * (a + n / b) + _steps(ranks) * n * g,
    }
    return min(times.values()) if algorithm == "auto" else times[algorithm]


def _buckets(nbytes: float, bucket_bytes: float) -> list:
    if nbytes <= 0:
        return []
    full = int(nbytes // bucket_bytes)
    sizes = [float(bucket_bytes)] * full
    if nbytes - full * bucket_bytes > 0:
        sizes.append(nbytes - full * bucket_bytes)
    return sizes


@dataclass(frozen=True)
class StepPrediction:
    ranks: int
    compute_s: float
    allreduce_s: float
    exposed_s: float

    @property
    def step_s(self) -> float:
        return self.compute_s + self.exposed_s

    @property
    def efficiency(self) -> float:
        """Throughput per rank against one rank's (weak scaling)."""
        return self.compute_s / self.step_s

    @property
    def speedup(self) -> float:
        return self.ranks * self.efficiency


def data_parallel_step(
    compute_s: float,
    grad_bytes: float,
    ranks: int,
    network: Network,
    backward_fraction: float = 2 / 3,
    overlap: float = 1.0,
    bucket_bytes: float = 25 * 2**20,
    algorithm: str = "auto",
) -> StepPrediction:
    """One data-parallel step on ``ranks`` (see the module docstring): ``compute_s`` is one
    rank's forward+backward+optimizer time for its batch, ``grad_bytes`` the gradients' size."""
    if not 0 <= overlap <= 1 or not 0 <= backward_fraction <= 1:
        raise ValueError("overlap and backward_fraction must be between 0 and 1")
    buckets = _buckets(grad_bytes, bucket_bytes)
    times = [allreduce_time(n, ranks, network, algorithm) for n in buckets]
    total = sum(times)
    last = times[-1] if times else 0.0
    exposed = max(total - overlap * backward_fraction * compute_s, last) if total else 0.0
    return StepPrediction(ranks, compute_s, total, exposed)


def pipeline_step_time(
    stage_s: float, microbatches: int, stages: int, activation_bytes: float, network: Network
) -> tuple[float, float]:
    """(seconds of one pipelined step, bubble fraction) for ``microbatches`` through ``stages``
    balanced stages of ``stage_s`` each (forward + backward of one microbatch), each boundary
    sending ``activation_bytes`` forward and as many gradient bytes back."""
    p2p = 2 * (network.latency + activation_bytes / network.bandwidth) if stages > 1 else 0.0
    slots = microbatches + stages - 1
    return slots * (stage_s + p2p), (stages - 1) / slots


def scaling_table(
    compute_s: float,
    grad_bytes: float,
    networks,
    ranks=(8, 16, 32, 64, 128, 256, 512, 1024),
    **kwargs,
) -> str:
    """Predicted scaling efficiency, one row per rank count, one column per network."""
    networks = list(networks)
    head = f"{'ranks':>6}" + "".join(f"  {n.name[:24]:>24}" for n in networks)
    lines = [head]
    for r in ranks:
        cells = []
        for net in networks:
            p = data_parallel_step(compute_s, grad_bytes, r, net, **kwargs)
            cells.append(f"{p.efficiency:7.1%} ({p.exposed_s * 1e3:8.2f} ms)")
        lines.append(f"{r:>6}" + "".join(f"  {c:>24}" for c in cells))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- measurement
def fit_latency_bandwidth(sizes, seconds) -> tuple[float, float]:
    """(latency, bandwidth) of ``t = latency + n / bandwidth`` fitted to one-way message times
    by least squares, relative errors weighted equally (small messages count)."""
    n = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(seconds, dtype=np.float64)
    design = np.stack([np.ones_like(n), n], axis=1) / t[:, None]
    (a, b), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    return max(float(a), 0.0), (1.0 / b if b > 0 else math.inf)


def fit_allreduce(sizes, seconds, ranks: int) -> tuple[float, float]:
    """(alpha, beta) of the ring model fitted to measured all-reduce times on ``ranks``."""
    a, b = fit_latency_bandwidth(sizes, seconds)  # t = a + n / b
    return a / (2 * (ranks - 1)), b * 2 * (ranks - 1) / ranks


def _best_time(fn, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure_network(comm=None, sizes=None, repeats: int = 20, name: str = "measured") -> dict:
    """Ping-pong between ranks 0 and 1 and an all-reduce sweep over ``comm`` (the default
    group's), run on every rank of a job of at least 2 ranks. Returns, on every rank, the
    fitted ``Network`` for point-to-point messages and for the all-reduce (ring model), and
    the raw times (median over ranks of each rank's best of ``repeats``)."""
    from ._mpi import mpi
    from .process_group import _group

    MPI = mpi()
    comm = comm or _group(None, "measure_network").comm
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        raise ValueError("measure_network needs at least 2 ranks (run it under mpiexec -n 2)")
    sizes = list(sizes or [2**k for k in range(3, 25, 3)])
    pingpong = []
    for n in sizes:
        buf = np.zeros(n, dtype=np.uint8)
        reps = max(3, repeats if n < 2**20 else repeats // 4)

        def once(buf=buf):
            if rank == 0:
                comm.Send(buf, dest=1, tag=7)
                comm.Recv(buf, source=1, tag=7)
            elif rank == 1:
                comm.Recv(buf, source=0, tag=7)
                comm.Send(buf, dest=0, tag=7)

        comm.Barrier()
        once()
        pingpong.append(_best_time(once, reps) / 2)
    pingpong = comm.bcast(pingpong, root=0)
    allreduce = []
    for n in sizes:
        count = max(n // 4, 1)
        send = np.ones(count, dtype=np.float32)
        recv = np.empty_like(send)
        reps = max(3, repeats if n < 2**20 else repeats // 4)

        def once(send=send, recv=recv):
            comm.Allreduce(send, recv, op=MPI.SUM)

        comm.Barrier()
        once()
        allreduce.append(_best_time(once, reps))
    allreduce = np.median(np.array(comm.allgather(allreduce)), axis=0).tolist()
    p_lat, p_bw = fit_latency_bandwidth(sizes, pingpong)
    a_lat, a_bw = fit_allreduce([max(n // 4, 1) * 4 for n in sizes], allreduce, size)
    return {
        "sizes": sizes,
        "pingpong_s": pingpong,
        "allreduce_s": allreduce,
        "point_to_point": Network(f"{name} point-to-point", p_bw, p_lat),
        "allreduce": Network(f"{name} all-reduce", a_bw, a_lat),
        "ranks": size,
    }
