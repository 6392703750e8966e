"""torch._foreach_*: every name PyTorch 2.13 has exists, and each equals PyTorch's on lists of
tensors of different shapes with each argument form (a number, a list of numbers, a list of
tensors), in place and not; a timm-style model EMA written with them, eagerly and captured;
lists of different lengths are refused naming both."""

import numpy as np
import pytest

import ember
from ember.errors import ArgumentError

torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")

ARRAYS = [
    np.random.default_rng(0).random((3, 4)) + 0.5,
    np.random.default_rng(1).random((5,)) + 0.5,
    np.random.default_rng(2).random((2, 2, 2)) + 0.5,
]
NAMES = sorted(n for n in dir(torch) if n.startswith("_foreach"))
MATRIX = {"_foreach_mm"}  # (products of matrices: test_keyword_and_special_forms)
FORMS = ([], [2.0], [[1.5, 2.0, 0.5]], ["tensors"], ["tensors", "tensors"])


def _tensors(lib):
    return [lib.tensor(a.copy()) for a in ARRAYS]


def _numpy(values):
    if values is None:
        return None
    return [
        v.detach().resolve_conj().numpy() if hasattr(v, "resolve_conj") else v.numpy()
        for v in values
    ]


def test_every_foreach_function_exists():
    missing = [n for n in NAMES if not hasattr(ember, n)]
    assert not missing, missing


@pytest.mark.parametrize("name", [n for n in NAMES if n not in MATRIX])
def test_foreach_matches_pytorch(name):
    checked = 0
    for form in FORMS:
        t_self = _tensors(torch)
        try:
            want = getattr(torch, name)(
                t_self, *[_tensors(torch) if a == "tensors" else a for a in form]
            )
        except Exception:  # (a form PyTorch refuses for this function)
            continue
        e_self = _tensors(ember)
        got = getattr(ember, name)(
            e_self, *[_tensors(ember) if a == "tensors" else a for a in form]
        )
        if name.endswith("_"):  # in place: the tensors themselves changed
            for e, t in zip(_numpy(e_self), _numpy(t_self)):
                np.testing.assert_allclose(e, t, rtol=1e-6, atol=1e-12)
        else:
            assert len(got) == len(want)
            for e, t in zip(_numpy(got), _numpy(want)):
                np.testing.assert_allclose(e, t, rtol=1e-6, atol=1e-12)
        checked += 1
    assert checked, f"no argument form of {name} ran"


def test_keyword_and_special_forms():
    def both(fn):
        return fn(ember, _tensors(ember)), fn(torch, _tensors(torch))

    cases = [
        lambda L, ts: L._foreach_add(ts, _tensors(L), alpha=-2),
        lambda L, ts: L._foreach_sub(ts, _tensors(L), alpha=3),
        lambda L, ts: L._foreach_mm([L.tensor(ARRAYS[0])], [L.tensor(ARRAYS[0].T.copy())]),
        lambda L, ts: L._foreach_pow(2.0, ts),
        lambda L, ts: L._foreach_addcdiv(ts, _tensors(L), _tensors(L), [0.5, 1.0, 2.0]),
        lambda L, ts: L._foreach_lerp(ts, _tensors(L), 0.25),
        lambda L, ts: L._foreach_norm(ts, 1),
        lambda L, ts: L._foreach_powsum(ts, 0),
        lambda L, ts: L._foreach_max(ts),
    ]
    for fn in cases:
        got, want = both(fn)
        for e, t in zip(_numpy(got), _numpy(want)):
            np.testing.assert_allclose(e, t, rtol=1e-6)


@pytest.mark.parametrize("captured", [False, True])
def test_a_model_ema_written_with_foreach(captured):
    """timm's ModelEmaV3 update: ema = ema * decay + param * (1 - decay), in place."""
    model = ember.nn.Linear(4, 3)
    ema = ember.nn.Linear(4, 3)
    ema.load_state_dict(model.state_dict())
    with ember.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    decay = 0.9
    before = [p.detach().clone() for p in ema.parameters()]

    def update():
        with ember.no_grad():
            ema_params = list(ema.parameters())
            ember._foreach_lerp_(ema_params, list(model.parameters()), 1 - decay)

    step = ember.function(update) if captured else update
    step()
    step()
    for b, p, m in zip(before, ema.parameters(), model.parameters()):
        want = b.numpy()
        for _ in range(2):
            want = want + (m.detach().numpy() - want) * (1 - decay)
        np.testing.assert_allclose(p.detach().numpy(), want, rtol=1e-5, atol=1e-6)


def test_lists_of_different_lengths_are_refused():
    with pytest.raises(ArgumentError, match="3 and 2 elements"):
        ember._foreach_add(_tensors(ember), _tensors(ember)[:2])
    with pytest.raises(ArgumentError, match="a list of tensors"):
        ember._foreach_exp(ember.ones(3))
