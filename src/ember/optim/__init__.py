"""Optimizers (``ember.optim``) and learning-rate schedulers (``ember.optim.lr_scheduler``).

The optimizers follow PyTorch 2.13's single-tensor implementations (same update formulas,
defaults, hyper-parameter names and state layout): SGD, Adam, AdamW, Adamax, NAdam, RAdam,
RMSprop, Adagrad, Adadelta, Rprop, ASGD, Adafactor, Muon, SparseAdam (dense gradients: see
optim/sparse_adam.py) and LBFGS. Each step but LBFGS's is written in ember ops and in-place
Tensor methods, so it runs eagerly and can be recorded into a graph
(``ember.function``), with the hyper-parameters a scheduler changes as run-time inputs; LBFGS,
which calls its closure a data-dependent number of times, runs eagerly only.
"""

from . import lr_scheduler, swa_utils
from .adadelta import Adadelta
from .adafactor import Adafactor
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .muon import Muon
from .nadam import NAdam
from .optimizer import Optimizer, OptimizerError, required
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = [
    "ASGD",
    "Adadelta",
    "Adafactor",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "LBFGS",
    "Muon",
    "NAdam",
    "Optimizer",
    "OptimizerError",
    "RAdam",
    "RMSprop",
    "Rprop",
    "SGD",
    "SparseAdam",
    "lr_scheduler",
    "required",
]

from .._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr("ember.optim", globals())  # PyTorch names ember lacks: ember._missing
