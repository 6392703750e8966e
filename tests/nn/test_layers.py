"""Every layer against its PyTorch counterpart with the same weights: forward outputs, input and
parameter gradients (float64 tightly, float32 within 1e-5 relative), state_dict layout and repr."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import nn

from .compare import compare_module, same_state_layout, torch

tnn = torch.nn

r = np.random.default_rng(0)


def randn(*shape):
    return r.standard_normal(shape)


# (id, factory, inputs): the factory builds the layer from an nn namespace (ember.nn or torch.nn)
CASES = [
    ("Linear", lambda n: n.Linear(5, 3), (randn(4, 5),)),
    ("Linear/nobias-3d", lambda n: n.Linear(5, 3, bias=False), (randn(2, 4, 5),)),
    ("Bilinear", lambda n: n.Bilinear(3, 4, 2), (randn(5, 3), randn(5, 4))),
    ("Identity", lambda n: n.Identity(7, unused=True), (randn(2, 3),)),
    ("Flatten", lambda n: n.Flatten(), (randn(2, 3, 2, 2),)),
    ("Flatten/range", lambda n: n.Flatten(0, 1), (randn(2, 3, 4),)),
    ("Unflatten", lambda n: n.Unflatten(1, (2, -1)), (randn(3, 6),)),
    ("Conv1d", lambda n: n.Conv1d(2, 4, 3, stride=2, padding=1), (randn(2, 2, 9),)),
    ("Conv2d", lambda n: n.Conv2d(2, 4, 3), (randn(2, 2, 6, 6),)),
    (
        "Conv2d/groups-dilation",
        lambda n: n.Conv2d(4, 6, (3, 2), stride=(1, 2), padding=(2, 1), dilation=2, groups=2),
        (randn(2, 4, 7, 7),),
    ),
    ("Conv2d/same", lambda n: n.Conv2d(2, 3, 4, padding="same", bias=False), (randn(1, 2, 5, 6),)),
    ("Conv2d/unbatched", lambda n: n.Conv2d(2, 3, 3, padding=1), (randn(2, 5, 5),)),
    *[
        (
            f"Conv2d/{mode}",
            lambda n, m=mode: n.Conv2d(2, 3, 3, padding=(1, 2), padding_mode=m),
            (randn(2, 2, 5, 6),),
        )
        for mode in ("reflect", "replicate", "circular")
    ],
    (
        "Conv2d/same-reflect",
        lambda n: n.Conv2d(2, 3, (3, 4), padding="same", padding_mode="reflect"),
        (randn(1, 2, 6, 6),),
    ),
    (
        "Conv1d/circular",
        lambda n: n.Conv1d(2, 2, 3, padding=2, padding_mode="circular"),
        (randn(2, 2, 7),),
    ),
    (
        "ConvTranspose2d",
        lambda n: n.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1, groups=2),
        (randn(2, 4, 4, 4),),
    ),
    ("ConvTranspose1d", lambda n: n.ConvTranspose1d(3, 2, 4, stride=2), (randn(2, 3, 5),)),
    ("MaxPool2d", lambda n: n.MaxPool2d(2), (randn(2, 3, 6, 6),)),
    (
        "MaxPool2d/pad",
        lambda n: n.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),
        (randn(1, 2, 7, 7),),
    ),
    ("MaxPool1d", lambda n: n.MaxPool1d(3, stride=2), (randn(2, 3, 9),)),
    (
        "AvgPool2d",
        lambda n: n.AvgPool2d(2, stride=1, padding=1, count_include_pad=False),
        (randn(2, 3, 5, 5),),
    ),
    ("AvgPool1d", lambda n: n.AvgPool1d(3), (randn(2, 3, 9),)),
    ("AdaptiveAvgPool2d", lambda n: n.AdaptiveAvgPool2d((2, 3)), (randn(2, 3, 5, 7),)),
    ("AdaptiveAvgPool1d", lambda n: n.AdaptiveAvgPool1d(4), (randn(2, 3, 9),)),
    ("AdaptiveMaxPool2d", lambda n: n.AdaptiveMaxPool2d(2), (randn(2, 3, 5, 5),)),
    ("BatchNorm1d/eval", lambda n: n.BatchNorm1d(4), (randn(6, 4),)),
    ("BatchNorm2d/eval", lambda n: n.BatchNorm2d(3), (randn(2, 3, 4, 4),)),
    ("LayerNorm", lambda n: n.LayerNorm(5), (randn(3, 5),)),
    ("LayerNorm/2d-nobias", lambda n: n.LayerNorm((3, 4), bias=False), (randn(2, 3, 4),)),
    ("LayerNorm/no-affine", lambda n: n.LayerNorm(4, elementwise_affine=False), (randn(3, 4),)),
    ("GroupNorm", lambda n: n.GroupNorm(2, 4), (randn(3, 4, 5),)),
    ("GroupNorm/no-affine", lambda n: n.GroupNorm(3, 6, affine=False), (randn(2, 6, 2, 2),)),
    ("RMSNorm", lambda n: n.RMSNorm(5, eps=1e-6), (randn(3, 5),)),
    ("InstanceNorm2d", lambda n: n.InstanceNorm2d(3, affine=True), (randn(2, 3, 4, 4),)),
    ("Dropout/eval", lambda n: n.Dropout(0.5), (randn(4, 5),)),
    ("PReLU", lambda n: n.PReLU(3), (randn(2, 3, 4),)),
]

ACTIVATIONS = [
    ("ReLU", lambda n: n.ReLU()),
    ("ReLU6", lambda n: n.ReLU6()),
    ("GELU", lambda n: n.GELU()),
    ("GELU/tanh", lambda n: n.GELU(approximate="tanh")),
    ("SiLU", lambda n: n.SiLU()),
    ("LeakyReLU", lambda n: n.LeakyReLU(0.2)),
    ("ELU", lambda n: n.ELU(alpha=0.7)),
    ("CELU", lambda n: n.CELU(alpha=1.5)),
    ("SELU", lambda n: n.SELU()),
    ("Softplus", lambda n: n.Softplus(beta=2.0, threshold=3.0)),
    ("Sigmoid", lambda n: n.Sigmoid()),
    ("Tanh", lambda n: n.Tanh()),
    ("Softmax", lambda n: n.Softmax(dim=1)),
    ("LogSoftmax", lambda n: n.LogSoftmax(dim=-1)),
    ("Softmin", lambda n: n.Softmin(dim=0)),
    ("Hardtanh", lambda n: n.Hardtanh(-0.5, 0.8)),
    ("Hardsigmoid", lambda n: n.Hardsigmoid()),
    ("Hardswish", lambda n: n.Hardswish()),
    ("Mish", lambda n: n.Mish()),
    ("Softsign", lambda n: n.Softsign()),
    ("Tanhshrink", lambda n: n.Tanhshrink()),
    ("LogSigmoid", lambda n: n.LogSigmoid()),
    ("Threshold", lambda n: n.Threshold(0.1, 20.0)),
    ("Hardshrink", lambda n: n.Hardshrink(0.3)),
    ("Softshrink", lambda n: n.Softshrink(0.3)),
    ("GLU", lambda n: n.GLU(dim=0)),
]
# values kept off the kinks (0, +-0.3, +-0.5, 0.1, 0.8, 3, 6) so every activation is smooth there
_ACT_INPUT = np.array([[-2.1, -0.9, -0.41, -0.2, 0.05], [0.2, 0.45, 0.62, 1.3, 2.4]])
CASES += [(name, make, (_ACT_INPUT * 1.7,)) for name, make in ACTIVATIONS]
# PyTorch's float64 hardsigmoid backward multiplies by a single-precision 1/6
LOOSER_FLOAT64 = {"Hardsigmoid": {"rtol": 1e-7, "atol": 1e-9}}


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_layer_matches_torch(case, dtype):
    name, make, inputs = case
    tol = LOOSER_FLOAT64.get(name) if dtype is np.float64 else None
    compare_module(make(nn), make(tnn), list(inputs), dtype=dtype, tol=tol)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_layout_and_repr_match_torch(case):
    _, make, _ = case
    e_module, t_module = make(nn), make(tnn)
    same_state_layout(e_module, t_module)
    assert repr(e_module) == repr(t_module)


def test_conv_transpose_output_size():
    e, t = nn.ConvTranspose2d(2, 3, 3, stride=2), tnn.ConvTranspose2d(2, 3, 3, stride=2)
    x = randn(1, 2, 4, 4)
    for size in [(9, 9), (10, 10), (1, 3, 10, 9)]:
        compare_module(e, t, [x], call=lambda m, a, s=size: m(a, output_size=s))
    with pytest.raises(ValueError, match="output size"):
        e(ember.tensor(x), output_size=(12, 12))


def test_embedding_matches_torch():
    idx = np.array([[0, 2, 4], [4, 1, 2]])
    for kwargs in [{}, {"padding_idx": 2}, {"padding_idx": -1, "scale_grad_by_freq": True}]:
        e, t = nn.Embedding(5, 3, **kwargs), tnn.Embedding(5, 3, **kwargs)
        same_state_layout(e, t)
        assert repr(e) == repr(t)
        compare_module(e, t, [idx])
    pad = nn.Embedding(6, 4, padding_idx=3)
    assert np.all(pad.weight.detach().numpy()[3] == 0) and np.any(
        pad.weight.detach().numpy()[2] != 0
    )


def test_embedding_from_pretrained():
    table = ember.tensor(randn(4, 3))
    frozen = nn.Embedding.from_pretrained(table)
    assert not frozen.weight.requires_grad
    np.testing.assert_array_equal(frozen(ember.tensor([3, 0])).numpy(), table.numpy()[[3, 0]])
    trainable = nn.Embedding.from_pretrained(table, freeze=False, padding_idx=1)
    assert trainable.weight.requires_grad and trainable.padding_idx == 1
    with pytest.raises(ember.ShapeError):
        nn.Embedding.from_pretrained(ember.tensor(randn(4)))


LOSSES = [
    ("MSELoss", lambda n: n.MSELoss(), randn(4, 3), randn(4, 3)),
    ("L1Loss/sum", lambda n: n.L1Loss(reduction="sum"), randn(4, 3), randn(4, 3)),
    ("SmoothL1Loss", lambda n: n.SmoothL1Loss(beta=0.5), randn(4, 3), randn(4, 3)),
    ("HuberLoss", lambda n: n.HuberLoss(delta=0.7), randn(4, 3), randn(4, 3)),
    ("CrossEntropyLoss", lambda n: n.CrossEntropyLoss(), randn(5, 4), np.array([0, 3, 1, 1, 2])),
    (
        "CrossEntropyLoss/smoothing-ignore",
        lambda n: n.CrossEntropyLoss(label_smoothing=0.1, ignore_index=1),
        randn(5, 4),
        np.array([0, 3, 1, 1, 2]),
    ),
    ("CrossEntropyLoss/probs", lambda n: n.CrossEntropyLoss(), randn(3, 4), np.full((3, 4), 0.25)),
    ("NLLLoss/none", lambda n: n.NLLLoss(reduction="none"), randn(5, 3), np.array([0, 2, 1, 1, 0])),
    ("BCELoss", lambda n: n.BCELoss(), r.uniform(0.1, 0.9, (4, 3)), r.uniform(0, 1, (4, 3))),
    ("BCEWithLogitsLoss", lambda n: n.BCEWithLogitsLoss(), randn(4, 3), r.uniform(0, 1, (4, 3))),
    (
        "KLDivLoss",
        lambda n: n.KLDivLoss(reduction="batchmean"),
        randn(3, 4),
        r.uniform(0, 1, (3, 4)),
    ),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", LOSSES, ids=[c[0] for c in LOSSES])
def test_loss_matches_torch(case, dtype):
    _, make, x, target = case
    e_loss, t_loss = make(nn), make(tnn)
    assert repr(e_loss) == repr(t_loss)
    # the target is not differentiated: wrap it so compare_module passes it as a constant
    e_t = ember.tensor(target.astype(dtype) if target.dtype.kind == "f" else target)
    t_t = torch.tensor(target.astype(dtype) if target.dtype.kind == "f" else target)
    compare_module(
        e_loss,
        t_loss,
        [x],
        dtype=dtype,
        call=lambda m, a: m(a, e_t if isinstance(m, nn.Module) else t_t),
    )


def test_weighted_losses_register_buffers():
    w = np.array([0.2, 1.0, 3.0])
    e = nn.CrossEntropyLoss(weight=ember.tensor(w))
    t = tnn.CrossEntropyLoss(weight=torch.tensor(w))
    same_state_layout(e, t)
    x, target = randn(4, 3), np.array([0, 1, 2, 2])
    e_t, t_t = ember.tensor(target), torch.tensor(target)
    compare_module(e, t, [x], call=lambda m, a: m(a, e_t if isinstance(m, nn.Module) else t_t))
    e = nn.BCEWithLogitsLoss(pos_weight=ember.tensor(w))
    t = tnn.BCEWithLogitsLoss(pos_weight=torch.tensor(w))
    same_state_layout(e, t)
    y = r.uniform(0, 1, (4, 3))
    e_y, t_y = ember.tensor(y), torch.tensor(y)
    compare_module(
        e, t, [randn(4, 3)], call=lambda m, a: m(a, e_y if isinstance(m, nn.Module) else t_y)
    )


def test_legacy_reduction_arguments():
    with pytest.warns(UserWarning, match="reduction='sum'"):
        assert nn.MSELoss(size_average=False).reduction == "sum"
    with pytest.warns(UserWarning):
        assert nn.L1Loss(reduce=False).reduction == "none"


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize(
    "make",
    [
        lambda n: n.BatchNorm1d(3),
        lambda n: n.BatchNorm1d(3, momentum=None),
        lambda n: n.BatchNorm2d(2, affine=False, momentum=0.3),
    ],
    ids=["bn1d", "bn1d-cumulative", "bn2d-noaffine"],
)
def test_batchnorm_training_tracks_like_torch(make, dtype):
    e, t = make(nn), make(tnn)
    shape = (6, 3) if isinstance(e, nn.BatchNorm1d) else (4, 2, 3, 3)
    for step in range(3):
        x = randn(*shape) * (step + 1) + step
        # weights are copied once; afterwards each module updates its own running statistics
        compare_module(e, t, [x], dtype=dtype, train=True, load=step == 0)
    e_state, t_state = e.state_dict(), t.state_dict()
    assert int(e_state["num_batches_tracked"].item()) == 3
    assert e_state["num_batches_tracked"].dtype == ember.int64
    for key in ("running_mean", "running_var"):
        np.testing.assert_allclose(
            e_state[key].numpy(), t_state[key].numpy(), rtol=1e-5 if dtype is np.float32 else 1e-12
        )
    # evaluation mode then uses those running statistics, as torch does
    compare_module(e, t, [randn(*shape)], dtype=dtype, train=False, load=False)


def test_batchnorm_without_running_stats_uses_batch_statistics_in_eval():
    e, t = (
        nn.BatchNorm1d(3, track_running_stats=False),
        tnn.BatchNorm1d(3, track_running_stats=False),
    )
    same_state_layout(e, t)
    compare_module(e, t, [randn(5, 3)], train=False)


def test_batchnorm_rejects_wrong_rank():
    with pytest.raises(ember.ShapeError, match="BatchNorm2d"):
        nn.BatchNorm2d(3)(ember.zeros(2, 3))


def test_dropout_train_and_eval():
    drop = nn.Dropout(0.4)
    x = ember.ones(2000)
    ember.manual_seed(3)
    y = drop(x).numpy()
    kept = y != 0
    assert 0.5 < kept.mean() < 0.7
    np.testing.assert_allclose(y[kept], 1 / 0.6, rtol=1e-6)
    drop.eval()
    assert np.array_equal(drop(x).numpy(), x.numpy())
    with pytest.raises(ValueError):
        nn.Dropout(1.5)


def test_conv_argument_errors():
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(ember.ShapeError) as info:
        nn.Conv2d(3, 4, 3)(ember.zeros(1, 2, 5, 5))
    assert "conv2d" in str(info.value)


@settings(max_examples=25, deadline=None)
@given(
    kernel=st.integers(1, 3),
    stride=st.integers(1, 2),
    padding=st.integers(0, 2),
    dilation=st.integers(1, 2),
    groups=st.sampled_from([1, 2]),
    mode=st.sampled_from(["zeros", "reflect", "replicate", "circular"]),
    size=st.integers(5, 7),
)
def test_conv2d_configurations_match_torch(kernel, stride, padding, dilation, groups, mode, size):
    """Random Conv2d configurations (padding modes included) agree with PyTorch in float64."""

    def make(n):
        return n.Conv2d(2, 4, kernel, stride, padding, dilation, groups=groups, padding_mode=mode)

    x = np.random.default_rng(kernel * 100 + size).standard_normal((2, 2, size, size + 1))
    compare_module(make(nn), make(tnn), [x])


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: nn.Linear(-1, 3), "Linear: in_features must be 0 or more, got -1"),
        (lambda: nn.Linear(3, -2), "Linear: out_features must be 0 or more, got -2"),
        (lambda: nn.Linear(2.5, 3), r"Linear: in_features must be a whole number, got 2.5"),
        (lambda: nn.Linear(True, 3), "Linear: in_features must be a whole number"),
        (lambda: nn.Bilinear(2, -1, 3), "Bilinear: in2_features must be 0 or more"),
        (lambda: nn.Embedding(-5, 3), "Parameter: size 0 must be 0 or more, got -5"),
        (lambda: nn.Conv2d(-1, 3, 3), "Parameter: size 1 must be 0 or more, got -1"),
    ],
)
def test_negative_or_fractional_sizes_raise_a_shape_error(make, message):
    with pytest.raises(ember.ShapeError, match=message):
        make()
