"""Run under ``ember run -n 2`` (or ``-n 3``): every case of _pipe_common.CASES (CASES3) as a
pipeline of 2 (3) stages; rank r writes OUT/<case>.rank<r>.npz (its stage's parameters after
the steps; on the last stage the losses and the first step's output; the bubble report, the
partition's print) for tests/distributed/test_pipelining.py."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _pipe_common as pc  # noqa: E402

import ember  # noqa: E402
import ember.distributed as dist  # noqa: E402
from ember.distributed.pipelining import (  # noqa: E402
    PartitionError,
    Schedule1F1B,
    ScheduleGPipe,
    SplitPoint,
    pipeline,
)

out_dir = sys.argv[1]
dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
for case in pc.CASES if world == 2 else pc.CASES3:
    name, m, kind, split = case
    model, x, y = pc.build(name)
    mb = ember.tensor(x[: pc.B // m])
    if split == "cost":
        pipe = pipeline(model, (mb,), num_stages=world)
    else:
        spec = {name: SplitPoint.BEGINNING for name in split.split(",")}
        pipe = pipeline(model, (mb,), split_spec=spec)
    stage = pipe.build_stage(rank)
    schedule = (ScheduleGPipe if kind == "gpipe" else Schedule1F1B)(stage, m, pc.loss_fn)
    opt = pc.optimizer(stage.parameters())
    res, step_losses = {}, []
    for _ in range(pc.STEPS):
        opt.zero_grad()
        losses = []
        out = schedule.step(ember.tensor(x), target=ember.tensor(y), losses=losses)
        if "output" not in res and out is not None:
            res["output"] = out.numpy()
        opt.step()
        step_losses.append([float(v.item()) for v in losses])
    report = schedule.bubble_report()
    for n, p in stage.named_parameters():
        res[f"param/{n}"] = p.detach().numpy().copy()
    res["losses"] = np.array(step_losses)
    res["times"] = np.array([[t.wall, t.busy, t.waiting] for t in report.per_rank])
    res["held"] = np.array([[t.held, t.per_microbatch] for t in report.per_rank])
    res["bubble"] = np.array([report.measured, report.ideal])
    res["partition"] = np.array(str(pipe))
    part = pipe.partition
    res["readers"] = np.array([len(part.consumers[id(v)]) for v in part.crossing])
    res["report"] = np.array(str(report))
    np.savez(os.path.join(out_dir, f"{pc.case_id(case)}.rank{rank}.npz"), **res)
    if rank == 0:
        print(pipe, report, sep="\n", flush=True)
# refusals before any message: arguments that do not split, or split into other shapes
if world == 2:
    model, x, y = pc.build("mlp")
    pipe = pipeline(model, (ember.tensor(x[:2]),), num_stages=2)
    schedule = ScheduleGPipe(pipe.build_stage(rank), 4, pc.loss_fn)
    errors = []
    if rank == 0:
        for bad in (x[:6], x[:4]):
            try:
                schedule.step(ember.tensor(bad), target=ember.tensor(y))
            except PartitionError as exc:
                errors.append(str(exc))
    np.savez(os.path.join(out_dir, f"errors.rank{rank}.npz"), errors=np.array(errors))
dist.destroy_process_group()
