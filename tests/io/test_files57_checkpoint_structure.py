"""Hostile checkpoint structures (io/_tree.py's tags, in an ember checkpoint's ``structure``
metadata, written afresh so every checksum holds): each field of each tag replaced by a hostile
value, and objects of every class some imported modules define built from hostile states with
``weights_only=False``. Each file is read or refused with a `CheckpointError` naming it, never
another exception.

Escapes these found (files57): a ``$complex`` part past a float's range (OverflowError), a
``$meta`` or PyTorch meta tensor of more bytes than an int64 counts (NumPy's ValueError; eager
``empty(2**62, 2**62, device="meta")`` raised it too, where PyTorch raises its "Storage size
calculation overflowed"), a quantized node's dtype that is a list (TypeError) or a per-channel
zero point past int64 (OverflowError), a ``$dtype`` spelled with a lone surrogate
(UnicodeEncodeError from NumPy), and, with ``weights_only=False``, any class whose ``__new__``
wants arguments (a namedtuple), which is abstract, has slots, or whose ``__setstate__`` refuses
the file's state (TypeError, AttributeError, KeyError).
"""

from __future__ import annotations

import copy
import importlib
import io
import json
import random

import numpy as np
import pytest

import ember
from ember.errors import CheckpointError, EmberError, ShapeError
from ember.io import checkpoint as ck

from .. import files54_fuzzing as fz

torch = pytest.importorskip("torch")

EXTRA_VALUES = [
    10**400, -(10**400), 2**64, -(2**63) - 1, [10**30], [2**62, 2**62], [-1], [[1]],
    {"$tuple": [1]}, {"$float": "nan"}, {"$dtype": "float32"}, "float32", "qint8", "uint8",
    "complex128", "\ud800x",
]  # fmt: skip


def _seed_checkpoint():
    """A checkpoint with one of each tag: (its structure, its arrays)."""
    base = ember.arange(12.0).reshape(3, 4)
    indices = ember.tensor([[0, 1], [1, 0]])
    obj = {
        "q": ember.quantize_per_tensor(ember.randn(2, 3), 0.1, 3, ember.qint8),
        "qc": ember.quantize_per_channel(
            ember.randn(2, 3), ember.tensor([0.1, 0.2]), ember.tensor([1, 2]), 0, ember.quint8
        ),
        "v1": base[1:],
        "v2": base.t(),
        "c": ember.randn(2, dtype=ember.complex64),
        "m": ember.empty(3, device="meta"),
        "sp": ember.sparse_coo_tensor(indices, ember.tensor([1.0, 2.0]), (2, 2)),
        "z": complex(1, 2),
        "s": {1, 2},
        "t": (1, "a"),
        "d": ember.float16,
        "i": {3: 4},
        "f": float("nan"),
        "p": ember.nn.Parameter(ember.ones(2)),
        "n": np.float32(3),
        "a": np.ones(2),
    }
    buffer = io.BytesIO()
    ember.save(obj, buffer)
    metadata, arrays = ck.read_safetensors(io.BytesIO(buffer.getvalue()), lambda m, p: None)
    return json.loads(metadata["structure"]), arrays


def _places(tree, path=()):
    yield path
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _places(v, (*path, k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _places(v, (*path, i))


def _replaced(tree, path, value):
    if not path:
        return value
    tree = copy.deepcopy(tree)
    here = tree
    for step in path[:-1]:
        here = here[step]
    here[path[-1]] = value
    return tree


def _load(structure, arrays, weights_only=None):
    """``ember.load`` of a checkpoint holding ``structure`` and ``arrays``, its checksums
    fresh (a crafted file, not a damaged one): the value, or the EmberError raised."""
    buffer = io.BytesIO()
    metadata = {ck.FORMAT_KEY: ck.FORMAT_VERSION, "structure": json.dumps(structure)}
    ck.write_safetensors(buffer, arrays, metadata)
    buffer.seek(0)
    buffer.name = "crafted.ckpt"
    try:
        return ember.load(buffer, weights_only=weights_only)
    except EmberError as exc:
        assert isinstance(exc, CheckpointError) and "crafted.ckpt" in str(exc), exc
        return exc


def test_the_seed_loads():
    structure, arrays = _seed_checkpoint()
    loaded = _load(structure, arrays)
    assert not isinstance(loaded, EmberError)
    assert loaded["z"] == complex(1, 2) and loaded["i"] == {3: 4}


@pytest.mark.parametrize("seed", [0, 1])
def test_each_field_of_each_tag_made_hostile(seed):
    """A seeded half of (place, hostile value) pairs: each file read or refused by name."""
    structure, arrays = _seed_checkpoint()
    values = fz.HOSTILE_VALUES + EXTRA_VALUES
    pairs = [(p, v) for p in _places(structure) for v in values]
    rng = random.Random(seed)
    chosen = rng.sample(pairs, len(pairs) // 2)
    refused = 0
    for path, value in chosen:
        try:
            json.dumps(value)
        except ValueError:
            continue
        result = _load(_replaced(structure, path, value), arrays, rng.choice([None, False]))
        refused += isinstance(result, EmberError)
    assert len(chosen) > 1500 and refused > len(chosen) // 3  # (both outcomes reached)


def test_the_escapes_found_are_refused_by_name():
    structure, arrays = _seed_checkpoint()
    tags = structure["$dict"]
    crafted = {
        "a complex part past a float": {"$complex": [10**400, 0]},
        "a meta tensor past int64's bytes": {
            "$meta": {"id": 9, "dtype": "float32", "shape": [2**62, 2**62], "requires_grad": False}
        },
        "a $dtype with a lone surrogate": {"$dtype": "\udc80"},
        "a quantized dtype that is a list": _replaced(tags["q"], ("quantized", "dtype"), []),
        "a zero point past int64": _replaced(tags["qc"], ("quantized", "zero_points", 0), 2**63),
    }
    for what, node in crafted.items():
        result = _load(node, arrays)
        assert isinstance(result, CheckpointError), what


class _Point:
    __slots__ = ("x",)


def _classes():
    """The classes defined by a few modules of many kinds (plain, abstract, slotted,
    namedtuples, enums, dataclasses, with their own __setstate__): what a trusting load may
    be asked to build."""
    names = []
    modules = ["argparse", "fractions", "pathlib", "inspect", "urllib.parse", "string"]
    modules += ["ipaddress", "uuid", "numbers", "typing", "ember.optim", "ember.distributions"]
    for name in modules:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                names.append(f"{value.__module__}.{value.__qualname__}")
    return names + [f"{__name__}._Point"]


STATES = [
    {"$dict": {}}, {"$dict": {"a": 1}}, {"$dict": {"__class__": 1}}, {"$dict": {"__dict__": 1}},
    [1, 2], {"$tuple": [{"$dict": {"a": 1}}, {"$dict": {"x": 1}}]}, {"$tuple": []},
    {"$tuple": [None, {"$dict": {"__class__": 1}}]}, None, "s", 1,
]  # fmt: skip


def test_objects_of_imported_classes_from_hostile_states():
    """weights_only=False builds a class the program imported: its __new__ and __setstate__
    run on the file's state, and whatever they raise is the file's damage, by name."""
    built = refused = 0
    for name in _classes():
        for form, state in [("state", s) for s in STATES] + [("value", 1)]:
            node = {"$object": {"class": name, form: state}}
            result = _load({"$dict": {"x": node, "y": [node]}}, {}, weights_only=False)
            refused += isinstance(result, EmberError)
            built += not isinstance(result, EmberError)
    assert built > 100 and refused > 1000


def test_meta_sizes_past_an_int64_of_bytes_as_pytorch():
    """The size check is the meta device's own (eager factories too), PyTorch's rule: the
    bytes of the sizes (a zero among them included) must fit an int64."""
    shapes = [(2**62, 2**62), (2**61, 3), (2**60, 2), (2**62, 2**62, 0), (2**40, 2**20), (0, 5)]
    for shape in shapes:
        for dtype in ("uint8", "float32"):
            try:
                torch.empty(*shape, device="meta", dtype=getattr(torch, dtype))
                expected = None
            except RuntimeError as exc:
                expected = exc
            if expected is not None and "Stride calculation" in str(expected):
                continue  # (PyTorch's other check, on the strides, also refuses these)
            try:
                got = ember.empty(*shape, device="meta", dtype=getattr(ember, dtype))
            except ShapeError:
                assert expected is not None, (shape, dtype)
                continue
            assert expected is None, (shape, dtype)
            assert tuple(got.shape) == shape
