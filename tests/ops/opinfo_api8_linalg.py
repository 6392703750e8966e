"""OpInfos of PyTorch's older linear-algebra functions (ops/legacy_linalg.py): torch.lu,
lu_solve, triangular_solve, ormqr, nuclear_norm, frobenius_norm, and the randomized
svd_lowrank, pca_lowrank and lobpcg through calls whose results do not depend on the random
start (singular values and reconstructions of low-rank matrices, eigenpairs with a fixed
sign); see opinfo.py."""

import numpy as np

from .opinfo import OpInfo, Sample, rng

R = rng(8080)

SQ = R.standard_normal((2, 3, 3))
ONE = R.standard_normal((4, 4))
SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
RHS = R.standard_normal((2, 3, 2))
FLOAT = ("float32", "float64")


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def _lu_samples():
    return [
        S(SQ, desc="batch"),
        S(ONE, desc="one matrix"),
        S(R.standard_normal((2, 3, 5)), desc="wide"),
        S(R.standard_normal((5, 3)), desc="tall"),
        S(SQ, desc="strided", strided=True),
        S(SQ, kwargs={"get_infos": True}, desc="infos"),
        S(SINGULAR, kwargs={"get_infos": True}, desc="singular: info 3", grad=False),
        S(SINGULAR, desc="singular raises"),
        S(np.zeros((0, 3, 3)), desc="empty batch"),
        S(np.ones(3), desc="1-D refused"),
    ]


def _factor(a):
    import torch

    LU, piv = torch.linalg.lu_factor(torch.tensor(a))
    return LU.numpy(), piv.numpy()


_LU, _PIV = _factor(SQ)


def _lu_solve_samples():
    return [
        S(RHS, _LU, _PIV, desc="batch"),
        S(RHS[0], _LU, _PIV, desc="b broadcast"),
        S(RHS, _LU, _PIV, desc="strided", strided=True),
        S(R.standard_normal((2, 4, 2)), _LU, _PIV, desc="rows refused"),
    ]


TRI = np.triu(R.standard_normal((2, 4, 4))) + 3 * np.eye(4)
B4 = R.standard_normal((2, 4, 3))


def _triangular_samples():
    out = []
    for upper in (True, False):
        for transpose in (False, True):
            for unit in (False, True):
                A = TRI if upper else TRI.swapaxes(-1, -2).copy()
                out.append(
                    S(B4, A, upper, transpose, unit, desc=f"u{upper} t{transpose} unit{unit}")
                )
    return out + [
        S(B4, TRI, kwargs={"upper": False}, desc="reads the other triangle"),
        S(B4, TRI[0], desc="A broadcast"),
        S(B4[0], TRI, desc="b broadcast"),
        S(B4, TRI, desc="strided", strided=True),
        S(R.standard_normal((2, 5, 3)), TRI, desc="rows refused"),
        S(B4, B4, desc="A not square"),
        S(B4.astype(np.float32), TRI, desc="dtypes differ", grad=False),
        S(np.zeros((0, 4, 2)), TRI[0], desc="empty batch"),
    ]


def _geqrf(a):
    import torch

    A, tau = torch.geqrf(torch.tensor(a))
    return A.numpy(), tau.numpy()


_QA, _QT = _geqrf(R.standard_normal((2, 5, 3)))
_WA, _WT = _geqrf(R.standard_normal((3, 5)))


def _ormqr_samples():
    C = R.standard_normal((2, 5, 4))
    out = []
    for left in (True, False):
        for transpose in (False, True):
            other = C if left else C.swapaxes(-1, -2).copy()
            out.append(S(_QA, _QT, other, left, transpose, desc=f"left{left} t{transpose}"))
    return out + [
        S(_WA, _WT, R.standard_normal((3, 2)), desc="wide reflectors"),
        S(_WA, _WT, R.standard_normal((2, 3)), kwargs={"left": False}, desc="wide right"),
        S(_QA, _QT[..., :2].copy(), C, desc="fewer reflectors refused"),
        S(_QA, _QT, C, desc="strided", strided=True),
        S(_QA, _QT, C[:, :4], desc="rows refused"),
        S(_QA, _QT, C[0], desc="other batch refused"),
    ]


def _nuclear_samples():
    X = R.standard_normal((2, 3, 4))
    return [
        S(X[0], desc="matrix"),
        S(X, desc="batch: the last two dims"),
        S(X, True, desc="keepdim positional"),
        S(X, (0, 2), desc="dims"),
        S(X, (0, 2), True, desc="dims keepdim"),
        S(X, kwargs={"dim": (-1, -2)}, desc="dims reversed"),
        S(X, desc="strided", strided=True),
        S(X[0].astype(np.int64), desc="integers refused"),
    ]


def _frobenius_samples():
    X = R.standard_normal((2, 3, 4))
    return [
        S(X, (1, 2), desc="two dims"),
        S(X, 0, desc="one dim"),
        S(X, (1,), True, desc="keepdim"),
        S(X, (), desc="every dim"),
        S(X, (0, 1, 2), desc="three dims refused"),
        S(X, (-1, 0), desc="strided", strided=True),
        S(X.astype(np.int64), (0,), desc="integers refused"),
    ]


def _low_rank(shape, rank):
    m, n = shape[-2:]
    return R.standard_normal(shape[:-2] + (m, rank)) @ R.standard_normal(shape[:-2] + (rank, n))


def _svd_lowrank_call(lib, A, *args, **kwargs):
    # U diag(S) V^H and S: independent of the random sketch when rank(A) <= q
    U, S_, V = lib.mod.svd_lowrank(A, *args, **kwargs)
    return S_, (U * S_.unsqueeze(-2)) @ V.mT


def _svd_lowrank_samples():
    return [
        # (the gradient of a rank-q approximation depends on the sketch unless q = min(m, n))
        S(_low_rank((8, 6), 2), 3, desc="tall rank 2", grad=False),
        S(_low_rank((5, 9), 3), 4, desc="wide rank 3", grad=False),
        S(_low_rank((2, 7, 6), 2), 3, 1, desc="batch, niter 1", grad=False),
        S(_low_rank((7, 6), 2) + 0.5, 3, kwargs={"M": np.full((7, 6), 0.5)}, desc="M", grad=False),
        S(R.standard_normal((6, 6)), 6, desc="full rank, q = n"),
        S(R.standard_normal((4, 7)), 4, desc="wide full rank, q = m"),
    ]


def _pca_call(lib, A, *args, **kwargs):
    U, S_, V = lib.mod.pca_lowrank(A, *args, **kwargs)
    return S_, (U * S_.unsqueeze(-2)) @ V.mT


def _pca_samples():
    return [
        S(_low_rank((9, 6), 2) + 1.0, 3, desc="centered rank 2", grad=False),
        S(_low_rank((9, 6), 3), 3, kwargs={"center": False}, desc="not centered", grad=False),
        S(_low_rank((2, 9, 6), 2), 3, desc="batch", grad=False),
        S(R.standard_normal((7, 4)), 4, desc="full rank, q = n"),
        S(_low_rank((9, 4), 2), 5, desc="q too large"),
    ]


def _symmetric(m, seed):
    r = rng(seed)
    Q, _ = np.linalg.qr(r.standard_normal((m, m)))
    return (Q * np.linspace(1.0, 10.0, m)) @ Q.T


def _lobpcg_call(lib, A, **kwargs):
    values, vectors = lib.mod.lobpcg(A, **kwargs)
    signs = lib.mod.sign(vectors[:1])  # (each vector's sign fixed by its first entry)
    return values, vectors * signs


def _lobpcg_samples():
    return [
        S(_symmetric(12, 1), kwargs={"k": 2}, desc="largest 2"),
        S(_symmetric(12, 2), kwargs={"k": 1}, desc="largest 1"),
        S(_symmetric(15, 3), kwargs={"k": 2, "largest": False}, desc="smallest 2"),
        S(_symmetric(12, 4), kwargs={"k": 2, "n": 3}, desc="n 3"),
        S(_symmetric(12, 5), kwargs={"k": 2, "method": "basic"}, desc="basic"),
        S(
            _symmetric(12, 6),
            kwargs={"k": 2, "X": rng(9).standard_normal((12, 2))},
            nondiff=("X",),
            desc="start block",
        ),
        S(_symmetric(5, 7), kwargs={"k": 2}, desc="too small refused"),
    ]


OPS = [
    OpInfo("lu", _lu_samples, dtypes=FLOAT),
    OpInfo("lu_solve", _lu_solve_samples, dtypes=FLOAT),
    OpInfo("triangular_solve", _triangular_samples, dtypes=FLOAT),
    OpInfo("ormqr", _ormqr_samples, dtypes=FLOAT),
    OpInfo("nuclear_norm", _nuclear_samples, rtol=1e-9),
    OpInfo("frobenius_norm", _frobenius_samples),
    OpInfo(
        "svd_lowrank",
        _svd_lowrank_samples,
        call=_svd_lowrank_call,
        spellings=("T",),
        dtypes=FLOAT,
        rtol=1e-8,
        atol=1e-9,
    ),
    OpInfo(
        "pca_lowrank",
        _pca_samples,
        call=_pca_call,
        spellings=("T",),
        dtypes=FLOAT,
        rtol=1e-8,
        atol=1e-9,
    ),
    OpInfo(
        "lobpcg",
        _lobpcg_samples,
        call=_lobpcg_call,
        spellings=("T",),
        dtypes=("float64",),
        rtol=1e-6,
        atol=1e-6,
        grad_rtol=1e-5,
    ),
]
