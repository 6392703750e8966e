"""Regressions hunt56 found in torch.distributions, each compared with PyTorch 2.13: a transform
made with ``cache_size=1`` gives back the ``x`` of the ``y`` it just computed (ember cached
nothing, so a tanh-squashed policy's ``log_prob`` of its own action inverted a rounded +-1 and
came out infinite or NaN where PyTorch's is finite), and the sigmoid transform's lower clamp is
the dtype's smallest normal number, not its eps (a flow's log-density in the tail differed).
"""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _squashed_policy(lib):
    D = lib.distributions
    lib.manual_seed(0)
    mu = lib.tensor([0.0, 12.0, -15.0, 1.0], requires_grad=True)
    out = []
    for cache in (0, 1):
        dist = D.TransformedDistribution(
            D.Normal(mu, lib.ones(4)), [D.transforms.TanhTransform(cache_size=cache)]
        )
        action = dist.rsample()
        out += [action.detach().numpy(), dist.log_prob(action).detach().numpy()]
    out.append(lib.autograd.grad(dist.log_prob(action).sum(), mu)[0].numpy())
    return out


def test_cached_transform_inverts_its_own_sample_as_pytorchs():
    want, got = _squashed_policy(torch), _squashed_policy(ember)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert np.isfinite(got[3]).all()  # cached: finite although tanh rounded to +-1


def _cache_rules(lib):
    T = lib.distributions.transforms
    tanh = T.TanhTransform(cache_size=1)
    x = lib.tensor([20.0])
    y = tanh(x)
    compose = T.ComposeTransform([T.TanhTransform(), T.AffineTransform(0.0, 2.0)], cache_size=1)
    z = compose(x)
    plain = T.TanhTransform()
    return [
        tanh.inv(y) is x,
        tanh(x) is y,
        tanh.inv.inv is tanh,
        plain.with_cache(1) is not plain,
        plain.with_cache(0) is plain,
        type(T.AffineTransform(1.0, 2.0).with_cache(1)).__name__,
        compose.inv(z).item(),
        plain.inv(plain(x)).item(),
    ]


def test_cache_rules_are_pytorchs():
    assert _cache_rules(ember) == _cache_rules(torch)
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        ember.distributions.transforms.ExpTransform(cache_size=2)


def _sigmoid_tail(lib):
    D = lib.distributions
    x = lib.tensor([-20.0, -5.0, 0.0, 30.0], dtype=lib.float32)
    t = D.transforms.SigmoidTransform()
    flow = D.TransformedDistribution(D.Normal(lib.zeros(4), 5 * lib.ones(4)), [t])
    stick = D.transforms.StickBreakingTransform()
    return [t(x), t.inv(t(x)), flow.log_prob(t(x)), stick(lib.tensor([[-30.0, 0.0, 25.0]]))]


def test_sigmoid_transforms_clamp_at_the_smallest_normal_number():
    for w, g in zip(_sigmoid_tail(torch), _sigmoid_tail(ember)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=0)


def _fully_padded_sample(lib, capture=False):
    """A batch where one sample's keys are all padding: PyTorch's multi-head attention without
    weights attends by scaled_dot_product_attention, whose fully masked rows give zeros (and
    zero gradients); with weights it returns NaN rows, as the plain softmax does."""
    nn = lib.nn
    lib.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    enc = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    x0 = np.random.default_rng(0).standard_normal((3, 4, 8)).astype(np.float32)
    pad = lib.tensor(np.array([[1, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0]], bool))
    out = []

    def step(x):
        a, _ = mha(x, x, x, key_padding_mask=pad, need_weights=False)
        b = enc(x, src_key_padding_mask=pad)
        loss = a.sum() + b.sum()
        loss.backward()
        return a, b, loss

    x = lib.tensor(x0, requires_grad=True)
    a, b, loss = (ember.function(step) if capture else step)(x)
    out += [a, b, loss, x.grad]
    out += [p.grad for p in list(mha.parameters()) + list(enc.parameters())]
    with lib.no_grad():
        mha.eval()
        out.append(mha(x, x, x, key_padding_mask=pad, need_weights=False)[0])
        weighted, weights = mha(x, x, x, key_padding_mask=pad)
        out += [weighted, weights]
    return [o.detach().numpy() for o in out]


@pytest.mark.parametrize("capture", [False, True])
def test_attention_without_weights_gives_zeros_for_a_fully_padded_sample(capture):
    want, got = _fully_padded_sample(torch), _fully_padded_sample(ember, capture)
    assert np.isfinite(got[2]) and np.isfinite(got[3]).all()
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, equal_nan=True)
