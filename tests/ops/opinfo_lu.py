"""OpInfos of the LU functions (ops/lu.py): torch.linalg.lu_factor, lu_factor_ex, lu,
lu_solve and torch.lu_unpack, values (1-based int32 pivots, LAPACK's info) and gradients, on
square, wide, tall, batched, empty and singular inputs; see opinfo.py."""

import numpy as np

from .opinfo import OpInfo, Sample, rng

R = rng(4242)

SQ = R.standard_normal((2, 3, 3))
ONE = R.standard_normal((4, 4))
WIDE = R.standard_normal((2, 3, 5))
TALL = R.standard_normal((5, 3))
SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
RHS = R.standard_normal((2, 3, 2))


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def _linalg(name):
    def call(lib, *args, **kwargs):
        return getattr(lib.mod.linalg, name)(*args, **kwargs)

    return call


def _factor_samples():
    return [
        S(SQ, desc="batch"),
        S(ONE, desc="one matrix"),
        S(WIDE, desc="wide"),
        S(TALL, desc="tall"),
        S(SQ, desc="strided", strided=True),
        S(np.zeros((0, 3, 3)), desc="empty batch"),
        S(np.ones(3), desc="1-D refused"),
    ]


def _factored(lib, a):
    """(LU, pivots) of a, made by the library itself (not differentiated)."""
    import torch

    LU, piv = torch.linalg.lu_factor(torch.tensor(a))
    return LU.numpy(), piv.numpy()


_LU, _PIV = _factored(None, SQ)
_LU1, _PIV1 = _factored(None, ONE)
_LUW, _PIVW = _factored(None, WIDE)
_LUT, _PIVT = _factored(None, TALL)


def _solve_samples():
    return [
        S(_LU, _PIV, RHS, desc="batch"),
        S(_LU1, _PIV1, R.standard_normal((4, 3)), desc="one matrix"),
        S(_LU, _PIV, RHS, kwargs={"adjoint": True}, desc="adjoint"),
        S(_LU, _PIV, RHS.swapaxes(-1, -2).copy(), kwargs={"left": False}, desc="right"),
        S(
            _LU,
            _PIV,
            RHS.swapaxes(-1, -2).copy(),
            kwargs={"left": False, "adjoint": True},
            desc="right adjoint",
        ),
        S(_LU, _PIV, RHS[0], desc="B broadcast"),
        S(_LU, _PIV, R.standard_normal((2, 4, 2)), desc="B rows refused"),
    ]


def _unpack_samples():
    return [
        S(_LU, _PIV, desc="batch"),
        S(_LUW, _PIVW, desc="wide"),
        S(_LUT, _PIVT, desc="tall"),
        S(_LU, _PIV, kwargs={"unpack_pivots": False}, desc="no pivots"),
        # (grad=False: PyTorch 2.13's own backward of the empty L and U fails, in triu)
        S(_LU, _PIV, kwargs={"unpack_data": False}, desc="no data", grad=False),
    ]


OPS = [
    OpInfo("linalg.lu_factor", _factor_samples, call=_linalg("lu_factor"), spellings=("T",)),
    OpInfo(
        "linalg.lu_factor_ex",
        lambda: [*_factor_samples(), S(SINGULAR, desc="singular: info 3")],
        call=_linalg("lu_factor_ex"),
        spellings=("T",),
    ),
    OpInfo(
        "linalg.lu",
        lambda: [*_factor_samples(), S(SINGULAR, desc="singular", grad=False)],
        call=_linalg("lu"),
        spellings=("T",),
    ),
    OpInfo("linalg.lu_solve", _solve_samples, call=_linalg("lu_solve"), spellings=("T",)),
    OpInfo("lu_unpack", _unpack_samples, spellings=("T",)),
]
