"""transforms/fold_affine_inputs.py: an inference batch norm whose statistics and parameters are
graph inputs (``ember.function(model.eval())``) folds into the convolution, transposed
convolution or linear before it, through the convolution's bias add, with graph ops computed on
every call: equal to the unfolded graph and to PyTorch's eval-mode modules within the rounding of
a dot product whose weights are rounded once more (over random shapes, groups, depthwise,
bias / no bias, affine / no affine, ReLU / ReLU6, float32 / float64); never in training mode,
where a gradient needs the statistics, or where the convolution's result is read elsewhere; and
changed buffers change the next call's result."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.ops.batch_norm import BATCH_NORM_EVAL, BATCH_NORM_TRAIN
from ember.ops.conv import CONV_INPUT_GRAD
from ember.transforms.fold_affine_inputs import fold_affine_inputs

torch = pytest.importorskip("torch")


def _ops(graph):
    return [n.op for n in graph.nodes if n.kind == "call"]


def _randomize(model, rng):
    """Random parameters and running statistics (a frozen batch norm is not the identity)."""
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if not t.is_floating_point():
                continue
            if name.endswith("running_var"):
                t.copy_(torch.from_numpy(rng.random(t.shape) * 2 + 0.05))
            else:
                t.copy_(torch.from_numpy(rng.standard_normal(t.shape)))


def _twin(torch_model, ember_model, dtype):
    torch_model.to(torch.float64 if dtype == np.float64 else torch.float32)
    if dtype == np.float64:
        ember_model.double()
    state = {k: ember.tensor(v.numpy()) for k, v in torch_model.state_dict().items()}
    ember_model.load_state_dict(state)
    return torch_model.eval(), ember_model.eval()


def _tolerance(dtype, fan_in, magnitude):
    """Elementwise bound on |folded - unfolded|: a dot product of ``fan_in`` terms rounded in
    either order, each weight rounded once more (w * s), relative to ``magnitude``, the same sum
    over absolute values (|x| against |w * s|, plus |shift|); a few ulps times sqrt(fan_in)."""
    eps = float(np.finfo(dtype).eps)
    return 8 * eps * np.sqrt(fan_in + 2) * magnitude + np.finfo(dtype).tiny


def _module_pair(kind, nd, cin, cout, k, groups, stride, bias, affine, act):
    def build(lib):
        conv_class = {
            "conv": getattr(lib.nn, f"Conv{nd}d"),
            "transpose": getattr(lib.nn, f"ConvTranspose{nd}d"),
        }[kind]
        pad = k // 2 if kind == "conv" else 0
        conv = conv_class(cin, cout, k, stride=stride, padding=pad, groups=groups, bias=bias)
        norm = getattr(lib.nn, f"BatchNorm{nd}d")(cout, affine=affine)
        layers = [conv, norm] + ([getattr(lib.nn, act)()] if act else [])
        return lib.nn.Sequential(*layers)

    return build(torch), build(ember)


CASES = [
    # kind, nd, cin, cout, k, groups, stride, bias, affine, act
    ("conv", 2, 3, 8, 3, 1, 1, False, True, "ReLU"),
    ("conv", 2, 8, 8, 3, 8, 2, False, True, "ReLU6"),  # depthwise
    ("conv", 2, 6, 12, 3, 6, 1, True, True, "ReLU6"),  # depthwise, multiplier 2, bias
    ("conv", 2, 8, 6, 1, 2, 1, True, False, None),  # grouped pointwise, no affine
    ("conv", 2, 16, 24, 3, 1, 2, True, True, "ReLU6"),
    ("conv", 1, 5, 7, 3, 1, 1, True, True, "ReLU"),
    ("conv", 3, 2, 4, 3, 1, 1, False, False, "ReLU6"),
    ("transpose", 2, 8, 4, 2, 1, 2, True, True, "ReLU"),
    ("transpose", 2, 6, 9, 3, 3, 2, False, True, None),  # grouped transposed convolution
    ("transpose", 1, 4, 6, 3, 2, 1, True, False, "ReLU6"),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_folded_module_equals_the_unfolded_graph_and_torch(case, dtype):
    kind, nd, cin, cout, k, groups, stride, bias, affine, act = case
    rng = np.random.default_rng(CASES.index(case) * 2 + (dtype == np.float64))
    pt, em = _module_pair(kind, nd, cin, cout, k, groups, stride, bias, affine, act)
    _randomize(pt, rng)
    pt, em = _twin(pt, em, dtype)
    # (a result with at least as many elements as the weight: where the fold pays)
    x_np = rng.standard_normal((4, cin) + (12,) * nd).astype(dtype)
    x = ember.tensor(x_np)
    folded = ember.function(em, verify=True)
    plain = ember.function(em, opt_level=0)
    with ember.no_grad():
        got = folded(x).numpy()
        want = plain(x).numpy()
    assert BATCH_NORM_EVAL in _ops(plain.graph)
    assert BATCH_NORM_EVAL not in _ops(folded.graph)
    with torch.no_grad():
        peer = pt(torch.from_numpy(x_np)).numpy()
        # the magnitude of each output's sum: |x| through |w * s|, plus |shift|
        conv, norm = pt[0], pt[1]
        s = (norm.weight if affine else 1.0) / torch.sqrt(norm.running_var + norm.eps)
        shift = (norm.bias if affine else 0.0) - norm.running_mean * s
        if conv.bias is not None:
            shift = shift + conv.bias * s
        w = conv.weight.abs().double()
        if kind == "conv":
            w = w * s.abs().double().reshape((-1,) + (1,) * (w.ndim - 1))
        else:
            view = (groups, 1, cout // groups) + (1,) * nd
            shape = (groups, cin // groups, cout // groups) + tuple(w.shape[2:])
            w = (w.reshape(shape) * s.abs().double().reshape(view)).reshape(w.shape)
        name = ("conv" if kind == "conv" else "conv_transpose") + f"{nd}d"
        f = getattr(torch.nn.functional, name)
        extra = dict(padding=conv.padding, stride=conv.stride, groups=groups)
        magnitude = f(torch.from_numpy(np.abs(x_np)).double(), w, **extra)
        magnitude = (magnitude + shift.abs().double().reshape((1, -1) + (1,) * nd)).numpy()
    fan_in = (cin // groups) * k**nd
    tol = _tolerance(dtype, fan_in, magnitude)
    assert got.dtype == want.dtype == dtype
    assert np.all(np.abs(got - want) <= tol), np.abs(got - want).max()
    assert np.all(np.abs(got - peer) <= tol), np.abs(got - peer).max()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias,affine", [(True, True), (False, True), (True, False)])
def test_linear_and_batch_norm_1d_fold(dtype, bias, affine):
    rng = np.random.default_rng(7)
    pt = torch.nn.Sequential(
        torch.nn.Linear(20, 9, bias=bias), torch.nn.BatchNorm1d(9, affine=affine)
    )
    em = nn.Sequential(nn.Linear(20, 9, bias=bias), nn.BatchNorm1d(9, affine=affine))
    _randomize(pt, rng)
    pt, em = _twin(pt, em, dtype)
    x_np = rng.standard_normal((24, 20)).astype(dtype)  # a batch as large as the input width
    folded = ember.function(em, verify=True)
    with ember.no_grad():
        got = folded(ember.tensor(x_np)).numpy()
    assert BATCH_NORM_EVAL not in _ops(folded.graph)
    with torch.no_grad():
        peer = pt(torch.from_numpy(x_np)).numpy()
        lin, norm = pt[0], pt[1]
        s = (norm.weight if affine else 1.0) / torch.sqrt(norm.running_var + norm.eps)
        scaled = (lin.weight.abs() * s.abs()[:, None]).double().numpy()
        magnitude = np.abs(x_np).astype(np.float64) @ scaled.T + np.abs(peer)
    tol = _tolerance(dtype, 20, magnitude)
    assert np.all(np.abs(got - peer) <= tol), np.abs(got - peer).max()


def test_no_fold_where_the_weight_outnumbers_the_result():
    # a 3x3 convolution of 64 channels on a 2x2 image: the weight's pass would cost more than
    # the batch norm's pass over the result it replaces
    _, em = _module_pair("conv", 2, 64, 64, 3, 1, 1, False, True, "ReLU")
    em.eval()
    fn = ember.function(em)
    x = ember.randn(1, 64, 2, 2)
    with ember.no_grad():
        fn(x)
    assert BATCH_NORM_EVAL in _ops(fn.graph)
    with ember.no_grad():
        fn8 = ember.function(em)
        fn8(ember.randn(1, 64, 32, 32))  # 65536 result elements, 36864 weights
    assert BATCH_NORM_EVAL not in _ops(fn8.graph)


def test_linear_on_a_sequence_does_not_fold_batch_norm_over_its_positions():
    # (N, L, C) -> BatchNorm1d normalizes dimension 1, the positions: not the linear's outputs
    lin, norm = nn.Linear(4, 6), nn.BatchNorm1d(6).eval()
    x = ember.randn(8, 6, 4)
    fn = ember.function(lambda x: norm(lin(x)))
    with ember.no_grad():
        fn(x)
    assert BATCH_NORM_EVAL in _ops(fn.graph)


def _block(dtype=np.float32, cin=4, cout=6):
    rng = np.random.default_rng(11)
    pt = torch.nn.Sequential(
        torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.BatchNorm2d(cout), torch.nn.ReLU()
    )
    em = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())
    _randomize(pt, rng)
    return _twin(pt, em, dtype)


def test_changed_buffers_and_parameters_change_the_next_result():
    pt, em = _block()
    fn = ember.function(em)
    x_np = np.random.default_rng(12).standard_normal((2, 4, 6, 6)).astype(np.float32)
    x = ember.tensor(x_np)
    with ember.no_grad():
        first = fn(x).numpy()
        norm = em[1]
        norm.running_mean.copy_(norm.running_mean + 0.5)
        norm.running_var.mul_(3.0)
        norm.weight.mul_(-1.0)
        em[0].weight.mul_(0.5)
        second = fn(x).numpy()
        eager = em(x).numpy()
    assert fn.stats.traces == 1  # the same graph, fed the new values
    assert BATCH_NORM_EVAL not in _ops(fn.graph)
    assert not np.allclose(first, second)
    np.testing.assert_allclose(second, eager, rtol=1e-5, atol=1e-5 * np.abs(eager).max())


def test_training_mode_never_folds():
    _, em = _block()
    em.train()
    fn = ember.function(em)
    x = ember.randn(3, 4, 6, 6)
    with ember.no_grad():
        fn(x)
    ops = _ops(fn.graph)
    assert BATCH_NORM_TRAIN in ops and BATCH_NORM_EVAL not in ops
    weight = next(v for v in fn.graph.inputs if v.shape == (6, 4, 3, 3))
    assert weight.users and all(u.op.kind != "elementwise" for u in weight.users)  # unscaled


def test_no_fold_where_a_gradient_needs_the_batch_norm_parameters():
    pt, em = _block(np.float64)
    x_np = np.random.default_rng(13).standard_normal((2, 4, 6, 6))

    def step(x):
        loss = em(x).square().sum()
        loss.backward()
        return loss

    fn = ember.function(step)
    for p in em.parameters():
        p.grad = None
    fn(ember.tensor(x_np))
    graphs = fn.graphs
    forward = graphs.get("forward", graphs["joint"])
    assert BATCH_NORM_EVAL in _ops(forward)
    got = {n: p.grad.numpy().copy() for n, p in em.named_parameters()}
    for p in em.parameters():
        p.grad = None
    em(ember.tensor(x_np)).square().sum().backward()
    for n, p in em.named_parameters():
        np.testing.assert_allclose(got[n], p.grad.numpy(), rtol=1e-10, atol=1e-10)
    # and PyTorch's gradient of the batch norm's weight in eval mode
    pt(torch.from_numpy(x_np)).square().sum().backward()
    np.testing.assert_allclose(got["1.weight"], pt[1].weight.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_no_fold_where_the_convolution_is_read_elsewhere():
    _, em = _block()
    conv, norm = em[0], em[1]

    def both(x):
        y = conv(x)
        return norm(y), y

    fn = ember.function(both)
    with ember.no_grad():
        fn(ember.randn(1, 4, 5, 5))
    assert BATCH_NORM_EVAL in _ops(fn.graph)


def test_the_pass_alone_folds_conv_bias_and_batch_norm_and_keeps_the_bias_add_alone():
    rng = np.random.default_rng(14)
    w, b = (ember.tensor(rng.standard_normal(s)) for s in [(3, 2, 3, 3), (3,)])
    stats = [ember.tensor(rng.random(3) + 0.5) for _ in range(4)]
    x = ember.tensor(rng.standard_normal((1, 2, 5, 5)))

    def f(x, w, b, mean, var, gamma, beta):
        return F.batch_norm(F.conv2d(x, w, b, padding=1), mean, var, gamma, beta)

    def bias_only(x, w, b):
        return F.conv2d(x, w, b, padding=1)

    with ember.no_grad():
        graph = ember.trace(f, x, w, b, *stats, opt_level=0).graph
        alone = ember.trace(bias_only, x, w, b, opt_level=0).graph
    before = ember.graph.interpreter.run(graph.copy(), [t.numpy() for t in (x, w, b, *stats)])
    graph, changed = fold_affine_inputs(graph)
    assert changed and BATCH_NORM_EVAL not in _ops(graph)
    assert not fold_affine_inputs(graph)[1]
    graph.verify()
    after = ember.graph.interpreter.run(graph, [t.numpy() for t in (x, w, b, *stats)])
    np.testing.assert_allclose(after[0], before[0], rtol=1e-12, atol=1e-12)
    assert not fold_affine_inputs(alone)[1]  # a bias add alone: nothing to scale


def test_transposed_convolution_folds_into_its_weight():
    rng = np.random.default_rng(15)
    up, norm = nn.ConvTranspose2d(4, 6, 2, stride=2, groups=2), nn.BatchNorm2d(6).eval()
    with ember.no_grad():
        norm.running_mean.copy_(ember.tensor(rng.standard_normal(6).astype(np.float32)))
        norm.running_var.copy_(ember.tensor((rng.random(6) + 0.5).astype(np.float32)))
    fn = ember.function(lambda x: norm(up(x)))
    x = ember.randn(1, 4, 3, 3)
    with ember.no_grad():
        got = fn(x).numpy()
        want = norm(up(x)).numpy()
    ops = _ops(fn.graph)
    assert CONV_INPUT_GRAD in ops and BATCH_NORM_EVAL not in ops
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_a_frozen_batch_norm_in_a_training_step_keeps_the_convolutions_gradient():
    # eval-mode batch norm without parameter gradients: its backward reads only var and weight,
    # so the forward graph may fold; the gradients stay those of the unfolded network
    pt, em = _block(np.float64)
    for p in em[1].parameters():
        p.requires_grad_(False)
    x_np = np.random.default_rng(16).standard_normal((4, 4, 8, 8))

    def step(x):
        loss = em(x).square().sum()
        loss.backward()
        return loss

    fn = ember.function(step, verify=True)
    em[0].weight.grad = em[0].bias.grad = None
    fn(ember.tensor(x_np))
    got = em[0].weight.grad.numpy().copy(), em[0].bias.grad.numpy().copy()
    em[0].weight.grad = em[0].bias.grad = None
    em(ember.tensor(x_np)).square().sum().backward()
    np.testing.assert_allclose(got[0], em[0].weight.grad.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got[1], em[0].bias.grad.numpy(), rtol=1e-9, atol=1e-9)
