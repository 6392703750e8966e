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
        S(x, 3, kwargs={"output_size": (4,) * d, **fixed}, desc="output_size",
          nondiff=("_random_samples",)),
        S(x, 2, kwargs={"output_ratio": half, **fixed}, desc="output_ratio",
          nondiff=("_random_samples",)),
        S(x, (2, 3, 2)[:d], kwargs={"output_size": (5,) * d, "return_indices": True, **fixed},
          desc="indices", nondiff=("_random_samples",)),
        S(x[0], 2, kwargs={"output_size": (1,) * d, "_random_samples": u[:1]},
          desc="unbatched, one window", nondiff=("_random_samples",)),
        S(x, 2, kwargs={"output_size": (3,) * d, **fixed}, desc="strided", strided=True,
          nondiff=("_random_samples",)),
    ]


OPS = [
    OpInfo("fractional_max_pool2d", lambda: _fractional_samples(2), sweep=1,
           dtypes=FLOATS),
    OpInfo("fractional_max_pool3d", lambda: _fractional_samples(3), sweep=1,
           dtypes=FLOATS),
]  # fmt: skip
