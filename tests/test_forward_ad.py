"""`ember.autograd.forward_ad` and `ember.func.linearize` against PyTorch's forward-mode AD and
central finite differences, over several functions, shapes and dtypes."""

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw

import ember
import ember.nn.functional as F
from ember.autograd import forward_ad as fwAD


def _fns(lib, f):
    return {
        "sin-mul": lambda x, w: lib.sin(x) * w,
        "matmul-tanh": lambda x, w: lib.tanh(x @ w.transpose(-1, -2)),
        "softmax": lambda x, w: f.softmax(x * w, dim=-1),
        "sum-exp": lambda x, w: (x.exp() * w).sum(-1),
        "layer_norm": lambda x, w: f.layer_norm(
            x, x.shape[-1:], weight=w.reshape(-1, w.shape[-1])[0]
        ),
        "index-cat": lambda x, w: lib.cat([x[..., :1] * 2, w[..., 1:] ** 2 * x[..., 1:]], -1),
    }


SHAPES = [(3, 4), (2, 3, 5)]
DTYPES = [np.float32, np.float64]


def _inputs(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(4)]


@pytest.mark.parametrize("name", list(_fns(ember, F)))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_tangents_match_torch(name, shape, dtype):
    x, w, tx, tw = _inputs(shape, dtype)
    ef = _fns(ember, F)[name]
    tf = _fns(torch, torch.nn.functional)[name]
    with fwAD.dual_level():
        out = ef(
            fwAD.make_dual(ember.tensor(x), ember.tensor(tx)),
            fwAD.make_dual(ember.tensor(w), ember.tensor(tw)),
        )
        primal, tangent = fwAD.unpack_dual(out)
    with tfw.dual_level():
        tout = tf(
            tfw.make_dual(torch.tensor(x), torch.tensor(tx)),
            tfw.make_dual(torch.tensor(w), torch.tensor(tw)),
        )
        tprimal, ttangent = tfw.unpack_dual(tout)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(primal.numpy(), tprimal.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(tangent.numpy(), ttangent.numpy(), rtol=tol, atol=tol)
    assert tangent.dtype.name == str(ttangent.dtype).removeprefix("torch.")
    assert not primal.requires_grad and not tangent.requires_grad


@pytest.mark.parametrize("name", ["sin-mul", "softmax", "layer_norm"])
def test_tangents_match_finite_differences(name):
    x, w, tx, tw = _inputs((2, 5), np.float64, seed=3)
    ef = _fns(ember, F)[name]
    with fwAD.dual_level():
        out = ef(fwAD.make_dual(ember.tensor(x), ember.tensor(tx)), ember.tensor(w))
        tangent = fwAD.unpack_dual(out).tangent.numpy()
    h = 1e-6
    plus = ef(ember.tensor(x + h * tx), ember.tensor(w)).numpy()
    minus = ef(ember.tensor(x - h * tx), ember.tensor(w)).numpy()
    np.testing.assert_allclose(tangent, (plus - minus) / (2 * h), rtol=1e-6, atol=1e-7)


def test_level_rules_and_errors_match_torch():
    x, t = ember.randn(3), ember.randn(3)
    with pytest.raises(RuntimeError, match="no level exists"):
        fwAD.make_dual(x, t)
    assert fwAD.unpack_dual(x) == (x, None)
    with fwAD.dual_level() as level:
        assert level == 0
        with pytest.raises(RuntimeError, match="Nested forward mode AD"):
            fwAD.dual_level().__enter__()
        with pytest.raises(RuntimeError, match="different size"):
            fwAD.make_dual(x, ember.randn(4))
        with pytest.raises(ValueError, match="floating point"):
            fwAD.make_dual(ember.arange(3), ember.arange(3))
        d = fwAD.make_dual(x, t)
        with pytest.raises(RuntimeError, match="already has a forward gradient"):
            fwAD.make_dual(d, t)
        unpacked = fwAD.unpack_dual(d)
        assert isinstance(unpacked, fwAD.UnpackedDualTensor)
        assert unpacked.tangent is t
        assert fwAD.unpack_dual(d.argmax()).tangent is None
        assert fwAD.unpack_dual(x * 2).tangent is None
        y = d * 3
        p, _ = fwAD.unpack_dual(y)
        assert fwAD.unpack_dual(p).tangent is None
        assert fwAD.unpack_dual(p * 2).tangent is None  # a plain tensor: no other leaf
    assert fwAD.unpack_dual(y).tangent is None  # the level ended
    assert fwAD.enter_dual_level() == 0
    fwAD.exit_dual_level()


def test_primal_requiring_grad_keeps_reverse_mode():
    w = ember.randn(3, requires_grad=True)
    tw = torch.tensor(w.detach().numpy(), requires_grad=True)
    t = ember.randn(3)
    with fwAD.dual_level():
        d = fwAD.make_dual(w, t)
        y = (d * d).sin().sum()
        primal, tangent = fwAD.unpack_dual(y)
        # the tangent is differentiable again, as PyTorch's: d/dw of J t
        tangent.backward()
    with tfw.dual_level():
        td = tfw.make_dual(tw, torch.tensor(t.numpy()))
        ty = (td * td).sin().sum()
        tp, tt = tfw.unpack_dual(ty)
        tt.backward()
    np.testing.assert_allclose(tangent.item(), tt.item(), rtol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert primal.requires_grad


def test_module_parameters_as_duals():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    em = ember.nn.Sequential(ember.nn.Linear(4, 5), ember.nn.Tanh(), ember.nn.Linear(5, 2))
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    tangents = {
        k: np.random.default_rng(2).standard_normal(tuple(v.shape)).astype(np.float32)
        for k, v in tm.named_parameters()
    }
    with fwAD.dual_level():
        params = {
            k: fwAD.make_dual(p.detach(), ember.tensor(tangents[k]))
            for k, p in em.named_parameters()
        }
        out = ember.func.functional_call(em, params, (ember.tensor(x),))
        got = fwAD.unpack_dual(out).tangent.numpy()
    with tfw.dual_level():
        params = {
            k: tfw.make_dual(p.detach(), torch.tensor(tangents[k]))
            for k, p in tm.named_parameters()
        }
        out = torch.func.functional_call(tm, params, (torch.tensor(x),))
        want = tfw.unpack_dual(out).tangent.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_dual_level_as_decorator():
    @fwAD.dual_level()
    def jvp_of_square(x, t):
        return fwAD.unpack_dual(fwAD.make_dual(x, t) ** 2).tangent

    x, t = ember.tensor([1.0, 2.0]), ember.tensor([1.0, -1.0])
    np.testing.assert_allclose(jvp_of_square(x, t).numpy(), [2.0, -4.0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_linearize_matches_torch(dtype):
    x, w, tx, tw = _inputs((3, 4), dtype, seed=5)
    ef = _fns(ember, F)["matmul-tanh"]
    tf = _fns(torch, torch.nn.functional)["matmul-tanh"]

    def e_pair(a, b):
        return ef(a, b), (a * b).sum()

    def t_pair(a, b):
        return tf(a, b), (a * b).sum()

    out, jvp_fn = ember.func.linearize(e_pair, ember.tensor(x), ember.tensor(w))
    tout, tjvp_fn = torch.func.linearize(t_pair, torch.tensor(x), torch.tensor(w))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for seed in (0, 1):
        a, b = _inputs((3, 4), dtype, seed=seed)[:2]
        got = jvp_fn(ember.tensor(a), ember.tensor(b))
        want = tjvp_fn(torch.tensor(a), torch.tensor(b))
        assert isinstance(got, tuple) and len(got) == 2
        for g, wv in zip(got, want):
            np.testing.assert_allclose(g.numpy(), wv.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(out[0].numpy(), tout[0].numpy(), rtol=tol, atol=tol)
    with pytest.raises(ValueError, match="linearize"):
        jvp_fn(ember.tensor(tx))


def test_forward_ad_refuses_a_graph_being_built():
    @ember.function
    def f(x, t):
        with fwAD.dual_level():
            return fwAD.unpack_dual(fwAD.make_dual(x, t).sin()).tangent

    with pytest.raises(NotImplementedError, match="eagerly only"):
        f(ember.randn(3), ember.randn(3))
    assert fwAD.enter_dual_level() == 0  # the level was closed on the way out
    fwAD.exit_dual_level()
