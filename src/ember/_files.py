"""Writing a file whole: the one way ember replaces a file it owns (kernel caches, calibrations,
measured peaks, traces, drawings, checkpoints and graph files).

`write_atomic(path, data)` writes ``data`` to a temporary file in the target's folder, then
renames it over the target (`os.replace`), so a reader, another process included, sees the old
file or the new one, never half of one; on failure the temporary file is removed and the error
raised, the target untouched. The file gets the permissions a plain ``open(path, "w")`` would
(``mkstemp`` alone makes it private). Checkpoints (io/checkpoint.py) add an fsync before the
rename and write through safetensors, so they make their temporary with `create_temporary`.

Temporaries left behind. A process killed between creating its temporary file and renaming it
leaves the file. Every temporary is named after its writer, ``.<target>.<host>-<pid>-<random>.tmp``
(``host``: a short hash of the host name), and each save first removes the temporaries of its
target whose writer is gone: a process of this host that no longer runs, or, for a folder shared
between machines, any whose file is over a day old (`remove_stale_temporaries`); the kernel
cache, too large to list at every write, sweeps all its temporaries when it checks its size. Private
folders made with `private_directory` are named the same way and removed at exit, or by the
next process when their owner was killed.

Files ember wrote for itself. A cache file (a compiled kernel, a calibration) steers what ember
runs, so it is read only when no one else could have written it: `open_own_file` opens a
plain file of this user's that nobody else can write, never through a link, and
`read_own_file` reads one whole, up to a size; anything else reads as absent, and the caller
builds or measures afresh. Such files are written ``0o644`` (`OWN_FILE_MODE`), whatever the
umask, so they pass that test.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from pathlib import Path

__all__ = ["create_temporary", "private_directory", "remove_stale_temporaries", "write_atomic"]
__all__ += ["open_own_file", "read_own_file", "write_atomic_together"]

OWN_FILE_MODE = 0o644  # what cache files are written with: readable, writable by this user only
_STALE_ELSEWHERE_S = 24 * 3600  # a temporary of another host's process: gone after a day
_TEMPORARY = re.compile(r"\.(?P<base>.+)\.(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-[0-9a-f]{8}\.tmp")
_PRIVATE = re.compile(r"(?P<prefix>.+)-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-[0-9a-f]{8}")


def _host() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _tag() -> str:
    return f"{_host()}-{os.getpid()}-{os.urandom(4).hex()}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0  # another user's process (PermissionError): alive
    return True


def _gone(host: str, pid: str, path: Path) -> bool:
    """Whether the writer of ``path`` (its host tag and pid) can no longer be writing it."""
    if host == _host():
        return not _alive(int(pid))
    try:  # another machine's process: its pid means nothing here; go by age
        return time.time() - path.lstat().st_mtime > _STALE_ELSEWHERE_S
    except OSError:
        return False


def remove_stale_temporaries(directory, base: str | None = None) -> int:
    """Remove the temporaries in ``directory`` of target ``base`` (of any target when None)
    whose writer is gone; returns how many. Never raises: cleaning up is a courtesy."""
    removed = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        match = _TEMPORARY.fullmatch(name)
        if match is None or (base is not None and match["base"] != base):
            continue
        path = Path(directory) / name
        try:
            if path.is_symlink() or not path.is_file() or path.lstat().st_uid != os.getuid():
                continue  # only our own plain files
            if _gone(match["host"], match["pid"], path):
                path.unlink()
                removed += 1
        except OSError:
            continue
    return removed


def create_temporary(directory, base: str, mode: int = 0o666, *, sweep: bool = True) -> str:
    """A new empty file in ``directory`` for target ``base``, named after this process (see the
    module docstring), created with ``mode`` less the umask; stale temporaries of the same
    target are removed first, unless ``sweep`` is False: finding them lists the whole folder,
    which a folder of thousands of files (the kernel cache) sweeps now and then instead."""
    if sweep:
        remove_stale_temporaries(directory, base)
    for _ in range(100):
        tmp = os.path.join(os.fspath(directory), f".{base}.{_tag()}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode))
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot create a temporary file for {base} in {directory}")


def write_atomic(path, data: bytes | str, mode: int = 0o666, *, sweep: bool = True) -> Path:
    """Replace ``path`` with ``data`` (str is written as UTF-8) in one step; returns the path.
    The file gets ``mode`` less the umask; ``sweep``: as `create_temporary`'s."""
    path = Path(path)
    if isinstance(data, str):
        data = data.encode()
    tmp = create_temporary(path.parent, path.name, mode, sweep=sweep)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_atomic_together(files: dict, mode: int = 0o666) -> list[Path]:
    """Replace several files that are only valid together (a model and its data file): each
    written whole to a temporary first, then renamed over its target; if a write or a rename
    fails, every target is left as it was (the ones already renamed over are restored from
    links to their old files kept until the end) and no temporary remains. Returns the
    paths."""
    targets = [
        (Path(path), data.encode() if isinstance(data, str) else data)
        for path, data in files.items()
    ]
    temporaries: list[str] = []
    kept: dict[Path, str | None] = {}  # target -> a link to its old file (None: none existed)
    done: list[Path] = []
    try:
        for path, data in targets:
            temporaries.append(create_temporary(path.parent, path.name, mode))
            with open(temporaries[-1], "wb") as f:
                f.write(data)
        for path, _ in targets:
            kept[path] = None
            if path.is_file() and not path.is_symlink():
                keep = create_temporary(path.parent, path.name, mode, sweep=False)
                os.unlink(keep)
                os.link(path, keep)
                kept[path] = keep
        for (path, _), tmp in zip(targets, temporaries):
            os.replace(tmp, path)
            done.append(path)
    except BaseException:
        for path in done:  # (in the order renamed: each restored or removed)
            old = kept.get(path)
            if old is not None:
                os.replace(old, path)
                kept[path] = None
            else:
                path.unlink(missing_ok=True)
        for tmp in temporaries:
            Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        for old in kept.values():
            if old is not None:
                Path(old).unlink(missing_ok=True)
    return [path for path, _ in targets]


def _remove_own(path: Path, pid: int) -> None:
    if os.getpid() == pid:  # (a forked child runs its parent's exit handlers: not its folder)
        shutil.rmtree(path, ignore_errors=True)


def private_directory(prefix: str) -> Path:
    """A new folder only this user can enter, under the system's temporary folder, removed when
    the process exits; folders of the same ``prefix`` left by killed processes are removed
    first."""
    parent = Path(tempfile.gettempdir())
    try:
        names = os.listdir(parent)
    except OSError:
        names = []
    for name in names:
        match = _PRIVATE.fullmatch(name)
        if match is None or match["prefix"] != prefix:
            continue
        path = parent / name
        try:
            if path.is_symlink() or not path.is_dir() or path.lstat().st_uid != os.getuid():
                continue
            if _gone(match["host"], match["pid"], path):
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue
    for _ in range(100):
        path = parent / f"{prefix}-{_tag()}"
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        atexit.register(_remove_own, path, os.getpid())
        return path
    raise FileExistsError(f"cannot create a private folder {prefix}-... in {parent}")


def open_own_file(path) -> int | None:
    """A read-only descriptor of ``path`` when it is a plain file of this user's that nobody
    else can write (a link is not followed); None otherwise, absent included."""
    try:
        # (O_NONBLOCK: a named pipe in its place is refused below, not waited on)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except (OSError, ValueError):
        return None
    st = os.fstat(fd)
    others_write = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or others_write:
        os.close(fd)
        return None
    return fd


def read_own_file(path, limit: int = 16 << 20) -> bytes | None:
    """The bytes of ``path`` when `open_own_file` opens it and it holds at most ``limit``
    bytes; None otherwise."""
    fd = open_own_file(path)
    if fd is None:
        return None
    try:
        if os.fstat(fd).st_size > limit:
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
