"""ember.tools.memory against measurements (tracemalloc's peak of the step as it runs) and
analytic sizes (parameter counts, optimizer state per parameter, saved GELU inputs); the
what-if helpers against the steps they describe, measured."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.kernels.ccompile import compiler_available
from ember.models import example_step
from ember.tools import max_batch_size, memory

MiB = 2**20


# figures that assume the compiled kernels: fused loops updating parameters in place and reusing
# dying buffers. Without a C compiler the NumPy fallback holds more (old and new parameters, every
# intermediate of a fused group); the plan models that too (the predicted-peak tests run there).
needs_compiler = pytest.mark.skipif(
    not compiler_available(),
    reason="no C compiler: these figures assume the compiled fused kernels (NumPy fallback)",
)


def _param_bytes(model) -> int:
    return sum(p.numel() * p.dtype.itemsize for p in model.parameters())


@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt"])
def test_estimate_is_within_5_percent_of_the_measured_peak(name, bare_executors):
    report = memory(name)
    measured = report.measure()
    assert abs(report.peak_bytes - measured) <= 0.05 * measured, (report.peak_bytes, measured)
    assert sum(report.at_peak.values()) == report.peak_bytes
    if not compiler_available():
        return  # the NumPy fallback holds old and new parameters: the parts below differ
    # the parts, against what the model and its optimizer hold
    example = example_step(name)
    params = _param_bytes(example.model)
    assert report.parameters == params
    assert report.gradients == params  # every parameter is trained: one gradient each
    state_per_param = {"mlp": 0, "cnn": 1, "gpt": 2}[name]  # SGD, SGD+momentum, AdamW
    n_tensors = len(list(example.model.parameters()))
    # AdamW also keeps a 0-d step count per parameter
    assert 0 <= report.optimizer_state - state_per_param * params <= 8 * n_tensors
    assert report.inputs >= example.x.numel() * 4


@needs_compiler
def test_per_layer_rows_add_up_and_match_the_model(bare_executors):
    report = memory("gpt")
    rows = report.by_layer
    d, hidden, tokens = 256, 1024, 8 * 128
    assert rows["GPTBlock.qkv"].parameters == (d * 3 * d + 3 * d) * 4
    assert rows["GPTBlock.qkv"].gradients == rows["GPTBlock.qkv"].parameters
    assert rows["GPTBlock.fc1"].optimizer_state >= 2 * (d * hidden + hidden) * 4
    # GELU's backward reads its input, fc1's output: saved by fc1 (as PyTorch saves it)
    assert rows["GPTBlock.fc1"].activations >= tokens * hidden * 4
    for part in ("parameters", "gradients", "optimizer_state", "activations"):
        assert sum(getattr(r, part) for r in rows.values()) == getattr(report, part), part
    assert all(r.temporaries <= report.temporaries for r in rows.values())
    text = str(report)
    assert "GPTBlock.fc1" in text and "saved activations" in text and "per layer" in text


def test_the_callers_model_and_optimizer_are_not_touched():
    example = example_step("cnn")
    before = [p.detach().numpy().copy() for p in example.model.parameters()]
    memory(example.model, example.x, optimizer=example.optimizer)
    assert not example.optimizer.state
    assert all(p.grad is None for p in example.model.parameters())
    for p, q in zip(example.model.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), q)


@needs_compiler
def test_forward_only_backward_and_functions(bare_executors):
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 64))
    x = ember.randn(128, 256)
    inference = memory(model, x)
    assert inference.gradients == 0 and inference.activations == 0
    assert inference.parameters == _param_bytes(model)
    both = memory(model, x, backward=True)
    assert both.gradients == _param_bytes(model) and both.activations > 0
    assert both.peak_bytes > inference.peak_bytes
    measured = both.measure()
    assert abs(both.peak_bytes - measured) <= 0.05 * measured, (both.peak_bytes, measured)
    # a plain function: x, and exp(x) computed in place of a temporary, then 2 * it
    fn = memory(lambda a: a.exp() * 2.0, x)
    assert fn.inputs == x.numel() * 4
    assert fn.peak_bytes == 2 * x.numel() * 4


@needs_compiler
def test_max_batch_size_fits_and_the_next_size_does_not_measured(bare_executors):
    budget = 20 * MiB  # batch 2 of the GPT block's step (small sizes keep the test fast)
    fit = max_batch_size("gpt", budget)
    assert fit.peak_bytes <= budget < fit.next_peak_bytes  # planned
    assert fit.report.batch_size == fit.batch_size
    # measured: the steps at the answer and one size up, run
    assert fit.report.measure() <= budget
    assert fit.report.with_batch_size(fit.batch_size + 1).measure() > budget
    assert len(fit.tried) <= 8  # the straight-line guess lands near the answer
    assert "largest batch size" in str(fit)


def test_max_batch_size_of_a_module_and_of_a_builder():
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    x = ember.randn(4, 64)
    budget = 200 * 1024
    fit = max_batch_size(model, budget, x, optimizer=opt)
    assert fit.peak_bytes <= budget < fit.next_peak_bytes
    # a builder (batch -> report) gives the same answer
    same = max_batch_size(lambda b: memory(model, x, optimizer=opt, batch_size=b), budget)
    assert same.batch_size == fit.batch_size
    with pytest.raises(ValueError, match="even batch size 1 plans a peak of"):
        max_batch_size(model, 1024, x, optimizer=opt)


@needs_compiler
def test_pure_low_precision_halves_each_part_and_runs(bare_executors):
    full = memory("gpt", batch_size=2)
    half = full.with_dtype(ember.bfloat16)
    assert half.dtype == "bfloat16"
    # the model's parameters halve; the peak's parameter part may also hold an updated copy:
    # bfloat16 has no fused C loops, and AdamW's update p * (1 - lr * wd) - step, with lr a
    # runtime value of the step (optim/optimizer.py), is a chain only its last op of which
    # could write into p's memory, and that op does not read p
    layers = ("parameters", "gradients")
    for name, row in half.by_layer.items():
        for part in layers:
            assert getattr(row, part) == getattr(full.by_layer[name], part) // 2, (name, part)
    assert full.parameters // 2 <= half.parameters <= full.parameters
    assert half.gradients == full.gradients // 2
    fc1_half, fc1_full = half.by_layer["GPTBlock.fc1"], full.by_layer["GPTBlock.fc1"]
    assert fc1_half.activations == fc1_full.activations // 2
    assert half.inputs == full.inputs // 2
    assert half.peak_bytes < 0.6 * full.peak_bytes
    # the bfloat16 step runs; its kernels compute in float32 (NumPy has no bfloat16 GEMM), and
    # their workspace rules count those float32 copies
    measured = half.measure()
    assert abs(half.peak_bytes - measured) <= 0.05 * measured, (half.peak_bytes, measured)
    assert measured < 0.75 * full.measure()


@needs_compiler
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mixed_precision_plans_the_autocast_step_and_runs(bare_executors, dtype):
    full = memory("gpt", batch_size=2)
    amp = full.with_dtype(getattr(ember, dtype), mode="amp")
    assert amp.dtype == f"amp {dtype}" and "mixed precision" in amp.description
    # float32 state as before; the products' activations in 16 bits, softmax and layer norm
    # following their operands (PyTorch's CPU lists), so the saved activations shrink
    assert (amp.parameters, amp.gradients, amp.optimizer_state, amp.inputs) == (
        full.parameters,
        full.gradients,
        full.optimizer_state,
        full.inputs,
    )
    assert amp.activations < 0.8 * full.activations
    # the plan is the program that runs: its peak is the measured one
    measured = amp.measure()
    assert abs(amp.peak_bytes - measured) <= 0.05 * measured, (amp.peak_bytes, measured)
    with pytest.raises(ValueError, match="mode is 'pure' or 'amp'"):
        full.with_dtype(ember.float16, mode="o2")
    with pytest.raises(ValueError, match="bfloat16 or float16"):
        full.with_dtype(ember.float64, mode="amp")


@pytest.mark.skipif(
    not compiler_available(),
    reason="without a C compiler the recorded AdamW update's NumPy fallback (its single "
    "roundings emulated: optim/_common.py addcmul_fused_'s float64 terms, ops/add_scaled.py) "
    "holds temporaries of the largest parameter's size: the step's peak is in the optimizer, "
    "where no recomputation of activations lowers it (the planner's minimum is the full peak)",
)
def test_checkpointing_recomputes_activations_to_fit(bare_executors):
    full = memory("gpt", batch_size=4)
    # 7% below the full peak: without a C compiler the NumPy kernels' float64 temporaries
    # (layer norm's) are a floor recomputation cannot lower, about 9% below the peak
    budget = int(0.93 * full.peak_bytes)
    fitted = full.with_checkpointing(budget)
    assert fitted.peak_bytes <= budget
    assert fitted.remat.recomputed and fitted.remat.extra_flops > 0
    assert fitted.activations < full.activations
    assert fitted.parameters == full.parameters and fitted.gradients == full.gradients
    measured = fitted.measure()  # the planner's accuracy holds for the recomputing step too
    assert abs(measured - fitted.peak_bytes) <= 0.05 * measured, (fitted.peak_bytes, measured)
    assert measured < full.peak_bytes
    assert fitted.with_batch_size(2).remat is not None  # what-ifs keep the budget


def test_clear_errors():
    with pytest.raises(ValueError, match="not a built-in model"):
        memory("gtp")
    with pytest.raises(ValueError, match="dtype and optimizer apply to modules"):
        memory(lambda a: a * 2.0, ember.randn(3), dtype=ember.float16)
    with pytest.raises(ValueError, match="batch_size needs a tensor input"):
        memory(nn.Linear(3, 3), batch_size=4)
