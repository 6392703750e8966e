"""Checkpoints: `save(obj, path)` and `load(path)` (exported as ``ember.save`` / ``ember.load``).

File format: a standard safetensors file, readable by the ``safetensors`` library (bfloat16
tensors need a framework with bfloat16, e.g. ``safetensors.torch``, since NumPy has none). Its
tensors are the tensor leaves of the saved object, named by their place in it
(``model.fc.weight``); its ``__metadata__`` (string values only) holds

* ``ember_checkpoint``: the format version ("1");
* ``structure``: the object tree as JSON (see `ember.io._tree`), tensors referenced by name;
* ``crc32``: a JSON map from tensor name to the CRC-32 of its bytes, so damaged data is
  detected on load rather than trained on;
* ``header_sha256``: the SHA-256 of the rest of the header in a canonical form (`_header_digest`:
  the other metadata entries, and each tensor's name, dtype and shape, as JSON with sorted keys),
  so a damaged header (a renamed key, a changed learning rate or epoch) is detected too.

Together they cover every byte: the 8-byte length and the JSON must parse, the header's content
is hashed, the tensors' extents must tile the data exactly (no byte belongs to none or to two),
and every tensor's bytes have their CRC-32, which also catches two tensors' extents swapped.
Files written before ``header_sha256`` existed load as they did (their tensors checked, their
header not); saving them again adds it. Readers that do not know the entry (the ``safetensors``
library, older embers) ignore it.

Nothing is ever pickled or evaluated. Saving is atomic: the file is written under a temporary
name in the target's directory, flushed to disk (fsync), renamed over the target (os.replace)
and the directory entry synced, so a crash at any point leaves either the old or the new
checkpoint, never a mixture; on failure the temporary file is removed, and the temporaries of
killed saves are removed by the next save of the same file (ember._files). Loading checks the
header, every tensor's dtype, shape and extent, the file size and the checksums, and raises
`ember.CheckpointError` naming the file and the problem.

File objects. As with ``torch.save``/``torch.load``, the target or source may be a file object
instead of a path: anything with ``write`` (and ``flush``) to save to (an open binary file, an
``io.BytesIO``), anything with ``read`` and, ideally, ``seek``/``tell`` to load from. Saving to
one writes the checkpoint straight into it from its current position (the whole file is built
in memory first) and flushes it: atomicity, fsync and closing are then the caller's business.
Loading reads from the object's current position to its end (a checkpoint must be the rest of
the object), in either format, dispatched on its first bytes, and leaves the position at the
end; a stream that cannot seek is read into memory first, up to
`ember.io._stream.MAX_STREAM_BYTES`. The checks are the same as for a path, and errors name the
object (its ``name``, else its repr).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import zlib

import ml_dtypes
import numpy as np
from safetensors import TensorSpec, serialize, serialize_file

from .._file_limits import canonical_bools, check_allocation, open_regular
from .._files import create_temporary
from ..errors import CheckpointError, CheckpointNotFoundError
from . import _stream, torch_format, torch_legacy
from ._tree import decode, encode

FORMAT_KEY, FORMAT_VERSION = "ember_checkpoint", "1"

# safetensors dtype codes of ember's dtypes (file side is little-endian)
_DTYPES = {
    "BOOL": np.dtype(np.bool_),
    "U8": np.dtype(np.uint8),
    "I8": np.dtype(np.int8),
    "I16": np.dtype("<i2"),
    "I32": np.dtype("<i4"),
    "I64": np.dtype("<i8"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),  # (safetensors' names of the two OCP formats;
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),  # the fnuz ones are stored as their bytes)
}
_CODES = {dtype: code for code, dtype in _DTYPES.items()}
_MAX_HEADER = 100 * 2**20  # safetensors' own limit on the JSON header
_MAX_DIM = 2**63  # of a tensor's dimension (the byte count is checked against the file too)
_MAX_DEPTH = 200  # of a structure's nesting (a training state nests under 10 deep)
HEADER_KEY = "header_sha256"


def save(
    obj,
    f,
    pickle_module=None,
    pickle_protocol: int = 2,
    _use_new_zipfile_serialization: bool = True,
    _disable_byteorder_record: bool = False,
) -> None:
    """Write ``obj`` (nested dicts, lists, tuples, scalars, strings and tensors) in safetensors
    format to ``f``: a path (written atomically) or a file object with ``write`` (written from
    its current position and flushed; atomicity is then the caller's business). PyTorch's
    pickle and zip-format arguments are accepted and change nothing: ember's format is its
    own, never a pickle."""
    structure, arrays = encode(obj)
    metadata = {
        FORMAT_KEY: FORMAT_VERSION,
        "structure": json.dumps(structure, allow_nan=False, separators=(",", ":")),
    }
    write_safetensors(f, arrays, metadata)


def load(
    f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args
):
    """Read a checkpoint written by `save`, or a PyTorch checkpoint written by ``torch.save``
    (the zip format; see `ember.io.torch_format`: read without torch and without running any
    pickle code), from a path or a file object (read from its position to its end; see the
    module's docstring). Tensors come back as ember Tensors of the saved dtype and shape.
    ``map_location``, ``weights_only``, ``pickle_module``, ``mmap`` and PyTorch's pickle
    arguments (``encoding=``) are accepted for PyTorch compatibility and ignored: everything is
    on the CPU, the tensors read are the same with or without a memory map, and ember never
    runs code from a file (nor a pickle module), whatever ``weights_only`` says; with
    ``weights_only=False`` an ember checkpoint's objects of classes the program has imported
    are built too (io/safe_globals.py), as the registered ones always are."""
    unknown = set(pickle_load_args) - {"encoding", "errors", "fix_imports"}
    if unknown:  # (PyTorch hands them to pickle's Unpickler, which refuses others)
        raise TypeError(f"load() got unexpected keyword arguments {sorted(unknown)}")
    if not _stream.is_path(f):
        source = _stream.open_source(f)
        try:
            try:
                head = source.read(4)
            except (OSError, ValueError) as exc:
                raise CheckpointError(
                    f"{source.name}: cannot be read ({type(exc).__name__}: {exc})", op="load"
                ) from exc
            source.seek(0)
            if torch_format.is_torch_file(head):
                return torch_format.load_torch(source, map_location, weights_only, name=source.name)
            if torch_legacy.is_legacy(head):
                return torch_legacy.load_legacy(source.read(), source.name)
            return _load_ember(source, source.name, weights_only is False)
        finally:
            source.finish()
    path = os.fspath(f)
    head = torch_format.sniff(path)
    if torch_format.is_torch_file(head):
        return torch_format.load_torch(path, map_location, weights_only)
    if torch_legacy.is_legacy(head):
        try:
            legacy = open_regular(path)
        except OSError as exc:
            raise CheckpointError(f"{path}: cannot be read ({exc})", op="load") from exc
        with legacy:  # (read whole: its pickles come before the data they name)
            size = os.fstat(legacy.fileno()).st_size
            check_allocation(size, f"{path}: reading this legacy checkpoint", CheckpointError)
            return torch_legacy.load_legacy(legacy.read(), path)
    return _load_ember(path, path, weights_only is False)


def _load_ember(source, name: str, trusted: bool = False):
    metadata, arrays = read_safetensors(source, _check_checkpoint_metadata)
    structure = _json(metadata.get("structure"), "structure", name)
    return decode(structure, arrays, name, trusted)


def _check_checkpoint_metadata(metadata, path: str) -> None:
    if not isinstance(metadata, dict) or metadata.get(FORMAT_KEY) is None:
        raise CheckpointError(
            f"{path} is a safetensors file but not an ember checkpoint (its metadata has no "
            f"{FORMAT_KEY!r} entry); read plain tensors with safetensors.numpy.load_file",
            op="load",
        )
    if metadata[FORMAT_KEY] != FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format version {metadata[FORMAT_KEY]!r}; this ember "
            f"reads version {FORMAT_VERSION}",
            op="load",
        )


# ------------------------------------------------------------------------------- shared file I/O
# The two functions below are the file layer shared with other safetensors-based ember formats
# (the graph format, ember.graph.serialize); they raise CheckpointError, which callers may
# translate into their own error type.
def write_safetensors(path, arrays: dict, metadata: dict) -> None:
    """Write ``arrays`` (name -> ndarray) and ``metadata`` (string values) to ``path``
    atomically, or into ``path`` when it is a file object (see the module's docstring); a
    ``crc32`` metadata entry with every tensor's checksum is added."""
    target = None
    if not _stream.is_path(path):
        target, path = path, _stream.describe(path)
    path = os.fspath(path)
    arrays = {name: _little_endian(np.asarray(a)) for name, a in arrays.items()}
    metadata = {k: v for k, v in metadata.items() if k != HEADER_KEY}
    metadata["crc32"] = json.dumps({name: _crc(a) for name, a in arrays.items()})
    unsupported = [name for name, a in arrays.items() if a.dtype not in _CODES]
    if unsupported:
        raise CheckpointError(
            f"cannot save {path}: tensor {unsupported[0]!r} has dtype "
            f"{arrays[unsupported[0]].dtype}, which a checkpoint cannot hold",
            op="save",
        )
    tensors = {name: (_CODES[a.dtype], list(a.shape)) for name, a in arrays.items()}
    metadata[HEADER_KEY] = _header_digest(metadata, tensors)
    specs = {
        name: TensorSpec(
            dtype=a.dtype.name, shape=list(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes
        )
        for name, a in arrays.items()
    }
    if target is not None:
        try:
            data = serialize(specs, metadata=metadata)  # `arrays` keeps the data pointers alive
        except Exception as exc:
            raise CheckpointError(
                f"could not write {path} ({type(exc).__name__}: {exc})", op="save"
            ) from exc
        _stream.write_all(target, data, path)
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CheckpointError(
            f"cannot save {path}: the directory {directory} does not exist; create it first",
            op="save",
        )
    tmp = _create_temporary(directory, os.path.basename(path))
    try:
        serialize_file(specs, tmp, metadata=metadata)  # `arrays` keeps the data pointers alive
        _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, Exception) and not isinstance(exc, CheckpointError):
            raise CheckpointError(
                f"could not write {path} ({type(exc).__name__}: {exc}); the previous file, if "
                "any, is unchanged",
                op="save",
            ) from exc
        raise
    _fsync_directory(directory)


def read_safetensors(path, check_metadata) -> tuple[dict, dict]:
    """Read a file written by `write_safetensors`: ``(metadata, arrays)``. The header, its
    checksum, every tensor's dtype, shape and extent, the file size and the tensors' checksums
    are checked; ``check_metadata(metadata, path)`` runs before anything else is and raises to
    reject the file (a wrong format or version). ``path`` may also be a file object, read from
    its position to its end (or a `_stream.Window` on one)."""
    if not _stream.is_path(path):
        source = path if isinstance(path, _stream.Window) else _stream.open_source(path)
        source.seek(0)
        try:
            return _read_safetensors(source, source.size, source.name, check_metadata)
        except CheckpointError:
            raise
        except (OSError, ValueError) as exc:  # the object's own read failed
            raise CheckpointError(
                f"{source.name}: cannot be read ({type(exc).__name__}: {exc})", op="load"
            ) from exc
    path = os.fspath(path)
    try:
        f = open_regular(path)  # (a named pipe or a device: refused, never read without end)
    except FileNotFoundError:
        raise CheckpointNotFoundError(f"{path}: no such file", op="load") from None
    except IsADirectoryError:
        raise CheckpointError(f"{path} is a directory, not a checkpoint file", op="load") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot be read ({exc})", op="load") from exc
    with f:
        return _read_safetensors(f, os.fstat(f.fileno()).st_size, path, check_metadata)


def _read_safetensors(f, size: int, path: str, check_metadata) -> tuple[dict, dict]:
    header, data_start = _read_header(f, size, path)
    metadata = header.pop("__metadata__", None)
    check_metadata(metadata, path)
    if metadata is None:  # (a plain safetensors file, accepted by a caller's check)
        metadata = {}
    if not isinstance(metadata, dict):
        raise CheckpointError(f"{path}: corrupt header: __metadata__ is not an object", op="load")
    strange = [k for k, v in metadata.items() if not isinstance(v, str)]
    if strange:
        raise CheckpointError(
            f"{path}: corrupt header: metadata entry {strange[0]!r} is not a string", op="load"
        )
    crcs = _json(metadata.get("crc32", "{}"), "crc32", path)
    if not isinstance(crcs, dict):
        raise CheckpointError(f"{path}: corrupt crc32 metadata (not a JSON object)", op="load")
    entries = _entries(header, size - data_start, path)
    _check_header_digest(metadata, entries, path)
    arrays = _read_tensors(f, entries, data_start, crcs, path)
    return metadata, arrays


def _header_digest(metadata: dict, tensors: dict) -> str:
    """The SHA-256 of the header's canonical form: the metadata less this digest, and each
    tensor's name, dtype code and shape, as JSON with sorted keys (the offsets are checked
    otherwise: they must tile the data, and the CRC-32s catch a swap)."""
    canonical = {
        "metadata": {k: v for k, v in metadata.items() if k != HEADER_KEY},
        "tensors": {
            name: [dtype, [int(d) for d in shape]] for name, (dtype, shape) in tensors.items()
        },
    }
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _check_header_digest(metadata: dict, entries: list, path: str) -> None:
    recorded = metadata.get(HEADER_KEY)
    if recorded is None:
        return  # a file from before the header had a checksum: its tensors are still checked
    tensors = {name: (code, shape) for name, code, _dtype, shape, _begin, _end in entries}
    if recorded != _header_digest(metadata, tensors):
        raise CheckpointError(
            f"{path}: corrupt header (its {HEADER_KEY} checksum does not match its content: a "
            "name, a setting or a tensor's shape was changed); restore the file from a backup "
            "or an earlier checkpoint",
            op="load",
        )


# ------------------------------------------------------------------------------------ writing
def _little_endian(a: np.ndarray) -> np.ndarray:
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and np.little_endian is False):
        a = a.astype(a.dtype.newbyteorder("<"))
    return a if a.flags.c_contiguous else a.copy(order="C")


def _crc(a: np.ndarray) -> int:
    return zlib.crc32(a.reshape(-1).view(np.uint8))


def _create_temporary(directory: str, base: str) -> str:
    """A new empty file next to the target (mode 0o666 less the umask, like open()), named
    after this process; temporaries of the target left by killed saves are removed first
    (ember._files)."""
    try:
        return create_temporary(directory, base)
    except OSError as exc:
        raise CheckpointError(
            f"cannot create a temporary file in {directory} ({exc})", op="save"
        ) from exc


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(directory: str) -> None:
    """Make the rename durable; some file systems cannot sync a directory, which is harmless."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------------ reading
def _read_header(f, size: int, path: str) -> tuple[dict, int]:
    if size < 8:
        what = "empty" if size == 0 else f"only {size} bytes long"
        raise CheckpointError(f"{path} is {what}: truncated, or not a checkpoint", op="load")
    prefix = f.read(8)
    length = int.from_bytes(prefix, "little")
    if length > _MAX_HEADER or 8 + length > size:
        if prefix[:1] == b"\x80":
            torch_format.refuse_legacy(path)
        if torch_format.is_torch_file(prefix):
            raise CheckpointError(
                f"{path} is a zip archive (a PyTorch checkpoint?), not a safetensors file; "
                "ember.load reads PyTorch checkpoints",
                op="load",
            )
        raise CheckpointError(
            f"{path} is truncated or not a safetensors file: its header claims {length} bytes "
            f"but the file has {size}",
            op="load",
        )
    try:
        header = json.loads(f.read(length).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # (ValueError: not JSON, or an integer of too many digits; RecursionError: too deep)
        raise CheckpointError(
            f"{path}: corrupt safetensors header ({_reason(exc)})", op="load"
        ) from exc
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt safetensors header (not a JSON object)", op="load")
    return header, 8 + length


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)


def _json(text, what: str, path: str):
    if not isinstance(text, str):
        raise CheckpointError(f"{path}: the checkpoint metadata has no {what}", op="load")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(
            f"{path}: corrupt {what} metadata ({_reason(exc)})", op="load"
        ) from exc


def _is_count(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < _MAX_DIM


def _entries(header: dict, available: int, path: str) -> list:
    """Each tensor's (name, dtype code, NumPy dtype, shape, begin, end), checked: a known
    dtype, whole-number sizes, an extent of exactly its bytes, and extents that tile the
    ``available`` data bytes (sorted by where they begin)."""
    entries = []
    for name, info in header.items():
        if not (isinstance(info, dict) and {"dtype", "shape", "data_offsets"} <= set(info)):
            raise CheckpointError(
                f"{path}: malformed entry for tensor {name!r} (expected dtype, shape and "
                "data_offsets)",
                op="load",
            )
        code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(code, str) or code not in _DTYPES:
            raise CheckpointError(
                f"{path}: tensor {name!r} has dtype {str(code)[:40]}, which ember does not support",
                op="load",
            )
        # (NumPy refuses a shape whose nonzero sizes multiply past 2**63 bytes, even when a 0
        # makes it empty)
        if not (
            isinstance(shape, list)
            and len(shape) <= 32
            and all(map(_is_count, shape))
            and math.prod(d for d in shape if d) * _DTYPES[code].itemsize < _MAX_DIM
        ):
            raise CheckpointError(
                f"{path}: tensor {name!r} has a malformed shape {str(shape)[:80]} (a list of "
                "whole numbers expected)",
                op="load",
            )
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_count, offsets))):
            raise CheckpointError(
                f"{path}: tensor {name!r} has malformed data_offsets {str(offsets)[:80]}",
                op="load",
            )
        dtype = _DTYPES[code]
        nbytes = math.prod(shape) * dtype.itemsize
        begin, end = offsets
        if end - begin != nbytes:
            raise CheckpointError(
                f"{path}: tensor {name!r} of shape {tuple(shape)} and dtype {code} needs "
                f"{nbytes} bytes but its offsets span [{begin}, {end})",
                op="load",
            )
        entries.append((name, code, dtype, tuple(shape), begin, end))
    entries.sort(key=lambda e: (e[4], e[5]))
    position = 0
    for name, _code, _dtype, _shape, begin, end in entries:
        if begin > available or end > available:
            raise CheckpointError(
                f"{path} is truncated: tensor {name!r} needs bytes up to {end} of the data but "
                f"the file holds {available}",
                op="load",
            )
        if begin != position:
            what = "overlaps the tensor before it" if begin < position else "leaves a gap before it"
            raise CheckpointError(
                f"{path}: corrupt header: tensor {name!r} at [{begin}, {end}) {what}", op="load"
            )
        position = end
    if position < available:
        raise CheckpointError(
            f"{path}: corrupt file: {available - position} bytes after the last tensor", op="load"
        )
    return entries


def _read_tensors(f, entries: list, start: int, crcs: dict, path: str) -> dict:
    arrays = {}
    for name, _code, dtype, shape, begin, _end in entries:
        f.seek(start + begin)
        arr = np.empty(math.prod(shape), dtype=dtype)
        if f.readinto(arr.view(np.uint8)) != arr.nbytes:
            raise CheckpointError(f"{path} is truncated inside tensor {name!r}", op="load")
        expected = crcs.get(name)
        if expected is not None and _crc(arr) != expected:
            raise CheckpointError(
                f"{path}: tensor {name!r} is corrupt (its CRC-32 does not match); restore the "
                "file from a backup or an earlier checkpoint",
                op="load",
            )
        if not dtype.isnative:
            arr = arr.astype(dtype.newbyteorder("="))
        arrays[name] = canonical_bools(arr).reshape(shape)
    return arrays
