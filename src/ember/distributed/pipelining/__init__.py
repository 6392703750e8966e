"""``ember.distributed.pipelining``: pipeline parallelism by graph partition, with PyTorch's
``torch.distributed.pipelining`` names.

``pipe = pipeline(module, mb_args, split_spec={"layers.2": SplitPoint.BEGINNING})`` (or
``num_stages=S``: the cost model chooses the cuts) captures ``module(*mb_args)`` for one
microbatch and cuts its graph into stages (partition.py); ``print(pipe)`` shows the partition.
On rank r of an S-rank job, ``stage = pipe.build_stage(r)`` (stage.py: the stage's forward and
backward programs), ``ScheduleGPipe(stage, n_microbatches, loss_fn)`` or ``Schedule1F1B(...)``
(schedules.py), then per step ``opt.zero_grad(); schedule.step(x, target=y, losses=losses);
opt.step()`` with an optimizer over ``stage.parameters()``. ``schedule.bubble_report()`` prints
the measured bubble next to the ideal (S-1)/(M+S-1).
"""

from __future__ import annotations

from .partition import Partition, PartitionError, SplitPoint, capture, partition
from .schedules import BubbleReport, PipelineSchedule, Schedule1F1B, ScheduleGPipe
from .stage import PipelineStage

__all__ = [
    "BubbleReport",
    "Partition",
    "PartitionError",
    "Pipe",
    "PipelineSchedule",
    "PipelineStage",
    "Schedule1F1B",
    "ScheduleGPipe",
    "SplitPoint",
    "pipeline",
]


class Pipe:
    """A captured model cut into stages (``partition``); ``build_stage(i)`` makes stage i."""

    def __init__(self, module, partition_: Partition):
        self.module = module
        self.partition = partition_

    @property
    def num_stages(self) -> int:
        return self.partition.num_stages

    def build_stage(self, stage_index: int, device=None, group=None, executor: str = "codegen"):
        if group is not None:
            raise PartitionError("build_stage: pipelines run on the default process group")
        return PipelineStage(self, stage_index, executor=executor)

    def __str__(self) -> str:
        return str(self.partition)


def pipeline(
    module,
    mb_args,
    mb_kwargs=None,
    split_spec: dict | None = None,
    *,
    num_stages: int | None = None,
    cost: str = "predicted",
    link_bandwidth: float | None = None,
) -> Pipe:
    """Capture ``module(*mb_args)`` (one microbatch) and cut it into stages: at ``split_spec``'s
    module names, else into ``num_stages`` (default: the process group's size) by the cost
    model (each op's forward and backward time, ``cost="predicted"`` from the calibrated op
    costs, ``"measured"`` by timing the kernels on ``mb_args``), cut bytes moving at
    ``link_bandwidth`` bytes/s."""
    if mb_kwargs:
        raise PartitionError("pipeline: keyword microbatch arguments are not supported")
    args = tuple(mb_args) if isinstance(mb_args, (tuple, list)) else (mb_args,)
    captured = capture(module, args)
    if not split_spec and num_stages is None:
        from ..process_group import get_world_size, is_initialized

        num_stages = get_world_size() if is_initialized() else None
    example = None
    if cost == "measured":
        example = [a.numpy(force=True) for a in args] + [
            t.numpy(force=True) for t in captured.tensors
        ]
    part = partition(captured, num_stages, split_spec, cost, example, link_bandwidth)
    return Pipe(module, part)
