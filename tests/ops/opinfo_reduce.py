"""OpInfos of the reductions: sum, mean, prod, amax/amin, max/min, argmax/argmin, all/any,
var/std, logsumexp, cumsum, sum_to (see opinfo.py)."""

import numpy as np

from .opinfo import DT, OpInfo, Sample, rng

R = rng(20)
X = R.standard_normal((3, 4, 5))
NAN = X.copy()
NAN[0, 1, 2] = np.nan
NAN[2, 0, 0] = np.inf


def reduce_samples(dims=(None, 1, -1, (0, 2)), keepdim=True, empty=True, nan=True, extra=()):
    """Over every dimension, one, a negative one and a tuple; keepdim; an empty dimension, a
    strided input, NaN and inf."""

    def make():
        out = []
        for d in dims:
            args = (X,) if d is None else (X, d)
            out.append(Sample(args, desc=f"dim={d}"))
        if keepdim:
            out.append(Sample((X, 1), {"keepdim": True}, desc="keepdim"))
            out.append(Sample((X, (0, -1)), {"keepdim": True}, desc="tuple keepdim"))
        out.append(Sample((X, 2), desc="strided", strided=True))
        out.append(Sample((np.array(X[0, 0, 0]),), desc="0-d"))
        if empty:
            out.append(Sample((np.zeros((2, 0, 3)), 1), desc="empty dim"))
            out.append(Sample((np.zeros((2, 0, 3)), 2), desc="kept empty dim"))
        if nan:
            out.append(Sample((NAN, 1), desc="NaN and inf", grad=False))
        out.extend(extra)
        return out

    return make


TIES = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0], [-1.0, -1.0, -1.0]])
ZEROS = np.array([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0], [1.0, -2.0, 0.5]])

OPS = [
    OpInfo(
        "sum",
        reduce_samples(
            dims=(None, 1, -1, (0, 2), ()),
            extra=[
                Sample((X, 1), {"dtype": DT("float32")}, desc="dtype=float32", grad=False),
                Sample((X.reshape(60, 1) + 3, 0), desc="a long column"),
            ],
        ),
    ),
    OpInfo(
        "mean",
        reduce_samples(dims=(None, 1, -1, (0, 2), ())),
        dtype_differences={
            d: "PyTorch's mean of integer tensors is an error; so is ember's" for d in ("bool",)
        },
    ),
    OpInfo(
        "prod",
        lambda: [
            Sample((X,), desc="all"),
            Sample((X, 1), desc="dim=1"),
            Sample((X, -1), {"keepdim": True}, desc="keepdim"),
            Sample((ZEROS, 1), desc="one and two zeros"),
            Sample((ZEROS,), desc="zeros, all"),
            Sample((X, 0), desc="strided", strided=True),
            Sample((np.zeros((2, 0)), 1), desc="empty dim"),
            Sample((NAN, 2), desc="NaN", grad=False),
            Sample((X, 1), {"dtype": DT("float32")}, desc="dtype", grad=False),
        ],
    ),
    OpInfo(
        "amax",
        reduce_samples(
            dims=(None, 1, -1, (0, 2), ()), empty=False, extra=[Sample((TIES, 1), desc="ties")]
        ),
    ),
    OpInfo(
        "amin",
        reduce_samples(
            dims=(None, 1, -1, (0, 2), ()), empty=False, extra=[Sample((TIES, 1), desc="ties")]
        ),
    ),
]


def _max_samples():
    return [
        Sample((X,), desc="all"),
        Sample((X, 1), desc="dim: values and indices"),
        Sample((X, -1, True), desc="negative dim, keepdim"),
        Sample((TIES, 1), desc="ties: the first index"),
        Sample((TIES,), desc="ties, all"),
        Sample((X, R.standard_normal((4, 5))), desc="elementwise with a tensor"),
        Sample((X, 0), desc="strided", strided=True),
        Sample((np.array(2.5), 0), desc="0-d with dim 0"),
        Sample((NAN, 1), desc="NaN", grad=False),
        Sample((np.zeros((2, 0)), 1), desc="empty dim"),
    ]


OPS += [OpInfo("max", _max_samples), OpInfo("min", _max_samples)]


def _arg_samples():
    return [
        Sample((X,), desc="flattened"),
        Sample((X, 1), desc="dim"),
        Sample((X, -1, True), desc="keepdim"),
        Sample((TIES, 1), desc="ties"),
        Sample((NAN, 2), desc="NaN"),
        Sample((X, 0), desc="strided", strided=True),
        Sample((np.array(1.5), 0), desc="0-d"),
        Sample((np.zeros((2, 0)), 0), desc="empty, other dim"),
    ]


OPS += [OpInfo("argmax", _arg_samples), OpInfo("argmin", _arg_samples)]


def _bool_reduce_samples():
    b = X > 0
    return [
        Sample((b,), desc="all"),
        Sample((b, 1), desc="dim"),
        Sample((b, -1, True), desc="keepdim"),
        Sample((X, 1), desc="floats"),
        Sample((np.zeros((2, 0), bool), 1), desc="empty dim"),
        Sample((b, 0), desc="strided", strided=True),
        Sample((NAN, 1), desc="NaN is true"),
    ]


OPS += [OpInfo("all", _bool_reduce_samples), OpInfo("any", _bool_reduce_samples)]


def _var_samples():
    shifted = R.standard_normal((4, 6)) * 1e-1 + 1e3
    return [
        Sample((X,), desc="all"),
        Sample((X, 1), desc="dim"),
        Sample((X, (0, 2)), {"keepdim": True}, desc="tuple keepdim"),
        Sample((X, -1), {"correction": 0}, desc="correction=0"),
        Sample((X, 1), {"correction": 2}, desc="correction=2"),
        Sample((X, 1), {"unbiased": False}, desc="unbiased=False"),
        # (PyTorch 2.13's var/std backward with dim=() gives +-inf: the forward reduces
        # every dimension, the backward divides by the count of none; ember's is finite)
        Sample((X, ()), desc="dim=()", grad=False),
        Sample((shifted, 1), desc="mean 1e4 spreads"),
        Sample((X, 0), desc="strided", strided=True),
        Sample((X[:, :1, 0], 1), desc="one element: correction 1 is NaN", grad=False),
        Sample((np.zeros((2, 0)), 1), desc="empty dim", grad=False),
        Sample((NAN, 1), desc="NaN", grad=False),
    ]


OPS += [OpInfo("var", _var_samples), OpInfo("std", _var_samples)]

_LSE_SAMPLES = reduce_samples(
    dims=(1, -1, (0, 2)),
    extra=[
        Sample((np.array([[0.0, -np.inf], [1.0, 2.0], [-np.inf, -np.inf]]), 1), desc="-inf"),
        Sample((np.array([[1000.0, 1000.0], [-1000.0, 0.0]]), 1), desc="large"),
        Sample((np.arange(6).reshape(2, 3), 1), desc="integers"),
    ],
)
OPS.append(
    OpInfo(
        "logsumexp",
        _LSE_SAMPLES,
        differences={
            "0-d": "ember's logsumexp without dim reduces every dimension, as its sum does; "
            "PyTorch's requires dim"
        },
    )
)


def _cumsum_samples():
    return [
        Sample((X, 1), desc="dim"),
        Sample((X, -1), desc="negative dim"),
        Sample((X, 0), desc="strided", strided=True),
        Sample((np.zeros((0, 3)), 0), desc="empty"),
        Sample((np.array(1.5), 0), desc="0-d"),
        Sample((NAN, 1), desc="NaN", grad=False),
        Sample((np.arange(6).reshape(2, 3), 1), desc="int64"),
        Sample((X, 1), {"dtype": DT("float32")}, desc="dtype", grad=False),
    ]


OPS.append(OpInfo("cumsum", _cumsum_samples))


def _sum_to_samples():
    return [
        Sample((X, (4, 1)), desc="(4, 1)"),
        Sample((X, (3, 1, 5)), desc="keep rank"),
        Sample((X, (5,)), desc="trailing"),
        Sample((X, ()), desc="to a scalar"),
        Sample((X, (3, 4, 5)), desc="unchanged"),
        Sample((X, (1, 4, 1)), desc="strided", strided=True),
    ]


def _sum_to(lib, x, shape):
    if lib.name == "ember":
        return lib.mod.sum_to(x, shape)
    return x.sum_to_size(shape) if shape else x.sum()


OPS += [
    OpInfo("sum_to", _sum_to_samples, call=_sum_to, spellings=("T",)),
    OpInfo(
        "sum_to",
        _sum_to_samples,
        call=lambda lib, x, s: x.sum_to(s) if lib.name == "ember" else _sum_to(lib, x, s),
        spellings=("M",),
    ),
]
