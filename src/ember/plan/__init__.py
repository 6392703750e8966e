"""Memory planning: liveness, buffer reuse, the predicted peak and its breakdown
(plan/memory.py), the measured peak (plan/program.py), memory-aware scheduling
(plan/schedule.py) and arena placement with planned execution (plan/arena.py)."""

from .arena import Arena
from .memory import PARTS, LiveBuffer, MemoryPlan, plan_memory
from .program import measure_peak, plan_program

__all__ = [
    "PARTS",
    "Arena",
    "LiveBuffer",
    "MemoryPlan",
    "measure_peak",
    "plan_memory",
    "plan_program",
]
