"""Conformance samples of issue 19's nn.functional additions: the ``ctc_loss`` primitive (its
rule, its kernel, and its gradient through ``log_softmax``, where PyTorch's CTC gradient is the
true one, against finite differences and PyTorch), and the composites (interpolate,
grid_sample, unfold / fold, embedding_bag, distances), whose traced and scripted graphs and
graph gradients test_conformance compares with eager."""

import numpy as np

import ember

from .harness import Sample, rng

F = ember.nn.functional
r = rng(19)


def TF():
    return __import__("torch").nn.functional


T, N, C = 5, 2, 4
LOGITS = r.standard_normal((T, N, C))
TARGETS = np.array([[1, 2, 2], [3, 1, 0]])
IN_LEN = np.array([5, 4])
TG_LEN = np.array([3, 2])
IMG = r.standard_normal((2, 2, 4, 5))
GRID = r.uniform(-1.2, 1.2, (2, 3, 4, 2))
W = r.standard_normal((6, 3))
IDX = np.array([1, 2, 4, 4, 0, 5])
OFF = np.array([0, 2, 2])

SAMPLES = []
for red in ("mean", "sum", "none"):
    SAMPLES.append(
        Sample(
            f"F.ctc_loss/{red}",
            lambda x, t, il, tl, red=red: F.ctc_loss(F.log_softmax(x, 2), t, il, tl, reduction=red),
            (LOGITS, TARGETS, IN_LEN, TG_LEN),
            torch_fn=lambda x, t, il, tl, red=red: TF().ctc_loss(
                TF().log_softmax(x, 2), t, il, tl, reduction=red
            ),
        )
    )
SAMPLES += [
    Sample(
        "F.ctc_loss/concatenated-blank",
        lambda x, t, il, tl: F.ctc_loss(F.log_softmax(x, 2), t, il, tl, blank=3),
        (LOGITS, np.array([1, 2, 2, 0, 1]), IN_LEN, TG_LEN),
        torch_fn=lambda x, t, il, tl: TF().ctc_loss(TF().log_softmax(x, 2), t, il, tl, blank=3),
    ),
    Sample(
        "F.interpolate/bilinear",
        lambda x: F.interpolate(x, size=(7, 3), mode="bilinear"),
        (IMG,),
        torch_fn=lambda x: TF().interpolate(x, size=(7, 3), mode="bilinear"),
    ),
    Sample(
        "F.interpolate/nearest",
        lambda x: F.interpolate(x, scale_factor=1.5),
        (IMG,),
        torch_fn=lambda x: TF().interpolate(x, scale_factor=1.5),
    ),
    Sample(
        "F.grid_sample/bilinear-reflection",
        lambda x, g: F.grid_sample(x, g, padding_mode="reflection", align_corners=False),
        (IMG, GRID),
        torch_fn=lambda x, g: TF().grid_sample(
            x, g, padding_mode="reflection", align_corners=False
        ),
    ),
    Sample(
        "F.grid_sample/nearest-border",
        lambda x, g: F.grid_sample(x, g, "nearest", "border", align_corners=True),
        (IMG, GRID),
        torch_fn=lambda x, g: TF().grid_sample(x, g, "nearest", "border", align_corners=True),
        nondiff=(1,),
    ),
    Sample(
        "F.affine_grid",
        lambda t: F.affine_grid(t, (2, 1, 3, 4), align_corners=False),
        (r.standard_normal((2, 2, 3)),),
        torch_fn=lambda t: TF().affine_grid(t, (2, 1, 3, 4), align_corners=False),
    ),
    Sample(
        "F.unfold",
        lambda x: F.unfold(x, (2, 3), padding=1, stride=(1, 2)),
        (IMG,),
        torch_fn=lambda x: TF().unfold(x, (2, 3), padding=1, stride=(1, 2)),
    ),
    Sample(
        "F.fold",
        lambda x: F.fold(x, (4, 5), 2, dilation=(1, 2)),
        (r.standard_normal((2, 8, 9)),),
        torch_fn=lambda x: TF().fold(x, (4, 5), 2, dilation=(1, 2)),
    ),
    Sample(
        "F.pixel_shuffle",
        lambda x: F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2) * F.pixel_shuffle(x, 2).sum(),
        (r.standard_normal((1, 4, 2, 3)),),
        torch_fn=lambda x: (
            TF().pixel_unshuffle(TF().pixel_shuffle(x, 2), 2) * TF().pixel_shuffle(x, 2).sum()
        ),
    ),
    Sample(
        "F.embedding_bag/mean-offsets",
        lambda i, w, o: F.embedding_bag(i, w, o),
        (IDX, W, OFF),
        torch_fn=lambda i, w, o: TF().embedding_bag(i, w, o),
    ),
    Sample(
        "F.embedding_bag/max-padding",
        lambda i, w, o: F.embedding_bag(i, w, o, mode="max", padding_idx=4),
        (IDX, W, OFF),
        torch_fn=lambda i, w, o: TF().embedding_bag(i, w, o, mode="max", padding_idx=4),
    ),
    Sample(
        "F.embedding_bag/sum-weights",
        lambda i, w, p: F.embedding_bag(i, w, mode="sum", per_sample_weights=p),
        (IDX.reshape(2, 3), W, r.standard_normal((2, 3))),
        torch_fn=lambda i, w, p: TF().embedding_bag(i, w, mode="sum", per_sample_weights=p),
    ),
    Sample(
        "F.cosine_similarity",
        lambda a, b: F.cosine_similarity(a, b, dim=-1),
        (r.standard_normal((3, 4)), r.standard_normal((1, 4))),
        torch_fn=lambda a, b: TF().cosine_similarity(a, b, dim=-1),
    ),
    Sample(
        "F.triplet_margin_loss/swap",
        lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=2.0, swap=True),
        (r.standard_normal((3, 4)), r.standard_normal((3, 4)), r.standard_normal((3, 4))),
        torch_fn=lambda a, p, n: TF().triplet_margin_loss(a, p, n, margin=2.0, swap=True),
    ),
    Sample(
        "F.cosine_embedding_loss",
        lambda a, b, t: F.cosine_embedding_loss(a, b, t, margin=-0.9),
        (r.standard_normal((3, 4)), r.standard_normal((3, 4)), np.array([1, -1, -1])),
        torch_fn=lambda a, b, t: TF().cosine_embedding_loss(a, b, t, margin=-0.9),
    ),
]
