"""A strict reader for the IDX format of MNIST-like datasets (plain or gzip-compressed).

An IDX file is: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
0x0D float32, 0x0E float64), the number of dimensions, then each dimension as a big-endian
uint32, then the values in row-major order, big-endian. `read_idx` checks every one of those
facts and that the data is exactly as long as the dimensions say; any violation raises
`ember.DatasetError` naming the file and what is wrong. Gzip is recognised by its magic bytes,
whatever the file's name, and inflated only as far as the header's dimensions say (a stream
that expands further is refused as having trailing bytes, never inflated whole); dimensions
whose array would not fit in memory are refused before anything is allocated.
"""

from __future__ import annotations

import math
import os
import struct
import zlib

import numpy as np

from .._file_limits import check_allocation, decompress_gzip, open_regular
from ..errors import DatasetError

IDX_TYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_GZIP_MAGIC = b"\x1f\x8b"
_OP = "read_idx"


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """The array stored in IDX file ``path`` (native byte order)."""
    path = os.fspath(path)
    try:
        f = open_regular(path)
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file", op=_OP) from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc.strerror or exc})", op=_OP) from exc
    with f:
        check_allocation(os.fstat(f.fileno()).st_size, f"{path}: reading it", DatasetError, _OP)
        try:
            raw = f.read()
        except OSError as exc:
            raise DatasetError(f"{path}: cannot be read ({exc.strerror or exc})", op=_OP) from exc
    if raw[:2] == _GZIP_MAGIC:
        raw = _inflate(raw, path)
    return parse_idx(raw, path)


def _inflate(raw: bytes, path: str) -> bytes:
    """The IDX bytes of gzip file ``path``: its header first, then exactly the data that
    header declares (and one byte more, to see trailing bytes), so a stream that expands far
    beyond what its header declares (a gzip bomb) is never inflated whole."""
    head = _decompress(raw, 4, path)
    if len(head) < 4:
        return head  # (too short for a header: `parse_idx` says so)
    header = 4 + 4 * head[3]
    head = _decompress(raw, header, path)
    if len(head) < header:
        return head
    return _decompress(raw, header + _data_bytes(head, path), path)


def _decompress(raw: bytes, limit: int, path: str) -> bytes:
    try:
        return decompress_gzip(raw, limit)
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError(
            f"{path}: the gzip stream is truncated or corrupt ({exc}); download or "
            "reinstall the file",
            op=_OP,
        ) from exc


def _data_bytes(header: bytes, name: str) -> int:
    """The data size a complete IDX header declares (0 for one `parse_idx` will refuse),
    refused when no array of it fits in this machine's memory."""
    code, ndim = header[2], header[3]
    if code not in IDX_TYPES or ndim == 0:
        return 0
    dims = struct.unpack(f">{ndim}I", header[4 : 4 + 4 * ndim])
    nbytes = math.prod(dims) * IDX_TYPES[code].itemsize
    check_allocation(nbytes, f"{name}: the IDX dimensions {dims}", DatasetError, _OP)
    return nbytes


def parse_idx(raw: bytes, name: str = "<bytes>") -> np.ndarray:
    """Parse IDX bytes (already decompressed); ``name`` appears in error messages."""
    if len(raw) < 4:
        raise DatasetError(f"{name}: {len(raw)} bytes is too short for an IDX header", op=_OP)
    zero, code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0:
        raise DatasetError(
            f"{name}: not an IDX file (the magic number starts {raw[:2].hex()}, expected 0000)",
            op=_OP,
        )
    if code not in IDX_TYPES:
        raise DatasetError(
            f"{name}: unknown IDX type code 0x{code:02x} (expected one of "
            + ", ".join(f"0x{c:02x}" for c in IDX_TYPES)
            + ")",
            op=_OP,
        )
    if ndim == 0:
        raise DatasetError(f"{name}: the IDX header declares 0 dimensions", op=_OP)
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DatasetError(
            f"{name}: truncated header: {ndim} dimensions need {header} bytes, the file has "
            f"{len(raw)}",
            op=_OP,
        )
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = IDX_TYPES[code]
    expected = _data_bytes(raw[:header], name)
    actual = len(raw) - header
    if actual != expected:
        what = "truncated" if actual < expected else "has trailing bytes"
        raise DatasetError(
            f"{name}: {what}: dimensions {dims} of {dtype.name} need {expected} data bytes, "
            f"found {actual}",
            op=_OP,
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims)
    return data.astype(dtype.newbyteorder("="), copy=True)
