"""Graph transforms: graph autodiff (``ember.grad``, ``ember.value_and_grad``) and the
optimization passes with their pipeline (``optimize``, levels O0..O3, ``Pass``)."""

from ..graph.rewrite import Pass
from .cse import CSE, eliminate_common_subexpressions
from .dce import DCE, eliminate_dead_code
from .fold import FOLD, fold_constants
from .grad import backward_graph_values, grad, value_and_grad
from .pipeline import PASSES, PassCheckError, PassStat, optimize, passes_for
from .simplify import SIMPLIFY, simplify
from .unroll import unroll_loops

__all__ = [
    "CSE",
    "DCE",
    "FOLD",
    "PASSES",
    "SIMPLIFY",
    "Pass",
    "PassCheckError",
    "PassStat",
    "backward_graph_values",
    "eliminate_common_subexpressions",
    "eliminate_dead_code",
    "fold_constants",
    "grad",
    "optimize",
    "passes_for",
    "simplify",
    "unroll_loops",
    "value_and_grad",
]
