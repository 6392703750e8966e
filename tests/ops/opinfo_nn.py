"""OpInfos of the neural-network functions: activations, softmax, normalization, losses,
embedding and attention (see opinfo.py).

ember's activations, losses, normalizations, dropout and embedding tables are floating point
only (integer inputs are refused with a DTypeError, or promoted where PyTorch promotes), while a
few PyTorch CPU kernels take integers (threshold, hardtanh, relu6, l1_loss, an integer
embedding table, dropout with p=0): the dtype sweep of this module covers the floating dtypes,
and those differences are listed where they were found (``dtype_differences``)."""

import numpy as np

from .opinfo import ALL_DTYPES, FLOATS, OpInfo, Sample, away_from, rng

R = rng(50)


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def n(*shape):
    return R.standard_normal(shape)


ACT_SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, 30.0, -30.0, 0.5, -0.5])


def activation_samples(kinks=(0.0,), extra=(), scale=3.0, special=ACT_SPECIAL):
    def make():
        x = away_from(n(3, 4) * scale, kinks)
        return [
            S(x, desc="(3, 4)"),
            S(np.array(away_from(np.array([0.7]), kinks)[0]), desc="0-d"),
            S(np.zeros((0, 4)), desc="zero-size"),
            S(x, desc="strided", strided=True),
            S(special, desc="special values", grad_at_nan=False),
            S(np.array(kinks, dtype=np.float64), desc="at the kinks"),
            *extra,
        ]

    return make


_FLOAT_ONLY_CLAMPS = {
    d: "ember's hardtanh, relu6 and threshold are floating point only; PyTorch's clamp integers too"
    for d in ("bool", "uint8", "int8", "int16", "int32", "int64")
}


def act(name, kinks=(0.0,), extra=(), special=ACT_SPECIAL, **kw):
    return OpInfo(name, activation_samples(kinks, extra, special=special), **kw)


OPS = [
    act("gelu", extra=[S(n(3, 4), kwargs={"approximate": "tanh"}, desc="tanh approximation")]),
    act("silu"),
    act("mish"),
    act("elu", extra=[S(n(3, 4), 0.5, desc="alpha")]),
    act("celu", extra=[S(n(3, 4), 2.0, desc="alpha")]),
    act("selu"),
    act("leaky_relu", extra=[S(n(3, 4), 0.2, desc="slope")]),
    act("relu6", kinks=(0.0, 6.0), dtype_differences=_FLOAT_ONLY_CLAMPS),
    act(
        "hardtanh",
        kinks=(-1.0, 1.0),
        extra=[S(n(3, 4), -0.5, 0.5, desc="bounds")],
        dtype_differences=_FLOAT_ONLY_CLAMPS,
    ),
    act(
        "hardsigmoid",
        kinks=(-3.0, 3.0),
        grad_rtol=1e-7,  # (PyTorch's float64 backward multiplies by float32's 1/6)
    ),
    act(
        "hardswish",
        kinks=(-3.0, 3.0),
        # (without -inf: PyTorch's hardswish(-inf) is -inf * 0 = NaN, ember's the 0 it is for
        # every x <= -3)
        special=ACT_SPECIAL[ACT_SPECIAL != -np.inf],
    ),
    act("hardshrink", kinks=(-0.5, 0.5), extra=[S(n(3, 4), 0.2, desc="lambd")]),
    act("softshrink", kinks=(-0.5, 0.5), extra=[S(n(3, 4), 0.2, desc="lambd")]),
    act("tanhshrink"),
    act(
        "softsign",
        dtype_differences={
            "bool": "ember's softsign promotes bool like int (PyTorch's abs refuses it)"
        },
        inf_grads="ember's gradient at +-inf is the limit 0, PyTorch's quotient rule gives NaN",
    ),
    act("logsigmoid"),
    act(
        "softplus",
        kinks=(),
        extra=[S(n(3, 4) * 10, 2.0, 5.0, desc="beta and threshold")],
    ),
    OpInfo("relu", activation_samples(), spellings=("F",)),
    OpInfo("sigmoid", activation_samples(kinks=()), spellings=("F",)),
    OpInfo("tanh", activation_samples(kinks=()), spellings=("F",)),
]


def _threshold_samples():
    """The activation samples with threshold 0.3 and value -2 (0.3 is no float16 or bfloat16
    tie: PyTorch compares half-precision values with the threshold in float32, ember rounds the
    threshold to the tensor's dtype first)."""
    out = []
    for s in activation_samples(kinks=(0.3,))():
        out.append(
            Sample((*s.args, 0.3, -2.0), desc=s.desc, strided=s.strided, grad_at_nan=s.grad_at_nan)
        )
    return out + [S(n(3, 4), -0.5, 9.0, desc="negative threshold")]


OPS.append(OpInfo("threshold", _threshold_samples, dtype_differences=_FLOAT_ONLY_CLAMPS))


def _inplace_functional(name, *args):
    """``F.relu_(x)`` and friends (and ``F.elu(x, inplace=True)``) on a non-leaf copy."""

    def call(lib, x, *extra, **kwargs):
        target = x * 1
        fn = getattr(lib.F, name, None) or getattr(lib.mod, name)
        out = fn(target, *args, *extra, **kwargs)
        assert out is target
        return out

    return call


for _name, _args in [
    ("relu_", ()),
    ("elu_", ()),
    ("celu_", ()),
    ("selu_", ()),
    ("hardtanh_", ()),
    ("leaky_relu_", ()),
    ("threshold_", (0.3, -2.0)),
]:
    OPS.append(
        OpInfo(
            _name,
            activation_samples(kinks=(0.3, -1.0, 1.0, 0.0)),
            call=_inplace_functional(_name, *_args),
            dtype_differences=_FLOAT_ONLY_CLAMPS if _name in ("hardtanh_", "threshold_") else {},
        )
    )


def _glu_samples():
    return [
        S(n(3, 4), desc="last"),
        S(n(4, 3), 0, desc="dim 0"),
        S(n(2, 4, 2), -2, desc="negative"),
    ]


def _prelu_samples():
    return [
        S(n(2, 3, 4), np.array([0.25, -0.5, 2.0]), desc="per channel"),
        S(away_from(n(2, 3)), np.array([0.1]), desc="one weight"),
    ]


OPS += [
    OpInfo("glu", _glu_samples),
    OpInfo("prelu", _prelu_samples),
]


# ---------------------------------------------------------------------------- softmax


def _softmax_samples():
    big = np.array([[1000.0, 1000.0, -1000.0], [-np.inf, 0.0, 1.0]])
    return [
        S(n(3, 4), 1, desc="dim 1"),
        S(n(2, 3, 4), -1, desc="negative dim"),
        S(n(2, 3, 4), 0, desc="dim 0"),
        S(big, 1, desc="large and -inf"),
        S(np.full((2, 3), -np.inf), 1, desc="all -inf", grad=False),
        S(np.zeros((0, 3)), 1, desc="zero-size"),
        S(n(3, 4), 1, desc="strided", strided=True),
        S(n(3, 4), 1, kwargs={"dtype": None}, desc="dtype=None"),
    ]


OPS += [
    OpInfo("softmax", _softmax_samples),
    OpInfo("log_softmax", _softmax_samples),
    OpInfo("softmin", _softmax_samples),
]


# ---------------------------------------------------------------------- normalization


def _layer_norm_samples():
    x = n(2, 3, 4)
    return [
        S(x, (4,), n(4), n(4), desc="weight and bias"),
        S(x, (3, 4), desc="two dims, no affine"),
        S(x, [4], kwargs={"eps": 1e-2}, desc="eps"),
        S(x, (4,), n(4), n(4), desc="strided", strided=True),
    ]


def _rms_norm_samples():
    x = n(2, 3, 4)
    return [
        S(x, (4,), n(4), desc="weight"),
        S(x, (3, 4), desc="two dims"),
        S(x, (4,), kwargs={"eps": 1e-3}, desc="eps"),
    ]


def _group_norm_samples():
    x = n(2, 6, 3, 2)
    return [
        S(x, 3, n(6), n(6), desc="3 groups"),
        S(x, 1, desc="one group"),
        S(x, 6, kwargs={"eps": 1e-3}, desc="per channel"),
    ]


def _batch_norm_samples():
    x = n(4, 3, 5)
    mean, var = n(3), np.abs(n(3)) + 0.5
    return [
        S(x, mean, var, n(3), n(3), desc="eval", nondiff=(1, 2)),
        S(x, None, None, n(3), n(3), kwargs={"training": True}, desc="training, no stats"),
        S(x[:, :, 0], mean, var, kwargs={"training": False}, desc="2-d eval", nondiff=(1, 2)),
        S(x, None, None, kwargs={"training": True, "eps": 1e-3}, desc="eps"),
    ]


def _instance_norm_samples():
    x = n(2, 3, 5)
    return [
        S(x, desc="plain"),
        S(x, kwargs={"weight": n(3), "bias": n(3)}, desc="affine"),
        S(n(2, 3, 4, 4), desc="2-d"),
    ]


def _normalize_samples():
    return [
        S(n(3, 4), desc="default"),
        S(n(3, 4), 1.0, 0, desc="p=1, dim 0"),
        S(n(2, 3, 4), 3.0, -1, desc="p=3"),
        S(np.zeros((2, 3)), desc="zeros (eps)", grad=False),
    ]


OPS += [
    OpInfo("layer_norm", _layer_norm_samples, rtol=1e-9),
    OpInfo("rms_norm", _rms_norm_samples, rtol=1e-9),
    OpInfo("group_norm", _group_norm_samples, rtol=1e-9),
    OpInfo("batch_norm", _batch_norm_samples, spellings=("F",), rtol=1e-9),
    OpInfo("instance_norm", _instance_norm_samples, spellings=("F",), rtol=1e-9),
    OpInfo("normalize", _normalize_samples, rtol=1e-9),
]


# ----------------------------------------------------------------------------- losses


def _pair_loss_samples(kwarg_sets):
    def make():
        x, y = n(3, 4), n(3, 4)
        out = [S(x, y, kwargs=kw, desc=str(kw)) for kw in kwarg_sets]
        out.append(S(x[0], y[0], desc="1-d"))
        out.append(S(x, y, desc="strided", strided=True))
        return out

    return make


_REDUCTIONS = [{}, {"reduction": "sum"}, {"reduction": "none"}]

OPS += [
    OpInfo("mse_loss", _pair_loss_samples(_REDUCTIONS)),
    OpInfo("l1_loss", _pair_loss_samples(_REDUCTIONS)),
    OpInfo("smooth_l1_loss", _pair_loss_samples(_REDUCTIONS + [{"beta": 0.5}])),
    OpInfo("huber_loss", _pair_loss_samples(_REDUCTIONS + [{"delta": 0.5}])),
]


def _bce_samples():
    p = R.uniform(0.05, 0.95, (3, 4))
    t = R.uniform(0, 1, (3, 4))
    return [
        S(p, t, desc="mean"),
        S(p, t, kwargs={"reduction": "none"}, desc="none"),
        S(p, t, kwargs={"weight": R.uniform(0.5, 2, (4,))}, desc="weight", nondiff=("weight",)),
        # (values only at p = 0 and 1: ember's gradient is the clamped loss's derivative, 1 at
        # p = 0 with target 0; PyTorch's backward formula (p - t) / max(p (1 - p), 1e-12) is 0)
        S(
            np.array([0.0, 1.0, 0.5]),
            np.array([0.0, 1.0, 1.0]),
            desc="0 and 1 (clamped logs)",
            grad=False,
        ),
    ]


def _bce_logits_samples():
    x, t = n(3, 4) * 3, R.uniform(0, 1, (3, 4))
    return [
        S(x, t, desc="mean"),
        S(x, t, kwargs={"reduction": "sum"}, desc="sum"),
        S(
            x,
            t,
            kwargs={"pos_weight": R.uniform(0.5, 2, (4,))},
            desc="pos_weight",
            nondiff=("pos_weight",),
        ),
        S(x, t, kwargs={"weight": R.uniform(0.5, 2, (3, 1))}, desc="weight", nondiff=("weight",)),
        S(np.array([100.0, -100.0]), np.array([0.0, 1.0]), desc="large logits"),
    ]


def _cross_entropy_samples():
    x = n(4, 5)
    t = np.array([1, 0, 4, 2])
    return [
        S(x, t, desc="class indices"),
        S(x, t, kwargs={"reduction": "sum"}, desc="sum"),
        S(x, t, kwargs={"weight": R.uniform(0.5, 2, 5)}, desc="weight", nondiff=("weight",)),
        S(x, np.array([1, -100, 4, 2]), desc="ignore_index"),
        S(x, t, kwargs={"label_smoothing": 0.1}, desc="label smoothing"),
        S(x, R.dirichlet(np.ones(5), 4), desc="probabilities", nondiff=(1,)),
        S(n(2, 5, 3), np.array([[0, 1, 4], [2, 2, 0]]), desc="spatial"),
        S(x, t, kwargs={"reduction": "none"}, desc="none"),
    ]


def _linear_cross_entropy_samples():
    x, w, b = n(4, 3), n(5, 3), n(5)
    t = np.array([1, 0, 4, 2])
    return [
        S(x, w, t, desc="class indices"),
        S(x, w, t, kwargs={"linear_bias": b, "reduction": "sum"}, desc="bias, sum"),
        S(x, w, t, kwargs={"weight": R.uniform(0.5, 2, 5)}, desc="weight", nondiff=("weight",)),
        S(x, w, np.array([1, -100, 4, 2]), desc="ignore_index None: -100"),
        S(x, w, np.array([1, 3, 4, 2]), kwargs={"ignore_index": 3}, desc="ignore_index"),
        S(x, w, t, kwargs={"label_smoothing": 0.1, "reduction": "none"}, desc="smoothing"),
        S(n(2, 3, 3), w, np.array([[0, 1, 4], [2, 2, 0]]), desc="batch of sequences"),
    ]


def _nll_samples():
    x = n(4, 5)
    t = np.array([1, 0, 4, 2])
    return [
        S(x, t, desc="mean"),
        S(x, t, kwargs={"weight": R.uniform(0.5, 2, 5)}, desc="weight", nondiff=("weight",)),
        S(x, np.array([1, -100, 4, 2]), desc="ignore_index"),
        S(x, t, kwargs={"reduction": "none"}, desc="none"),
    ]


def _kl_samples():
    logp = np.log(R.dirichlet(np.ones(4), 3))
    q = R.dirichlet(np.ones(4), 3)
    return [
        S(logp, q, kwargs={"reduction": "batchmean"}, desc="batchmean"),
        S(logp, q, kwargs={"reduction": "sum"}, desc="sum"),
        S(logp, np.log(q), kwargs={"log_target": True, "reduction": "mean"}, desc="log_target"),
        # (no gradient for a zero target: its derivative is -inf, which neither gives)
        S(
            logp,
            np.array([[0.0, 0.5, 0.5, 0.0]] * 3),
            kwargs={"reduction": "none"},
            desc="zeros",
            nondiff=(1,),
        ),
    ]


OPS += [
    OpInfo("binary_cross_entropy", _bce_samples),
    OpInfo("binary_cross_entropy_with_logits", _bce_logits_samples, spellings=("F",)),
    OpInfo("cross_entropy", _cross_entropy_samples),
    OpInfo("nll_loss", _nll_samples),
    OpInfo("linear_cross_entropy", _linear_cross_entropy_samples, spellings=("F",)),
    OpInfo("kl_div", _kl_samples, spellings=("F",)),
]


# ------------------------------------------------------------------ embedding, attention


def _embedding_samples():
    w = n(6, 3)
    return [
        S(np.array([[0, 2], [5, 2]]), w, desc="2-d indices"),
        S(np.array([1, 1, 3]), w, kwargs={"padding_idx": 1}, desc="padding_idx"),
        S(np.zeros(0, np.int64), w, desc="empty"),
    ]


def _sdpa_samples():
    q, k, v = n(2, 3, 4), n(2, 5, 4), n(2, 5, 6)
    mask = R.standard_normal((3, 5)) > -0.5
    return [
        S(q, k, v, desc="plain"),
        S(q, k, v, kwargs={"attn_mask": mask}, desc="bool mask"),
        S(q, k, v, kwargs={"attn_mask": n(3, 5)}, desc="float mask", nondiff=()),
        S(q, n(2, 3, 4), n(2, 3, 6), kwargs={"is_causal": True}, desc="causal"),
        S(q, k, v, kwargs={"scale": 0.3}, desc="scale"),
        S(n(1, 4, 3, 4), n(1, 2, 5, 4), n(1, 2, 5, 6), kwargs={"enable_gqa": True}, desc="gqa"),
    ]


OPS += [
    OpInfo("embedding", _embedding_samples, spellings=("F",)),
    OpInfo("scaled_dot_product_attention", _sdpa_samples, rtol=1e-9),
]


# ------------------------------------------------------------------------------ dropout


def _dropout_off():
    x = n(2, 3, 4, 5)
    return [
        S(x, 0.0, desc="p=0"),
        S(x, 0.5, False, desc="not training"),
    ]


OPS += [
    OpInfo(name, _dropout_off, spellings=("F",)) for name in ("dropout1d", "dropout2d", "dropout3d")
]
# (torch.dropout requires its train argument: ember's top-level dropout is F.dropout)
OPS.append(OpInfo("dropout", _dropout_off, torch_spellings={"T": "F"}))

for _op in OPS:  # the float sweep (see the module docstring), unless an entry says otherwise
    if _op.dtypes == ALL_DTYPES and not _op.dtype_differences:
        _op.dtypes = FLOATS
