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
ember's own draws.

A generator's state has two forms. `Generator.get_state` and `get_rng_state` give PyTorch's:
a uint8 tensor of 5,056 bytes laid out as PyTorch's ``CPUGeneratorImplState`` (the seed, the
MT19937 words and position, the cached normal draw), so PyTorch's own states (saved in its
checkpoints) restore an ember generator and ember's restore PyTorch's. `Generator.json_state`
gives a JSON-able dict, which ember's own files (graphs, training checkpoints, loader states)
save without pickle. `set_state` takes either form, and PyTorch's 5,048-byte legacy layout;
dict states of the PCG64 generators of earlier embers are still accepted (their draws then
continue that stream).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import warnings

import numpy as np

from .devices import check_device
from .errors import RNGStateError, TraceError, user_stacklevel
from .symbolic_assumptions import in_user_trace

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
        if in_user_trace():
            _refuse_while_traced("manual_seed")
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

    def get_state(self):
        """PyTorch's state bytes as a uint8 tensor (`torch_state`; a NumPy array before the
        tensor layer is imported). A generator restored from an earlier ember's PCG64 state
        has no such form and returns its `json_state`."""
        if self.bits.state["bit_generator"] != "MT19937":
            return self.json_state()
        state = self.torch_state()
        return state if _as_tensor is None else _as_tensor(state)

    def torch_state(self) -> np.ndarray:
        """The state in PyTorch's ``CPUGeneratorImplState`` layout, 5,056 bytes (see
        `_TORCH_STATE`): the MT19937 words as they stand, the position as PyTorch counts it
        (``next`` read next, ``left`` calls until the words are regenerated; a freshly seeded
        generator's as ``manual_seed`` leaves PyTorch's), the cached double normal draw."""
        state = self.bits.state
        if state["bit_generator"] != "MT19937":
            raise RNGStateError("get_state: a PCG64 state of an earlier ember has no PyTorch form")
        key, pos = state["state"]["key"], int(state["state"]["pos"])
        out = np.zeros(_TORCH_STATE["size"], np.uint8)
        fields = _torch_fields(out)
        fields["seed"][0] = self._seed & (2**64 - 1)
        fields["seeded"][0] = 1
        fields["key"][:] = key
        if pos >= 624:  # the words are regenerated at the next draw
            fresh = pos == 624 and np.array_equal(
                key, _mt19937(self._seed & 0xFFFFFFFF).state["state"]["key"]
            )
            fields["left"][0], fields["next"][0] = 1, 0 if fresh else 624
        else:
            fields["left"][0], fields["next"][0] = 625 - pos, pos
        if self.next_normal is not None:
            fields["normal_valid"][0] = 1
            fields["normal_y"][0] = self.next_normal
        return out

    def json_state(self) -> dict:
        """The state as a JSON-able dict (ember's own files save this form)."""
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

    def set_state(self, state) -> Generator:
        """Restore a state from `get_state` (PyTorch's bytes, as a tensor or an array, from
        ember or PyTorch) or `json_state`. The whole state is checked before any of it is
        used, so a malformed one (from a damaged checkpoint, say) raises `RNGStateError` and
        leaves the generator as it was."""
        if isinstance(state, dict):
            numpy_state, seed, next_normal = _checked_state(state)
        else:
            numpy_state, seed, next_normal = _checked_torch_state(state)
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


# PyTorch's CPUGeneratorImplState (aten/src/ATen/CPUGeneratorImpl.cpp), little-endian with C's
# alignment: its legacy part (THGeneratorState: the seed, left, seeded, next, the 624 words
# widened to 64 bits, three doubles of an old normal cache of which PyTorch now uses normal_y
# for the cached double draw, its valid flag; 5,048 bytes), then a cached float normal draw
# and its flag. Field: (offset, dtype, count).
_TORCH_STATE = {
    "size": 5056,
    "legacy_size": 5048,
    "fields": {
        "seed": (0, np.uint64, 1),
        "left": (8, np.int32, 1),
        "seeded": (12, np.int32, 1),
        "next": (16, np.uint64, 1),
        "key": (24, np.uint64, 624),
        "normal_y": (5024, np.float64, 1),
        "normal_valid": (5040, np.int32, 1),
    },
}


def _torch_fields(data: np.ndarray) -> dict:
    """Views of PyTorch's state fields in the uint8 array ``data``."""
    return {
        name: data[offset : offset + np.dtype(dtype).itemsize * count].view(dtype)
        for name, (offset, dtype, count) in _TORCH_STATE["fields"].items()
    }


def _checked_torch_state(state) -> tuple[dict, int, float | None]:
    """NumPy's MT19937 state, the seed and the cached normal from PyTorch's state bytes, or
    `RNGStateError`."""
    try:
        data = np.asarray(state)
    except Exception as exc:  # (an object NumPy cannot read as an array)
        raise RNGStateError(
            f"set_state: expected a state from get_state(), got {type(state).__name__}"
        ) from exc
    sizes = (_TORCH_STATE["size"], _TORCH_STATE["legacy_size"])
    if data.dtype != np.uint8 or data.ndim != 1 or data.size not in sizes:
        raise RNGStateError(
            f"set_state: expected PyTorch's generator state, a uint8 tensor of {sizes[0]} "
            f"(or {sizes[1]}) bytes, or a dict from json_state(); got {data.dtype} of shape "
            f"{tuple(data.shape)}"
        )
    fields = _torch_fields(np.ascontiguousarray(data))
    key = fields["key"]
    if key.max() >= 2**32 or not key.any():
        raise RNGStateError("set_state: the MT19937 words must be 32-bit and not all zero")
    left, position = int(fields["left"][0]), int(fields["next"][0])
    if left == 1:
        pos = 624  # (the words are regenerated at the next draw)
    elif 1 < left <= 624 and left + position == 625:
        pos = position
    else:
        raise RNGStateError(
            f"set_state: inconsistent MT19937 position (left {left}, next {position})"
        )
    next_normal = None
    if fields["normal_valid"][0]:
        next_normal = float(fields["normal_y"][0])
        if not math.isfinite(next_normal):
            raise RNGStateError(f"set_state: the cached normal draw is {next_normal}")
    numpy_state = {"bit_generator": "MT19937", "state": {"key": key.astype(np.uint32), "pos": pos}}
    return numpy_state, int(fields["seed"][0]), next_normal


# Set by the tensor layer (tensor.py): wraps a NumPy array as an ember tensor, so get_state
# returns a tensor as PyTorch's does without this layer importing that one.
_as_tensor = None


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


# whether seeding while a function is traced fails its capture (ember.compile, which then runs
# the call eagerly) rather than warns (ember.function, whose graph keeps the trace's seeding)
_SEEDING_REFUSED: contextvars.ContextVar = contextvars.ContextVar(
    "ember_seeding_refused", default=False
)


@contextlib.contextmanager
def seeding_refused():
    """Inside the block, (re)seeding a generator while the user's code is traced raises
    TraceError (`_refuse_while_traced`)."""
    token = _SEEDING_REFUSED.set(True)
    try:
        yield
    finally:
        _SEEDING_REFUSED.reset(token)


def _refuse_while_traced(what: str) -> None:
    """A generator (re)seeded by the traced function (``torch.manual_seed(0)`` in a step, a
    ``Generator().manual_seed(s)`` made there): a graph's random ops draw from their
    generator's state at each run, so the seed is set once, while tracing, and each later
    call goes on drawing where the last stopped. Under ember.compile that fails the capture
    (PyTorch's compiler breaks its graph there and seeds eagerly: the call runs eagerly);
    ember.function warns."""
    message = (
        f"{what} inside a traced function: a graph's random ops draw from the generator's "
        "state at each run, so the seed is set once, while tracing, not on each call; seed "
        "outside the function (or pass a generator seeded there)"
    )
    if _SEEDING_REFUSED.get():
        raise TraceError(message, op=what)
    warnings.warn(f"{what}: {message}", stacklevel=user_stacklevel())


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


def get_rng_state():
    """The default generator's state, PyTorch's bytes as a uint8 tensor (`Generator.get_state`)."""
    return default_generator.get_state()


def set_rng_state(state) -> None:
    """Restore the default generator from `get_rng_state`'s bytes (ember's or PyTorch's) or a
    `Generator.json_state` dict."""
    if in_user_trace():
        _refuse_while_traced("set_rng_state")
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
    state = default_generator.json_state()
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
