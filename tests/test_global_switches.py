"""tests/global_switches.py, which tests/conftest.py's `process_switches_unchanged` reads
around every test: each switch a test flips is named and put back."""

import os

import numpy as np
import pytest

import ember

from . import global_switches


def _flip_grad_mode():
    ember.set_grad_enabled(False)


def _flip_default_dtype():
    ember.set_default_dtype(ember.float64)


def _flip_deterministic():
    ember.use_deterministic_algorithms(True, warn_only=True)


def _flip_printoptions():
    ember.set_printoptions(precision=9)


def _flip_anomaly():
    ember.autograd.set_detect_anomaly(True)


def _flip_autocast():
    ember.autocast("cpu", dtype=ember.bfloat16).__enter__()  # (left open)


def _flip_environment():
    os.environ["EMBER_SUITE_SWITCH_PROBE"] = "1"


def _flip_numpy_errors():
    np.seterr(divide="raise")


def _flip_torch_default_dtype():
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)


def _flip_torch_fast_path():
    torch = pytest.importorskip("torch")
    torch.backends.mha.set_fastpath_enabled(False)


@pytest.mark.parametrize(
    "flip, name",
    [
        (_flip_grad_mode, "ember grad mode"),
        (_flip_default_dtype, "ember default dtype"),
        (_flip_deterministic, "ember deterministic algorithms"),
        (_flip_printoptions, "ember printoptions"),
        (_flip_anomaly, "ember anomaly mode"),
        (_flip_autocast, "ember autocast region, ember autocast nesting"),
        (_flip_environment, "environment variables"),
        (_flip_numpy_errors, "NumPy error handling (np.seterr)"),
        (_flip_torch_default_dtype, "torch default dtype"),
        (_flip_torch_fast_path, "torch nn.MultiheadAttention fast path"),
    ],
)
def test_a_flipped_switch_is_named_and_put_back(flip, name):
    pytest.importorskip("torch")  # (imported first: its switches are read from the start)
    before = global_switches.snapshot()
    flip()
    changed = global_switches.changed_since(before)
    assert [line.split(":")[0] for line in changed] == name.split(", ")
    assert global_switches.snapshot() == before
    assert global_switches.changed_since(before) == []


def test_a_switch_set_and_restored_is_not_reported():
    before = global_switches.snapshot()
    with ember.no_grad(), np.errstate(all="ignore"):
        ember.set_printoptions(precision=2)
        ember.set_printoptions(precision=before["ember printoptions"]["precision"])
    assert global_switches.changed_since(before) == []
