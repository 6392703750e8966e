"""Conformance samples for functional/activation.py and functional/softmax.py.

Each activation runs twice: on inputs away from its kinks (gradients checked by finite
differences and against PyTorch) and on inputs exactly at its kinks and clipping points, where
only PyTorch's gradient convention is checked (finite differences are meaningless there).
"""

import numpy as np

import ember
from ember.functional.softmax import stable_softmax

from .harness import Sample, away_from, rng

F = ember.nn.functional
r = rng(7)
A = r.standard_normal((3, 4)) * 3
# the kinks of every activation here: 0, +-0.5 (shrink), +-1 (hardtanh), +-3 (hardsigmoid,
# hardswish), 6 (relu6), 2.5 (softplus with beta=2, threshold=5), 20 (softplus' threshold)
KINKS = np.array([[-3.0, -1.0, -0.5, 0.0], [0.5, 1.0, 3.0, 6.0], [2.5, 20.0, -6.0, 0.25]])
SMOOTH = away_from(A, points=(0.0, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 6.0, 2.5), margin=0.05)


def TF():
    return __import__("torch").nn.functional


SAMPLES = []


def act(name, kwargs=None, smooth=True):
    kwargs = kwargs or {}
    tag = ",".join(f"{k}={v}" for k, v in kwargs.items())
    for label, x, fd in (("smooth", SMOOTH, True), ("kinks", KINKS, False)):
        if label == "smooth" and not smooth:
            continue
        SAMPLES.append(
            Sample(
                f"F.{name}({tag})/{label}",
                lambda t, n=name, kw=kwargs: getattr(F, n)(t, **kw),
                (x,),
                torch_fn=lambda t, n=name, kw=kwargs: getattr(TF(), n)(t, **kw),
                fd=fd,
            )
        )


act("gelu")
act("gelu", {"approximate": "tanh"})
act("silu")
act("leaky_relu")
act("leaky_relu", {"negative_slope": 0.2})
act("elu")
act("elu", {"alpha": 0.5})
act("selu")
act("celu", {"alpha": 2.0})
act("softplus")
act("softplus", {"beta": 2.0, "threshold": 5.0})
act("hardtanh")
act("hardtanh", {"min_val": -0.5, "max_val": 3.0})
act("relu6")
act("hardsigmoid")  # PyTorch's slope is 1.0f / 6 in float32: within the harness's rtol
act("hardswish")
act("mish")
act("softsign")
act("tanhshrink")
act("logsigmoid")
act("threshold", {"threshold": 0.5, "value": -2.0})
act("hardshrink")
act("softshrink", {"lambd": 0.5})

W3 = np.array([0.1, -0.3, 0.25])
X3 = away_from(r.standard_normal((2, 3, 2)))
SAMPLES += [
    Sample(
        "F.prelu/channels",
        lambda x, w: F.prelu(x, w),
        (X3, W3),
        torch_fn=lambda x, w: TF().prelu(x, w),
    ),
    Sample(
        "F.prelu/scalar-weight",
        lambda x, w: F.prelu(x, w),
        (X3, np.array([0.2])),
        torch_fn=lambda x, w: TF().prelu(x, w),
    ),
    Sample(
        "F.prelu/kinks",
        lambda x, w: F.prelu(x, w),
        (np.array([[0.0, 1.0, -1.0], [0.0, 0.0, 2.0]]), W3),
        torch_fn=lambda x, w: TF().prelu(x, w),
        fd=False,
    ),
    Sample(
        "F.glu/dim-1",
        lambda x: F.glu(x, 1),
        (r.standard_normal((2, 4, 3)),),
        torch_fn=lambda x: TF().glu(x, 1),
    ),
]

# ------------------------------------------------------------------------------ softmax family
S3 = r.standard_normal((2, 3, 4))
LARGE = r.standard_normal((3, 5)) * 100  # logits far apart: the naive formulas overflow
for dim in (0, 1, -1):
    SAMPLES += [
        Sample(
            f"softmax/dim{dim}",
            lambda x, d=dim: ember.softmax(x, d),
            (S3,),
            torch_fn=lambda x, d=dim: x.softmax(d),
        ),
        Sample(
            f"log_softmax/dim{dim}",
            lambda x, d=dim: x.log_softmax(d),
            (S3,),
            torch_fn=lambda x, d=dim: x.log_softmax(d),
        ),
        Sample(
            f"F.softmin/dim{dim}",
            lambda x, d=dim: F.softmin(x, d),
            (S3,),
            torch_fn=lambda x, d=dim: TF().softmin(x, d),
        ),
    ]
SAMPLES += [
    Sample(
        "log_softmax/large-logits",
        lambda x: F.log_softmax(x, 1),
        (LARGE,),
        torch_fn=lambda x: TF().log_softmax(x, 1),
    ),
    Sample(
        "softmax/large-logits",
        lambda x: F.softmax(x, 1),
        (LARGE,),
        torch_fn=lambda x: TF().softmax(x, 1),
    ),
    Sample(
        "softmax/1d",
        lambda x: F.softmax(x, 0),
        (r.standard_normal(5),),
        torch_fn=lambda x: TF().softmax(x, 0),
    ),
    Sample(
        "log_softmax/dtype-arg",
        lambda x: F.log_softmax(x, -1, dtype=ember.float64),
        (S3,),
        torch_fn=lambda x: TF().log_softmax(x, -1, dtype=__import__("torch").float64),
    ),
    Sample(
        "softmax+log_softmax/0d",
        lambda x: (F.softmax(x, 0), F.log_softmax(x, 0)),
        (np.array(0.7),),
        torch_fn=lambda x: (TF().softmax(x, 0), TF().log_softmax(x, 0)),
    ),
    Sample(
        "softmax/masked-rows-safe",  # attention's fully masked rows: zeros, not NaN
        lambda x: stable_softmax(
            ember.where(ember.tensor([[True], [False]]), x, float("-inf")), 1, safe=True
        ),
        (r.standard_normal((2, 4)),),
        fd=True,
    ),
]
