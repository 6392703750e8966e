"""Conformance samples for functional/loss.py, loss_binary.py and loss_regression.py.

Class weights, pos_weight and float targets PyTorch cannot differentiate are marked ``nondiff``;
everything else is differentiated, including probability targets.
"""

import warnings

import numpy as np

import ember

from .harness import Sample, away_from, rng

F = ember.nn.functional
r = rng(5)


def TF():
    return __import__("torch").nn.functional


LOGITS = r.standard_normal((5, 4))
CLASSES = np.array([0, 3, -100, 1, 3])  # one ignored (the default ignore_index)
W4 = r.uniform(0.5, 2.0, 4)
IMG = r.standard_normal((2, 3, 2, 2))  # (N, C, H, W)
IMG_T = np.array([[[0, 2], [1, 1]], [[2, 1], [0, 2]]])  # class 1 is ignored below
PROBS = r.dirichlet(np.ones(4), 5)

SAMPLES = []
for red in ("mean", "sum", "none"):
    SAMPLES += [
        Sample(
            f"F.cross_entropy/{red}",
            lambda x, t, red=red: F.cross_entropy(x, t, reduction=red),
            (LOGITS, CLASSES),
            torch_fn=lambda x, t, red=red: TF().cross_entropy(x, t, reduction=red),
        ),
        Sample(
            f"F.cross_entropy/weight-smoothing-{red}",
            lambda x, t, w, red=red: F.cross_entropy(x, t, w, reduction=red, label_smoothing=0.2),
            (LOGITS, CLASSES, W4),
            torch_fn=lambda x, t, w, red=red: TF().cross_entropy(
                x, t, w, reduction=red, label_smoothing=0.2
            ),
            nondiff=(2,),
        ),
        Sample(
            f"F.cross_entropy/probs-{red}",
            lambda x, p, red=red: F.cross_entropy(x, p, reduction=red),
            (LOGITS, PROBS),
            torch_fn=lambda x, p, red=red: TF().cross_entropy(x, p, reduction=red),
        ),
        Sample(
            f"F.cross_entropy/probs-weight-smoothing-{red}",
            lambda x, p, w, red=red: F.cross_entropy(x, p, w, reduction=red, label_smoothing=0.1),
            (LOGITS, PROBS, W4),
            torch_fn=lambda x, p, w, red=red: TF().cross_entropy(
                x, p, w, reduction=red, label_smoothing=0.1
            ),
            nondiff=(2,),
        ),
        Sample(
            f"F.nll_loss/weight-{red}",
            lambda x, t, w, red=red: F.nll_loss(x, t, w, reduction=red),
            (LOGITS, CLASSES, W4),
            torch_fn=lambda x, t, w, red=red: TF().nll_loss(x, t, w, reduction=red),
            nondiff=(2,),
        ),
        Sample(
            f"F.cross_entropy/nchw-ignore-smoothing-weight-{red}",
            lambda x, t, w, red=red: F.cross_entropy(
                x, t, w, ignore_index=1, reduction=red, label_smoothing=0.3
            ),
            (IMG, IMG_T, W4[:3]),
            torch_fn=lambda x, t, w, red=red: TF().cross_entropy(
                x, t, w, ignore_index=1, reduction=red, label_smoothing=0.3
            ),
            nondiff=(2,),
        ),
    ]
SAMPLES += [
    Sample(
        "F.cross_entropy/nchw",
        lambda x, t: F.cross_entropy(x, t),
        (IMG, IMG_T),
        torch_fn=lambda x, t: TF().cross_entropy(x, t),
    ),
    Sample(
        "F.cross_entropy/unbatched",
        lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
        (LOGITS[0], np.array(2)),
        torch_fn=lambda x, t: TF().cross_entropy(x, t, label_smoothing=0.1),
    ),
    Sample(
        "F.cross_entropy/large-logits",
        lambda x, t: F.cross_entropy(x, t),
        (LOGITS * 200, np.array([0, 1, 2, 3, 0])),
        torch_fn=lambda x, t: TF().cross_entropy(x, t),
    ),
    Sample(
        "F.nll_loss/nchw-ignore",
        lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, ignore_index=2),
        (IMG, IMG_T),
        torch_fn=lambda x, t: TF().nll_loss(TF().log_softmax(x, 1), t, ignore_index=2),
    ),
]

# ----------------------------------------------------------------------------------- binary
P = r.uniform(0.05, 0.95, (3, 4))
TARGET01 = r.uniform(0.0, 1.0, (3, 4))
Z = r.standard_normal((3, 4)) * 3
for red in ("mean", "sum", "none"):
    SAMPLES += [
        Sample(
            f"F.binary_cross_entropy/{red}",
            lambda p, t, red=red: F.binary_cross_entropy(p, t, reduction=red),
            (P, TARGET01),
            torch_fn=lambda p, t, red=red: TF().binary_cross_entropy(p, t, reduction=red),
        ),
        Sample(
            f"F.binary_cross_entropy/weight-{red}",
            lambda p, t, w, red=red: F.binary_cross_entropy(p, t, w, reduction=red),
            (P, TARGET01, W4),
            torch_fn=lambda p, t, w, red=red: TF().binary_cross_entropy(p, t, w, reduction=red),
            nondiff=(2,),
        ),
        Sample(
            f"F.binary_cross_entropy_with_logits/{red}",
            lambda z, t, red=red: F.binary_cross_entropy_with_logits(z, t, reduction=red),
            (Z, TARGET01),
            torch_fn=lambda z, t, red=red: TF().binary_cross_entropy_with_logits(
                z, t, reduction=red
            ),
        ),
        Sample(
            f"F.binary_cross_entropy_with_logits/weights-{red}",
            lambda z, t, w, pw, red=red: F.binary_cross_entropy_with_logits(
                z, t, w, reduction=red, pos_weight=pw
            ),
            (Z, TARGET01, W4, W4[::-1] * 2),
            torch_fn=lambda z, t, w, pw, red=red: TF().binary_cross_entropy_with_logits(
                z, t, w, reduction=red, pos_weight=pw
            ),
            nondiff=(2, 3),
        ),
    ]
SAMPLES += [
    Sample(
        "F.binary_cross_entropy/saturated",  # log clamped at -100: finite loss at 0 and 1
        lambda p, t: F.binary_cross_entropy(p, t, reduction="sum"),
        (np.array([0.0, 1.0, 0.3]), np.array([1.0, 0.0, 1.0])),
        torch_fn=lambda p, t: TF().binary_cross_entropy(p, t, reduction="sum"),
        grad=False,
    ),
    Sample(
        "F.binary_cross_entropy_with_logits/huge-logits",
        lambda z, t: F.binary_cross_entropy_with_logits(z, t, reduction="none"),
        (np.array([-800.0, -30.0, 0.0, 30.0, 800.0]), np.array([1.0, 0.0, 0.5, 1.0, 0.0])),
        torch_fn=lambda z, t: TF().binary_cross_entropy_with_logits(z, t, reduction="none"),
        fd=False,  # the kink of |z| at exactly 0 (PyTorch's gradient there is sigmoid(0) - t)
    ),
]

# ------------------------------------------------------------------------------------ kl_div


def torch_kl_div(x, t, **kw):
    with warnings.catch_warnings():  # PyTorch warns that 'mean' is not the true KL divergence
        warnings.simplefilter("ignore", UserWarning)
        return TF().kl_div(x, t, **kw)


LOGP = np.log(r.dirichlet(np.ones(4), 3))
Q = r.dirichlet(np.ones(4), 3)
for red in ("batchmean", "sum", "none", "mean"):
    SAMPLES += [
        Sample(
            f"F.kl_div/{red}",
            lambda x, t, red=red: F.kl_div(x, t, reduction=red),
            (LOGP, Q),
            torch_fn=lambda x, t, red=red: torch_kl_div(x, t, reduction=red),
        ),
        Sample(
            f"F.kl_div/log-target-{red}",
            lambda x, t, red=red: F.kl_div(x, t, reduction=red, log_target=True),
            (LOGP, np.log(Q)),
            torch_fn=lambda x, t, red=red: torch_kl_div(x, t, reduction=red, log_target=True),
        ),
    ]

# -------------------------------------------------------------------------------- regression
X = r.standard_normal((3, 4))
Y = X + away_from(r.standard_normal((3, 4)), points=(0.0, 0.5, -0.5, 0.7, -0.7))
EW = r.uniform(0.1, 1.0, (3, 4))
for red in ("mean", "sum", "none"):
    for name, kw in [
        ("mse_loss", {}),
        ("l1_loss", {}),
        ("smooth_l1_loss", {}),
        ("smooth_l1_loss", {"beta": 0.5}),
        ("smooth_l1_loss", {"beta": 0.0}),
        ("huber_loss", {"delta": 0.7}),
    ]:
        SAMPLES.append(
            Sample(
                f"F.{name}({kw})/{red}",
                lambda x, y, n=name, kw=kw, red=red: getattr(F, n)(x, y, reduction=red, **kw),
                (X, Y),
                torch_fn=lambda x, y, n=name, kw=kw, red=red: getattr(TF(), n)(
                    x, y, reduction=red, **kw
                ),
            )
        )
    for name in ("mse_loss", "l1_loss", "huber_loss"):
        SAMPLES.append(
            Sample(
                f"F.{name}/weight-{red}",
                lambda x, y, w, n=name, red=red: getattr(F, n)(x, y, reduction=red, weight=w),
                (X, Y, EW),
                torch_fn=lambda x, y, w, n=name, red=red: getattr(TF(), n)(
                    x, y, reduction=red, weight=w
                ),
            )
        )
SAMPLES.append(
    Sample(
        "F.l1_loss/equal-values",  # gradient 0 where input == target, as PyTorch
        lambda x, y: F.l1_loss(x, y),
        (np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0])),
        torch_fn=lambda x, y: TF().l1_loss(x, y),
        fd=False,
    )
)
