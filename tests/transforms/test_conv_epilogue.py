"""Convolution epilogues (transforms/epilogue.py with ops/conv.py's epilogue rule and
kernels/cconv_epilogue.py): which programs a convolution takes, and the compiled node (bias,
ReLU and mask stored by the C kernel) against the reference kernels."""

import numpy as np
import pytest

import ember
import ember.types
from ember.graph import interpreter
from ember.kernels import ccompile
from ember.ops import REGISTRY
from ember.ops.conv_epilogue import epilogue_spec
from ember.ops.program import Const, Input, Instr, Program, Temp
from ember.runtime.codegen import compile_graph
from ember.transforms import DCE, optimize
from ember.transforms.epilogue import EPILOGUE
from ember.transforms.fuse import FUSE

from .test_epilogue import _fused

F = ember.nn.functional
pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _epilogues(graph):
    return [n for n in graph.nodes if n.kind == "call" and n.op.name == "fused_epilogue"]


def _relu_and_mask(x, w, b):
    y = F.relu(F.conv2d(x, w, b, padding=1))
    return y, y > 0  # the mask a ReLU's gradient reads


CASES = [
    (_relu_and_mask, True),
    (lambda x, w, b: F.conv2d(x, w, b, padding=1), True),  # the bias alone
    (lambda x, w, b: F.relu(F.conv2d(x, w, padding=1)), True),  # a ReLU alone
    # an elementwise program of the result and constants: stored as an activation loop
    (lambda x, w, b: F.conv2d(x, w, b) * 2, True),
    # a program reading another tensor the store cannot run
    (lambda x, w, b: F.conv2d(x, w, b) * x[:, :1, 1:6, 1:7].exp(), False),
    (lambda x, w, b: (F.conv2d(x, w, padding=1) > 0, F.conv2d(x, w, b, padding=1)), True),
    (lambda x, w, b: F.relu(F.conv2d(x, w, padding=1) + b.reshape(1, -1, 1, 1)[:, :, :, :1]), True),
    (lambda x, w, b: F.relu(F.conv2d(x, w, padding=1) + x[:, :1]), False),  # not per channel
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn, fuses", CASES)
def test_conv_epilogues_equal_the_reference(fn, fuses, dtype):
    rng = np.random.default_rng(0)
    shapes = ((3, 6, 7, 8), (6, 6, 3, 3), (6,))
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    arrays[0][0, 0, 0, :3] = (np.nan, np.inf, -np.inf)
    examples = [ember.tensor(a) for a in arrays]
    graph, fused = _fused(fn, *examples)
    nodes = _epilogues(fused)
    assert bool(nodes) == fuses
    want = interpreter.run(graph, arrays)
    got = compile_graph(fused)(*arrays)  # checked call by call against the node's kernel
    for g, e in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == e.dtype and g.shape == e.shape
        if e.dtype == np.bool_:
            # a value within rounding of 0 may land on either side
            assert (g != e).mean() < 1e-3
        else:
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


def test_spec_rejects_what_the_store_does_not_do():
    t = ember.types.TensorType
    result = t((2, 4, 5, 5), ember.float32)
    bias = t((1, 4, 1, 1), ember.float32)
    add = Instr(REGISTRY["add"], (Input(0), Input(1)))
    relu = Instr(REGISTRY["relu"], (Temp(0),))
    out = (((2, 4, 5, 5), "float32"),)
    assert epilogue_spec(Program((add, relu)), (1,), out, [result, bias], 0, result).clamp
    # the value before and after the ReLU both wanted
    two = out + out
    assert epilogue_spec(Program((add, relu)), (0, 1), two, [result, bias], 0, result) is None
    # a mask of the value before the bias
    gt = Instr(REGISTRY["gt"], (Input(0), Const(0.0, ember.float32)))
    mask = (((2, 4, 5, 5), "bool"),)
    assert epilogue_spec(Program((add, gt)), (0, 1), out + mask, [result, bias], 0, result) is None
    # a comparison with another constant
    gt1 = Instr(REGISTRY["gt"], (Temp(0), Const(1.0, ember.float32)))
    assert epilogue_spec(Program((add, gt1)), (1,), mask, [result, bias], 0, result) is None


def test_a_cnn_training_step_fuses_its_convolutions_and_equals_eager_steps():
    from ember import models

    eager = models.example_step("cnn", batch=8)
    step = ember.function(models.example_step("cnn", batch=8).step)
    for _ in range(2):
        want = float(eager.step().detach().numpy())
        got = float(step().numpy())
        assert abs(got - want) <= 1e-4 * max(1.0, abs(want))
    producers = [n.attrs["producer"].name for n in _epilogues(step.graph)]
    assert producers.count("conv") == 2  # conv - bias - ReLU (and its mask), twice


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_relu_before_max_pooling_masks_the_pooling_gradient_in_its_scatter(dtype):
    def loss(x):
        y = F.max_pool2d(F.relu(x), 2)
        return (y * y).sum()

    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 6, 8)).astype(dtype)
    x[0, 0, 0, 0] = np.nan
    graph = ember.trace(ember.grad(loss), ember.tensor(x), opt_level=0).graph
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE], check=[x])
    producers = [n.attrs["producer"].name for n in _epilogues(fused)]
    assert producers == ["pool_scatter"]
    want = interpreter.run(graph, [x])
    got = compile_graph(fused)(x)  # the C scatter checked call by call against the reference
    for g, e in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), e)  # the same additions, bit for bit


def test_where_on_a_scatter_with_a_tensor_fill_is_left_alone():
    def loss(x, fill):
        g = ember.grad(lambda t: (F.max_pool2d(t, 2) ** 2).sum())(x)
        return ember.where(x > 0, g, fill)

    x, fill = ember.randn(1, 2, 4, 4), ember.randn(1, 2, 4, 4)
    _, fused = _fused(loss, x, fill)
    assert not _epilogues(fused)
