"""Elementwise ops whose C expression calls the vector math library (sigmoid, SiLU, exp) run
their compiled loop eagerly on large float32 operands where this machine measured it faster,
a choice kept on disk (ops/_vector_loops.py), so that it never changes between processes."""

import json

import numpy as np
import pytest

from ember.kernels import ccompile
from ember.kernels.cpool import get_num_threads
from ember.ops import _half, _vector_loops
from ember.ops._registry import REGISTRY

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


@pytest.fixture
def choices_file(tmp_path, monkeypatch):
    path = tmp_path / "vector-loops.json"
    monkeypatch.setattr(_vector_loops, "_path", lambda: path)
    monkeypatch.setattr(_vector_loops, "_choices", None)
    return path


def _large(seed=0):
    x = np.random.default_rng(seed).standard_normal(_half._MEASURED_FROM).astype(np.float32)
    x[:3] = [np.inf, -np.inf, -0.0]
    return x


def _key(name):
    return f"{name}|float32|{get_num_threads()}"


@pytest.mark.parametrize(
    "name, attrs",
    [
        ("sigmoid", {}),
        ("silu", {}),
        ("exp", {}),
        ("tanh", {}),
        ("softplus", {"beta": 1.0, "threshold": 20.0}),
    ],
)
def test_the_choice_is_measured_once_and_kept_on_disk(name, attrs, choices_file, monkeypatch):
    assert not _half.c_gives_numpy_bits(name)  # (the case this module is for)
    x = _large()
    op = REGISTRY[name]
    got = op.fast(x, **attrs)
    kept = json.loads(choices_file.read_text())
    assert isinstance(kept[_key(name)], bool)
    assert (got is not None) == kept[_key(name)]
    want = op.kernel(x, **attrs)
    if got is not None:  # the loop ran: the vector library's few ulps from NumPy's
        # (a few ulps of float32 per function the expression calls)
        np.testing.assert_allclose(got, want, rtol=8 * np.finfo(np.float32).eps, atol=1e-30)
        assert np.array_equal(np.isnan(got), np.isnan(want))
    # a new process reads the file: no measuring, the same choice
    monkeypatch.setattr(_vector_loops, "_choices", None)
    monkeypatch.setattr(_vector_loops, "interleaved", _never)
    again = op.fast(x, **attrs)
    assert (again is None) == (got is None)
    if got is not None:
        np.testing.assert_array_equal(again, got)


def _never(*args, **kwargs):
    raise AssertionError("measured again")


@pytest.mark.parametrize("chosen", [True, False])
def test_a_kept_choice_decides(chosen, choices_file, monkeypatch):
    choices_file.write_text(json.dumps({_key("sigmoid"): chosen}))
    monkeypatch.setattr(_vector_loops, "interleaved", _never)
    x = _large(1)
    got = REGISTRY["sigmoid"].fast(x)
    assert (got is not None) == chosen
    if chosen:
        want = 1 / (1 + np.exp(-x.astype(np.float64)))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize(
    "text", ["", "[1, 2]", '{"x": 1}', json.dumps({"sigmoid|float32|1": "yes"}), "{" * 5000]
)
def test_a_damaged_file_is_measured_again(text, choices_file):
    choices_file.write_text(text)
    REGISTRY["sigmoid"].fast(_large(2))
    kept = json.loads(choices_file.read_text())
    assert isinstance(kept[_key("sigmoid")], bool)
    assert all(isinstance(v, bool) for v in kept.values())


def test_an_exact_loop_never_consults_the_kept_choices(choices_file, monkeypatch):
    monkeypatch.setattr(_vector_loops, "interleaved", _never)
    x = _large(3)
    REGISTRY["add"].fast(x, x)  # (NumPy's bits either way: measured per process)
    assert not choices_file.exists()
