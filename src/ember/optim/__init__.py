"""Optimizers (``ember.optim``) and learning-rate schedulers (``ember.optim.lr_scheduler``).

The optimizers follow PyTorch 2.13's single-tensor implementations (same update formulas,
defaults, hyper-parameter names and state layout); each step is written in ember ops and in-place
Tensor methods, so it runs eagerly now and can be traced into a graph later.
"""

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer, OptimizerError, required
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD

__all__ = [
    "ASGD",
    "Adadelta",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "LBFGS",
    "NAdam",
    "Optimizer",
    "OptimizerError",
    "RAdam",
    "RMSprop",
    "Rprop",
    "SGD",
    "lr_scheduler",
    "required",
]
