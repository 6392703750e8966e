"""OpInfos of issue 19's elementwise math (tan ... fmod, add/sub's alpha, nan_to_num, addcmul,
addcdiv, lerp, isclose, allclose) and rearranging and products (roll, meshgrid, diag,
diagonal, hstack, vstack, t, tensordot, baddbmm, cdist), see opinfo.py."""

import numpy as np

from .opinfo import OpInfo, Sample, away_from, cast_array, rng
from .opinfo_elementwise import SPECIAL, SPECIAL_POS, binary, unary

R = rng(190)


def n(*shape):
    return R.standard_normal(shape)


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


UNIT_SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1.5, -0.5, 1e-300])

OPS = [
    unary("tan", low=-1.2, high=1.2),
    unary("asin", low=-0.95, high=0.95, special=UNIT_SPECIAL),
    unary("acos", low=-0.95, high=0.95, special=UNIT_SPECIAL),
    unary("atan", low=-4.0, high=4.0),
    unary("arcsin", low=-0.95, high=0.95, special=UNIT_SPECIAL),
    unary("arccos", low=-0.95, high=0.95, special=UNIT_SPECIAL),
    unary("arctan", low=-4.0, high=4.0),
    unary("sinh"),
    unary("cosh"),
    unary("log2", low=0.1, high=3.0, special=SPECIAL_POS),
    unary("log10", low=0.1, high=3.0, special=SPECIAL_POS),
    unary("square", low=-3.0, high=3.0),
]

# torch.atan2 takes tensors only; ember's, like its other binary functions, takes a Python
# scalar as a weak operand
_SCALAR = "ember.atan2 accepts a Python scalar operand (weak); torch.atan2 requires tensors"
_SCALAR_SAMPLES = {"python float": _SCALAR, "python int": _SCALAR}
_FMOD_KINKS = np.arange(-8, 9) * 0.3


def _fmod_signs():
    x = away_from(R.uniform(-5, 5, (3, 4)), np.arange(-10, 11) * 0.7)
    y = np.where(R.random((3, 4)) < 0.5, -0.7, 0.7) * R.choice([1.0, 1.5], (3, 4))
    return [
        S(x, y, desc="signs of both"),
        S(np.array([-7.0, 7.0, -7.0, 7.0, 5.5]), np.array([2.0, -2.0, -2.0, 2.0, 0.0]), desc="C"),
        S(np.array([-7, 7, -7, 7]), np.array([2, -2, -2, 2]), desc="integers"),
        S(np.array([-7, 7]), np.array([0, 2]), desc="integer division by zero"),
    ]


OPS += [
    binary("atan2", differences=_SCALAR_SAMPLES),
    binary("arctan2", differences=_SCALAR_SAMPLES),
    OpInfo(
        "atan2",
        lambda: [S(np.array([0.0, -0.0, 0.0, 1.0, -1.0]), np.array([0.0, 0.0, -0.0, 0.0, 0.0]))],
        spellings=("T",),
        grad=False,
    ),
    binary("fmod", rhs=(0.3, 2.0), lhs_kinks=_FMOD_KINKS),
    OpInfo("fmod", _fmod_signs),
    binary("remainder", rhs=(0.3, 2.0), lhs_kinks=_FMOD_KINKS, spellings=("T",)),
    OpInfo("remainder", _fmod_signs, spellings=("T",)),
    binary(
        "floor_divide",
        spellings=("T",),
        grad=False,  # (PyTorch defines no gradient for floor_divide)
        rhs_kinks=(0.0,),
        lhs_kinks=np.arange(-8, 9) * 0.5,
    ),
]


# ----------------------------------------------------------------------- add and sub's alpha


def _alpha_samples():
    ints = np.array([[1, -2, 3], [4, 5, -6]])
    return [
        S(n(2, 3), n(2, 3), kwargs={"alpha": 2}, desc="alpha 2"),
        S(n(2, 3), n(3), kwargs={"alpha": 0.5}, desc="alpha 0.5, broadcast"),
        S(n(2, 3), 1.5, kwargs={"alpha": -3}, desc="python other"),
        S(n(2, 3), n(2, 3), kwargs={"alpha": 0}, desc="alpha 0"),
        S(n(3, 4), n(3, 4), kwargs={"alpha": 2.5}, desc="strided", strided=True),
        S(ints, ints, kwargs={"alpha": 2.5}, desc="float alpha, ints"),
        S(ints, ints, kwargs={"alpha": 3}, desc="int alpha, ints"),
        S(ints, 2.5, kwargs={"alpha": 2}, desc="ints with float other"),
        S(n(2, 3), n(2, 3), kwargs={"alpha": True}, desc="bool alpha"),
        S(ints > 0, ints < 3, kwargs={"alpha": 2}, desc="bools"),
        S(ints > 0, ints < 3, kwargs={"alpha": 0}, desc="bools, alpha 0"),
        S(n(0, 3), n(3), kwargs={"alpha": 2}, desc="zero-size"),
    ]


OPS += [OpInfo("add", _alpha_samples), OpInfo("sub", _alpha_samples)]


# ------------------------------------------------------------------------ pointwise composites


def _nan_to_num_samples():
    return [
        S(SPECIAL.copy(), desc="defaults"),
        S(SPECIAL.copy(), kwargs={"nan": 1.5, "posinf": 10.0, "neginf": -20.0}, desc="given"),
        S(SPECIAL.copy(), 2.0, desc="nan positional"),
        S(n(2, 3), desc="finite"),
        S(n(3, 4), desc="strided", strided=True),
        S(np.array(np.nan), desc="0-d"),
        S(n(0, 3), desc="zero-size"),
        S(np.array([1, -2, 3]), desc="integers"),
        S(np.array([True, False]), desc="bools"),
    ]


def _nan_to_num_dtypes(dtype):
    x = np.array([np.nan, np.inf, -np.inf, 1.0, -2.0])
    return [S(cast_array(x, dtype), desc=dtype)]


def _addc_samples(div: bool):
    d = (lambda *s: R.uniform(0.5, 2.0, s) * R.choice([-1.0, 1.0], s)) if div else n
    return [
        S(n(2, 3), n(2, 3), d(2, 3), desc="same shape"),
        S(n(2, 3), n(3), d(2, 1), kwargs={"value": 0.5}, desc="broadcast, value"),
        S(n(3), n(2, 3), d(2, 3), kwargs={"value": -2}, desc="input broadcast"),
        S(n(3, 4), n(3, 4), d(3, 4), desc="strided", strided=True),
        S(n(0, 3), n(3), d(3), desc="zero-size"),
        S(np.array(1.5), n(2, 2), d(2, 2), desc="0-d input"),
        S(
            n(2, 3).astype(np.float32),
            n(2, 3),
            np.array([[1, 2, 3], [-1, -2, -3]]),
            desc="mixed dtypes",
            grad=False,
        ),
        S(np.array([1, 2]), np.array([1, 2]), np.array([1, 2]), kwargs={"value": 2.5}, desc="ints"),
        S(
            np.array([1, 2]),
            np.array([1.5, 2]),
            np.array([3, 2]),
            desc="int input, float t1",
            grad=False,
        ),
        S(np.array([np.nan, np.inf, 1.0]), n(3), d(3), desc="NaN and inf"),
    ]


def _lerp_samples():
    return [
        S(n(2, 3), n(2, 3), 0.3, desc="scalar weight"),
        S(n(2, 3), n(2, 3), 0.7, desc="scalar weight past 0.5"),
        S(n(2, 3), n(2, 3), 1.0, desc="weight 1"),
        S(n(2, 3), n(2, 3), -0.8, desc="negative weight"),
        S(n(2, 3), n(2, 3), R.uniform(-1.5, 1.5, (2, 3)), desc="tensor weight"),
        S(n(2, 3), n(3), R.uniform(-1, 1.5, (3,)), desc="broadcast"),
        S(n(3), n(2, 3), 0.25, desc="input broadcast"),
        S(n(2, 3), n(2, 3), np.array(0.6), desc="0-d weight"),
        S(n(3, 4), n(3, 4), R.uniform(0, 1, (3, 4)), desc="strided", strided=True),
        S(n(0, 3), n(3), 0.5, desc="zero-size"),
        S(n(2, 3), n(2, 3).astype(np.float32), 0.5, desc="mixed dtypes"),
        S(n(2, 3), n(2, 3), R.uniform(0, 1, (2, 3)).astype(np.float32), desc="weight dtype"),
        S(n(2, 3), n(2, 3), np.array(0.5, np.float32), desc="0-d weight of another dtype"),
        S(np.array([np.nan, np.inf, 1.0]), np.array([1.0, 2.0, np.inf]), 0.5, desc="NaN, inf"),
    ]


def _isclose_samples():
    a = n(3, 4)
    b = a + R.choice([0.0, 1e-9, 1e-6, 1e-3], (3, 4)) * (1 + np.abs(a))
    specials = np.array([np.nan, np.inf, -np.inf, np.inf, 1.0, 0.0, 1e-9, np.nan])
    others = np.array([np.nan, np.inf, np.inf, 1e308, 1.0 + 1e-6, 1e-9, 0.0, 1.0])
    return [
        S(a, b, desc="defaults"),
        S(a, b, kwargs={"rtol": 1e-3, "atol": 0.0}, desc="rtol only"),
        S(a, b, 0.0, 1e-5, desc="atol only, positional"),
        S(a, b, kwargs={"rtol": 0.0, "atol": 0.0}, desc="exact"),
        S(specials, others, desc="special values"),
        S(specials, others, kwargs={"equal_nan": True}, desc="equal_nan"),
        S(a, b[0], desc="broadcast"),
        S(a, b, desc="strided", strided=True),
        S(np.array([1, 2, 3]), np.array([1, 2, 4]), desc="integers"),
        S(np.array([True, False]), np.array([True, True]), desc="bools"),
        S(a, b.astype(np.float32), desc="mixed dtypes"),
        S(a[:0], b[:0], desc="zero-size"),
    ]


OPS += [
    OpInfo("nan_to_num", _nan_to_num_samples, dtype_samples=_nan_to_num_dtypes),
    OpInfo("addcmul", lambda: _addc_samples(False)),
    OpInfo("addcdiv", lambda: _addc_samples(True)),
    OpInfo("lerp", _lerp_samples),
    OpInfo("isclose", _isclose_samples),
    OpInfo("allclose", _isclose_samples),
]


# ------------------------------------------------------------------------------- rearranging


def _roll_samples():
    x = n(3, 4)
    return [
        S(x, 1, desc="flattened"),
        S(x, -5, 1, desc="one dim, negative"),
        S(x, (1, -1), (0, 1), desc="two dims"),
        S(x, kwargs={"shifts": (2, 7), "dims": (1, -1)}, desc="one dim twice, past its size"),
        S(x, 0, 0, desc="no shift"),
        S(np.array(2.5), 3, desc="0-d"),
        S(n(0, 3), 1, 0, desc="zero-size"),
        S(x, 1, 1, desc="strided", strided=True),
        S(x, (1, 2), desc="shifts without dims"),
        S(x, (1, 2), 0, desc="shifts and dims differ"),
    ]


def _meshgrid_samples():
    a, b, c = n(3), n(4), n(2)
    return [
        S(a, b, kwargs={"indexing": "ij"}, desc="ij"),
        S(a, b, kwargs={"indexing": "xy"}, desc="xy"),
        S(a, b, c, kwargs={"indexing": "xy"}, desc="three, xy"),
        S([a, b], kwargs={"indexing": "ij"}, desc="a list"),
        S(np.array(1.5), b, kwargs={"indexing": "ij"}, desc="0-d"),
        S(a, n(0), kwargs={"indexing": "ij"}, desc="zero-size"),
        S(a, desc="one, default indexing"),
        S(n(2, 2), b, kwargs={"indexing": "ij"}, desc="2-d refused"),
        S(a, b.astype(np.float32), kwargs={"indexing": "ij"}, desc="mixed dtypes refused"),
    ]


def _diag_samples():
    v = np.array([1.5, -np.inf, np.nan, 2.0])
    return [
        S(n(4), desc="vector"),
        S(n(3), 1, desc="vector, above"),
        S(n(3), -2, desc="vector, below"),
        S(v, desc="inf and NaN stay on the diagonal"),
        S(n(3, 4), desc="matrix"),
        S(n(3, 4), 2, desc="matrix, above"),
        S(n(3, 4), -1, desc="matrix, below"),
        S(n(3, 4), 5, desc="matrix, past the edge"),
        S(n(4, 3), 1, desc="strided", strided=True),
        S(n(0), desc="empty vector"),
        S(n(2, 3, 4), desc="3-d refused"),
    ]


def _diagonal_samples():
    x = n(2, 3, 4)
    return [
        S(n(3, 4), desc="matrix"),
        S(n(3, 4), 1, desc="offset"),
        S(n(3, 4), -2, desc="negative offset"),
        S(x, 0, 0, 2, desc="dims 0, 2"),
        S(x, 1, 2, 0, desc="dims 2, 0"),
        S(x, kwargs={"offset": -1, "dim1": -1, "dim2": 1}, desc="negative dims"),
        S(x, 7, 1, 2, desc="empty"),
        S(x, 1, 1, 2, desc="strided", strided=True),
        S(x, 0, 1, 1, desc="one dim refused"),
    ]


def _stack_samples():
    return [
        S([n(3), n(2)], desc="vectors"),
        S([n(2, 3), n(2, 1)], desc="matrices"),
        S([np.array(1.0), n(2)], desc="0-d and a vector"),
        S([n(2, 3, 1), n(2, 3, 2)], desc="3-d"),
        S([n(3), n(3).astype(np.float32), np.array([1, 2, 3])], desc="promotion"),
        S([n(2, 3), n(2, 3)], desc="strided", strided=True),
        S([n(0, 3), n(2, 3)], desc="zero-size"),
    ]


def _vstack_samples():
    return [
        S([n(3), n(3)], desc="vectors"),
        S([n(2, 3), n(1, 3)], desc="matrices"),
        S([n(3), n(2, 3)], desc="a vector and a matrix"),
        S([np.array(1.0), np.array(2.0)], desc="0-d"),
        S([n(1, 2, 3), n(2, 2, 3)], desc="3-d"),
        S([n(3), np.array([1, 2, 3])], desc="promotion"),
        S([n(2, 3), n(2, 3)], desc="strided", strided=True),
        S([n(2), n(3)], desc="mismatch refused"),
    ]


def _t_samples():
    return [
        S(n(3, 4), desc="matrix"),
        S(n(3), desc="vector"),
        S(np.array(1.5), desc="0-d"),
        S(n(0, 2), desc="zero-size"),
        S(n(3, 4), desc="strided", strided=True),
        S(n(2, 3, 4), desc="3-d refused"),
    ]


OPS += [
    OpInfo("roll", _roll_samples),
    OpInfo("meshgrid", _meshgrid_samples),
    OpInfo("diag", _diag_samples),
    OpInfo("diagonal", _diagonal_samples),
    OpInfo("hstack", _stack_samples),
    OpInfo("vstack", _vstack_samples),
    OpInfo("t", _t_samples),
]


# ---------------------------------------------------------------------------------- products


def _tensordot_samples():
    a, b = n(2, 3, 4), n(3, 4, 5)
    return [
        S(a, b, desc="default dims 2"),
        S(a, n(4, 5), 1, desc="dims 1"),
        S(n(2, 3), n(4), 0, desc="outer"),
        S(a, n(4, 3, 2), ([1, 2], [1, 0]), desc="pairs"),
        S(a, n(5, 2), kwargs={"dims": ([0], [1])}, desc="first with last"),
        S(a, b, desc="strided", strided=True),
        S(n(0, 3), n(3, 2), 1, desc="zero-size"),
        S(a, n(4, 5).astype(np.float32), 1, desc="mixed dtypes refused"),
        S(a, n(5, 5), 1, desc="sizes differ"),
    ]


def _baddbmm_samples():
    b1, b2 = n(2, 3, 4), n(2, 4, 5)
    return [
        S(n(2, 3, 5), b1, b2, desc="full input"),
        S(n(5), b1, b2, desc="row input"),
        S(n(2, 3, 5), b1, b2, kwargs={"beta": 0.5, "alpha": 2.0}, desc="beta, alpha"),
        S(np.full((2, 3, 5), np.nan), b1, b2, kwargs={"beta": 0}, desc="beta 0 ignores NaN"),
        S(n(2, 3, 5), b1, b2, desc="strided", strided=True),
        S(n(0, 3, 5), n(0, 3, 4), n(0, 4, 5), desc="empty batch"),
        S(n(2, 3, 5), b1.astype(np.float32), b2, desc="mixed dtypes refused"),
        S(n(2, 3, 5), b1, n(3, 4, 5), desc="batches differ"),
    ]


def _cdist_samples():
    x1, x2 = n(5, 3), n(4, 3)
    x2[1] = x1[2]  # a zero distance: its gradient is 0
    # (no zero distance among products: |a|^2 + |b|^2 - 2 a.b leaves a rounding error there
    # that the square root makes ~1e-8, in PyTorch too, and the two round differently)
    big1, big2 = n(30, 3), n(6, 3)
    return [
        S(x1, x2, desc="p 2"),
        S(x1, x2, 1.0, desc="p 1"),
        S(x1, x2, 3.0, desc="p 3"),
        S(x1, x2, 0.5, desc="p 0.5"),
        S(x1, x2, 0.0, desc="p 0"),
        S(x1, x2, float("inf"), desc="p inf"),
        S(n(2, 5, 3), n(4, 3), desc="batched, broadcast"),
        S(n(2, 1, 5, 3), n(3, 4, 3), desc="batches broadcast"),
        S(big1, big2, desc="more than 25 rows: products"),
        S(x1, x2, kwargs={"compute_mode": "use_mm_for_euclid_dist"}, desc="products asked"),
        S(big1, big2, kwargs={"compute_mode": "donot_use_mm_for_euclid_dist"}, desc="direct"),
        S(x1, x2, desc="strided", strided=True),
        S(n(0, 3), x2, desc="zero-size"),
        S(x1, n(4, 2), desc="columns differ"),
        S(x1, x2, -1.0, desc="negative p"),
        S(n(3), x2, desc="1-d refused"),
    ]


OPS += [
    OpInfo("tensordot", _tensordot_samples),
    OpInfo("baddbmm", _baddbmm_samples, sweep=1),
    OpInfo("cdist", _cdist_samples, sweep=1),
]


def _addmm_inplace():
    return [
        S(n(3, 5), n(3, 4), n(4, 5), desc="full input"),
        S(n(3, 5), n(3, 4), n(4, 5), kwargs={"beta": 0.5, "alpha": 2.0}, desc="beta, alpha"),
        S(n(5), n(3, 4), n(4, 5), desc="row input refused in place"),
    ]


OPS.append(OpInfo("addmm", _addmm_inplace, spellings=("I",), dtypes=()))
