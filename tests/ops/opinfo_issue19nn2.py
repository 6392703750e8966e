"""OpInfos of issue 19's long tail of nn.functional (see opinfo.py): the margin / soft-margin /
Poisson / Gaussian / hinge-embedding losses, rrelu, the alpha dropouts, channel_shuffle,
local_response_norm, max_unpool and lp_pool."""

import numpy as np

from .opinfo import ALL_DTYPES, FLOATS, OpInfo, Sample, away_from, rng

R = rng(1922)


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def n(*shape):
    return R.standard_normal(shape)


def _signs(*shape):
    return np.where(R.standard_normal(shape) > 0, 1.0, -1.0)


_REDUCTIONS = ("mean", "sum", "none")

# ------------------------------------------------------------------------------------ losses


def _soft_margin_samples():
    x, y = n(4, 5), _signs(4, 5)
    out = [S(x, y, kwargs={"reduction": r}, desc=r, nondiff=(1,)) for r in _REDUCTIONS]
    return out + [
        S(x, y, desc="strided", strided=True, nondiff=(1,)),
        S(n(6), _signs(6), desc="1-D", nondiff=(1,)),
        S(x * 30, y, desc="large margins", nondiff=(1,)),
        S(
            np.zeros((0, 3)),
            np.zeros((0, 3)),
            kwargs={"reduction": "sum"},
            desc="empty",
            nondiff=(1,),
        ),
        S(x, y, kwargs={"reduction": "avg"}, desc="bad reduction (refused)", nondiff=(1,)),
    ]


def _multilabel_soft_margin_samples():
    x, y = n(4, 5), (R.random((4, 5)) > 0.5) * 1.0
    out = [S(x, y, kwargs={"reduction": r}, desc=r) for r in _REDUCTIONS]
    return out + [
        S(x, y, R.random(5), desc="weight"),
        S(x, y, kwargs={"weight": R.random((4, 1)), "reduction": "none"}, desc="row weight"),
        S(x, y, desc="strided", strided=True),
        S(n(2, 3, 5), R.random((2, 3, 5)), desc="3-D (probabilities)"),
    ]


def _multi_margin_samples():
    x, t, w = away_from(n(4, 5)), np.array([0, 3, 4, 3]), R.random(5)
    out = []
    for p in (1, 2):
        for r in _REDUCTIONS:
            out.append(S(x, t, kwargs={"p": p, "reduction": r}, desc=f"p={p} {r}"))
        # (PyTorch does not differentiate the class weights)
        kw = {"p": p, "margin": 0.6, "weight": w}
        out.append(S(x, t, kwargs=kw, desc=f"p={p} weight", nondiff=("weight",)))
    return out + [
        S(x[0], np.array(2), desc="1-D"),
        S(x, t, desc="strided", strided=True),
        S(x, t, kwargs={"p": 3}, desc="p=3 (refused)"),
        S(x, np.array([0, 5, 1, 1]), desc="class out of range (refused)"),
    ]


def _multilabel_margin_samples():
    x = away_from(n(4, 5))
    t = np.array([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 1, 1, 1], [4, 4, -1, 0, 0]])
    out = [S(x, t, kwargs={"reduction": r}, desc=r) for r in _REDUCTIONS]
    return out + [
        S(x[0], t[0], desc="1-D"),
        S(x, t, desc="strided", strided=True),
        S(x, t[:, :3], desc="shape mismatch (refused)"),
    ]


def _poisson_samples():
    x, y = n(4, 5), R.poisson(2.0, (4, 5)).astype(np.float64)
    pos = np.abs(x) + 0.1
    out = []
    for r in _REDUCTIONS:
        out.append(S(x, y, kwargs={"reduction": r}, desc=f"log_input {r}"))
        out.append(S(pos, y, kwargs={"log_input": False, "reduction": r}, desc=f"rates {r}"))
    return out + [
        # (the target's gradient is left out: PyTorch's is NaN where the target is 0)
        S(x, y, kwargs={"full": True}, desc="full", nondiff=(1,)),
        S(
            pos,
            y,
            kwargs={"log_input": False, "full": True, "eps": 1e-3},
            desc="full rates",
            nondiff=(1,),
        ),  # noqa: E501
        S(x, y, desc="strided", strided=True),
    ]


def _gaussian_samples():
    x, y = n(4, 5), n(4, 5)
    v = R.random((4, 5)) + 0.05
    out = [S(x, y, v, kwargs={"reduction": r}, desc=r) for r in _REDUCTIONS]
    return out + [
        S(x, y, v, kwargs={"full": True}, desc="full"),
        S(x, y, R.random(4) + 0.1, desc="var without the last dim"),
        S(x, y, R.random((4, 1)) + 0.1, desc="var of one column"),
        S(x, y, R.random((1, 5)) + 0.1, desc="var of one row"),
        S(x, y, R.random((4, 5)) * 1e-8, kwargs={"eps": 1e-6}, desc="var below eps (clamped)"),
        S(x, y, v, desc="strided", strided=True),
        S(x, y, -v, desc="negative var (refused)"),
        S(x, y, R.random((2, 5)), desc="var of a wrong size (refused)"),
    ]


def _hinge_embedding_samples():
    x, y = away_from(n(4, 5)), _signs(4, 5)
    out = [S(x, y, kwargs={"reduction": r}, desc=r, nondiff=(1,)) for r in _REDUCTIONS]
    return out + [
        S(x, y, kwargs={"margin": 0.3}, desc="margin", nondiff=(1,)),
        S(x, y, desc="strided", strided=True, nondiff=(1,)),
    ]


# ------------------------------------------------------------------------------ activations


def _rrelu_samples():
    x = away_from(n(3, 4))
    return [
        S(x, desc="default"),
        S(x, 0.1, 0.3, desc="bounds"),
        S(x, kwargs={"lower": 0.2, "upper": 0.2, "training": True}, desc="training, fixed slope"),
        S(x, desc="strided", strided=True),
        S(np.zeros((0, 2)), desc="empty"),
    ]


def _rrelu_inplace(lib, x, *args, **kwargs):
    target = x * 1
    out = lib.F.rrelu_(target, *args, **kwargs)
    assert out is target
    return out


def _alpha_dropout_samples():
    x = n(3, 4, 2)
    return [
        S(x, desc="eval (identity)"),
        S(x, 0.3, False, desc="p=0.3 eval"),
        S(x, 0.0, True, desc="p=0 training"),
        S(x, 1.0, True, desc="p=1 training (zeros)", grad=False),
        S(x, 1.5, desc="p > 1 (refused)"),
    ]


def _alpha_dropout_random_samples():
    return [S(n(40, 30, 2), 0.4, True, desc="training")]


def _alpha_dropout_check(out):
    """Dropped units all share one value; the mean stays near 0 and the std near 1."""
    y = out.numpy().astype(np.float64)
    values, counts = np.unique(y, return_counts=True)
    assert counts.max() > y.size * 0.2  # the dropped units' common value
    assert abs(y.mean()) < 0.15 and abs(y.std() - 1) < 0.15


def _channel_shuffle_samples():
    return [
        S(n(2, 6, 3, 2), 3, desc="4-D"),
        S(n(2, 6, 5), 2, desc="3-D"),
        S(n(1, 4, 2, 2, 2), 4, desc="5-D, groups = channels"),
        S(n(2, 6, 3, 2), 3, desc="strided", strided=True),
        S(n(2, 6, 5), 4, desc="channels not divisible (refused)"),
    ]


def _lrn_samples():
    x = n(2, 6, 4, 3)
    out = [S(x, size, desc=f"size {size}") for size in (1, 2, 3, 5)]
    return out + [
        S(x, 3, 0.1, 0.5, 2.0, desc="alpha beta k"),
        S(x[:, :, 0], 2, desc="3-D"),
        S(n(1, 4, 2, 3, 2), 3, desc="5-D"),
        S(x, 3, desc="strided", strided=True),
        S(np.zeros((0, 3, 2)), 2, desc="empty"),
        S(n(3, 4), 2, desc="2-D (refused)"),
    ]


# ---------------------------------------------------------------------------------- pooling


def _unpool_samples(nd: int):
    import torch

    def make():
        out = []
        spatial = (6, 4, 4)[:nd]
        for kernel, stride, padding in ((2, None, 0), (3, 2, 1)):
            x = R.standard_normal((2, 3) + spatial)
            pool = getattr(torch.nn.functional, f"max_pool{nd}d")
            values, indices = pool(torch.tensor(x), kernel, stride, padding, return_indices=True)
            v, i = values.numpy(), indices.numpy()
            kw = {"stride": stride, "padding": padding, "output_size": spatial}
            out.append(S(v, i, kernel, kwargs=kw, desc=f"k{kernel} s{stride} p{padding}"))
            out.append(S(v[0], i[0], kernel, kwargs=kw, desc=f"unbatched k{kernel}"))
        v, i = pool(torch.tensor(R.standard_normal((2, 3) + spatial)), 2, return_indices=True)
        out += [
            S(v.numpy(), i.numpy(), 2, desc="default output size"),
            S(v.numpy(), i.numpy(), 2, desc="strided", strided=True),
            S(
                v.numpy(),
                i.numpy(),
                (2,) * nd,
                kwargs={"output_size": (2, 3) + spatial},
                desc="output_size with N, C",
            ),  # noqa: E501
            S(v.numpy(), i.numpy() * 0 + 999, 2, desc="index out of range (refused)"),
            S(
                v.numpy(),
                i.numpy(),
                2,
                kwargs={"output_size": (1,) * nd},
                desc="output_size too small (refused)",
            ),  # noqa: E501
        ]
        return out

    return make


def _lp_samples(nd: int):
    def make():
        shape = (2, 3) + (6, 5, 4)[:nd]
        x = np.abs(n(*shape)) + 0.1
        out = []
        for p in (1.0, 2.0, 3.5, float("inf")):
            out.append(S(x, p, 2, desc=f"p={p}"))
        return out + [
            S(x, 2, 3, kwargs={"stride": 1}, desc="stride 1"),
            S(x, 2.0, 3, kwargs={"stride": 2, "ceil_mode": True}, desc="ceil_mode"),
            S(x, 2.0, 2, desc="strided", strided=True),
            S(x[0], 2.0, 2, desc="unbatched"),
            S(-x, 3.0, 2, desc="negative input, odd power"),
        ]

    return make


_HALF = {
    d: "ember computes it in half precision as in any other; PyTorch's CPU kernel (or the "
    "avg_pool3d it is built on) takes no float16/bfloat16"
    for d in ("float16", "bfloat16")
}

OPS = [
    OpInfo("soft_margin_loss", _soft_margin_samples, dtypes=FLOATS),
    OpInfo("multilabel_soft_margin_loss", _multilabel_soft_margin_samples, dtypes=FLOATS),
    OpInfo(
        "multi_margin_loss", dtype_differences=_HALF, samples=_multi_margin_samples, dtypes=FLOATS
    ),
    OpInfo(
        "multilabel_margin_loss",
        dtype_differences=_HALF,
        samples=_multilabel_margin_samples,
        dtypes=FLOATS,
    ),
    OpInfo("poisson_nll_loss", _poisson_samples, spellings=("F",), dtypes=FLOATS),
    OpInfo("gaussian_nll_loss", _gaussian_samples, dtypes=FLOATS),
    OpInfo("hinge_embedding_loss", _hinge_embedding_samples, spellings=("F",), dtypes=FLOATS),
    OpInfo("rrelu", _rrelu_samples, spellings=("F",), dtypes=FLOATS),
    OpInfo("rrelu_", _rrelu_samples, call=_rrelu_inplace, dtypes=FLOATS),
    OpInfo("alpha_dropout", _alpha_dropout_samples, spellings=("F",), dtypes=FLOATS),
    OpInfo(
        "alpha_dropout",
        _alpha_dropout_random_samples,
        spellings=("F",),
        random=True,
        check=_alpha_dropout_check,
        grad=False,
        dtypes=("float32", "float64"),
    ),
    OpInfo("feature_alpha_dropout", _alpha_dropout_samples, spellings=("F",), dtypes=FLOATS),
    OpInfo(
        "feature_alpha_dropout",
        _alpha_dropout_random_samples,
        spellings=("F",),
        random=True,
        check=_alpha_dropout_check,
        grad=False,
        dtypes=("float32", "float64"),
    ),
    OpInfo("channel_shuffle", _channel_shuffle_samples, dtypes=ALL_DTYPES),
    # (values only: PyTorch has no derivative for native_channel_shuffle)
    OpInfo("native_channel_shuffle", _channel_shuffle_samples, dtypes=ALL_DTYPES, grad=False),
    OpInfo("local_response_norm", dtype_differences=_HALF, samples=_lrn_samples, dtypes=FLOATS),
]
for _nd in (1, 2, 3):
    OPS.append(OpInfo(f"max_unpool{_nd}d", _unpool_samples(_nd), dtypes=FLOATS))
    _diff = _HALF if _nd == 3 else {}
    OPS.append(OpInfo(f"lp_pool{_nd}d", _lp_samples(_nd), dtypes=FLOATS, dtype_differences=_diff))


# ---------------------------------------------------------------- distances and aliases


def _pdist_samples():
    x = n(5, 3)
    return [
        S(x, desc="p=2"),
        S(x, 1.0, desc="p=1"),
        S(x, 3.0, desc="p=3"),
        S(x, float("inf"), desc="p=inf"),
        S(x, desc="strided", strided=True),
        S(n(1, 3), desc="one row (empty)"),
        S(n(2, 3, 2), desc="3-D (refused)"),
    ]


def _triplet_distance_samples():
    a, p, q = n(4, 3), n(4, 3), n(4, 3)
    out = [S(a, p, q, kwargs={"reduction": r}, desc=r) for r in _REDUCTIONS]
    return out + [
        S(a, p, q, kwargs={"swap": True, "margin": 0.5}, desc="swap"),
        S(a[0], p[0], q[0], desc="1-D"),
        S(a, p, q, kwargs={"margin": 0.0}, desc="margin 0 (refused)"),
        S(a, p, q[0], desc="ranks differ (refused)"),
    ]


def _cosine_distance(lib, a, p, q, **kwargs):
    def dist(x, y):
        return 1.0 - lib.F.cosine_similarity(x, y)

    return lib.F.triplet_margin_with_distance_loss(a, p, q, distance_function=dist, **kwargs)


def _with_indices_samples(nd: int, adaptive: bool):
    def make():
        x = n(2, 3, *(6, 5, 4)[:nd])
        if adaptive:
            return [S(x, 3, desc="size 3"), S(x, 2, desc="strided", strided=True)]
        return [
            S(x, 2, desc="kernel 2"),
            S(x, 3, 2, 1, desc="kernel 3 stride 2 padding 1"),
            S(x, 2, desc="strided", strided=True),
        ]

    return make


OPS += [
    OpInfo("pdist", _pdist_samples, dtypes=FLOATS, dtype_differences=_HALF),
    OpInfo("triplet_margin_with_distance_loss", _triplet_distance_samples, dtypes=FLOATS),
    OpInfo(
        "triplet_margin_with_distance_loss",
        lambda: _triplet_distance_samples()[:4],
        call=_cosine_distance,
        dtypes=FLOATS,
    ),
]
for _nd in (1, 2, 3):
    for _adaptive, _prefix in ((False, "max_pool"), (True, "adaptive_max_pool")):
        _samples = _with_indices_samples(_nd, _adaptive)
        OPS.append(OpInfo(f"{_prefix}{_nd}d_with_indices", _samples, dtypes=FLOATS))
