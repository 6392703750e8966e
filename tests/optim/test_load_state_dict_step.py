"""``Optimizer.load_state_dict``'s ``step``, as PyTorch's (``_process_value_according_to_param_
policy`` and the optimizers' ``__setstate__``): a tensor is shared with the dict and keeps its
dtype, cast to float32 for a capturable or fused group; a number becomes a float32 tensor."""

import numpy as np
import pytest
import torch

import ember

CASES = {
    "tensor": (lambda lib, s: s, {}),
    "int": (lambda lib, s: 5, {}),
    "float64": (lambda lib, s: s.double(), {}),
    "int64": (lambda lib, s: lib.tensor(3), {}),
    "capturable float64": (lambda lib, s: s.double(), {"capturable": True}),
    "capturable float32": (lambda lib, s: s, {"capturable": True}),
    "fused float64": (lambda lib, s: s.double(), {"fused": True}),
}


def _loaded(lib, change, flags):
    p = lib.nn.Parameter(lib.tensor(np.arange(3.0, dtype=np.float32)))
    opt = lib.optim.Adam([p], lr=0.1)
    p.grad = lib.ones(3)
    opt.step()
    sd = opt.state_dict()
    sd = {"state": {0: dict(sd["state"][0])}, "param_groups": [dict(sd["param_groups"][0])]}
    sd["state"][0]["step"] = change(lib, sd["state"][0]["step"])
    sd["param_groups"][0].update(flags)
    q = lib.nn.Parameter(lib.tensor(np.arange(3.0, dtype=np.float32)))
    fresh = lib.optim.Adam([q], lr=0.1, **flags)
    fresh.load_state_dict(sd)
    step = fresh.state[q]["step"]
    return step is sd["state"][0]["step"], str(step.dtype).split(".")[-1], float(step)


@pytest.mark.parametrize("case", list(CASES))
def test_step_is_taken_as_pytorch_takes_it(case):
    change, flags = CASES[case]
    assert _loaded(ember, change, flags) == _loaded(torch, change, flags)


def test_shared_step_advances_in_the_dict_and_buffers_are_copied():
    p = ember.nn.Parameter(ember.zeros(2))
    opt = ember.optim.Adam([p], lr=0.1)
    p.grad = ember.ones(2)
    opt.step()
    sd = opt.state_dict()
    q = ember.nn.Parameter(ember.zeros(2))
    fresh = ember.optim.Adam([q], lr=0.1)
    fresh.load_state_dict(sd)
    q.grad = ember.ones(2)
    fresh.step()
    assert float(sd["state"][0]["step"]) == 2.0  # the same tensor, as in PyTorch
    with pytest.raises(ember.errors.StateDictError, match="real 0-d tensor"):
        sd["state"][0]["step"] = ember.ones(2)
        fresh.load_state_dict(sd)
