"""File objects as checkpoint sources and targets (``ember.save(obj, f)``, ``ember.load(f)``).

PyTorch accepts, besides a path, any object with ``write`` (and ``flush``) to save to, and any
object with ``read``/``readline``/``seek``/``tell`` to load from. `open_source` turns the latter
into a `Window`: the bytes from the object's current position to its end, addressed from 0, which
both readers (ember's format and the torch zip reader) use like an open file. A stream that
cannot seek (a pipe, a socket's file) is read into memory first, up to `MAX_STREAM_BYTES`.
"""

from __future__ import annotations

import io
import os

from ..errors import CheckpointError

MAX_STREAM_BYTES = 16 * 2**30  # a non-seekable stream read into memory: at most this much
_CHUNK = 2**24


def is_path(f) -> bool:
    """Whether ``f`` names a file (rather than being a file object), as torch decides it."""
    return isinstance(f, (str, os.PathLike))


def describe(f) -> str:
    """How error messages name a file object: its ``name`` when it has a textual one."""
    name = getattr(f, "name", None)
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if isinstance(name, str) and name:
        return name
    text = repr(f)
    return text if len(text) <= 100 else text[:97] + "..."


class Window:
    """The bytes ``[base, base + size)`` of the file object ``f`` as a read-only, seekable file
    addressed from 0 (what ``zipfile`` and the safetensors reader need: read, readinto, seek,
    tell). Every read seeks ``f`` first, so the caller's position in ``f`` does not matter."""

    def __init__(self, f, base: int, size: int, name: str):
        self._f, self._base, self._size, self.name = f, base, size, name
        self._pos = 0

    @property
    def size(self) -> int:
        return self._size

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        start = {0: 0, 1: self._pos, 2: self._size}[whence]
        if start + offset < 0:
            raise OSError(f"negative seek position {start + offset}")
        self._pos = start + offset
        return self._pos

    def read(self, n: int = -1) -> bytes:
        left = max(self._size - self._pos, 0)
        n = left if n is None or n < 0 else min(n, left)
        if n == 0:
            return b""
        self._f.seek(self._base + self._pos)
        data = self._f.read(n)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise CheckpointError(
                f"{self.name}: read() returned a {type(data).__name__}, not bytes (open the file "
                "in binary mode, 'rb')",
                op="load",
            )
        data = bytes(data)
        self._pos += len(data)
        return data

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        n = min(len(view), max(self._size - self._pos, 0))
        if n == 0:
            return 0
        readinto = getattr(self._f, "readinto", None)
        if readinto is not None:
            self._f.seek(self._base + self._pos)
            done = 0
            while done < n:  # a raw (unbuffered) file may return less than asked
                got = readinto(view[done:n]) or 0
                if got <= 0:
                    break
                done += got
            self._pos += done
            return done
        data = self.read(n)
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:  # the caller owns the object: zipfile must not close it
        pass

    def finish(self) -> None:
        """Leave the object's position at the end of what was read, as reading a file does."""
        try:
            self._f.seek(self._base + self._size)
        except (OSError, ValueError, AttributeError):
            pass


def open_source(f) -> Window:
    """A `Window` on the rest of the readable file object ``f``; CheckpointError naming it when
    it cannot be read."""
    name = describe(f)
    if not callable(getattr(f, "read", None)):
        raise CheckpointError(
            f"ember.load needs a path or a file object with read(), got {name}", op="load"
        )
    try:
        base = _seekable_start(f)
        if base is not None:
            end = f.seek(0, 2)
            end = f.tell() if not isinstance(end, int) else end
            f.seek(base)
            return Window(f, base, max(end - base, 0), name)
        data = _read_all(f, name)
    except CheckpointError:
        raise
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise CheckpointError(
            f"{name}: cannot be read ({type(exc).__name__}: {exc})", op="load"
        ) from exc
    return Window(io.BytesIO(data), 0, len(data), name)


def _seekable_start(f) -> int | None:
    """The object's position when it can seek (None: a stream, read it through)."""
    seekable = getattr(f, "seekable", None)
    if seekable is not None and not seekable():
        return None
    if not (callable(getattr(f, "seek", None)) and callable(getattr(f, "tell", None))):
        return None
    try:
        return f.tell()
    except (OSError, io.UnsupportedOperation):
        return None


def _read_all(f, name: str) -> bytes:
    chunks, total = [], 0
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        if not isinstance(chunk, (bytes, bytearray, memoryview)):
            raise CheckpointError(
                f"{name}: read() returned a {type(chunk).__name__}, not bytes (open the file in "
                "binary mode, 'rb')",
                op="load",
            )
        total += len(chunk)
        if total > MAX_STREAM_BYTES:
            raise CheckpointError(
                f"{name}: a stream that cannot seek is read into memory first, and this one is "
                f"longer than {MAX_STREAM_BYTES} bytes; save to a file and load its path",
                op="load",
            )
        chunks.append(bytes(chunk))


def write_all(f, data: bytes, name: str) -> None:
    """Write ``data`` to the file object ``f`` (looping over short writes) and flush it."""
    write = getattr(f, "write", None)
    if not callable(write):
        raise CheckpointError(
            f"ember.save needs a path or a file object with write(), got {name}", op="save"
        )
    view = memoryview(data)
    try:
        while view:
            # bytes first (what a hand-written writer expects); a rest after a short write
            n = write(data if len(view) == len(data) else view)
            if n is None:  # a writer that does not report a count wrote everything
                break
            if n <= 0:
                raise OSError(f"write() wrote {n} bytes")
            view = view[n:]
        flush = getattr(f, "flush", None)
        if callable(flush):
            flush()
    except CheckpointError:
        raise
    except Exception as exc:
        raise CheckpointError(
            f"could not write to {name} ({type(exc).__name__}: {exc}); it may hold part of the "
            "checkpoint",
            op="save",
        ) from exc
