"""Random ops: seeded reproducibility, generator state round trips, distribution moments."""

import json

import numpy as np
import pytest

import ember


def test_manual_seed_reproduces_the_global_stream():
    ember.manual_seed(7)
    a = [ember.rand(3).numpy(), ember.randn(2, 2).numpy(), ember.randint(0, 9, (4,)).numpy()]
    ember.manual_seed(7)
    b = [ember.rand(3).numpy(), ember.randn(2, 2).numpy(), ember.randint(0, 9, (4,)).numpy()]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(ember.rand(3).numpy(), a[0])  # the stream moves on


def test_generators_are_independent_of_the_global_stream():
    g = ember.Generator(3)
    first = ember.randn(5, generator=g).numpy()
    ember.manual_seed(0)
    ember.randn(100)
    np.testing.assert_array_equal(first, ember.randn(5, generator=ember.Generator(3)).numpy())


def test_generator_state_is_json_and_restores_the_stream():
    g = ember.Generator(11)
    ember.rand(4, generator=g)
    state = json.loads(json.dumps(g.json_state()))
    expected = ember.rand(6, generator=g).numpy()
    g2 = ember.Generator(0).set_state(state)
    np.testing.assert_array_equal(ember.rand(6, generator=g2).numpy(), expected)


def test_moments_of_the_distributions():
    g = ember.Generator(1)
    n = 200_000
    u = ember.uniform(-2.0, 4.0, (n,), generator=g).numpy()
    assert u.min() >= -2.0 and u.max() < 4.0
    assert abs(u.mean() - 1.0) < 0.02 and abs(u.var() - 3.0) < 0.05  # (b-a)^2/12 = 3
    z = ember.normal(3.0, 2.0, (n,), generator=g).numpy()
    assert abs(z.mean() - 3.0) < 0.02 and abs(z.std() - 2.0) < 0.02
    k = ember.randint(0, 10, (n,), generator=g).numpy()
    assert k.dtype == np.int64 and set(np.unique(k)) == set(range(10))
    b = ember.bernoulli(ember.full((n,), 0.3), generator=g).numpy()
    assert set(np.unique(b)) == {0.0, 1.0} and abs(b.mean() - 0.3) < 0.01
    p = ember.randperm(50, generator=g).numpy()
    assert sorted(p.tolist()) == list(range(50))


def test_dtypes_and_requires_grad():
    assert ember.rand(2).dtype == ember.float32
    assert ember.randn(2, dtype=ember.float64).dtype == ember.float64
    assert ember.randint(3, (2,), dtype=ember.int32).dtype == ember.int32
    x = ember.randn(3, requires_grad=True)
    assert x.requires_grad and x.is_leaf


def test_in_place_fills_follow_the_seed():
    ember.manual_seed(5)
    w = ember.empty(3, 4).normal_(0.0, 0.5)
    ember.manual_seed(5)
    np.testing.assert_array_equal(w.numpy(), ember.normal(0.0, 0.5, (3, 4)).numpy())
    u = ember.zeros(1000).uniform_(1.0, 2.0).numpy()
    assert u.min() >= 1.0 and u.max() < 2.0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ember.randint(5, 5, (2,)), "high"),
        (lambda: ember.uniform(1.0, 0.0, (2,)), "high"),
        (lambda: ember.normal(0.0, -1.0, (2,)), "std"),
    ],
)
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    "change",
    [
        lambda s: "not a dict",
        lambda s: {**s, "bit_generator": "PCG64"},
        lambda s: {k: v for k, v in s.items() if k != "key"},
        lambda s: {**s, "extra": 1},
        lambda s: {**s, "key": s["key"][:-1]},
        lambda s: {**s, "key": [2**32] + s["key"][1:]},
        lambda s: {**s, "key": [0] * 624},
        lambda s: {**s, "key": "12x"},
        lambda s: {**s, "pos": 625},
        lambda s: {**s, "pos": -1},
        lambda s: {**s, "next_normal": "x"},
        lambda s: {**s, "next_normal": float("nan")},
        lambda s: {**s, "seed": True},
    ],
)
def test_set_state_rejects_malformed_states_and_keeps_the_generator(change):
    g = ember.Generator(3)
    good = g.json_state()
    with pytest.raises(ember.RNGStateError, match="set_state"):
        g.set_state(change(dict(good)))
    assert g.json_state() == good
    assert ember.Generator(3).numpy.random() == g.numpy.random()


def test_a_state_round_trips_through_json_with_the_cached_normal():
    g = ember.Generator(11)
    ember.randn(3, generator=g)  # an odd count: the pair's second value is cached
    state = json.loads(json.dumps(g.json_state()))
    assert state["next_normal"] is not None
    want = ember.randn(5, generator=g).numpy()
    again = ember.Generator().set_state(state)
    np.testing.assert_array_equal(ember.randn(5, generator=again).numpy(), want)


# a PCG64 state as earlier embers saved it (a checkpoint's shuffle generator, say)
_PCG64_STATE = {
    "bit_generator": "PCG64",
    "state": "35399562948360463058890781895381311971",
    "inc": "87136372517582989555478159403783844777",
    "has_uint32": 0,
    "uinteger": 0,
    "seed": 12345,
}


def test_an_earlier_pcg64_state_is_still_accepted_and_continues_its_stream():
    g = ember.Generator().set_state(dict(_PCG64_STATE))
    first = ember.rand(4, generator=g).numpy()
    again = ember.Generator().set_state(dict(_PCG64_STATE))
    np.testing.assert_array_equal(ember.rand(4, generator=again).numpy(), first)
    assert g.json_state()["bit_generator"] == "PCG64" and g.initial_seed() == 12345
    with pytest.raises(ember.RNGStateError, match="inc"):
        ember.Generator().set_state({**_PCG64_STATE, "inc": "2"})


def test_module_level_seed_functions_as_torch():
    ember.manual_seed(1234)
    assert ember.initial_seed() == 1234
    new = ember.seed()
    assert ember.initial_seed() == new and 0 <= new < 2**63
    ember.manual_seed(1234)


def test_generator_takes_a_device_as_torch():
    assert ember.Generator(device="cpu").device == "cpu"
    assert ember.Generator("cpu").initial_seed() == ember.Generator().initial_seed()
    assert ember.Generator(ember.device("cpu")).manual_seed(3).initial_seed() == 3
    with pytest.raises(ember.DeviceError):
        ember.Generator(device="cuda")


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_uniform_and_normal_draws_have_pytorchs_moments(dtype):
    ember.manual_seed(0)
    d = getattr(ember, dtype)
    n = 40000
    for x, lo, hi in (
        (ember.rand(n, dtype=d), 0.0, 1.0),
        (ember.rand_like(ember.zeros(n, dtype=d)), 0.0, 1.0),
        (ember.empty(n, dtype=d).uniform_(2.0, 3.0), 2.0, 3.0),
    ):
        assert x.dtype == d
        for part in (x.real.numpy(), x.imag.numpy()):
            assert part.min() >= lo and part.max() < hi and abs(part.mean() - (lo + hi) / 2) < 0.02
    # each part has the mean and std / sqrt(2): E|z - mean|^2 = std^2
    for z in (ember.empty(n, dtype=d).normal_(1.0, 2.0), ember.normal(1.0, 2.0, (n,), dtype=d)):
        assert z.dtype == d
        for part in (z.real.numpy(), z.imag.numpy()):
            assert abs(part.mean() - 1.0) < 0.05 and abs(part.std() - 2.0 / np.sqrt(2)) < 0.05
