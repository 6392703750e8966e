"""OpInfos of PyTorch's complex-number API on real tensors (ops/real_complex.py), mvlgamma,
as_strided (ops/strided.py) and asarray; see opinfo.py."""

import numpy as np

from .opinfo import FLOATS, OpInfo, Sample, rng

R = rng(4242)


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def _values():
    return [
        S(R.standard_normal((3, 4)), desc="(3, 4)"),
        S(np.array([-2.0, -0.0, 0.0, 3.0, np.inf, -np.inf]), desc="signs, infinities"),
        S(np.array(-1.5), desc="0-d"),
        S(R.standard_normal((2, 3)), desc="strided", strided=True),
    ]


def _with_nan():
    return _values() + [S(np.array([1.0, np.nan, -2.0]), desc="NaN", grad=False)]


def _mvlgamma():
    return [
        S(R.uniform(1.5, 4.0, (3, 4)), 2, desc="p 2"),
        S(R.uniform(2.0, 5.0, (5,)), 3, desc="p 3"),
        S(R.uniform(0.5, 3.0, (2, 2)), 1, desc="p 1: lgamma"),
    ]


def _as_strided():
    x = R.standard_normal(12)
    return [
        S(x, (2, 2), (1, 2), 1, desc="overlapping windows"),
        S(x, (3, 2), (1, 1), desc="default offset"),
        S(x, (4,), (2,), 0, desc="every other"),
        S(R.standard_normal((3, 4)), (2, 3, 2), (4, 1, 2), 0, desc="from 2-d"),
    ]


def _asarray():
    return [
        S(R.standard_normal((2, 3)), desc="array"),
        S(R.standard_normal(4), desc="1-d"),  # (dtype= and copy=: tests/test_device_api.py)
    ]


OPS = [
    OpInfo(name, _values, dtypes=FLOATS)
    for name in ("conj", "conj_physical", "resolve_conj", "resolve_neg", "real")
]
OPS += [
    OpInfo("angle", _with_nan, dtypes=FLOATS),
    OpInfo("is_conj", _values, grad=False, dtypes=FLOATS),
    OpInfo("is_neg", _values, grad=False, dtypes=FLOATS),
    OpInfo("imag", lambda: [S(R.standard_normal(3), desc="real tensor refused")], grad=False),
    OpInfo("mvlgamma", _mvlgamma, dtypes=FLOATS),
    OpInfo("as_strided", _as_strided, dtypes=FLOATS),
    OpInfo("asarray", _asarray, dtypes=FLOATS),
]
