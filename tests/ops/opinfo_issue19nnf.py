"""OpInfos of the nn.functional additions of issue 19 (see opinfo.py): resampling
(interpolate, grid_sample, affine_grid), patches (unfold, fold, pixel shuffles),
embedding_bag, gumbel_softmax, distances, the margin / triplet / cosine-embedding / CTC losses,
and ``F.relu(x, inplace=True)``."""

import numpy as np

from .opinfo import ALL_DTYPES, FLOATS, OpInfo, Sample, away_from, rng

R = rng(190)
_INTS = tuple(d for d in ALL_DTYPES if d not in FLOATS)


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def n(*shape):
    return R.standard_normal(shape)


# ------------------------------------------------------------------------------- interpolate


def _interpolate_samples():
    x3, x4, x5 = n(2, 3, 5), n(2, 2, 5, 4), n(1, 2, 3, 4, 3)
    out = [S(x4, desc="strided", kwargs={"size": (7, 3)}, strided=True)]
    for x, linear in ((x3, "linear"), (x4, "bilinear"), (x5, "trilinear")):
        d = x.ndim
        for kw in (
            {"size": 7},
            {"size": 3},
            {"scale_factor": 2},
            {"scale_factor": 1.7},
            {"scale_factor": 0.6},
            {"scale_factor": 1.7, "recompute_scale_factor": True},
            {"size": 4, "mode": "nearest-exact"},
            {"scale_factor": 2.3, "mode": "nearest-exact"},
            {"size": 3, "mode": "area"},
            {"size": 7, "mode": linear},
            {"size": 2, "mode": linear},
            {"scale_factor": 1.7, "mode": linear},
            {"scale_factor": 0.6, "mode": linear},
            {"scale_factor": 1.7, "mode": linear, "align_corners": True},
            {"size": 9, "mode": linear, "align_corners": True},
            {"size": 1, "mode": linear, "align_corners": True},
        ):
            out.append(S(x, kwargs=kw, desc=f"{d}-D {kw}"))
    out += [
        S(x4, kwargs={"size": (3, 8), "mode": "bilinear"}, desc="per-dim size"),
        S(x4, kwargs={"size": (9, 2), "mode": "bicubic"}, desc="bicubic"),
        S(x4, kwargs={"scale_factor": 1.7, "mode": "bicubic"}, desc="bicubic, scale"),
        S(x4, kwargs={"size": 6, "mode": "bicubic", "align_corners": True}, desc="bicubic, ac"),
        S(x3, kwargs={"size": 4, "mode": "bicubic"}, desc="bicubic on 3-D (refused)"),
        S(x4, kwargs={"scale_factor": (0.5, 2.0)}, desc="per-dim scale"),
        S(np.zeros((0, 2, 3, 3)), kwargs={"size": 5, "mode": "bilinear"}, desc="empty batch"),
        S(x3, kwargs={"size": 4, "mode": "bilinear"}, desc="bilinear on 3-D (refused)"),
        S(x4, kwargs={"size": 4, "align_corners": True}, desc="align_corners with nearest"),
        S(x4, desc="neither size nor scale (refused)"),
    ]
    # PyTorch's antialiased filter: downsampling stretches it, upsampling keeps bilinear and
    # takes a = -0.5 for bicubic
    big = n(2, 2, 11, 9)
    for mode in ("bilinear", "bicubic"):
        for kw in (
            {"size": (4, 3)},
            {"scale_factor": 0.3},
            {"scale_factor": (0.25, 1.7)},
            {"size": (13, 12)},
            {"size": (3, 3), "align_corners": True},
            {"scale_factor": 0.5, "recompute_scale_factor": True},
            {"size": (1, 1)},
        ):
            out.append(
                S(big, kwargs={"mode": mode, "antialias": True, **kw}, desc=f"aa {mode} {kw}")
            )
    out += [
        S(
            big,
            kwargs={"size": (4, 3), "mode": "bilinear", "antialias": True},
            strided=True,
            desc="aa strided",
        ),
        S(x3, kwargs={"size": 2, "mode": "linear", "antialias": True}, desc="aa linear (refused)"),
        S(x4, kwargs={"size": 2, "antialias": True}, desc="aa nearest (refused)"),
    ]
    return out


def _upsample_samples():
    x = n(2, 2, 3, 4)
    return [
        S(x, 5, desc="size"),
        S(x, None, 1.5, desc="scale"),
        S(x, (4, 7), kwargs={"mode": "bilinear"}, desc="bilinear (upsample only)", only=("F",)),
    ]


# ------------------------------------------------------------------------------ patches


def _unfold_samples():
    x = n(2, 3, 5, 6)
    return [
        S(x, 2, desc="kernel 2"),
        S(x, (2, 3), kwargs={"dilation": (1, 2), "padding": 1, "stride": (2, 1)}, desc="all"),
        S(x[0], 3, desc="unbatched"),
        S(x, (2, 2), desc="strided", strided=True),
        S(x, 7, desc="too large (refused)"),
    ]


def _fold_samples():
    return [
        S(n(2, 12, 20), (5, 6), 2, desc="kernel 2"),
        S(
            n(2, 18, 12),
            (5, 6),
            (2, 3),
            kwargs={"dilation": (1, 2), "padding": 1, "stride": (2, 1)},
            desc="all",
        ),
        S(n(12, 20), (5, 6), 2, desc="unbatched"),
        S(n(2, 12, 19), (5, 6), 2, desc="wrong block count (refused)"),
    ]


def _pixel_shuffle_samples():
    return [
        S(n(2, 8, 3, 2), 2, desc="(N, C, H, W)"),
        S(n(9, 2, 2), 3, desc="unbatched"),
        S(n(2, 1, 8, 2, 2), 2, desc="extra batch dim"),
        S(n(2, 8, 3, 2), 2, desc="strided", strided=True),
        S(n(2, 6, 3, 2), 2, desc="channels not divisible (refused)"),
    ]


def _pixel_unshuffle_samples():
    return [
        S(n(2, 2, 4, 6), 2, desc="(N, C, H, W)"),
        S(n(2, 6, 3), 3, desc="unbatched"),
        S(n(2, 2, 4, 6), 2, desc="strided", strided=True),
        S(n(2, 2, 5, 6), 2, desc="height not divisible (refused)"),
    ]


# ---------------------------------------------------------------------------- grid sample


def _grid_sample_samples():
    img = n(2, 3, 4, 5)
    out = []
    for ac in (False, True):
        for pm in ("zeros", "border", "reflection"):
            for mode in ("bilinear", "nearest", "bicubic"):
                kw = {"mode": mode, "padding_mode": pm, "align_corners": ac}
                out.append(S(img, R.uniform(-1.3, 1.3, (2, 3, 6, 2)), kwargs=kw, desc=str(kw)))
                out.append(S(img, R.uniform(-3.4, 3.4, (2, 2, 3, 2)), kwargs=kw, desc=f"far {kw}"))
    vol = n(2, 2, 3, 4, 3)
    for mode, pm, ac, span in (
        ("bilinear", "zeros", False, 1.3),
        ("bilinear", "reflection", True, 2.5),
        ("bilinear", "border", True, 1.6),
        ("nearest", "border", False, 1.3),
    ):
        kw = {"mode": mode, "padding_mode": pm, "align_corners": ac}
        out.append(S(vol, R.uniform(-span, span, (2, 2, 3, 2, 3)), kwargs=kw, desc=f"5-D {kw}"))
    grid = R.uniform(-1, 1, (2, 3, 6, 2))
    special = grid.copy()
    special[0, 0, :4, 0] = [np.nan, np.inf, -np.inf, 1e20]
    special[1, 1, :3, 1] = [np.nan, -1e20, np.inf]
    for pm in ("zeros", "border", "reflection"):
        kw = {"padding_mode": pm, "align_corners": False}
        # (PyTorch's gradient at NaN positions is its own: forward only)
        out.append(S(img, special, kwargs=kw, desc=f"NaN and Inf {pm}", grad=False))
    out += [
        S(img, grid, kwargs={"align_corners": False}, desc="strided", strided=True),
        S(n(1, 2, 1, 1), grid[:1], kwargs={"align_corners": False}, desc="1x1 image"),
        S(img, grid[:1], kwargs={"align_corners": False}, desc="batch mismatch (refused)"),
        S(img, grid, kwargs={"mode": "cubic", "align_corners": False}, desc="bad mode (refused)"),
    ]
    return out


def _affine_grid_samples():
    return [
        S(n(2, 2, 3), [2, 3, 4, 5], kwargs={"align_corners": False}, desc="2-D"),
        S(n(2, 2, 3), [2, 3, 4, 5], kwargs={"align_corners": True}, desc="2-D aligned"),
        S(n(2, 3, 4), [2, 3, 2, 4, 5], kwargs={"align_corners": False}, desc="3-D"),
        S(n(2, 3, 4), [2, 3, 2, 4, 5], kwargs={"align_corners": True}, desc="3-D aligned"),
        S(n(1, 2, 3), [1, 1, 1, 3], kwargs={"align_corners": False}, desc="unit height"),
        S(n(2, 2, 3), [2, 3, 4], kwargs={"align_corners": False}, desc="3 sizes (refused)"),
    ]


# ---------------------------------------------------------------------------- embedding_bag

_W = n(7, 3)
_I2 = np.array([[0, 2, 2], [5, 1, 6]])
_I1 = np.array([1, 2, 4, 4, 3, 6, 0, 5])
_OFF = np.array([0, 3, 3, 5])


def _embedding_bag_samples():
    out = []
    for mode in ("sum", "mean", "max"):
        m = {"mode": mode}
        out += [
            S(_I2, _W, kwargs=m, desc=f"2-D {mode}"),
            S(_I1, _W, _OFF, kwargs=m, desc=f"offsets {mode}"),
            S(_I1, _W, _OFF, kwargs={**m, "include_last_offset": True}, desc=f"last {mode}"),
            S(_I1, _W, _OFF, kwargs={**m, "padding_idx": 4}, desc=f"padding_idx {mode}"),
            # (a bag of padding only: a zero row; the kept entries counted from the data)
            S(
                np.array([[4, 4], [1, 4]]),
                _W,
                kwargs={**m, "padding_idx": 4},
                desc=f"2-D, a bag of padding {mode}",
            ),
            S(_I2, _W, kwargs={**m, "max_norm": 1.0}, desc=f"max_norm {mode}", grad=False),
        ]
    out += [
        S(
            _I1,
            _W,
            _OFF,
            kwargs={"mode": "sum", "per_sample_weights": n(8)},
            desc="per_sample_weights",
        ),
        # (values only: PyTorch's CPU gradient halves some indices that occur once, see the
        # docstring; ember's scales every index by its count as F.embedding does)
        S(_I2, _W, kwargs={"scale_grad_by_freq": True}, desc="scale_grad_by_freq", grad=False),
        S(np.zeros(0, np.int64), _W, np.array([0, 0]), desc="empty bags"),
        S(_I1, _W, kwargs={"mode": "max"}, desc="1-D without offsets (refused)"),
        S(
            _I1,
            _W,
            _OFF,
            kwargs={"mode": "mean", "per_sample_weights": n(8)},
            desc="per_sample_weights with mean (refused)",
        ),
    ]
    return out


# ------------------------------------------------------------------------------ gumbel


def _gumbel_samples():
    return [
        S(n(4, 5), desc="soft"),
        S(n(4, 5), kwargs={"tau": 0.3, "hard": True}, desc="hard"),
        S(n(2, 5, 3), kwargs={"dim": 1, "hard": True}, desc="dim 1"),
    ]


def _gumbel_check(out):
    y = out.numpy().astype(np.float64)
    assert np.all(y >= 0) and np.all(y <= 1)
    d = -1 if y.shape[-1] == 5 else 1
    np.testing.assert_allclose(y.sum(d), 1.0, rtol=1e-3)


# ------------------------------------------------------------------------------ distances


def _cosine_samples():
    a, b = n(3, 4), n(3, 4)
    return [
        S(a, b, desc="dim 1"),
        S(a, b, kwargs={"dim": 0}, desc="dim 0"),
        S(a, b, kwargs={"dim": -1, "eps": 1e-3}, desc="eps"),
        S(np.zeros((3, 4)), b, desc="a zero vector"),
        S(a[:, :1] * 1e-9, b, desc="below eps (clamped)"),
        S(a[:1], b, kwargs={"dim": -1}, desc="broadcast"),
        S(a, b, desc="strided", strided=True),
    ]


def _pairwise_samples():
    a, b = n(3, 4), n(3, 4)
    return [
        S(a, b, desc="p=2"),
        S(a, b, 1.0, desc="p=1"),
        S(a, b, 3.0, kwargs={"keepdim": True}, desc="p=3 keepdim"),
        S(a, b, float("inf"), desc="p=inf"),
        S(a, b, 0.0, desc="p=0"),
        S(a, b, kwargs={"eps": 0.1}, desc="eps"),
        S(a[0], b, desc="broadcast"),
        S(a, a, desc="equal inputs"),
        S(a, b, desc="strided", strided=True),
    ]


def _triplet_samples():
    a, p, q = n(3, 4), n(3, 4), n(3, 4)
    return [
        S(a, p, q, desc="mean"),
        S(a, p, q, kwargs={"swap": True, "margin": 0.5, "reduction": "none"}, desc="swap"),
        S(a, p, q, kwargs={"p": 1, "reduction": "sum"}, desc="p=1 sum"),
        S(a[0], p[0], q[0], desc="1-D"),
    ]


def _margin_ranking_samples():
    x, y = away_from(n(5)), n(5)
    t = np.array([1.0, -1.0, 1.0, 1.0, -1.0])
    return [
        S(x, y, t, desc="mean", nondiff=(2,)),
        S(x, y, t, kwargs={"margin": 0.3, "reduction": "none"}, desc="margin", nondiff=(2,)),
        S(x, y, t, kwargs={"reduction": "sum"}, desc="sum", nondiff=(2,)),
    ]


def _cosine_embedding_samples():
    a, b = n(3, 4), n(3, 4)
    t = np.array([1, -1, 1])
    return [
        S(a, b, t, desc="mean"),
        S(a, b, t, kwargs={"margin": -0.5, "reduction": "none"}, desc="margin"),
        S(a, b, t, kwargs={"reduction": "sum"}, desc="sum"),
        S(a[0], b[0], np.array(-1), desc="1-D"),
    ]


def _ctc_samples():
    steps, batch, classes = 6, 3, 5
    lp = np.log(R.dirichlet(np.ones(classes), (steps, batch)))
    tg = np.array([[1, 2, 2, 3], [3, 3, 1, 1], [4, 1, 3, 2]])
    il, tl = np.array([6, 5, 4]), np.array([3, 2, 4])
    flat = np.concatenate([tg[0, :3], tg[1, :2], tg[2, :4]])
    return [
        S(lp, tg, il, tl, desc="mean"),
        S(lp, tg, il, tl, kwargs={"reduction": "sum"}, desc="sum"),
        S(lp, tg, il, tl, kwargs={"reduction": "none"}, desc="none"),
        S(lp, flat, il, tl, kwargs={"reduction": "none"}, desc="concatenated targets"),
        S(lp, tg, (6, 5, 4), (3, 2, 4), desc="lengths as tuples"),
        S(lp, tg - 1, il, tl, kwargs={"blank": 4}, desc="blank 4"),
        # tg[1] = 3 3 needs 3 steps; tg[2] needs 4 steps and gets 3: an infinite loss
        S(
            lp,
            tg,
            np.array([6, 2, 3]),
            tl,
            kwargs={"zero_infinity": True, "reduction": "none"},
            desc="zero_infinity",
        ),
        S(lp[:, 0], tg[0, :3], np.array(6), np.array(3), desc="unbatched"),
    ]


def _relu_inplace(lib, x, **kwargs):
    target = x * 1
    out = lib.F.relu(target, inplace=True)
    assert out is target
    return out


def _relu_samples():
    x = away_from(n(3, 4))
    return [S(x, desc="(3, 4)"), S(np.zeros((0, 2)), desc="empty")]


OPS = [
    OpInfo("interpolate", _interpolate_samples, rtol=1e-9),
    OpInfo("upsample", _upsample_samples),
    OpInfo("upsample_nearest", lambda: _upsample_samples()[:2]),
    OpInfo("upsample_bilinear", lambda: _upsample_samples()[:2]),
    OpInfo(
        "unfold",
        _unfold_samples,
        dtypes=ALL_DTYPES,
        dtype_differences={
            d: "ember's unfold is an index_select, for every dtype; PyTorch's im2col CPU kernel "
            "takes no integers"
            for d in _INTS
            if d != "bool"
        },
    ),
    OpInfo("fold", _fold_samples),
    OpInfo("pixel_shuffle", _pixel_shuffle_samples, dtypes=ALL_DTYPES),
    OpInfo("pixel_unshuffle", _pixel_unshuffle_samples, dtypes=ALL_DTYPES),
    OpInfo("grid_sample", _grid_sample_samples, rtol=1e-9),
    OpInfo("affine_grid", _affine_grid_samples, rtol=1e-9),
    OpInfo("embedding_bag", _embedding_bag_samples),
    OpInfo("gumbel_softmax", _gumbel_samples, random=True, check=_gumbel_check, grad=False),
    OpInfo("cosine_similarity", _cosine_samples, rtol=1e-9),
    OpInfo("pairwise_distance", _pairwise_samples, rtol=1e-9),
    OpInfo("triplet_margin_loss", _triplet_samples, spellings=("F",), rtol=1e-9),
    OpInfo("margin_ranking_loss", _margin_ranking_samples, spellings=("F",)),
    OpInfo("cosine_embedding_loss", _cosine_embedding_samples, spellings=("F",), rtol=1e-9),
    OpInfo("ctc_loss", _ctc_samples, spellings=("F",), rtol=1e-9, dtypes=("float32", "float64")),
    OpInfo("relu", _relu_samples, call=_relu_inplace, spellings=("F",)),
]

for _op in OPS:
    if _op.dtypes == ALL_DTYPES and _op.name not in ("unfold", "pixel_shuffle", "pixel_unshuffle"):
        _op.dtypes = FLOATS

INTERNAL = {
    "grid_sample_backward": "(its VJP only) grid_sample's backward op: its VJP, the second "
    "derivative, is checked against PyTorch's double backward and by finite differences in "
    "tests/ops/samples_grid_sample.py, and eagerly for every mode in tests/ops/test_grid_sample.py"
}
