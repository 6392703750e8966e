"""ember.quasirandom.SobolEngine against torch.quasirandom.SobolEngine."""

import warnings

import numpy as np
import pytest

import ember
from ember.errors import ArgumentError

torch = pytest.importorskip("torch")


def test_the_unscrambled_sequence_is_pytorchs_point_for_point():
    for dim in (1, 5, 40):
        e, t = ember.quasirandom.SobolEngine(dim), torch.quasirandom.SobolEngine(dim)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (no warning for counts that are no power of two)
            np.testing.assert_array_equal(e.draw(7).numpy(), t.draw(7).numpy())
        e.fast_forward(9), t.fast_forward(9)
        got, want = e.draw(16, dtype=ember.float64), t.draw(16, dtype=torch.float64)
        assert got.dtype == ember.float64
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert e.num_generated == t.num_generated == 32
        assert e.draw_base2(5).shape == (32, dim)
        e.reset()
        np.testing.assert_array_equal(e.draw(1).numpy(), np.zeros((1, dim), np.float32))


def test_scrambling_follows_the_seed_or_embers_generator():
    a = ember.quasirandom.SobolEngine(3, scramble=True, seed=7).draw(8).numpy()
    b = ember.quasirandom.SobolEngine(3, scramble=True, seed=7).draw(8).numpy()
    np.testing.assert_array_equal(a, b)
    assert ((a >= 0) & (a < 1)).all() and len({tuple(r) for r in a}) == 8
    ember.manual_seed(1)
    c = ember.quasirandom.SobolEngine(3, scramble=True).draw(4).numpy()
    ember.manual_seed(1)
    np.testing.assert_array_equal(
        c, ember.quasirandom.SobolEngine(3, scramble=True).draw(4).numpy()
    )
    engine = ember.quasirandom.SobolEngine(2)
    engine.draw(3)
    with pytest.raises(ArgumentError, match="power of 2"):
        engine.draw_base2(2)
    with pytest.raises(ArgumentError, match="dimensionality"):
        ember.quasirandom.SobolEngine(0)


@pytest.mark.parametrize("seed", [0, 1, 12345, None])
def test_the_scrambled_sequence_is_pytorchs_point_for_point(seed):
    """The shift and matrices come from randint on the seeded (or default) generator, in
    PyTorch's order, so the points, the first one included, are PyTorch's bit for bit."""
    results = []
    for lib in (torch, ember):
        lib.manual_seed(3)
        e = lib.quasirandom.SobolEngine(6, scramble=True, seed=seed)
        points = [e.draw(1), e.draw(5)]
        e.fast_forward(4)
        points.append(e.draw(3, dtype=lib.float64))
        e.reset()
        points.append(e.draw_base2(3))
        points.append(lib.rand(2))  # (the default generator advanced alike without a seed)
        results.append([p.numpy() for p in points] + [repr(e)])
    for want, got in zip(*results):
        if isinstance(want, str):
            assert got == want
        else:
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
