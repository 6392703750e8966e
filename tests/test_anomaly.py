"""Anomaly detection (``ember.autograd.detect_anomaly`` / ``set_detect_anomaly``), as
PyTorch's: a backward step that produces NaN names its op and the user's forward line."""

import pytest

import ember


def _nan_backward():
    x = ember.tensor([0.0, 1.0], requires_grad=True)
    y = ember.sqrt(x)  # the line the error must name: d sqrt/dx at 0 is inf, times 0 -> nan
    (y * 0).sum().backward()
    return x


def test_without_anomaly_mode_nan_gradients_pass_silently():
    assert ember.isnan(_nan_backward().grad).any().item()


def test_detect_anomaly_names_the_op_and_the_forward_line():
    with ember.autograd.detect_anomaly():
        with pytest.raises(ember.AutogradError, match=r"SqrtBackward.*nan") as info:
            _nan_backward()
    assert "y = ember.sqrt(x)" in str(info.value) and __file__ in str(info.value)
    assert not ember.autograd.is_anomaly_enabled()


def test_set_detect_anomaly_as_call_and_context_and_check_nan_off():
    ember.autograd.set_detect_anomaly(True)
    try:
        assert ember.autograd.is_anomaly_enabled()
        with ember.autograd.set_detect_anomaly(True, check_nan=False):
            _nan_backward()  # stacks kept, no check
    finally:
        ember.autograd.set_detect_anomaly(False)
    assert not ember.autograd.is_anomaly_enabled()

    @ember.autograd.detect_anomaly()
    def step():
        return _nan_backward()

    with pytest.raises(ember.AutogradError):
        step()


def test_finite_gradients_are_unaffected():
    x = ember.tensor([1.0, 4.0], requires_grad=True)
    with ember.autograd.detect_anomaly():
        ember.sqrt(x).sum().backward()
    assert x.grad.tolist() == [0.5, 0.25]
