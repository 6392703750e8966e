"""`ember.signal.windows` against `torch.signal.windows`: every window, symmetric and periodic,
lengths 0 to 17, float32 and float64, their keywords, the errors PyTorch raises, and the
gradient of a window's parameter-free result with requires_grad."""

import numpy as np
import pytest
import torch
import torch.signal.windows as TW

import ember
import ember.signal.windows as EW

NAMES = [
    "bartlett", "blackman", "cosine", "exponential", "gaussian", "general_hamming", "hamming",
    "hann", "kaiser", "nuttall",
]  # fmt: skip
LENGTHS = [0, 1, 2, 3, 8, 17]
EXTRA = {
    "exponential": [{"tau": 0.5}, {"tau": 3.0, "sym": False, "center": 2.0}],
    "gaussian": [{"std": 0.7}, {"std": 3.0}],
    "kaiser": [{"beta": 0.0}, {"beta": 5.5}],
    "general_hamming": [{"alpha": 0.3}],
}


def _compare(name, M, kwargs, dtype):
    got = getattr(EW, name)(M, dtype=getattr(ember, dtype), **kwargs)
    want = getattr(TW, name)(M, dtype=getattr(torch, dtype), **kwargs)
    assert got.dtype.name == dtype and tuple(got.shape) == tuple(want.shape)
    tol = 2e-6 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_windows_match_torch(name, sym, dtype):
    for M in LENGTHS:
        _compare(name, M, {"sym": sym}, dtype)
    for kwargs in EXTRA.get(name, []):
        if kwargs.get("center") is not None and sym:
            continue
        for M in (1, 5, 12):
            _compare(name, M, {"sym": sym, **kwargs}, dtype)


@pytest.mark.parametrize("sym", [True, False])
def test_general_cosine_matches_torch(sym):
    for a in ([0.5, 0.5], [0.3, 0.2, 0.1, 0.05], (1.0,)):
        for M in (0, 1, 4, 11):
            for dtype in ("float32", "float64"):
                _compare("general_cosine", M, {"a": a, "sym": sym}, dtype)


def test_default_dtype_and_requires_grad():
    assert EW.hann(4).dtype == ember.get_default_dtype()
    w = EW.gaussian(6, requires_grad=True)
    t = TW.gaussian(6, requires_grad=True)
    assert w.requires_grad == t.requires_grad and w.is_leaf == t.is_leaf
    k = EW.kaiser(5, requires_grad=True)
    assert k.requires_grad


def _raises_like_torch(call):
    try:
        call(TW, torch)
    except Exception as e:
        t_exc = type(e)
    else:
        raise AssertionError("torch accepts it")
    with pytest.raises(t_exc):
        call(EW, ember)


@pytest.mark.parametrize(
    "call",
    [
        lambda W, lib: W.hann(-1),
        lambda W, lib: W.hann(4, dtype=lib.int64),
        lambda W, lib: W.hann(4, dtype=lib.float16),
        lambda W, lib: W.gaussian(4, std=0.0),
        lambda W, lib: W.exponential(4, tau=-1.0),
        lambda W, lib: W.exponential(4, center=1.0),
        lambda W, lib: W.kaiser(4, beta=-1.0),
        lambda W, lib: W.general_cosine(4, a=[]),
        lambda W, lib: W.general_cosine(4, a=3.0),
        lambda W, lib: W.hann(4, layout=lib.sparse_coo),
    ],
)
def test_errors_match_torch(call):
    _raises_like_torch(call)


def test_namespace():
    assert ember.signal.windows is EW
    assert sorted(EW.__all__) == sorted(n for n in TW.__all__)
