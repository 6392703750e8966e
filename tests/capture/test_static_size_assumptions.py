"""A define-then-run graph (placeholders + Session) checks each run's feeds against the size
equalities its ops took for aligned symbolic sizes and against placeholder sizes derived from
others. Before onnx52 only ember.function checked them (capture/size_checks.py): a Session fed
a U-Net an odd image size and failed inside NumPy's concatenate, and a placeholder of size
``2*n`` was matched to nothing but its own name, so a length that broadcast ran silently."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.errors import ShapeError
from ember.symbolic import sym


def _rand(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def test_a_session_refuses_feeds_breaking_an_assumption():
    down, up = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(8, 2, 3, padding=1)
    with ember.Graph() as g:
        x = ember.placeholder((None, 3, None, None), name="x")
        a = F.relu(down(x))
        b = F.interpolate(F.max_pool2d(a, 2), scale_factor=2, mode="nearest")
        y = up(ember.cat([a, b], 1))
    assert {str(a) for a in g.size_assumptions} == {"2*(x_2//2) == x_2", "2*(x_3//2) == x_3"}
    with ember.Session(g) as session:
        for shape in ((1, 3, 8, 8), (2, 3, 6, 10)):
            image = _rand(*shape)
            a_ = F.relu(down(ember.tensor(image)))
            b_ = F.interpolate(F.max_pool2d(a_, 2), scale_factor=2, mode="nearest")
            want = up(ember.cat([a_, b_], 1)).detach().numpy()
            np.testing.assert_allclose(session.run(y, {x: image}), want, rtol=1e-5, atol=1e-6)
        with pytest.raises(ShapeError, match=r"2\*\(x_2//2\) == x_2 \(here 8 and 9\)"):
            session.run(y, {x: _rand(1, 3, 9, 8)})


def test_a_derived_placeholder_size_must_agree():
    n = sym("n")
    with ember.Graph() as g:
        p = ember.placeholder((n, 3), name="p")
        q = ember.placeholder((2 * n,), name="q")
        z = p.sum(1) + q.reshape(-1, 2).sum(1)
    with ember.Session(g) as session:
        got = session.run(z, {p: np.ones((5, 3), np.float32), q: np.ones(10, np.float32)})
        np.testing.assert_array_equal(got, np.full(5, 5.0, np.float32))
        for length in (12, 2):  # (2: q's sum broadcasts against p's, silently, before)
            with pytest.raises(ShapeError, match=r"'q' is fed size .* 2\*n = 10"):
                session.run(z, {p: np.ones((5, 3), np.float32), q: np.ones(length, np.float32)})


def test_blocks_entered_twice_keep_every_assumption_once():
    with ember.Graph() as g:
        x = ember.placeholder((None, None), name="x")
    with g:
        y = ember.cat([x, F.interpolate(x[None, :, ::2], scale_factor=2)[0]], 0)
    with g:
        y = ember.cat([y, F.interpolate(x[None, :, ::2], scale_factor=2)[0]], 0)
    assert len(g.size_assumptions) == 1, g.size_assumptions
    with ember.Session(g) as session:
        assert session.run(y, {x: np.ones((2, 4), np.float32)}).shape == (6, 4)
        with pytest.raises(ShapeError, match="x_1"):
            session.run(y, {x: np.ones((2, 5), np.float32)})
