"""transforms/fold_affine.py: an inference batch norm with constant statistics and parameters
folds into the convolution before it (dense, grouped and depthwise; strides, dilation;
float32/float64), equal to the unfolded graph within rounding; this pass folds nothing where
the statistics are inputs, the convolution's result is read elsewhere, or the weight is not
constant (transforms/fold_affine_inputs.py folds inputs with graph ops)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.ops.batch_norm import BATCH_NORM_EVAL
from ember.ops.conv import CONV
from ember.transforms.fold_affine import fold_channel_affines


def _arrays(rng, cin, cout, groups, dtype):
    return dict(
        w=rng.standard_normal((cout, cin // groups, 3, 3)).astype(dtype),
        mean=rng.standard_normal(cout).astype(dtype),
        var=(rng.random(cout) + 0.1).astype(dtype),
        gamma=rng.standard_normal(cout).astype(dtype),
        beta=rng.standard_normal(cout).astype(dtype),
    )


def _ops(fn):
    return [n.op for n in fn.graph.nodes if n.kind == "call"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "cin,cout,groups,stride,dilation", [(3, 5, 1, 1, 1), (4, 4, 4, 2, 1), (6, 4, 2, 1, 2)]
)
def test_folded_graph_equals_the_unfolded_one(dtype, cin, cout, groups, stride, dilation):
    rng = np.random.default_rng(0)
    a = _arrays(rng, cin, cout, groups, dtype)
    x = ember.tensor(rng.standard_normal((2, cin, 9, 9)).astype(dtype))

    def f(x):
        c = {k: ember.tensor(v) for k, v in a.items()}
        y = F.conv2d(x, c["w"], stride=stride, padding=1, dilation=dilation, groups=groups)
        return F.relu(F.batch_norm(y, c["mean"], c["var"], c["gamma"], c["beta"], eps=1e-3))

    with ember.no_grad():
        folded = ember.trace(f, x, verify=True)
        plain = ember.trace(f, x, opt_level=0)
        assert BATCH_NORM_EVAL in _ops(plain)
        assert BATCH_NORM_EVAL not in _ops(folded)
        want = plain(x).numpy()
        got = folded(x).numpy()
    eps = np.finfo(dtype).eps
    # a 3x3xC dot product whose terms are each rounded once more (weight times scale)
    tol = 8 * eps * np.sqrt(9 * cin // groups) * (1 + np.abs(a["gamma"] / np.sqrt(a["var"])).max())
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_nothing_folds_where_the_statistics_are_inputs():
    rng = np.random.default_rng(1)
    a = _arrays(rng, 3, 4, 1, np.float32)
    x = ember.tensor(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    mean, var = ember.tensor(a["mean"]), ember.tensor(a["var"])

    def f(x, mean, var):
        return F.batch_norm(F.conv2d(x, ember.tensor(a["w"]), padding=1), mean, var)

    with ember.no_grad():
        graph = ember.trace(f, x, mean, var, opt_level=0).graph
    # (transforms/fold_affine_inputs.py folds it with graph ops: tests/transforms/
    # test_fold_affine_inputs.py)
    assert not fold_channel_affines(graph)[1]


def test_nothing_folds_where_the_convolution_is_read_elsewhere_or_its_weight_varies():
    rng = np.random.default_rng(2)
    a = _arrays(rng, 3, 4, 1, np.float32)
    x = ember.tensor(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    w = ember.tensor(a["w"])

    def stats():
        return [ember.tensor(a[k]) for k in ("mean", "var", "gamma", "beta")]

    def shared(x):
        y = F.conv2d(x, ember.tensor(a["w"]), padding=1)
        return F.batch_norm(y, *stats()[:2], *stats()[2:]) + y

    def weight_input(x, w):
        return F.batch_norm(F.conv2d(x, w, padding=1), *stats()[:2], *stats()[2:])

    with ember.no_grad():
        assert BATCH_NORM_EVAL in _ops(ember.trace(shared, x, verify=True))
        graph = ember.trace(weight_input, x, w, opt_level=0).graph
    assert not fold_channel_affines(graph)[1]


def test_the_pass_alone_rewrites_conv_and_batch_norm():
    rng = np.random.default_rng(3)
    a = _arrays(rng, 2, 3, 1, np.float64)
    x = ember.tensor(rng.standard_normal((1, 2, 5, 5)))

    def f(x):
        c = {k: ember.tensor(v) for k, v in a.items()}
        y = F.conv2d(x, c["w"], padding=1)
        return F.batch_norm(y, c["mean"], c["var"], c["gamma"], c["beta"])

    with ember.no_grad():
        graph = ember.trace(f, x, opt_level=0).graph
    graph, changed = fold_channel_affines(graph)
    assert changed
    ops = [n.op for n in graph.nodes if n.kind == "call"]
    assert CONV in ops and BATCH_NORM_EVAL not in ops
    assert not fold_channel_affines(graph)[1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_depthwise_convolution_takes_the_shift_as_its_bias_operand(dtype):
    """An imported MobileNet's depthwise convolution and batch norm: the shift becomes the
    convolution's own bias (its kernel adds it as it stores the sums) rather than an add left
    as a pass of its own or for the epilogue pass (the depthwise kernels add a bias operand
    fused with a clamp or not). Before onnx52 every such batch norm cost an elementwise pass
    over the convolution's result."""
    rng = np.random.default_rng(3)
    a = _arrays(rng, 6, 6, 6, dtype)
    x = ember.tensor(rng.standard_normal((2, 6, 8, 8)).astype(dtype))

    def f(x):
        c = {k: ember.tensor(v) for k, v in a.items()}
        y = F.conv2d(x, c["w"], padding=1, groups=6)
        return F.batch_norm(y, c["mean"], c["var"], c["gamma"], c["beta"], eps=1e-3)

    with ember.no_grad():
        graph = ember.trace(f, x, opt_level=0).graph
        assert fold_channel_affines(graph)[1]
        calls = [n for n in graph.nodes if n.kind == "call"]
        assert [n.op for n in calls] == [CONV] and len(calls[0].inputs) == 3
        folded = ember.trace(f, x, verify=True)
        want = ember.trace(f, x, opt_level=0)(x).numpy()
        got = folded(x).numpy()
    eps = np.finfo(dtype).eps
    tol = 8 * eps * 3 * (1 + np.abs(a["gamma"] / np.sqrt(a["var"])).max())
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
