"""Pipeline schedules: `ScheduleGPipe` and `Schedule1F1B` (PyTorch's names and ``step``).

``schedule.step(*args, target=y, losses=[])`` runs one training step's microbatches on this
rank's stage: the batch arguments (read on stage 0) and the target (read on the last stage) are
split along their first axis into ``n_microbatches`` equal parts, the shape the pipeline was
captured with. Each microbatch's forward receives its inputs from the stages that produce them
and sends what later stages read; its backward receives the gradients of what it sent, returns
the gradients of what it received to their producers, and adds its parameters' gradients to the
step's sums. The loss's cotangent is ``1/n_microbatches`` (PyTorch's ``scale_grads``), so with a
mean loss the summed gradients are the full batch's; the parameters' ``.grad`` receive them at
the end of the step, and ``losses`` the microbatches' losses (last stage).

Order of actions on stage r of S, microbatches 0..M-1:

* GPipe: every forward, then every backward;
* 1F1B: min(S-1-r, M) forwards (warm-up), then one forward and one backward alternately, then
  the remaining backwards: a stage holds at most S-r microbatches' activations, not M.

All receives of a step are posted when it starts (``irecv``), sends go out without waiting
(``isend``) and are waited for at the end, so no rank blocks another's progress; a rank waits
only when it needs a value not yet arrived. That wait, and everything that is not running the
stage's programs, is the *bubble*: ``schedule.bubble`` is this rank's measured fraction of the
last step, ``bubble_report()`` (a collective) gathers every rank's next to the ideal
(S-1)/(M+S-1) of equal stages.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...ops.creation import from_numpy
from ...tensor import Tensor
from .. import collectives as _c
from .. import process_group as _pg
from .partition import PartitionError
from .stage import PipelineStage

__all__ = ["BubbleReport", "PipelineSchedule", "Schedule1F1B", "ScheduleGPipe"]

_TAG_SPAN = 32767  # MPI guarantees tags up to at least this


@dataclass
class StepTimes:
    """One rank's last step: wall seconds, seconds running its programs, seconds waiting for
    messages, the CPU seconds the process got (``cpu / wall`` well below ``busy / wall`` says
    other processes took the cores: the bubble then includes their share), and the activation
    memory: ``held / per_microbatch`` microbatches at most were waiting for their backward."""

    wall: float = 0.0
    busy: float = 0.0
    waiting: float = 0.0
    cpu: float = 0.0
    held: int = 0  # the most bytes of saved activations held at once (microbatches in flight)
    per_microbatch: int = 0  # bytes one microbatch's forward saves for its backward

    @property
    def bubble(self) -> float:
        return 1.0 - self.busy / self.wall if self.wall > 0 else 0.0


@dataclass
class BubbleReport:
    """Every rank's measured bubble of a step next to the ideal of equal stages."""

    stages: int
    microbatches: int
    schedule: str
    per_rank: list  # StepTimes per rank

    @property
    def ideal(self) -> float:
        s, m = self.stages, self.microbatches
        return (s - 1) / (m + s - 1)

    @property
    def measured(self) -> float:
        """The mean over ranks of each rank's idle fraction."""
        return float(np.mean([t.bubble for t in self.per_rank]))

    def __str__(self) -> str:
        lines = [
            f"{self.schedule}: {self.stages} stages, {self.microbatches} microbatches: bubble "
            f"measured {self.measured:.1%} (mean over ranks), ideal (S-1)/(M+S-1) = "
            f"{self.ideal:.1%}"
        ]
        for r, t in enumerate(self.per_rank):
            lines.append(
                f"  rank {r}: step {t.wall * 1e3:.2f} ms, running {t.busy * 1e3:.2f} ms, "
                f"waiting for messages {t.waiting * 1e3:.2f} ms, idle {t.bubble:.1%}, "
                f"CPU time {t.cpu * 1e3:.2f} ms; activations held at most "
                f"{t.held / 1e3:.1f} KB ({t.held // max(t.per_microbatch, 1)} microbatches)"
            )
        return "\n".join(lines)


def _split(t, m: int, what: str) -> list[np.ndarray]:
    arr = t.numpy(force=True) if isinstance(t, Tensor) else np.asarray(t)
    if arr.ndim == 0 or arr.shape[0] % m:
        raise PartitionError(
            f"pipeline step: {what} of shape {arr.shape} does not split into {m} equal "
            "microbatches along its first axis"
        )
    return [np.ascontiguousarray(a) for a in np.split(arr, m)]


class PipelineSchedule:
    """What both schedules share (see the module docstring); subclasses give the order."""

    name = "schedule"

    def __init__(self, stage: PipelineStage, n_microbatches: int, loss_fn=None, scale_grads=True):
        if n_microbatches < 1:
            raise PartitionError(f"{self.name}: n_microbatches must be >= 1, not {n_microbatches}")
        self._stage = stage
        self._n_microbatches = n_microbatches
        self._loss_fn = loss_fn
        self._scale_grads = scale_grads
        self.times = StepTimes()
        size, rank = _pg.get_world_size(), _pg.get_rank()
        if size != stage.num_stages:
            raise PartitionError(
                f"{self.name}: {stage.num_stages} stages need {stage.num_stages} ranks, the "
                f"process group has {size}"
            )
        if rank != stage.stage_index:
            raise PartitionError(
                f"{self.name}: rank {rank} runs stage {stage.stage_index}; build stage "
                "get_rank() on each rank"
            )

    @property
    def bubble(self) -> float:
        return self.times.bubble

    def actions(self) -> list[tuple[str, int]]:
        """This rank's order of microbatch actions, ``("F"|"B", microbatch)``: each schedule
        (GPipe, 1F1B) defines its own."""
        raise NotImplementedError(f"{type(self).__name__} defines no order of actions")

    def _tag(self, message: int, mb: int, backward: bool) -> int:
        n = len(self._stage.pipe.partition.crossing)
        return ((mb * n + message) * 2 + int(backward)) % _TAG_SPAN

    def step(self, *args, target=None, losses: list | None = None):
        """One step (see the module docstring). Returns the model's output for the whole batch
        on the last stage (the microbatches' outputs joined), None elsewhere."""
        st, m = self._stage, self._n_microbatches
        start, cpu = time.perf_counter(), time.process_time()
        run = _Step(self, args, target, losses)
        for kind, mb in self.actions():
            if kind == "F":
                run.forward(mb)
            else:
                run.backward(mb)
        t0 = time.perf_counter()
        for work in run.sends:
            work.wait()
        run.waiting += time.perf_counter() - t0
        for p, g in zip(st.parameters(), run.sums or []):
            p.grad = from_numpy(g) if p.grad is None else p.grad + from_numpy(g)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        per_mb = run.programs.saved_bytes
        self.times = StepTimes(wall, run.busy, run.waiting, cpu, run.held, per_mb)
        if not st.is_last:
            return None
        outs = [np.concatenate([run.outputs[mb][i] for mb in range(m)]) for i in range(run.n_out)]
        return from_numpy(outs[0]) if len(outs) == 1 else tuple(from_numpy(o) for o in outs)

    def bubble_report(self) -> BubbleReport:
        """Every rank's times of its last step (a collective: every rank calls it)."""
        t = self.times
        mine = from_numpy(np.array([t.wall, t.busy, t.waiting, t.cpu, t.held, t.per_microbatch]))
        size = self._stage.num_stages
        everyone = from_numpy(np.zeros(6 * size))
        _c.all_gather_into_tensor(everyone, mine)
        rows = everyone.numpy(force=True).reshape(size, 6)
        per_rank = [StepTimes(*map(float, row[:4]), *map(int, row[4:])) for row in rows]
        return BubbleReport(size, self._n_microbatches, self.name, per_rank)


class _Step:
    """One step's messages, saved activations and gradient sums on this rank."""

    def __init__(self, schedule: PipelineSchedule, args, target, losses):
        st, m = schedule._stage, schedule._n_microbatches
        self.schedule, self.stage, self.m, self.losses = schedule, st, m, losses
        self.args = []  # the batch arguments, read on stage 0 only
        if st.is_first:
            n_args = st.pipe.partition.captured.n_args
            if len(args) != n_args:
                raise PartitionError(
                    f"{schedule.name}.step: the pipeline was captured with {n_args} "
                    f"argument(s), step got {len(args)}"
                )
            self.args = [_split(a, m, f"argument {i}") for i, a in enumerate(args)]
            graph = st.pipe.partition.captured.graph
            for i, (parts, v) in enumerate(zip(self.args, graph.inputs)):
                if parts[0].shape != tuple(v.shape):
                    raise PartitionError(
                        f"{schedule.name}.step: argument {i} in {m} microbatches of shape "
                        f"{parts[0].shape}; the pipeline was captured for {tuple(v.shape)}"
                    )
        self.targets = []
        if st.is_last:
            if target is None:
                raise PartitionError(f"{schedule.name}.step: the last stage needs target=")
            given = target if isinstance(target, tuple) else (target,)
            self.targets = [_split(t, m, "target") for t in given]
        self.programs = st.programs(schedule._loss_fn, _types(self.targets))
        self.n_out = self.programs.n_out - 1  # the last stage's model outputs, after the loss
        self.recv_specs, self.send_specs = st.recv_specs(), st.send_specs()
        self.recv_float = [s for s in self.recv_specs if s[2].dtype.is_floating_point]
        self.state = st.state_arrays()
        self.sends, self.saved, self.outputs, self.sums = [], {}, {}, None
        self.busy = self.waiting = 0.0
        self.holding = self.held = 0  # bytes of saved activations now, and at most
        # every receive of the step, posted now
        self.recvs = {}
        for mb in range(m):
            for message, src, vtype in self.recv_specs:
                self.recvs["f", mb, message] = self._irecv(vtype, src, message, mb, False)
            for message, dsts, vtype in self.send_specs:
                if vtype.dtype.is_floating_point:
                    for dst in dsts:
                        work = self._irecv(vtype, dst, message, mb, True)
                        self.recvs["b", mb, message, dst] = work

    def _irecv(self, vtype, peer: int, message: int, mb: int, backward: bool):
        buf = np.empty(tuple(vtype.shape), dtype=vtype.dtype.np)
        tag = self.schedule._tag(message, mb, backward)
        return buf, _c.irecv(from_numpy(buf), peer, tag=tag)

    def _received(self, key) -> np.ndarray:
        buf, work = self.recvs.pop(key)
        work.wait()
        return buf

    def _isend(self, array, peer: int, message: int, mb: int, backward: bool) -> None:
        tag = self.schedule._tag(message, mb, backward)
        self.sends.append(_c.isend(from_numpy(np.ascontiguousarray(array)), peer, tag=tag))

    def forward(self, mb: int) -> None:
        st, programs = self.stage, self.programs
        t0 = time.perf_counter()
        received = [self._received(("f", mb, message)) for message, _, _ in self.recv_specs]
        t1 = time.perf_counter()
        joint_in = [*[a[mb] for a in self.args], *received, *self.state]
        joint_in += [t[mb] for t in self.targets]
        outs = programs.forward(*[joint_in[i] for i in programs.fwd_pos])
        t2 = time.perf_counter()
        self.waiting, self.busy = self.waiting + t1 - t0, self.busy + t2 - t1
        if st.is_last:
            if self.losses is not None:
                self.losses.append(from_numpy(np.array(outs[0])))
            self.outputs[mb] = outs[1 : programs.n_out]
        else:
            for (message, dsts, _), value in zip(self.send_specs, outs):
                for dst in dsts:
                    self._isend(value, dst, message, mb, False)
        self.saved[mb] = (joint_in, outs[programs.n_out :])
        self.holding += programs.saved_bytes
        self.held = max(self.held, self.holding)

    def backward(self, mb: int) -> None:
        st, programs = self.stage, self.programs
        joint_in, kept = self.saved.pop(mb)
        self.holding -= programs.saved_bytes
        t0 = time.perf_counter()
        cotangents = []
        if st.is_last:
            scale = 1.0 / self.m if self.schedule._scale_grads else 1.0
            cotangents.append(np.array(scale, dtype=programs.joint.inputs[-1].type.dtype.np))
        else:
            for message, dsts, vtype in self.send_specs:
                if vtype.dtype.is_floating_point:
                    parts = [self._received(("b", mb, message, dst)) for dst in dsts]
                    cotangents.append(parts[0] if len(parts) == 1 else sum(parts[1:], parts[0]))
        t1 = time.perf_counter()
        full = [*joint_in, *cotangents]
        grads = programs.backward(*kept, *[full[i] for i in programs.bwd_pos])
        n = len(self.recv_float)
        for (message, src, _), g in zip(self.recv_float, grads[:n]):
            self._isend(g, src, message, mb, True)
        if self.sums is None:
            self.sums = [np.array(g, copy=True) for g in grads[n:]]
        else:
            for acc, g in zip(self.sums, grads[n:]):
                acc += g
        # busy: the program, the sends' staging and the sums
        self.waiting, self.busy = self.waiting + t1 - t0, self.busy + time.perf_counter() - t1


def _types(targets) -> tuple:
    from ...dtypes import from_numpy_dtype
    from ...types import TensorType

    return tuple(TensorType(tuple(t[0].shape), from_numpy_dtype(t[0].dtype)) for t in targets)


class ScheduleGPipe(PipelineSchedule):
    """GPipe: all microbatches' forwards, then all their backwards."""

    name = "ScheduleGPipe"

    def actions(self) -> list[tuple[str, int]]:
        m = self._n_microbatches
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]


class Schedule1F1B(PipelineSchedule):
    """1F1B: warm-up forwards, then one forward one backward, then the last backwards."""

    name = "Schedule1F1B"

    def actions(self) -> list[tuple[str, int]]:
        m, st = self._n_microbatches, self._stage
        warmup = min(st.num_stages - 1 - st.stage_index, m)
        order = [("F", i) for i in range(warmup)]
        for i in range(m - warmup):
            order += [("F", warmup + i), ("B", i)]
        order += [("B", i) for i in range(m - warmup, m)]
        return order
