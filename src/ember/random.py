"""Seedable random number generators.

An `ember.Generator` is PyTorch's CPU generator: MT19937 seeded with the low 32 bits of the seed
(NumPy's MT19937 with the legacy seeding, ``init_genrand``), so ``ember.manual_seed(s)`` followed
by ``rand``, ``randn``, ``randint``, ``randperm`` or an ``nn.init`` fill gives PyTorch's draws
for ``torch.manual_seed(s)`` (ember/random_streams.py builds them from the words as PyTorch's
CPU kernels do). Every random op takes an optional ``generator=``; without one it draws from the
default generator, which starts from PyTorch's default seed (so a program is reproducible run to
run) and is reseeded by `manual_seed`; Bernoulli masks, multinomial, Poisson and gamma draws
follow PyTorch's kernels too. The few other samplers (binomial, some distributions) use the
generator's ``numpy`` (a NumPy ``Generator`` over the same MT19937 words), so they are
ember's own draws. A generator's state is a JSON-able dict (`get_state` / `set_state`), so
checkpoints can save it without pickle; states of the PCG64 generators of earlier embers are
still accepted (their draws then continue that stream).
"""

from __future__ import annotations

import contextlib
import math

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
        self._use(_mt19937(seed & 0xFFFFFFFF))
        return self

    def _use(self, bits) -> None:
        self.bits = bits
        self.numpy = np.random.Generator(bits)
        self.next_normal = None  # the sine of PyTorch's last double Box-Muller pair, unused
        self._words_shift = np.uint64(32 if isinstance(bits, np.random.PCG64) else 0)

    def words32(self, n: int) -> np.ndarray:
        """The next ``n`` 32-bit words (PyTorch's ``random()``), as uint64."""
        words = self.bits.random_raw(n)
        if self._words_shift:  # (a PCG64 state: the high half of each 64-bit output)
            words >>= self._words_shift
        return words

    def words64(self, n: int) -> np.ndarray:
        """The next ``n`` 64-bit draws (PyTorch's ``random64()``: two words, high first)."""
        pairs = self.words32(2 * n).reshape(n, 2)
        high = pairs[:, 0] << np.uint64(32)
        high |= pairs[:, 1]
        return high

    def initial_seed(self) -> int:
        return self._seed

    def seed(self) -> int:
        """Reseed from the operating system's entropy; returns the new seed."""
        new = int(np.random.SeedSequence().entropy % (2**63))
        self.manual_seed(new)
        return new

    def get_state(self) -> dict:
        state = self.bits.state
        if state["bit_generator"] == "PCG64":  # (a state of an earlier ember, restored)
            return {
                "bit_generator": "PCG64",
                "state": str(state["state"]["state"]),
                "inc": str(state["state"]["inc"]),
                "has_uint32": int(state["has_uint32"]),
                "uinteger": int(state["uinteger"]),
                "seed": self._seed,
            }
        return {
            "bit_generator": "MT19937",
            "key": [int(k) for k in state["state"]["key"]],
            "pos": int(state["state"]["pos"]),
            "next_normal": self.next_normal,
            "seed": self._seed,
        }

    def set_state(self, state: dict) -> Generator:
        """Restore a state from `get_state`. The whole state is checked before any of it is
        used, so a malformed one (from a damaged checkpoint, say) raises `RNGStateError` and
        leaves the generator as it was."""
        numpy_state, seed, next_normal = _checked_state(state)
        bits = np.random.PCG64() if numpy_state["bit_generator"] == "PCG64" else _mt19937(0)
        bits.state = numpy_state
        self._use(bits)
        self.next_normal = next_normal
        if seed is not None:
            self._seed = seed
        return self

    def __repr__(self) -> str:
        return f"ember.Generator(seed={self._seed})"


def _mt19937(seed32: int) -> np.random.MT19937:
    """MT19937 seeded as C++'s ``std::mt19937(seed32)`` and PyTorch's generator are: NumPy's
    RandomState seeds its MT19937 so for a 32-bit seed."""
    _, key, pos, _, _ = np.random.RandomState(seed32).get_state()
    bits = np.random.MT19937()
    bits.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": pos}}
    return bits


_PCG64_FIELDS = {"bit_generator", "state", "inc", "has_uint32", "uinteger", "seed"}
_MT19937_FIELDS = {"bit_generator", "key", "pos", "next_normal", "seed"}


def _checked_state(state) -> tuple[dict, int | None, float | None]:
    """NumPy's bit generator state, the seed and the cached normal from a `get_state` dict,
    or `RNGStateError`."""
    if not isinstance(state, dict):
        raise RNGStateError(
            f"set_state: expected a dict from get_state(), got {type(state).__name__}"
        )
    kind = state.get("bit_generator")
    if kind not in ("MT19937", "PCG64"):
        raise RNGStateError(f"set_state: expected an MT19937 (or PCG64) state, got {kind!r}")
    fields = _MT19937_FIELDS if kind == "MT19937" else _PCG64_FIELDS
    missing = sorted(fields - set(state) - {"seed", "next_normal"})
    extra = sorted(str(k) for k in set(state) - fields)
    if missing or extra:
        raise RNGStateError(f"set_state: missing fields {missing}, unknown fields {extra}")

    def integer(name: str, limit: int, value=None) -> int:
        value = state[name] if value is None else value
        # get_state writes the 128-bit words as decimal strings (JSON has no such integers)
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 40:
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
            raise RNGStateError(
                f"set_state: field {name!r} must be an integer in [0, {limit}), got {value!r:.60}"
            )
        return value

    seed = integer("seed", 2**128) if "seed" in state else None
    if kind == "MT19937":
        key = state["key"]
        if not isinstance(key, (list, tuple)) or len(key) != 624:
            raise RNGStateError("set_state: field 'key' must be a list of 624 integers")
        words = np.array([integer("key", 2**32, k) for k in key], dtype=np.uint32)
        if not words.any():
            raise RNGStateError("set_state: field 'key' is all zeros, which MT19937 never reaches")
        next_normal = state.get("next_normal")
        if next_normal is not None and (
            isinstance(next_normal, bool)
            or not isinstance(next_normal, (int, float))
            or not math.isfinite(next_normal)
        ):
            raise RNGStateError(
                f"set_state: field 'next_normal' must be a finite number or None, got "
                f"{next_normal!r:.60}"
            )
        numpy_state = {
            "bit_generator": "MT19937",
            "state": {"key": words, "pos": integer("pos", 625)},
        }
        return numpy_state, seed, None if next_normal is None else float(next_normal)
    inc = integer("inc", 2**128)
    if inc % 2 == 0:  # PCG's stream increment is always odd
        raise RNGStateError(f"set_state: field 'inc' must be odd, got {inc}")
    numpy_state = {
        "bit_generator": "PCG64",
        "state": {"state": integer("state", 2**128), "inc": inc},
        "has_uint32": integer("has_uint32", 2),
        "uinteger": integer("uinteger", 2**32),
    }
    return numpy_state, seed, None


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
