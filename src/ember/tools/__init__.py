"""Tools that read captured graphs: FLOP counts (``ember.tools.flops``), the model summary
(``ember.summary``), and from other modules the profiler and the graph drawings. A plain list
of submodule imports: a new tool adds its line."""

from . import flops as _flops_module  # noqa: F401  (ember.tools.flops is the function below)
from . import summary
from .flops import FlopCounts, flops

__all__ = ["FlopCounts", "flops", "summary"]
