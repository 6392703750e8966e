"""OpInfos of sort, argsort, topk, unique, cumprod, the norms (ember.norm and ember.linalg),
scatter_reduce, index_fill, index_copy and multinomial (see opinfo.py).

Ties: with ``stable=True`` PyTorch's order is defined and compared index for index; PyTorch's
unstable sort and its topk order ties as they come, so samples with ties there compare the
values and the values the indices select (``x.gather(dim, indices)``), never the indices."""

import math

import numpy as np

from .opinfo import DT, FLOATS, OpInfo, Sample, rng

R = rng(190)


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


X = R.standard_normal((3, 4, 5))
M = R.standard_normal((4, 6))
NAN = M.copy()
NAN[0, 1] = np.nan
NAN[2, 3] = np.inf
NAN[3, 0] = -np.inf
TIES = np.array([[1.0, 3.0, 3.0, -1.0, 3.0], [2.0, 2.0, 0.0, 2.0, -0.0], [5.0, 5.0, 5.0, 5.0, 5.0]])

# ------------------------------------------------------------------------- sort / argsort


def _sort_samples():
    return [
        S(X, desc="last dim"),
        S(X, 1, desc="dim 1"),
        S(X, 0, True, desc="descending"),
        S(X, kwargs={"dim": -2, "descending": True}, desc="keywords"),
        S(TIES, kwargs={"dim": 1, "stable": True}, desc="ties, stable"),
        S(TIES, kwargs={"dim": 1, "descending": True, "stable": True}, desc="ties, descending"),
        S(TIES, kwargs={"dim": 0, "stable": True}, desc="ties along dim 0"),
        S(NAN, kwargs={"dim": 1, "stable": True}, desc="NaN and inf", grad=False),
        S(NAN, kwargs={"dim": 1, "descending": True, "stable": True}, desc="NaN first", grad=False),
        S(X, 2, desc="strided", strided=True),
        S(np.zeros((2, 0)), 1, desc="empty"),
        S(np.array(2.5), desc="0-d"),
        S(np.array(2.5), 0, desc="0-d dim 0"),
    ]


def _stable_sweep(dtype):
    """The dtype sweep of sort and argsort: stable, since casting to integers makes ties."""
    from .opinfo import cast_sample

    return [
        cast_sample(S(X, kwargs={"dim": 1, "stable": True}, desc="dim 1"), dtype),
        cast_sample(
            S(TIES, kwargs={"dim": 1, "descending": True, "stable": True}, desc="ties"), dtype
        ),
    ]


OPS = [
    OpInfo("sort", _sort_samples, dtype_samples=_stable_sweep),
    OpInfo("argsort", _sort_samples, dtype_samples=_stable_sweep, grad=False),
]

# ------------------------------------------------------------------------------------ topk


def _topk_samples():
    return [
        S(X, 2, desc="k=2"),
        S(X, 3, 1, desc="dim 1"),
        S(X, 2, 0, False, desc="smallest"),
        S(X, 5, desc="k = size"),
        S(X, 0, desc="k=0"),
        S(X, 2, kwargs={"dim": -2, "largest": True, "sorted": True}, desc="keywords"),
        S(NAN, 3, 1, desc="NaN is largest", grad=False),
        S(NAN, 3, 1, False, desc="NaN is not smallest", grad=False),
        S(X, 3, desc="strided", strided=True),
        S(np.array(1.5), 1, desc="0-d"),
        S(X, 6, desc="k too large"),
    ]


def _topk_selects(lib, x, k, *args, **kwargs):
    """Values and the values the indices select: equal whatever order ties take."""
    dim = args[0] if args else kwargs.get("dim", -1)
    values, indices = lib.mod.topk(x, k, *args, **kwargs)
    if x.ndim == 0:
        return values, x
    return values, x.gather(dim, indices)


def _topk_unsorted(lib, x, k, dim=-1, largest=True):
    """sorted=False leaves the order open: compare the values sorted afterwards."""
    values, indices = lib.mod.topk(x, k, dim, largest, sorted=False)
    selected = x.gather(dim, indices)
    return tuple(lib.mod.sort(v, dim, descending=largest).values for v in (values, selected))


def _kthvalue_samples():
    return [
        S(X, 2, desc="k=2"),
        S(X, 1, 1, desc="smallest, dim 1"),
        S(X, 3, 0, True, desc="keepdim"),
        S(X, 5, kwargs={"dim": -1, "keepdim": False}, desc="largest, keywords"),
        S(NAN, 4, 1, desc="NaN is largest", grad=False),
        S(X, 3, desc="strided", strided=True),
        S(np.array(1.5), 1, desc="0-d"),
        S(X, 6, desc="k too large"),
        S(X, 0, desc="k=0"),
    ]


OPS += [
    OpInfo("kthvalue", _kthvalue_samples, dtypes=FLOATS),
    # (cast to integers the samples tie: the entry below sweeps those dtypes)
    OpInfo("topk", _topk_samples, dtypes=FLOATS),
    OpInfo(
        "topk",
        lambda: [
            S(TIES, 2, 1, desc="ties", grad=False),
            S(TIES, 3, 1, False, desc="ties, smallest", grad=False),
            S(TIES, 2, 0, desc="ties along dim 0", grad=False),
        ],
        call=_topk_selects,
        spellings=("T",),
    ),
    OpInfo(
        "topk",
        lambda: [S(X, 3, 1, desc="unsorted"), S(X, 2, 0, False, desc="unsorted smallest")],
        call=_topk_unsorted,
        spellings=("T",),
        # (ints tie once cast: the values and selections are compared, never the order)
        dtypes=("float32", "float64", "int64", "int32", "uint8"),
    ),
]

# ---------------------------------------------------------------------------------- unique

INTS = np.array([[3, 1, 2], [1, 3, 3], [0, 2, 1], [3, 1, 2]])


def _unique_samples():
    return [
        S(np.round(M), desc="floats", grad=False),
        S(INTS, kwargs={"return_inverse": True, "return_counts": True}, desc="all outputs"),
        S(INTS, True, True, desc="inverse positionally"),
        S(INTS, kwargs={"return_counts": True}, desc="counts"),
        S(INTS, kwargs={"sorted": False}, desc="sorted=False"),
        S(INTS, kwargs={"dim": 0, "return_inverse": True, "return_counts": True}, desc="dim 0"),
        S(INTS, kwargs={"dim": 1, "return_inverse": True}, desc="dim 1"),
        S(INTS, kwargs={"dim": -1, "return_counts": True}, desc="dim -1"),
        S(
            np.array([3.0, np.nan, 1.0, np.nan, 3.0]),
            kwargs={"return_inverse": True, "return_counts": True},
            desc="each NaN distinct",
            grad=False,
        ),
        S(np.zeros(0), kwargs={"return_inverse": True, "return_counts": True}, desc="empty"),
        S(np.zeros((0, 3)), kwargs={"dim": 0, "return_counts": True}, desc="empty dim 0"),
        S(np.array(4.0), kwargs={"return_inverse": True}, desc="0-d", grad=False),
        S(np.round(M), desc="strided", strided=True, grad=False),
    ]


# (unique's values carry no gradient in either library: PyTorch's backward raises)
OPS.append(OpInfo("unique", _unique_samples, grad=False))

# --------------------------------------------------------------------------------- cumprod

ZEROS = np.array([[2.0, 0.0, 3.0, 0.0, 5.0], [1.5, 2.0, 0.0, 4.0, 0.5], [0.0, 0.0, 1.0, 2.0, 3.0]])


def _cumprod_samples():
    return [
        S(X, 1, desc="dim"),
        S(X, -1, desc="negative dim"),
        S(ZEROS, 1, desc="zeros: one, two, leading"),
        S(ZEROS, 0, desc="zeros along dim 0"),
        S(X, 0, desc="strided", strided=True),
        S(np.zeros((0, 3)), 0, desc="empty"),
        S(np.array(1.5), 0, desc="0-d"),
        S(NAN, 1, desc="NaN", grad=False),
        S(np.arange(1, 7).reshape(2, 3), 1, desc="int64"),
        S(X, 1, kwargs={"dtype": DT("float32")}, desc="dtype", grad=False),
    ]


OPS.append(OpInfo("cumprod", _cumprod_samples))

# ------------------------------------------------------------------------------------ norms

ZROW = X.copy()
ZROW[0] = 0.0  # a zero norm: the gradient there is 0
SQ = R.standard_normal((2, 3, 3))


def _torch_norm_samples():
    return [
        S(X, desc="default: Frobenius of everything"),
        S(X, 2, desc="p=2"),
        S(X, 1, 1, desc="p=1 dim 1"),
        S(X, math.inf, (0, 2), desc="p=inf"),
        S(X, -math.inf, -1, desc="p=-inf"),
        S(X, 3, 1, True, desc="p=3 keepdim"),
        S(X, 0.5, 2, desc="p=0.5"),
        S(X, 0, 1, desc="p=0"),
        S(X, "fro", (1, 2), desc="fro two dims"),
        S(SQ, "nuc", (1, 2), desc="nuc"),
        S(SQ, "nuc", (0, 2), True, desc="nuc keepdim"),
        S(ZROW, 2, (1, 2), desc="zero norm"),
        S(X, 2, 1, kwargs={"dtype": DT("float64")}, desc="dtype"),
        S(X, 2, 1, desc="strided", strided=True),
        S(NAN, 2, 1, desc="NaN", grad=False),
    ]


OPS.append(OpInfo("norm", _torch_norm_samples))


def _linalg(name):
    def call(lib, *args, **kwargs):
        return getattr(lib.mod.linalg, name)(*args, **kwargs)

    return call


def _vector_norm_samples():
    return [
        S(X, desc="all, 2"),
        S(X, 1, desc="ord 1"),
        S(X, 3.0, 1, desc="ord 3"),
        S(X, 1.5, (0, 2), True, desc="ord 1.5 keepdim"),
        S(X, 0.5, -1, desc="ord 0.5"),
        S(X, -1, 1, desc="ord -1"),
        S(X, 0, 1, desc="ord 0"),
        S(X, math.inf, desc="inf"),
        S(X, -math.inf, (1,), desc="-inf"),
        S(np.abs(np.round(X)), math.inf, 2, desc="inf ties share"),
        S(ZROW, 2, (1, 2), desc="zero norm, ord 2"),
        S(ZROW, 3, (1, 2), desc="zero norm, ord 3"),
        S(ZROW, 1.5, (1, 2), desc="zero norm, ord 1.5"),
        S(ZROW, 0.5, (1, 2), desc="zero norm, ord 0.5"),
        S(X, 2, (), desc="dim () is every dim"),
        S(np.array(-3.0), 3, desc="0-d"),
        S(np.zeros((2, 0)), 2, 1, desc="empty"),
        S(np.zeros((2, 0)), math.inf, 1, desc="empty inf refused"),
        S(X, 2, 1, kwargs={"dtype": DT("float64")}, desc="dtype"),
        S(X, 2, 2, desc="strided", strided=True),
        S(NAN, 2, 1, desc="NaN", grad=False),
    ]


def _matrix_norm_samples():
    return [
        S(SQ, desc="fro"),
        S(SQ, "nuc", desc="nuc"),
        S(SQ, 2, desc="2"),
        S(SQ, -2, desc="-2"),
        S(SQ, 1, desc="1"),
        S(SQ, -1, (0, 2), desc="-1 over (0, 2)"),
        S(SQ, math.inf, (2, 0), True, desc="inf, reversed dims, keepdim"),
        S(SQ, -math.inf, desc="-inf"),
        S(SQ, "nuc", (0, 2), True, desc="nuc keepdim"),
        S(R.standard_normal((3, 5)), 2, desc="wide"),
        S(SQ, "fro", desc="strided", strided=True),
        S(SQ, 3, desc="ord 3 refused"),
        S(SQ[0, 0], desc="1-D refused"),
    ]


def _linalg_norm_samples():
    return [
        S(X, desc="flattened 2-norm"),
        S(M, desc="2-D, no ord"),
        S(M, "fro", desc="fro"),
        S(M, "nuc", desc="nuc"),
        S(M, 2, desc="2-D ord 2: the matrix norm"),
        S(M, math.inf, desc="2-D ord inf"),
        S(M[0], 3, desc="1-D ord 3"),
        S(X, 1, (0, 2), desc="matrix over two dims"),
        S(X, 3, 1, True, desc="vector over one dim"),
        S(X, None, (1, 2), desc="no ord, two dims"),
        S(X, 2, desc="3-D with ord refused"),
        S(X, 2, (0, 1, 2), desc="three dims refused"),
    ]


OPS += [
    OpInfo("vector_norm", _vector_norm_samples, call=_linalg("vector_norm"), spellings=("T",)),
    OpInfo(
        "matrix_norm",
        _matrix_norm_samples,
        call=_linalg("matrix_norm"),
        spellings=("T",),
        # the sweep runs "fro"; "nuc" in half precision is refused by both
        dtype_samples=lambda dtype: [S(SQ.astype(np.float32).astype(_np(dtype)), "nuc")],
    ),
    OpInfo("linalg.norm", _linalg_norm_samples, call=_linalg("norm"), spellings=("T",)),
    OpInfo(
        "svdvals",
        lambda: [
            S(SQ, desc="batch"),
            S(R.standard_normal((4, 2)), desc="tall"),
            S(np.zeros((2, 0)), desc="empty"),
        ],
        call=_linalg("svdvals"),
        spellings=("T",),
    ),
]


def _np(dtype):
    import ember

    return getattr(ember, dtype).np


# --------------------------------------------------------------------------- scatter_reduce

SRC = R.standard_normal((3, 4))
IDX = np.array([[0, 1, 2, 0], [2, 2, 0, 1], [0, 0, 0, 0]])
XZ = M[:3, :4].copy()
XZ[0, 0] = XZ[2, 1] = 0.0
SZ = SRC.copy()
SZ[0, 0] = SZ[1, 2] = SZ[2, 2] = SZ[0, 3] = 0.0  # one zero and two zeros at one position
XT, ST = np.round(M[:3, :4]), np.round(SRC)  # ties for amax and amin


def _scatter_reduce_samples():
    out = []
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            kw = {"include_self": include_self}
            tag = f"{reduce}{'' if include_self else ', without self'}"
            out += [
                S(M[:3, :4], 0, IDX, SRC, reduce, kwargs=kw, desc=f"{tag} dim 0"),
                S(M[:3, :4], 1, IDX, SRC, reduce, kwargs=kw, desc=f"{tag} dim 1"),
                S(XZ, 0, IDX, SZ, reduce, kwargs=kw, desc=f"{tag} zeros"),
                S(XT, -1, IDX, ST, reduce, kwargs=kw, desc=f"{tag} ties"),
            ]
    out += [
        # (PyTorch's gradient of src fails when the index is smaller than src: values only)
        S(M, 0, IDX[:2, :3], R.standard_normal((3, 5)), "sum", desc="smaller index", grad=False),
        S(M, 0, IDX, SRC, "amax", desc="strided", strided=True),
        S(M, 0, np.zeros((0, 4), np.int64), SRC, "prod", desc="empty index", grad=False),
        S(M[:3, :4] > 0, 0, IDX, SRC > 0, "mean", desc="bool mean refused"),
        # (PyTorch's forward takes "max", its backward refuses it; ember's is amax's)
        S(M[:3, :4], 0, IDX, SRC, "max", desc="max for amax", grad=False),
        S(M, 0, IDX, SRC, "add", desc="unknown reduce refused"),
        S(NAN[:3, :4], 1, IDX, SRC, "amax", desc="NaN", grad=False),
        S(
            np.arange(12).reshape(3, 4) - 5,
            0,
            IDX,
            np.arange(12).reshape(3, 4) - 6,
            "mean",
            desc="integer mean rounds down",
        ),
    ]
    return out


OPS.append(OpInfo("scatter_reduce", _scatter_reduce_samples, sweep=4))

# ------------------------------------------------------------------ index_fill, index_copy


def _index_fill_samples():
    return [
        S(M, 1, np.array([2, 0, 2]), 1.5, desc="repeated index, float"),
        S(M, 0, np.array([3]), -1, desc="int value"),
        S(M, -1, np.array([-1, 1]), 2.0, desc="negative dim and index"),
        S(M, 1, np.array([4, 1, 4]), np.array(2.5), desc="0-d tensor value"),
        S(M, 0, np.array(1), 0.0, desc="0-d index"),
        S(M, 0, np.zeros(0, np.int64), 3.0, desc="empty index"),
        S(M, 1, np.array([0, 6]), 1.0, desc="index out of range"),
        S(M, 1, np.array([1, 3]), float("nan"), desc="NaN"),
        S(M, 1, np.array([1, 3]), 2.0, desc="strided", strided=True),
    ]


def _index_copy_samples():
    return [
        S(M, 0, np.array([2, 0]), R.standard_normal((2, 6)), desc="rows"),
        S(M, 1, np.array([5, 1, 3]), R.standard_normal((4, 3)), desc="columns"),
        S(M, -1, np.array([0]), R.standard_normal((4, 1)), desc="negative dim"),
        S(M, 0, np.zeros(0, np.int64), np.zeros((0, 6)), desc="empty index"),
        S(M, 0, np.array([1, 2]), R.standard_normal((3, 6)), desc="wrong source refused"),
        S(M, 1, np.array([5, 1]), R.standard_normal((4, 2)), desc="strided", strided=True),
    ]


OPS += [
    OpInfo("index_fill", _index_fill_samples),
    OpInfo("index_copy", _index_copy_samples),
]

# ----------------------------------------------------------------------------- multinomial

W = np.array([[0.1, 0.0, 0.6, 0.3], [1.0, 2.0, 3.0, 4.0]])


def _valid_draws(out):
    v = out.numpy()
    assert v.dtype == np.int64 and ((v >= 0) & (v < 4)).all()


OPS.append(
    OpInfo(
        "multinomial",
        lambda: [
            S(W, 5, True, desc="with replacement"),
            S(W, 3, desc="without replacement"),
            S(W[1], 4, desc="1-D, every category"),
            S(W, 5, desc="too many without replacement"),
            S(W, 0, True, desc="no samples refused"),
        ],
        grad=False,
        random=True,
        check=_valid_draws,
        dtypes=FLOATS + ("int64", "bool"),
    )
)
