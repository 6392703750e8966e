"""Tools that read captured graphs: FLOP counts (``ember.tools.flops``), the model summary
(``ember.summary``), memory analysis (``ember.tools.memory``, ``ember.tools.max_batch_size``),
drawings and the interactive viewer (``ember.tools.viz``). A plain list of submodule imports: a
new tool adds its line."""

from . import flops as _flops_module  # noqa: F401  (ember.tools.flops is the function below)
from . import summary, viz
from .flops import FlopCounts, flops
from .memory import memory
from .memory_report import MemoryReport
from .whatif import BatchFit, max_batch_size

__all__ = [
    "BatchFit",
    "FlopCounts",
    "MemoryReport",
    "flops",
    "max_batch_size",
    "memory",
    "summary",
    "viz",
]
