"""OpInfos of the third bug hunt's additions (see opinfo.py): fractional max pooling with
given ``_random_samples`` (PyTorch's windows), multi_head_attention_forward, the LU family and
the ``*_ex`` forms of torch.linalg."""

import numpy as np

from .opinfo import FLOATS, OpInfo, Sample, rng

R = rng(3303)


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def n(*shape):
    return R.standard_normal(shape)


def _fractional_samples(d):
    spatial = (9, 11, 10)[:d] if d == 2 else (7, 8, 9)
    x = n(2, 3, *spatial)
    u = R.random((2, 3, d))
    fixed = {"_random_samples": u}
    half = (0.5,) * d
    return [
        S(
            x,
            3,
            kwargs={"output_size": (4,) * d, **fixed},
            desc="output_size",
            nondiff=("_random_samples",),
        ),
        S(
            x,
            2,
            kwargs={"output_ratio": half, **fixed},
            desc="output_ratio",
            nondiff=("_random_samples",),
        ),
        S(
            x,
            (2, 3, 2)[:d],
            kwargs={"output_size": (5,) * d, "return_indices": True, **fixed},
            desc="indices",
            nondiff=("_random_samples",),
        ),
        S(
            x[0],
            2,
            kwargs={"output_size": (1,) * d, "_random_samples": u[:1]},
            desc="unbatched, one window",
            nondiff=("_random_samples",),
        ),
        S(
            x,
            2,
            kwargs={"output_size": (3,) * d, **fixed},
            desc="strided",
            strided=True,
            nondiff=("_random_samples",),
        ),
    ]


def _mha_samples():
    L, S_, N, E, H = 4, 5, 2, 6, 2
    q, k, v = n(L, N, E), n(S_, N, E), n(S_, N, E)
    w, b, ow, ob = n(3 * E, E) * 0.4, n(3 * E), n(E, E) * 0.4, n(E)
    bk, bv = n(1, 1, E), n(1, 1, E)
    causal = np.triu(np.ones((L, L), dtype=bool), 1)
    pad_mask = np.zeros((N, S_), dtype=bool)
    pad_mask[1, -2:] = True
    base = (E, H, w, b, None, None, False, 0.0, ow, ob)
    off = {"training": False}
    return [
        S(q, k, v, *base, kwargs=off, desc="cross attention, weights averaged"),
        S(
            q,
            q,
            q,
            *base,
            kwargs={**off, "attn_mask": causal, "is_causal": True},
            desc="self attention, causal bool mask",
        ),
        S(
            q,
            k,
            v,
            *base,
            kwargs={**off, "key_padding_mask": pad_mask, "average_attn_weights": False},
            desc="padding, per head",
        ),
        S(
            q,
            k,
            v,
            E,
            H,
            w,
            b,
            bk,
            bv,
            True,
            0.0,
            ow,
            ob,
            kwargs={**off, "need_weights": False},
            desc="bias_kv, zero attention, no weights",
        ),
        S(
            q,
            k,
            v,
            E,
            H,
            None,
            b,
            None,
            None,
            False,
            0.0,
            ow,
            None,
            kwargs={
                **off,
                "use_separate_proj_weight": True,
                "q_proj_weight": n(E, E),
                "k_proj_weight": n(E, E),
                "v_proj_weight": n(E, E),
                "attn_mask": n(L, S_),
            },
            desc="separate projections, float mask",
        ),
        S(
            q,
            k,
            v,
            *base,
            kwargs={**off, "static_k": n(N * H, 3, E // H), "static_v": n(N * H, 3, E // H)},
            desc="static key/value",
        ),
        S(q[:, 0], k[:, 0], v[:, 0], *base, kwargs=off, desc="unbatched"),
    ]


OPS = [
    OpInfo("fractional_max_pool2d", lambda: _fractional_samples(2), sweep=1,
           dtypes=FLOATS),
    OpInfo("fractional_max_pool3d", lambda: _fractional_samples(3), sweep=1,
           dtypes=FLOATS),
    OpInfo("multi_head_attention_forward", _mha_samples, dtypes=("float32", "float64"),
           rtol=1e-9, atol=1e-11),
]  # fmt: skip
