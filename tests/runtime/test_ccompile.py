"""runtime/ccompile.py: compiling C into callables, the on-disk kernel cache across processes,
concurrent builds, damaged cache entries, compile errors and a missing compiler."""

import ctypes
import os
import subprocess
import sys
import textwrap
import uuid

import numpy as np
import pytest

from ember.runtime import ccompile

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

AXPY = """
void axpy(long n, float a, const float* x, float* y) {
  for (long i = 0; i < n; i++) y[i] += a * x[i];
}
"""
ARGTYPES = [ctypes.c_long, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    return tmp_path


def _axpy(fn):
    x = np.arange(5, dtype=np.float32)
    y = np.ones(5, np.float32)
    fn(5, 2.0, x.ctypes.data, y.ctypes.data)
    return y


def _child(cache, source: str, tag: str = "") -> str:
    """Run a fresh Python that loads ``source`` from ``cache``; it prints its result and stats."""
    code = textwrap.dedent(
        f"""
        import ctypes, numpy as np
        from ember.runtime import ccompile
        fn = ccompile.load({source!r}, "axpy", [ctypes.c_long, ctypes.c_float,
                           ctypes.c_void_p, ctypes.c_void_p])
        x = np.arange(5, dtype=np.float32); y = np.ones(5, np.float32)
        fn(5, 2.0, x.ctypes.data, y.ctypes.data)
        s = ccompile.stats
        print(y.tolist(), s.compiles, s.disk_hits, s.rebuilds)
        """
    )
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache))
    return subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(process):
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    values, compiles, hits, rebuilds = out.strip().rsplit(" ", 3)[0], *out.split()[-3:]
    return values, int(compiles), int(hits), int(rebuilds)


EXPECTED = "[1.0, 3.0, 5.0, 7.0, 9.0]"


def test_a_kernel_compiles_once_and_computes(cache):
    before = ccompile.stats.compiles
    fn = ccompile.load(AXPY, "axpy", ARGTYPES)
    np.testing.assert_array_equal(_axpy(fn), 1 + 2 * np.arange(5, dtype=np.float32))
    again = ccompile.load(AXPY, "axpy", ARGTYPES)
    assert again is fn and ccompile.stats.compiles - before <= 1
    libraries = list(cache.glob("*.so"))
    assert len(libraries) == 1 and libraries[0].with_suffix(".sha256").exists()


def test_a_fresh_process_finds_the_kernel_on_disk(cache):
    source = AXPY + f"// {uuid.uuid4()}\n"
    assert _result(_child(cache, source))[1] == 1  # the first process compiles
    values, compiles, hits, _ = _result(_child(cache, source))
    assert values == EXPECTED and compiles == 0 and hits == 1


def test_two_processes_compiling_one_kernel_at_once_both_succeed(cache):
    source = AXPY + f"// {uuid.uuid4()}\n"
    first, second = _child(cache, source), _child(cache, source)
    results = [_result(first), _result(second)]
    assert all(r[0] == EXPECTED for r in results)
    assert len(list(cache.glob("*.so"))) == 1 and not list(cache.glob("*.tmp"))


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_cache_entry_is_rebuilt(cache, damage):
    source = AXPY + f"// {uuid.uuid4()}\n"
    _result(_child(cache, source))
    (library,) = cache.glob("*.so")
    data = library.read_bytes()
    library.write_bytes(b"not a library" if damage == "garbage" else data[: len(data) // 2])
    values, compiles, _, rebuilds = _result(_child(cache, source))
    assert values == EXPECTED and compiles == 1 and rebuilds == 1


def test_a_compile_error_names_the_kept_source(cache):
    with pytest.raises(ccompile.CompileError, match=r"failed on .*\.c") as info:
        ccompile.load("void broken(void) { this is not C; }", "broken", [])
    kept = str(info.value).split("failed on ")[1].split(":")[0]
    assert os.path.exists(kept)


def test_without_a_compiler_load_refuses_and_says_so(tmp_path):
    code = textwrap.dedent(
        """
        import warnings
        from ember.runtime import ccompile
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
    env = dict(os.environ, CC="/nonexistent/cc", EMBER_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "refused:" in out.stdout and "set CC" in out.stdout
    assert "1 no C compiler found" in out.stdout  # one warning, however often it is asked
