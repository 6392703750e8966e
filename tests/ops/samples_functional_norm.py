"""Conformance samples for functional/normalization.py and functional/dropout.py.

batch_norm / instance_norm in training also return their running buffers after the call (in
samples without gradients, since the buffers are updated outside the graph), compared with the
buffers PyTorch updates from the same starting values.
"""

import numpy as np

import ember

from .harness import Sample, rng

F = ember.nn.functional
r = rng(11)
X = r.standard_normal((2, 3, 4))
X4 = r.standard_normal((2, 3, 2, 2))
C3 = r.standard_normal(3)
C3B = r.standard_normal(3)
RM = r.standard_normal(3) * 0.1
RV = r.uniform(0.5, 2.0, 3)


def torch():
    return __import__("torch")


def TF():
    return torch().nn.functional


def _buffers(module, *arrays):
    return [module.tensor(a.copy()) for a in arrays]


def _bn_with_stats(lib, fn, x, w, b, **kw):
    # (the statistics in x's dtype: PyTorch refuses float64 ones beside a float32 input)
    rm, rv = (t.to(x.dtype) for t in _buffers(lib, RM, RV))
    y = fn(x, rm, rv, w, b, **kw)
    return y, rm, rv


SAMPLES = [
    # ------------------------------------------------------------------------------ layer norm
    Sample(
        "F.layer_norm/trailing-2-dims",
        lambda x, w, b: F.layer_norm(x, (3, 4), w, b),
        (X, r.standard_normal((3, 4)), r.standard_normal((3, 4))),
        torch_fn=lambda x, w, b: TF().layer_norm(x, (3, 4), w, b),
    ),
    Sample(
        "F.layer_norm/last-dim-no-affine",
        lambda x: F.layer_norm(x, 4, eps=1e-3),
        (X,),
        torch_fn=lambda x: TF().layer_norm(x, (4,), eps=1e-3),
    ),
    Sample(
        "F.rms_norm/weight",
        lambda x, w: F.rms_norm(x, (4,), w),
        (X, r.standard_normal(4)),
        torch_fn=lambda x, w: TF().rms_norm(x, (4,), w),
    ),
    Sample(
        "F.rms_norm/eps",
        lambda x: F.rms_norm(x, (3, 4), eps=1e-2),
        (X,),
        torch_fn=lambda x: TF().rms_norm(x, (3, 4), eps=1e-2),
    ),
    # ------------------------------------------------------------------------------ batch norm
    Sample(
        "F.batch_norm/train-4d",
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        (X4, C3, C3B),
        torch_fn=lambda x, w, b: TF().batch_norm(x, None, None, w, b, training=True),
    ),
    Sample(
        "F.batch_norm/train-2d-no-affine",
        lambda x: F.batch_norm(x, None, None, training=True, eps=1e-3),
        (r.standard_normal((4, 3)),),
        torch_fn=lambda x: TF().batch_norm(x, None, None, training=True, eps=1e-3),
    ),
    Sample(
        "F.batch_norm/train-running-stats",
        lambda x, w, b: _bn_with_stats(ember, F.batch_norm, x, w, b, training=True, momentum=0.3),
        (X, C3, C3B),
        torch_fn=lambda x, w, b: _bn_with_stats(
            torch(), TF().batch_norm, x, w, b, training=True, momentum=0.3
        ),
        grad=False,
    ),
    Sample(
        "F.batch_norm/eval",
        lambda x, w, b: F.batch_norm(
            x, ember.tensor(RM, dtype=x.dtype), ember.tensor(RV, dtype=x.dtype), w, b
        ),
        (X4, C3, C3B),
        torch_fn=lambda x, w, b: TF().batch_norm(
            x, torch().tensor(RM, dtype=x.dtype), torch().tensor(RV, dtype=x.dtype), w, b
        ),
    ),
    # --------------------------------------------------------------------------- instance norm
    Sample(
        "F.instance_norm/affine",
        lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
        (X4, C3, C3B),
        torch_fn=lambda x, w, b: TF().instance_norm(x, weight=w, bias=b),
    ),
    Sample(
        "F.instance_norm/running-stats",
        lambda x: _bn_with_stats(ember, F.instance_norm, x, None, None, momentum=0.2),
        (X,),
        torch_fn=lambda x: _bn_with_stats(torch(), TF().instance_norm, x, None, None, momentum=0.2),
        grad=False,
    ),
    Sample(
        "F.instance_norm/use-running-stats",
        lambda x: F.instance_norm(x, ember.tensor(RM), ember.tensor(RV), use_input_stats=False),
        (X,),
        torch_fn=lambda x: TF().instance_norm(
            x, torch().tensor(RM), torch().tensor(RV), use_input_stats=False
        ),
    ),
    # ------------------------------------------------------------------------------ group norm
    Sample(
        "F.group_norm/3-groups",
        lambda x, w, b: F.group_norm(x, 3, w, b),
        (r.standard_normal((2, 6, 2)), r.standard_normal(6), r.standard_normal(6)),
        torch_fn=lambda x, w, b: TF().group_norm(x, 3, w, b),
    ),
    Sample(
        "F.group_norm/4d-no-affine",
        lambda x: ember.group_norm(x, 2, eps=1e-3),
        (r.standard_normal((2, 4, 2, 2)),),
        torch_fn=lambda x: TF().group_norm(x, 2, eps=1e-3),
    ),
]

# -------------------------------------------------------------------------------- normalize
for p in (2.0, 1.0, 3.0, float("inf")):
    SAMPLES.append(
        Sample(
            f"F.normalize/p={p}",
            lambda x, p=p: F.normalize(x, p=p, dim=1),
            (r.standard_normal((3, 4, 2)),),
            torch_fn=lambda x, p=p: TF().normalize(x, p=p, dim=1),
        )
    )
SAMPLES.append(
    Sample(
        "F.normalize/zero-row",
        lambda x: F.normalize(x, dim=-1),
        (np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]]),),
        torch_fn=lambda x: TF().normalize(x, dim=-1),
        fd=False,  # the norm's kink at zero
    )
)

# ---------------------------------------------------------------------------------- dropout
# A fixed generator makes the mask the same on every call, so finite differences are valid;
# the statistics of the masks are tested in tests/test_functional.py.
SAMPLES += [
    Sample(
        "F.dropout/train-seeded",
        lambda x: F.dropout(x, 0.4, generator=ember.Generator(3)),
        (r.standard_normal((3, 5)),),
    ),
    Sample(
        "F.dropout2d/train-seeded",
        lambda x: F.dropout2d(x, 0.5, generator=ember.Generator(4)),
        (X4,),
    ),
    Sample(
        "F.dropout/eval-is-identity",
        lambda x: F.dropout(x, 0.4, training=False),
        (X,),
        torch_fn=lambda x: TF().dropout(x, 0.4, training=False),
    ),
]
