"""Seedable random number generators.

An `ember.Generator` wraps NumPy's PCG64 bit generator. Every random op takes an optional
``generator=``; without one it draws from the default generator, which starts from a fixed seed
(so a program is reproducible run to run) and is reseeded by `manual_seed`. A generator's state
is a JSON-able dict (`get_state` / `set_state`), so checkpoints can save it without pickle.
"""

from __future__ import annotations

import numpy as np

_DEFAULT_SEED = 67280421310721


class Generator:
    """A source of random numbers with its own state (like ``torch.Generator``)."""

    def __init__(self, seed: int | None = None):
        self.manual_seed(_DEFAULT_SEED if seed is None else seed)

    def manual_seed(self, seed: int) -> Generator:
        seed = int(seed)
        if seed < 0:
            raise ValueError(f"manual_seed: the seed must be non-negative, got {seed}")
        self._seed = seed
        self.numpy = np.random.Generator(np.random.PCG64(seed))
        return self

    def initial_seed(self) -> int:
        return self._seed

    def seed(self) -> int:
        """Reseed from the operating system's entropy; returns the new seed."""
        new = int(np.random.SeedSequence().entropy % (2**63))
        self.manual_seed(new)
        return new

    def get_state(self) -> dict:
        state = self.numpy.bit_generator.state
        return {
            "bit_generator": state["bit_generator"],
            "state": str(state["state"]["state"]),
            "inc": str(state["state"]["inc"]),
            "has_uint32": int(state["has_uint32"]),
            "uinteger": int(state["uinteger"]),
            "seed": self._seed,
        }

    def set_state(self, state: dict) -> Generator:
        if state.get("bit_generator") != "PCG64":
            raise ValueError(f"set_state: expected a PCG64 state, got {state.get('bit_generator')}")
        self.numpy.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": int(state["state"]), "inc": int(state["inc"])},
            "has_uint32": int(state["has_uint32"]),
            "uinteger": int(state["uinteger"]),
        }
        self._seed = int(state.get("seed", self._seed))
        return self

    def __repr__(self) -> str:
        return f"ember.Generator(seed={self._seed})"


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Reseed the default generator; returns it."""
    return default_generator.manual_seed(seed)


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> dict:
    return default_generator.get_state()


def set_rng_state(state: dict) -> None:
    default_generator.set_state(state)


def resolve(generator: Generator | None) -> Generator:
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be an ember.Generator, got {type(generator).__name__}")
    return generator
