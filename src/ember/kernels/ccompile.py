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
kernel at once all succeed; a build holds a lock file (``<key>.lock``, `_build_lock`), so a
process needing the kernel meanwhile waits and loads that library rather than compiling it
too. A library is trusted only when its bytes match its recorded hash and it loads; otherwise
it is rebuilt (``stats.rebuilds``). A name is handed to the dynamic loader
at most once per process, because the loader returns the library it already holds for a name it
has seen, even when the file was rebuilt since.

Trust. Loading a library runs its code, so the cache is held to what ssh asks of ``~/.ssh``
(`_unsafe`): the folder and every folder above it must belong to this user or root and be
writable by nobody else (a sticky folder such as /tmp excepted above it), and a library or its
hash file is trusted only when it is a plain file of this user's that nobody else can write. An
unsafe folder (a shared ``EMBER_CACHE_DIR`` that other users can write) is not used: ember warns
once and compiles into a private folder of its own instead (removed at exit). Each library is
read through one open file descriptor: its bytes are hashed as read from it, and the dynamic
loader is handed that same descriptor (``/proc/self/fd/N``), so the file checked is the file
loaded, even if the name is replaced in between (where there is no /proc, or no descriptor
number is left, the checked bytes are written to a new file in the private folder and that is
loaded).

Size. The cache holds at most ``$EMBER_KERNEL_CACHE_MB`` MiB of libraries (default
`DEFAULT_CACHE_MB`): kernels/ccache_limit.py removes the least recently used kernels (by the
time their hash file was last read), with the temporaries of killed builds, checking the folder
now and then as builds write to it.

Flags: ``-fopenmp-simd`` and ``-march=native`` are dropped when the compiler cannot use them (see
`effective_flags`). Without a working compiler `compiler_available` is False and `load` raises
`CompilerUnavailable`; callers fall back to NumPy after `warn_no_compiler` (one warning).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import platform
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

from .._files import create_temporary, open_own_file, private_directory, write_atomic
from ..errors import EmberError, user_stacklevel
from .ccache_limit import DEFAULT_CACHE_MB, cache_limit_bytes, keep_within_limit

__all__ = ["CompileError", "CompilerUnavailable", "DEFAULT_FLAGS", "cache_dir"]
__all__ += ["compiler_available", "effective_flags", "load", "stats", "warn_no_compiler"]
__all__ += ["DEFAULT_CACHE_MB", "cache_limit_bytes"]  # (kernels/ccache_limit.py's)

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
    rebuilds: int = 0  # damaged (or untrusted) libraries replaced
    evictions: int = 0  # libraries removed to keep the cache within its size
    batched: int = 0  # sources built with others in one compiler run (kernels/cbatch.py)


stats = Stats()
_libraries: dict[str, ctypes.CDLL] = {}  # key -> its library, loaded once per process
# (key, symbol, argtypes) -> function: its own object, since a caller sets its argtypes
_functions: dict[tuple, object] = {}
_failures: dict[str, CompileError] = {}  # key -> its compile error (one compiler run per process)
_next_fd = 0  # descriptor numbers handed to the loader are never used for it again (see _dlopen)
_lock = threading.Lock()  # one load at a time: threads of a process never build one kernel twice
_warned = False
_warned_unsafe: set[str] = set()  # cache folders warned about


def _compiler() -> tuple[str, ...] | None:
    """The compiler command (CC may carry words, as in ``ccache gcc``), or None. Looked up
    once per setting of CC and PATH: a kernel loaded per call (eager pooling) would otherwise
    search PATH each time."""
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
            "no C compiler found (set CC); fused kernels fall back to NumPy",
            stacklevel=user_stacklevel(),
        )


@functools.cache
def _private_dir() -> Path:
    return private_directory("ember-kernels")


def _writable_by_others(mode: int) -> bool:
    return bool(mode & (stat.S_IWGRP | stat.S_IWOTH))


def _unsafe(path: Path) -> str | None:
    """Why the folder ``path`` may not hold libraries this process loads (None: it may), as
    ssh judges ``~/.ssh``: it and each folder above it must belong to this user or root and be
    writable by no one else; a folder above it may be writable by others when it is sticky (as
    /tmp is: no one can rename what is not theirs)."""
    uid = os.getuid()
    try:
        current = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        return f"it cannot be resolved ({exc})"
    first = True
    while True:
        try:
            st = os.lstat(current)
        except OSError as exc:
            return f"{current} cannot be examined ({exc})"
        if st.st_uid not in (uid, 0):
            return f"{current} belongs to another user (uid {st.st_uid})"
        sticky = bool(st.st_mode & stat.S_ISVTX)
        if _writable_by_others(st.st_mode) and (first or not sticky):
            return f"{current} is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
        if first and st.st_uid != uid:
            return f"{current} belongs to root, not to this user"
        if current.parent == current:
            return None
        current, first = current.parent, False


def _safe_dir(path: Path) -> Path:
    """``path``, or the private folder (with one warning per folder) when it is unsafe."""
    why = _unsafe(path)
    if why is None:
        return path
    if str(path) not in _warned_unsafe:
        _warned_unsafe.add(str(path))
        warnings.warn(
            f"ember: not using the kernel cache {path}: {why}, so another user could plant "
            f"libraries that ember would load; compiling into the private folder "
            f"{_private_dir()} instead (make the cache folder yours and not writable by "
            "others, e.g. chmod go-w, to share kernels across processes again)",
            stacklevel=user_stacklevel(),
        )
    return _private_dir()


def cache_dir() -> Path:
    """Where compiled kernels live (read at each call, so tests can point it elsewhere): the
    configured folder when it is safe (see `_unsafe`), else a private one."""
    if os.environ.get("EMBER_CACHE_DIR"):
        path = Path(os.environ["EMBER_CACHE_DIR"])
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        path = Path(base) / "ember" / "kernels"
    try:
        if not path.is_dir():
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if os.access(path, os.W_OK):
            return _safe_dir(path)
    except OSError:
        pass
    # an unwritable cache (read-only home) costs the reuse across processes, not the kernels
    return _private_dir()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _open_trusted(path: Path) -> int | None:
    """A read-only descriptor of ``path`` when it is a plain file of this user's that nobody
    else can write (not followed if it is a link); None otherwise."""
    return open_own_file(path)


def _read_fd(fd: int) -> bytes:
    chunks = []
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _recorded_hash(library: Path) -> str | None:
    fd = _open_trusted(library.with_suffix(".sha256"))
    if fd is None:
        return None
    try:
        return _read_fd(fd).decode("ascii", "replace").strip()
    finally:
        os.close(fd)


def _build(cc: tuple[str, ...], source: str, flags: tuple, library: Path) -> None:
    # (no sweep for killed builds' temporaries at each write: ccache_limit's scans do)
    try:
        tmp = Path(create_temporary(library.parent, library.name, 0o644, sweep=False))
    except OSError as exc:  # (a cache folder made read-only, a full disk)
        raise _unstorable(library, exc) from exc
    # libraries (-l...) go after the source, where the linker looks for what it needs. The
    # source comes on stdin: a file name would be written into the library, and builds of one
    # kernel by several processes must give the same bytes, whichever sidecar ends up last.
    libs = [f for f in flags if f.startswith("-l")]
    options = [f for f in flags if not f.startswith("-l")]
    done = _run([*cc, *options, "-x", "c", "-", "-o", str(tmp), *libs], source)
    if done is None or done.returncode != 0:
        tmp.unlink(missing_ok=True)
        kept = library.with_suffix(".failed.c")
        stderr = done.stderr if done is not None else "(the compiler did not run to completion)"
        try:
            write_atomic(kept, source.encode(), 0o644, sweep=False)
        except OSError as exc:
            # (a full disk or a read-only cache: the compiler's own message matters more than
            # the copy of its input, so the error says why there is none and goes on)
            kept = f"{library.name}'s source (not kept: {exc.strerror or exc})"
        head = "\n".join(stderr.replace("<stdin>", str(kept)).strip().splitlines()[:20])
        raise CompileError(f"the C compiler failed on {kept}:\n{head}", op="compile")
    try:
        os.chmod(tmp, 0o644)  # (the compiler may have made it anew, with its own mode)
        data = tmp.read_bytes()
        digest = _digest(data).encode()
        write_atomic(library.with_suffix(".sha256"), digest, 0o644, sweep=False)
        os.replace(tmp, library)
    except OSError as exc:  # (a folder where the library or its hash goes, a full disk)
        tmp.unlink(missing_ok=True)
        raise _unstorable(library, exc) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    stats.compiles += 1
    stats.evictions += keep_within_limit(library.parent, len(data) + len(digest), keep=library)


class _StoreError(CompileError):
    """A library that could not be stored in the cache: not remembered as the source's failure,
    since the folder may be writable at the next call (a full disk freed)."""


def _unstorable(library: Path, exc: OSError) -> CompileError:
    """A build whose library cannot be stored in the cache (the caller runs NumPy instead)."""
    return _StoreError(
        f"cannot store the kernel library {library} (or its hash file beside it): "
        f"{exc.strerror or exc}; remove what is in its place or set EMBER_CACHE_DIR",
        op="compile",
    )


def _function(handle: ctypes.CDLL, symbol: str, key: str):
    """``symbol`` of a loaded library (under its batched name in a library built with others,
    kernels/cbatch.py), or None where the library has no such function."""
    for name in (symbol, batched_symbol(symbol, key)):
        try:
            return handle[name]  # (not getattr: ctypes hands every caller one shared object)
        except AttributeError:
            continue
    return None


def _dlopen(fd: int, data: bytes, library: Path) -> ctypes.CDLL:
    """Load the library whose checked bytes ``data`` were read from ``fd``: through the
    descriptor itself (see the module docstring), under a number never handed to the loader
    before (it would return the library it holds for that name); else from a private copy."""
    global _next_fd
    proc = Path("/proc/self/fd")
    if proc.is_dir():
        import fcntl
        import resource

        dup, start = None, max(_next_fd, 3)
        if start < resource.getrlimit(resource.RLIMIT_NOFILE)[0]:
            try:
                # the lowest free number from _next_fd on: a name the loader has not seen
                dup = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, start)
            except OSError:  # no number left below the limit: the copy below
                dup = None
        if dup is not None:
            _next_fd = dup + 1
            try:
                return ctypes.CDLL(str(proc / str(dup)))
            finally:
                os.close(dup)
    copy = Path(create_temporary(_private_dir(), library.name, 0o600))
    try:
        copy.write_bytes(data)
        return ctypes.CDLL(str(copy))
    finally:
        copy.unlink(missing_ok=True)  # the loaded mapping outlives the name


def _load_checked(library: Path, symbol: str | None = None) -> ctypes.CDLL | None:
    """The library at ``library`` when its bytes (read once, from one descriptor) match its
    recorded hash, both files are trusted and it has the function ``symbol``; None when not
    (absent, damaged, untrusted, or another source's library with its hash copied beside it,
    which a process that compiled it would else refuse as having no such function)."""
    fd = _open_trusted(library)
    if fd is None:
        return None
    try:
        data = _read_fd(fd)
        recorded = _recorded_hash(library)
        if recorded is None or recorded != _digest(data):
            return None
        handle = _dlopen(fd, data, library)
    finally:
        os.close(fd)
    if symbol is not None and _function(handle, symbol, library.stem) is None:
        return None
    try:  # last used: the sidecar's times (the library's own are left as built)
        os.utime(library.with_suffix(".sha256"))
    except OSError:
        pass
    return handle


def load(source: str, symbol: str, argtypes: list, *, flags: tuple | None = None):
    """The function ``symbol`` of C99 ``source`` compiled with ``flags`` (default
    `DEFAULT_FLAGS`, less what the compiler lacks), with ``argtypes`` set and no return value;
    compiled at most once per machine. Raises `CompileError` (with the compiler's messages and
    the path of the kept source) or `CompilerUnavailable`."""
    cc = _compiler()
    if cc is None or _supported(cc) is None:
        raise CompilerUnavailable("no working C compiler (set CC)", op="compile")
    flags = effective_flags(flags)
    key = library_key(cc, source, flags)
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
                handle = _load_library(cc, source, flags, cache_dir() / f"{key}.so", symbol)
            except CompileError as exc:
                if not isinstance(exc, _StoreError):
                    _failures[key] = exc
                raise
            _libraries[key] = handle
        else:
            stats.memory_hits += 1
        fn = _function(handle, symbol, key)
        if fn is None:
            library = cache_dir() / f"{key}.so"
            raise CompileError(f"{library} has no function {symbol!r}", op="compile")
        fn.argtypes = list(argtypes)
        fn.restype = None
        fn._ember_handle = handle  # keep the library loaded as long as the function lives
        _functions[wanted] = fn
        return fn


def library_key(cc: tuple[str, ...], source: str, flags: tuple) -> str:
    """The cache key of ``source`` built by ``cc`` with ``flags`` (`effective_flags`'): its
    library is ``cache_dir() / f"{key}.so"``."""
    machine = _cpu() if "-march=native" in flags else ""
    parts = [FORMAT_VERSION, _identity(cc), machine, " ".join(flags), source]
    return _digest("\0".join(parts).encode())


def batched_symbol(symbol: str, key: str) -> str:
    """The name ``symbol`` of the source with cache key ``key`` has in a library built from
    several sources at once (kernels/cbatch.py renames each source's own names so)."""
    return f"{symbol}_{key[:16]}"


VECTOR_MATH = '__attribute__((simd("notinbranch"))) '


def load_with_vector_math(source: str, signatures: dict, *, flags: tuple, restype=None):
    """{symbol: function} of ``source``, whose math functions are declared with `VECTOR_MATH`
    (glibc's vector variants, from libmvec, so loops over exp or erf vectorize): linked with
    ``-lmvec`` where the machine has it, else built again without the declarations (scalar
    calls, the same results). ``signatures``: {symbol: argtypes}; ``restype`` set on each.
    None when neither build succeeds (a compiler that cannot build the source)."""
    for libs in (("-lmvec", "-lm"), ("-lm",)):
        text = source if "-lmvec" in libs else source.replace(VECTOR_MATH, "")
        try:
            found = {
                name: load(text, name, args, flags=tuple(flags) + libs)
                for name, args in signatures.items()
            }
        except CompileError:
            continue  # no vector math library here
        for fn in found.values():
            fn.restype = restype
        return found
    return None


def _load_library(
    cc: tuple[str, ...], source: str, flags: tuple, library: Path, symbol: str | None = None
) -> ctypes.CDLL:
    """The library of ``source``: from disk when intact, trusted and holding ``symbol``, else
    (re)built first."""
    try:
        handle = _load_checked(library, symbol)
    except OSError:  # damaged in a way the hash did not see, or replaced meanwhile
        handle = None
    if handle is not None:
        stats.disk_hits += 1
        return handle
    with _build_lock(library):
        return _build_and_load(cc, source, flags, library, symbol)


@contextlib.contextmanager
def _build_lock(library: Path):
    """Held while ``library`` is built: a process that needs the same kernel meanwhile (a
    second pytest-xdist worker) waits for the build and loads its library instead of compiling
    it again. Only a saving: the files stay whole without it (see the module docstring), so
    where the lock file cannot be made or locked, the build goes on unlocked. The lock file is
    removed after the build; one that a newcomer creates anew is harmless, since whoever holds
    a lock looks on disk before building."""
    try:
        import fcntl

        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(library.with_suffix(".lock"), flags, 0o600)
    except (ImportError, OSError):
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        library.with_suffix(".lock").unlink(missing_ok=True)
        os.close(fd)


def _build_and_load(
    cc: tuple[str, ...], source: str, flags: tuple, library: Path, symbol: str | None = None
) -> ctypes.CDLL:
    try:  # built by another process while this one waited for the lock
        handle = _load_checked(library, symbol)
    except OSError:
        handle = None
    if handle is not None:
        stats.disk_hits += 1
        return handle
    if library.exists() or library.with_suffix(".sha256").exists():
        stats.rebuilds += 1  # damaged, untrusted or its sidecar lost: rebuilt
    for attempt in range(2):
        _build(cc, source, flags, library)
        try:
            handle = _load_checked(library)
        except OSError as exc:
            if attempt:
                msg = f"{library} was built but does not load: {exc}"
                raise CompileError(msg, op="compile") from exc
            stats.rebuilds += 1
            continue
        if handle is not None:
            return handle
        stats.rebuilds += 1  # replaced by another process between the build and the load
    raise CompileError(f"{library} was built but changed before it could be loaded", op="compile")
