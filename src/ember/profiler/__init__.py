"""``ember.profiler``: where the time goes, op by op, eager and compiled.

    with ember.profiler.profile(record_shapes=True, profile_memory=True) as prof:
        with ember.profiler.record_function("step"):
            step()
    print(prof.table(sort_by="time", row_limit=20))
    prof.export_chrome_trace("trace.json")      # open in ui.perfetto.dev or chrome://tracing

Each recorded call has its wall time, its FLOPs and bytes moved by the op's cost rule, the
achieved GFLOP/s and GB/s, its input shapes, the bytes of new memory its outputs hold (with
``profile_memory``: outputs that are views of an input, or computed into an input's buffer,
allocate nothing; temporaries inside a kernel are not counted), and its roofline class
(compute- or memory-bound) against this machine's measured peaks (`machine_peaks`).

Eager ops are events of category ``op``, those run by ``backward()`` ``backward`` inside a
``backward`` range and one range per tape node; a compiled graph's call is a ``graph <name>``
range holding one ``kernel`` event per generated kernel call (a fused group is one event named
by its ops, ``fused_elementwise(mul+add+tanh)``). The parts: recorder.py (recording), costs.py
(cost rules of a call), roofline.py (peaks), report.py (table, Chrome trace), schedule.py
(PyTorch's schedules, activities and trace handler).
"""

from .recorder import Event, profile, record_function
from .report import EventTable, Row
from .roofline import Peaks, bound, machine_peaks, measure_peaks
from .schedule import (
    ProfilerAction,
    ProfilerActivity,
    schedule,
    supported_activities,
    tensorboard_trace_handler,
)

__all__ = [
    "Event",
    "EventTable",
    "Peaks",
    "ProfilerAction",
    "ProfilerActivity",
    "Row",
    "bound",
    "machine_peaks",
    "measure_peaks",
    "profile",
    "record_function",
    "schedule",
    "supported_activities",
    "tensorboard_trace_handler",
]
