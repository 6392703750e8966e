"""Seedable random number generators.

An `ember.Generator` wraps NumPy's PCG64 bit generator. Every random op takes an optional
``generator=``; without one it draws from the default generator, which starts from a fixed seed
(so a program is reproducible run to run) and is reseeded by `manual_seed`. A generator's state
is a JSON-able dict (`get_state` / `set_state`), so checkpoints can save it without pickle.
"""

from __future__ import annotations

import contextlib

import numpy as np

from .devices import check_device
from .errors import RNGStateError

_DEFAULT_SEED = 67280421310721


class Generator:
    """A source of random numbers with its own state (like ``torch.Generator``)."""

    def __init__(self, seed: int | None = None, device=None):
        """``Generator()`` / ``Generator(device="cpu")`` as PyTorch's (whose one positional
        argument is the device); ``Generator(seed)`` seeds it at once."""
        if isinstance(seed, str) or hasattr(seed, "type"):  # torch.Generator("cpu")
            seed, device = None, seed
        self.device = check_device("cpu" if device is None else device, "Generator device")
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
        """Restore a state from `get_state`. The whole state is checked before any of it is
        used, so a malformed one (from a damaged checkpoint, say) raises `RNGStateError` and
        leaves the generator as it was."""
        numpy_state, seed = _checked_state(state)
        self.numpy.bit_generator.state = numpy_state
        if seed is not None:
            self._seed = seed
        return self

    def __repr__(self) -> str:
        return f"ember.Generator(seed={self._seed})"


_STATE_FIELDS = {"bit_generator", "state", "inc", "has_uint32", "uinteger", "seed"}


def _checked_state(state) -> tuple[dict, int | None]:
    """NumPy's PCG64 state and the seed from a `get_state` dict, or `RNGStateError`."""
    if not isinstance(state, dict):
        raise RNGStateError(
            f"set_state: expected a dict from get_state(), got {type(state).__name__}"
        )
    if state.get("bit_generator") != "PCG64":
        raise RNGStateError(
            f"set_state: expected a PCG64 state, got {state.get('bit_generator')!r}"
        )
    missing = sorted(_STATE_FIELDS - set(state) - {"seed"})
    extra = sorted(str(k) for k in set(state) - _STATE_FIELDS)
    if missing or extra:
        raise RNGStateError(f"set_state: missing fields {missing}, unknown fields {extra}")

    def integer(name: str, limit: int) -> int:
        value = state[name]
        # get_state writes the 128-bit words as decimal strings (JSON has no such integers)
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 40:
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
            raise RNGStateError(
                f"set_state: field {name!r} must be an integer in [0, {limit}), got {state[name]!r}"
            )
        return value

    inc = integer("inc", 2**128)
    if inc % 2 == 0:  # PCG's stream increment is always odd
        raise RNGStateError(f"set_state: field 'inc' must be odd, got {inc}")
    numpy_state = {
        "bit_generator": "PCG64",
        "state": {"state": integer("state", 2**128), "inc": inc},
        "has_uint32": integer("has_uint32", 2),
        "uinteger": integer("uinteger", 2**32),
    }
    seed = integer("seed", 2**128) if "seed" in state else None
    return numpy_state, seed


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Reseed the default generator; returns it."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Reseed the default generator from the operating system's entropy (``torch.seed``);
    returns the new seed."""
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> dict:
    return default_generator.get_state()


def set_rng_state(state: dict) -> None:
    default_generator.set_state(state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, _caller="fork_rng", _devices_kw="devices",
             device_type: str = "cuda"):  # fmt: skip
    """PyTorch's ``torch.random.fork_rng``: the default generator's state is restored when the
    block ends, so draws inside it leave the stream outside as it was (``enabled=False``: a
    plain block). There are no accelerator generators: ``devices`` is accepted and ignored."""
    if not enabled:
        yield
        return
    state = default_generator.get_state()
    try:
        yield
    finally:
        default_generator.set_state(state)


def resolve(generator: Generator | None) -> Generator:
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be an ember.Generator, got {type(generator).__name__}")
    return generator
