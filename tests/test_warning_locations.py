"""A warning ember raises names the line of the user's code that caused it, whatever path of
ember's own calls lies between (errors.user_stacklevel counts them; a fixed stacklevel named
ember's frames whenever a wrapper or another call path added one)."""

import inspect
import warnings

import numpy as np
import pytest

import ember
from ember import nn
from ember.nn import functional as F


def _softmax_without_dim():
    F.softmax(ember.ones(2, 3))


def _log_softmax_through_module():
    nn.Softmax()(ember.ones(2, 3))


def _clip_empty_generator():
    nn.utils.clip_grad_norm_((p for p in []), 1.0)


def _init_empty():
    nn.init.kaiming_uniform_(ember.empty(0, 3))


def _complex_to_real():
    ember.tensor(np.ones(3, np.complex64)).to(ember.float32)


def _scheduler_epoch():
    opt = ember.optim.SGD([nn.Parameter(ember.ones(2))], lr=0.1)
    ember.optim.lr_scheduler.StepLR(opt, 2).step(1)


@pytest.mark.parametrize(
    "call",
    [
        _softmax_without_dim,
        _log_softmax_through_module,
        _clip_empty_generator,
        _init_empty,
        _complex_to_real,
        _scheduler_epoch,
    ],
)
def test_warning_names_the_callers_line(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    assert caught, f"{call.__name__} raised no warning"
    # each case's last line is the call that warns
    line = call.__code__.co_firstlineno + len(inspect.getsource(call).rstrip().splitlines()) - 1
    assert all((w.filename, w.lineno) == (__file__, line) for w in caught), [
        (w.filename, w.lineno, str(w.message)) for w in caught
    ]
