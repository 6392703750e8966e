"""The meta device's live count (`_meta.active`): nonzero exactly while a stand-in lives or a
`creating` region is open, so the eager mode's stand-in checks and the shortcuts that skip the
dispatch (ops/_unrecorded.py `direct`) come back once a program's meta tensors are gone."""

from __future__ import annotations

import gc
import pickle

import numpy as np
import pytest

import ember
from ember import _meta
from ember.ops import _registry as reg
from ember.ops import _unrecorded as unrecorded

torch = pytest.importorskip("torch")

MUL = reg.REGISTRY["mul"]


@pytest.fixture(autouse=True)
def _no_stand_ins_alive():
    gc.collect()
    assert _meta.active[0] == 0, "an earlier test left a meta tensor alive"
    yield


def test_every_stand_in_is_counted_until_freed():
    t = ember.empty((3, 4), device="meta")
    assert _meta.active[0] == 1
    kept = [t + 1, t.reshape(12), t.t(), np.sin(t._data)]  # (NumPy's ufunc: a MetaArray too)
    assert all(_meta.is_meta(getattr(k, "_data", k)) for k in kept)
    assert _meta.active[0] == 1 + len(kept)
    copied = pickle.loads(pickle.dumps(t._data))
    assert _meta.is_meta(copied) and _meta.active[0] == 2 + len(kept)
    del kept, copied
    assert _meta.active[0] == 1
    del t
    gc.collect()
    assert _meta.active[0] == 0


def test_creating_region_counts_while_open():
    with _meta.creating():
        assert _meta.active[0] == 1
        with ember.device("meta"):
            z = ember.zeros(2)
        assert _meta.active[0] == 2
    assert _meta.active[0] == 1
    del z
    assert _meta.active[0] == 0
    with pytest.raises(ValueError):  # (a region left by an exception closes too)
        with _meta.creating():
            raise ValueError
    assert _meta.active[0] == 0


def test_materialized_model_turns_the_checks_off_and_trains_as_torch():
    model = ember.nn.Sequential(ember.nn.Linear(5, 4, device="meta"), ember.nn.ReLU())
    assert _meta.active[0] > 0
    model.to_empty(device="cpu")
    gc.collect()
    assert _meta.active[0] == 0
    reference = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU())
    with torch.no_grad(), ember.no_grad():
        for mine, theirs in zip(model.parameters(), reference.parameters()):
            theirs.copy_(torch.randn(theirs.shape))
            mine.copy_(ember.tensor(theirs.numpy()))
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    (model(ember.tensor(x)) * 2.0).sum().backward()
    (reference(torch.tensor(x)) * 2.0).sum().backward()
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-6)


def test_direct_declines_only_while_a_stand_in_lives():
    rng = np.random.default_rng(1)
    a = ember.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    b = ember.tensor(rng.standard_normal(4).astype(np.float32))
    with ember.no_grad():
        want = a * b  # (the dispatch accepts the signature: direct may take it after)
        meta = ember.empty((3, 4), device="meta")
        assert unrecorded.direct(MUL, a, b) is None  # (a stand-in lives: declined)
        assert unrecorded.direct(MUL, meta, meta) is None
        assert (meta * meta).is_meta  # (the dispatch still runs meta operands by shape)
        del meta
        got = unrecorded.direct(MUL, a, b)
    assert got is not None
    np.testing.assert_array_equal(got.numpy(), want.numpy())
