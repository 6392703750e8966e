"""The optimizers' defaults as PyTorch's, types included (hunt 9: SGD's param_groups showed
momentum 0.0 where PyTorch shows the int 0, so a program comparing or printing its groups
differed)."""

import pytest

import ember

torch = pytest.importorskip("torch")

NAMES = [
    "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
    "ASGD", "Rprop", "Adafactor", "LBFGS",
]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_defaults_match_pytorch(name):
    want = getattr(torch.optim, name)([torch.zeros(1, requires_grad=True)]).defaults
    got = getattr(ember.optim, name)([ember.zeros(1, requires_grad=True)]).defaults
    assert {k: repr(v) for k, v in got.items()} == {k: repr(v) for k, v in want.items()}
