"""Inference tensors (made under ``inference_mode()``), against PyTorch's rules."""

import pytest
import torch

import ember


def _facts(lib):
    n = lib.ones(3)
    with lib.inference_mode():
        x, y, v, z = lib.ones(3), n * 2, n[:2], lib.tensor([1.0, 2.0])
        x.add_(1)  # allowed inside
        n.add_(1)
        facts = [t.is_inference() for t in (x, y, v, z, n, x[:1])]
    with lib.no_grad():
        facts.append(lib.ones(2).is_inference())
    with lib.inference_mode(False):
        facts.append(lib.ones(2).is_inference())
    facts += [(x + 1).is_inference(), x.clone().is_inference(), x.detach().is_inference()]
    errors = []
    for f in (
        lambda: x.add_(1),
        lambda: x[0].fill_(2),
        lambda: x.copy_(n),
        lambda: x.__setitem__(0, 5.0),
        lambda: x._version,
        lambda: x.requires_grad_(),
        lambda: x.clone().add_(1),
    ):
        try:
            f()
            errors.append(None)
        except (RuntimeError, ember.errors.EmberError) as err:
            errors.append(str(err).split(".")[0].split(": ")[-1])
    return facts, errors


def test_inference_tensors_follow_pytorch():
    assert _facts(ember) == _facts(torch)


def test_ember_is_inference_function_and_model_outputs():
    m = ember.nn.Linear(2, 2)
    with ember.inference_mode():
        out = m(ember.ones(1, 2))
    assert ember.is_inference(out) and not ember.is_inference(m.weight)
    with pytest.raises(ember.errors.AutogradError, match="inference tensor"):
        out.mul_(2)
