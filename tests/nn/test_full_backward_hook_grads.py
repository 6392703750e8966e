"""``register_full_backward_hook``'s grad_input and grad_output against PyTorch's: None for
every input where none requires grad, zeros for an input that needs no gradient beside one that
does, None in grad_output for an unused output (the hook still runs)."""

import warnings

import pytest
import torch

import ember


def _record(lib, case):
    nn = lib.nn

    class Two(nn.Module):
        def forward(self, a, b):
            return a * 2, b * 3

    class Add(nn.Module):
        def forward(self, a, b):
            return a + b

    x, y = lib.ones(2, requires_grad=True), lib.ones(2)
    m, args, use = {
        "no input requires grad": (nn.Linear(2, 1), (lib.ones(1, 2),), lambda o: o.sum()),
        "one input needs none": (Add(), (x, y), lambda o: o.sum()),
        "second output unused": (
            Two(),
            (x, lib.ones(2, requires_grad=True)),
            lambda o: o[0].sum(),
        ),
        "input and output need none": (Two(), (x, y), lambda o: o[0].sum() + o[1].sum()),
    }[case]
    if case == "no input requires grad":
        with lib.no_grad():
            m.weight.fill_(1.0)
    seen = []

    def hook(mod, gi, go):
        seen.append([[None if g is None else g.tolist() for g in grads] for grads in (gi, go)])

    m.register_full_backward_hook(hook)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        use(m(*args)).backward()
    return seen


CASES = [
    "no input requires grad",
    "one input needs none",
    "second output unused",
    "input and output need none",
]


@pytest.mark.parametrize("case", CASES)
def test_grads_seen_by_the_hook_match_pytorch(case):
    assert _record(ember, case) == _record(torch, case)


def test_a_hook_may_replace_one_of_several_input_gradients():
    def run(lib):
        class Mul(lib.nn.Module):
            def forward(self, a, b):
                return a * b

        a, b = lib.ones(2, requires_grad=True), lib.full((2,), 3.0, requires_grad=True)
        m = Mul()
        m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 10, gi[1]))
        m(a, b).sum().backward()
        return a.grad.tolist(), b.grad.tolist()

    assert run(ember) == run(torch)
