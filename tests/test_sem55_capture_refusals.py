"""Calls PyTorch refuses to differentiate refuse it when captured as they do eagerly: the
refusal waits in the backward graph and raises at backward(), never at the call."""

from __future__ import annotations

import pytest

import ember

torch = pytest.importorskip("torch")

PROGRAMS = {
    "remainder_number_by_tensor": lambda m, x: m.remainder(3.0, x),
    "pow_bool_tensor_exponent": lambda m, x: m.pow(x, m.tensor([True, False, True])),
    "pow_bool_scalar_tensor": lambda m, x: x ** m.tensor(True),
}


def _torch_error(program):
    x = torch.tensor([1.5, 2.5, -0.7], requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        program(torch, x).sum().backward()
    return str(info.value)


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("capture", ["function", "compile"])
def test_captured_backward_refuses_as_torch(name, capture):
    program = PROGRAMS[name]
    message = _torch_error(program)
    wrap = ember.function if capture == "function" else ember.compile
    f = wrap(lambda x: program(ember, x) * 2)
    x = ember.tensor([1.5, 2.5, -0.7], requires_grad=True)
    y = f(x)  # the call itself differentiates nothing: no error yet
    expected = torch.tensor([1.5, 2.5, -0.7])
    assert y.detach().tolist() == pytest.approx(program(torch, expected).mul(2).tolist())
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    assert message.split(".")[0] in str(info.value)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_grad_transform_refuses(name):
    program = PROGRAMS[name]
    message = _torch_error(program)
    g = ember.grad(lambda x: program(ember, x).sum())
    with pytest.raises(RuntimeError) as info:
        g(ember.tensor([1.5, 2.5, -0.7]))
    assert message.split(".")[0] in str(info.value)


def test_refused_call_off_the_gradient_path_runs():
    # the refused value is not differentiated: backward through the other output succeeds
    f = ember.function(lambda x: (x * 3, ember.remainder(3.0, x)))
    x = ember.tensor([1.5, 2.5], requires_grad=True)
    a, _ = f(x)
    a.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
