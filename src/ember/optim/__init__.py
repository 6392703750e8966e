"""Optimizers (``ember.optim``) and learning-rate schedulers (``ember.optim.lr_scheduler``).

The optimizers follow PyTorch 2.13's single-tensor implementations (same update formulas,
defaults, hyper-parameter names and state layout); each step is written in ember ops and in-place
Tensor methods, so it runs eagerly now and can be traced into a graph later.
"""

from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .optimizer import Optimizer, OptimizerError, required
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = [
    "Adagrad",
    "Adam",
    "AdamW",
    "Optimizer",
    "OptimizerError",
    "RMSprop",
    "SGD",
    "lr_scheduler",
    "required",
]

from .._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr("ember.optim", globals())  # PyTorch names ember lacks: ember._missing
