"""The fused inference attention (ops/attention.py, kernels/cattention.py) against its NumPy
kernel and PyTorch: random shapes, heads, strided and broadcast operands, masks (causal, bool,
additive float, key padding), float32/float64, fully masked and NaN rows; its use by
scaled_dot_product_attention, MultiheadAttention and TransformerEncoderLayer where no gradient
is wanted (eagerly and captured), and the composite where one is; NumPy without a compiler."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.kernels import cattention
from ember.ops.attention import ATTENTION, _kernel

torch = pytest.importorskip("torch")
F = ember.nn.functional
ROOT = Path(__file__).resolve().parents[2]
needs_c = pytest.mark.skipif(
    cattention._function(np.dtype(np.float32)) is None, reason="no C compiler"
)


def _tolerance(q, k, v, scale):
    """A bound on the difference of two correct float implementations: each score is a sum of
    E products (error up to E eps |q| |k| scale), which the exponential turns into a relative
    error of the weights; the weighted sum of S values adds S eps; the exp's few ulp."""
    eps = np.finfo(q.dtype).eps
    e, s = q.shape[-1], k.shape[-2]
    score = e * np.abs(q).max(initial=0) * np.abs(k).max(initial=0) * scale
    return 8 * eps * (score + s + 4) * max(np.abs(v).max(initial=0), 1)


def _case(rng, dtype):
    n, h, hk = rng.integers(1, 4), rng.integers(1, 5), None
    hk = h if rng.random() < 0.7 else 1  # one key/value head broadcast over the query heads
    length, source = rng.integers(1, 40), rng.integers(1, 40)
    e, ev = rng.integers(1, 70), rng.integers(1, 40)
    q = rng.standard_normal((n, h, length, e)).astype(dtype)
    k = rng.standard_normal((n, hk, source, e)).astype(dtype)
    # the values as a transposed view: a column stride other than 1
    v = rng.standard_normal((n, hk, ev, source)).astype(dtype).swapaxes(-1, -2)
    return q, k, v


def _mask(rng, kind, q, k, dtype):
    n, length, source = q.shape[0], q.shape[-2], k.shape[-2]
    if kind == "bool":
        return rng.random((length, source)) < 0.7
    if kind == "float":
        return rng.standard_normal((n, 1, length, source)).astype(dtype)
    if kind == "padding":  # key padding as an additive (N, 1, 1, S) mask
        m = np.where(rng.random((n, 1, 1, source)) < 0.3, -np.inf, 0.0).astype(dtype)
        m[..., 0] = 0
        return m
    return None


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["none", "causal", "bool", "float", "padding"])
def test_kernel_matches_numpy_and_torch(dtype, kind):
    rng = np.random.default_rng(zlib.crc32(repr((kind, np.dtype(dtype).name)).encode()))
    for _ in range(12):
        q, k, v = _case(rng, dtype)
        mask = _mask(rng, kind, q, k, dtype)
        causal, safe = kind == "causal", bool(rng.random() < 0.5)
        scale = float(rng.uniform(0.05, 1.0))
        got = cattention.attention(q, k, v, mask, scale=scale, causal=causal, safe=safe)
        extra = () if mask is None else (mask,)
        want = _kernel(q, k, v, *extra, scale=scale, causal=causal, safe=safe)
        tol = _tolerance(q, k, v, scale)
        np.testing.assert_allclose(got, want, rtol=0, atol=tol, equal_nan=True)
        tk, tv = torch.from_numpy(k), torch.from_numpy(np.ascontiguousarray(v))
        if k.shape[1] != q.shape[1]:
            tk, tv = tk.expand(-1, q.shape[1], -1, -1), tv.expand(-1, q.shape[1], -1, -1)
        ref = torch.nn.functional.scaled_dot_product_attention(
            torch.from_numpy(q),
            tk,
            tv,
            attn_mask=None if mask is None else torch.from_numpy(mask),
            is_causal=causal,
            scale=scale,
        ).numpy()
        rows = np.isfinite(want).all(-1)  # torch's fully masked rows are its own business
        np.testing.assert_allclose(got[rows], ref[rows], rtol=0, atol=tol)


@needs_c
def test_strided_negative_and_broadcast_operands():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3, 17, 2, 24)).astype(np.float32)  # (N, 3, L, heads, hd)
    q, k, v = (x[:, i].transpose(0, 2, 1, 3) for i in range(3))  # permuted head views
    k = k[:, :, ::-1]  # negative stride along the keys
    mask = rng.standard_normal((1, 2, 1, 17)).astype(np.float32)  # broadcast over N and L
    got = cattention.attention(q, k, v, mask, scale=0.3, causal=False, safe=False)
    want = _kernel(q, k, v, mask, scale=0.3, causal=False, safe=False)
    np.testing.assert_allclose(got, want, rtol=0, atol=_tolerance(q, k, v, 0.3))
    # batch dimensions beyond the kernel's or more leading ones than q's broadcast
    q3 = rng.standard_normal((1, 4, 6)).astype(np.float64)
    k4 = rng.standard_normal((3, 2, 5, 6)).astype(np.float64)
    v4 = rng.standard_normal((3, 2, 5, 2)).astype(np.float64)
    got = cattention.attention(q3, k4, v4, None, scale=1.0, causal=True, safe=False)
    want = _kernel(q3, k4, v4, scale=1.0, causal=True, safe=False)
    np.testing.assert_allclose(got, want, rtol=0, atol=_tolerance(q3, k4, v4, 1.0))


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values(dtype):
    """Fully masked rows (zeros when safe, NaN otherwise), a NaN query row, a NaN key where the
    bool mask hides it (no effect, as the composite's where), +inf scores: the NumPy kernel's
    values, NaN where it has NaN."""
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 5, 8)).astype(dtype)
    k = rng.standard_normal((2, 7, 8)).astype(dtype)
    v = rng.standard_normal((2, 7, 3)).astype(dtype)
    q[0, 2] = np.nan
    k[1, 4] = np.nan
    keep = rng.random((5, 7)) < 0.6
    keep[3] = False  # a fully masked row
    keep[:, 4] = False  # the NaN key is never seen
    additive = np.where(keep, 0.0, -np.inf).astype(dtype)
    big = q.copy()
    big[1, 1, :] = 1e30  # +inf and overflowing scores
    for mask in (keep, additive):
        for safe in (False, True):
            for query in (q, big):
                got = cattention.attention(query, k, v, mask, scale=0.5, causal=False, safe=safe)
                want = _kernel(query, k, v, mask, scale=0.5, causal=False, safe=safe)
                np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
                ok = ~np.isnan(want)
                np.testing.assert_allclose(got[ok], want[ok], rtol=0, atol=1e-5)
    got = cattention.attention(q, k, v, keep, scale=0.5, causal=False, safe=True)
    assert (got[:, 3] == 0).all()  # PyTorch's attention: a fully masked row gives zeros
    assert np.isnan(got[0, 2]).all() and not np.isnan(got[1]).any()


@needs_c
def test_threads_share_the_batch():
    """Enough work to go to ember's pool: the same values as one thread's."""
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((16, 64, 32)).astype(np.float32) for _ in range(3))
    got = cattention.attention(q, k, v, None, scale=0.2, causal=True, safe=False)
    want = _kernel(q, k, v, scale=0.2, causal=True, safe=False)
    np.testing.assert_allclose(got, want, rtol=0, atol=_tolerance(q, k, v, 0.2))


def _ops(graph):
    return {node.op for node in graph.call_nodes()}


def test_sdpa_uses_the_op_only_without_grad():
    rng = np.random.default_rng(11)
    q, k, v = (ember.tensor(rng.standard_normal((2, 3, 5, 4)).astype(np.float32)) for _ in "qkv")
    mask = ember.tensor(rng.random((5, 5)) < 0.5)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(t.numpy()) for t in (q, k, v)), attn_mask=torch.from_numpy(mask.numpy())
    )
    with ember.no_grad():
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        graph = ember.trace(
            lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), q, k, v
        ).graph
    assert ATTENTION in _ops(graph)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=0, atol=1e-6)
    # a gradient is wanted: the composite, differentiated as before
    qg = ember.tensor(q.numpy(), requires_grad=True)
    out = F.scaled_dot_product_attention(qg, k, v, attn_mask=mask)
    # (its node named as PyTorch's flash kernel's, the composite's last op renamed)
    assert out.grad_fn.name() == "ScaledDotProductFlashAttentionForCpuBackward0"
    assert out.grad_fn.op is not ATTENTION
    qt = torch.from_numpy(q.numpy()).requires_grad_()
    want = torch.nn.functional.scaled_dot_product_attention(
        qt, *(torch.from_numpy(t.numpy()) for t in (k, v)), attn_mask=torch.from_numpy(mask.numpy())
    )
    (want_grad,) = torch.autograd.grad(want.sum(), qt)
    (got_grad,) = ember.autograd.grad(out.sum(), qg)
    np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(), rtol=1e-5, atol=1e-6)
    # (traced with gradients on: the composite, which O3's patterns pass, transforms/patterns.py,
    # turns into the op again since this graph computes no gradient)
    traced = ember.trace(
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c), q, k, v, opt_level=2
    ).graph
    assert ATTENTION not in _ops(traced)


def _torch_twin(em, tm):
    with torch.no_grad():
        for (name, pe), (name2, pt) in zip(
            em.named_parameters(), tm.named_parameters(), strict=True
        ):
            assert name == name2
            pt.copy_(torch.from_numpy(pe.detach().numpy()))


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("masks", ["none", "attn", "padding", "both", "float"])
def test_multihead_attention_matches_torch(batch_first, masks):
    rng = np.random.default_rng(len(masks) + batch_first)
    e, heads, n, length = 24, 4, 3, 9
    em = ember.nn.MultiheadAttention(e, heads, batch_first=batch_first).eval()
    tm = torch.nn.MultiheadAttention(e, heads, batch_first=batch_first).eval()
    _torch_twin(em, tm)
    x = rng.standard_normal((n, length, e) if batch_first else (length, n, e)).astype(np.float32)
    kw = {}
    if masks in ("attn", "both"):
        m = rng.random((length, length)) < 0.3
        m[:, 0] = False
        kw["attn_mask"] = m
    if masks == "float":
        kw["attn_mask"] = rng.standard_normal((n * heads, length, length)).astype(np.float32)
    if masks in ("padding", "both"):
        p = rng.random((n, length)) < 0.3
        p[:, 0] = False
        kw["key_padding_mask"] = p
    ex = ember.tensor(x)
    ekw = {name: ember.tensor(a) for name, a in kw.items()}
    with torch.no_grad():
        tx = torch.from_numpy(x)
        want, _ = tm(
            tx, tx, tx, need_weights=False, **{k: torch.from_numpy(a) for k, a in kw.items()}
        )
    with ember.no_grad():
        got, _ = em(ex, ex, ex, need_weights=False, **ekw)
        fn = ember.function(lambda t: em(t, t, t, need_weights=False, **ekw)[0])
        captured = fn(ex)
        graph = ember.trace(lambda t: em(t, t, t, need_weights=False, **ekw)[0], ex).graph
    assert ATTENTION in _ops(graph)
    for out in (got, captured):
        np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=0, atol=2e-6)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_eval_matches_torch(activation, norm_first):
    rng = np.random.default_rng(17)
    args = dict(dropout=0.1, activation=activation, norm_first=norm_first, batch_first=True)
    em = ember.nn.TransformerEncoderLayer(32, 4, 64, **args).eval()
    tm = torch.nn.TransformerEncoderLayer(32, 4, 64, **args).eval()
    _torch_twin(em, tm)
    x = rng.standard_normal((2, 11, 32)).astype(np.float32)
    pad = np.zeros((2, 11), bool)
    pad[1, 7:] = True
    with torch.no_grad():
        want = tm(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(pad)).numpy()
    with ember.no_grad():
        f = ember.function(lambda t, p: em(t, src_key_padding_mask=p))
        got = f(ember.tensor(x), ember.tensor(pad)).numpy()
        eager = em(ember.tensor(x), src_key_padding_mask=ember.tensor(pad)).numpy()
    # torch's fast path leaves padded query rows as zeros; compare the rows it computes
    keep = ~pad
    np.testing.assert_allclose(got[keep], want[keep], rtol=0, atol=1e-5)
    np.testing.assert_allclose(eager, got, rtol=0, atol=1e-5)


def test_without_a_compiler_numpy_runs(tmp_path):
    """With CC=/bin/false the C kernel declines and the op runs its NumPy kernel."""
    code = (
        "import numpy as np, ember\n"
        "from ember.kernels import cattention\n"
        "from ember.ops.attention import _kernel\n"
        "r = np.random.default_rng(0)\n"
        "q, k, v = (r.standard_normal((2, 3, 4, 5)).astype(np.float32) for _ in 'qkv')\n"
        "assert cattention.attention(q, k, v, None, scale=0.5, causal=True, safe=False) is None\n"
        "with ember.no_grad():\n"
        "    out = ember.nn.functional.scaled_dot_product_attention(\n"
        "        ember.tensor(q), ember.tensor(k), ember.tensor(v), is_causal=True, scale=0.5)\n"
        "want = _kernel(q, k, v, scale=0.5, causal=True, safe=False)\n"
        "assert np.array_equal(out.numpy(), want)\n"
    )
    env = dict(
        os.environ, CC="/bin/false", EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT / "src")
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@needs_c
def test_a_layouts_job_is_reused_with_each_calls_own_data():
    # one layout's job is planned once; every call, on any thread, brings its own pointers
    import threading

    rng = np.random.default_rng(5)
    shape = (2, 3, 17, 8)
    sets = [[rng.standard_normal(shape).astype(np.float32) for _ in "qkv"] for _ in range(6)]
    want = [_kernel(q, k, v, scale=0.3, causal=True, safe=False) for q, k, v in sets]
    got = [None] * len(sets)

    def run(i):
        for _ in range(20):
            got[i] = cattention.attention(*sets[i], None, scale=0.3, causal=True, safe=False)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(sets))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (q, k, v), g, w in zip(sets, got, want):
        np.testing.assert_allclose(g, w, atol=_tolerance(q, k, v, 0.3), rtol=0)
    # the same shapes as another layout (a strided view) plan their own job
    q, k, v = sets[0]
    kt = np.ascontiguousarray(k.swapaxes(-1, -2)).swapaxes(-1, -2)
    g = cattention.attention(q, kt, v, None, scale=0.3, causal=True, safe=False)
    np.testing.assert_allclose(g, want[0], atol=_tolerance(q, k, v, 0.3), rtol=0)
