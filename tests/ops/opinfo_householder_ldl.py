"""OpInfos of the Householder and LDL functions (ops/householder.py, ops/ldl.py):
torch.geqrf, torch.linalg.householder_product / torch.orgqr (values and gradients in A and
tau), torch.linalg.ldl_factor, ldl_factor_ex and ldl_solve (LAPACK's packed factors and 1-based
int32 pivots, no gradients as PyTorch's), on tall, square, batched and empty inputs; see
opinfo.py."""

import numpy as np

from .opinfo import OpInfo, Sample, rng

R = rng(7107)

TALL = R.standard_normal((5, 3))
SQ = R.standard_normal((2, 4, 4))
WIDE = R.standard_normal((3, 5))
TAU3 = R.uniform(0.2, 1.5, (3,))
TAU2 = R.uniform(0.2, 1.5, (2, 2))
_S = R.standard_normal((2, 5, 5))
SYM = _S + _S.swapaxes(-1, -2)
SYM1 = SYM[0]


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def _linalg(name):
    def call(lib, *args, **kwargs):
        return getattr(lib.mod.linalg, name)(*args, **kwargs)

    return call


def _factored(a):
    import torch

    LD, piv = torch.linalg.ldl_factor(torch.tensor(a))
    return LD.numpy(), piv.numpy()


_LD, _PIV = _factored(SYM)
_LD1, _PIV1 = _factored(SYM1)


def _householder_samples():
    return [
        S(TALL, TAU3, desc="tall"),
        S(SQ, TAU2, desc="batch, fewer reflectors"),
        S(TALL, TAU3, desc="strided", strided=True),
        S(np.zeros((4, 0)), np.zeros(0), desc="no columns"),
        S(WIDE, TAU3, desc="wide refused"),
        S(TALL, R.uniform(size=(4,)), desc="too many taus refused"),
        S(SQ, TAU3, desc="tau batch refused"),
    ]


def _geqrf_samples():
    return [
        S(TALL, desc="tall", grad=False),
        S(SQ, desc="batch", grad=False),
        S(WIDE, desc="wide", grad=False),
        S(np.zeros((0, 3, 3)), desc="empty batch", grad=False),
        S(np.ones(3), desc="1-D refused", grad=False),
    ]


def _factor_samples():
    return [
        S(SYM, desc="batch", grad=False),
        S(SYM1, desc="one matrix", grad=False),
        S(SYM1, kwargs={"hermitian": True}, desc="hermitian", grad=False),
        S(np.zeros((0, 3, 3)), desc="empty batch", grad=False),
        S(WIDE, desc="not square refused", grad=False),
    ]


def _solve_samples():
    return [
        S(_LD, _PIV, R.standard_normal((2, 5, 2)), desc="batch", grad=False),
        S(_LD1, _PIV1, R.standard_normal((5, 3)), desc="one matrix", grad=False),
        S(
            _LD1,
            _PIV1,
            R.standard_normal((5, 3)),
            kwargs={"hermitian": True},
            grad=False,
            desc="hermitian",
        ),
        S(_LD, _PIV, R.standard_normal((2, 4, 2)), desc="B rows refused", grad=False),
    ]


OPS = [
    OpInfo(
        "linalg.householder_product",
        _householder_samples,
        call=_linalg("householder_product"),
        spellings=("T",),
    ),
    OpInfo("orgqr", _householder_samples),
    OpInfo("geqrf", _geqrf_samples),
    OpInfo("linalg.ldl_factor", _factor_samples, call=_linalg("ldl_factor"), spellings=("T",)),
    OpInfo(
        "linalg.ldl_factor_ex",
        lambda: [*_factor_samples(), S(np.zeros((3, 3)), desc="singular: info 1", grad=False)],
        call=_linalg("ldl_factor_ex"),
        spellings=("T",),
    ),
    OpInfo("linalg.ldl_solve", _solve_samples, call=_linalg("ldl_solve"), spellings=("T",)),
]
