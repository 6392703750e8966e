"""torch.profiler's steering of a long run: which steps a `profile` records (`schedule`), what
it does with each recorded cycle (``on_trace_ready``, `tensorboard_trace_handler`), and the
activity names programs pass (`ProfilerActivity`: ember records the CPU; the others are
accepted and record nothing, as PyTorch's CPU-only builds do)."""

from __future__ import annotations

import enum
import os
import socket
import time

__all__ = [
    "ProfilerAction",
    "ProfilerActivity",
    "schedule",
    "supported_activities",
    "tensorboard_trace_handler",
]


class ProfilerActivity(enum.Enum):
    CPU = "CPU"
    CUDA = "CUDA"
    XPU = "XPU"
    MTIA = "MTIA"
    HPU = "HPU"
    PrivateUse1 = "PrivateUse1"


def supported_activities() -> set:
    """The activities this build records: the CPU's."""
    return {ProfilerActivity.CPU}


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0):  # fmt: skip
    """PyTorch's schedule: after ``skip_first`` steps, cycles of ``wait`` idle steps,
    ``warmup`` steps and ``active`` recorded steps (the last of each cycle hands the trace to
    ``on_trace_ready``), ``repeat`` cycles (0: without end). ``skip_first_wait`` skips the
    first cycle's wait. Returns ``step -> ProfilerAction``."""
    for name, value in (("wait", wait), ("warmup", warmup), ("active", active),
                        ("repeat", repeat), ("skip_first", skip_first)):  # fmt: skip
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"profiler.schedule: {name} must be a non-negative int, got {value!r}")
    if active < 1:
        raise ValueError("profiler.schedule: active must be at least 1")
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        phase = step % cycle
        if phase < wait:
            return ProfilerAction.NONE
        if phase < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if phase < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


def tensorboard_trace_handler(dir_name, worker_name: str | None = None, use_gzip: bool = False):
    """An ``on_trace_ready`` that writes each recorded cycle as a Chrome trace
    ``<dir_name>/<worker>.<ms>.pt.trace.json`` (TensorBoard's profiler plugin and Perfetto read
    it). ``use_gzip`` is accepted; ember writes plain JSON."""
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"

    def handler(prof) -> None:
        os.makedirs(dir_name, exist_ok=True)
        name = f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json"
        prof.export_chrome_trace(os.path.join(dir_name, name))

    return handler
