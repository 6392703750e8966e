"""The built-in exception type of each error matches the one PyTorch raises, so a program that
catches IndexError or RuntimeError around a call behaves the same under ember (ember's errors
are EmberError subclasses that are also the built-in type)."""

import pytest

import ember
from ember.errors import EmberError

torch = pytest.importorskip("torch")


def _bad_calls(lib):
    x = lib.ones(3, 4)
    return {
        "dim out of range": lambda: x.sum(5),
        "cat dim out of range": lambda: lib.cat([x, x], 3),
        "squeeze dim out of range": lambda: x.squeeze(4),
        "float index tensor": lambda: x[lib.tensor([0.0])],
        "truth value of many": lambda: bool(x),
        "load_state_dict shapes": lambda: lib.nn.Linear(2, 2).load_state_dict(
            {"weight": lib.ones(3, 3), "bias": lib.ones(2)}
        ),
        "arange step 0": lambda: lib.arange(0, 10, 0),
        "float arange step 0": lambda: lib.arange(0.0, 1.0, 0.0),
        "negative size": lambda: lib.zeros(-1),
        "negative random size": lambda: lib.randn(2, -3),
    }


@pytest.mark.parametrize("case", sorted(_bad_calls(torch)))
def test_error_types_match_pytorch(case):
    with pytest.raises(Exception) as theirs:
        _bad_calls(torch)[case]()
    with pytest.raises(EmberError) as ours:
        _bad_calls(ember)[case]()
    assert isinstance(ours.value, type(theirs.value)), (type(ours.value), type(theirs.value))
