"""`ember.nn.utils.parametrizations.orthogonal` against PyTorch's: values (with the state
copied from PyTorch's module, so the random completion of tall matrices agrees), gradients of
the original and the orthogonality of the weight through training, for the three maps, tall,
wide, square and batched weights, with and without the trivialization."""

import numpy as np
import pytest
import torch

import ember
from ember.nn.utils.parametrizations import orthogonal

MAPS = ["matrix_exp", "cayley", "householder"]
SHAPES = [(4, 4), (6, 3), (3, 6), (2, 4, 4)]


def _pair(shape, how, triv, seed=0):
    torch.manual_seed(seed)
    w = np.random.default_rng(seed).standard_normal(shape)
    tm = torch.nn.Module()
    tm.weight = torch.nn.Parameter(torch.tensor(w))
    em = ember.nn.Module()
    em.weight = ember.nn.Parameter(ember.tensor(w))
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=how, use_trivialization=triv)
    orthogonal(em, orthogonal_map=how, use_trivialization=triv)
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, em


def _orthogonality(q):
    q = q if q.shape[-2] >= q.shape[-1] else q.swapaxes(-1, -2)
    return np.abs(q.swapaxes(-1, -2) @ q - np.eye(q.shape[-1])).max()


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("how", MAPS)
@pytest.mark.parametrize("triv", [True, False])
def test_values_and_gradients_match_torch(shape, how, triv):
    tm, em = _pair(shape, how, triv)
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    tq, eq = tm.weight, em.weight
    np.testing.assert_allclose(eq.detach().numpy(), tq.detach().numpy(), atol=1e-10)
    if triv or how == "householder":
        assert _orthogonality(eq.detach().numpy()) < 1e-10
    g = np.random.default_rng(9).standard_normal(shape)
    (tq * torch.tensor(g)).sum().backward()
    (eq * ember.tensor(g)).sum().backward()
    t_orig = tm.parametrizations.weight.original
    e_orig = em.parametrizations.weight.original
    np.testing.assert_allclose(e_orig.grad.numpy(), t_orig.grad.numpy(), atol=1e-9)


@pytest.mark.parametrize("how", MAPS)
def test_gradient_matches_finite_differences(how):
    _, em = _pair((5, 3), how, True, seed=2)
    orig = em.parametrizations.weight.original
    with ember.no_grad():
        orig.copy_(orig + ember.tensor(np.random.default_rng(3).standard_normal((5, 3)) * 0.3))
    g = ember.tensor(np.random.default_rng(4).standard_normal((5, 3)))
    (em.weight * g).sum().backward()
    grad = orig.grad.numpy()
    x0 = orig.detach().numpy().copy()
    h = 1e-6

    def loss_at(x):
        with ember.no_grad():
            orig.copy_(ember.tensor(x))
            return float((em.weight * g).sum())

    for idx in [(1, 0), (3, 2), (4, 1), (0, 0)]:
        plus, minus = x0.copy(), x0.copy()
        plus[idx] += h
        minus[idx] -= h
        fd = (loss_at(plus) - loss_at(minus)) / (2 * h)
        np.testing.assert_allclose(grad[idx], fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("how", MAPS)
def test_training_keeps_the_weight_orthogonal(how):
    layer = ember.nn.Linear(3, 5, dtype=ember.float64)
    orthogonal(layer, orthogonal_map=how)
    opt = ember.optim.SGD(layer.parameters(), lr=0.1)
    x = ember.randn(8, 3, dtype=ember.float64)
    first = None
    for _ in range(5):
        opt.zero_grad()
        loss = (layer(x) ** 2).sum()
        loss.backward()
        opt.step()
        first = float(loss) if first is None else first
    assert float((layer(x) ** 2).sum()) != first
    assert _orthogonality(layer.weight.detach().numpy()) < 1e-10


def test_defaults_assignment_and_errors_match_torch():
    sq, tall = ember.nn.Linear(4, 4), ember.nn.Linear(3, 6)
    orthogonal(sq)
    orthogonal(tall)
    assert sq.parametrizations.weight[0].orthogonal_map == "matrix_exp"
    assert tall.parametrizations.weight[0].orthogonal_map == "householder"
    q = np.linalg.qr(np.random.default_rng(0).standard_normal((4, 4)))[0].astype(np.float32)
    sq.weight = ember.tensor(q)  # right_inverse: base becomes q, the original -I
    np.testing.assert_allclose(sq.weight.detach().numpy(), q, atol=1e-5)
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices of shape"):
        sq.weight = ember.zeros(3, 4)
    with pytest.raises(ValueError, match="Expected a matrix"):
        orthogonal(ember.nn.Linear(3, 3), name="bias")
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        orthogonal(ember.nn.Linear(3, 3), orthogonal_map="qr")
    with pytest.raises(ValueError, match="no parameter or buffer"):
        orthogonal(ember.nn.Linear(3, 3), name="nope")
    plain = ember.nn.Linear(3, 3)
    orthogonal(plain, orthogonal_map="cayley", use_trivialization=False)
    with pytest.raises(NotImplementedError):
        plain.weight = ember.eye(3)


def test_inside_function_capture():
    layer = ember.nn.Linear(4, 4, dtype=ember.float64)
    orthogonal(layer)
    x = ember.randn(2, 4, dtype=ember.float64)
    f = ember.function(lambda x: layer(x))
    np.testing.assert_allclose(f(x).detach().numpy(), layer(x).detach().numpy(), atol=1e-12)
