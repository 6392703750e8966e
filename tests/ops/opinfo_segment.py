"""OpInfo entries for ops/segment.py's public function: ``segment_reduce`` against
torch.segment_reduce (offsets and lengths, empty segments, another axis, NaN)."""

import numpy as np

from .opinfo import FLOATS, OpInfo, Sample, rng

R = rng(241)
X = R.standard_normal((6, 4))
NAN = X.copy()
NAN[1, 2] = np.nan
NAN[4, 0] = np.inf
OFFSETS = np.array([0, 2, 2, 6])
LENGTHS = np.array([3, 0, 1, 2])


def S(*args, desc="", **kw):
    return Sample(args, desc=desc, **kw)


def _call(lib, x, reduce, segments, how="offsets", axis=0):
    return lib.mod.segment_reduce(x, reduce, **{how: segments}, axis=axis)


def _samples():
    out = []
    for reduce in ("sum", "mean", "max", "min"):
        out += [
            S(X, reduce, np.array([0, 2, 3, 6]), desc=f"{reduce} offsets"),
            S(X, reduce, np.array([1, 3, 2]), "lengths", desc=f"{reduce} lengths"),
            S(X, reduce, OFFSETS, desc=f"{reduce} empty segment", grad=False),
            S(
                X,
                reduce,
                np.array([0, 1, 4]),
                "offsets",
                1,
                desc=f"{reduce} axis 1 refused",
                grad=False,
            ),
            S(X, reduce, np.array([2, 4]), "lengths", desc=f"{reduce} strided", strided=True),
            S(NAN, reduce, LENGTHS, "lengths", desc=f"{reduce} NaN and inf", grad=False),
        ]
    out.append(S(X, "sum", np.array([2, 4]), desc="offsets not from 0", grad=False))
    return out


_PARTIAL = (
    "ember refuses offsets that do not start at 0 and end at the data's length (row splits); "
    "PyTorch reduces the segments they name and ignores the rest of the data"
)


def _dtype_samples(dtype):
    from .opinfo import cast_array

    return [S(cast_array(X, dtype), "sum", np.array([0, 2, 3, 6]), desc=f"sum as {dtype}")]


OPS = [
    OpInfo(
        "segment_reduce",
        _samples,
        call=_call,
        dtype_samples=_dtype_samples,
        dtypes=FLOATS + ("int64", "int32"),
        differences={"offsets not from 0": _PARTIAL},
    ),
]

INTERNAL = {
    "segment_expand": "ember.ragged's per-row broadcast and the segment reductions' VJP (its "
    "forward runs in segment_reduce's gradients here); tests/ops/samples_segment.py checks it "
    "and its VJP against PyTorch's repeat_interleave",
    "varlen_attention": "ember.ragged.varlen_attention (not a torch-public CPU function: "
    "PyTorch's varlen_attn needs CUDA); tests/ops/samples_segment.py checks it and its VJP "
    "against scaled_dot_product_attention per sequence, tests/ragged/ the packed BERT",
    "varlen_attention_grad": "varlen_attention's VJP (tests/ops/samples_segment.py)",
}
