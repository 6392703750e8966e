"""The eager forward convolution's kept weight panels and measured layout, and the eager bias
operand: kernels/cconv_packs.py's column panels equal kernels/cconv.py's packing; a parameter's
panels are packed on its second sight, used (bit-identical results) and refreshed after an
in-place update; kernels/cconv_choice.py's two candidate layouts give bit-identical results on
random geometries (the measured choice changes only the time), and the choice is cached; eager
F.conv2d / conv_transpose2d take the bias as the op's operand (one call, equal bit for bit to
the separate add, gradients against PyTorch) while a captured graph keeps the add."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.kernels import ccompile, cconv, cconv_choice, cconv_packs, cpool, cprepack
from ember.kernels.conv_plan import plan
from ember.kernels.cstep import STEP_CALL, data_address, function_address

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def test_column_panels_are_the_forward_packing():
    rng = np.random.default_rng(1)
    for cout, cin, k, dtype in (
        (1, 3, 3, np.float32),
        (9, 5, 1, np.float64),
        (24, 7, 2, np.float32),
    ):
        w = rng.standard_normal((cout, cin, k, k)).astype(dtype)
        rows = cin * k * k
        want = cconv._packed_weight(w, 1, cout, rows, -(-cout // 8)).reshape(-1)
        got = cconv_packs.column_panels(w.reshape(cout, -1))
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert got.ctypes.data % 64 == 0
    assert cconv_packs.column_panels(np.zeros((2, 2), np.float16)) is None


def _copy(conv, torch_conv):
    with ember.no_grad():  # (ember.tensor copies: the parameter is never exposed)
        conv.weight.copy_(ember.tensor(torch_conv.weight.detach().numpy()))
        conv.bias.copy_(ember.tensor(torch_conv.bias.detach().numpy()))


def test_parameter_panels_kept_and_refreshed(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")  # (the column layout on these planes)
    monkeypatch.delenv("EMBER_PREPACK", raising=False)
    cprepack.clear()
    cconv._steps().clear()  # (the last check reads only this test's steps: others ran before)
    rng = np.random.default_rng(2)
    for cin, cout, size, stride in ((5, 11, 12, 1), (16, 8, 10, 2)):
        conv = ember.nn.Conv2d(cin, cout, 3, stride=stride, padding=1).eval()
        twin = torch.nn.Conv2d(cin, cout, 3, stride=stride, padding=1).eval()
        _copy(conv, twin)
        x = rng.standard_normal((2, cin, size, size)).astype(np.float32)
        held = cprepack.held_bytes()
        with ember.no_grad():
            first = conv(ember.tensor(x)).numpy()
            assert cprepack.held_bytes() == held  # (first sight: not packed)
            conv(ember.tensor(x))
            packed = cprepack.held_bytes() - held
            assert packed >= cout * cin * 9 * 4  # (second sight: packed)
            assert np.array_equal(conv(ember.tensor(x)).numpy(), first)  # (used: same bits)
            conv.weight.mul_(-0.5)
            with torch.no_grad():
                twin.weight.mul_(-0.5)
            for _ in range(3):  # (stale, then packed again, then used)
                y = conv(ember.tensor(x)).numpy()
                want = twin(torch.tensor(x)).detach().numpy()
                np.testing.assert_allclose(y, want, rtol=0, atol=cin * 9 * 4e-7 * 8)
        assert not any(v[5] for v in cconv._steps().values() if v is not None)


def test_layouts_bit_identical_and_choice_cached(monkeypatch):
    monkeypatch.delenv("EMBER_CONV_LAYOUT", raising=False)
    rng = np.random.default_rng(3)
    for _ in range(12):
        cin, cout = int(rng.integers(1, 40)), int(rng.integers(1, 70))
        k, stride, n = int(rng.choice([1, 3])), int(rng.choice([1, 2])), int(rng.integers(1, 3))
        size = int(rng.integers(k, 12))
        dtype = np.float32 if rng.random() < 0.7 else np.float64
        x = rng.standard_normal((n, cin, size, size)).astype(dtype)
        w = rng.standard_normal((cout, cin, k, k)).astype(dtype)
        p = plan((size, size), (k, k), (stride, stride), ((k // 2, k // 2),) * 2, (1, 1))
        outs = []
        for wide in (False, True):
            step, args, keep = cconv.forward_step(x.shape, w.shape, p, x.dtype, False, wide=wide)
            out = np.empty((n, cout) + p.out_size, dtype)
            args[0], args[1], args[3] = data_address(x), data_address(w), data_address(out)
            STEP_CALL(function_address(step))(data_address(args))
            outs.append(out)
        assert np.array_equal(outs[0], outs[1]), (cin, cout, k, stride, size, dtype)
        operands = (np.ascontiguousarray(x), w)
        choice = cconv_choice.layout(
            x.shape, w.shape, p, dtype, False, operands, cconv.forward_step
        )
        assert choice in ((False, False), (True, False), (False, True))
        key = (x.shape, w.shape, p, np.dtype(dtype), False, cpool.get_num_threads(), False)
        assert cconv_choice.chosen(key) == choice
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
    assert (
        cconv_choice.layout(x.shape, w.shape, p, dtype, False, operands, cconv.forward_step) is None
    )


def test_eager_bias_operand():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    for dtype, groups in ((np.float32, 1), (np.float64, 1), (np.float32, 2)):
        x = rng.standard_normal((2, 4, 7, 7)).astype(dtype)
        w = rng.standard_normal((6, 4 // groups, 3, 3)).astype(dtype)
        b = rng.standard_normal(6).astype(dtype)
        ex, ew, eb = (ember.tensor(a, requires_grad=True) for a in (x, w, b))
        y = F.conv2d(ex, ew, eb, 2, 1, groups=groups)
        assert y.grad_fn.op.name == "conv"  # (one call: the bias is the op's operand)
        plain = F.conv2d(ex, ew, None, 2, 1, groups=groups).detach().numpy()
        assert np.array_equal(y.detach().numpy(), plain + b.reshape(1, -1, 1, 1))
        (y * y).sum().backward()
        tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
        ty = torch.nn.functional.conv2d(tx, tw, tb, 2, 1, groups=groups)
        (ty * ty).sum().backward()
        tol = 200 * np.finfo(dtype).eps
        for e, t in ((ex, tx), (ew, tw), (eb, tb)):
            np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol * 10)
        if groups == 1:  # transposed, one group: the bias operand too
            wt = np.swapaxes(w, 0, 1).copy()
            yt = F.conv_transpose2d(ex, ember.tensor(wt), eb, 2, 1)
            assert yt.grad_fn.op.name == "conv_input_grad"
            tt = torch.nn.functional.conv_transpose2d(tx, torch.tensor(wt), tb, 2, 1).detach()
            np.testing.assert_allclose(yt.detach().numpy(), tt.numpy(), rtol=tol, atol=tol * 10)
    # captured: a float32 bias stays a separate add (the passes fold and fuse it)
    graph = ember.trace(lambda a, c, d: F.conv2d(a, c, d, groups=2), ex, ew, eb, opt_level=0).graph
    convs = [n for n in graph.nodes if n.kind == "call" and n.op.name == "conv"]
    assert len(convs) == 1 and len(convs[0].inputs) == 2
