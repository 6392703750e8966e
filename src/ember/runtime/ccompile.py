"""Compiling C source into a callable, with an on-disk cache shared by processes.

`load(source, symbol, argtypes)` compiles ``source`` with the system C compiler into a shared
library and returns ``symbol`` from it as a ctypes function. Libraries are cached:

* in memory, by key (the same function object for the same source, flags and compiler);
* on disk, in ``$EMBER_CACHE_DIR`` or the per-user cache (``$XDG_CACHE_HOME/ember/kernels``,
  else ``~/.cache/ember/kernels``), as ``<key>.so`` plus ``<key>.sha256`` holding the hash of
  the library's bytes. The key hashes the source, the flags, the compiler's identity and a
  format version, so a new process compiles nothing that was compiled before.

Concurrency and damage: a library is built under a unique temporary name in the cache directory
and moved into place with an atomic rename, so processes compiling the same kernel at once all
succeed and none reads a half-written file. A library whose bytes do not match its recorded hash,
or that fails to load, is deleted and rebuilt (``stats.rebuilds``), never trusted.

No compiler (``CC`` unset and no ``cc``/``gcc``, or one that cannot build a test file):
`compiler_available` is False and `load` raises `CompilerUnavailable`; callers fall back to
NumPy after `warn_no_compiler` (one warning per process).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..errors import EmberError

__all__ = [
    "CompileError",
    "CompilerUnavailable",
    "DEFAULT_FLAGS",
    "cache_dir",
    "compiler_available",
    "load",
    "stats",
    "warn_no_compiler",
]

FORMAT_VERSION = "1"
DEFAULT_FLAGS = (
    "-O3",
    "-march=native",
    "-fPIC",
    "-shared",
    "-fopenmp",
    "-fno-math-errno",
    "-std=gnu11",
)


class CompileError(EmberError):
    """The C compiler rejected a kernel (its messages are in the error)."""


class CompilerUnavailable(CompileError):
    """There is no working C compiler."""


@dataclass
class Stats:
    compiles: int = 0
    disk_hits: int = 0
    memory_hits: int = 0
    rebuilds: int = 0


stats = Stats()
_loaded: dict[str, object] = {}  # key -> ctypes function
_warned = False


def _compiler() -> str | None:
    cc = os.environ.get("CC")
    if cc:
        return shutil.which(cc) or (cc if os.path.isfile(cc) else None)
    return shutil.which("cc") or shutil.which("gcc")


@functools.cache
def _identity(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.splitlines()[0] if out.stdout else cc
    except (OSError, subprocess.SubprocessError):
        return cc


@functools.cache
def _works(cc: str) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "probe.c")
        src.write_text("int ember_probe(int x) { return x + 1; }\n")
        try:
            done = subprocess.run(
                [cc, "-shared", "-fPIC", str(src), "-o", str(Path(tmp, "probe.so"))],
                capture_output=True,
                timeout=60,
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return done.returncode == 0


def compiler_available() -> bool:
    cc = _compiler()
    return cc is not None and _works(cc)


def warn_no_compiler() -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(
            "no C compiler found (set CC); fused kernels fall back to NumPy", stacklevel=3
        )


def cache_dir() -> Path:
    """Where compiled kernels live (read at each call, so tests can point it elsewhere)."""
    if os.environ.get("EMBER_CACHE_DIR"):
        path = Path(os.environ["EMBER_CACHE_DIR"])
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        path = Path(base) / "ember" / "kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _build(cc: str, source: str, flags: tuple, library: Path) -> None:
    directory = library.parent
    tag = f"{os.getpid()}.{os.urandom(4).hex()}"
    src = directory / f"{library.stem}.{tag}.c"
    tmp = directory / f"{library.stem}.{tag}.so"
    src.write_text(source)
    # libraries (-l...) go after the source, where the linker looks for what it needs
    libs = [f for f in flags if f.startswith("-l")]
    command = [cc, *[f for f in flags if not f.startswith("-l")], str(src), "-o", str(tmp), *libs]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        kept = directory / f"{library.stem}.failed.c"
        os.replace(src, kept)
        head = "\n".join(done.stderr.strip().splitlines()[:20])
        raise CompileError(f"the C compiler failed on {kept}:\n{head}", op="compile")
    src.unlink()
    data = tmp.read_bytes()
    _atomic_write(library.with_suffix(".sha256"), _digest(data).encode())
    os.replace(tmp, library)  # after its hash: a reader never sees a library without one
    stats.compiles += 1


def _intact(library: Path) -> bool:
    try:
        recorded = library.with_suffix(".sha256").read_text().strip()
        return recorded == _digest(library.read_bytes())
    except OSError:
        return False


def load(source: str, symbol: str, argtypes: list, *, flags: tuple | None = None):
    """The function ``symbol`` of ``source`` compiled with ``flags`` (default `DEFAULT_FLAGS`),
    with ``argtypes`` set and no return value; compiled at most once per machine."""
    cc = _compiler()
    if cc is None or not _works(cc):
        raise CompilerUnavailable("no working C compiler (set CC)", op="compile")
    flags = tuple(DEFAULT_FLAGS if flags is None else flags)
    key = _digest("\0".join([FORMAT_VERSION, _identity(cc), " ".join(flags), source]).encode())
    fn = _loaded.get(key)
    if fn is not None:
        stats.memory_hits += 1
        return fn
    library = cache_dir() / f"{key[:32]}.so"
    if library.exists() and _intact(library):
        stats.disk_hits += 1
    else:
        if library.exists():
            stats.rebuilds += 1
        _build(cc, source, flags, library)
    # (ember/__init__.py asks OpenMP threads to sleep rather than spin, before libgomp loads)
    try:
        handle = ctypes.CDLL(str(library))
    except OSError:  # damaged in a way the hash did not see (or by another process): rebuild
        stats.rebuilds += 1
        _build(cc, source, flags, library)
        fresh = library.with_name(f"{library.stem}.{os.getpid()}.{os.urandom(4).hex()}.so")
        shutil.copyfile(library, fresh)  # a new path: ctypes may hold the broken one open
        handle = ctypes.CDLL(str(fresh))
    fn = getattr(handle, symbol)
    fn.argtypes = list(argtypes)
    fn.restype = None
    fn._ember_handle = handle  # keep the library loaded as long as the function lives
    _loaded[key] = fn
    return fn
