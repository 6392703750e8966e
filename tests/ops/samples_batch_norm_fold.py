"""Conformance samples for ``batch_norm_fold`` (ops/batch_norm.py): an inference batch norm
folded into a convolution's weight (rows scaled, the shift shaped to be added after it), into a
grouped transposed convolution's weight (columns within groups) with a bias already there, and
into a linear layer's weight and bias. No gradient (the op is made by a pass after autodiff)."""

from ember.ops._registry import apply
from ember.ops.batch_norm import BATCH_NORM_FOLD

from .harness import Sample, rng

r = rng(23)
C = 6
STATS = (r.standard_normal(C), r.uniform(0.5, 2.0, C), r.standard_normal(C), r.standard_normal(C))
W_CONV = r.standard_normal((C, 2, 3, 3))
W_T = r.standard_normal((4, C // 2, 2, 2))  # (Cin, Cout / groups, K), groups 2
W_LIN = r.standard_normal((C, 5))
SHIFT = r.standard_normal(C)
EPS = 1e-3


def torch():
    return __import__("torch")


def _torch_terms(mean, var, weight, bias):
    scale = weight / torch().sqrt(var + EPS)
    return scale, bias - mean * scale


def _fold(w, mean, var, weight, bias, *shift, groups, axis, shift_shape):
    return apply(
        BATCH_NORM_FOLD,
        w,
        mean,
        var,
        weight,
        bias,
        *shift,
        eps=EPS,
        groups=groups,
        axis=axis,
        shift_shape=shift_shape,
    )


def _torch_conv(w, mean, var, weight, bias):
    s, t = _torch_terms(mean, var, weight, bias)
    return w * s.reshape(C, 1, 1, 1), t.reshape(1, C, 1, 1)


def _torch_transposed(w, mean, var, weight, bias, shift):
    s, t = _torch_terms(mean, var, weight, bias)
    grouped = w.reshape(2, 2, C // 2, 2, 2) * s.reshape(2, 1, C // 2, 1, 1)
    return grouped.reshape(w.shape), t + shift * s


def _torch_linear(w, mean, var, weight, bias, shift):
    s, t = _torch_terms(mean, var, weight, bias)
    return w * s[:, None], t + shift * s


SAMPLES = [
    Sample(
        "batch_norm_fold/conv",
        lambda w, *a: _fold(w, *a, groups=1, axis=0, shift_shape=(1, C, 1, 1)),
        (W_CONV, *STATS),
        torch_fn=_torch_conv,
        grad=False,
    ),
    Sample(
        "batch_norm_fold/transposed-groups-with-bias",
        lambda w, *a: _fold(w, *a, groups=2, axis=1, shift_shape=(C,)),
        (W_T, *STATS, SHIFT),
        torch_fn=_torch_transposed,
        grad=False,
    ),
    Sample(
        "batch_norm_fold/linear",
        lambda w, *a: _fold(w, *a, groups=1, axis=0, shift_shape=(C,)),
        (W_LIN, *STATS, SHIFT),
        torch_fn=_torch_linear,
        grad=False,
    ),
]
