"""Autocast's dtype per op against PyTorch 2.13 on the CPU: every op of PyTorch's CPU autocast
lists that ember has (lower_precision_fp, fp32, promote), and the common ops autocast passes
through, give the dtype torch gives, under bfloat16 and float16 autocast, and values within
the result dtype's rounding (two roundings of a result of magnitude ``scale``)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)


def _log_softmax(z):
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _arrays():
    r = np.random.default_rng(1)
    sq = r.standard_normal((4, 4))
    return {
        "x": r.standard_normal((4, 8)),
        "w": r.standard_normal((6, 8)),
        "b": r.standard_normal(6),
        "a": r.standard_normal((3, 4, 5)),
        "c": r.standard_normal((3, 5, 6)),
        "m": r.standard_normal((3, 4, 6)),
        "m2": r.standard_normal((4, 6)),
        "img": r.standard_normal((2, 3, 8, 8)),
        "vol": r.standard_normal((1, 2, 4, 4, 4)),
        "cw": r.standard_normal((4, 3, 3, 3)),
        "ctw": r.standard_normal((3, 4, 3, 3)),
        "seq": r.standard_normal((2, 3, 8)),
        "c1w": r.standard_normal((4, 3, 3)),
        "spd": sq @ sq.T + 4 * np.eye(4),
        "p": r.uniform(0.05, 0.95, (4, 8)),
        "pos": r.uniform(0.5, 2.0, (4, 8)),
        "ones": np.ones((4, 8)),
        "sign": np.where(r.standard_normal((4, 8)) > 0, 1.0, -1.0),
        "grid": r.uniform(-1, 1, (2, 4, 4, 2)),
        "q": r.standard_normal((2, 4, 8)),
        "alpha": np.array([0.25]),
        "bw": r.standard_normal((3, 8, 8)),
        "ln_w": r.standard_normal(8),
        "ln_b": r.standard_normal(8),
        "bn_w": r.standard_normal(3),
        "idx": np.array([0, 3, 7, 2]),
        "rows": np.array([0, 2]),
        "ctc": _log_softmax(r.standard_normal((6, 2, 5))),
        "ctc_t": np.array([[1, 2, 3], [2, 2, 4]]),
        "ctc_il": np.array([6, 5]),
        "ctc_tl": np.array([3, 2]),
        "mlm": np.array([[3, 0, -1, 1, 2, 5, 6, 7]] * 4),
    }


class _Inputs:
    """The arrays as float32 tensors of ``lib`` (``name``), cast to the region's dtype
    (``name_lo``), or integer indices."""

    def __init__(self, lib, low):
        self.lib = lib
        for k, v in _arrays().items():
            if v.dtype.kind in "iu":
                setattr(self, k, lib.tensor(v))
                continue
            t = lib.tensor(v.astype(np.float32))
            setattr(self, k, t)
            setattr(self, k + "_lo", t.to(low))


def _F(lib):
    return lib.nn.functional


def _mha(lib, v):
    lib.manual_seed(0)
    m = lib.nn.MultiheadAttention(8, 2, batch_first=True)
    with lib.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(
                lib.tensor(np.random.default_rng(i).standard_normal(tuple(p.shape)) * 0.3).float()
            )
    return m(v.q, v.q, v.q)[0]


# name -> fn(lib, inputs); PyTorch's list (or "pass" for ops autocast lets through)
CASES = {
    # lower_precision_fp
    "conv1d": lambda L, v: _F(L).conv1d(v.seq, v.c1w, v.b[:4]),
    "conv2d": lambda L, v: _F(L).conv2d(v.img, v.cw, v.b[:4], padding=1),
    "conv3d": lambda L, v: _F(L).conv3d(v.vol, v.vol[:, :, :2, :2, :2].reshape(1, 2, 2, 2, 2)),
    "conv_transpose1d": lambda L, v: _F(L).conv_transpose1d(v.seq, v.c1w.permute(1, 0, 2)),
    "conv_transpose2d": lambda L, v: _F(L).conv_transpose2d(v.img, v.ctw, v.b[:4], stride=2),
    "bmm": lambda L, v: L.bmm(v.a, v.c),
    "mm": lambda L, v: L.mm(v.x, v.w.T),
    "linalg_vecdot": lambda L, v: L.linalg.vecdot(v.x, v.w[:4]),
    "baddbmm": lambda L, v: L.baddbmm(v.m, v.a, v.c),
    "addmm": lambda L, v: L.addmm(v.b, v.x, v.w.T),
    "addbmm": lambda L, v: L.addbmm(v.m2, v.a, v.c),
    "linear": lambda L, v: _F(L).linear(v.x, v.w, v.b),
    "matmul": lambda L, v: L.matmul(v.a, v.c),
    "matmul_operator": lambda L, v: v.x @ v.w.T,
    "matmul_vectors": lambda L, v: v.x[0] @ v.w[0],
    "prelu": lambda L, v: _F(L).prelu(v.x, v.alpha),
    "scaled_dot_product_attention": lambda L, v: _F(L).scaled_dot_product_attention(v.q, v.q, v.q),
    "einsum": lambda L, v: L.einsum("ij,kj->ik", v.x, v.w),
    "tensordot": lambda L, v: L.tensordot(v.x, v.w, dims=([1], [1])),
    # fp32 (inputs in the region's dtype come out in float32)
    "mse_loss": lambda L, v: _F(L).mse_loss(v.x_lo, v.w[:4]),
    "l1_loss": lambda L, v: _F(L).l1_loss(v.x_lo, v.x),
    "smooth_l1_loss": lambda L, v: _F(L).smooth_l1_loss(v.x_lo, v.w[:4]),
    "huber_loss": lambda L, v: _F(L).huber_loss(v.x_lo, v.w[:4]),
    "nll_loss": lambda L, v: _F(L).nll_loss(v.x_lo, v.idx),
    "cross_entropy": lambda L, v: _F(L).cross_entropy(v.x_lo, v.idx),
    "cross_entropy_probs": lambda L, v: _F(L).cross_entropy(v.x_lo, v.p),
    "binary_cross_entropy": lambda L, v: _F(L).binary_cross_entropy(v.p_lo, v.p),
    "binary_cross_entropy_with_logits": lambda L, v: _F(L).binary_cross_entropy_with_logits(
        v.x_lo, v.p
    ),
    "kl_div": lambda L, v: _F(L).kl_div(v.x_lo, v.p, reduction="batchmean"),
    "margin_ranking_loss": lambda L, v: _F(L).margin_ranking_loss(
        v.x_lo[:, 0], v.x[:, 1], v.sign[:, 0]
    ),
    "hinge_embedding_loss": lambda L, v: _F(L).hinge_embedding_loss(v.x_lo, v.sign),
    "multi_margin_loss": lambda L, v: _F(L).multi_margin_loss(v.x_lo, v.idx),
    "multilabel_margin_loss": lambda L, v: _F(L).multilabel_margin_loss(v.x_lo, v.mlm),
    "soft_margin_loss": lambda L, v: _F(L).soft_margin_loss(v.x_lo, v.sign),
    "triplet_margin_loss": lambda L, v: _F(L).triplet_margin_loss(v.x_lo, v.w[:4], v.p),
    "cosine_embedding_loss": lambda L, v: _F(L).cosine_embedding_loss(
        v.x_lo, v.w[:4], v.sign[:, 0]
    ),
    "poisson_nll_loss": lambda L, v: _F(L).poisson_nll_loss(v.x_lo, v.pos),
    "prod": lambda L, v: L.prod(v.p_lo, 1),
    "cdist": lambda L, v: L.cdist(v.x_lo, v.w),
    "inverse": lambda L, v: L.inverse(v.spd_lo),
    "linalg_inv": lambda L, v: L.linalg.inv(v.spd_lo),
    "cholesky": lambda L, v: L.linalg.cholesky(v.spd_lo),
    "linalg_solve": lambda L, v: L.linalg.solve(v.spd_lo, v.x[:, :2]),
    "linalg_eigh": lambda L, v: L.linalg.eigh(v.spd_lo)[0],
    "linalg_eigvalsh": lambda L, v: L.linalg.eigvalsh(v.spd_lo),
    "linalg_svdvals": lambda L, v: L.linalg.svdvals(v.spd_lo),
    "linalg_svd": lambda L, v: L.linalg.svd(v.spd_lo)[1],
    "linalg_qr": lambda L, v: L.linalg.qr(v.spd_lo)[1].abs(),
    "pinverse": lambda L, v: L.pinverse(v.spd_lo),
    "linalg_lstsq": lambda L, v: L.linalg.lstsq(v.spd_lo, v.x[:, :2]).solution,
    "linalg_matrix_rank": lambda L, v: L.linalg.matrix_rank(v.spd_lo),
    "cholesky_solve": lambda L, v: L.cholesky_solve(v.x[:, :2], L.linalg.cholesky(v.spd)),
    "trace": lambda L, v: v.spd_lo.trace(),
    "cholesky_inverse": lambda L, v: L.cholesky_inverse(L.linalg.cholesky(v.spd).to(v.x_lo.dtype)),
    "linalg_cond": lambda L, v: L.linalg.cond(v.spd_lo),
    "linalg_tensorinv": lambda L, v: L.linalg.tensorinv(v.spd_lo, ind=1),
    "linalg_tensorsolve": lambda L, v: L.linalg.tensorsolve(v.spd_lo, v.x_lo[:, 0]),
    "linalg_solve_triangular": lambda L, v: L.linalg.solve_triangular(
        v.spd.triu(), v.x[:, :2], upper=True
    ),
    "ctc_loss": lambda L, v: _F(L).ctc_loss(v.ctc_lo, v.ctc_t, v.ctc_il, v.ctc_tl),
    "max_unpool2d": lambda L, v: _F(L).max_unpool2d(
        *_F(L).max_pool2d(v.img_lo, 2, return_indices=True), 2
    ),
    "grid_sample": lambda L, v: _F(L).grid_sample(v.img_lo, v.grid, align_corners=False),
    "max_pool3d": lambda L, v: _F(L).max_pool3d(v.vol_lo, 2),
    "avg_pool3d": lambda L, v: _F(L).avg_pool3d(v.vol_lo, 2),
    "adaptive_avg_pool3d": lambda L, v: _F(L).adaptive_avg_pool3d(v.vol_lo, 2),
    "adaptive_max_pool3d": lambda L, v: _F(L).adaptive_max_pool3d(v.vol_lo, 2),
    "reflection_pad1d": lambda L, v: _F(L).pad(v.seq_lo, (1, 2), mode="reflect"),
    "reflection_pad2d": lambda L, v: _F(L).pad(v.img_lo, (1, 1, 2, 0), mode="reflect"),
    "replication_pad2d": lambda L, v: _F(L).pad(v.img_lo, (1, 1, 2, 0), mode="replicate"),
    "replication_pad3d": lambda L, v: _F(L).pad(v.vol_lo, (1, 1, 1, 0, 0, 1), mode="replicate"),
    # promote
    "cat": lambda L, v: L.cat([v.x_lo, v.x]),
    "cat_low": lambda L, v: L.cat([v.x_lo, v.x_lo]),
    "stack": lambda L, v: L.stack([v.x_lo, v.x]),
    "index_copy": lambda L, v: v.x.index_copy(0, v.rows, v.x_lo[:2]),
    "index_copy_low_self": lambda L, v: v.x_lo.index_copy(0, v.rows, v.x[:2]),
    # passed through (PyTorch computes them in their operands' dtype)
    "softmax": lambda L, v: _F(L).softmax(v.x_lo, -1),
    "softmax_f32": lambda L, v: _F(L).softmax(v.x, -1),
    "log_softmax": lambda L, v: _F(L).log_softmax(v.x_lo, -1),
    "layer_norm": lambda L, v: _F(L).layer_norm(v.x_lo, (8,), v.ln_w, v.ln_b),
    "layer_norm_f32": lambda L, v: _F(L).layer_norm(v.x, (8,)),
    "batch_norm": lambda L, v: _F(L).batch_norm(
        v.img_lo, L.zeros(3), L.ones(3), v.bn_w, v.b[:3], training=True
    ),
    "group_norm": lambda L, v: _F(L).group_norm(v.img_lo, 1, v.bn_w, v.b[:3]),
    "relu": lambda L, v: _F(L).relu(v.x_lo),
    "gelu": lambda L, v: _F(L).gelu(v.x_lo),
    "sigmoid": lambda L, v: L.sigmoid(v.x_lo),
    "tanh": lambda L, v: L.tanh(v.x_lo),
    "sum": lambda L, v: v.x_lo.sum(),
    "mean": lambda L, v: v.x_lo.mean(),
    "var": lambda L, v: v.x_lo.var(),
    "exp": lambda L, v: v.x_lo.exp(),
    "log": lambda L, v: v.p_lo.log(),
    "cumsum": lambda L, v: v.x_lo.cumsum(0),
    "logsumexp": lambda L, v: v.x_lo.logsumexp(-1),
    "norm": lambda L, v: L.linalg.vector_norm(v.x_lo),
    "add_mixed": lambda L, v: v.x_lo + v.x,
    "max_pool2d": lambda L, v: _F(L).max_pool2d(v.img_lo, 2),
    "avg_pool2d": lambda L, v: _F(L).avg_pool2d(v.img_lo, 2),
    "adaptive_avg_pool2d": lambda L, v: _F(L).adaptive_avg_pool2d(v.img_lo, 2),
    "constant_pad": lambda L, v: _F(L).pad(v.img_lo, (1, 1)),
    "embedding": lambda L, v: _F(L).embedding(v.idx[:2], v.x),
    "dot": lambda L, v: L.dot(v.x[0], v.w[0]),
    "mv": lambda L, v: L.mv(v.x, v.w[0]),
    "outer": lambda L, v: L.outer(v.x[0], v.w[0]),
    "bilinear": lambda L, v: _F(L).bilinear(v.x, v.x, v.bw, v.b[:3]),
    "einsum_one_operand": lambda L, v: L.einsum("ij->j", v.x),
    "kron": lambda L, v: L.kron(v.x[:2, :2], v.w[:2, :2]),
    "vdot": lambda L, v: L.vdot(v.x[0], v.w[0]),
    "addmv": lambda L, v: L.addmv(v.b[:4], v.x, v.w[0]),
    "inner": lambda L, v: L.inner(v.x, v.w),
    "chain_matmul": lambda L, v: L.chain_matmul(v.x, v.w.T, v.m2.T),
    "multi_dot": lambda L, v: L.linalg.multi_dot([v.x, v.w.T, v.m2.T]),
    "matrix_power": lambda L, v: L.linalg.matrix_power(v.spd, 2),
    "cov": lambda L, v: L.cov(v.x),
    "corrcoef": lambda L, v: L.corrcoef(v.x),
    "matrix_norm": lambda L, v: L.linalg.matrix_norm(v.x_lo),
    "multihead_attention": lambda L, v: _mha(L, v),
    "cosine_similarity": lambda L, v: _F(L).cosine_similarity(v.x_lo, v.w[:4]),
    "gaussian_nll_loss": lambda L, v: _F(L).gaussian_nll_loss(v.x_lo, v.w[:4], v.pos),
    "det": lambda L, v: L.linalg.det(v.spd),
}


# PyTorch computes these in float32 but rounds intermediate results to the operands' 16-bit
# dtype (a norm of a bfloat16 operand; bilinear's products, which PyTorch routes through bmm
# on autocast's list); ember keeps the intermediates in float32, so the values agree to the
# 16-bit dtype's rounding and the dtypes exactly
_ROUNDED_INSIDE = {"cosine_similarity", "bilinear"}


def _run(lib, name, dtype):
    low = getattr(lib, dtype)
    inputs = _Inputs(lib, low)
    with lib.autocast("cpu", dtype=low):
        out = CASES[name](lib, inputs)
    return out


_EPS = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24, "float64": 2.0**-53}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_dtype_and_values_equal_pytorch_under_autocast(name, dtype):
    theirs = _run(torch, name, dtype)
    ours = _run(ember, name, dtype)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], name
    got = ours.detach().float().numpy().astype(np.float64)
    want = theirs.detach().float().numpy().astype(np.float64)
    assert got.shape == want.shape
    # both libraries round the same operands once into the result dtype; a sum may round its
    # partial results in another order, an error bounded by eps times the largest magnitude
    # (float32 results computed from 16-bit operands round at the operands' precision)
    eps = _EPS.get(str(theirs.dtype).split(".")[-1], 0.0)
    if name in _ROUNDED_INSIDE:
        eps = _EPS[dtype]
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=4 * eps, atol=8 * eps * scale)
