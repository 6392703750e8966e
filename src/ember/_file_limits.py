"""What a file may make ember allocate, and where a name read from a file may lead.

Sizes come from files (dimensions, counts, configured widths), and a file can lie: a header
that declares a terabyte, or a small gzip stream that expands without end. Every reader checks
what it is about to allocate with `check_allocation` before allocating it: nothing that would
need more than this machine's physical memory is attempted, so a hostile size is an error
naming the file and the field rather than a MemoryError, or the kernel killing the process
once lazily allocated pages are touched. `decompress_gzip` stops reading a stream at the size
its caller expects, so a gzip bomb costs no more than the data it claims to hold.

A reader opens its file with `open_regular`, which refuses what is not a regular file (a
named pipe would block the reader forever, ``/dev/zero`` feed it without end) with an OSError
the reader reports as it reports any unreadable file.

`read_json` reads a small JSON file (a model's configuration) whole, refusing any damage, deep
nesting and a file of the wrong kind or size with the caller's error naming the file.

A relative name read from a file (a sub-folder in a model's module list) is joined to the
file's folder by `inside_folder`, which refuses absolute names, ``..`` and links that lead out
of it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import zlib

import numpy as np

from .errors import EmberError

__all__ = ["check_allocation", "decompress_gzip", "inside_folder", "open_regular"]
__all__ += ["canonical_bools", "physical_memory", "read_json"]

_FALLBACK_MEMORY = 1 << 36  # where the system does not say: 64 GiB
_CHUNK = 1 << 20


# no protobuf message (an ONNX ModelProto) is larger: bigger models keep tensors in external data
PROTOBUF_MAX_BYTES = 2**31 - 1


def physical_memory() -> int:
    """This machine's physical memory in bytes: no single value read from a file may need
    more."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return _FALLBACK_MEMORY


def check_allocation(nbytes: int, what: str, error=EmberError, op: str = "load") -> None:
    """Raise ``error`` (an `EmberError` class) when ``nbytes``, which ``what`` names (the file
    and the field that declared it), exceeds this machine's memory."""
    limit = physical_memory()
    if nbytes > limit:
        raise error(
            f"{what} would need {nbytes:,} bytes, more than this machine's {limit:,} bytes of "
            "memory: the file is damaged or hostile",
            op=op,
        )


def decompress_gzip(raw: bytes, limit: int) -> bytes:
    """The data of the gzip stream(s) ``raw``, at most ``limit + 1`` bytes of it (a caller
    expecting ``limit`` bytes sees that there are more without inflating the rest). Raises
    ``EOFError`` for a truncated stream and ``zlib.error``/``OSError`` for a corrupt one, as
    `gzip.decompress` does."""
    out = bytearray()
    rest = raw
    while rest and len(out) <= limit:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # 16: gzip's header and trailer
        chunk = inflater.decompress(rest, limit + 1 - len(out))
        out += chunk
        while inflater.unconsumed_tail and len(out) <= limit:
            out += inflater.decompress(inflater.unconsumed_tail, limit + 1 - len(out))
        if len(out) > limit:
            break
        if not inflater.eof:
            raise EOFError("the gzip stream ends before its end-of-stream marker")
        rest = inflater.unused_data  # (a file may hold several members, one after another)
        if rest and rest.strip(b"\x00") == b"":  # (padding after the last member, as gzip allows)
            break
    return bytes(out)


def inside_folder(folder: str, name, what: str, error=EmberError, op: str = "load") -> str:
    """``folder`` joined with ``name``, a relative name read from a file in it, which ``what``
    names; raises ``error`` when ``name`` is not text, is absolute, has a ``..`` part, or leads
    (through links) out of ``folder``."""
    if not isinstance(name, str) or "\x00" in name:
        raise error(f"{what} is not a file name: {name!r:.80}", op=op)
    parts = name.replace("\\", "/").split("/")
    if os.path.isabs(name) or name.startswith(("/", "\\")) or ".." in parts:
        raise error(f"{what} {name!r:.80} leads outside the folder {folder}", op=op)
    full = os.path.join(folder, name)
    root = os.path.realpath(folder)
    if os.path.commonpath([root, os.path.realpath(full)]) != root:
        raise error(
            f"{what} {name!r:.80} leads (through a link) outside the folder {folder}", op=op
        )
    return full


def read_stream(stream, limit: int, what: str, error=EmberError, op: str = "load") -> bytes:
    """All of the binary file object ``stream``, read in pieces so that a stream longer than
    ``limit`` bytes (which ``what`` names) is refused after ``limit + 1`` bytes instead of
    filling memory, and a failing read raises ``error`` naming it instead of a raw OSError."""
    pieces, total = [], 0
    try:
        while total <= limit:
            piece = stream.read(min(1 << 24, limit + 1 - total))
            if not piece:
                return b"".join(pieces)
            if not isinstance(piece, (bytes, bytearray)):
                raise error(f"{what}: the stream gave {type(piece).__name__}, not bytes", op=op)
            pieces.append(piece)
            total += len(piece)
    except OSError as exc:
        raise error(f"{what}: cannot be read ({exc.strerror or exc})", op=op) from exc
    raise error(f"{what}: more than {limit:,} bytes: the stream is damaged or hostile", op=op)


def open_regular(path):
    """``path`` opened for binary reading when it is a regular file (a link to one is
    followed); ``IsADirectoryError`` for a folder, ``OSError`` (EINVAL) for a named pipe, a
    device or a socket. A named pipe is opened without waiting for a writer, to be refused."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", os.fspath(path))
        if not stat.S_ISREG(mode):
            kind = "named pipe" if stat.S_ISFIFO(mode) else "device or socket"
            raise OSError(errno.EINVAL, f"not a regular file but a {kind}", os.fspath(path))
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_json(
    path: str,
    what: str,
    kind: type = dict,
    error=EmberError,
    op: str = "load",
    limit: int = 64 << 20,
):
    """The JSON value of file ``path`` (``what`` says what it is to the reader), which must be
    a ``kind`` (dict or list); ``error`` (an `EmberError` class) naming the file when it is
    missing, larger than ``limit`` bytes, not UTF-8, not JSON, nested too deep or of
    another kind."""
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise error(f"{path}: {size:,} bytes is too large for {what}", op=op)
            text = f.read().decode("utf-8")
        value = json.loads(text)
    except FileNotFoundError:
        raise error(f"{path}: no such file ({what})", op=op) from None
    except (OSError, ValueError, RecursionError) as exc:
        if isinstance(exc, EmberError):
            raise
        reason = str(exc)[:200] if not isinstance(exc, RecursionError) else "nested too deep"
        raise error(f"{path}: {what} cannot be read as JSON ({reason})", op=op) from exc
    if not isinstance(value, kind):
        raise error(
            f"{path}: {what} is a JSON {type(value).__name__}, not a JSON "
            f"{'object' if kind is dict else 'list'}",
            op=op,
        )
    return value


def canonical_bools(array: np.ndarray) -> np.ndarray:
    """``array`` with every bool stored as byte 0 or 1 (a new array only where one is not). A
    file's bool tensor is raw bytes, and byte 5 reads as True in NumPy and PyTorch, but a C loop
    that widens the byte gives 5: a compiled ``mask.float() * x`` summed five times too much."""
    if array.dtype != np.bool_ or array.size == 0:
        return array
    raw = array.view(np.uint8)
    return raw != 0 if (raw > 1).any() else array
