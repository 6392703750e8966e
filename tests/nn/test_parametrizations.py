"""``nn.utils.parametrize``, ``parametrizations.weight_norm`` / ``spectral_norm`` and the older
``nn.utils.weight_norm`` against PyTorch with torch's state_dict copied in: state_dict keys,
reprs, outputs, gradients, power-iteration buffers; removal; and capture by ember.function."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember import nn
from ember.nn.utils import parametrize

from .compare import compare_module, copy_weights, same_state_layout, torch

tnn = torch.nn
P, TP = nn.utils.parametrizations, tnn.utils.parametrizations
r = np.random.default_rng(9)


@pytest.fixture(autouse=True)
def _seed_torch():
    torch.manual_seed(0)


def randn(*shape):
    return r.standard_normal(shape)


WEIGHT_NORM = [
    ("linear", lambda n: n.Linear(3, 4), 0, (2, 3)),
    ("linear-whole", lambda n: n.Linear(3, 4), None, (2, 3)),
    ("linear-dim1", lambda n: n.Linear(3, 4), 1, (2, 3)),
    ("conv2d", lambda n: n.Conv2d(2, 3, 3), 0, (1, 2, 5, 5)),
    ("conv1d-negative-dim", lambda n: n.Conv1d(2, 3, 3), -2, (2, 2, 6)),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", WEIGHT_NORM, ids=[c[0] for c in WEIGHT_NORM])
def test_weight_norm_matches_torch(case, dtype):
    _, make, dim, shape = case
    e, t = P.weight_norm(make(nn), dim=dim), TP.weight_norm(make(tnn), dim=dim)
    same_state_layout(e, t)
    assert list(e.state_dict())[-2:] == [
        "parametrizations.weight.original0",
        "parametrizations.weight.original1",
    ]
    assert repr(e) == repr(t) and type(e).__name__ == "Parametrized" + type(make(nn)).__name__
    compare_module(e, t, [randn(*shape)], dtype=dtype)


def test_spectral_norm_matches_torch_and_updates_its_vectors():
    for make, shape in [
        (lambda n: n.Linear(3, 4), (2, 3)),
        (lambda n: n.ConvTranspose2d(2, 3, 3), (1, 2, 4, 4)),  # dim 1 by default
        (lambda n: n.Conv2d(2, 3, 3), (1, 2, 5, 5)),
    ]:
        e = P.spectral_norm(make(nn).double(), n_power_iterations=2)
        t = TP.spectral_norm(make(tnn).double(), n_power_iterations=2)
        same_state_layout(e, t)
        assert repr(e) == repr(t)
        # training: each call runs two power-iteration steps on _u and _v, as torch's
        compare_module(e, t, [randn(*shape)], train=True)
        for key, value in t.state_dict().items():
            np.testing.assert_allclose(e.state_dict()[key].numpy(), value.numpy(), rtol=1e-10)
        compare_module(e, t, [randn(*shape)], train=False, load=False)


def test_spectral_norm_of_the_result_is_one():
    ember.manual_seed(0)
    original = nn.Linear(6, 5).double()
    s = np.linalg.svd(original.weight.detach().numpy(), compute_uv=False)
    # power iteration's error in sigma_1 shrinks like (s2/s1)^(2k): read the weight (one
    # iteration per training-mode read) enough times for 1e-9, whatever the weights' spectrum
    reads = int(np.ceil(np.log(1e-9) / (2 * np.log(s[1] / s[0])))) + 5
    lin = P.spectral_norm(original, n_power_iterations=1)
    for _ in range(min(reads, 5000)):
        w = lin.weight
    np.testing.assert_allclose(np.linalg.norm(w.detach().numpy(), 2), 1.0, rtol=1e-6)


def test_parametrized_weight_assignment_and_removal():
    lin = P.weight_norm(nn.Linear(3, 4).double())
    target = ember.tensor(randn(4, 3))
    lin.weight = target  # right_inverse: g and v are set so that the weight becomes target
    np.testing.assert_allclose(lin.weight.detach().numpy(), target.numpy(), rtol=1e-12)
    assert parametrize.is_parametrized(lin, "weight") and not parametrize.is_parametrized(
        lin, "bias"
    )
    parametrize.remove_parametrizations(lin, "weight")
    assert type(lin) is nn.Linear and list(lin.state_dict()) == ["bias", "weight"]  # as torch
    np.testing.assert_allclose(lin.weight.detach().numpy(), target.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="does not have a parametrization"):
        parametrize.remove_parametrizations(lin, "weight")
    with pytest.raises(ValueError, match="sequence of tensors"):
        parametrize.remove_parametrizations(
            P.weight_norm(nn.Linear(2, 2)), "weight", leave_parametrized=False
        )


def test_custom_parametrization_chain_and_checks():
    class Symmetric(nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(-1, -2)

    class Double(nn.Module):
        def forward(self, x):
            return 2 * x

        def right_inverse(self, x):
            return x / 2

    lin = nn.Linear(3, 3).double()
    parametrize.register_parametrization(lin, "weight", Symmetric())
    parametrize.register_parametrization(lin, "weight", Double())
    w = lin.weight.detach().numpy()
    np.testing.assert_allclose(w, w.T)
    assert list(lin.state_dict()) == ["bias", "parametrizations.weight.original"]
    o = lin.parametrizations.weight.original.detach().numpy()
    np.testing.assert_allclose(w, 2 * (np.triu(o) + np.triu(o, 1).T))  # Double after Symmetric

    class Shrink(nn.Module):
        def forward(self, x):
            return x[:1]

    with pytest.raises(ember.ShapeError, match="unsafe=True"):
        parametrize.register_parametrization(nn.Linear(2, 2), "weight", Shrink())
    with pytest.raises(ValueError, match="parameter, a buffer"):
        parametrize.register_parametrization(nn.Linear(2, 2), "nothing", Shrink())
    with parametrize.cached():
        assert lin.weight is lin.weight
    assert lin.weight is not lin.weight


def test_old_weight_norm_api_matches_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        for dim in (0, None):
            e = nn.utils.weight_norm(nn.Linear(3, 4), dim=dim)
            t = tnn.utils.weight_norm(tnn.Linear(3, 4), dim=dim)
            same_state_layout(e, t)
            assert list(e.state_dict()) == ["bias", "weight_g", "weight_v"]
            compare_module(e, t, [randn(2, 3)])
            nn.utils.remove_weight_norm(e)
            tnn.utils.remove_weight_norm(t)
            same_state_layout(e, t)
            np.testing.assert_allclose(e.weight.detach().numpy(), t.weight.detach().numpy())
        with pytest.raises(RuntimeError, match="two weight_norm"):
            nn.utils.weight_norm(nn.utils.weight_norm(nn.Linear(2, 2)))


def test_parametrized_modules_capture():
    """ember.function over weight_norm and spectral_norm (training mode: the power iteration
    writes the buffers inside the captured step) equals eager, step by step."""
    e1 = P.weight_norm(nn.Linear(3, 4).double())
    e2 = P.spectral_norm(nn.Linear(4, 2).double())
    t1 = TP.weight_norm(tnn.Linear(3, 4).double())
    t2 = TP.spectral_norm(tnn.Linear(4, 2).double())
    copy_weights(e1, t1)
    copy_weights(e2, t2)
    x = randn(5, 3)

    @ember.function
    def step(x):
        loss = (e2(e1(x).tanh()) ** 2).sum()
        loss.backward()
        return loss

    for _ in range(2):
        for m in (e1, e2, t1, t2):
            m.zero_grad()
        got = step(ember.tensor(x)).item()
        tx = torch.tensor(x)
        want = (t2(t1(tx).tanh()) ** 2).sum()
        want.backward()
        np.testing.assert_allclose(got, want.item(), rtol=1e-10)
        for e, t in ((e1, t1), (e2, t2)):
            for (name, p), q in zip(e.named_parameters(), t.parameters()):
                np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-9, err_msg=name)
            for key, value in t.state_dict().items():
                np.testing.assert_allclose(e.state_dict()[key].numpy(), value.numpy(), rtol=1e-10)


@pytest.mark.parametrize(
    "make,shape",
    [
        (lambda n: n.Linear(3, 4), (2, 3)),
        (lambda n: n.Conv2d(2, 3, 3), (1, 2, 5, 5)),
        (lambda n: n.ConvTranspose1d(2, 3, 3), (2, 2, 4)),  # dim 1 by default
    ],
    ids=["linear", "conv2d", "conv-transpose"],
)
def test_old_spectral_norm_api_matches_torch(make, shape):
    """The hook-based ``nn.utils.spectral_norm``: PyTorch's keys, its power iteration (v then
    u, buffers written in training mode only), gradients through sigma, and removal."""
    e = nn.utils.spectral_norm(make(nn).double(), n_power_iterations=2)
    t = tnn.utils.spectral_norm(make(tnn).double(), n_power_iterations=2)
    assert list(e.state_dict()) == list(t.state_dict())
    e.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t.state_dict().items()})
    x = randn(*shape)
    for training in (True, True, False):
        e.train(training)
        t.train(training)
        e.zero_grad()
        t.zero_grad()
        got = e(ember.tensor(x))
        want = t(torch.tensor(x))
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10)
        (got**2).sum().backward()
        (want**2).sum().backward()
        np.testing.assert_allclose(
            e.weight_orig.grad.numpy(), t.weight_orig.grad.numpy(), rtol=1e-9, atol=1e-12
        )
        for key, value in t.state_dict().items():
            np.testing.assert_allclose(e.state_dict()[key].numpy(), value.numpy(), rtol=1e-10)
    nn.utils.remove_spectral_norm(e)
    tnn.utils.remove_spectral_norm(t)
    assert list(e.state_dict()) == list(t.state_dict())
    np.testing.assert_allclose(e.weight.detach().numpy(), t.weight.detach().numpy(), rtol=1e-10)
    with pytest.raises(RuntimeError, match="two spectral_norm"):
        nn.utils.spectral_norm(nn.utils.spectral_norm(nn.Linear(2, 2)))
