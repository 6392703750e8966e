"""The memory plan of half-precision programs against tracemalloc: the kernels that compute
float16 / bfloat16 in float32 on copies (convolutions, pooling, softmax, sum, einsum, random
sampling; without a compiler also matmul, linear, erf) declare their float32 copies as
workspace, those that read the 16-bit values in C (matmul, linear, elementwise loops) none, so
the planned peak of a low-precision training step, and of one such op on its own, matches the
measured peak."""

import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.kernels import ccompile
from ember.plan import plan_memory
from ember.tools import memory

HALF = [ember.bfloat16, ember.float16]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # low-precision overflow in the steps
        yield


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt", "resnet"])
def test_half_precision_step_is_within_5_percent_of_the_measured_peak(name, dtype, bare_executors):
    report = memory(name, dtype=dtype)
    assert report.dtype == dtype.name
    measured = report.measure()
    assert abs(report.peak_bytes - measured) <= 0.05 * measured, (report.peak_bytes, measured)


def _randn(dtype, *shape):
    return ember.tensor(np.random.default_rng(0).standard_normal(shape), dtype=dtype)


# one op each, at sizes where the kernel's float32 copies are most of the peak
OPS = {
    "matmul": (lambda a, b: a @ b, [(256, 384), (384, 512)]),
    "batched matmul": (lambda a, b: a @ b, [(8, 64, 128), (8, 128, 96)]),
    "linear": (F.linear, [(256, 384), (512, 384), (512,)]),
    "softmax": (lambda x: F.softmax(x, dim=-1), [(64, 1024)]),
    "log_softmax": (lambda x: F.log_softmax(x, dim=-1), [(64, 1024)]),
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1), [(8, 16, 32, 32), (32, 16, 3, 3)]),
    "conv2d stride 2": (
        lambda x, w: F.conv2d(x, w, stride=2, padding=1),
        [(8, 16, 32, 32), (32, 16, 3, 3)],
    ),
    "depthwise conv2d": (
        lambda x, w: F.conv2d(x, w, padding=1, groups=32),
        [(8, 32, 32, 32), (32, 1, 3, 3)],
    ),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), [(8, 32, 32, 32)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), [(8, 32, 32, 32)]),
    "sum": (lambda x: x.sum(0), [(256, 1024)]),
    "erf": (lambda x: x.erf(), [(256, 1024)]),
    "randn": (lambda x: x + ember.randn(*x.shape, dtype=x.dtype), [(256, 1024)]),
    "uniform(-1, 1)": (
        lambda x: x + ember.uniform(-1.0, 1.0, tuple(x.shape), dtype=x.dtype),
        [(256, 1024)],
    ),
    "bernoulli": (lambda x: ember.bernoulli(x), [(256, 1024)]),
    "einsum": (lambda a, b: ember.einsum("bij,bjk->bik", a, b), [(8, 64, 128), (8, 128, 96)]),
}


# ops whose half-precision C kernels make no float32 copies
IN_PLACE = {"matmul", "batched matmul", "linear", "erf", "conv2d", "conv2d stride 2"}
IN_PLACE |= {"depthwise conv2d"}
NATIVE = {"softmax", "log_softmax", "sum"}


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_one_half_precision_op_is_planned_as_measured(op, dtype, bare_executors):
    fn, shapes = OPS[op]
    inputs = [_randn(dtype, *s) for s in shapes]
    report = memory(fn, *inputs)
    measured = report.measure()
    assert abs(report.peak_bytes - measured) <= 0.05 * measured, (report.peak_bytes, measured)
    full = memory(fn, *[_randn(ember.float32, *s) for s in shapes])
    if op in NATIVE and ccompile.compiler_available():
        # the C kernels read and write the 16-bit values; the float32 plan counts NumPy's
        # temporary beside the result (the sum's float64 running sums), which these do not make
        assert report.peak_bytes <= full.peak_bytes // 2
    elif op in IN_PLACE and ccompile.compiler_available():
        # the C kernels read and write the 16-bit values (kernels/chgemm.py, kernels/cconv.py,
        # the elementwise loops of ops/_half.py): the plan is the float32 one in half the bytes
        assert report.peak_bytes == full.peak_bytes // 2
    else:
        # the same op in float32 has no float32 copies: the half-precision workspace is extra
        assert report.peak_bytes > full.peak_bytes // 2


@pytest.mark.parametrize("groups", [1, 32])
@pytest.mark.parametrize("stride", [1, 2])
def test_half_precision_convolution_gradients_are_planned_as_measured(
    stride, groups, bare_executors
):
    # conv_input_grad and conv_weight_grad: the compiled kernels, at stride 2 phase by phase;
    # depthwise ones (groups 32) kernels/cdepthwise.py's
    model = nn.Sequential(nn.Conv2d(32, 64, 3, stride=stride, padding=1, groups=groups), nn.ReLU())
    x = _randn(ember.float32, 8, 32, 32, 32)
    x.requires_grad_(True)
    report = memory(model, x, backward=True, dtype=ember.bfloat16)
    measured = report.measure()
    assert abs(report.peak_bytes - measured) <= 0.05 * measured, (report.peak_bytes, measured)


def test_float32_workspace_is_unchanged_by_the_half_rules():
    # a float32 matmul reads its operands in place: the plan is inputs plus the result
    a, b = _randn(ember.float32, 64, 32), _randn(ember.float32, 32, 16)
    plan = plan_memory(ember.trace(lambda x, y: x @ y, a, b).graph)
    assert plan.peak_bytes == (64 * 32 + 32 * 16 + 64 * 16) * 4


@pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
@pytest.mark.parametrize("wide", [True, False])
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_depthwise_weight_gradient_workspace_is_what_it_allocates(dtype, wide, monkeypatch):
    # 16-bit operands: the channels-wide kernels' float32 gradient alone, or the row-wide
    # kernels' double partial sums, their total and its float32 rounding
    import tracemalloc
    from types import SimpleNamespace

    from ember.kernels import cdepthwise_wide
    from ember.ops.conv import CONV_WEIGHT_GRAD
    from ember.types import TensorType

    monkeypatch.setattr(cdepthwise_wide, "wins", lambda *args: wide)
    rng = np.random.default_rng(0)
    c = 512
    x, gy = (rng.standard_normal((4, c, 14, 14)).astype(dtype.np) for _ in range(2))
    attrs = dict(stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=c)
    attrs["kernel_size"] = (3, 3)
    for _ in range(5):  # (first calls: the library loads; tests/conftest.py's checks)
        CONV_WEIGHT_GRAD.run(x, gy, **attrs)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = CONV_WEIGHT_GRAD.run(x, gy, **attrs)
        measured = tracemalloc.get_traced_memory()[1] - before - result.nbytes
    finally:
        tracemalloc.stop()
    node = SimpleNamespace(
        op=CONV_WEIGHT_GRAD,
        inputs=[TensorType(x.shape, dtype), TensorType(gy.shape, dtype)],
        outputs=[TensorType(result.shape, dtype)],
        attrs=attrs,
    )
    planned = CONV_WEIGHT_GRAD.workspace(node, None)
    assert abs(measured - planned) <= 4096, (planned, measured)  # (Python objects beside)
