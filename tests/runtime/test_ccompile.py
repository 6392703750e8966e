"""kernels/ccompile.py: compiling C into callables, the on-disk kernel cache across processes,
concurrent builds, damaged cache entries, flags a compiler lacks, compile errors and a missing
compiler. Every test points EMBER_CACHE_DIR at its own temporary directory."""

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import uuid

import numpy as np
import pytest

from ember.kernels import ccache_limit, ccompile

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

AXPY = """
void axpy(long n, float a, const float* x, float* y) {
#pragma omp simd
  for (long i = 0; i < n; i++) y[i] += a * x[i];
}
"""
FLOATS = np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")
ARGTYPES = [ctypes.c_long, ctypes.c_float, FLOATS, FLOATS]
X = np.linspace(-3, 3, 1000, dtype=np.float32)
EXPECTED = (np.float32(0.5) + np.float32(2.5) * X).tolist()


def _close(y, expected=EXPECTED) -> bool:
    # -march=native lets the compiler fuse a * x + y into one FMA (one rounding, not two)
    return np.allclose(y, expected, rtol=1e-6, atol=1e-6)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    return tmp_path


def _unique_axpy() -> str:
    """AXPY as a kernel no other test (or earlier run) has compiled."""
    return AXPY + f"// {uuid.uuid4()}\n"


def _axpy(fn) -> list:
    y = np.full_like(X, 0.5)
    fn(len(X), 2.5, X, y)
    return y.tolist()


def _library(cache):
    (library,) = cache.glob("*.so")
    return library


def _child(cache, source: str, barrier=None) -> subprocess.Popen:
    """A fresh Python that loads ``source`` from ``cache`` and prints its result and stats as
    JSON. With a ``barrier`` directory it says it is ready there, then waits for ``go``."""
    code = textwrap.dedent(
        f"""
        import ctypes, json, os, time
        import numpy as np
        from ember.kernels import ccompile
        barrier = {str(barrier) if barrier else None!r}
        if barrier:  # probed first, so the two reach the cache as close together as can be
            ccompile.compiler_available()
            open(os.path.join(barrier, str(os.getpid())), "w").close()
            while not os.path.exists(os.path.join(barrier, "go")):
                time.sleep(0.001)
        floats = np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")
        fn = ccompile.load({source!r}, "axpy", [ctypes.c_long, ctypes.c_float, floats, floats])
        x = np.linspace(-3, 3, 1000, dtype=np.float32)
        y = np.full_like(x, 0.5)
        fn(len(x), 2.5, x, y)
        s = ccompile.stats
        print(json.dumps(dict(y=y.tolist(), compiles=s.compiles, disk_hits=s.disk_hits,
                              rebuilds=s.rebuilds)))
        """
    )
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache))
    return subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def _result(process) -> dict:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err.decode()
    return json.loads(out)


def test_a_kernel_computes_and_is_cached_in_memory_and_on_disk(cache):
    source, before = _unique_axpy(), ccompile.stats.compiles
    fn = ccompile.load(source, "axpy", ARGTYPES)
    assert _close(_axpy(fn)) and ccompile.stats.compiles == before + 1
    hits = ccompile.stats.memory_hits
    assert ccompile.load(source, "axpy", list(ARGTYPES)) is fn
    assert ccompile.stats.memory_hits == hits + 1 and ccompile.stats.compiles == before + 1
    # other argtypes: another function object (a caller's argtypes never change another's)
    raw = ccompile.load(source, "axpy", [ctypes.c_long, ctypes.c_float] + [ctypes.c_void_p] * 2)
    assert raw is not fn and raw._ember_handle is fn._ember_handle and fn.argtypes == ARGTYPES
    # on disk: <sha256 key>.so beside a sidecar holding the hash of the library's bytes
    library = _library(cache)
    assert len(library.stem) == 64 and library.with_name(f"{library.stem}.sha256").read_text() == (
        hashlib.sha256(library.read_bytes()).hexdigest()
    )


def test_the_cache_directory_is_read_at_each_call(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "a"))
    assert ccompile.cache_dir() == tmp_path / "a" and (tmp_path / "a").is_dir()
    monkeypatch.delenv("EMBER_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ccompile.cache_dir() == tmp_path / "xdg" / "ember" / "kernels"
    # a cache that cannot be created (here: below a file) falls back to a private directory
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "file" / "kernels"))
    fallback = ccompile.cache_dir()
    assert fallback.is_dir() and os.access(fallback, os.W_OK)


def test_flags_and_libraries_are_part_of_the_key(cache):
    source = "#include <math.h>\nvoid ex(float* x) { x[0] = expf(x[0]); }\n"
    flags = ("-O1", "-fPIC", "-shared", "-lm")  # -l... must follow the source to link
    fn = ccompile.load(source, "ex", [FLOATS], flags=flags)
    other = ccompile.load(source, "ex", [FLOATS], flags=("-O2", *flags[1:]))
    assert other is not fn and len(list(cache.glob("*.so"))) == 2
    x = np.array([1.5], np.float32)
    fn(x)
    np.testing.assert_allclose(x, np.exp(np.float32(1.5)), rtol=1e-6)


def test_a_fresh_process_finds_the_kernel_on_disk_and_compiles_nothing(cache):
    source = _unique_axpy()
    ccompile.load(source, "axpy", ARGTYPES)  # this process compiles it
    child = _result(_child(cache, source))
    assert _close(child["y"])
    assert child["compiles"] == 0 and child["disk_hits"] == 1 and child["rebuilds"] == 0


def test_two_processes_compiling_one_new_kernel_at_once_both_succeed(cache, tmp_path_factory):
    source = _unique_axpy()
    barrier = tmp_path_factory.mktemp("barrier")
    children = [_child(cache, source, barrier) for _ in range(2)]
    deadline = time.monotonic() + 60
    while len(os.listdir(barrier)) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    (barrier / "go").touch()  # both are imported and waiting: they look up the cache together
    results = [_result(child) for child in children]
    assert all(_close(r["y"]) for r in results)
    # the second waits for the first's build (its lock file) and loads that library
    assert sum(r["compiles"] for r in results) == 1
    library = _library(cache)  # one library, its hash right, no temporary files left
    assert (
        library.with_suffix(".sha256").read_text()
        == hashlib.sha256(library.read_bytes()).hexdigest()
    )
    assert sorted(p.suffix for p in cache.iterdir()) == [".sha256", ".so"]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "garbage with its hash"])
def test_a_damaged_cache_entry_is_rebuilt(cache, damage):
    source = _unique_axpy()
    assert _result(_child(cache, source))["compiles"] == 1  # built by a process now gone
    library = _library(cache)
    data = library.read_bytes()
    damaged = data[: len(data) // 2] if damage == "truncated" else b"\x7fELF not a library"
    library.write_bytes(damaged)
    if damage == "garbage with its hash":  # the hash passes; the loader refuses it
        library.with_suffix(".sha256").write_text(hashlib.sha256(damaged).hexdigest())
    child = _result(_child(cache, source))
    assert _close(child["y"]) and child["compiles"] == 1 and child["rebuilds"] == 1
    assert ccompile.load(source, "axpy", ARGTYPES) is not None  # intact again for this process
    assert _library(cache).read_bytes() == data  # builds of one kernel give the same bytes


def test_a_rebuilt_library_is_not_served_from_the_loaders_stale_handle(cache, monkeypatch):
    source = _unique_axpy().replace("y[i] += a * x[i]", "y[i] += a * x[i] + 1")
    old = ccompile.load(source, "axpy", ARGTYPES)
    library = _library(cache)
    # replaced as a whole (a new inode): the old mapping in this process stays valid
    garbage = library.with_name("garbage")
    garbage.write_bytes(b"garbage")
    os.replace(garbage, library)
    # forget the function, not the library the dynamic loader holds for that path
    monkeypatch.setattr(ccompile, "_libraries", {})
    monkeypatch.setattr(ccompile, "_functions", {})
    rebuilds = ccompile.stats.rebuilds
    fn = ccompile.load(source, "axpy", ARGTYPES)
    assert ccompile.stats.rebuilds == rebuilds + 1 and fn is not old
    assert fn._ember_handle._name != old._ember_handle._name  # loaded from a fresh path
    assert _axpy(fn) == _axpy(old) and _close(_axpy(fn), 1.5 + 2.5 * X)
    assert sorted(p.suffix for p in cache.iterdir()) == [".sha256", ".so"]  # copy removed


def test_a_compile_error_shows_the_messages_and_keeps_the_source(cache):
    source = "void broken(void) {\n  this is not C;\n}\n"
    with pytest.raises(ccompile.CompileError, match="failed on") as info:
        ccompile.load(source, "broken", [])
    message = str(info.value)
    kept = message.split("failed on ")[1].split(":\n")[0]
    assert open(kept).read() == source
    assert f"{kept}:2:" in message and "error" in message  # the compiler's own words, its lines
    with pytest.raises(ccompile.CompileError) as again:  # known to fail: the compiler is not rerun
        ccompile.load(source, "broken", [])
    assert again.value is info.value


def test_a_compile_error_whose_source_cannot_be_kept_still_says_why(cache, monkeypatch):
    # a full disk while keeping the failed source must not hide the compiler's message behind
    # a raw OSError
    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ccompile, "write_atomic", disk_full)
    source = "void broken_too(void) {\n  neither is this;\n}\n" + f"// {uuid.uuid4()}\n"
    with pytest.raises(ccompile.CompileError, match="not kept: No space left") as info:
        ccompile.load(source, "broken_too", [])
    assert "error" in str(info.value)  # the compiler's own words
    assert not list(cache.glob("*.failed.c"))


def test_a_missing_symbol_is_a_compile_error(cache):
    with pytest.raises(ccompile.CompileError, match="no function 'nope'"):
        ccompile.load(AXPY, "nope", [])


@pytest.mark.parametrize("lacking", [("-fopenmp",), ("-march=native",), ("-fopenmp", "-march=")])
def test_flags_the_compiler_lacks_are_dropped(cache, tmp_path_factory, monkeypatch, lacking):
    # a real compiler without OpenMP (clang without libomp) or without a native target
    real = shutil.which("cc") or shutil.which("gcc")
    rejects = " ".join(f'{flag}*) echo "unsupported: {flag}" >&2; exit 1;;' for flag in lacking)
    script = tmp_path_factory.mktemp("cc") / "cc"
    script.write_text(f'#!/bin/sh\nfor a; do case "$a" in {rejects} esac; done\nexec {real} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("CC", str(script))
    assert ccompile.compiler_available()
    used = ccompile.effective_flags()
    assert all(not f.startswith(lacking) for f in used)
    assert set(ccompile.DEFAULT_FLAGS) - set(used) == {
        f for f in ccompile.OPTIONAL_FLAGS if f.startswith(lacking)
    }
    assert _close(_axpy(ccompile.load(AXPY, "axpy", ARGTYPES)))


def test_without_a_compiler_load_refuses_and_warns_once(tmp_path):
    code = textwrap.dedent(
        """
        import warnings
        from ember.kernels import ccompile
        assert not ccompile.compiler_available()
        try:
            ccompile.load("void f(void) {}", "f", [])
        except ccompile.CompilerUnavailable as exc:
            print("refused:", exc)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ccompile.warn_no_compiler(); ccompile.warn_no_compiler()
        print(len(caught), caught[0].message)
        """
    )
    env = dict(os.environ, CC="/nonexistent", EMBER_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "refused:" in out.stdout and "set CC" in out.stdout
    # one warning, however often it is asked
    assert "1 no C compiler found (set CC); fused kernels fall back to NumPy" in out.stdout
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------- trust and size
EVIL = """
void axpy(long n, float a, const float* x, float* y) {
  for (long i = 0; i < n; i++) y[i] = 42;
}
"""


def _plant(library):
    """Replace ``library`` and its hash file with another library that has the same function,
    as another user with write access to the folder could."""
    cc = shutil.which("cc") or shutil.which("gcc")
    evil = library.with_name("evil.so")
    subprocess.run(
        [cc, "-shared", "-fPIC", "-x", "c", "-", "-o", str(evil)], input=EVIL.encode(), check=True
    )
    data = evil.read_bytes()
    os.replace(evil, library)
    library.with_suffix(".sha256").write_text(hashlib.sha256(data).hexdigest())
    return data


def _forget(monkeypatch):
    """This process's memory of loaded kernels and of warnings given, as in a new process."""
    monkeypatch.setattr(ccompile, "_libraries", {})
    monkeypatch.setattr(ccompile, "_functions", {})
    monkeypatch.setattr(ccompile, "_warned_unsafe", set(), raising=False)
    monkeypatch.setattr(ccache_limit, "_estimates", {})


def test_a_cache_folder_other_users_can_write_is_not_used(cache, monkeypatch):
    shared = cache / "shared"
    shared.mkdir()
    source = _unique_axpy()
    assert _result(_child(shared, source))["compiles"] == 1
    library = _library(shared)
    shared.chmod(0o777)  # a shared cache: anyone may write ...
    _plant(library)  # ... and someone did
    monkeypatch.setenv("EMBER_CACHE_DIR", str(shared))
    _forget(monkeypatch)
    with pytest.warns(UserWarning, match=r"not using the kernel cache .*writable by other"):
        fn = ccompile.load(source, "axpy", ARGTYPES)
    assert _close(_axpy(fn))  # compiled privately, never the planted library
    assert ccompile.cache_dir() != shared and ccompile.cache_dir().stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("how", ["group-writable", "another user's", "a symlink"])
def test_an_untrusted_library_in_a_safe_folder_is_rebuilt(cache, how):
    if how == "another user's" and os.getuid() != 0:
        pytest.skip("giving a file to another user needs root")
    source = _unique_axpy()
    assert _result(_child(cache, source))["compiles"] == 1
    library = _library(cache)
    if how == "a symlink":
        evil_dir = cache / "elsewhere"
        evil_dir.mkdir()
        target = evil_dir / "lib.so"
        data = _plant(library)
        target.write_bytes(data)
        library.unlink()
        library.symlink_to(target)
    else:
        _plant(library)
        if how == "group-writable":
            library.chmod(0o664)
        else:
            os.chown(library, 65534, 65534)
    child = _result(_child(cache, source))
    assert _close(child["y"]) and child["rebuilds"] == 1 and child["compiles"] == 1
    assert not library.is_symlink() and library.stat().st_uid == os.getuid()


def test_the_library_checked_is_the_library_loaded(cache, monkeypatch):
    """A library swapped for another between the hash check and the load (another process of
    this user, or one with write access before ember refused the folder) is not loaded: the
    loader reads the descriptor whose bytes were hashed."""
    source = _unique_axpy()
    assert _result(_child(cache, source))["compiles"] == 1
    library = _library(cache)
    _forget(monkeypatch)
    digest = ccompile._digest
    swapped = []

    def hash_then_swap(data):
        result = digest(data)
        if data.startswith(b"\x7fELF") and not swapped:  # a library's bytes were just hashed:
            swapped.append(True)  # now the name holds another library (and the old hash)
            keep = library.with_suffix(".sha256").read_text()
            _plant(library)
            library.with_suffix(".sha256").write_text(keep)
        return result

    monkeypatch.setattr(ccompile, "_digest", hash_then_swap)
    fn = ccompile.load(source, "axpy", ARGTYPES)
    assert swapped and _close(_axpy(fn))


def test_the_cache_keeps_within_its_size_least_recently_used_first(cache, monkeypatch):
    a, b, c = (_unique_axpy() for _ in range(3))
    ccompile.load(a, "axpy", ARGTYPES)
    lib_a = _library(cache)
    one = lib_a.stat().st_size + lib_a.with_suffix(".sha256").stat().st_size
    monkeypatch.setenv("EMBER_KERNEL_CACHE_MB", str(2.5 * one / 2**20))  # room for two
    ccompile.load(b, "axpy", ARGTYPES)
    (lib_b,) = set(cache.glob("*.so")) - {lib_a}
    past = time.time() - 100
    os.utime(lib_a.with_suffix(".sha256"), (past, past))  # a: used long ago
    os.utime(lib_b.with_suffix(".sha256"), (past + 10, past + 10))
    _forget(monkeypatch)
    ccompile.load(a, "axpy", ARGTYPES)  # a disk hit: a is now the most recently used
    assert lib_a.with_suffix(".sha256").stat().st_mtime > past + 10
    evictions = ccompile.stats.evictions
    ccompile.load(c, "axpy", ARGTYPES)
    assert ccompile.stats.evictions == evictions + 1
    assert lib_a.exists() and not lib_b.exists() and not lib_b.with_suffix(".sha256").exists()
    assert len(list(cache.glob("*.so"))) == 2
    assert sum(p.stat().st_size for p in cache.iterdir()) <= 2.5 * one


def test_builds_scan_the_cache_now_and_then_not_each_time(cache, monkeypatch):
    # listing and sizing thousands of cached kernels at every build made a fresh cache's
    # builds slower and slower: a process scans at its first build, when its estimate of the
    # folder's size passes the limit, and after each sixteenth of the limit it has written
    scans = []
    evict = ccache_limit._evict
    monkeypatch.setattr(ccache_limit, "_evict", lambda *a, **k: scans.append(1) or evict(*a, **k))
    ccompile.load(_unique_axpy(), "axpy", ARGTYPES)
    one = sum(p.stat().st_size for p in cache.iterdir())
    monkeypatch.setenv("EMBER_KERNEL_CACHE_MB", str(40 * one / 2**20))  # 2.5 builds a scan
    for _ in range(6):
        ccompile.load(_unique_axpy(), "axpy", ARGTYPES)
    assert len(scans) == 1 + 2  # the first build; then after the 3rd and the 6th
    monkeypatch.setenv("EMBER_KERNEL_CACHE_MB", str(7.5 * one / 2**20))  # now over the limit
    ccompile.load(_unique_axpy(), "axpy", ARGTYPES)
    assert len(scans) == 4 and len(list(cache.glob("*.so"))) == 7  # least recent one gone


def test_a_bad_cache_size_setting_is_warned_about(monkeypatch):
    monkeypatch.setenv("EMBER_KERNEL_CACHE_MB", "lots")
    with pytest.warns(UserWarning, match="EMBER_KERNEL_CACHE_MB='lots'"):
        assert ccompile.cache_limit_bytes() == ccompile.DEFAULT_CACHE_MB * 2**20
    monkeypatch.setenv("EMBER_KERNEL_CACHE_MB", "0.5")
    assert ccompile.cache_limit_bytes() == 2**19


def test_without_a_descriptor_number_left_the_checked_bytes_are_loaded_from_a_copy(
    cache, monkeypatch
):
    source = _unique_axpy()
    assert _result(_child(cache, source))["compiles"] == 1
    _forget(monkeypatch)
    import resource

    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    monkeypatch.setattr(ccompile, "_next_fd", limit)  # every number is used up
    fn = ccompile.load(source, "axpy", ARGTYPES)
    assert _close(_axpy(fn)) and ccompile._private_dir().name in fn._ember_handle._name
    assert not list(ccompile._private_dir().glob("*.tmp"))  # the copy's name is gone
