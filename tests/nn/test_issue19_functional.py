"""Issue 19's nn.functional additions beyond the OpInfo database (tests/ops/opinfo_issue19nnf.py)
and the conformance samples (tests/ops/samples_issue19nnf.py): their nn modules against
torch.nn's, training steps under ``ember.function`` against eager, gumbel_softmax's
distribution and straight-through gradient, and the ``inplace=`` flags."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F

from .compare import compare_module

torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")
tnn = torch.nn

R = np.random.default_rng(1919)


def n(*shape):
    return R.standard_normal(shape)


# ------------------------------------------------------------------------------- modules


@pytest.mark.parametrize(
    "make, inputs",
    [
        (lambda m: m.Upsample(scale_factor=2, mode="bilinear"), [n(2, 3, 4, 5)]),
        (lambda m: m.Upsample(size=(3, 7), mode="nearest"), [n(2, 3, 4, 5)]),
        (lambda m: m.Upsample(scale_factor=1.5, mode="linear", align_corners=True), [n(2, 3, 4)]),
        (lambda m: m.UpsamplingNearest2d(scale_factor=3), [n(1, 2, 3, 2)]),
        (lambda m: m.UpsamplingBilinear2d(size=(5, 6)), [n(1, 2, 3, 2)]),
        (lambda m: m.Unfold((2, 3), dilation=2, padding=1, stride=2), [n(2, 3, 6, 7)]),
        (lambda m: m.Fold((4, 5), 2), [n(2, 8, 12)]),
        (lambda m: m.PixelShuffle(3), [n(2, 18, 2, 3)]),
        (lambda m: m.PixelUnshuffle(2), [n(2, 3, 4, 6)]),
        (lambda m: m.CosineSimilarity(dim=0, eps=1e-4), [n(3, 4), n(3, 4)]),
        (lambda m: m.PairwiseDistance(p=1.5, keepdim=True), [n(3, 4), n(3, 4)]),
        (lambda m: m.TripletMarginLoss(margin=0.7, swap=True), [n(3, 4), n(3, 4), n(3, 4)]),
        (
            lambda m: m.MarginRankingLoss(margin=0.2, reduction="sum"),
            [n(5), n(5), np.array([1, -1, 1, -1, 1])],
        ),
        (
            lambda m: m.CosineEmbeddingLoss(margin=0.1, reduction="none"),
            [n(3, 4), n(3, 4), np.array([1, -1, -1])],
        ),
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_modules_match_torch(make, inputs, dtype):
    compare_module(make(nn), make(tnn), inputs, dtype=dtype)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_module_matches_torch(mode):
    t_bag = tnn.EmbeddingBag(7, 3, mode=mode, padding_idx=2)
    e_bag = nn.EmbeddingBag(7, 3, mode=mode, padding_idx=2)
    assert repr(e_bag) == repr(t_bag)
    idx, off = np.array([1, 2, 4, 4, 3, 6, 0, 5]), np.array([0, 3, 3, 5])
    compare_module(e_bag, t_bag, [idx, off])
    compare_module(e_bag, t_bag, [idx.reshape(2, 4)])
    e_bag = nn.EmbeddingBag(5, 2)
    assert np.any(e_bag.weight.detach().numpy())
    pre = nn.EmbeddingBag.from_pretrained(ember.tensor(n(4, 2)), mode="sum")
    assert not pre.weight.requires_grad and pre.mode == "sum"


def test_ctc_loss_module_matches_torch():
    logits = n(6, 3, 5)
    targets = np.array([[1, 2, 2, 3], [3, 3, 1, 1], [4, 1, 3, 2]])
    lengths = (np.array([6, 5, 4]), np.array([3, 2, 4]))

    def call(m, x, t, il, tl):
        lib = F if isinstance(m, nn.Module) else torch.nn.functional
        return m(lib.log_softmax(x, 2), t, il, tl)

    for reduction in ("mean", "sum", "none"):
        compare_module(
            nn.CTCLoss(blank=0, reduction=reduction),
            tnn.CTCLoss(blank=0, reduction=reduction),
            [logits, targets, *lengths],
            call=call,
        )


# -------------------------------------------------------------------- ember.function capture


def _train_twice(model, step_inputs, loss_of):
    """Two SGD steps eagerly and two under ember.function from the same start: equal losses
    and parameters."""
    import copy

    eager_model = copy.deepcopy(model)
    eager_opt = ember.optim.SGD(eager_model.parameters(), lr=0.1)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)

    def step(m, o, *xs):
        o.zero_grad()
        loss = loss_of(m, *xs)
        loss.backward()
        o.step()
        return loss

    compiled = ember.function(step)
    for _ in range(2):
        want = step(eager_model, eager_opt, *step_inputs)
        got = compiled(model, opt, *step_inputs)
        np.testing.assert_allclose(
            got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6
        )
    for p, q in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert compiled.stats.traces <= 2  # (the first step creates the .grad buffers)


class _Resampler(nn.Module):
    """conv -> unfold/fold -> upsample -> grid_sample -> pixel shuffle: one of each family."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.theta = nn.Parameter(ember.tensor([[[0.9, 0.1, 0.05], [-0.1, 0.8, 0.0]]] * 2))

    def forward(self, x):
        y = F.relu(self.conv(x), inplace=True)
        y = F.fold(F.unfold(y, 2, stride=1), y.shape[2:], 2, stride=1)
        y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
        grid = F.affine_grid(self.theta, (2, 4, 6, 8), align_corners=False)
        y = F.grid_sample(y, grid, padding_mode="border", align_corners=False)
        return F.pixel_shuffle(y, 2)


def test_resampling_trains_under_function_as_eagerly():
    x = ember.tensor(n(2, 2, 3, 4).astype(np.float32))
    _train_twice(_Resampler(), (x,), lambda m, x: (m(x) ** 2).mean())


def test_embedding_bag_and_losses_train_under_function_as_eagerly():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(9, 4, mode="max")
            self.proj = nn.Linear(4, 5)

        def forward(self, idx, off):
            return self.proj(self.bag(idx, off))

    idx = ember.tensor(np.array([1, 2, 4, 4, 3, 6, 0, 5, 8, 7]))
    off = ember.tensor(np.array([0, 3, 3, 5]))
    other = ember.tensor(n(4, 5).astype(np.float32))
    target = ember.tensor(np.array([1, -1, 1, 1]))

    def loss(m, idx, off, other, target):
        z = m(idx, off)
        return (
            F.cosine_embedding_loss(z, other, target)
            + F.triplet_margin_loss(z, other, z.flip(0), swap=True)
            + F.margin_ranking_loss(z[:, 0], other[:, 0], target.float())
            + F.pairwise_distance(z, other).mean()
        )

    _train_twice(Model(), (idx, off, other, target), loss)


def test_ctc_loss_trains_under_function_as_eagerly():
    model = nn.Linear(3, 5)
    x = ember.tensor(n(6, 2, 3).astype(np.float32))
    targets = ember.tensor(np.array([1, 2, 2, 4, 1]))  # concatenated
    il, tl = ember.tensor(np.array([6, 5])), ember.tensor(np.array([3, 2]))

    def loss(m, x, t, il, tl):
        return F.ctc_loss(F.log_softmax(m(x), 2), t, il, tl, zero_infinity=True)

    _train_twice(model, (x, targets, il, tl), loss)


# --------------------------------------------------------------------------- gumbel_softmax


def test_gumbel_softmax_hard_samples_follow_the_softmax():
    """argmax of (logits + Gumbel noise) is a draw from softmax(logits): frequencies over 20000
    draws within 4 standard errors."""
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    draws = 20000
    ember.manual_seed(3)
    y = F.gumbel_softmax(ember.tensor(np.tile(logits, (draws, 1))), tau=0.5, hard=True).numpy()
    assert set(np.unique(y)) == {0.0, 1.0} and np.all(y.sum(1) == 1)
    freq = y.mean(0)
    p = np.exp(logits)
    np.testing.assert_array_less(np.abs(freq - p), 4 * np.sqrt(p * (1 - p) / draws))


def test_gumbel_softmax_soft_is_a_distribution_and_seeded():
    x = ember.tensor(n(5, 6))
    ember.manual_seed(4)
    a = F.gumbel_softmax(x, tau=2.0, dim=0)
    ember.manual_seed(4)
    b = F.gumbel_softmax(x, tau=2.0, dim=0)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_allclose(a.numpy().sum(0), 1.0)
    assert np.all(a.numpy() > 0)
    c = F.gumbel_softmax(x, tau=2.0, dim=0)
    assert not np.array_equal(a.numpy(), c.numpy())


def test_gumbel_softmax_hard_has_the_soft_gradient():
    """Straight through: y_hard - stop_gradient(y_soft) + y_soft, so the gradient is the soft
    sample's (same seed, same noise)."""
    logits = n(3, 4)
    cot = ember.tensor(n(3, 4))
    grads = []
    for hard in (False, True):
        x = ember.tensor(logits, requires_grad=True)
        ember.manual_seed(5)
        y = F.gumbel_softmax(x, tau=0.7, hard=hard)
        (y * cot).sum().backward()
        grads.append(x.grad.detach().numpy())
        if hard:
            assert np.all(y.detach().numpy().sum(1) == 1) and set(
                np.unique(y.detach().numpy())
            ) <= {0.0, 1.0}
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)
    assert np.any(grads[0])


def test_gumbel_softmax_under_function_draws_fresh_noise():
    f = ember.function(lambda x: F.gumbel_softmax(x, hard=True))
    x = ember.tensor(np.zeros((1000, 3)))
    a, b = f(x).numpy(), f(x).numpy()
    assert not np.array_equal(a, b)
    assert np.all(a.sum(1) == 1)
    assert np.all(np.abs(a.mean(0) - 1 / 3) < 0.07)


# -------------------------------------------------------------------------------- inplace=

_INPLACE = [
    ("relu", lambda x: F.relu(x, inplace=True), torch.nn.functional.relu, {}),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2, True), torch.nn.functional.leaky_relu, {}),
    ("elu", lambda x: F.elu(x, inplace=True), torch.nn.functional.elu, {}),
    ("hardtanh", lambda x: F.hardtanh(x, inplace=True), torch.nn.functional.hardtanh, {}),
    ("relu6", lambda x: F.relu6(x, inplace=True), torch.nn.functional.relu6, {}),
    ("silu", lambda x: F.silu(x, inplace=True), torch.nn.functional.silu, {}),
    ("hardswish", lambda x: F.hardswish(x, inplace=True), torch.nn.functional.hardswish, {}),
    ("hardsigmoid", lambda x: F.hardsigmoid(x, inplace=True), torch.nn.functional.hardsigmoid, {}),
    ("nn.ReLU", nn.ReLU(inplace=True), tnn.ReLU(inplace=True), {}),
    ("nn.LeakyReLU", nn.LeakyReLU(0.2, inplace=True), tnn.LeakyReLU(0.2, inplace=True), {}),
    ("nn.ELU", nn.ELU(inplace=True), tnn.ELU(inplace=True), {}),
    ("nn.Hardtanh", nn.Hardtanh(inplace=True), tnn.Hardtanh(inplace=True), {}),
    ("nn.ReLU6", nn.ReLU6(inplace=True), tnn.ReLU6(inplace=True), {}),
    ("nn.SiLU", nn.SiLU(inplace=True), tnn.SiLU(inplace=True), {}),
    ("nn.Hardswish", nn.Hardswish(inplace=True), tnn.Hardswish(inplace=True), {}),
    ("nn.Hardsigmoid", nn.Hardsigmoid(inplace=True), tnn.Hardsigmoid(inplace=True), {}),
]


@pytest.mark.parametrize("name, ember_fn, torch_fn, kw", _INPLACE, ids=[c[0] for c in _INPLACE])
def test_inplace_activations_write_the_input_and_differentiate(name, ember_fn, torch_fn, kw):
    values = np.array([-4.0, -1.5, -0.3, 0.4, 2.0, 7.0])
    x = ember.tensor(values, requires_grad=True)
    y = x * 2
    before = y._version
    out = ember_fn(y)
    assert out is y and y._version > before
    tx = torch.tensor(values, requires_grad=True)
    ty = tx * 2
    if isinstance(torch_fn, tnn.Module):
        tout = torch_fn(ty)
    elif name in ("leaky_relu",):
        tout = torch_fn(ty, 0.2, inplace=True)
    else:
        tout = torch_fn(ty, inplace=True)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    cot = np.arange(1.0, 7.0)
    (out * ember.tensor(cot)).sum().backward()
    (tout * torch.tensor(cot)).sum().backward()
    # (hardsigmoid: PyTorch's float64 backward multiplies by float32's 1/6)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-7)


def test_inplace_on_a_leaf_that_requires_grad_is_refused_like_torch():
    x = ember.tensor([1.0, -1.0], requires_grad=True)
    with pytest.raises(ember.errors.EmberError):
        F.relu(x, inplace=True)
    with pytest.raises(RuntimeError):
        torch.nn.functional.relu(torch.tensor([1.0, -1.0], requires_grad=True), inplace=True)


def test_inplace_dropout_writes_the_input():
    x = ember.tensor(np.ones((50, 40)), requires_grad=True)
    y = x * 1
    ember.manual_seed(1)
    out = F.dropout(y, 0.5, inplace=True)
    assert out is y
    kept = y.detach().numpy() != 0
    np.testing.assert_array_equal(y.detach().numpy()[kept], 2.0)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 2.0 * kept)
    z = ember.tensor(np.ones((2, 3, 4, 4))) * 1
    assert F.dropout2d(z, 0.5, inplace=True) is z
    assert nn.Dropout(0.3, inplace=True)(z) is z


def test_inplace_relu_under_function_updates_and_differentiates():
    def f(x):
        y = x * 1
        F.relu(y, inplace=True)
        return (y * y).sum()

    g = ember.function(lambda x: ember.grad(f)(x))
    x = ember.tensor(np.array([-1.0, 2.0, -3.0, 4.0]))
    np.testing.assert_allclose(g(x).numpy(), [0.0, 4.0, 0.0, 8.0])
    np.testing.assert_allclose(ember.function(f)(x).numpy(), 20.0)


# ---------------------------------------------------------------------------------- errors


def test_errors_name_the_function_and_the_problem():
    lp = ember.tensor(np.log(np.full((4, 2, 3), 1 / 3)))
    with pytest.raises(ember.errors.EmberError, match=r"ctc_loss.*outside the 3 classes"):
        F.ctc_loss(lp, ember.tensor([[1, 5], [1, 2]]), [4, 4], [2, 2])
    with pytest.raises(ember.errors.ShapeError, match=r"ctc_loss: input_lengths\[1\] = 9"):
        F.ctc_loss(lp, ember.tensor([[1, 2], [1, 2]]), [4, 9], [2, 2])
    with pytest.raises(ember.errors.ShapeError, match=r"fold: dimension 2 of the input \(19\)"):
        F.fold(ember.tensor(n(1, 4, 19)), (5, 6), 2)
    with pytest.raises(ember.errors.ShapeError, match=r"unfold: expected a 3-D"):
        F.unfold(ember.tensor(n(5, 6)), 2)
    with pytest.raises(ember.errors.DTypeError, match=r"grid_sample: grid"):
        F.grid_sample(
            ember.tensor(n(1, 1, 2, 2)),
            ember.tensor(n(1, 2, 2, 2), dtype=ember.float32),
            align_corners=True,
        )
    with pytest.raises(ValueError, match="antialias"):
        F.interpolate(ember.tensor(n(1, 1, 2, 2)), size=3, mode="nearest", antialias=True)
    with pytest.raises(ValueError, match="offsets\\[0\\] has to be 0"):
        F.embedding_bag(ember.tensor([1, 2]), ember.tensor(n(3, 2)), ember.tensor([1]))
    with pytest.warns(UserWarning, match="align_corners"):
        F.affine_grid(ember.tensor(n(1, 2, 3)), (1, 1, 2, 2))
