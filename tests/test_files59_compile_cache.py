"""The compile cache's damaged entries (files59): a library truncated, emptied, replaced by
another source's library with its hash copied beside it, or a folder where the library or its
hash file goes; a cache folder whose path has spaces and non-ASCII letters; two processes
compiling one kernel into a fresh cache at once while a third reads it.

Escapes these found: a foreign library with a matching hash loaded, and then every call for the
kernel failed with "/proc/self/fd/N has no function" (naming no file, never rebuilt); it is now
refused as damaged and rebuilt. A folder where the library or its hash goes raised a raw
IsADirectoryError out of the build; it is a `CompileError` naming the library, which callers
answer by running NumPy.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from ember.kernels import ccompile

pytestmark = pytest.mark.skipif(
    not ccompile.compiler_available(), reason="the compile cache is used only with a C compiler"
)


def _source(name: str, step: float) -> str:
    tag = uuid.uuid4().hex  # (a fresh key: nothing in memory or on disk holds it)
    return f"/* {tag} */\nvoid {name}(double *x) {{ x[0] += {step}; }}\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "kernel cache é漢"  # (spaces and non-ASCII letters in the path)
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(folder))
    return folder


def _library(source: str) -> Path:
    key = ccompile.library_key(ccompile._compiler(), source, ccompile.effective_flags())
    return ccompile.cache_dir() / f"{key}.so"


def _build_elsewhere(source: str, symbol: str, folder: Path) -> None:
    """Compile ``source`` into ``folder`` in another process (this one's in-memory cache would
    otherwise hand back the library it already holds)."""
    code = textwrap.dedent(f"""
        import ctypes, os
        os.environ["EMBER_CACHE_DIR"] = {str(folder)!r}
        from ember.kernels import ccompile
        ccompile.load({source!r}, {symbol!r}, [ctypes.c_void_p])
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=300)


def _call(source: str, symbol: str) -> float:
    fn = ccompile.load(source, symbol, [ctypes.c_void_p])
    x = (ctypes.c_double * 1)(1.0)
    fn(ctypes.addressof(x))
    return x[0]


@pytest.mark.parametrize("damage", ["truncated", "empty", "foreign"])
def test_a_damaged_or_foreign_library_is_rebuilt(cache, damage):
    source = _source("f59_add_one", 1.0)
    library = _library(source)
    if damage == "foreign":  # another kernel's library and its (matching) hash, copied here
        other = _source("f59_add_two", 2.0)
        _build_elsewhere(other, "f59_add_two", cache)
        shutil.copy(_library(other), library)
        shutil.copy(_library(other).with_suffix(".sha256"), library.with_suffix(".sha256"))
    else:
        _build_elsewhere(source, "f59_add_one", cache)
        data = library.read_bytes()
        library.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"")
    rebuilds = ccompile.stats.rebuilds
    assert _call(source, "f59_add_one") == 2.0
    assert ccompile.stats.rebuilds == rebuilds + 1
    assert not [p.name for p in cache.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("place", [".so", ".sha256"])
def test_a_folder_where_the_library_goes_is_a_compile_error_naming_it(cache, place):
    source = _source("f59_add_one", 1.0)
    library = _library(source)
    library.with_suffix(place).mkdir()
    with pytest.raises(ccompile.CompileError, match="cannot store the kernel library") as info:
        ccompile.load(source, "f59_add_one", [ctypes.c_void_p])
    assert library.name in str(info.value)
    assert not [p.name for p in cache.iterdir() if p.name.endswith(".tmp")]
    library.with_suffix(place).rmdir()  # (not remembered as the source's failure: built now)
    assert _call(source, "f59_add_one") == 2.0


def test_a_missing_function_names_the_library(cache):
    source = _source("f59_add_one", 1.0)
    with pytest.raises(ccompile.CompileError, match="has no function 'f59_absent'") as info:
        ccompile.load(source, "f59_absent", [ctypes.c_void_p])
    assert _library(source).name in str(info.value) and "/proc/" not in str(info.value)


@pytest.mark.skipif(os.name != "posix" or os.getuid() == 0, reason="root writes any folder")
def test_a_read_only_cache_folder_is_a_compile_error(cache):
    source = _source("f59_add_one", 1.0)
    cache.chmod(0o500)
    try:
        with pytest.raises(ccompile.CompileError, match="cannot store the kernel library"):
            ccompile.load(source, "f59_add_one", [ctypes.c_void_p])
    finally:
        cache.chmod(0o700)


_WRITER = textwrap.dedent("""
    import ctypes, os, sys, time
    os.environ["EMBER_CACHE_DIR"] = sys.argv[1]
    from ember.kernels import ccompile
    while not os.path.exists(sys.argv[3]):  # (both writers start together)
        time.sleep(0.001)
    fn = ccompile.load(sys.argv[2], "f59_add_one", [ctypes.c_void_p])
    x = (ctypes.c_double * 1)(1.0)
    fn(ctypes.addressof(x))
    assert x[0] == 2.0, x[0]
""")


def test_two_processes_compiling_one_kernel_leave_readers_whole_libraries(cache, tmp_path):
    """Two processes build the same kernel into one fresh cache at the same moment while this
    one reads the library's name over and over: every read is absent or the whole library."""
    source = _source("f59_add_one", 1.0)
    library = _library(source)
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    args = [sys.executable, "-c", _WRITER, str(cache), source, str(go)]
    writers = [subprocess.Popen(args, env=env) for _ in range(2)]
    seen = []
    try:
        go.touch()
        while any(w.poll() is None for w in writers):
            try:
                seen.append(library.read_bytes())
            except FileNotFoundError:
                pass
    finally:
        codes = [w.wait(timeout=300) for w in writers]
    assert codes == [0, 0]
    final = library.read_bytes()
    assert all(data == final for data in seen), "a reader saw a library other than the whole one"
    assert ccompile._digest(final) == library.with_suffix(".sha256").read_text().strip()
    assert not [p.name for p in cache.iterdir() if p.name.endswith((".tmp", ".lock"))]
    assert _call(source, "f59_add_one") == 2.0
