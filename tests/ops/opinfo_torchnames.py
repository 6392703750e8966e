"""OpInfos of the PyTorch names added by the torchnames branch: quantile, nanquantile, msort,
unravel_index, fmax, fmin, gcd, lcm, nextafter, frexp (ops/quantile.py,
ops/torchnames_math.py), and the top-level spellings of functional ops with aten's signatures
and the small top-level functions (functional/toplevel.py); see opinfo.py."""

import numpy as np

from .opinfo import DT, FLOATS, INTS, OpInfo, Sample, rng
from .opinfo_elementwise import binary

R = rng(2113)


def n(*shape):
    return R.standard_normal(shape)


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def distinct(*shape):
    """Values without ties (sort's gradient is unique)."""
    return R.permutation(np.arange(int(np.prod(shape))) * 0.37 - 2.0).reshape(shape)


_MODES = ("linear", "lower", "higher", "midpoint", "nearest")
_QS = np.array([0.0, 0.25, 0.5, 0.9, 1.0])


def _quantile_samples():
    x = distinct(4, 5)
    with_nan = distinct(3, 6)
    with_nan[1, 2] = np.nan
    with_nan[2, :] = np.nan
    out = [
        S(x, 0.3, desc="flat"),
        S(x, _QS, 1, desc="q tensor, dim 1", nondiff=(1,)),
        S(x, _QS, 0, True, desc="q tensor, dim 0, keepdim", nondiff=(1,)),
        S(x, 0.7, None, True, desc="flat keepdim"),
        S(x, np.array(0.5), -1, desc="0-d q", nondiff=(1,)),
        S(distinct(3, 4), 0.4, 1, desc="strided", strided=True),
        S(distinct(2, 3, 4), _QS, 1, desc="3-d, dim 1", nondiff=(1,)),
        S(np.array(1.5), 0.5, 0, True, desc="0-d input"),
        S(n(0, 3), 0.5, 1, desc="zero-size refused"),
        S(x, 1.5, desc="q out of range refused"),
        S(x, np.array([[0.5]]), desc="2-d q refused", nondiff=(1,)),
        S(with_nan, 0.5, 1, desc="NaN rows", grad=False),
        S(with_nan, _QS, None, desc="NaN flat", nondiff=(1,), grad=False),
    ]
    for mode in _MODES:
        out.append(S(x, _QS, 1, desc=mode, kwargs={"interpolation": mode}, nondiff=(1,)))
        out.append(
            S(with_nan, 0.35, 1, desc=f"{mode} NaN", kwargs={"interpolation": mode}, grad=False)
        )
    out.append(S(x, 0.5, kwargs={"interpolation": "cubic"}, desc="unknown mode refused"))
    return out


def _msort_samples():
    return [
        S(distinct(4, 3), desc="(4, 3)"),
        S(distinct(5), desc="1-d"),
        S(distinct(3, 4), desc="strided", strided=True),
        S(n(0, 3), desc="zero-size"),
        S(np.array([2.0, np.nan, -1.0, np.inf]), desc="NaN last", grad=False),
    ]


def _unravel_samples():
    return [
        S(np.array([4, -1, 0, 5]), (2, 3), desc="negative wraps"),
        S(np.array([6, 7, -7, 100]), (2, 3), desc="out of range wraps"),
        S(np.array(4), (2, 3), desc="0-d"),
        S(np.array([[4, 1], [2, 3]], np.int32), (2, 3), desc="int32, 2-d"),
        S(np.array([5, 11]), 7, desc="int shape"),
        S(np.array([0]), (), desc="empty shape"),
        S(np.array([3, 17]), (2, 3, 4), desc="3 dims"),
        S(np.array([1.0]), (2, 3), desc="float refused"),
        S(np.array([1]), (2, -3), desc="negative shape refused"),
    ]


def _integer_pairs():
    r = rng(7)
    return [
        S(r.integers(-60, 60, (3, 4)), r.integers(-60, 60, (3, 4)), desc="same shape"),
        S(r.integers(-60, 60, (3, 1)), r.integers(-60, 60, (1, 4)), desc="broadcast"),
        S(np.array([0, 0, 7, -12, 0]), np.array([0, 5, 0, 18, -3]), desc="zeros and signs"),
        S(r.integers(0, 30, (3, 4)), r.integers(0, 30, (3, 4)), desc="strided", strided=True),
        S(np.zeros((0, 3), np.int64), np.array([2, 4, 6]), desc="zero-size"),
        S(np.array([4, 6], np.int32), np.array([6, 9], np.int64), desc="promoted"),
        S(np.array([4.0]), np.array([6.0]), desc="floats refused"),
    ]


def _nextafter_samples():
    return [
        S(n(2, 3), n(2, 3), desc="same shape"),
        S(n(3, 1), n(1, 4), desc="broadcast"),
        S(n(3, 4), n(3, 4), desc="strided", strided=True),
        S(
            np.array([0.0, -0.0, 1.0, 1.0, np.inf, -np.inf, np.nan, 2.0, 5e-324]),
            np.array([1.0, -1.0, 1.0, np.nan, 0.0, np.inf, 0.0, -np.inf, 0.0]),
            desc="special values",
        ),
        S(n(0, 3), n(3), desc="zero-size"),
    ]


def _frexp_samples():
    return [
        S(n(2, 3) * 100, desc="(2, 3)"),
        S(np.array(3.0), desc="0-d"),
        S(n(3, 4), desc="strided", strided=True),
        S(n(0, 2), desc="zero-size"),
        S(
            np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310, -3.5, 1024.0, 0.5]),
            desc="special values",
            grad=False,
        ),
        S(np.array([1, 2]), desc="integers refused"),
    ]


_SCALAR_OTHER = "ember.fmax/fmin accept a Python scalar (as ember.maximum); torch's need tensors"
OPS = [
    OpInfo("quantile", _quantile_samples, dtypes=FLOATS),
    OpInfo("nanquantile", _quantile_samples, dtypes=FLOATS),
    OpInfo("msort", _msort_samples),
    OpInfo("unravel_index", _unravel_samples, grad=False, dtypes=INTS),
    binary(
        "fmax",
        scalars=False,
        differences={"python float": _SCALAR_OTHER, "python int": _SCALAR_OTHER},
    ),
    binary(
        "fmin",
        scalars=False,
        differences={"python float": _SCALAR_OTHER, "python int": _SCALAR_OTHER},
    ),
    OpInfo("gcd", _integer_pairs, grad=False),
    OpInfo("lcm", _integer_pairs, grad=False),
    OpInfo("nextafter", _nextafter_samples),
    OpInfo("frexp", _frexp_samples),
]


# ------------------------------------------------------------- top-level functional spellings


def _losses_pair():
    return n(3, 4), n(3, 4)


def _embedding_samples():
    w = n(5, 3)
    return [
        S(w, np.array([[0, 2], [4, 1]]), desc="2-d indices"),
        S(w, np.array([0, 2, 2, 3]), 2, desc="padding_idx"),
        S(w, np.array([1, 3]), -1, desc="padding_idx -1: none"),
        S(w, np.array([0, 1, 1]), -1, True, desc="scale_grad_by_freq"),
    ]


def _kl_samples():
    x, t = np.log(R.uniform(0.1, 1, (3, 4))), R.uniform(0.1, 1, (3, 4))
    return [
        S(x, t, desc="default (mean)", nondiff=(1,)),
        S(x, t, 0, desc="none"),
        S(x, t, 2, desc="sum"),
        S(x, np.log(t), 1, kwargs={"log_target": True}, desc="log_target"),
    ]


def _ctc_samples():
    log_probs = np.log(R.dirichlet(np.ones(5), size=(6, 2)))
    targets = np.array([[1, 2, 2], [3, 4, 0]])
    return [
        S(log_probs, targets, [6, 5], [3, 2], desc="lists"),
        S(log_probs, targets, np.array([6, 6]), np.array([3, 2]), 0, 2, desc="tensors, sum"),
        S(log_probs, targets, [6, 5], [3, 2], 0, 0, True, desc="none, zero_infinity"),
    ]


def _bce_samples():
    x, t = n(3, 4), R.uniform(0, 1, (3, 4))
    return [
        S(x, t, desc="default", nondiff=(1,)),
        S(
            x,
            t,
            R.uniform(0.5, 2, (4,)),
            R.uniform(0.5, 2, (4,)),
            0,
            desc="weights, none",
            nondiff=(1, 2, 3),
        ),
        S(x, t, None, R.uniform(0.5, 2, (4,)), 2, desc="pos_weight, sum", nondiff=(1, 3)),
    ]


def _batch_norm_samples():
    x = n(4, 3, 5)
    w, b = n(3), n(3)
    mean, var = n(3), R.uniform(0.5, 2, 3)
    return [
        S(x, w, b, mean, var, False, 0.1, 1e-5, True, desc="eval", nondiff=(3, 4)),
        S(x, None, None, None, None, True, 0.1, 1e-5, False, desc="training, no stats"),
        S(x, w, b, None, None, True, 0.1, 1e-3, True, desc="training, affine"),
    ]


def _instance_norm_samples():
    x = n(2, 3, 6)
    return [
        S(x, n(3), n(3), None, None, True, 0.1, 1e-5, False, desc="affine"),
        S(x, None, None, None, None, True, 0.1, 1e-5, False, desc="plain"),
    ]


def _alpha_samples():
    return [
        S(n(3, 4), 0.3, False, desc="eval"),
        S(n(3, 4), 0.0, True, desc="p 0"),
    ]


def _poisson_samples():
    x, t = R.uniform(0.1, 2, (3, 4)), R.poisson(2.0, (3, 4)).astype(float)
    return [
        S(n(3, 4), t, True, False, 1e-8, 1, desc="log input", nondiff=(1,)),
        S(x, t, False, True, 1e-8, 0, desc="full, none", nondiff=(1,)),
        S(x, t, False, False, 1e-6, 2, desc="sum", nondiff=(1,)),
    ]


def _hinge_samples():
    y = np.where(R.uniform(size=(3, 4)) > 0.5, 1.0, -1.0)
    return [
        S(n(3, 4), y, desc="default", nondiff=(1,)),
        S(n(3, 4), y, 0.5, 0, desc="margin, none", nondiff=(1,)),
        S(n(3, 4), y, 2.0, 2, desc="sum", nondiff=(1,)),
    ]


def _pair_target_samples():
    y = np.array([1.0, -1.0, 1.0])
    return [
        S(n(3, 4), n(3, 4), y, desc="default", nondiff=(2,)),
        S(n(3, 4), n(3, 4), y, 0.2, 0, desc="margin, none", nondiff=(2,)),
        S(n(3, 4), n(3, 4), y, 0.1, 2, desc="sum", nondiff=(2,)),
    ]


def _ranking_samples():
    y = np.array([1.0, -1.0, 1.0, -1.0])
    return [
        S(n(4), n(4), y, desc="default", nondiff=(2,)),
        S(n(4), n(4), y, 0.3, 0, desc="margin, none", nondiff=(2,)),
        S(n(4), n(4), y, 0.1, 2, desc="sum", nondiff=(2,)),
    ]


def _triplet_samples():
    a, p, q = n(3, 4), n(3, 4), n(3, 4)
    return [
        S(a, p, q, desc="default"),
        S(a, p, q, 0.5, 1.0, 1e-6, True, 0, desc="p 1, swap, none"),
        S(a, p, q, 1.0, 2.0, 1e-6, False, 2, desc="sum"),
    ]


def _rrelu_samples():
    return [S(n(3, 4), desc="eval"), S(n(3, 4), 0.1, 0.3, False, desc="bounds")]


def _pad_samples():
    return [
        S(n(2, 3), [1, 2], desc="last dim"),
        S(n(2, 3, 4), (1, 0, 2, 1), 1.5, desc="two dims, value"),
        S(n(2, 5), [-1, 2], desc="negative crops"),
        S(np.array([[1, 2]]), [1, 1], 7, desc="int"),
    ]


def _row_stack_samples():
    return [
        S([n(3), n(3)], desc="1-d"),
        S([n(2, 3), n(1, 3)], desc="2-d"),
    ]


def _range_samples():
    return [
        S(1, 4, desc="ints: float"),
        S(0, 1, 0.3, desc="float step"),
        S(1, 4, kwargs={"dtype": DT("int64")}, desc="int64"),
        S(3, 1, -1, desc="descending"),
        S(0.5, 2.5, 0.5, kwargs={"dtype": DT("float64")}, desc="float64"),
        S(1, 4, 0, desc="step 0 refused"),
        S(1, 4, -1, desc="wrong sign refused"),
    ]


def _scalar_tensor_samples():
    return [
        S(3, desc="int: float"),
        S(2.5, desc="float"),
        S(True, desc="bool: float"),
        S(3, kwargs={"dtype": DT("int64")}, desc="int64"),
        S(2.5, kwargs={"dtype": DT("float64")}, desc="float64"),
    ]


def _fill_samples():
    return [
        S(n(2, 3), 2.5, desc="number"),
        S(np.zeros((2, 3), np.int32), 2.7, desc="int32 truncates"),
        S(n(2, 3), np.array(1.5), desc="0-d tensor value", nondiff=(0,)),
        S(n(2, 3), np.array([1.5]), desc="1-d value refused"),
    ]


def _one_tensor():
    return [S(n(2, 3), desc="(2, 3)", grad=False), S(n(0), desc="empty", grad=False)]


def _same_size_samples():
    return [
        S(n(2, 3), n(2, 3), desc="same", grad=False),
        S(n(2, 3), n(3, 2), desc="different", grad=False),
    ]


def _typename_samples():
    return [
        S(n(2), desc="float64"),
        S(n(2).astype(np.float32), desc="float32"),
        S(np.array([1, 2]), desc="int64"),
        S(np.array([True]), desc="bool"),
        S(3, desc="int"),
        S(2.5, desc="float"),
    ]


TOP = ("T",)
OPS += [
    OpInfo("embedding", _embedding_samples, spellings=TOP, dtypes=FLOATS),
    OpInfo("kl_div", _kl_samples, spellings=TOP, dtypes=FLOATS),
    OpInfo("ctc_loss", _ctc_samples, spellings=TOP, rtol=1e-9, dtypes=("float32", "float64")),
    OpInfo("binary_cross_entropy_with_logits", _bce_samples, spellings=TOP, dtypes=FLOATS),
    OpInfo("batch_norm", _batch_norm_samples, spellings=TOP, rtol=1e-9, dtypes=FLOATS),
    OpInfo("instance_norm", _instance_norm_samples, spellings=TOP, rtol=1e-9, dtypes=FLOATS),
    OpInfo("alpha_dropout", _alpha_samples, spellings=TOP, dtypes=FLOATS),
    OpInfo("feature_alpha_dropout", _alpha_samples, spellings=TOP, dtypes=FLOATS),
    OpInfo("poisson_nll_loss", _poisson_samples, spellings=TOP, dtypes=FLOATS),
    OpInfo("hinge_embedding_loss", _hinge_samples, spellings=TOP, dtypes=FLOATS),
    OpInfo("cosine_embedding_loss", _pair_target_samples, spellings=TOP, rtol=1e-9, dtypes=FLOATS),
    OpInfo("margin_ranking_loss", _ranking_samples, spellings=TOP, dtypes=FLOATS),
    OpInfo("triplet_margin_loss", _triplet_samples, spellings=TOP, rtol=1e-9, dtypes=FLOATS),
    OpInfo("rrelu", _rrelu_samples, spellings=TOP, dtypes=FLOATS),
    OpInfo("constant_pad_nd", _pad_samples),
    OpInfo("row_stack", _row_stack_samples),
    OpInfo("range", _range_samples, grad=False, dtypes=()),
    OpInfo("scalar_tensor", _scalar_tensor_samples, grad=False, dtypes=()),
    OpInfo("fill", _fill_samples),
    OpInfo("detach", _one_tensor),
    OpInfo("is_same_size", _same_size_samples, dtypes=()),
    OpInfo("is_signed", _one_tensor),
    OpInfo("is_inference", _one_tensor, dtypes=()),
    OpInfo("typename", _typename_samples, grad=False, dtypes=()),
]


# ------------------------------------------------------------------------------ windows


def _window_samples(*extra):
    def make():
        return [
            S(8, desc="periodic"),
            S(7, False, desc="symmetric"),
            S(1, desc="length 1"),
            S(0, desc="length 0"),
            S(2, False, desc="length 2"),
            S(9, True, *extra, kwargs={"dtype": DT("float64")}, desc="float64"),
            S(6, False, *extra, kwargs={"dtype": DT("float32")}, desc="float32"),
            S(5, kwargs={"dtype": DT("float16")}, desc="float16"),
            S(5, kwargs={"dtype": DT("int64")}, desc="int64 refused"),
            S(-1, desc="negative refused"),
            S(4, kwargs={"requires_grad": True}, desc="requires_grad"),
        ]

    return make


OPS += [
    OpInfo("hann_window", _window_samples(), grad=False, dtypes=()),
    OpInfo("hamming_window", _window_samples(0.5, 0.4), grad=False, dtypes=()),
    OpInfo("blackman_window", _window_samples(), grad=False, dtypes=()),
    OpInfo("bartlett_window", _window_samples(), grad=False, dtypes=()),
    OpInfo("kaiser_window", _window_samples(5.0), grad=False, dtypes=()),
]


# ------------------------------------------------------------------- views written, and more


def _slice_scatter_samples():
    x = n(3, 4, 5)
    return [
        S(x, n(3, 2, 5), 1, 1, 4, 2, desc="dim 1, step 2"),
        S(x, n(1, 4, 5), desc="default: dim 0 whole", nondiff=()),
        S(x, n(3, 4, 2), -1, 3, desc="negative dim, start"),
        S(n(3, 4), n(3, 2), 1, None, 2, desc="end only", strided=True),
        S(x, n(3, 4, 5), 0, desc="whole"),
        S(x, n(3, 3, 5), 1, 1, 4, 2, desc="wrong src shape refused"),
        S(n(0, 3), n(0, 1), 1, 0, 1, desc="zero-size"),
    ]


def _select_scatter_samples():
    x = n(3, 4, 5)
    return [
        S(x, n(3, 5), 1, 2, desc="dim 1"),
        S(x, n(4, 5), 0, -1, desc="negative index"),
        S(n(3, 4), n(3), -1, 0, desc="last dim", strided=True),
        S(x, n(3, 4), 1, 2, desc="wrong src shape refused"),
    ]


def _diagonal_scatter_samples():
    return [
        S(n(4, 4), n(4), desc="main"),
        S(n(3, 5), n(3), 1, desc="offset 1"),
        S(n(3, 5), n(2), -1, desc="offset -1"),
        S(n(2, 3, 4), n(4, 2), 0, 0, 2, desc="dims 0, 2"),
        S(n(2, 3, 4), n(2, 3), -1, 2, 1, desc="dims 2, 1, offset -1"),
        S(n(3, 4), n(3), 0, desc="strided", strided=True),
        S(n(3, 4), n(0), 9, desc="empty diagonal"),
        S(n(3, 4), n(4), desc="wrong src shape refused"),
    ]


def _renorm_samples():
    x = n(3, 4, 5)
    return [
        S(x, 2, 1, 2.0, desc="p 2, dim 1"),
        S(x, 1, 0, 3.0, desc="p 1, dim 0"),
        S(x, 1.5, -1, 1.0, desc="p 1.5, last dim"),
        S(x, 2, 0, 100.0, desc="all below maxnorm"),
        S(n(3, 4), 3, 1, 0.5, desc="strided", strided=True),
        S(n(4), 2, 0, 0.5, desc="1-d refused"),
    ]


def _addr_samples():
    return [
        S(n(3, 4), n(3), n(4), desc="plain"),
        S(n(3, 4), n(3), n(4), kwargs={"beta": 0.5, "alpha": 2.0}, desc="beta, alpha"),
        S(n(4), n(3), n(4), desc="broadcast input"),
        S(np.full((3, 4), np.nan), n(3), n(4), kwargs={"beta": 0}, desc="beta 0", grad=False),
        S(n(3, 4), n(3), n(4), desc="strided", strided=True),
        S(n(3, 4), n(3, 1), n(4), desc="2-d vector refused"),
    ]


def _split_with_sizes_samples():
    x = n(5, 6)
    return [
        S(x, [2, 3], desc="dim 0"),
        S(x, [1, 0, 5], 1, desc="dim 1 with an empty piece"),
        S(x, (6,), -1, desc="one piece"),
        S(x, [2, 2], desc="wrong sum refused"),
    ]


OPS += [
    OpInfo("slice_scatter", _slice_scatter_samples),
    OpInfo("select_scatter", _select_scatter_samples),
    OpInfo("diagonal_scatter", _diagonal_scatter_samples),
    OpInfo("renorm", _renorm_samples, dtypes=FLOATS, rtol=1e-9),
    OpInfo("addr", _addr_samples, rtol=1e-9),
    OpInfo("split_with_sizes", _split_with_sizes_samples),
]


def _layout(lib, *args, **kwargs):
    """What empty_strided promises (its values are uninitialised in PyTorch): shape, strides,
    dtype."""
    out = lib.mod.empty_strided(*args, **kwargs)
    return tuple(out.shape), tuple(out.stride()), lib.dtype_of(out)


def _empty_strided_samples():
    return [
        S((2, 3), (1, 2), desc="column-major"),
        S((2, 3), (3, 1), kwargs={"dtype": DT("int32")}, desc="row-major int32"),
        S((4, 2), (0, 1), desc="broadcast stride 0"),
        S((0, 3), (3, 1), desc="zero-size"),
        S((), (), desc="0-d"),
        S((2, 3), (1,), desc="length mismatch refused"),
    ]


OPS.append(OpInfo("empty_strided", _empty_strided_samples, call=_layout, grad=False, dtypes=()))


# -------------------------------------------------- index_reduce, unique_consecutive, histogram


def _index_reduce_samples():
    x, s = n(5, 3), n(4, 3)
    idx = np.array([0, 4, 0, 2])
    out = []
    for reduce in ("prod", "mean", "amax", "amin"):
        out.append(S(x, 0, idx, s, reduce, desc=reduce))
        out.append(
            S(x, 0, idx, s, reduce, kwargs={"include_self": False}, desc=f"{reduce} no self")
        )
    out += [
        S(n(3, 5), 1, np.array([1, 1, 3]), n(3, 3), "amax", desc="dim 1"),
        S(n(3, 5), -1, np.array([0, 2]), n(3, 2), "mean", desc="strided", strided=True),
        S(np.array([[1, 2], [3, 4]]), 0, np.array([1, 1]), np.array([[5, 6], [7, 8]]), "mean",
          desc="int mean", grad=False),
        S(x, 0, idx, s, "sum", desc="sum refused"),
        S(x, 0, idx[:3], s, "prod", desc="index length refused"),
    ]  # fmt: skip
    return out


# (keywords: torch.unique_consecutive(x, False, True) returns (values, an empty tensor), its
# Python dispatch reading the flags by keyword; x.unique_consecutive(False, True) does not)
_BOTH = {"return_inverse": True, "return_counts": True}


def _unique_consecutive_samples():
    ints = np.array([1, 1, 2, 2, 3, 1, 1, 2])
    return [
        S(ints, desc="values"),
        S(ints, kwargs=_BOTH, desc="inverse and counts"),
        S(ints, kwargs={"return_counts": True}, desc="counts"),
        S(np.array([[1, 1], [1, 1], [2, 3], [1, 1]]), kwargs=dict(_BOTH, dim=0), desc="rows"),
        S(
            np.array([[1, 1, 2], [1, 1, 3]]),
            kwargs={"return_inverse": True, "dim": -1},
            desc="columns",
        ),
        S(np.array([[1, 1], [2, 2]]), kwargs={"return_inverse": True}, desc="2-d flat inverse"),
        S(
            np.array([np.nan, np.nan, 1.0, 1.0]),
            kwargs={"return_counts": True},
            desc="each NaN a run",
            grad=False,
        ),
        S(np.zeros(0), kwargs=_BOTH, desc="empty", grad=False),
    ]


def _histogram_samples():
    r = rng(11)
    return [
        S(np.array([1.0, 2.0, 1.0, 4.0]), 3, desc="3 bins", grad=False),
        S(r.standard_normal((20, 3)), 7, desc="2-d, 7 bins", grad=False),
        S(np.array([2.0, 2.0]), 2, desc="one value", grad=False),
        S(np.array([1.0, 2, 1, 4, 9]), 3, kwargs={"range": (0.0, 5.0)}, desc="range",
          grad=False),
        S(np.array([1.0, 2, 1, 4]), np.array([0.0, 1.5, 5.0]),
          kwargs={"weight": np.array([1.0, 2, 3, 4]), "density": True}, desc="edges, weight",
          grad=False),
        S(np.zeros(0), 3, desc="empty", grad=False),
        S(r.standard_normal(30), 4, kwargs={"density": True}, desc="density", grad=False),
        S(np.array([1.0, np.nan]), 3, desc="NaN refused", grad=False),
    ]  # fmt: skip


OPS += [
    OpInfo("index_reduce", _index_reduce_samples, dtypes=FLOATS),
    OpInfo("unique_consecutive", _unique_consecutive_samples, grad=False),
    OpInfo("histogram", _histogram_samples, grad=False),
]
