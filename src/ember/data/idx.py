"""A strict reader for the IDX format of MNIST-like datasets (plain or gzip-compressed).

An IDX file is: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
0x0D float32, 0x0E float64), the number of dimensions, then each dimension as a big-endian
uint32, then the values in row-major order, big-endian. `read_idx` checks every one of those
facts and that the data is exactly as long as the dimensions say; any violation raises
`ember.DatasetError` naming the file and what is wrong. Gzip is recognised by its magic bytes,
whatever the file's name.
"""

from __future__ import annotations

import gzip
import math
import os
import struct
import zlib

import numpy as np

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
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file", op=_OP) from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc.strerror or exc})", op=_OP) from exc
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise DatasetError(
                f"{path}: the gzip stream is truncated or corrupt ({exc}); download or "
                "reinstall the file",
                op=_OP,
            ) from exc
    return parse_idx(raw, path)


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
    expected = math.prod(dims) * dtype.itemsize
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
