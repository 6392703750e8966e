"""Checkpoints: `save(obj, path)` and `load(path)` (exported as ``ember.save`` / ``ember.load``).

File format: a standard safetensors file, readable by the ``safetensors`` library (bfloat16
tensors need a framework with bfloat16, e.g. ``safetensors.torch``, since NumPy has none). Its
tensors are the tensor leaves of the saved object, named by their place in it
(``model.fc.weight``); its ``__metadata__`` (string values only) holds

* ``ember_checkpoint``: the format version ("1");
* ``structure``: the object tree as JSON (see `ember.io._tree`), tensors referenced by name;
* ``crc32``: a JSON map from tensor name to the CRC-32 of its bytes, so damaged data is
  detected on load rather than trained on.

Nothing is ever pickled or evaluated. Saving is atomic: the file is written under a temporary
name in the target's directory, flushed to disk (fsync), renamed over the target (os.replace)
and the directory entry synced, so a crash at any point leaves either the old or the new
checkpoint, never a mixture; on failure the temporary file is removed. Loading checks the header,
every tensor's dtype, shape and extent, the file size and the checksums, and raises
`ember.CheckpointError` naming the file and the problem.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import zlib

import ml_dtypes
import numpy as np
from safetensors import TensorSpec, serialize_file

from ..errors import CheckpointError
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
}
_MAX_HEADER = 100 * 2**20  # safetensors' own limit on the JSON header


def save(obj, path: str | os.PathLike) -> None:
    """Write ``obj`` (nested dicts, lists, tuples, scalars, strings and tensors) to ``path``
    atomically, in safetensors format."""
    structure, arrays = encode(obj)
    metadata = {
        FORMAT_KEY: FORMAT_VERSION,
        "structure": json.dumps(structure, allow_nan=False, separators=(",", ":")),
    }
    write_safetensors(os.fspath(path), arrays, metadata)


def load(path: str | os.PathLike, map_location=None, *, weights_only: bool | None = None):
    """Read a checkpoint written by `save`. Tensors come back as ember Tensors of the saved dtype
    and shape. ``map_location`` and ``weights_only`` are accepted for PyTorch compatibility and
    ignored (everything is on the CPU, and nothing is ever unpickled)."""
    path = os.fspath(path)
    metadata, arrays = read_safetensors(path, _check_checkpoint_metadata)
    structure = _json(metadata.get("structure"), "structure", path)
    return decode(structure, arrays, path)


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
def write_safetensors(path: str, arrays: dict, metadata: dict) -> None:
    """Write ``arrays`` (name -> ndarray) and ``metadata`` (string values) to ``path``
    atomically; a ``crc32`` metadata entry with every tensor's checksum is added."""
    arrays = {name: _little_endian(np.asarray(a)) for name, a in arrays.items()}
    metadata = {**metadata, "crc32": json.dumps({name: _crc(a) for name, a in arrays.items()})}
    specs = {
        name: TensorSpec(
            dtype=a.dtype.name, shape=list(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes
        )
        for name, a in arrays.items()
    }
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


def read_safetensors(path: str, check_metadata) -> tuple[dict, dict]:
    """Read a file written by `write_safetensors`: ``(metadata, arrays)``. The header, every
    tensor's dtype, shape and extent, the file size and the checksums are checked;
    ``check_metadata(metadata, path)`` runs before any tensor is read and raises to reject the
    file (a wrong format or version)."""
    try:
        f = open(path, "rb")  # noqa: SIM115 (closed below)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such file", op="load") from None
    except IsADirectoryError:
        raise CheckpointError(f"{path} is a directory, not a checkpoint file", op="load") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot be read ({exc})", op="load") from exc
    with f:
        size = os.fstat(f.fileno()).st_size
        header, data_start = _read_header(f, size, path)
        metadata = header.pop("__metadata__", None)
        check_metadata(metadata, path)
        crcs = _json(metadata.get("crc32", "{}"), "crc32", path)
        if not isinstance(crcs, dict):
            raise CheckpointError(f"{path}: corrupt crc32 metadata (not a JSON object)", op="load")
        arrays = _read_tensors(f, header, data_start, size, crcs, path)
    return metadata, arrays


# ------------------------------------------------------------------------------------ writing
def _little_endian(a: np.ndarray) -> np.ndarray:
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and np.little_endian is False):
        a = a.astype(a.dtype.newbyteorder("<"))
    return a if a.flags.c_contiguous else a.copy(order="C")


def _crc(a: np.ndarray) -> int:
    return zlib.crc32(a.reshape(-1).view(np.uint8))


def _create_temporary(directory: str, base: str) -> str:
    """A new empty file next to the target (mode 0o666 less the umask, like open())."""
    for _ in range(100):
        tmp = os.path.join(directory, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise CheckpointError(
                f"cannot create a temporary file in {directory} ({exc})", op="save"
            ) from exc
    raise CheckpointError(f"cannot create a temporary file in {directory}", op="save")


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
        if prefix.startswith(b"PK\x03\x04") or prefix[:1] == b"\x80":
            raise CheckpointError(
                f"{path} looks like a PyTorch (pickle) checkpoint; ember reads only safetensors "
                "checkpoints and never unpickles",
                op="load",
            )
        raise CheckpointError(
            f"{path} is truncated or not a safetensors file: its header claims {length} bytes "
            f"but the file has {size}",
            op="load",
        )
    try:
        header = json.loads(f.read(length).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: corrupt safetensors header ({exc})", op="load") from exc
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt safetensors header (not a JSON object)", op="load")
    return header, 8 + length


def _json(text, what: str, path: str):
    if not isinstance(text, str):
        raise CheckpointError(f"{path}: the checkpoint metadata has no {what}", op="load")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: corrupt {what} metadata ({exc})", op="load") from exc


def _read_tensors(f, header: dict, start: int, size: int, crcs: dict, path: str) -> dict:
    available = size - start
    entries, end_max = [], 0
    for name, info in header.items():
        try:
            dtype = _DTYPES[info["dtype"]]
            shape = tuple(int(s) for s in info["shape"])
            begin, end = (int(x) for x in info["data_offsets"])
        except KeyError as exc:
            if isinstance(info, dict) and "dtype" in info and info["dtype"] not in _DTYPES:
                raise CheckpointError(
                    f"{path}: tensor {name!r} has dtype {info['dtype']}, which ember does not "
                    "support",
                    op="load",
                ) from None
            raise CheckpointError(
                f"{path}: malformed entry for tensor {name!r}", op="load"
            ) from exc
        except (TypeError, ValueError) as exc:
            raise CheckpointError(
                f"{path}: malformed entry for tensor {name!r}", op="load"
            ) from exc
        nbytes = math.prod(shape) * dtype.itemsize
        if min(shape, default=0) < 0 or begin < 0 or end - begin != nbytes:
            raise CheckpointError(
                f"{path}: tensor {name!r} of shape {shape} and dtype {info['dtype']} needs "
                f"{nbytes} bytes but its offsets span [{begin}, {end})",
                op="load",
            )
        entries.append((name, dtype, shape, begin, end))
        end_max = max(end_max, end)
    if end_max > available:
        raise CheckpointError(
            f"{path} is truncated: its tensors need {end_max} bytes of data but the file holds "
            f"{available}",
            op="load",
        )
    if end_max < available:
        raise CheckpointError(
            f"{path}: corrupt file: {available - end_max} bytes after the last tensor", op="load"
        )
    arrays = {}
    for name, dtype, shape, begin, _end in sorted(entries, key=lambda e: e[3]):
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
        arrays[name] = arr.reshape(shape)
    return arrays
