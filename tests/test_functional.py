"""Behaviour of the functional composites beyond the conformance samples (tests/ops/
samples_functional_*.py): dropout statistics and reproducibility, float32 staying float32
through forward and backward, running statistics over several steps, in-place activations,
higher-order gradients, stability for huge logits, the public entry points, and clear errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.ops import _registry as reg

F = ember.nn.functional
torch = pytest.importorskip("torch", reason="PyTorch is the reference for these comparisons")
TF = torch.nn.functional


def _t(a, grad=False):
    return ember.tensor(np.asarray(a), requires_grad=grad)


# ------------------------------------------------------------------------------------ dropout


def test_dropout_statistics():
    x = ember.ones(200, 500)
    y = F.dropout(x, p=0.3, generator=ember.Generator(0)).numpy()
    zeroed = np.mean(y == 0)
    assert abs(zeroed - 0.3) < 0.01  # 100k Bernoulli draws: std 0.0015
    kept = y[y != 0]
    np.testing.assert_allclose(kept, 1 / 0.7, rtol=1e-6)  # survivors are scaled by 1/(1-p)
    assert abs(y.mean() - 1.0) < 0.01  # the expectation is preserved


def test_dropout_reproducible_with_seed_and_generator():
    x = ember.randn(50, 40)
    ember.manual_seed(123)
    a = F.dropout(x, 0.5).numpy()
    ember.manual_seed(123)
    b = F.dropout(x, 0.5).numpy()
    np.testing.assert_array_equal(a, b)
    c = F.dropout(x, 0.5, generator=ember.Generator(9)).numpy()
    d = F.dropout(x, 0.5, generator=ember.Generator(9)).numpy()
    np.testing.assert_array_equal(c, d)
    assert not np.array_equal(a, c)


def test_dropout_identity_in_eval_and_edge_probabilities():
    x = ember.randn(4, 5, requires_grad=True)
    assert F.dropout(x, 0.5, training=False) is x
    np.testing.assert_array_equal(F.dropout(x, 0.0).detach().numpy(), x.detach().numpy())
    y = F.dropout(x, 1.0)
    assert not np.any(y.detach().numpy())
    y.sum().backward()
    assert not np.any(x.grad.detach().numpy())
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.5)


def test_dropout_gradient_is_the_scaled_mask():
    x = ember.randn(30, 30, requires_grad=True)
    y = F.dropout(x, 0.25, generator=ember.Generator(1))
    y.sum().backward()
    mask = y.detach().numpy() != 0
    np.testing.assert_allclose(x.grad.detach().numpy(), mask / 0.75, rtol=1e-6)


def test_channel_dropout_drops_whole_channels():
    x = ember.ones(8, 16, 5, 5)
    y = F.dropout2d(x, 0.5, generator=ember.Generator(2)).numpy()
    per_channel = y.reshape(8, 16, -1)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))
    assert 0.3 < np.mean(per_channel[..., 0] == 0) < 0.7
    y1 = F.dropout1d(ember.ones(16, 7), 0.5, generator=ember.Generator(3)).numpy()  # (C, L)
    assert np.all((y1 == 0).all(-1) | (y1 == 2.0).all(-1))


def test_dropout_inplace_writes_into_input():
    x = ember.ones(10, 10)
    out = F.dropout(x, 0.5, inplace=True, generator=ember.Generator(4))
    assert out is x
    assert set(np.unique(x.numpy())) <= {0.0, 2.0}


# --------------------------------------------------------------------------- float32 stays


class _DTypeRecorder(reg.Mode):
    """Runs ops eagerly and records every output dtype (forward and VJP ops alike)."""

    def __init__(self):
        self.base = reg.current_mode()
        self.seen: list = []

    def apply(self, op, inputs, attrs):
        out = self.base.apply(op, inputs, attrs)
        for o in out if isinstance(out, tuple) else (out,):
            self.seen.append((op.name, o.dtype))
        return out

    def constant(self, array):
        return self.base.constant(array)


R = np.random.default_rng(0)
X32 = R.standard_normal((4, 3, 2, 2)).astype(np.float32)
CLASSES = np.array([0, 2, -100, 1])
CASES = {
    "gelu": lambda x: F.gelu(x),
    "gelu-tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu+mish+elu+softplus": lambda x: F.silu(x) + F.mish(x) + F.elu(x) + F.softplus(x, 2.0),
    "hard*": lambda x: F.hardswish(x) + F.hardsigmoid(x) + F.relu6(x) + F.hardtanh(x),
    "selu+celu+logsigmoid": lambda x: F.selu(x) + F.celu(x) + F.logsigmoid(x),
    "softmax": lambda x: F.softmax(x, 1) * F.log_softmax(x, -1) + F.softmin(x, 0),
    "layer_norm": lambda x: F.layer_norm(x, (2, 2), ember.ones(2, 2), ember.zeros(2, 2)),
    "rms_norm": lambda x: F.rms_norm(x, (2,)),
    "batch_norm": lambda x: F.batch_norm(
        x, ember.zeros(3), ember.ones(3), ember.ones(3), ember.zeros(3), training=True
    ),
    "batch_norm-eval": lambda x: F.batch_norm(x, ember.zeros(3), ember.ones(3)),
    "group_norm": lambda x: F.group_norm(x, 3, ember.ones(3), ember.zeros(3)),
    "instance_norm": lambda x: F.instance_norm(x),
    "normalize": lambda x: F.normalize(x),
    "dropout": lambda x: F.dropout(x, 0.2),
    "cross_entropy": lambda x: F.cross_entropy(x.flatten(1), _t(CLASSES), label_smoothing=0.1),
    "cross_entropy-weight": lambda x: F.cross_entropy(
        x.flatten(1)[:, :3], _t(CLASSES), ember.ones(3), label_smoothing=0.1
    ),
    "cross_entropy-nchw": lambda x: F.cross_entropy(x, _t(np.zeros((4, 2, 2), np.int64))),
    "cross_entropy-probs": lambda x: F.cross_entropy(x, F.softmax(x.detach() * 2, 1)),
    "bce": lambda x: F.binary_cross_entropy(ember.sigmoid(x), _t(np.ones(X32.shape, np.int64))),
    "bce-logits": lambda x: F.binary_cross_entropy_with_logits(
        x, _t(np.ones(X32.shape, np.int64)), pos_weight=ember.full((2,), 2.0)
    ),
    "mse-int-target": lambda x: F.mse_loss(x, _t(np.ones(X32.shape, np.int64))),
    "l1+smooth+huber": lambda x: (
        F.l1_loss(x, x.detach() + 1) + F.smooth_l1_loss(x, x * 0.5) + F.huber_loss(x, x * 0.1)
    ),
    "kl_div": lambda x: F.kl_div(
        F.log_softmax(x, 1), F.softmax(x.detach(), 1), reduction="batchmean"
    ),
    "sdpa": lambda x: F.scaled_dot_product_attention(
        x, x, x, attn_mask=_t(np.tril(np.ones((2, 2), bool)))
    ),
    "sdpa-causal-dropout": lambda x: F.scaled_dot_product_attention(
        x, x, x, is_causal=True, dropout_p=0.1
    ),
    "embedding": lambda x: F.embedding(_t([[0, 1], [1, 2]]), x.reshape(-1, 4), padding_idx=0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_stays_float32_forward_and_backward(name):
    x = ember.tensor(X32, requires_grad=True)
    recorder = _DTypeRecorder()
    reg.push_mode(recorder)
    try:
        out = CASES[name](x)
        out.sum().backward()
    finally:
        reg.pop_mode()
    assert out.dtype == ember.float32 and x.grad.dtype == ember.float32
    leaks = sorted({op for op, dtype in recorder.seen if dtype == ember.float64})
    assert not leaks, f"{name}: float64 produced by {leaks}"


# -------------------------------------------------------------------------- running statistics


def test_batch_norm_running_stats_over_several_steps_match_torch():
    rm, rv = ember.zeros(3), ember.ones(3)
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    rm, rv = rm.double(), rv.double()
    for step in range(4):
        x = R.standard_normal((5, 3, 2)) * (step + 1) + step
        y = F.batch_norm(_t(x), rm, rv, training=True, momentum=0.2)
        ty = TF.batch_norm(torch.tensor(x), trm, trv, training=True, momentum=0.2)
        np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(rm.numpy(), trm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), trv.numpy(), rtol=1e-12)
    x = R.standard_normal((2, 3, 2))
    np.testing.assert_allclose(
        F.batch_norm(_t(x), rm, rv).numpy(), TF.batch_norm(torch.tensor(x), trm, trv).numpy()
    )


def test_batch_norm_running_update_is_not_recorded():
    rm, rv = ember.zeros(3), ember.ones(3)
    x = ember.randn(4, 3, requires_grad=True)
    F.batch_norm(x, rm, rv, training=True).sum().backward()
    assert rm.grad_fn is None and not rm.requires_grad and rm._version == 1


def test_batch_norm_errors():
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(ember.randn(1, 3), ember.zeros(3), ember.ones(3), training=True)
    with pytest.raises(ValueError, match="momentum=None"):
        F.batch_norm(ember.randn(4, 3), ember.zeros(3), ember.ones(3), training=True, momentum=None)
    with pytest.raises(ValueError, match="evaluation mode"):
        F.batch_norm(ember.randn(4, 3), None, None)
    with pytest.raises(ember.ShapeError, match="batch_norm") as info:
        F.batch_norm(ember.randn(4, 3), ember.zeros(4), ember.ones(4), training=True)
    assert "(4,)" in str(info.value) and "test_functional.py" in str(info.value)


# ------------------------------------------------------------------ in-place and higher order


@pytest.mark.parametrize("name", ["leaky_relu", "elu", "hardtanh", "relu6", "selu", "celu"])
def test_inplace_activation_on_a_non_leaf(name):
    a = R.standard_normal((3, 4)) * 3
    x = _t(a, grad=True)
    tx = torch.tensor(a, requires_grad=True)
    h, th = x * 1.0, tx * 1.0
    out = getattr(F, name)(h, inplace=True)
    tout = getattr(TF, name)(th, inplace=True)
    assert out is h
    np.testing.assert_allclose(h.detach().numpy(), th.detach().numpy(), rtol=1e-12)
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    np.testing.assert_allclose(x.grad.detach().numpy(), tx.grad.detach().numpy(), rtol=1e-12)


def test_inplace_on_leaf_requiring_grad_is_an_error():
    with pytest.raises(ember.AutogradError):
        F.leaky_relu(ember.randn(3, requires_grad=True), inplace=True)


@pytest.mark.parametrize(
    "name, fn, tfn",
    [
        ("gelu", lambda x: F.gelu(x), lambda x: TF.gelu(x)),
        ("log_softmax", lambda x: F.log_softmax(x, 1), lambda x: TF.log_softmax(x, 1)),
        ("layer_norm", lambda x: F.layer_norm(x, (4,)), lambda x: TF.layer_norm(x, (4,))),
        ("mish", lambda x: F.mish(x), lambda x: TF.mish(x)),
    ],
)
def test_second_derivatives_match_torch(name, fn, tfn):
    a = R.standard_normal((3, 4))
    x, tx = _t(a, grad=True), torch.tensor(a, requires_grad=True)
    (g,) = ember.autograd.grad((fn(x) ** 3).sum(), [x], create_graph=True)
    (tg,) = torch.autograd.grad((tfn(tx) ** 3).sum(), [tx], create_graph=True)
    (gg,) = ember.autograd.grad((g * g).sum(), [x])
    (tgg,) = torch.autograd.grad((tg * tg).sum(), [tx])
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-9, atol=1e-12)


def test_logsigmoid_second_derivative_at_zero_matches_torch():
    """The Hessian of a logistic loss at zero logits (Newton's method from w = 0): logsigmoid's
    second derivative at 0 is -1/4, not the 0 that abs's gradient at 0 would give."""
    a = np.array([-3.0, -1e-3, 0.0, 0.0, 1e-3, 2.0, 40.0, -40.0])
    t = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    for fn, tfn in [
        (F.logsigmoid, TF.logsigmoid),
        (
            lambda x: F.binary_cross_entropy_with_logits(x, _t(t)),
            lambda x: TF.binary_cross_entropy_with_logits(x, torch.tensor(t)),
        ),
    ]:
        x, tx = _t(a, grad=True), torch.tensor(a, requires_grad=True)
        (g,) = ember.autograd.grad(fn(x).sum(), [x], create_graph=True)
        (tg,) = torch.autograd.grad(tfn(tx).sum(), [tx], create_graph=True)
        np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-12, atol=1e-15)
        (gg,) = ember.autograd.grad(g.sum(), [x])
        (tgg,) = torch.autograd.grad(tg.sum(), [tx])
        np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-12, atol=1e-15)
    h = ember.autograd.functional.hessian(lambda w: F.logsigmoid(w).sum(), ember.zeros(3))
    np.testing.assert_allclose(h.numpy(), -0.25 * np.eye(3))


# ------------------------------------------------------------------------- numerical stability


def test_cross_entropy_is_exact_for_huge_logits_in_float32():
    logits = np.array([[1e4, -1e4, 0.0], [3e4, 3e4, -5e4]], np.float32)
    target = np.array([1, 0])
    x = _t(logits, grad=True)
    loss = F.cross_entropy(x, _t(target))
    loss.backward()
    tx = torch.tensor(logits, requires_grad=True)
    tloss = TF.cross_entropy(tx, torch.tensor(target))
    tloss.backward()
    assert np.isfinite(loss.item()) and np.all(np.isfinite(x.grad.numpy()))
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-7)


def test_softplus_and_bce_with_logits_do_not_overflow():
    z = _t(np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], np.float32), grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no overflow in any branch
        y = F.softplus(z) + F.binary_cross_entropy_with_logits(z, ember.ones(5), reduction="none")
        y.sum().backward()
    assert np.all(np.isfinite(y.detach().numpy())) and np.all(np.isfinite(z.grad.detach().numpy()))


@settings(max_examples=30, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_softmax_family_and_layer_norm_match_torch_for_any_shape(shape, seed, data):
    a = np.random.default_rng(seed).standard_normal(shape) * 5
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    k = data.draw(st.integers(1, len(shape)))
    x, tx = _t(a), torch.tensor(a)
    np.testing.assert_allclose(F.softmax(x, dim).numpy(), TF.softmax(tx, dim).numpy(), atol=1e-12)
    np.testing.assert_allclose(
        F.log_softmax(x, dim).numpy(), TF.log_softmax(tx, dim).numpy(), atol=1e-12
    )
    norm_shape = tuple(shape[len(shape) - k :])
    np.testing.assert_allclose(
        F.layer_norm(x, norm_shape).numpy(), TF.layer_norm(tx, norm_shape).numpy(), atol=1e-9
    )


# ------------------------------------------------------------------------- public entry points


def test_entry_points_follow_pytorch():
    x = ember.randn(2, 3)
    np.testing.assert_allclose(ember.softmax(x, 1).numpy(), x.softmax(1).numpy())
    np.testing.assert_allclose(ember.log_softmax(x, 0).numpy(), x.log_softmax(0).numpy())
    for name in ("selu", "celu", "threshold", "prelu", "hardshrink", "layer_norm", "group_norm"):
        assert getattr(ember, name) is getattr(F, name)
    for name in ("gelu", "silu", "cross_entropy", "scaled_dot_product_attention"):
        assert hasattr(F, name) and not hasattr(ember, name)
    # torch.embedding is aten's: the weight first, as ember.embedding
    w, idx = ember.randn(4, 2), ember.tensor([3, 0])
    np.testing.assert_array_equal(ember.embedding(w, idx).numpy(), F.embedding(idx, w).numpy())
    assert callable(F.elu_) and callable(F.leaky_relu_)
    y = ember.tensor([-1.0, 2.0])
    assert F.relu_(y) is y and y.tolist() == [0.0, 2.0]


def test_legacy_size_average_and_reduce():
    x, t = ember.randn(4, 3), ember.randn(4, 3)
    with pytest.warns(DeprecationWarning):
        s = F.mse_loss(x, t, size_average=False)
    np.testing.assert_allclose(s.numpy(), F.mse_loss(x, t, reduction="sum").numpy())
    with pytest.warns(DeprecationWarning):
        n = F.l1_loss(x, t, reduce=False)
    assert n.shape == (4, 3)


def test_embedding_max_norm_renormalizes_weight_like_torch():
    w = R.standard_normal((6, 4)) * 2
    idx = np.array([[0, 3], [3, 5]])
    ew, tw = _t(w.copy()), torch.tensor(w.copy())
    out = F.embedding(_t(idx), ew, max_norm=1.5)
    tout = TF.embedding(torch.tensor(idx), tw, max_norm=1.5)
    np.testing.assert_allclose(out.numpy(), tout.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ew.numpy(), tw.numpy(), rtol=1e-12)


# ---------------------------------------------------------------------------------- errors


def test_clear_errors():
    with pytest.raises(ember.ShapeError, match=r"layer_norm.*\(5,\).*\(2, 3\)"):
        F.layer_norm(ember.randn(2, 3), (5,))
    with pytest.raises(ember.ShapeError, match="cross_entropy.*target"):
        F.cross_entropy(ember.randn(4, 3), ember.tensor([0, 1]))
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(ember.randn(2, 3), ember.tensor([0, 3]))
    with pytest.raises(IndexError, match="out of bounds"):
        F.nll_loss(ember.randn(2, 3), ember.tensor([-1, 0]))
    with pytest.raises(ember.ShapeError, match="group_norm.*num_groups"):
        F.group_norm(ember.randn(2, 6, 3), 4)
    with pytest.raises(ember.ShapeError, match="scaled_dot_product_attention"):
        F.scaled_dot_product_attention(
            ember.randn(2, 3, 4), ember.randn(2, 5, 3), ember.randn(2, 5, 3)
        )
    with pytest.raises(ember.EmberError, match=r"\[0, 1\]"):
        F.binary_cross_entropy(ember.tensor([0.5, 1.5]), ember.tensor([1.0, 0.0]))
    with pytest.raises(ember.DTypeError, match="floating-point"):
        F.gelu(ember.tensor([1, 2]))
    # (PyTorch's words: "Expected tensor for argument #1 'indices' to have one of the
    # following scalar types: Long, Int")
    with pytest.raises(ember.DTypeError, match="indices.*Long, Int"):
        F.embedding(ember.tensor([0.0, 1.0]), ember.randn(3, 2))
    with pytest.raises(ValueError, match="not both"):
        x = ember.randn(1, 2, 4)
        F.scaled_dot_product_attention(x, x, x, attn_mask=ember.ones(2, 2), is_causal=True)
