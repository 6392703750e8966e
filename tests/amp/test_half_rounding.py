"""Half precision as PyTorch rounds it. Products with a bias round once: ``linear``, ``addmm`` and
``baddbmm`` on bfloat16 / float16 add the bias (and apply beta and alpha) to the float32 sums
and round the result once, on the C kernel (kernels/chgemm.py) and on the NumPy reference alike
(hunt 9: a bfloat16-autocast MLP's logits were a unit in the last place off PyTorch's in about a
quarter of the elements, the bias having been added to an already rounded product); so do
convolutions (conv1d/2d/3d, grouped, depthwise and transposed: the bias is the conv op's
operand, added to the float32 sums in the NumPy reference and in each C kernel's 16-bit store;
about 30% of the outputs were a unit in the last place off PyTorch's). And
normalizations of a half-precision input with float32 parameters (autocast's LayerNorm,
BatchNorm, GroupNorm) compute in float32, rounding once (they rounded the weights first)."""

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.kernels import ccompile
from ember.ops.addmm import _ADDMM
from ember.ops.linalg import _LINEAR

torch = pytest.importorskip("torch")

HALF = [("bfloat16", ember.bfloat16, torch.bfloat16), ("float16", ember.float16, torch.float16)]


def _rounded_once(exact, np_dtype, k, scale):
    """``exact`` (float64) rounded once to ``np_dtype``, and where that rounding is decided
    within a float32 sum's reordering (``2 k eps32 scale`` of a tie between two neighbours),
    either neighbour: (the value, the mask of elements that may be either)."""
    once = exact.astype(np_dtype)
    up = np.nextafter(once.astype(np.float64), np.inf).astype(np_dtype).astype(np.float64)
    down = np.nextafter(once.astype(np.float64), -np.inf).astype(np_dtype).astype(np.float64)
    o = once.astype(np.float64)
    ties = np.concatenate([(o + up)[None] / 2, (o + down)[None] / 2])
    near = (np.abs(ties - exact[None]).min(0)) <= 2 * k * 2.0**-24 * scale
    return once, near


def _check(got, once, near):
    got = np.asarray(got)
    ulp = np.abs(got.astype(np.float64) - once.astype(np.float64))
    spacing = np.abs(np.spacing(once.astype(np.float32)).astype(np.float64))
    eps = float(ml_dtypes.finfo(once.dtype).eps)
    differs = got != once
    assert not (differs & ~near).any(), f"{differs.sum()} of {got.size} rounded twice"
    assert (
        ulp[differs] <= 2 * eps * np.abs(once[differs].astype(np.float64)) + spacing[differs]
    ).all()


@pytest.mark.parametrize("name,d,td", HALF, ids=[h[0] for h in HALF])
def test_linear_addmm_baddbmm_round_once(name, d, td):
    r = np.random.default_rng(0)
    x = r.standard_normal((24, 20)).astype(d.np)
    w = r.standard_normal((16, 20)).astype(d.np)
    b = r.standard_normal(16).astype(d.np)
    x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
    scale = np.abs(x64) @ np.abs(w64.T) + np.abs(b64)
    once, near = _rounded_once(x64 @ w64.T + b64, d.np, 20, scale)
    tx, tw, tb = (ember.tensor(a) for a in (x, w, b))
    for got in (
        ember.nn.functional.linear(tx, tw, tb).numpy(),
        ember.nn.functional.linear(tx[None], tw, tb).numpy()[0],
        ember.addmm(tb, tx, tw.T).numpy(),
        ember.baddbmm(tb, tx[None], tw.T[None]).numpy()[0],
        _LINEAR.kernel(x, w, b),  # the NumPy reference
        _ADDMM.kernel(b, x, w.T, beta=1, alpha=1),
    ):
        _check(got, once, near)
    # beta and alpha join the float32 arithmetic too
    once2, near2 = _rounded_once(0.5 * b64 + 2.0 * (x64 @ w64.T), d.np, 20, 2 * scale)
    _check(ember.addmm(tb, tx, tw.T, beta=0.5, alpha=2.0).numpy(), once2, near2)
    _check(_ADDMM.kernel(b, x, w.T, beta=0.5, alpha=2.0), once2, near2)
    _check(ember.baddbmm(tb, tx[None], tw.T[None], beta=0.5, alpha=2.0).numpy()[0], once2, near2)
    # and PyTorch agrees with that rounding
    t = torch.nn.functional.linear(*(torch.tensor(a.astype(np.float32)).to(td) for a in (x, w, b)))
    _check(t.float().numpy().astype(d.np), once, near)


def test_autocast_linear_matches_torch():
    r = np.random.default_rng(1)
    x = r.standard_normal((8, 12)).astype(np.float32)
    w = r.standard_normal((10, 12)).astype(np.float32)
    b = r.standard_normal(10).astype(np.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = torch.nn.functional.linear(*(torch.tensor(a) for a in (x, w, b)))
    with ember.autocast("cpu", dtype=ember.bfloat16):
        got = ember.nn.functional.linear(*(ember.tensor(a) for a in (x, w, b)))
    assert got.dtype == ember.bfloat16
    x64, w64, b64 = (a.astype(ml_dtypes.bfloat16).astype(np.float64) for a in (x, w, b))
    once, near = _rounded_once(
        x64 @ w64.T + b64, ml_dtypes.bfloat16, 12, np.abs(x64) @ np.abs(w64.T) + np.abs(b64)
    )
    _check(got.numpy(), once, near)
    _check(want.float().numpy().astype(ml_dtypes.bfloat16), once, near)


NORMS = {
    "layer_norm": lambda lib, x, w, b: lib.nn.functional.layer_norm(
        x.transpose(1, 3), (6,), w, b
    ).transpose(1, 3),
    "group_norm": lambda lib, x, w, b: lib.nn.functional.group_norm(x, 3, w, b),
    # (batch_norm's ops take the float32 parameters beside the 16-bit data: no float32 copy
    # of the activation, ops/batch_norm.py)
    "batch_norm": lambda lib, x, w, b: lib.nn.functional.batch_norm(
        x, lib.zeros(6), lib.ones(6), w, b, training=True
    ),
}


@pytest.mark.parametrize("name", list(NORMS))
def test_mixed_normalizations_compute_in_float32(name):
    """A bfloat16 input with float32 parameters (autocast leaves norms so): PyTorch's
    mixed-type kernels, float32 arithmetic with the parameters unrounded, the output and the
    input's gradient rounded once (each equal to PyTorch's), the parameters' gradients float32
    sums (PyTorch's layer norm sums those partly in bfloat16: compared with float64 sums)."""
    r = np.random.default_rng(3)
    x, g = r.standard_normal((2, 6, 4, 4)), r.standard_normal((2, 6, 4, 4))
    w, b = r.standard_normal(6), r.standard_normal(6)
    out = {}
    for lib in (torch, ember):
        X = lib.tensor(x.astype(np.float32)).to(lib.bfloat16).requires_grad_()
        W = lib.tensor(w.astype(np.float32)).requires_grad_()
        B = lib.tensor(b.astype(np.float32)).requires_grad_()
        y = NORMS[name](lib, X, W, B)
        y.backward(lib.tensor(g.astype(np.float32)).to(lib.bfloat16))
        assert y.dtype == lib.bfloat16 and W.grad.dtype == lib.float32
        out[lib] = [t.float().detach().numpy() for t in (y, X.grad, W.grad, B.grad)]
    # 1 ulp where a float32 difference in the statistics straddles a tie, in a few elements
    for t, e in zip(out[torch][:2], out[ember][:2]):
        assert (t != e).mean() < 0.02 and np.allclose(t, e, rtol=2**-7, atol=0)
    # the parameters' gradients: sums over bfloat16 gradients times float32 normalized values
    gb = g.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    xb = x.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    if name == "layer_norm":
        xh = (xb - xb.mean(1, keepdims=True)) / np.sqrt(xb.var(1, keepdims=True) + 1e-5)
    elif name == "group_norm":
        xg = xb.reshape(2, 3, -1)
        xh = (xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-5)
        xh = xh.reshape(xb.shape)
    else:
        m, v = xb.mean((0, 2, 3), keepdims=True), xb.var((0, 2, 3), keepdims=True)
        xh = (xb - m) / np.sqrt(v + 1e-5)
    scale = (np.abs(gb) * np.abs(xh)).sum((0, 2, 3))
    tol = 64 * 2.0**-24 * scale  # float32 sums, in any order, of float32-rounded terms
    assert np.all(np.abs(out[ember][2] - (gb * xh).sum((0, 2, 3))) <= tol)
    assert np.all(np.abs(out[ember][3] - gb.sum((0, 2, 3))) <= tol)


def test_mixed_batch_norm_keeps_the_activations_16_bit():
    """BatchNorm on bfloat16 data with float32 parameters and buffers: the statistics it saves
    and the running buffers it updates are float32 (as PyTorch's mixed kernel), its output
    bfloat16, and nothing the tape saves is a float32 copy of the activation."""
    r = np.random.default_rng(5)
    x = r.standard_normal((8, 4, 6, 6)).astype(np.float32)
    out = {}
    for lib in (torch, ember):
        bn = lib.nn.BatchNorm2d(4)
        X = lib.tensor(x).to(lib.bfloat16).requires_grad_()
        y = bn(X)
        assert y.dtype == lib.bfloat16 and bn.running_mean.dtype == lib.float32
        out[lib] = [t.detach().float().numpy() for t in (y, bn.running_mean, bn.running_var)]
    for t, e in zip(out[torch], out[ember]):
        assert np.allclose(t, e, rtol=2**-7, atol=2**-7 * np.abs(t).max())
    # the reference: float64 arithmetic on the bfloat16 data and the unrounded float32
    # parameters, rounded once (what ember's kernels compute; bfloat16 parameters differ)
    w = (1 + r.standard_normal(4) / 3).astype(np.float32)
    b = r.standard_normal(4).astype(np.float32)
    xb = x.astype(ml_dtypes.bfloat16).astype(np.float64)
    m, v = xb.mean((0, 2, 3), keepdims=True), xb.var((0, 2, 3), keepdims=True)
    want = (xb - m) / np.sqrt(v + 1e-5) * w.reshape(1, 4, 1, 1) + b.reshape(1, 4, 1, 1)
    X = ember.tensor(x).to(ember.bfloat16)
    got = ember.nn.functional.batch_norm(X, None, None, ember.tensor(w), ember.tensor(b), True)
    assert np.array_equal(got.numpy(), want.astype(ml_dtypes.bfloat16))
    bn, saved = ember.nn.BatchNorm2d(4), []
    X = ember.tensor(x).to(ember.bfloat16).requires_grad_()
    with ember.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        bn(X)
    big = [t.dtype for t in saved if t.numel() == X.numel()]
    assert big and all(d == ember.bfloat16 for d in big)


F = ember.nn.functional
# (name, f(lib, x, w, b), x shape, w shape)
CONVS = [
    ("conv1d", lambda L, x, w, b: L.nn.functional.conv1d(x, w, b, padding=1), (2, 4, 11),
     (6, 4, 3)),
    ("conv2d_groups_stride", lambda L, x, w, b: L.nn.functional.conv2d(
        x, w, b, stride=2, groups=2), (2, 4, 9, 9), (6, 2, 3, 3)),
    ("conv2d_same", lambda L, x, w, b: L.nn.functional.conv2d(x, w, b, padding="same"),
     (1, 5, 7, 7), (20, 5, 3, 3)),
    ("depthwise", lambda L, x, w, b: L.nn.functional.conv2d(x, w, b, padding=1, groups=4),
     (2, 4, 8, 8), (4, 1, 3, 3)),
    ("conv3d", lambda L, x, w, b: L.nn.functional.conv3d(x, w, b, padding=1), (1, 3, 4, 4, 4),
     (4, 3, 3, 3, 3)),
    ("conv_transpose1d", lambda L, x, w, b: L.nn.functional.conv_transpose1d(
        x, w, b, stride=3, output_padding=1), (2, 4, 6), (4, 5, 2)),
    ("conv_transpose2d_groups", lambda L, x, w, b: L.nn.functional.conv_transpose2d(
        x, w, b, stride=2, padding=1, groups=2), (2, 4, 5, 5), (4, 3, 3, 3)),
    ("conv_transpose2d_depthwise", lambda L, x, w, b: L.nn.functional.conv_transpose2d(
        x, w, b, groups=4), (2, 4, 6, 6), (4, 1, 3, 3)),
]  # fmt: skip


def _conv_case(case, td, seed):
    """Operands rounded to ``td`` (float32 arrays, the bias one per output channel), the output
    gradient, and the float64 reference of each result (output, input/weight/bias gradients)
    with its scale (the same sums of magnitudes) and terms per sum: PyTorch in float64."""
    name, f, xs, ws = case
    r = np.random.default_rng(seed)
    x, w = (torch.tensor(r.standard_normal(s)).to(td).double() for s in (xs, ws))
    channels = f(torch, x, w, None).shape[1]
    b = torch.tensor(r.standard_normal(channels)).to(td).double()
    out = f(torch, x, w, b)
    g = torch.tensor(r.standard_normal(tuple(out.shape))).to(td).double()

    def grads(x, w, b, g):
        x, w, b = (t.clone().requires_grad_() for t in (x, w, b))
        y = f(torch, x, w, b)
        y.backward(g)
        return [t.detach().numpy() for t in (y, x.grad, w.grad, b.grad)]

    exact = grads(x, w, b, g)
    scale = grads(x.abs(), w.abs(), b.abs(), g.abs())
    # terms per sum, at most: the weight's size (the output, the input gradient), the
    # positions per channel (the weight and bias gradients)
    terms = [w.numel()] * 2 + [out.numel() // channels] * 2
    operands = [t.float().numpy() for t in (x, w, b, g)]
    return operands, exact, scale, terms


@pytest.mark.parametrize("name,d,td", HALF, ids=[h[0] for h in HALF])
def test_conv_bias_rounds_once(name, d, td):
    """Forward and the input, weight and bias gradients, eager and captured, equal the float64
    result rounded once (but within a float32 sum's reordering of a tie); PyTorch's too
    where it rounds once (bfloat16 throughout; float16's forward convolutions: its
    transposed convolutions and gradients round partial sums to float16 on CPUs without
    AVX512_FP16)."""
    from ember.ops.conv import CONV, CONV_INPUT_GRAD

    for i, case in enumerate(CONVS):
        (x, w, b, g), exact, scale, terms = _conv_case(case, td, i)
        f = case[1]
        wanted = [_rounded_once(e, d.np, k, s) for e, s, k in zip(exact, scale, terms)]
        captured = ember.function(lambda X, W, B, f=f: f(ember, X, W, B))
        for run in (lambda *a, f=f: f(ember, *a), captured):
            X, W, B = (ember.tensor(a).to(d).requires_grad_() for a in (x, w, b))
            y = run(X, W, B)
            y.backward(ember.tensor(g).to(d))
            for got, (once, near) in zip((y, X.grad, W.grad, B.grad), wanted):
                assert got.dtype == d
                _check(got.float().detach().numpy().astype(d.np), once, near)
        # the NumPy reference kernels round once too (the functional's padding, strides and
        # output padding as the op's attributes: read off the captured graph)
        node = next(n for n in captured.graph.nodes if n.kind == "call" and len(n.inputs) == 3)
        assert node.op in (CONV, CONV_INPUT_GRAD)
        arrays = [a.astype(d.np) for a in (x, w, b)]
        _check(node.op.kernel(*arrays, **node.attrs), *wanted[0])
        if name == "bfloat16" or "transpose" not in case[0]:
            T = [torch.tensor(a).to(td).requires_grad_() for a in (x, w, b)]
            t = f(torch, *T)
            t.backward(torch.tensor(g).to(td))
            results = (t, *(v.grad for v in T)) if name == "bfloat16" else (t,)
            for got, (once, near) in zip(results, wanted):
                _check(got.detach().float().numpy().astype(d.np), once, near)


@pytest.mark.parametrize("mode", ["reflect", "circular"])
def test_autocast_conv_modules_match_torch(mode):
    """nn.Conv2d with a padding mode and nn.ConvTranspose2d under bfloat16 autocast: PyTorch's
    bits (output and the parameters' gradients)."""
    x = np.random.default_rng(5).standard_normal((2, 4, 7, 7)).astype(np.float32)
    out = {}
    for lib in (torch, ember):
        r = np.random.default_rng(6)  # (the same parameters for both)
        conv = lib.nn.Conv2d(4, 6, 3, padding=1, padding_mode=mode, groups=2)
        up = lib.nn.ConvTranspose2d(6, 3, 3, stride=2)
        for m in (conv, up):
            for p in m.parameters():
                with lib.no_grad():
                    p.copy_(lib.tensor(r.standard_normal(tuple(p.shape)).astype(np.float32)))
        with lib.autocast("cpu", dtype=lib.bfloat16):
            y = up(conv(lib.tensor(x)))
        y.float().sum().backward()
        assert y.dtype == lib.bfloat16
        grads = [p.grad.numpy() for m in (conv, up) for p in (m.weight, m.bias)]
        out[lib] = [y.float().detach().numpy()] + grads
    # the products are summed in float32 in other orders: a tie may round either way
    for t, e in zip(out[torch], out[ember]):
        assert (t != e).mean() < 0.01 and np.allclose(t, e, rtol=2**-7, atol=1e-6)


def test_captured_conv_bias_relu_rounds_once():
    """Captured, a bfloat16 convolution with its bias and a ReLU is one fused node whose C
    store adds the bias before the one rounding (the graph's executors are checked against
    the interpreter by tests/conftest.py)."""
    r = np.random.default_rng(7)
    x, w, b = (r.standard_normal(s) for s in ((2, 8, 9, 9), (16, 8, 3, 3), (16,)))
    x, w, b = (a.astype(ml_dtypes.bfloat16) for a in (x, w, b))
    fn = ember.function(lambda X, W, B: ember.nn.functional.relu(F.conv2d(X, W, B, padding=1)))
    got = fn(*(ember.tensor(a) for a in (x, w, b))).numpy()
    if ccompile.compiler_available():  # (without one the epilogue pass leaves the nodes)
        assert [n.op.name for n in fn.graph.nodes if n.kind == "call"] == ["fused_epilogue"]
    x64, w64, b64 = (torch.tensor(a.astype(np.float64)) for a in (x, w, b))
    exact = torch.nn.functional.conv2d(x64, w64, b64, padding=1).numpy()
    scale = torch.nn.functional.conv2d(x64.abs(), w64.abs(), b64.abs(), padding=1).numpy()
    once, near = _rounded_once(exact, ml_dtypes.bfloat16, 8 * 9, scale)
    _check(got, np.maximum(once, once.dtype.type(0)), near)
