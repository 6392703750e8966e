"""kernels/cdepthwise_wide.py: depthwise convolutions with the channels along the vectors,
against the NumPy kernels of ops/_conv_kernels.py (hypothesis over geometries: strides,
dilations, low and high padding, negative high padding, 1-d, channel counts around the block
width, planes around the tile width, bias, NaN/Inf), against the row-wide kernels bit for bit
(forward and input gradient), against PyTorch at the small-plane geometries they are for,
with threads, in the C graph runner, and their NumPy allocations (the result only)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
import ember.nn.functional as F
from ember.kernels import ccompile, cdepthwise, cdepthwise_wide, cpool
from ember.kernels.conv_plan import conv_geometry
from ember.ops import _conv_kernels as reference

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

NAMES = ("conv_forward", "conv_input_grad", "conv_weight_grad")
# (kernel, stride, dilation) per spatial dimension: each combination compiles its own library
GEOMETRIES = [(3, 1, 1), (3, 2, 1), (3, 1, 2), (5, 2, 1), (7, 1, 1), (1, 1, 1), (2, 3, 1)]


@pytest.fixture
def route(monkeypatch):
    """``route(wide)``: every depthwise call takes the channels-wide kernels (True) or the
    row-wide ones (False); returns the list of the channels-wide entries that ran."""
    ran = []
    for name in ("forward", "input_grad", "weight_grad"):
        original = getattr(cdepthwise_wide, name)

        def spy(*args, _original=original, _name=name, **kwargs):
            done = _original(*args, **kwargs)
            ran.append((_name, done))
            return done

        monkeypatch.setattr(cdepthwise_wide, name, spy)

    def choose(wide: bool):
        # (the count decides: no first-call timing of the two ways, kernels/cdepthwise_choice)
        monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
        monkeypatch.setattr(cdepthwise_wide, "wins", lambda *args: wide)
        ran.clear()
        return ran

    return choose


@st.composite
def cases(draw):
    nd = draw(st.sampled_from([1, 2, 2, 2]))
    picks = [draw(st.sampled_from(GEOMETRIES)) for _ in range(nd)]
    kernel, stride, dilation = (tuple(g[i] for g in picks) for i in range(3))
    padding = tuple((draw(st.integers(0, 3)), draw(st.integers(-1, 3))) for _ in range(nd))
    size = tuple(draw(st.integers(1, 18)) for _ in range(nd))
    c = draw(st.sampled_from([2, 3, 8, 16, 17, 33]))  # (around 8 and 16 lanes)
    n = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return n, c, kernel, stride, dilation, padding, size, dtype


def _plan(c, kernel, stride, dilation, padding, size):
    attrs = dict(stride=stride, padding=padding, dilation=dilation, groups=c)
    try:
        p = conv_geometry(attrs, size, (c, 1) + kernel)
    except ember.EmberError:
        return None
    return None if any(o <= 0 for o in p.out_size) else p


def _operands(rng, n, c, kernel, size, p, dtype, poison: int):
    """x, w, gy, and the (x, w) the weight gradient and the input gradient take."""
    x = rng.standard_normal((n, c) + size).astype(dtype)
    w = rng.standard_normal((c, 1) + kernel).astype(dtype)
    gy = rng.standard_normal((n, c) + tuple(p.out_size)).astype(dtype)
    finite_x, finite_w = x.copy(), w.copy()
    # non-finite values where padding meets them: NaN/Inf times a padded zero is NaN in the
    # NumPy kernels, and must be here (an infinite weight sends the input gradient to the
    # scatter, which never multiplies the frame)
    if poison % 3 == 0:
        x.flat[rng.integers(x.size)] = np.nan
    if poison % 4 == 1:
        w.flat[rng.integers(w.size)] = np.inf
    if poison % 5 == 2:
        gy.flat[rng.integers(gy.size)] = -np.inf
    # The NumPy weight gradient (input gradient) of a plan with garbage columns (its flat
    # layout's outputs past a row's end: zeros in the gradient) multiplies them by inputs
    # (weights) that no real output pairs them with, so a NaN input (infinite weight) makes
    # NaN where the adjoint, and both compiled kernels, keep finite values: those take the
    # finite operands there
    garbage = p.layout == "flat" and tuple(p.grid) != tuple(p.out_size)
    return x, w, gy, (finite_x if garbage else x), (finite_w if garbage else w)


def _calls(x, w, gy, bias_fwd, bias_in, x_wg=None, w_ig=None):
    return (
        ("conv_forward", x, w, bias_fwd),
        ("conv_input_grad", gy, w if w_ig is None else w_ig, bias_in),
        ("conv_weight_grad", x if x_wg is None else x_wg, gy, None),
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cases(), st.integers(0, 2**31 - 1))
def test_equal_the_numpy_kernels_within_rounding(route, case, seed):
    n, c, kernel, stride, dilation, padding, size, dtype = case
    p = _plan(c, kernel, stride, dilation, padding, size)
    if p is None:
        return
    rng = np.random.default_rng(seed)
    x, w, gy, x_wg, w_ig = _operands(rng, n, c, kernel, size, p, dtype, seed)
    bias = rng.standard_normal(c).astype(dtype) if seed % 2 else None
    ran = route(True)
    for name, a, b, bias_of in _calls(x, w, gy, bias, bias, x_wg, w_ig):
        extra = () if bias_of is None else (bias_of,)
        got = getattr(cdepthwise, name)(a, b, p, c, *extra)
        want = getattr(reference, name)(a, b, p, c)
        if bias_of is not None:
            want = want + bias_of.reshape((1, -1) + (1,) * len(size))
        assert got is not None and got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
        finite = np.isfinite(want)
        np.testing.assert_array_equal(got[~finite], want[~finite], err_msg=name)
        length = n * int(np.prod(p.out_size)) if name == "conv_weight_grad" else len(w[0, 0].flat)
        tol = 8 * float(np.finfo(dtype).eps) * np.sqrt(max(length, 1))
        scale = np.abs(want[finite]).max() if finite.any() else 0.0
        np.testing.assert_allclose(got[finite], want[finite], rtol=tol, atol=4 * tol * scale)
    assert [done for _, done in ran] == [True] * 3, ran  # (these kernels ran, all three)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cases(), st.integers(0, 2**31 - 1))
def test_forward_and_input_gradient_have_the_row_kernels_bits(route, case, seed):
    """The channels-wide kernels sum in the row-wide ones' order: the choice between the two
    changes the time, never the forward's or the input gradient's bits."""
    n, c, kernel, stride, dilation, padding, size, dtype = case
    p = _plan(c, kernel, stride, dilation, padding, size)
    if p is None:
        return
    rng = np.random.default_rng(seed)
    x, w, gy, x_wg, w_ig = _operands(rng, n, c, kernel, size, p, dtype, seed)
    bias = rng.standard_normal(c).astype(dtype)
    for name, a, b, bias_of in _calls(x, w, gy, bias, bias, x_wg, w_ig)[:2]:
        results = {}
        for wide in (True, False):
            ran = route(wide)
            results[wide] = getattr(cdepthwise, name)(a, b, p, c, bias_of)
            assert bool(ran) == wide
        np.testing.assert_array_equal(results[True], results[False], err_msg=name)


# ConvNeXt's 7x7 on 7x7 and 14x14 planes, EfficientNet's 5x5 stride 2, MobileNetV2's last
# 3x3 stage and its strided 3x3 (channels cut, planes kept)
SMALL_PLANES = [(7, 1, 3, 7, 40), (7, 1, 3, 14, 24), (5, 2, 2, 16, 24), (3, 1, 1, 7, 48),
                (3, 2, 1, 28, 16)]  # fmt: skip


@pytest.mark.parametrize("kernel,stride,padding,size,channels", SMALL_PLANES)
def test_small_planes_choose_these_kernels_and_match_torch(
    route, monkeypatch, kernel, stride, padding, size, channels
):
    torch = pytest.importorskip("torch")
    # (the counted choice, as it is: no first-call timing, kernels/cdepthwise_choice.py)
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
    ran = []
    for name in ("forward", "input_grad", "weight_grad"):
        original = getattr(cdepthwise_wide, name)

        def spy(*args, _original=original, _name=name, **kwargs):
            ran.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(cdepthwise_wide, name, spy)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, channels, size, size))
    w = rng.standard_normal((channels, 1, kernel, kernel))
    b = rng.standard_normal(channels)
    args = dict(stride=stride, padding=padding, groups=channels)
    ex, ew, eb = (ember.tensor(a, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    y, ty = F.conv2d(ex, ew, eb, **args), torch.nn.functional.conv2d(tx, tw, tb, **args)
    g = rng.standard_normal(tuple(y.shape))
    got = ember.autograd.grad(y, (ex, ew, eb), ember.tensor(g))
    want = torch.autograd.grad(ty, (tx, tw, tb), torch.tensor(g))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    for a, t in zip(got, want):
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-11, atol=1e-11)
    assert sorted(ran) == ["forward", "input_grad", "weight_grad"]


def test_few_channels_on_a_large_plane_stay_row_wide():
    """Three channels fill three of a vector's lanes: the count keeps the row-wide kernels on
    a plane whose rows fill whole vectors; many channels on a small plane go wide."""
    for dtype in (np.float32, np.float64):
        big = ((112, 112), (112, 112), (3, 3), (1, 1), (1, 1), (114, 114), 1)
        assert not cdepthwise_wide.wins("forward", 8, 3, *big, dtype, 1)
        assert not cdepthwise_wide.wins("weight_grad", 8, 3, *big, dtype, 1)
        small = ((7, 7), (7, 7), (7, 7), (1, 1), (1, 1), (13, 13), 3)
        for op in ("forward", "gather", "weight_grad"):
            assert cdepthwise_wide.wins(op, 8, 384, *small, dtype, 1), op


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_threads_give_one_thread_bits(route, dtype):
    rng = np.random.default_rng(2)
    p = _plan(40, (5, 5), (2, 2), (1, 1), ((2, 2), (2, 2)), (9, 9))
    x, w, gy, _, _ = _operands(rng, 4, 40, (5, 5), (9, 9), p, dtype, 7)
    route(True)
    before = cpool.get_num_threads()
    results = {}
    try:
        for threads in (1, 2):
            cpool.set_num_threads(threads)
            results[threads] = [
                getattr(cdepthwise, name)(a, b, p, 40) for name, a, b, _ in _calls(x, w, gy, 0, 0)
            ]
    finally:
        cpool.set_num_threads(before)
    for one, two in zip(results[1], results[2]):
        np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_graph_runner_step_has_the_eager_bits(dtype):
    """The C graph runner's step makes the eager kernel's choice (here the channels-wide one)
    and gives its bits, on one thread and on two."""
    from ember.runtime import cgraph
    from ember.runtime.codegen import compile_graph

    rng = np.random.default_rng(3)
    shapes = [(2, 32, 7, 7), (32, 1, 7, 7), (32,), (32, 1, 3, 3)]
    args = [ember.tensor(rng.standard_normal(s).astype(dtype)) for s in shapes]
    small = ((7, 7), (7, 7), (7, 7), (1, 1), (1, 1), (13, 13), 3)
    assert cdepthwise_wide.wins("forward", 2, 32, *small, dtype, 1)

    def net(x, w, b, w2):
        return F.conv2d(F.relu(F.conv2d(x, w, b, padding=3, groups=32)), w2, groups=32)

    graph = ember.trace(net, *args, opt_level=3).graph
    steps = cgraph.c_steps(graph)
    assert steps is not None, str(graph)
    arrays = [a.numpy() for a in args]
    want = compile_graph(graph)(*arrays)
    for threads in (1, 2):
        got = cgraph.CGraphProgram(graph, steps, None, threads)(*arrays)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(want[0], net(*args).numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_allocate_nothing_in_numpy_beyond_the_result(route, dtype):
    """Their scratch is C's, per task: the ops' workspace rules (nothing beyond the result in
    float32 and float64) stay true on this path."""
    rng = np.random.default_rng(5)
    p = _plan(64, (7, 7), (1, 1), (1, 1), ((3, 3), (3, 3)), (14, 14))
    x, w, gy, _, _ = _operands(rng, 4, 64, (7, 7), (14, 14), p, dtype, 1)
    ran = route(True)
    for name, a, b, _ in _calls(x, w, gy, None, None):
        # (first calls: the library loads, and tests/conftest.py checks a kernel's first four
        # calls against the NumPy kernel, whose arrays would count here)
        for _ in range(5):
            getattr(cdepthwise, name)(a, b, p, 64)
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            result = getattr(cdepthwise, name)(a, b, p, 64)
            peak = tracemalloc.get_traced_memory()[1] - start
        finally:
            tracemalloc.stop()
        # (the input gradient's finiteness mask of the weight, one byte an element, chooses
        # between gather and scatter; a few small Python objects)
        assert peak <= result.nbytes + w.size + 4096, (name, peak, result.nbytes)
    assert all(done for _, done in ran) and len(ran) == 18
