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
    OpInfo(
        "adjoint",
        lambda: [
            S(R.standard_normal((3, 4)), desc="matrix"),
            S(R.standard_normal((2, 3, 4)), desc="batch"),
        ],
        dtypes=FLOATS,
    ),
]


# ---------------------------------------------------------------- complex tensors (real in
# and out: complex results are compared through view_as_real, gradients through real inputs)
_REALS = ("float32", "float64")


def _pairs():
    return [
        S(R.standard_normal((3, 4)), R.standard_normal((3, 4)), desc="(3, 4)"),
        S(R.standard_normal((2, 3)), R.standard_normal(3), desc="broadcast"),
        S(R.standard_normal((0, 2)), R.standard_normal((0, 2)), desc="empty"),
    ]


def _last_two():
    return [
        S(R.standard_normal((3, 2)), desc="(3, 2)"),
        S(R.standard_normal((2, 4, 2)), desc="(2, 4, 2)"),
    ]


def _signals():
    return [
        S(R.standard_normal((2, 20)), np.abs(R.standard_normal(8)) + 0.5, desc="batch, window"),
        S(R.standard_normal(17), np.abs(R.standard_normal(8)) + 0.5, desc="1-d, window"),
    ]


def _complex_of(lib, a, b):
    return lib.mod.complex(a, b)


def _parts_of(lib, z):
    """view_as_real, conj, real, imag and a complex FFT, their gradients through real inputs."""
    m = lib.mod
    return m.cat(
        [
            m.view_as_real(m.conj(z) ** 2).flatten(),
            (m.real(z) * m.imag(z)).flatten(),
            m.view_as_real(m.fft.fft(z, dim=-1)).flatten(),
        ]
    )


OPS += [
    OpInfo(
        "complex",
        _pairs,
        call=lambda lib, a, b: lib.mod.cat(
            [
                lib.mod.view_as_real(_complex_of(lib, a, b) * 2.0).flatten(),
                lib.mod.angle(_complex_of(lib, a, b)).flatten(),  # (complex angle's primitive)
            ]
        ),
        spellings=("T",),
        dtypes=_REALS,
    ),
    OpInfo(
        "polar",
        _pairs,
        call=lambda lib, a, b: lib.mod.view_as_real(lib.mod.polar(a.abs() + 0.5, b)),
        spellings=("T",),
        dtypes=_REALS,
    ),
    OpInfo(
        "view_as_real",
        lambda: _pairs()[:2],  # (torch's MKL FFT fails on an empty batch)
        call=lambda lib, a, b: _parts_of(lib, _complex_of(lib, a, b)),
        spellings=("T",),
        dtypes=_REALS,
    ),
    OpInfo(
        "view_as_complex",
        _last_two,
        call=lambda lib, p: lib.mod.view_as_real(lib.mod.view_as_complex(p) ** 2),
        spellings=("T",),
        dtypes=_REALS,
    ),
    OpInfo(
        "cfloat",
        _pairs,
        call=lambda lib, a, b: lib.mod.view_as_real(a.cfloat() * b.cfloat()),
        spellings=("M",),
        dtypes=_REALS,
        grad_rtol=1e-6,  # (through complex64: float32's rounding)
        atol=1e-6,
        rtol=1e-6,
    ),
    OpInfo(
        "cdouble",
        _pairs,
        call=lambda lib, a, b: lib.mod.view_as_real(a.cdouble() * b.cdouble()),
        spellings=("M",),
        dtypes=_REALS,
    ),
    OpInfo(
        "stft",
        _signals,
        call=lambda lib, x, w: lib.mod.view_as_real(
            lib.mod.stft(x, 8, 3, window=w, return_complex=True)
        ),
        spellings=("T", "M"),
        dtypes=_REALS,
    ),
    OpInfo(
        "istft",
        _signals,
        call=lambda lib, x, w: lib.mod.istft(
            lib.mod.stft(x, 8, 3, window=w, return_complex=True) * 1.5, 8, 3, window=w
        ),
        spellings=("T", "M"),
        dtypes=_REALS,
    ),
]
