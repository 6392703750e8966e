"""OpInfos of issue 19's long tail (helper c): special functions (lgamma, digamma, polygamma,
erfinv, erfc, i0, ...), elementwise composites, scans and selections (cummax, median, mode,
logcumsumexp), NaN reductions, searchsorted / bucketize / histc, shape functions (rot90,
diag_embed, tensor_split, ...), products (kron, addbmm, addmv, cross, ...), constructors,
random fills, top-level in-place functions and ``ember.special``; see opinfo.py."""

import numpy as np

from .opinfo import FLOATS, OpInfo, Sample, rng
from .opinfo_elementwise import SPECIAL, SPECIAL_POS, binary, unary

R = rng(1919)


def n(*shape):
    return R.standard_normal(shape)


def u(low, high, *shape):
    return R.uniform(low, high, shape)


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def distinct(*shape):
    """Normal values without ties (selections' positions are unique)."""
    return R.permutation(np.arange(int(np.prod(shape))) * 0.37 - 2.0).reshape(shape)


UNIT = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.999])
HALF = ("float16", "bfloat16")
_HALF_SCIPY = "SciPy computes half precision in float32 and rounds once; PyTorch's float16 "

OPS = [
    # (lgamma/digamma near their poles: samples stay off the non-positive integers)
    unary("lgamma", low=0.1, high=5.0, special=SPECIAL_POS),
    unary("lgamma", low=-3.9, high=-0.1, kinks=np.arange(-4, 1), grad_special=False),
    unary("digamma", low=0.1, high=5.0, special=SPECIAL_POS, grad_special=False),
    unary("digamma", low=-3.9, high=-0.1, kinks=np.arange(-4, 1), grad_special=False),
    unary("erfinv", low=-0.95, high=0.95, special=UNIT, grad_special=False),
    unary("erfc", low=-3.0, high=3.0),
    unary("i0", low=-4.0, high=4.0, grad_special=False),
    unary("sinc", low=-3.0, high=3.0, grad_special=False),
    unary("deg2rad", low=-400, high=400),
    unary("rad2deg", low=-7, high=7),
    unary("absolute", kinks=(0.0,)),
    unary("frac", low=-5, high=5, kinks=np.arange(-5, 6)),
    unary("signbit", grad=False),
    unary("exp2", low=-5, high=5),
    # (the gradient at 0, 1 and outside [0, 1] differs: see ember.logit's docstring)
    unary(
        "logit",
        low=0.05,
        high=0.95,
        special=np.array([np.nan, 0.0, 1.0, 0.5, 2.0, -1.0]),
        grad_special=False,
    ),
]


def _polygamma_samples():
    x = u(0.2, 4.0, 2, 3)
    return [
        S(0, x, desc="n 0"),
        S(1, x, desc="n 1"),
        S(3, x, desc="n 3"),
        S(2, u(0.2, 4.0, 3, 4), desc="strided", strided=True),
        S(1, u(0.2, 4.0, 0, 3), desc="zero-size"),
    ]


def _polygamma_method(lib, n_, x):
    return x.polygamma(n_)


def _logit_eps():
    return [
        S(u(-0.2, 1.2, 2, 5), kwargs={"eps": 0.1}, desc="eps"),
        S(u(0.01, 0.99, 3, 4), 1e-6, desc="eps positional"),
    ]


OPS += [
    # (SciPy's and PyTorch's trigamma agree to ~5e-10 relative)
    OpInfo("polygamma", _polygamma_samples, spellings=("T",), rtol=1e-8),
    OpInfo("polygamma", _polygamma_samples, call=_polygamma_method, spellings=("M",), rtol=1e-8),
    OpInfo(
        "polygamma",
        lambda: [S(2, u(0.2, 4.0, 2, 3), desc="n 2")],
        call=lambda lib, n_, x: (x * 1).polygamma_(n_),
        spellings=("I",),
        dtypes=(),
    ),
    OpInfo("logit", _logit_eps),
]


def _positive_pairs():
    a, b = u(0.1, 3.0, 2, 3), u(0.1, 3.0, 2, 3)
    return [
        S(a, b, desc="same shape"),
        S(u(-2, 2, 3, 1), u(-2, 2, 1, 4), desc="broadcast"),
        S(u(-2, 2, 3, 4), u(-2, 2, 3, 4), desc="strided", strided=True),
        S(n(0, 3), n(3), desc="zero-size"),
        S(np.array([np.inf, -np.inf, 0.0, np.nan, 3.0]), np.array([1.0, 2.0, 0.0, 1.0, 4.0]),
          desc="special values", grad=False),
        S(np.array([1, 2, 3]), np.array([2, 2, 2]), desc="integers refused"),
    ]  # fmt: skip


def _xlogy_samples():
    x = u(-2, 2, 2, 3)
    x[0, 1] = 0.0
    return [
        S(x, u(0.1, 3, 2, 3), desc="same shape, a zero x"),
        S(u(-2, 2, 3, 1), u(0.1, 3, 1, 4), desc="broadcast"),
        S(np.array([0.0, 0.0, 1.0, 0.0, 2.0]), np.array([np.nan, 0.5, 0.0, np.inf, -1.0]),
          desc="special values", grad=False),
        S(u(-2, 2, 2, 3), 2.5, desc="python float other"),
        S(2.0, u(0.1, 3, 2, 3), desc="python float input", grad=False),
        S(u(-2, 2, 3, 4), u(0.1, 3, 3, 4), desc="strided", strided=True),
        S(np.array([0, 1, 2]), np.array([3, 1, 2]), desc="integers"),
        S(n(0, 3), u(0.1, 3, 3), desc="zero-size"),
    ]  # fmt: skip


def _heaviside_samples():
    x = np.array([[-1.5, 0.0, 2.0], [0.0, np.nan, -0.0]])
    return [
        S(x, np.array([0.5]), desc="broadcast values"),
        S(x, np.array([[7.0, 8.0, 9.0], [1.0, 2.0, 3.0]]), desc="same shape"),
        S(np.array([1, 0, -1]), np.array([5]), desc="integers"),
        S(x, np.array([0.5], np.float32), desc="dtypes differ refused"),
    ]


OPS += [
    binary("hypot", promotion=False, grad=True),
    OpInfo("hypot", _positive_pairs, dtypes=FLOATS),
    binary("logaddexp", promotion=False),
    binary("logaddexp2", promotion=False),
    OpInfo("xlogy", _xlogy_samples, spellings=("T", "M")),
    OpInfo("xlogy", lambda: _xlogy_samples()[:2], spellings=("I",), dtypes=()),
    OpInfo("heaviside", _heaviside_samples, grad=False),
    OpInfo(
        "clamp_min",
        lambda: [
            S(n(2, 3), 0.2, desc="float"),
            S(np.array([1, -2, 3]), 0, desc="int"),
            S(n(3, 4), -0.1, desc="strided", strided=True),
        ],
    ),  # fmt: skip
    OpInfo(
        "clamp_max",
        lambda: [
            S(n(2, 3), 0.2, desc="float"),
            S(np.array([1, -2, 3]), 0, desc="int"),
            S(n(3, 4), -0.1, desc="strided", strided=True),
        ],
    ),  # fmt: skip
    OpInfo(
        "triu",
        lambda: [S(n(3, 4), desc="main"), S(n(3, 4), 1, desc="above")],
        spellings=("I",),
        dtypes=(),
    ),
    OpInfo(
        "tril",
        lambda: [S(n(3, 4), desc="main"), S(n(3, 4), -1, desc="below")],
        spellings=("I",),
        dtypes=(),
    ),
]
# the in-place spellings of the new unary functions
OPS += [
    OpInfo(name, lambda: [S(u(0.2, 0.8, 2, 3), desc="(2, 3)")], spellings=("I",), dtypes=())
    for name in (
        "lgamma", "digamma", "erfinv", "erfc", "i0", "sinc", "deg2rad", "rad2deg", "absolute",
        "frac", "exp2", "logit", "clamp_min", "clamp_max",
    )
]  # fmt: skip


# -------------------------------------------------------------------- scans and selections


def _scan_samples():
    x = distinct(3, 5)
    ties = np.array([[1.0, 3.0, 3.0, 2.0, 3.0], [5.0, 5.0, 1.0, 1.0, 0.0]])
    nan = np.array([[1.0, np.nan, 3.0, np.nan, 0.5]])
    return [
        S(x, 1, desc="rows"),
        S(x, 0, desc="columns"),
        S(x, -1, desc="negative dim"),
        S(ties, 1, desc="ties take the later position", grad=False),
        S(nan, 1, desc="NaN propagates", grad=False),
        S(np.array(2.5), 0, desc="0-d"),
        S(n(0, 3), 1, desc="zero-size"),
        S(distinct(3, 4), 1, desc="strided", strided=True),
        S(np.array([[3, 1, 4, 1, 5]]), 1, desc="integers"),
        S(np.array([True, False, True]), 0, desc="bools"),
    ]


def _median_dim_samples():
    return [
        S(distinct(3, 5), 1, desc="odd rows"),
        S(distinct(4, 6), 1, desc="even rows: the lower median"),
        S(distinct(4, 3), 0, desc="columns"),
        S(distinct(3, 5), -1, True, desc="keepdim"),
        S(distinct(3, 4), 1, desc="strided", strided=True),
        S(np.array(1.5), 0, desc="0-d"),
        S(np.array([[3, 1, 4, 9, 5]]), 1, desc="integers"),
    ]


def _median_nan_rows():
    return [
        S(np.array([[1.0, np.nan, 3.0, 0.5, 2.0]]), 1, desc="a NaN row", grad=False),
        S(np.array([[np.nan, np.nan], [1.0, 2.0]]), 1, desc="all NaN", grad=False),
    ]


def _median_all_samples():
    return [
        S(distinct(3, 5), desc="odd count"),
        S(distinct(2, 3), desc="even count: the lower median"),
        S(np.array([1.0, 2.0, 2.0, 3.0, 2.0]), desc="ties share the gradient"),
        S(np.array([1.0, np.nan, 3.0]), desc="NaN", grad=False),
        S(np.array(1.5), desc="0-d"),
        S(distinct(3, 4), desc="strided", strided=True),
        S(np.array([4, 1, 3, 2]), desc="integers"),
    ]


def _mode_samples():
    return [
        S(np.array([[1.0, 2.0, 2.0, 1.0, 3.0, 3.0], [4.0, 4.0, 5.0, 5.0, 5.0, 0.0]]),
          desc="ties go to the smallest value"),
        S(np.array([[3, 1, 3, 1, 1, 2]]), desc="integers"),
        S(np.array([[3.0, 1.0], [2.0, 2.0], [1.0, 3.0]]), 0, desc="columns"),
        S(np.array([[3.0, 1.0, 3.0]]), -1, True, desc="keepdim"),
        S(distinct(2, 4), desc="all distinct: the smallest"),
        S(np.array([True, False, False]), desc="bools"),
    ]  # fmt: skip


OPS += [
    OpInfo("cummax", _scan_samples),
    OpInfo("cummin", _scan_samples),
    OpInfo("median", _median_dim_samples),
    OpInfo("median", _median_nan_rows, dtypes=()),
    OpInfo("median", _median_all_samples),
    OpInfo("nanmedian", _median_dim_samples, dtypes=FLOATS),
    OpInfo("nanmedian", _median_nan_rows, dtypes=()),
    OpInfo(
        "nanmedian",
        lambda: [
            S(np.array([1.0, np.nan, 3.0, 2.0]), desc="NaN ignored"),
            S(np.array([np.nan, np.nan]), desc="all NaN", grad=False),
            S(distinct(3, 3), desc="no NaN"),
        ],
        dtypes=(),
    ),
    OpInfo("mode", _mode_samples, grad=False),
    OpInfo(
        "logcumsumexp",
        lambda: [
            S(n(3, 5), 1, desc="rows"),
            S(n(4, 3), 0, desc="columns"),
            S(np.array([[-1000.0, 0.0, 1000.0, -np.inf]]), 1, desc="wide range", grad=False),
            S(n(3, 4), -1, desc="strided", strided=True),
            S(np.array(0.5), 0, desc="0-d"),
            S(n(0, 3), 1, desc="zero-size"),
        ],
    ),
]


# -------------------------------------------------------------------------- NaN reductions


def _nan_data():
    x = n(3, 4)
    x[0, 1] = x[2, 3] = np.nan
    return x


def _nansum_samples():
    return [
        S(_nan_data(), desc="all"),
        S(_nan_data(), 1, desc="dim"),
        S(_nan_data(), (0, 1), True, desc="dims, keepdim"),
        S(n(3, 4), 0, desc="strided", strided=True),
        # (nanmean's gradient there: PyTorch's NaN, ember's 0; nansum's agree)
        S(np.array([np.nan, np.nan]), desc="all NaN", grad=False),
        S(n(0, 3), desc="zero-size"),
        S(np.array([[1, 2], [3, 4]]), 1, desc="integers"),
    ]


def _stat_mean_samples():
    x = n(3, 5)
    return [
        S(x, desc="all"),
        S(x, 1, desc="dim"),
        S(x, 1, kwargs={"keepdim": True}, desc="keepdim"),
        S(x, 1, False, True, desc="unbiased, keepdim positional"),
        S(x, kwargs={"dim": 0, "correction": 0}, desc="correction 0"),
        S(x, 1, kwargs={"unbiased": False}, desc="unbiased False"),
        S(x, False, desc="unbiased positional"),
        S(n(3, 4), 0, desc="strided", strided=True),
    ]


def _count_nonzero_samples():
    x = n(3, 4)
    x[0, 1] = x[1, :] = 0.0
    return [
        S(x, desc="all"),
        S(x, 1, desc="dim"),
        S(x, (0, 1), desc="dims"),
        S(np.array([0, 3, 0]), desc="integers"),
        S(np.array([True, False]), desc="bools"),
        S(n(0, 3), desc="zero-size"),
    ]


OPS += [
    OpInfo("nansum", _nansum_samples),
    OpInfo("nanmean", lambda: _nansum_samples()[:-1]),
    OpInfo("var_mean", _stat_mean_samples, dtypes=FLOATS),
    OpInfo("std_mean", _stat_mean_samples, dtypes=FLOATS),
    OpInfo("count_nonzero", _count_nonzero_samples, grad=False),
]


def _dist_samples():
    a, b = n(3, 4), n(3, 4)
    return [
        S(a, b, desc="p 2"),
        S(a, b, 1, desc="p 1"),
        S(a, b, 3.0, desc="p 3"),
        # (PyTorch's backward of dist at p = 0 fails: "Expected a proper Tensor but got None")
        S(a, b, 0, desc="p 0", grad=False),
        S(a, b, float("inf"), desc="p inf"),
        S(a, n(4), desc="broadcast"),
        S(a, a.copy(), desc="zero distance: gradient 0"),
        S(a, b, desc="strided", strided=True),
        S(np.array([1, 2]), np.array([2, 4]), desc="integers refused"),
    ]


def _equal_samples():
    a = n(2, 3)
    return [
        S(a, a.copy(), desc="equal"),
        S(a, a + 1, desc="different"),
        S(a, a[:1], desc="shapes differ"),
        S(np.array([np.nan]), np.array([np.nan]), desc="NaN unequal"),
        S(np.array([1, 2]), np.array([1, 2]), desc="integers"),
    ]


OPS += [
    OpInfo("dist", _dist_samples, dtypes=FLOATS),
    OpInfo("equal", _equal_samples, grad=False),
]


def _diff_samples():
    x = n(3, 5)
    return [
        S(x, desc="last dim"),
        S(x, 2, desc="n 2"),
        S(x, 1, 0, desc="dim 0"),
        S(x, kwargs={"prepend": n(3, 1), "append": n(3, 2)}, desc="prepend, append"),
        S(x, 1, 0, n(1, 5), desc="prepend positional"),
        S(x, 6, desc="n past the size"),
        S(np.array([1, 4, 9, 16]), desc="integers"),
        S(np.array([True, False, False, True]), desc="bools"),
        S(n(3, 4), desc="strided", strided=True),
        S(np.array(1.0), desc="0-d refused"),
    ]


def _trapezoid_samples():
    y = n(3, 5)
    return [
        S(y, desc="unit spacing"),
        S(y, kwargs={"dx": 0.5}, desc="dx"),
        S(y, np.sort(n(5)), desc="x"),
        S(y, kwargs={"dim": 0}, desc="dim 0"),
        S(y, np.sort(n(3, 5), 1), desc="x like y"),
        S(n(3, 4), desc="strided", strided=True),
        S(n(3, 0), desc="empty dim"),
    ]


OPS += [
    OpInfo("diff", _diff_samples),
    OpInfo("trapezoid", _trapezoid_samples),
    OpInfo("trapz", lambda: _trapezoid_samples()[:4]),
    OpInfo("cumulative_trapezoid", _trapezoid_samples),
]


def _histc_samples():
    x = np.concatenate([n(20), [5.0, -5.0]])
    return [
        S(x, desc="data range"),
        S(x, 4, desc="4 bins"),
        S(x, 5, -1, 1, desc="range, outside ignored"),
        S(x, kwargs={"bins": 3, "min": 0, "max": 2}, desc="keywords"),
        S(np.array([1.0, 1.0, 1.0]), 3, desc="one value"),
        S(np.array([0.0, 1.0, 2.0, 3.0]), 3, 0, 3, desc="edges"),
        S(n(0), 4, desc="empty"),
    ]


def _searchsorted_samples():
    s = np.sort(n(6))
    s2 = np.sort(n(2, 5), 1)
    v = n(3, 4)
    return [
        S(s, v, desc="1-d sequence"),
        S(s, v, kwargs={"right": True}, desc="right"),
        S(s, v, kwargs={"side": "right"}, desc="side"),
        S(np.array([1.0, 2.0, 2.0, 3.0]), np.array([2.0, 0.0, 5.0]), desc="ties"),
        S(np.array([1.0, 2.0, 2.0, 3.0]), np.array([2.0]), kwargs={"right": True},
          desc="ties right"),
        S(s2, n(2, 3), desc="rows"),
        S(s, 0.3, desc="python scalar"),
        S(s, v, kwargs={"out_int32": True}, desc="int32"),
        S(np.array([3, 1, 2]), np.array([2, 3]), kwargs={"sorter": np.array([1, 2, 0])},
          desc="sorter"),
        S(np.array([1, 3, 5]), np.array([2, 6]), desc="integers"),
        S(s2, n(3, 3), desc="leading dims differ"),
    ]  # fmt: skip


def _bucketize_samples():
    b = np.sort(n(5))
    return [
        S(n(3, 4), b, desc="buckets"),
        S(np.append(b, 9.0), b, kwargs={"right": True}, desc="right, on the edges"),
        S(np.append(b, 9.0), b, desc="left, on the edges"),
        S(n(4), b, kwargs={"out_int32": True}, desc="int32"),
        S(np.array([1, 5, 9]), np.array([2, 4, 6]), desc="integers"),
        S(n(3), n(2, 2), desc="2-d boundaries refused"),
    ]


OPS += [
    OpInfo("histc", _histc_samples, grad=False, dtypes=("float32", "float64")),
    OpInfo("searchsorted", _searchsorted_samples, grad=False, dtypes=()),
    OpInfo("bucketize", _bucketize_samples, grad=False, dtypes=()),
]


# ---------------------------------------------------------------------------------- shapes


def _rot90_samples():
    x = n(2, 3, 4)
    return [
        S(x, desc="k 1"),
        S(x, 2, desc="k 2"),
        S(x, 3, (1, 2), desc="k 3, dims"),
        S(x, -1, (2, 0), desc="negative k"),
        S(x, 4, desc="k 4"),
        S(n(3, 4), 1, desc="strided", strided=True),
        S(n(3), desc="1-d refused"),
    ]


def _diag_embed_samples():
    return [
        S(n(3), desc="vector"),
        S(n(2, 3), desc="batch"),
        S(n(2, 3), 1, desc="above"),
        S(n(2, 3), -2, desc="below"),
        S(n(2, 3), 0, 0, 2, desc="dims 0, 2"),
        S(n(2, 3), 1, -1, 0, desc="dims reversed"),
        S(np.array([np.inf, np.nan, 1.0]), desc="inf and NaN only on the diagonal"),
        S(n(2, 3), desc="strided", strided=True),
        S(np.array([1, 2]), desc="integers"),
    ]


OPS += [
    OpInfo("moveaxis", lambda: [S(n(2, 3, 4), 0, -1, desc="one"),
                                S(n(2, 3, 4), (0, 1), (2, 0), desc="two")]),
    OpInfo("fliplr", lambda: [S(n(2, 3), desc="matrix"), S(n(3), desc="1-d refused"),
                              S(n(3, 4), desc="strided", strided=True)]),
    OpInfo("flipud", lambda: [S(n(2, 3), desc="matrix"), S(n(3), desc="vector"),
                              S(np.array(1.0), desc="0-d refused")]),
    OpInfo("rot90", _rot90_samples),
    OpInfo("diag_embed", _diag_embed_samples),
    OpInfo("ravel", lambda: [S(n(2, 3), desc="matrix"), S(n(3, 4), desc="strided", strided=True),
                             S(np.array(1.0), desc="0-d")]),
]  # fmt: skip


def _tensor_split_samples():
    x = n(7, 4)
    return [
        S(x, 3, desc="sections"),
        S(x, 2, 1, desc="sections, dim 1"),
        S(x, [1, 5], desc="indices"),
        S(x, [2, 9], desc="an index past the end"),
        S(x, (3, 1), desc="decreasing indices"),
        S(x, 9, desc="more sections than rows"),
        S(n(3, 4), 2, 1, desc="strided", strided=True),
    ]


def _split3_samples(dim_size_first):
    x = n(4, 6, 2)
    return [
        S(x, 2, desc="2 parts"),
        S(x, [1, 3], desc="indices"),
        S(x, 5, desc="uneven refused"),
    ]


OPS += [
    OpInfo("tensor_split", _tensor_split_samples),
    OpInfo("hsplit", lambda: _split3_samples(1) + [S(n(6), 3, desc="1-d")]),
    OpInfo("vsplit", lambda: _split3_samples(0) + [S(n(6), 3, desc="1-d refused")]),
    OpInfo("dsplit", lambda: _split3_samples(2)[:2] + [S(n(6, 2), 2, desc="2-d refused")]),
]


def _stack_samples():
    return [
        S([n(3), n(3)], desc="vectors"),
        S([n(2, 3), n(2, 1)], desc="matrices"),
        S([np.array(1.0), np.array(2.0)], desc="0-d"),
        S([n(3), np.array([1, 2, 3])], desc="promotion"),
        S([n(2, 3), n(2, 3)], desc="strided", strided=True),
    ]


def _atleast_samples():
    return [
        S(np.array(1.5), desc="0-d"),
        S(n(3), desc="1-d"),
        S(n(2, 3), desc="2-d"),
        S(n(2, 3, 4), desc="3-d"),
        S(n(3), n(2, 2), desc="several"),
    ]


OPS += [
    OpInfo("column_stack", _stack_samples),
    OpInfo("dstack", lambda: _stack_samples()[:1] + _stack_samples()[2:]),
    OpInfo("atleast_1d", _atleast_samples),
    OpInfo("atleast_2d", _atleast_samples),
    OpInfo("atleast_3d", _atleast_samples),
]


# -------------------------------------------------------------------------------- products


def _kron_samples():
    return [
        S(n(2, 3), n(3, 2), desc="matrices"),
        S(n(3), n(2), desc="vectors"),
        S(n(2, 2), n(3), desc="ranks differ"),
        S(n(2, 1, 2), n(2, 2, 1), desc="3-d"),
        S(np.array([[1, 2], [3, 4]]), np.array([[0, 1], [1, 0]]), desc="integers"),
        S(n(2, 3), n(2, 2), desc="strided", strided=True),
    ]


def _block_diag_samples():
    return [
        S(n(2, 3), n(1, 2), desc="matrices"),
        S(n(2, 2), n(3), np.array(4.0), desc="matrix, vector, 0-d"),
        S(n(2, 2), np.array([[1, 2]]), desc="promotion"),
        S(n(0, 2), n(2, 0), desc="empty blocks"),
    ]


def _cartesian_samples():
    return [
        S(n(2), n(3), desc="two"),
        S(n(2), n(2), n(2), desc="three"),
        S(n(3), desc="one"),
        S(np.array([1, 2]), np.array([3, 4, 5]), desc="integers"),
    ]


def _combinations_samples():
    x = n(4)
    return [
        S(x, desc="pairs"),
        S(x, 3, desc="triples"),
        S(x, 2, True, desc="with replacement"),
        S(x, kwargs={"r": 1}, desc="r 1"),
        S(x, 5, desc="r past the size"),
        S(np.array([1, 2, 3]), desc="integers"),
    ]


def _addbmm_samples():
    b1, b2 = n(2, 3, 4), n(2, 4, 5)
    return [
        S(n(3, 5), b1, b2, desc="full input"),
        S(n(5), b1, b2, desc="row input"),
        S(n(3, 5), b1, b2, kwargs={"beta": 0.5, "alpha": 2.0}, desc="beta, alpha"),
        S(np.full((3, 5), np.nan), b1, b2, kwargs={"beta": 0}, desc="beta 0 ignores NaN"),
        S(n(3, 5), b1, b2, desc="strided", strided=True),
        S(n(3, 5), n(3, 4), n(4, 5), desc="2-d refused"),
    ]


def _addmv_samples():
    m, v = n(3, 4), n(4)
    return [
        S(n(3), m, v, desc="vector input"),
        S(n(1), m, v, desc="broadcast input"),
        S(n(3), m, v, kwargs={"beta": 0.5, "alpha": -2.0}, desc="beta, alpha"),
        S(np.full(3, np.nan), m, v, kwargs={"beta": 0}, desc="beta 0 ignores NaN"),
        S(n(3), m, v, desc="strided", strided=True),
        S(n(3), m, n(3, 1), desc="matrix vec refused"),
    ]


def _cross_samples():
    a, b = n(4, 3), n(4, 3)
    return [
        S(a, b, 1, desc="rows"),
        S(a.T.copy(), b.T.copy(), 0, desc="columns"),
        S(a, b, -1, desc="negative dim"),
        S(a, n(3), 1, desc="broadcast"),
        S(a, b, kwargs={"dim": 1}, desc="strided", strided=True),
        S(np.array([1, 0, 0]), np.array([0, 1, 0]), 0, desc="integers"),
        S(n(4, 2), n(4, 2), 1, desc="size 2 refused"),
    ]


OPS += [
    OpInfo("kron", _kron_samples),
    OpInfo("block_diag", _block_diag_samples),
    OpInfo("cartesian_prod", _cartesian_samples),
    OpInfo("combinations", _combinations_samples),
    OpInfo("addbmm", _addbmm_samples, sweep=1, differences={"[I] row input": (
        "PyTorch's addbmm_ resizes a (5,) self to the (3, 5) result; ember's in-place ops "
        "never change a tensor's shape: a ShapeError names both")}),
    OpInfo("addmv", _addmv_samples, sweep=1),
    OpInfo("chain_matmul", lambda: [S(n(2, 3), n(3, 4), n(4, 2), desc="three"),
                                    S(n(2, 3), desc="one")], sweep=1),
    OpInfo("cross", _cross_samples),
]  # fmt: skip


def _vander_samples():
    return [
        S(n(4), desc="square"),
        S(n(4), 3, desc="N"),
        S(n(3), kwargs={"N": 4, "increasing": True}, desc="increasing"),
        S(np.array([0.0, 1.0, 2.0]), desc="a zero: finite gradient"),
        S(np.array([1, 2, 3]), desc="integers"),
        S(n(3), 0, desc="N 0"),
    ]


OPS += [
    # PyTorch's vander cannot differentiate (its backward finds a tensor modified in place);
    # ember's gradient is checked by finite differences in test_issue19c.py
    OpInfo("vander", _vander_samples, grad=False),
    OpInfo(
        "tril_indices",
        lambda: [S(3, 4, desc="3x4"), S(4, 3, 1, desc="offset"), S(3, 3, -1, desc="below"),
                 S(0, 3, desc="empty"), S(3, 3, kwargs={"dtype": None}, desc="dtype None")],
        grad=False, dtypes=(),
    ),
    OpInfo(
        "triu_indices",
        lambda: [S(3, 4, desc="3x4"), S(4, 3, 1, desc="offset"), S(3, 3, -2, desc="below")],
        grad=False, dtypes=(),
    ),
    OpInfo(
        "logspace",
        lambda: [S(0, 2, 5, desc="decades"), S(-1.0, 1.0, 4, 2.0, desc="base 2"),
                 S(1, 3, 1, desc="one step"), S(0, 1, 0, desc="empty")],
        grad=False, dtypes=(),
    ),
]  # fmt: skip


# ------------------------------------------------------------------------ Tensor methods


def _unfold_samples():
    return [
        S(n(3, 7), 1, 2, 1, desc="windows of 2"),
        S(n(3, 7), 1, 3, 2, desc="step 2"),
        S(n(6, 2), 0, 2, 2, desc="dim 0"),
        S(n(3, 7), -1, 7, 1, desc="one window"),
        S(n(3, 4), 1, 2, 1, desc="strided", strided=True),
        S(n(3, 4), 1, 5, 1, desc="size past the dim refused"),
    ]


def _masked_scatter_samples():
    x = n(3, 4)
    mask = R.random((3, 4)) < 0.5
    return [
        S(x, mask, n(12), desc="1-d source"),
        S(x, mask, n(3, 5), desc="2-d source"),
        S(x, mask[0], n(12), desc="broadcast mask"),
        S(x, np.zeros((3, 4), bool), n(2), desc="nothing masked"),
        S(x, mask, n(12), desc="strided", strided=True),
    ]


OPS += [
    OpInfo("unfold", _unfold_samples, spellings=("M",)),
    OpInfo(
        "sum_to_size",
        lambda: [S(n(2, 3), 1, 3, desc="varargs"), S(n(2, 3), (2, 1), desc="a tuple"),
                 S(n(4, 2, 3), (2, 3), desc="leading")],
        spellings=("M",),
    ),
    OpInfo(
        "reshape_as",
        lambda: [S(n(2, 6), n(3, 4), desc="(3, 4)", nondiff=(1,))],
        spellings=("M",),
    ),
    OpInfo("masked_scatter", _masked_scatter_samples),
]  # fmt: skip


def _float_fill(check):
    return dict(random=True, grad=False, dtypes=(), spellings=("M",), check=check)


def _positive(out):
    assert np.all(out.numpy() > 0)


def _at_least_one_int(out):
    v = out.numpy()
    assert np.all(v >= 1) and np.all(v == np.round(v))


def _in_range(lo, hi):
    def check(out):
        v = out.numpy()
        assert np.all((v >= lo) & (v < hi)) and np.all(v == np.round(v)), v

    return check


OPS += [
    OpInfo("exponential_", lambda: [S(np.zeros((3, 4)), desc="rate 1"),
                                    S(np.zeros(50), 3.0, desc="rate 3")],
           **_float_fill(_positive)),
    OpInfo("geometric_", lambda: [S(np.zeros((3, 4)), 0.3, desc="p 0.3"),
                                  S(np.zeros(20, np.int64), 0.9, desc="integers")],
           **_float_fill(_at_least_one_int)),
    OpInfo("cauchy_", lambda: [S(np.zeros((3, 4)), desc="standard"),
                               S(np.zeros(5), 1.0, 2.0, desc="median, sigma")],
           **_float_fill(None)),
    OpInfo("log_normal_", lambda: [S(np.zeros((3, 4)), desc="defaults"),
                                   S(np.zeros(5), 0.0, 0.5, desc="mean, std")],
           **_float_fill(_positive)),
    OpInfo("random_", lambda: [S(np.zeros((3, 4)), 2, 9, desc="from, to")],
           **_float_fill(_in_range(2, 9))),
    OpInfo("random_", lambda: [S(np.zeros(30, np.int64), 5, desc="to only")],
           **_float_fill(_in_range(0, 5))),
    OpInfo("random_", lambda: [S(np.zeros(30), desc="no bounds")],
           **_float_fill(_in_range(0, 2**53 + 1))),
]  # fmt: skip


def _fill_diagonal_call(lib, x, *args, **kwargs):
    target = x * 1
    out = target.fill_diagonal_(*args, **kwargs)
    assert out is target
    return out


OPS.append(
    OpInfo(
        "fill_diagonal_",
        lambda: [
            S(n(3, 4), 2.5, desc="wide"),
            S(n(7, 3), 2.5, desc="tall"),
            S(n(7, 3), 2.5, True, desc="tall, wrap"),
            S(n(3, 3, 3), -1.0, desc="cube"),
        ],
        call=_fill_diagonal_call,
        spellings=("M",),
        dtypes=(),
    )
)


def _truthy_samples():
    return [
        S(np.array([2.0]), desc="non-zero"),
        S(np.array(0.0), desc="zero"),
        S(np.array([[0]]), desc="int zero"),
        S(np.array([1.0, 2.0]), desc="two elements refused"),
    ]


OPS += [
    OpInfo("is_nonzero", _truthy_samples, grad=False, dtypes=()),
    OpInfo("is_complex", lambda: [S(n(2), desc="float"), S(np.array([1]), desc="int")],
           grad=False, dtypes=()),
    OpInfo("is_floating_point", lambda: [S(n(2), desc="float"), S(np.array([1]), desc="int")],
           grad=False, dtypes=(), spellings=("T",)),
]  # fmt: skip


# ------------------------------------------------------------- top-level in-place functions

_INPLACE_ARGS = {
    "clamp_": (-0.5, 0.5),
    "clip_": (-0.5, 0.5),
    "clamp_max_": (0.3,),
    "clamp_min_": (0.3,),
    "fill_": (2.5,),
    "xlogy_": (np.array(2.0),),
    "ldexp_": (np.array([1.0, -2.0, 3.0]),),
    "logit_": (),
}


_NO_TORCH_GRAD = {"acosh_", "arccosh_", "asinh_", "arcsinh_", "atanh_", "arctanh_"}


def _toplevel_inplace(name):
    def call(lib, x, *args):
        target = x * 1
        out = getattr(lib.mod, name)(target, *args)
        assert out is target
        return out

    args = _INPLACE_ARGS.get(name, ())
    return OpInfo(
        name,
        lambda: [
            S(u(0.2, 0.8, 2, 3), *args, desc="(2, 3)", nondiff=tuple(range(1, 1 + len(args))))
        ],
        call=call,
        spellings=("T",),
        dtypes=(),
        # (PyTorch defines no derivative for its in-place inverse hyperbolics)
        grad=name not in _NO_TORCH_GRAD,
    )


def _toplevel_names():
    from ember.ops.extra_inplace import NAMES

    return NAMES


OPS += [_toplevel_inplace(name) for name in _toplevel_names()]


# ---------------------------------------------------------------------------- ember.special


def _special(name, samples, **kw):
    def call(lib, *args, **kwargs):
        return getattr(lib.mod.special, name)(*args, **kwargs)

    return OpInfo(f"special.{name}", samples, call=call, spellings=("T",), dtypes=(), **kw)


def _unit_samples(low, high, special=SPECIAL, grad_special=False):
    return lambda: [
        S(u(low, high, 2, 3), desc="(2, 3)"),
        S(u(low, high, 3, 4), desc="strided", strided=True),
        S(special.copy(), desc="special values", grad=grad_special),
        S(np.array([1, 2, 0]), desc="integers"),
    ]


OPS += [
    _special("erf", _unit_samples(-2, 2)),
    _special("erfc", _unit_samples(-2, 2)),
    _special("erfinv", _unit_samples(-0.9, 0.9, UNIT)),
    _special("expit", _unit_samples(-5, 5)),
    _special("logit", _unit_samples(0.1, 0.9, SPECIAL_POS)),
    _special("gammaln", _unit_samples(0.1, 4, SPECIAL_POS)),
    _special("digamma", _unit_samples(0.1, 4, SPECIAL_POS)),
    _special("psi", _unit_samples(0.1, 4, SPECIAL_POS)),
    _special("entr", lambda: [S(u(0.1, 3, 2, 3), desc="positive"),
                              S(np.array([0.0, -1.0, np.nan, np.inf]), desc="edges", grad=False)]),
    _special("sinc", _unit_samples(-3, 3)),
    _special("i0", _unit_samples(-3, 3)),
    _special("i1", _unit_samples(-3, 3)),
    _special("ndtr", _unit_samples(-4, 4)),
    _special("log_ndtr", lambda: [S(u(-5, 5, 2, 3), desc="(2, 3)"),
                                  S(np.array([-40.0, -10.0, 0.0, 10.0]), desc="tails")]),
    _special("log1p", _unit_samples(0, 3, SPECIAL_POS)),
    _special("expm1", _unit_samples(-2, 2)),
    _special("exp2", _unit_samples(-3, 3)),
    _special("round", lambda: [S(np.array([0.5, 1.5, 2.25, -2.5]), desc="halves"),
                               S(np.array([1.234, -5.678]), kwargs={"decimals": 2},
                                 desc="decimals")], grad=False),
    _special("polygamma", rtol=1e-8, samples=lambda: [S(1, u(0.2, 3, 2, 3), desc="n 1"),
                                   S(2, u(0.2, 3, 4), desc="n 2")]),
    _special("multigammaln", lambda: [S(u(1.6, 4, 2, 3), 3, desc="p 3"),
                                      S(u(0.6, 4, 4), 1, desc="p 1")]),
    _special("xlogy", _xlogy_samples),
    _special("xlog1py", lambda: [S(u(-2, 2, 2, 3), u(-0.5, 3, 2, 3), desc="(2, 3)"),
                                 S(np.array([0.0, 0.0, 1.0]), np.array([np.nan, -1.0, -1.0]),
                                   desc="special values", grad=False)]),
    _special("logsumexp", lambda: [S(n(3, 4), 1, desc="dim"), S(n(3, 4), 0, True, desc="keep")]),
    _special("softmax", lambda: [S(n(3, 4), 1, desc="dim"), S(n(3, 4), 0, desc="dim 0")]),
    _special("log_softmax", lambda: [S(n(3, 4), 1, desc="dim"), S(n(3, 4), 0, desc="dim 0")]),
]  # fmt: skip


# ------------------------------------------------------------------ aliases and composites


def _div_rounding():
    a, b = n(3, 4) * 5, u(0.5, 2, 3, 4) * R.choice([-1.0, 1.0], (3, 4))
    ints_a, ints_b = np.array([7, -7, 7, -7, 0]), np.array([2, 2, -2, -2, 3])
    return [
        S(a, b, kwargs={"rounding_mode": "trunc"}, desc="trunc"),
        # (floor is floor_divide, whose zero gradient samples_elementwise.py checks: opinfo_misc
        # lists its VJP as one these databases leave out)
        S(a, b, kwargs={"rounding_mode": "floor"}, desc="floor", grad=False),
        S(a, b, kwargs={"rounding_mode": None}, desc="true"),
        S(ints_a, ints_b, kwargs={"rounding_mode": "trunc"}, desc="int trunc"),
        S(ints_a, ints_b, kwargs={"rounding_mode": "floor"}, desc="int floor"),
        S(ints_a, ints_b, desc="int true"),
        S(a, 2.5, kwargs={"rounding_mode": "trunc"}, desc="python other"),
        S(a, b, kwargs={"rounding_mode": "round"}, desc="unknown mode refused"),
    ]


OPS += [
    OpInfo("div", _div_rounding, spellings=("T", "M")),
    OpInfo("divide", _div_rounding, spellings=("T", "M")),
    OpInfo("divide", lambda: _div_rounding()[:3], spellings=("I",), dtypes=()),
    OpInfo("div", lambda: _div_rounding()[:3], spellings=("I",), dtypes=()),
    binary("true_divide", rhs_kinks=(0.0,)),
    binary("subtract"),
    binary("multiply"),
    OpInfo("subtract", lambda: [S(n(2, 3), n(2, 3), kwargs={"alpha": 2}, desc="alpha")]),
    unary("negative"),
    unary("fix", low=-5.0, high=5.0, kinks=np.arange(-5, 6)),
    unary("positive", grad=False),
    unary("asinh", low=-3.0, high=3.0, spellings=("T", "M")),
    unary(
        "acosh", low=1.1, high=4.0, special=SPECIAL_POS, grad_special=False, spellings=("T", "M")
    ),
    unary("atanh", low=-0.9, high=0.9, special=UNIT, grad_special=False, spellings=("T", "M")),
    unary("arcsinh", low=-3.0, high=3.0, spellings=("T", "M")),
    unary(
        "arccosh", low=1.1, high=4.0, special=SPECIAL_POS, grad_special=False, spellings=("T", "M")
    ),
    unary("arctanh", low=-0.9, high=0.9, special=UNIT, grad_special=False, spellings=("T", "M")),
    unary("isposinf", grad=False),
    unary("isneginf", grad=False),
    unary("isreal", grad=False),
    # (PyTorch's gradient of sgn is a ZeroTensor its tests cannot read; ember's is 0 too)
    unary("sgn", kinks=(0.0,), grad=False),
    OpInfo(
        "asinh",
        lambda: [S(u(0.2, 0.8, 2, 3), desc="(2, 3)")],
        spellings=("I",),
        dtypes=(),
        grad=False,  # (PyTorch defines no derivative for its in-place inverse hyperbolics)
    ),
    *[
        OpInfo(
            name,
            lambda: [S(u(1.2, 1.8, 2, 3), desc="(2, 3)")],
            spellings=("I",),
            dtypes=(),
            grad=False,
        )
        for name in ("acosh", "arccosh")
    ],
    *[
        OpInfo(
            name,
            lambda: [S(u(0.2, 0.8, 2, 3), desc="(2, 3)")],
            spellings=("I",),
            dtypes=(),
            grad=False,
        )
        for name in ("atanh", "arctanh", "arcsinh")
    ],
    OpInfo("swapdims", lambda: [S(n(2, 3, 4), 0, 2, desc="0, 2"), S(n(2, 3), -1, 0, desc="-1, 0")]),
]
OPS += [
    binary(name, promotion=True, grad=False)
    for name in ("greater", "greater_equal", "less", "less_equal", "not_equal")
]


def _copysign_samples():
    return [
        S(n(2, 3), n(2, 3), desc="same shape"),
        S(n(2, 3), np.array([-0.0, 0.0, -1.0]), desc="signed zeros"),
        S(n(2, 3), -2.0, desc="python other"),
        S(np.array([1, -2, 3]), np.array([-1, 1, -1]), desc="integers"),
        S(np.array([np.nan, np.inf, 0.0, -0.0, -np.inf]), np.array([-1.0, 1.0, -1.0, 2.0, -0.0]),
          desc="special"),
    ]  # fmt: skip


def _cov_samples():
    x = n(3, 6)
    return [
        S(x, desc="rows"),
        S(x, kwargs={"correction": 0}, desc="correction 0"),
        S(x, kwargs={"fweights": np.array([1, 2, 1, 3, 1, 1])}, desc="fweights"),
        S(x, kwargs={"aweights": u(0.5, 2, 6)}, desc="aweights"),
        S(n(5), desc="one variable"),
        S(np.array([[1, 2, 4], [0, 3, 1]]), desc="integers"),
    ]


OPS += [
    OpInfo("copysign", _copysign_samples),
    OpInfo("rsub", lambda: [S(n(2, 3), n(2, 3), desc="tensors"),
                            S(n(2, 3), n(3), kwargs={"alpha": 2}, desc="alpha")]),
    OpInfo("float_power", lambda: [S(u(0.5, 2, 2, 3), u(-1, 2, 2, 3), desc="tensors"),
                                   S(u(0.5, 2, 2, 3).astype(np.float32), 2, desc="int exponent"),
                                   S(np.array([2, 3]), np.array([2, 3]), desc="integers")],
           spellings=("T", "M")),
    # (PyTorch's ldexp gradient with a negative int exponent is 0: it takes 2 ** -2 in ints)
    OpInfo("ldexp", lambda: [S(n(2, 3), n(3), desc="float exponents")], spellings=("I",),
           dtypes=()),
    OpInfo("float_power", lambda: [S(u(0.5, 2, 2, 3), u(-1, 2, 2, 3), desc="tensors")],
           spellings=("I",), dtypes=()),
    OpInfo("ldexp", lambda: [S(n(2, 3), np.array([1, -2, 3]), desc="int exponents", grad=False),
                             S(n(2, 3), n(3), desc="float exponents")], spellings=("T", "M")),
    OpInfo("aminmax", lambda: [S(n(3, 4), desc="all"),
                               S(n(3, 4), kwargs={"dim": 1}, desc="dim"),
                               S(n(3, 4), kwargs={"dim": 0, "keepdim": True}, desc="keepdim")],
           grad=False),
    OpInfo("inner", lambda: [S(n(2, 3), n(4, 3), desc="matrices"), S(n(3), n(3), desc="vectors"),
                             S(np.array(2.0), n(3), desc="0-d")]),
    OpInfo("vdot", lambda: [S(n(3), n(3), desc="vectors"),
                            S(n(2, 3), n(2, 3), desc="2-d refused")]),
    OpInfo("diagflat", lambda: [S(n(3), desc="vector"), S(n(2, 2), 1, desc="matrix, offset")]),
    OpInfo("unflatten", lambda: [S(n(2, 6), 1, (2, 3), desc="(2, 3)"),
                                 S(n(6, 2), 0, (-1, 2), desc="-1")]),
    OpInfo("narrow_copy", lambda: [S(n(4, 3), 0, 1, 2, desc="rows")]),
    OpInfo("isin", lambda: [S(np.array([1, 2, 3, 4]), np.array([2, 4, 9]), desc="ints"),
                            S(n(3), n(2), desc="floats"),
                            S(np.array([1, 2, 3]), np.array([2]), kwargs={"invert": True},
                              desc="invert")], grad=False, dtypes=()),
    OpInfo("bincount", lambda: [S(np.array([1, 3, 1, 0]), desc="counts"),
                                S(np.array([1, 3, 1]), u(0, 1, 3), desc="weights"),
                                S(np.array([1, 3, 1]), kwargs={"minlength": 7}, desc="minlength"),
                                S(np.array([], np.int64), desc="empty")],
           dtypes=(), grad=False),  # (PyTorch defines no derivative for bincount)
    OpInfo("trace", lambda: [S(n(3, 4), desc="matrix"), S(n(4, 4), desc="square"),
                             S(n(3), desc="vector refused")],
           spellings=("T", "M")),
    OpInfo("cov", _cov_samples, dtypes=FLOATS),
    OpInfo("corrcoef", lambda: _cov_samples()[:1] + _cov_samples()[-1:]),
]  # fmt: skip
