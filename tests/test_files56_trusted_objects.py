"""``ember.load(path, weights_only=False)`` builds objects of classes the program has imported
(io/safe_globals.py `imported_class`), as pickle builds a plain object: ``__new__``, then the
file's state. Any imported class qualified, so a crafted ember checkpoint naming
``tempfile._TemporaryFileCloser`` with a ``name`` and ``delete: true`` deleted that file when
the loaded object was collected: its ``__del__`` ran on the file's state. A class with a
finalizer anywhere in its MRO, or with a base implemented in C (whose state no attribute
shows: ``subprocess.Popen`` is Python but ``types.SimpleNamespace`` is C), is now refused, while
a program's own classes, dataclasses, enums, ``argparse.Namespace`` and ember's modules still
load."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import gc
import json

import pytest

import ember
from ember.errors import CheckpointRefusedError

from .io.fuzzing import join, split


@dataclasses.dataclass
class Settings:
    lr: float = 0.1
    name: str = "run"


class Mode(enum.Enum):
    TRAIN = 1


class Finalized:
    def __del__(self):
        pass


def _crafted(tmp_path, state_of_cfg: dict, cls: str):
    """An ember checkpoint whose value 'cfg' is an object of ``cls`` with ``state_of_cfg``."""
    path = tmp_path / "c.ckpt"
    ember.save({"cfg": Settings()}, path)
    header, body = split(path.read_bytes())
    structure = json.loads(header["__metadata__"]["structure"])
    node = structure["$dict"]["cfg"]["$object"]
    node["class"], node["state"] = cls, {"$dict": state_of_cfg}
    metadata = dict(header["__metadata__"], structure=json.dumps(structure))
    path.write_bytes(join({**header, "__metadata__": metadata}, body, refresh=True))
    return path


def test_a_finalizer_gadget_is_refused_and_deletes_nothing(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    closer = "tempfile._TemporaryFileCloser"
    inner = {"file": None, "name": "x", "delete": False, "close_called": True}
    state = {
        "file": {"$object": {"class": closer, "state": {"$dict": inner}}},
        "name": str(victim),
        "delete": True,
        "close_called": False,
    }
    path = _crafted(tmp_path, state, closer)
    with pytest.raises(CheckpointRefusedError, match="_TemporaryFileCloser.*finalizer"):
        ember.load(path, weights_only=False)
    gc.collect()
    assert victim.read_text() == "precious"


@pytest.mark.parametrize(
    "cls", ["subprocess.Popen", "types.SimpleNamespace", f"{__name__}.Finalized"]
)
def test_classes_with_a_finalizer_or_a_c_base_are_not_built(tmp_path, cls):
    with pytest.raises(CheckpointRefusedError):
        ember.load(_crafted(tmp_path, {"a": 1}, cls), weights_only=False)


def test_plain_classes_still_load_when_the_file_is_trusted(tmp_path):
    path = tmp_path / "ok.ckpt"
    obj = {
        "settings": Settings(0.5, "x"),
        "mode": Mode.TRAIN,
        "args": argparse.Namespace(epochs=3),
        "model": ember.nn.Linear(2, 3),
    }
    ember.save(obj, path)
    loaded = ember.load(path, weights_only=False)
    assert loaded["settings"] == Settings(0.5, "x") and loaded["mode"] is Mode.TRAIN
    assert loaded["args"].epochs == 3 and loaded["model"].weight.shape == (3, 2)
    with pytest.raises(CheckpointRefusedError):
        ember.load(path)  # (not trusted: the classes are not registered)
