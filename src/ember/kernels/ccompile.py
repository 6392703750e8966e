"""Compiling C source into callables, with an on-disk cache shared by processes.

`load(source, symbol, argtypes)` compiles ``source`` with the system C compiler (``$CC``, else
``cc`` or ``gcc``) into a shared library and returns ``symbol`` from it as a ctypes function.
This module owns the compiler probe, the flags actually used, and the kernel cache:

* in memory: each library is loaded once per process, and the same key, symbol and argtypes
  give the same function object; a source that failed to compile fails again without a rerun;
* on disk, in ``$EMBER_CACHE_DIR`` or the per-user cache (``$XDG_CACHE_HOME/ember/kernels``,
  else ``~/.cache/ember/kernels``), both read at each call: ``<key>.so`` plus ``<key>.sha256``
  holding the hash of the library's bytes. The key hashes the source, the flags used, the
  compiler's identity (and the CPU's, under ``-march=native``) and a format version, so a new
  process compiles nothing that was compiled before.

Invariants. A file in the cache is only ever replaced whole (written under a unique temporary
name, then `os.replace`), so readers never see half a file and processes compiling the same
kernel at once all succeed. A library is trusted only when its bytes match its recorded hash and
it loads; otherwise it is rebuilt (``stats.rebuilds``). A path is handed to the dynamic loader at
most once per process, because the loader returns the library it already holds for a path it
has seen, even when the file was rebuilt since.

Flags: ``-fopenmp-simd`` and ``-march=native`` are dropped when the compiler cannot use them (see
`effective_flags`). Without a working compiler `compiler_available` is False and `load` raises
`CompilerUnavailable`; callers fall back to NumPy after `warn_no_compiler` (one warning).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

from .._files import write_atomic
from ..errors import EmberError

__all__ = ["CompileError", "CompilerUnavailable", "DEFAULT_FLAGS", "cache_dir"]
__all__ += ["compiler_available", "effective_flags", "load", "stats", "warn_no_compiler"]

FORMAT_VERSION = "2"
DEFAULT_FLAGS = tuple(
    "-O3 -march=native -fPIC -shared -fopenmp-simd -fno-math-errno -std=gnu11".split()
)
# flags that speed kernels up but that some compilers lack (``-fopenmp-simd`` honours ``#pragma
# omp simd`` without linking an OpenMP runtime; a cross-compiler has no "native"): kernels still
# build and run without them
OPTIONAL_FLAGS = ("-fopenmp-simd", "-march=native")
COMPILE_TIMEOUT_S = 300
_PROBE = """int probe(int x) {
#pragma omp simd
  for (int i = 0; i < 4; i++) x += i;
  return x;
}
"""


class CompileError(EmberError):
    """The C compiler rejected a kernel, or its library would not load (details in the text)."""


class CompilerUnavailable(CompileError):
    """There is no working C compiler."""


@dataclass
class Stats:
    """Counters, per process, so callers and tests can see what `load` did."""

    compiles: int = 0  # libraries built (rebuilds included)
    disk_hits: int = 0  # libraries found intact on disk
    memory_hits: int = 0  # functions returned from this process's own cache
    rebuilds: int = 0  # damaged libraries replaced


stats = Stats()
_libraries: dict[str, ctypes.CDLL] = {}  # key -> its library, loaded once per process
# (key, symbol, argtypes) -> function: its own object, since a caller sets its argtypes
_functions: dict[tuple, object] = {}
_failures: dict[str, CompileError] = {}  # key -> its compile error (one compiler run per process)
_opened: set[str] = set()  # paths handed to the dynamic loader by this process
_lock = threading.Lock()  # one load at a time: threads of a process never build one kernel twice
_warned = False


def _compiler() -> tuple[str, ...] | None:
    """The compiler command (CC may carry words, as in ``ccache gcc``), or None. Looked up
    once per setting of CC and PATH: a kernel loaded per call (eager pooling) would otherwise
    search PATH each time (~0.1 ms)."""
    return _find_compiler(os.environ.get("CC", ""), os.environ.get("PATH", ""))


@functools.lru_cache(maxsize=8)
def _find_compiler(cc_setting: str, path: str) -> tuple[str, ...] | None:
    words = shlex.split(cc_setting)
    if not words:
        found = shutil.which("cc", path=path or None) or shutil.which("gcc", path=path or None)
        return (found,) if found else None
    found = shutil.which(words[0], path=path or None)
    return (found, *words[1:]) if found else None


def _run(command: list[str], source: str = "") -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(
            command, input=source, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S
        )
    except (OSError, subprocess.SubprocessError):
        return None


@functools.cache
def _identity(cc: tuple[str, ...]) -> str:
    done = _run([*cc, "--version"])
    lines = done.stdout.splitlines() if done is not None else []
    return lines[0] if lines else " ".join(cc)


@functools.cache
def _cpu() -> str:
    # -march=native tunes for this CPU: a cache shared by machines (a network home directory)
    # must not hand one CPU's library to another that may lack its instructions
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    keep = ("model name", "flags", "Features", "CPU part")
    lines = {line for line in text.splitlines() if line.startswith(keep)}
    return platform.machine() + "\n".join(sorted(lines))


@functools.cache
def _supported(cc: tuple[str, ...]) -> frozenset[str] | None:
    """The optional flags ``cc`` can build and load a library with; None if it builds nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        # vectorizing matters more than tuning: keep -fopenmp-simd if only one of them works
        fallbacks = (OPTIONAL_FLAGS, ("-fopenmp-simd",), ("-march=native",), ())
        for i, optional in enumerate(fallbacks):
            library = os.path.join(tmp, f"probe{i}.so")
            done = _run([*cc, "-shared", "-fPIC", *optional, "-x", "c", "-", "-o", library], _PROBE)
            if done is None or done.returncode != 0:
                continue
            try:  # loading catches a runtime the compiler links against but cannot start
                ctypes.CDLL(library)
            except OSError:
                continue
            return frozenset(optional)
    return None


def compiler_available() -> bool:
    """Whether a C compiler can build and load a library (probed once per compiler). Cheap
    to ask again: the answer is kept per ``CC`` and ``PATH`` (the memory planner asks for
    every fused node it plans)."""
    cc = _compiler()  # (both looked up once per CC and PATH, and per compiler)
    return cc is not None and _supported(cc) is not None


def effective_flags(flags: tuple | None = None) -> tuple:
    """``flags`` (default `DEFAULT_FLAGS`) less the optional ones the compiler cannot use."""
    flags = tuple(DEFAULT_FLAGS if flags is None else flags)
    cc = _compiler()
    supported = _supported(cc) if cc is not None else None
    if supported is None:
        return flags
    return tuple(f for f in flags if f not in OPTIONAL_FLAGS or f in supported)


def warn_no_compiler() -> None:
    """Warn, once per process, that compiled kernels are off."""
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(
            "no C compiler found (set CC); fused kernels fall back to NumPy", stacklevel=3
        )


@functools.cache
def _private_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="ember-kernels-"))


def cache_dir() -> Path:
    """Where compiled kernels live (read at each call, so tests can point it elsewhere)."""
    if os.environ.get("EMBER_CACHE_DIR"):
        path = Path(os.environ["EMBER_CACHE_DIR"])
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        path = Path(base) / "ember" / "kernels"
    try:
        path.mkdir(parents=True, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    # an unwritable cache (read-only home) costs the reuse across processes, not the kernels
    return _private_dir()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _unique(path: Path, suffix: str) -> Path:
    return path.with_name(f"{path.stem}.{os.getpid()}.{os.urandom(4).hex()}{suffix}")


def _build(cc: tuple[str, ...], source: str, flags: tuple, library: Path) -> None:
    tmp = _unique(library, ".tmp")
    # libraries (-l...) go after the source, where the linker looks for what it needs. The
    # source comes on stdin: a file name would be written into the library, and builds of one
    # kernel by several processes must give the same bytes, whichever sidecar ends up last.
    libs = [f for f in flags if f.startswith("-l")]
    options = [f for f in flags if not f.startswith("-l")]
    done = _run([*cc, *options, "-x", "c", "-", "-o", str(tmp), *libs], source)
    if done is None or done.returncode != 0:
        tmp.unlink(missing_ok=True)
        kept = library.with_suffix(".failed.c")
        write_atomic(kept, source.encode())
        stderr = done.stderr if done is not None else "(the compiler did not run to completion)"
        head = "\n".join(stderr.replace("<stdin>", str(kept)).strip().splitlines()[:20])
        raise CompileError(f"the C compiler failed on {kept}:\n{head}", op="compile")
    data = tmp.read_bytes()
    write_atomic(library.with_suffix(".sha256"), _digest(data).encode())
    os.replace(tmp, library)
    stats.compiles += 1


def _intact(library: Path) -> bool:
    try:
        recorded = library.with_suffix(".sha256").read_text().strip()
        return recorded == _digest(library.read_bytes())
    except OSError:
        return False


def _open(library: Path) -> ctypes.CDLL:
    """Load ``library`` from a path this process has never loaded (a rebuilt file gets a copy)."""
    if str(library) not in _opened:
        _opened.add(str(library))
        return ctypes.CDLL(str(library))
    fresh = _unique(library, ".so")
    shutil.copyfile(library, fresh)
    _opened.add(str(fresh))
    try:
        return ctypes.CDLL(str(fresh))
    finally:
        fresh.unlink(missing_ok=True)  # the loaded mapping outlives the name


def load(source: str, symbol: str, argtypes: list, *, flags: tuple | None = None):
    """The function ``symbol`` of C99 ``source`` compiled with ``flags`` (default
    `DEFAULT_FLAGS`, less what the compiler lacks), with ``argtypes`` set and no return value;
    compiled at most once per machine. Raises `CompileError` (with the compiler's messages and
    the path of the kept source) or `CompilerUnavailable`."""
    cc = _compiler()
    if cc is None or _supported(cc) is None:
        raise CompilerUnavailable("no working C compiler (set CC)", op="compile")
    flags = effective_flags(flags)
    machine = _cpu() if "-march=native" in flags else ""
    parts = [FORMAT_VERSION, _identity(cc), machine, " ".join(flags), source]
    key = _digest("\0".join(parts).encode())
    wanted = (key, symbol, tuple(argtypes))
    with _lock:
        fn = _functions.get(wanted)
        if fn is not None:
            stats.memory_hits += 1
            return fn
        if key in _failures:
            raise _failures[key]
        handle = _libraries.get(key)
        if handle is None:
            try:
                handle = _load_library(cc, source, flags, cache_dir() / f"{key}.so")
            except CompileError as exc:
                _failures[key] = exc
                raise
            _libraries[key] = handle
        else:
            stats.memory_hits += 1
        try:
            fn = handle[symbol]  # (not getattr: ctypes hands every caller one shared object)
        except AttributeError as exc:
            raise CompileError(f"{handle._name} has no function {symbol!r}", op="compile") from exc
        fn.argtypes = list(argtypes)
        fn.restype = None
        fn._ember_handle = handle  # keep the library loaded as long as the function lives
        _functions[wanted] = fn
        return fn


def _load_library(cc: tuple[str, ...], source: str, flags: tuple, library: Path) -> ctypes.CDLL:
    """The library of ``source``: from disk when intact, else (re)built first."""
    if _intact(library):
        stats.disk_hits += 1
    else:
        if library.exists():  # damaged (or its sidecar lost): rebuilt
            stats.rebuilds += 1
        _build(cc, source, flags, library)
    try:
        return _open(library)
    except OSError:  # damaged in a way the hash did not see, or replaced meanwhile
        stats.rebuilds += 1
        _build(cc, source, flags, library)
        try:
            return _open(library)
        except OSError as exc:
            msg = f"{library} was built but does not load: {exc}"
            raise CompileError(msg, op="compile") from exc
