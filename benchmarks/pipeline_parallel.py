"""Pipeline parallelism on 2 MPI ranks: step time and measured bubble of GPipe and 1F1B.

Run with ``ember run -n 2 python benchmarks/pipeline_parallel.py`` (``mpiexec -n 2``). The model
is an MLP of ``--layers`` Linear(``--width``)+ReLU layers and a 10-class head, cross-entropy on a
batch of ``--batch``; the cost model cuts it into two stages. Each rank computes on one thread
(ember's pool and BLAS), so two ranks use two cores.

Printed per schedule and microbatch count M (medians over ``--rounds`` steps after a warm-up):
the step time; the *bubble* measured (each rank's fraction of the step not spent running its
stage's programs, the mean over ranks) next to the ideal (S-1)/(M+S-1) of equal stages with
free messages; the CPU time each rank got over its step time (the mean over ranks: well
below 1 - bubble, other processes had the cores); and the speedup over the peer measured in the
same run: one process on one thread running the unpartitioned eager step on the whole batch
(rank 0, while rank 1 waits).

    ember run -n 2 benchmarks/pipeline_parallel.py [--width 1024] [--layers 8] [--batch 256]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import ember  # noqa: E402
import ember.distributed as dist  # noqa: E402
from ember import nn  # noqa: E402
from ember.distributed.pipelining import Schedule1F1B, ScheduleGPipe, pipeline  # noqa: E402
from ember.kernels.cpool import cpu_model  # noqa: E402


def build(width: int, layers: int) -> nn.Module:
    ember.manual_seed(0)
    mods: list = [nn.Linear(width, width) if i % 2 == 0 else nn.ReLU() for i in range(2 * layers)]
    return nn.Sequential(*mods, nn.Linear(width, 10))


def loss_fn(out, y):
    return nn.functional.cross_entropy(out, y)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    dist.init_process_group("mpi")
    ember.set_num_threads(1)
    rank, size = dist.get_rank(), dist.get_world_size()
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((args.batch, args.width)).astype(np.float32))
    y = ember.tensor(rng.integers(0, 10, args.batch))

    # the peer: the unpartitioned eager step, one process on one thread
    peer = []
    if rank == 0:
        model = build(args.width, args.layers)
        opt = ember.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(args.rounds + 1):
            start = time.perf_counter()
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            peer.append(time.perf_counter() - start)
    dist.barrier()
    peer_s = statistics.median(peer[1:]) if peer else 0.0
    if rank == 0:
        print(f"CPU: {cpu_model()}; {size} ranks x 1 thread; MLP {args.layers} x {args.width}, "
              f"batch {args.batch}; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
        print(f"one process, eager, whole batch: {peer_s * 1e3:.1f} ms/step")
    for schedule_class in (ScheduleGPipe, Schedule1F1B):
        for m in (2, 4, 8, 16):
            model = build(args.width, args.layers)
            pipe = pipeline(model, (x[: args.batch // m],), num_stages=size)
            if rank == 0 and schedule_class is ScheduleGPipe and m == 2:
                print(pipe)
            stage = pipe.build_stage(rank)
            schedule = schedule_class(stage, m, loss_fn)
            opt = ember.optim.SGD(stage.parameters(), lr=0.01)
            walls, bubbles, shares = [], [], []
            for i in range(args.rounds + 1):
                dist.barrier()
                opt.zero_grad()
                schedule.step(x, target=y)
                opt.step()
                report = schedule.bubble_report()
                if i:
                    walls.append(max(t.wall for t in report.per_rank))
                    bubbles.append(report.measured)
                    shares.append(np.mean([t.cpu / t.wall for t in report.per_rank]))
            if rank == 0:
                wall = statistics.median(walls)
                print(
                    f"{schedule_class.name:>13} M={m:<2}: {wall * 1e3:7.1f} ms/step, bubble "
                    f"measured {statistics.median(bubbles):5.1%}, ideal {report.ideal:5.1%}; "
                    f"speedup over one process {peer_s / wall:.2f}x; CPU time / step time "
                    f"{statistics.median(shares):.0%}"
                )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
