"""Float32 convolution gradients' workspace in the memory plan: the compiled input and weight
gradients allocate their temporaries (col2im columns, per-block partial sums) within the call,
so a training step's peak can sit on one (a ResNet-18 step's stride-2 input gradient); the plan
charges them as `cconv_workspace.temporaries` says and a small ResNet-18 step's report matches
its measured peak."""

from __future__ import annotations

import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

import ember
from ember import zoo
from ember.kernels.ccompile import compiler_available
from ember.ops.conv import CONV, CONV_INPUT_GRAD, CONV_WEIGHT_GRAD
from ember.tools import memory
from ember.types import TensorType

needs_compiler = pytest.mark.skipif(
    not compiler_available(),
    reason="no C compiler: the workspace tested is the compiled kernels' (the NumPy kernels "
    "keep their columns as scratch between calls and the rule counts none for them)",
)


def _allocated(op, a, b, attrs) -> tuple[int, np.ndarray]:
    """Bytes ``op`` allocates beyond its result at its peak (tracemalloc), and the result."""
    for _ in range(3):  # (first calls: libraries load, packs and scratch are made)
        op.run(a, b, **attrs)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = op.run(a, b, **attrs)
        extra = tracemalloc.get_traced_memory()[1] - before - result.nbytes
    finally:
        tracemalloc.stop()
    return extra, result


def _planned(op, a, b, result, attrs) -> int:
    node = SimpleNamespace(
        op=op,
        inputs=[TensorType(a.shape, ember.float32), TensorType(b.shape, ember.float32)],
        outputs=[TensorType(result.shape, ember.float32)],
        attrs=attrs,
    )
    return op.workspace(node, None)


_PAD = ((1, 1), (1, 1))
# ResNet-18's (width 16, CIFAR) last stages: the stride-2 input gradient's col2im columns and
# the 3x3 weight gradients' partial sums, the largest temporaries of its step
CASES = {
    "input grad 3x3/2 (col2im)": (
        CONV_INPUT_GRAD,
        (16, 128, 4, 4),
        (128, 64, 3, 3),
        dict(in_size=(8, 8), stride=(2, 2), padding=_PAD, dilation=(1, 1), groups=1),
    ),
    "weight grad 3x3 4x4 planes": (
        CONV_WEIGHT_GRAD,
        (16, 128, 4, 4),
        (16, 128, 4, 4),
        dict(kernel_size=(3, 3), stride=(1, 1), padding=_PAD, dilation=(1, 1), groups=1),
    ),
    "weight grad 3x3/2": (
        CONV_WEIGHT_GRAD,
        (16, 64, 8, 8),
        (16, 128, 4, 4),
        dict(kernel_size=(3, 3), stride=(2, 2), padding=_PAD, dilation=(1, 1), groups=1),
    ),
}


@needs_compiler
@pytest.mark.parametrize("case", list(CASES))
def test_float32_gradient_workspace_is_what_the_kernel_allocates(case, bare_executors):
    op, a_shape, b_shape, attrs = CASES[case]
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in (a_shape, b_shape))
    extra, result = _allocated(op, a, b, attrs)
    planned = _planned(op, a, b, result, attrs)
    assert planned > 64 * 1024  # (the kernels' temporaries, not nothing)
    assert abs(extra - planned) <= 8192, (planned, extra)  # (Python objects beside)


def test_float32_forward_workspace_is_none():
    # the forward's packed weight is the parameter's, kept between calls; its padded input is
    # scratch kept likewise: nothing allocated and freed within the call is charged
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 64, 8, 8)).astype(np.float32)
    w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    attrs = dict(stride=(1, 1), padding=_PAD, dilation=(1, 1), groups=1)
    result = CONV.run(x, w, **attrs)
    assert _planned(CONV, x, w, result, attrs) == 0


def test_resnet18_training_step_is_planned_as_measured(bare_executors):
    # the zoo's CIFAR ResNet-18 at a small batch: SGD with momentum, cross-entropy. Without a
    # compiler too: the NumPy convolutions' scratch (columns, and the input copy im2col checks
    # the weight gradient's input against) is kept between calls, never allocated within one
    ember.manual_seed(0)
    model = zoo.build("resnet18", ember)
    opt = zoo.optimizer("resnet18", ember, model.parameters())
    x, y = (ember.tensor(v) for v in zoo.inputs("resnet18", 8))
    report = memory(
        model, x, optimizer=opt, loss_fn=lambda out, t: zoo.loss(ember, out, t), targets=y
    )
    measured = report.measure()
    assert abs(report.peak_bytes - measured) <= 0.05 * measured, (report.peak_bytes, measured)
