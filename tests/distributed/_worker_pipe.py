"""Run under ``ember run -n 2``: every case of _pipe_common.CASES as a two-stage pipeline; rank r
writes OUT/<case>.rank<r>.npz (its stage's parameters after the steps, the losses on the last
stage, the bubble report, the partition's print) for tests/distributed/test_pipelining.py."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _pipe_common as pc  # noqa: E402

import ember  # noqa: E402
import ember.distributed as dist  # noqa: E402
from ember.distributed.pipelining import (  # noqa: E402
    Schedule1F1B,
    ScheduleGPipe,
    SplitPoint,
    pipeline,
)

out_dir = sys.argv[1]
dist.init_process_group("mpi")
rank = dist.get_rank()
for case in pc.CASES:
    name, m, kind, split = case
    model, x, y = pc.build(name)
    mb = ember.tensor(x[: pc.B // m])
    if split == "cost":
        pipe = pipeline(model, (mb,), num_stages=2)
    else:
        pipe = pipeline(model, (mb,), split_spec={split: SplitPoint.BEGINNING})
    stage = pipe.build_stage(rank)
    schedule = (ScheduleGPipe if kind == "gpipe" else Schedule1F1B)(stage, m, pc.loss_fn)
    opt = pc.optimizer(stage.parameters())
    res, step_losses = {}, []
    for _ in range(pc.STEPS):
        opt.zero_grad()
        losses = []
        schedule.step(ember.tensor(x), target=ember.tensor(y), losses=losses)
        opt.step()
        step_losses.append([float(v.item()) for v in losses])
    report = schedule.bubble_report()
    for n, p in stage.named_parameters():
        res[f"param/{n}"] = p.numpy().copy()
    res["losses"] = np.array(step_losses)
    res["times"] = np.array([[t.wall, t.busy, t.waiting] for t in report.per_rank])
    res["bubble"] = np.array([report.measured, report.ideal])
    res["partition"] = np.array(str(pipe))
    res["report"] = np.array(str(report))
    np.savez(os.path.join(out_dir, f"{pc.case_id(case)}.rank{rank}.npz"), **res)
    if rank == 0:
        print(pipe, report, sep="\n", flush=True)
dist.destroy_process_group()
