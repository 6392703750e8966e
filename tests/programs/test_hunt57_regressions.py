"""Regressions of hunt57 that need more than a program's comparison with PyTorch: resuming a
loader with persistent workers, the refusal of seeding inside a traced function, and a failed
trace's side effects undone before ember.compile's eager rerun."""

import random
import warnings

import numpy as np
import pytest

import ember
from ember.utils.data import DataLoader, TensorDataset


def _orders(loader, epochs):
    return [[b[0].tolist() for b in loader] for _ in range(epochs)]


@pytest.mark.parametrize("stop", [(0, 2), (1, 1), (2, 0)])
def test_a_resumed_loader_of_persistent_workers_replays_the_uninterrupted_epochs(stop):
    # stop: (epoch, batches consumed in it) where the state is saved
    def loader():
        return DataLoader(
            TensorDataset(ember.arange(10)),
            batch_size=3,
            shuffle=True,
            num_workers=2,
            persistent_workers=True,
            generator=ember.Generator().manual_seed(4),
        )

    full = _orders(loader(), 3)
    first = loader()
    epoch, consumed = stop
    seen = _orders(first, epoch)
    it = iter(first)
    seen.append([next(it)[0].tolist() for _ in range(consumed)])
    state = first.state_dict()
    assert ("persistent_seed" in state) == (epoch > 0), state
    resumed = loader()
    resumed.load_state_dict(state)
    rest = _orders(resumed, 3 - epoch)
    assert seen[:-1] + [seen[-1] + rest[0]] + rest[1:] == full


def test_a_persistent_seed_that_is_no_seed_is_refused():
    loader = DataLoader(TensorDataset(ember.arange(4)), batch_size=2, num_workers=1,
                        persistent_workers=True)  # fmt: skip
    state = loader.state_dict() | {"persistent_seed": -3}
    with pytest.raises(ember.EmberError, match="persistent_seed"):
        loader.load_state_dict(state)


def test_seeding_inside_a_traced_function_warns_and_fails_a_compile_capture():
    def step(x):
        ember.manual_seed(3)
        return x + ember.randn(3)

    # ember.function bakes the seeding in (its first call is right), with a warning at the
    # user's line
    with pytest.warns(UserWarning, match="manual_seed inside a traced function") as info:
        first = ember.function(step)(ember.zeros(3))
    assert info[0].filename == __file__
    ember.manual_seed(3)
    assert ember.equal(first, ember.randn(3))
    # ember.compile refuses the capture (nothing seeded by it) and runs each call eagerly
    compiled = ember.compile(step, fullgraph=True)
    state = ember.get_rng_state()
    with pytest.raises(ember.TraceError, match="manual_seed inside a traced function") as info:
        compiled(ember.zeros(3))
    assert f"{__file__}:{step.__code__.co_firstlineno + 1}" in str(info.value)
    assert ember.equal(ember.get_rng_state(), state)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = ember.compile(step)
        assert ember.equal(eager(ember.zeros(3)), eager(ember.zeros(3)))


def test_a_failed_compile_trace_draws_python_random_once_and_appends_once():
    log = []

    def step(x):
        log.append(random.random())
        if x.sum() > 0:  # (fails the capture: the call runs eagerly)
            x = x * 2
        return x

    random.seed(5)
    expected = [random.random() for _ in range(2)]
    random.seed(5)
    compiled = ember.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(ember.ones(2))
        compiled(ember.ones(2))
    assert log == expected


def test_ember_function_still_bakes_a_python_draw_in_with_a_warning():
    def f(x):
        return x * np.random.uniform(1, 2)

    np.random.seed(0)
    g = ember.function(f)
    with pytest.warns(UserWarning, match="drew from Python's random module"):
        a = g(ember.ones(2))
    assert ember.equal(g(ember.ones(2)), a)
