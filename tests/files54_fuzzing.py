"""Seeded mutations of files, shared by the fuzzers of the readers that tests/io/fuzzing.py and
tests/onnx/fuzzing.py do not cover (IDX datasets, BERT and sentence-embedder model folders,
calibration caches).

`mutate_bytes` damages a file as storage or a crafted file would (bits flipped, cut at any
byte or at one of the format's field boundaries, bytes inserted or deleted, a field overwritten
with a huge, zero or negative number); `mutate_json` changes a parsed JSON value at a random
place (a value replaced by a hostile one, a key dropped, a value nested thousands deep).
`Tally.check` runs one case and records any exception that is not an `EmberError`: what the
fuzzers look for. The test files run a fixed seed for a few thousand cases; ``EMBER_FUZZ_CASES``
runs as many as asked (``EMBER_FUZZ_SEED`` another sequence).
"""

from __future__ import annotations

import copy
import os
import random
import struct
import traceback
from dataclasses import dataclass, field

from ember.errors import EmberError

HOSTILE_VALUES = [
    None,
    True,
    False,
    -1,
    0,
    1,
    2**31,
    2**63,
    10**30,
    1e308,
    float("nan"),
    float("inf"),
    -1e-9,
    0.5,
    "",
    "x",
    "../../etc",
    "/etc/passwd",
    "..",
    "<script>alert(1)</script>",
    "\udc80",
    "é∂漢",
    [],
    {},
    [1, 2, 3],
    {"a": 1},
]
HUGE_NUMBERS = [0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**63 - 1, 2**64 - 1]


def cases(default: int) -> int:
    """How many cases a fuzzer runs: ``EMBER_FUZZ_CASES`` when set, else ``default``."""
    return int(os.environ.get("EMBER_FUZZ_CASES", default))


def seed(default: int = 0) -> int:
    return int(os.environ.get("EMBER_FUZZ_SEED", default))


def mutate_bytes(data: bytes, rng: random.Random, boundaries=(), big_endian=False) -> bytes:
    """``data`` damaged one way (see the module docstring); ``boundaries``: offsets where the
    format's fields start, where cuts and overwritten numbers go half the time."""
    out = bytearray(data)
    places = list(boundaries) if boundaries and rng.random() < 0.5 else None
    at = rng.choice(places) if places else rng.randrange(max(len(out), 1))
    op = rng.randrange(6)
    if op == 0:
        for _ in range(rng.choice([1, 1, 2, 4])):
            if out:
                out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    elif op == 1:
        del out[at:]
    elif op == 2:
        out[at:at] = bytes(rng.randrange(256) for _ in range(rng.choice([1, 4, 8])))
    elif op == 3:
        del out[at : at + rng.randrange(1, 9)]
    elif op == 4:
        width = rng.choice([4, 8])
        number = rng.choice(HUGE_NUMBERS) % 2 ** (8 * width)
        out[at : at + width] = number.to_bytes(width, "big" if big_endian else "little")
    else:
        out[at : at + 1] = bytes([rng.choice([0, 0xFF, 0x7F, 0x80])])
    return bytes(out)


def _places(tree, path=()):
    yield path
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _places(value, (*path, key))
    elif isinstance(tree, list):
        for k, value in enumerate(tree):
            yield from _places(value, (*path, k))


def mutate_json(tree, rng: random.Random):
    """A changed deep copy of the JSON value ``tree`` (see the module docstring)."""
    tree = copy.deepcopy(tree)
    places = [p for p in _places(tree) if p]
    if not places or rng.random() < 0.03:
        return rng.choice(HOSTILE_VALUES)
    path = rng.choice(places)
    parent = tree
    for key in path[:-1]:
        parent = parent[key]
    op = rng.randrange(5)
    if op in (0, 1):
        parent[path[-1]] = rng.choice(HOSTILE_VALUES)
    elif op == 2:
        parent.pop(path[-1])
    elif op == 3:
        value = parent[path[-1]]
        for _ in range(rng.choice([1, 40, 3000])):
            value = [value]
        parent[path[-1]] = value
    else:  # a value moved from elsewhere in the file
        source = rng.choice(places)
        value = tree
        for key in source:
            value = value[key]
        parent[path[-1]] = copy.deepcopy(value)  # (a copy: an ancestor makes no cycle)
    return tree


def idx_bytes(shape, code: int = 0x08, data: bytes | None = None) -> bytes:
    """An IDX file's bytes (uint8 unless ``code`` says otherwise)."""
    width = {0x08: 1, 0x09: 1, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}[code]
    count = 1
    for d in shape:
        count *= d
    header = struct.pack(">HBB", 0, code, len(shape)) + struct.pack(f">{len(shape)}I", *shape)
    return header + (bytes(k % 251 for k in range(count * width)) if data is None else data)


@dataclass
class Tally:
    """Outcomes of the cases run: read, refused with an `EmberError`, or escaped (anything
    else, with the case's description and the traceback)."""

    read: int = 0
    refused: int = 0
    escapes: list = field(default_factory=list)

    def check(self, what: str, run) -> None:
        try:
            run()
        except EmberError:
            self.refused += 1
        except Exception as exc:  # noqa: BLE001 - what the fuzzer is looking for
            trace = traceback.format_exc()[-1500:]
            self.escapes.append(f"{what}: {type(exc).__name__}: {str(exc)[:200]}\n{trace}")
        else:
            self.read += 1

    def report(self) -> str:
        head = f"{self.read} read, {self.refused} refused, {len(self.escapes)} escaped"
        return "\n".join([head, *self.escapes[:3]])
