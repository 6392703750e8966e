"""Bad input gets an ember error that names the op, the shapes and the caller's own file:line."""

import os

import pytest

import ember
from ember import nn

HERE = os.path.abspath(__file__)


def _line_of(marker: str) -> int:
    """The line number in this file of the statement tagged ``# <marker>``."""
    with open(HERE) as f:
        for number, text in enumerate(f, start=1):
            if text.rstrip().endswith(f"# {marker}"):
                return number
    raise AssertionError(marker)


def _check(info, *fragments, marker):
    err = info.value
    text = str(err)
    assert isinstance(err, ember.EmberError)
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    assert f"{HERE}:{_line_of(marker)}" in text, text


def test_matmul_shape_mismatch():
    a, b = ember.randn(2, 3), ember.randn(4, 5)
    with pytest.raises(ember.ShapeError) as info:
        a @ b  # matmul-line
    _check(info, "matmul", "(2, 3)", "(4, 5)", marker="matmul-line")


def test_broadcast_shape_mismatch():
    a, b = ember.randn(2, 3), ember.randn(4, 3)
    with pytest.raises(ember.ShapeError) as info:
        ember.mul(a, b)  # broadcast-line
    _check(info, "mul", "(2, 3)", "(4, 3)", "broadcast", marker="broadcast-line")


def test_conv_channel_mismatch_inside_a_module_points_at_the_callers_line():
    conv = nn.Conv2d(3, 4, 3)
    x = ember.randn(1, 2, 8, 8)
    with pytest.raises(ember.ShapeError) as info:
        conv(x)  # conv-line
    _check(info, "conv2d", "(1, 2, 8, 8)", "(4, 3, 3, 3)", marker="conv-line")


def test_linear_feature_mismatch():
    layer = nn.Linear(3, 4)
    with pytest.raises(ember.ShapeError) as info:
        layer(ember.randn(2, 5))  # linear-line
    _check(info, "linear", "(2, 5)", "(4, 3)", marker="linear-line")


def test_integer_tensor_to_a_float_only_op():
    # (float math such as sqrt promotes integers to the default float, as PyTorch does; the
    # mean of integers is an error there too)
    with pytest.raises(ember.DTypeError) as info:
        ember.mean(ember.arange(3))  # mean-line
    _check(info, "mean", "int64", "float", marker="mean-line")


def test_integer_division_by_zero_names_the_op_and_line():
    with pytest.raises(ember.DivisionByZeroError) as info:
        ember.arange(3) // ember.tensor([1, 0, 2])  # floordiv-line
    _check(info, "floor_div", "division by zero", marker="floordiv-line")
    assert isinstance(info.value, RuntimeError)  # PyTorch raises RuntimeError: ZeroDivisionError
    with pytest.raises(ZeroDivisionError, match="mod: integer division by zero"):
        ember.arange(3) % 0


def test_unknown_state_dict_key_loads_nothing():
    layer = nn.Linear(3, 4)
    before = layer.weight.detach().numpy().copy()
    state = {"weight": ember.zeros(4, 3), "bias": ember.zeros(4), "scale": ember.ones(1)}
    with pytest.raises(ember.StateDictError) as info:
        layer.load_state_dict(state)  # unknown-key-line
    _check(info, "Unexpected key(s)", '"scale"', marker="unknown-key-line")
    assert (layer.weight.detach().numpy() == before).all()


def test_wrong_shape_parameter_in_load_state_dict():
    layer = nn.Linear(3, 4)
    with pytest.raises(ember.StateDictError) as info:
        layer.load_state_dict({"weight": ember.zeros(3, 4), "bias": ember.zeros(4)})  # shape-line
    _check(info, '"weight"', "(3, 4)", "(4, 3)", marker="shape-line")


def test_errors_form_one_hierarchy():
    for cls in (
        ember.ShapeError,
        ember.DTypeError,
        ember.AutogradError,
        ember.StateDictError,
        ember.CheckpointError,
        ember.DatasetError,
    ):
        assert issubclass(cls, ember.EmberError)
