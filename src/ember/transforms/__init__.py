"""Graph transforms: the optimization passes and their pipeline (``optimize``, levels O0..O3,
``Pass``). Graph autodiff is graph/autodiff.py; the function transforms ``ember.grad`` and
``ember.value_and_grad`` are capture/grad.py."""

from ..graph.rewrite import Pass
from .cse import CSE, eliminate_common_subexpressions
from .dce import DCE, eliminate_dead_code
from .fold import FOLD, fold_constants
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
    "eliminate_common_subexpressions",
    "eliminate_dead_code",
    "fold_constants",
    "optimize",
    "passes_for",
    "simplify",
    "unroll_loops",
]
