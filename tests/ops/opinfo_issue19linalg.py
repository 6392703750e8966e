"""OpInfos of ember.linalg's systems, determinants and factorizations (inv, det, slogdet,
solve, solve_triangular, cholesky, qr, eigh, eigvalsh, svd, pinv), its composites (lstsq,
matrix_power, matrix_rank, multi_dot, cross, vecdot, diagonal, matmul, cond) and the old
top-level names (ember.inverse, det, slogdet, logdet, cholesky, qr, svd, pinverse,
matrix_power); see opinfo.py.

Singular vectors are defined up to sign (and, past the first k columns of a full U or Vh, up to
a rotation), so the svd entries compare sign-normalized factors (each column of U and row of
Vh flipped so that U's largest entry in the column is positive), computed in each library's own
ops: values and gradients of those are well defined."""

import math

import numpy as np

from .opinfo import FLOATS, OpInfo, Sample, rng

R = rng(1919)


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def _linalg(name):
    def call(lib, *args, **kwargs):
        return getattr(lib.mod.linalg, name)(*args, **kwargs)

    return call


def _spd(*shape):
    """Symmetric positive-definite matrices (well conditioned)."""
    x = R.standard_normal(shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


SQ = R.standard_normal((2, 3, 3)) + 2 * np.eye(3)  # invertible, batched
ONE = R.standard_normal((4, 4)) + 3 * np.eye(4)
RHS = R.standard_normal((2, 3, 2))
SPD = _spd(2, 3, 3)
SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])  # rank 2
ZERO_BATCH = np.zeros((0, 3, 3))
TALL = R.standard_normal((2, 5, 3))
WIDE = R.standard_normal((3, 5))
NEG = np.diag([-1.0, 2.0, 3.0])
UPPER = np.triu(SQ) + np.eye(3)
NOT_PD = SPD.copy()
NOT_PD[1, 2, 2] = -40.0

OPS = []

# ------------------------------------------------------------------------ inv, det, slogdet


def _inv_samples():
    return [
        S(SQ, desc="batch"),
        S(ONE, desc="one matrix"),
        S(SQ, desc="strided", strided=True),
        S(ZERO_BATCH, desc="empty batch"),
        S(np.zeros((2, 0, 0)), desc="0 x 0"),
        S(np.stack([SQ[0], SINGULAR]), desc="singular refused"),
        S(TALL, desc="not square refused"),
        S(np.ones(3), desc="1-D refused"),
    ]


def _det_samples():
    return [
        S(SQ, desc="batch"),
        S(ONE, desc="one matrix"),
        S(NEG, desc="negative"),
        S(SINGULAR, desc="singular: the cofactor gradient"),
        S(np.zeros((2, 0, 0)), desc="0 x 0"),
        S(SQ, desc="strided", strided=True),
        S(TALL, desc="not square refused"),
    ]


def _slogdet_samples():
    return [
        S(SQ, desc="batch"),
        S(NEG, desc="negative"),
        S(SINGULAR, desc="singular", grad=False),
        S(ONE, desc="strided", strided=True),
        S(TALL, desc="not square refused"),
    ]


# PyTorch 2.13's gradient of det at an exactly singular matrix is 0; ember's is the cofactor
# matrix, the derivative of the polynomial det everywhere (test_issue19_linalg.py checks it
# against finite differences)
_DET_DIFFERENCES = {"singular: the cofactor gradient": "PyTorch's gradient there is 0"}
# At an exactly singular matrix PyTorch's slogdet is whatever its LU's rounding leaves: sign 0
# and -inf on one CPU, sign -1 and log|det| -34.9 (logdet NaN) from MKL on an Intel Xeon. ember's
# is the exact answer; test_issue19_linalg.py checks it against that instead.
_SLOGDET_DIFFERENCES = {"singular": "PyTorch's value depends on its LAPACK's rounding"}

OPS += [
    OpInfo("inv", _inv_samples, call=_linalg("inv"), spellings=("T",)),
    OpInfo("inverse", _inv_samples),
    OpInfo(
        "linalg.det",
        _det_samples,
        call=_linalg("det"),
        spellings=("T",),
        differences=_DET_DIFFERENCES,
    ),
    OpInfo("det", _det_samples, differences=_DET_DIFFERENCES),
    OpInfo(
        "linalg.slogdet",
        _slogdet_samples,
        call=_linalg("slogdet"),
        spellings=("T",),
        differences=_SLOGDET_DIFFERENCES,
    ),
    OpInfo("slogdet", _slogdet_samples, differences=_SLOGDET_DIFFERENCES),
    OpInfo(
        "logdet",
        lambda: [*_slogdet_samples(), S(np.eye(3) * 2, desc="2I")],
        differences=_SLOGDET_DIFFERENCES,
    ),
]

# ----------------------------------------------------------------- solve, solve_triangular


def _solve_samples():
    return [
        S(SQ, RHS, desc="batch"),
        S(SQ, RHS[0], desc="B broadcast"),
        S(ONE, R.standard_normal(4), desc="vector B"),
        S(SQ, R.standard_normal((2, 3)), desc="batch of vectors"),
        S(ONE, R.standard_normal((2, 4, 3)), desc="A broadcast"),
        S(SQ, np.swapaxes(RHS, -1, -2), kwargs={"left": False}, desc="left=False"),
        S(SQ, RHS, desc="strided", strided=True),
        S(np.stack([SQ[0], SINGULAR]), RHS, desc="singular refused"),
        S(SQ, R.standard_normal((2, 4, 2)), desc="rows differ refused"),
    ]


def _solve_triangular_samples():
    return [
        S(UPPER, RHS, kwargs={"upper": True}, desc="upper"),
        S(SQ, RHS, kwargs={"upper": False}, desc="lower, reading the lower triangle"),
        S(SQ, RHS, kwargs={"upper": True, "unitriangular": True}, desc="unitriangular"),
        S(
            UPPER,
            np.swapaxes(RHS, -1, -2),
            kwargs={"upper": True, "left": False},
            desc="left=False",
        ),
        S(SQ, RHS[0], kwargs={"upper": False}, desc="B broadcast"),
        S(SQ, RHS, kwargs={"upper": True}, desc="strided", strided=True),
        S(np.zeros((3, 3)), np.ones((3, 1)), kwargs={"upper": True}, desc="zero diagonal: inf"),
    ]


OPS += [
    OpInfo("solve", _solve_samples, call=_linalg("solve"), spellings=("T",)),
    OpInfo(
        "solve_triangular",
        _solve_triangular_samples,
        call=_linalg("solve_triangular"),
        spellings=("T",),
        # the inf / NaN of the zero diagonal: values compared, gradients not
        dtypes=FLOATS,
    ),
]

# ---------------------------------------------------------------------------------- cholesky


def _cholesky_samples():
    return [
        S(SPD, desc="batch"),
        S(SPD, kwargs={"upper": True}, desc="upper"),
        S(np.tril(SPD) + np.triu(R.standard_normal((3, 3)), 1), desc="reads the lower triangle"),
        S(SPD, desc="strided", strided=True),
        S(ZERO_BATCH, desc="empty batch"),
        S(NOT_PD, desc="not positive-definite refused"),
    ]


OPS += [
    OpInfo("linalg.cholesky", _cholesky_samples, call=_linalg("cholesky"), spellings=("T",)),
    OpInfo(
        "cholesky",
        lambda: [S(SPD, desc="lower"), S(SPD, True, desc="upper"), S(NOT_PD, desc="refused")],
    ),
]

# ---------------------------------------------------------------------------------------- qr


def _qr_samples():
    return [
        S(TALL, desc="tall reduced"),
        S(WIDE, desc="wide"),
        S(SQ, "complete", desc="square complete"),
        S(WIDE, "complete", desc="wide complete"),
        S(TALL, "complete", desc="tall complete (no gradient)", grad=False),
        S(TALL, "r", desc="r only", grad=False),
        S(TALL, desc="strided", strided=True),
        S(np.zeros((0, 3)), desc="empty"),
        S(TALL, "economic", desc="bad mode refused"),
    ]


OPS += [
    OpInfo("linalg.qr", _qr_samples, call=_linalg("qr"), spellings=("T",)),
    OpInfo("qr", lambda: [S(TALL, desc="some"), S(SQ, False, desc="not some")]),
]

# ------------------------------------------------------------------------- eigh, eigvalsh

SYM = SPD - 4 * np.eye(3)  # indefinite, distinct eigenvalues
NONSYM = SYM + np.triu(R.standard_normal((3, 3)), 1)


def _eigh_samples():
    return [
        S(SYM, desc="batch"),
        S(NONSYM, desc="reads the lower triangle"),
        S(NONSYM, "U", desc="UPLO U"),
        S(SYM, desc="strided", strided=True),
        S(ZERO_BATCH, desc="empty batch"),
        S(SYM, "X", desc="bad UPLO refused"),
    ]


OPS += [
    OpInfo("eigh", _eigh_samples, call=_linalg("eigh"), spellings=("T",)),
    OpInfo(
        "eigvalsh",
        lambda: [*_eigh_samples(), S(np.eye(3), desc="repeated eigenvalues")],
        call=_linalg("eigvalsh"),
        spellings=("T",),
    ),
]

# -------------------------------------------------------------------------------- eig, eigvals


def _eig_invariants(lib, a):
    """Functions of eig's results that neither the eigenvalues' order nor the eigenvectors'
    phases change (PyTorch refuses a gradient through a phase-dependent loss)."""
    values, vectors = lib.mod.linalg.eig(a)
    moduli = vectors.abs() ** 2
    return (
        (values * values).real.sum(-1),
        (values * values.conj()).real.sum(-1),
        (moduli * moduli).sum((-2, -1)),
        lib.mod.linalg.eigvals(a).real.sum(-1),
    )


def _eig_samples():
    return [
        S(NONSYM, desc="real eigenvalues"),
        S(R.standard_normal((2, 4, 4)), desc="complex pairs, batch"),
        S(R.standard_normal((3, 3)), desc="strided", strided=True),
        S(ZERO_BATCH, desc="empty batch"),
    ]


OPS += [
    OpInfo(
        "linalg.eig",
        _eig_samples,
        call=_eig_invariants,
        spellings=("T",),
        dtypes=FLOATS,
        rtol=1e-8,
        atol=1e-10,
    )
]

# --------------------------------------------------------------------------------------- svd


def _normalized(lib, u, s, vh):
    """U and Vh with each singular pair's sign fixed (U's largest entry positive)."""
    k = s.shape[-1]
    u, vh = u[..., :k], vh[..., :k, :]
    pick = u.abs().argmax(-2, keepdim=True)
    sign = lib.mod.sign(u.gather(-2, pick))
    return u * sign, s, vh * sign.transpose(-2, -1)


def _svd_call(lib, *args, **kwargs):
    return _normalized(lib, *lib.mod.linalg.svd(*args, **kwargs))


def _old_svd_call(lib, *args, **kwargs):
    u, s, v = lib.mod.svd(*args, **kwargs)
    if not kwargs.get("compute_uv", True):
        return u, s, v
    return _normalized(lib, u, s, v.transpose(-2, -1))


def _svd_samples():
    return [
        S(TALL, desc="tall, full"),
        S(TALL, False, desc="tall reduced"),
        S(WIDE, desc="wide, full"),
        S(WIDE, kwargs={"full_matrices": False}, desc="wide reduced"),
        S(SQ, desc="square"),
        S(TALL, False, desc="strided", strided=True),
        S(np.zeros((2, 0)), desc="empty"),
        S(np.ones(3), desc="1-D refused"),
        S(SQ, kwargs={"driver": "gesvd"}, desc="a driver on the CPU refused"),
    ]


OPS += [
    OpInfo("linalg.svd", _svd_samples, call=_svd_call, spellings=("T",)),
    OpInfo(
        "svd",
        lambda: [
            S(TALL, desc="some"),
            S(WIDE, False, desc="not some"),
            S(TALL, kwargs={"compute_uv": False}, desc="no U, V", grad=False),
        ],
        call=_old_svd_call,
        spellings=("T",),
    ),
    OpInfo(
        "svd",
        lambda: [S(SQ, desc="method")],
        call=lambda lib, x: _normalized(lib, *_old_svd_parts(x)),
        spellings=("M",),
    ),
]


def _old_svd_parts(x):
    u, s, v = x.svd()
    return u, s, v.transpose(-2, -1)


# ---------------------------------------------------------------------------- pinv, lstsq

RANK2 = TALL[0] @ np.diag([1.0, 2.0, 0.0]) @ R.standard_normal((3, 3))


def _pinv_samples():
    return [
        S(TALL, desc="tall"),
        S(WIDE, desc="wide"),
        S(SQ, desc="square"),
        S(RANK2, desc="rank deficient", grad=False),
        S(RANK2, kwargs={"rtol": 1e-8}, desc="rtol"),
        S(TALL, kwargs={"atol": 1.0}, desc="atol cuts", grad=False),
        S(SYM, kwargs={"hermitian": True}, desc="hermitian"),
        S(TALL, desc="strided", strided=True),
        S(np.zeros((0, 3)), desc="empty"),
    ]


OPS += [
    OpInfo("pinv", _pinv_samples, call=_linalg("pinv"), spellings=("T",)),
    OpInfo("pinverse", lambda: [S(TALL, desc="tall"), S(WIDE, 1e-10, desc="rcond")]),
]


def _lstsq_call(lib, *args, **kwargs):
    """The solution, the rank and the shapes of the (empty) residuals and singular values:
    PyTorch's empty tensors require grad, ember's are constants."""
    out = lib.mod.linalg.lstsq(*args, **kwargs)
    return out.solution, out.rank, tuple(out.residuals.shape), tuple(out.singular_values.shape)


def _lstsq_samples():
    return [
        S(TALL, R.standard_normal((2, 5, 2)), desc="overdetermined"),
        S(TALL[0], R.standard_normal(5), desc="vector B"),
        S(WIDE, R.standard_normal((3, 2)), desc="underdetermined: minimum norm"),
        S(SQ, RHS, desc="square"),
        S(TALL, R.standard_normal((1, 5, 2)), desc="B broadcast"),
        S(TALL, R.standard_normal((5, 1)), desc="B of one dimension fewer is vectors"),
        S(TALL[0], R.standard_normal((2, 5, 1)), desc="B of more dimensions refused"),
        S(TALL, R.standard_normal((2, 4, 2)), desc="rows differ refused"),
    ]


OPS.append(OpInfo("lstsq", _lstsq_samples, call=_lstsq_call, spellings=("T",), dtypes=FLOATS))

# ------------------------------------------------------------- matrix_power, matrix_rank


def _matrix_power_samples():
    return [
        S(SQ, 3, desc="cube"),
        S(SQ, 1, desc="first"),
        S(SQ, 0, desc="identity"),
        S(SQ, -2, desc="inverse squared"),
        S(ONE, 5, desc="fifth"),
        S(SQ, 2, desc="strided", strided=True),
        S(TALL, 2, desc="not square refused"),
    ]


OPS += [
    OpInfo(
        "linalg.matrix_power",
        _matrix_power_samples,
        call=_linalg("matrix_power"),
        spellings=("T",),
    ),
    OpInfo("matrix_power", _matrix_power_samples),
]


def _matrix_rank_samples():
    return [
        S(RANK2, desc="rank 2"),
        S(TALL, desc="full"),
        S(np.zeros((2, 3, 3)), desc="zero"),
        S(RANK2, kwargs={"atol": 1.0}, desc="atol"),
        S(RANK2, kwargs={"rtol": 0.5}, desc="rtol"),
        S(np.diag([1.0, 1e-20, 2.0]), kwargs={"hermitian": True}, desc="hermitian"),
        S(np.zeros((2, 0)), desc="empty"),
    ]


OPS.append(
    OpInfo("matrix_rank", _matrix_rank_samples, call=_linalg("matrix_rank"), spellings=("T",))
)

# ------------------------------------------------------- multi_dot, cross, vecdot, diagonal


def _multi_dot_call(lib, *tensors):
    return lib.mod.linalg.multi_dot(list(tensors))


OPS += [
    OpInfo(
        "multi_dot",
        lambda: [
            S(WIDE, R.standard_normal((5, 2)), R.standard_normal((2, 4)), desc="three"),
            S(R.standard_normal(3), WIDE, desc="vector first"),
            S(WIDE, R.standard_normal(5), desc="vector last"),
            S(R.standard_normal(3), WIDE, R.standard_normal(5), desc="vectors both ends"),
            S(WIDE, desc="one refused"),
            S(TALL, TALL, desc="batched refused"),
        ],
        call=_multi_dot_call,
        spellings=("T",),
    ),
    OpInfo(
        "linalg.cross",
        lambda: [
            S(R.standard_normal((4, 3)), R.standard_normal((4, 3)), desc="rows"),
            S(R.standard_normal((3, 2)), R.standard_normal((3, 2)), kwargs={"dim": 0}, desc="dim"),
            S(R.standard_normal((2, 4, 3)), R.standard_normal((1, 4, 3)), desc="broadcast"),
            S(R.standard_normal((4, 3)), R.standard_normal((4, 3)), desc="strided", strided=True),
            S(R.standard_normal((4, 2)), R.standard_normal((4, 2)), desc="size 2 refused"),
        ],
        call=_linalg("cross"),
        spellings=("T",),
    ),
    OpInfo(
        "vecdot",
        lambda: [
            S(TALL, TALL, desc="last dim"),
            S(TALL, TALL[0], kwargs={"dim": -2}, desc="broadcast, dim -2"),
            S(WIDE, WIDE, kwargs={"dim": 0}, desc="dim 0"),
        ],
        call=_linalg("vecdot"),
        spellings=("T",),
    ),
    OpInfo(
        "linalg.diagonal",
        lambda: [
            S(TALL, desc="default"),
            S(TALL, kwargs={"offset": 1}, desc="offset"),
            S(TALL, kwargs={"dim1": 0, "dim2": 2}, desc="dims"),
        ],
        call=_linalg("diagonal"),
        spellings=("T",),
    ),
    OpInfo(
        "linalg.matmul",
        lambda: [S(TALL, SQ, desc="batch"), S(WIDE, R.standard_normal(5), desc="vector")],
        call=_linalg("matmul"),
        spellings=("T",),
    ),
]

# -------------------------------------------------------------------------------------- cond


OPS.append(
    OpInfo(
        "cond",
        lambda: [
            S(SQ, desc="2-norm"),
            S(TALL, desc="tall"),
            S(SQ, -2, desc="-2"),
            # (PyTorch's own backward fails for these norms: an in-place write to inv's
            # saved output; values only)
            S(SQ, "fro", desc="fro", grad=False),
            S(SQ, "nuc", desc="nuc", grad=False),
            S(SQ, 1, desc="1", grad=False),
            S(SQ, -math.inf, desc="-inf", grad=False),
            S(TALL, 1, desc="1 on a tall matrix refused"),
            S(SQ, 3, desc="p=3 refused"),
        ],
        call=_linalg("cond"),
        spellings=("T",),
        dtypes=FLOATS,
    )
)

# --------------------------------------------- vander, tensorinv, tensorsolve, cholesky_*

OPS += [
    OpInfo(
        "vander",
        lambda: [
            S(np.array([0.0, 1.5, -2.0]), desc="with a zero"),
            S(R.standard_normal((2, 4)), kwargs={"N": 2}, desc="batch, N=2"),
            S(R.standard_normal(3), kwargs={"N": 1}, desc="N=1 refused"),
            S(R.standard_normal(3), kwargs={"N": 5}, desc="N=5", strided=True),
            S(R.standard_normal(3), 4, desc="N positional refused"),
            S(np.array(2.0), desc="0-d refused"),
        ],
        call=_linalg("vander"),
        spellings=("T",),
    ),
    OpInfo(
        "tensorinv",
        lambda: [
            S(R.standard_normal((4, 6, 8, 3)) + 0, kwargs={"ind": 2}, desc="ind 2"),
            S(R.standard_normal((6, 2, 3)), kwargs={"ind": 1}, desc="ind 1"),
            S(R.standard_normal((4, 5, 3)), kwargs={"ind": 1}, desc="not square refused"),
        ],
        call=_linalg("tensorinv"),
        spellings=("T",),
        dtypes=FLOATS,
    ),
    OpInfo(
        "tensorsolve",
        lambda: [
            S(R.standard_normal((2, 3, 6)), R.standard_normal((2, 3)), desc="two dims"),
            S(
                R.standard_normal((6, 2, 3)),
                R.standard_normal((2, 3)),
                kwargs={"dims": (0,)},
                desc="dims",
            ),
            S(R.standard_normal((2, 3, 5)), R.standard_normal((2, 3)), desc="not square refused"),
        ],
        call=_linalg("tensorsolve"),
        spellings=("T",),
        dtypes=FLOATS,
    ),
]

CHOL = np.linalg.cholesky(SPD)


def _cholesky_solve_samples(grad=False):
    return [
        S(RHS, CHOL, desc="lower", grad=grad),
        S(RHS, np.swapaxes(CHOL, -1, -2), True, desc="upper", grad=grad),
        S(RHS[0], CHOL, desc="B broadcast", grad=grad),
        S(RHS, CHOL, desc="strided", strided=True, grad=grad),
        S(RHS, CHOL + 0.1, desc="nonzero other triangle", grad=grad),
    ]


def _cholesky_inverse_samples(grad):
    """(the gradient samples: PyTorch's gradient is that of the full factor, both triangles)"""
    return [
        S(CHOL, desc="lower", grad=grad),
        S(np.swapaxes(CHOL, -1, -2), True, desc="upper", grad=grad),
        S(CHOL[0], desc="one", grad=grad),
        S(CHOL + 0.1, desc="nonzero other triangle", grad=grad),
    ]


OPS += [
    OpInfo("cholesky_solve", _cholesky_solve_samples, dtypes=FLOATS),
    OpInfo(
        "cholesky_solve",
        lambda: _cholesky_solve_samples(grad=True),
        spellings=("T",),
        dtypes=FLOATS,
    ),
    OpInfo("cholesky_inverse", lambda: _cholesky_inverse_samples(False), dtypes=FLOATS),
    OpInfo(
        "cholesky_inverse",
        lambda: _cholesky_inverse_samples(True),
        spellings=("T",),
        dtypes=FLOATS,
    ),
]

# -------------------------------------------------------------------------------- matrix_exp


def _matrix_exp_samples():
    return [
        S(0.5 * SQ, desc="batch"),
        S(0.3 * ONE, desc="one"),
        S(np.zeros((2, 2)), desc="zero: identity"),
        S(3 * R.standard_normal((3, 3)), desc="large norm: squaring"),
        S(0.5 * SQ, desc="strided", strided=True),
        S(ZERO_BATCH, desc="empty batch"),
        S(TALL, desc="not square refused"),
    ]


# PyTorch computes the half-precision exponentials in half precision and returns inf where
# the result is a few units; ember computes them in float64 and rounds once
_HALF = {
    "float16": "PyTorch returns inf in float16 arithmetic; ember rounds a float64 result",
    "bfloat16": "PyTorch returns inf in bfloat16 arithmetic; ember rounds a float64 result",
}

OPS += [
    OpInfo(
        "linalg.matrix_exp",
        _matrix_exp_samples,
        call=_linalg("matrix_exp"),
        spellings=("T",),
        dtype_differences=_HALF,
    ),
    OpInfo("matrix_exp", _matrix_exp_samples, dtype_differences=_HALF),
]
