"""Half precision as PyTorch rounds it. Products with a bias round once: ``linear``, ``addmm`` and
``baddbmm`` on bfloat16 / float16 add the bias (and apply beta and alpha) to the float32 sums
and round the result once, on the C kernel (kernels/chgemm.py) and on the NumPy reference alike
(hunt 9: a bfloat16-autocast MLP's logits were a unit in the last place off PyTorch's in about a
quarter of the elements, the bias having been added to an already rounded product). And
normalizations of a half-precision input with float32 parameters (autocast's LayerNorm,
BatchNorm, GroupNorm) compute in float32, rounding once (they rounded the weights first)."""

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.ops.linalg import _ADDMM, _LINEAR

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
}
# (batch_norm rounds its float32 parameters to the input's half dtype: widening the input
# would save a float32 copy of each activation, functional/normalization.py; within 1 ulp,
# test_mixed_batch_norm_within_an_ulp below)


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
    scale = (np.abs(gb) * np.abs(xh)).sum((0, 2, 3))
    tol = 64 * 2.0**-24 * scale  # float32 sums, in any order, of float32-rounded terms
    assert np.all(np.abs(out[ember][2] - (gb * xh).sum((0, 2, 3))) <= tol)
    assert np.all(np.abs(out[ember][3] - gb.sum((0, 2, 3))) <= tol)


def test_mixed_batch_norm_within_an_ulp():
    """BatchNorm on bfloat16 data with float32 parameters (autocast's CNN): values and the
    input's gradient within one bfloat16 ulp of PyTorch's mixed-type kernel, the parameters'
    gradients float32 within bfloat16 sums' rounding."""
    r = np.random.default_rng(4)
    x, g = r.standard_normal((4, 6, 5, 5)), r.standard_normal((4, 6, 5, 5))
    w, b = r.standard_normal(6), r.standard_normal(6)
    out = {}
    for lib in (torch, ember):
        X = lib.tensor(x.astype(np.float32)).to(lib.bfloat16).requires_grad_()
        W = lib.tensor(w.astype(np.float32)).requires_grad_()
        B = lib.tensor(b.astype(np.float32)).requires_grad_()
        y = lib.nn.functional.batch_norm(X, lib.zeros(6), lib.ones(6), W, B, training=True)
        y.backward(lib.tensor(g.astype(np.float32)).to(lib.bfloat16))
        assert y.dtype == lib.bfloat16 and W.grad.dtype == lib.float32
        out[lib] = [t.float().detach().numpy() for t in (y, X.grad, W.grad, B.grad)]
    for t, e in zip(out[torch][:2], out[ember][:2]):
        assert np.allclose(t, e, rtol=2**-7, atol=2**-7 * np.abs(t).max())
    for t, e in zip(out[torch][2:], out[ember][2:]):  # (sums of 100 bfloat16 terms each)
        assert np.allclose(t, e, rtol=0, atol=100 * 2**-8 * np.abs(g).max() * 4)
