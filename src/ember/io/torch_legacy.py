"""Reading PyTorch's legacy checkpoint format (``torch.save`` before 1.6, or with
``_use_new_zipfile_serialization=False``) through the same weights-only unpickler as the zip
format (io/torch_format.py: the globals it allows, BUILD and items only into plain containers).

The file is a sequence of pickles and raw data: the magic number, the protocol version (1001),
a dict describing the writer's machine (byte order, type sizes), the object itself, whose
persistent ids name storages (``("storage", type, key, location, numel, view)``), the list of
storage keys in the order their data follows, then each storage's data: its element count as
8 bytes, then its bytes. The object's pickle comes before the data it refers to, so it is read
twice: once with placeholder storages, to learn where it ends and which storages it names, then,
with each storage's data read and checked, for real. Every count and size is checked against
the file before anything is allocated for it; anything inconsistent is a `CheckpointError`
naming the file.
"""

from __future__ import annotations

import io
import pickle  # its opcode machinery only: the unpickler is torch_format._RestrictedUnpickler

import numpy as np

from .._file_limits import canonical_bools
from ..errors import CheckpointError, CheckpointRefusedError
from . import torch_format as tf
from ._pickle_allowance import Allowance, AllowanceExceeded

__all__ = ["MAGIC_NUMBER", "is_legacy", "load_legacy"]

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001
_MAX_STORAGES = 1 << 20


def is_legacy(head: bytes) -> bool:
    """Whether a file's first 4 bytes start the legacy format: a pickle (PROTO 2 or later)
    whose first opcode is LONG1 of 10 bytes, the magic number's length. (An ember checkpoint
    starts with its header's length, which never has these bytes: about 176 MB.)"""
    return len(head) >= 4 and head[0] == 0x80 and 2 <= head[1] <= 5 and head[2:4] == b"\x8a\x0a"


class _Unpickler(tf._RestrictedUnpickler):
    """The weights-only unpickler on a file position, with the legacy persistent ids."""

    def __init__(self, stream: io.BytesIO, storage):
        pickle._Unpickler.__init__(self, stream, encoding="utf-8")
        self._storage = storage
        self._storages = {}
        # (the whole file, storages included, and each storage again as it is named: at most
        # twice as generous as the zip reader's)
        self._allowance = Allowance(len(stream.getbuffer()))

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or len(pid) != 6:
            if isinstance(pid, tuple) and pid and pid[0] == "module":
                raise tf._Refused("a pickled module's source code (torch.save of a whole model)")
            raise tf._Refused(f"a persistent id {pid!r:.80} that is not a storage")
        kind, storage_type, key, _location, numel, view = pid
        if kind != "storage" or not isinstance(storage_type, tf._StorageType):
            raise tf._Refused(f"a persistent id of kind {kind!r:.40} that is not a storage")
        if not isinstance(key, str) or type(numel) is not int or numel < 0:
            raise tf._Refused(f"a storage record named {key!r:.40} of {numel!r:.40} elements")
        dtype = tf._dtype_of(storage_type, "a storage's type")
        array = self._storage(key, dtype, numel)
        if view is not None:  # (view key, offset, size): a piece of the root storage
            if not (isinstance(view, tuple) and len(view) == 3):
                raise tf._Damaged(f"storage view {view!r:.80} is malformed")
            _view_key, offset, size = view
            if type(offset) is not int or type(size) is not int or offset < 0 or size < 0:
                raise tf._Damaged(f"storage view {view!r:.80} is malformed")
            if offset + size > numel:
                raise tf._Damaged(f"a view of {size} elements at {offset} overruns storage {key}")
            array = array[offset : offset + size]
        self._allowance.earn(array)
        return tf._Storage(array, key)


def load_legacy(data: bytes, path: str):
    """The object in legacy-format checkpoint ``data`` (the file's bytes), named ``path``."""
    try:
        return _load(data, path)
    except tf._Refused as exc:
        raise CheckpointRefusedError(tf.refusal(path, exc.args[0]), op="load") from None
    except tf._Damaged as exc:
        raise CheckpointError(
            f"{path}: damaged PyTorch checkpoint: {exc.args[0]}", op="load"
        ) from None
    except tf._Unsupported as exc:
        raise CheckpointError(f"{path}: cannot read {exc.args[0]}", op="load") from None
    except AllowanceExceeded as exc:
        raise CheckpointError(f"{path}: hostile PyTorch checkpoint: {exc}", op="load") from None
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged pickle raises any of many types
        raise CheckpointError(
            f"{path}: damaged PyTorch checkpoint (legacy format; {type(exc).__name__}: "
            f"{str(exc)[:200]})",
            op="load",
        ) from None


def _plain(stream: io.BytesIO, what: str, path: str):
    """One of the header's pickles (numbers, a dict of them): no globals, no storages."""

    def refuse(pid):
        raise tf._Refused(f"a persistent id in the {what}")

    unpickler = _Unpickler(stream, None)
    unpickler.persistent_load = refuse
    return unpickler.load()


def _load(data: bytes, path: str):
    stream = io.BytesIO(data)
    magic = _plain(stream, "magic number", path)
    if magic != MAGIC_NUMBER:
        raise CheckpointError(
            f"{path} is a pickle file but not a PyTorch checkpoint (no legacy magic number); "
            "ember never unpickles arbitrary files",
            op="load",
        )
    version = _plain(stream, "protocol version", path)
    if version != PROTOCOL_VERSION:
        raise CheckpointError(
            f"{path}: legacy PyTorch checkpoint of protocol version {version!r:.40} (ember "
            f"reads {PROTOCOL_VERSION})",
            op="load",
        )
    info = _plain(stream, "system information", path)
    little = info.get("little_endian", True) if isinstance(info, dict) else True
    start = stream.tell()

    # first pass: where the object's pickle ends, and the storages it names
    declared: dict[str, tuple] = {}
    placeholders: dict[str, np.ndarray] = {}  # (one per storage, however often it is named)

    def placeholder(key, dtype, numel):
        known = declared.setdefault(key, (dtype, numel))
        if known != (dtype, numel):
            raise tf._Damaged(f"storage {key} is named twice with different types or sizes")
        if key not in placeholders:
            claimed = sum(a.nbytes for a in placeholders.values()) + numel * dtype.itemsize
            if claimed > len(data):
                raise tf._Damaged(
                    f"storage {key} claims {numel} elements: the storages named so far would "
                    f"need {claimed} bytes, more than the file holds"
                )
            placeholders[key] = np.zeros(numel, dtype.np)
        return placeholders[key]

    token = tf.placeholder_pass.set(True)
    try:
        _Unpickler(stream, placeholder).load()
    finally:
        tf.placeholder_pass.reset(token)
    keys = _plain(stream, "storage keys", path)
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise tf._Damaged("the list of storage keys is malformed")
    if len(keys) > _MAX_STORAGES or set(keys) != set(declared) or len(set(keys)) != len(keys):
        raise tf._Damaged("the storage keys do not match the storages the object names")

    # the data, in the keys' order: each an 8-byte element count, then the bytes
    arrays: dict[str, np.ndarray] = {}
    offset = stream.tell()
    for key in keys:
        dtype, numel = declared[key]
        if offset + 8 > len(data):
            raise tf._Damaged(f"the data of storage {key} is missing (the file is truncated)")
        count = int.from_bytes(data[offset : offset + 8], "little" if little else "big")
        nbytes = numel * dtype.itemsize
        if count != numel or offset + 8 + nbytes > len(data):
            raise tf._Damaged(
                f"storage {key} holds {count} elements in the file ({len(data) - offset - 8} "
                f"bytes left), its record says {numel} {dtype.name} elements"
            )
        order = "<" if little else ">"
        raw = np.frombuffer(data, dtype.np.newbyteorder(order), numel, offset + 8)
        arrays[key] = canonical_bools(raw.astype(dtype.np.newbyteorder("="), copy=True))
        offset += 8 + nbytes

    def storage(key, dtype, numel):
        return arrays[key]

    stream.seek(start)
    return _Unpickler(stream, storage).load()
