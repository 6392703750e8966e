"""Poisoned cache files: what ember keeps under its cache folder steers what it runs (kernel
choices, parallel plans, roofline bounds), so a calibration file someone else could have
written (another user's, writable by the group or by anyone, a link) is treated as absent
(measured again) and never read; seeded mutations of each file read as valid or absent, never
as an exception; files are written so that they pass that test whatever the umask. (Compiled
kernels' own trust checks are tests/runtime/test_ccompile.py's.)"""

from __future__ import annotations

import json
import os
import random
from dataclasses import asdict

import pytest

from ember import _files
from ember.kernels import gemm_tune
from ember.ops import _vector_loops
from ember.profiler import roofline
from ember.runtime import parallel_cost

from . import files54_fuzzing as fz


def _tuning():
    rows = ((524288, 2e-5, 1e-5, 1), (4194304, 1e-4, 2e-4, 0), (33554432, 1e-3, 1e-3, 0))
    rows = (rows + ((268435456, 5e-3, 1e-2, 0),))[: len(gemm_tune._PRODUCTS)]
    few = (0, 0, 2, 1, 1, 1, 1, 2, 1, 1)[: len(gemm_tune._FEW_ROWS)]
    packed = (0, 0, 0, 0, 1, 0, 1, 1, 1, 1)[: len(gemm_tune._FEW_ROWS)]
    return gemm_tune.GemmTuning(
        gemm_tune.machine_key(), 1e-5, 1e11, 3e10, dict.fromkeys(gemm_tune.DTYPES, rows),
        dict.fromkeys(gemm_tune.DTYPES, few), dict.fromkeys(gemm_tune.DTYPES, packed),
    )  # fmt: skip


def _calibration():
    return parallel_cost.Calibration(
        cores=2, handoff_s=3e-5, fork_s=5e-5, step_s=0.0,
        blas=[(8192.0, 4e-6, 4e-6, 2.0), (65536.0, 5e-6, 5e-6, 3.0)],
        numpy=[(3072.0, 6e-7, 5e-7, 2.0)], machine="test", c_conv=[], c_copy=[],
    )  # fmt: skip


def _vector_read(path, monkeypatch):
    monkeypatch.setattr(_vector_loops, "_path", lambda: path)
    return _vector_loops._read() or None


def _peaks_read(path, monkeypatch):
    return roofline._stored(roofline._read(path).get("this machine"))


# name -> (the file's valid JSON value, what reading it gives, a reader: path -> value or None)
CACHES = {
    "gemm calibration": (
        lambda: gemm_tune._to_json(_tuning()),
        _tuning,
        lambda path, mp: gemm_tune._read(path),
    ),
    "parallel calibration": (
        lambda: dict(asdict(_calibration()), format=parallel_cost.FORMAT_VERSION),
        _calibration,
        lambda path, mp: parallel_cost._read(path),
    ),
    "vector loops": (
        lambda: {"sigmoid|float32|1": True, "exp|float32|1": False},
        lambda: {"sigmoid|float32|1": True, "exp|float32|1": False},
        _vector_read,
    ),
    "machine peaks": (
        lambda: {"this machine": {"gflops": 100.0, "gbps": 10.0, "measured": 1.0}},
        lambda: roofline.Peaks(100.0, 10.0),
        _peaks_read,
    ),
}


def _write(path, value, mode=0o644):
    path.write_text(json.dumps(value))
    os.chmod(path, mode)


@pytest.mark.parametrize("cache", list(CACHES))
def test_a_cache_file_of_this_user_only_is_read(tmp_path, monkeypatch, cache):
    value, expected, read = CACHES[cache]
    path = tmp_path / "cache.json"
    _write(path, value())
    assert read(path, monkeypatch) == expected()


POISONINGS = ["world-writable", "group-writable", "another user's", "a link", "a folder"]


@pytest.mark.parametrize("how", POISONINGS)
@pytest.mark.parametrize("cache", list(CACHES))
def test_a_cache_file_others_could_write_is_not_read(tmp_path, monkeypatch, cache, how):
    value, _expected, read = CACHES[cache]
    path = tmp_path / "cache.json"
    if how == "world-writable":
        _write(path, value(), 0o646)
    elif how == "group-writable":
        _write(path, value(), 0o664)
    elif how == "another user's":
        if os.getuid() != 0:
            pytest.skip("giving a file to another user needs root")
        _write(path, value())
        os.chown(path, 12345, -1)
    elif how == "a link":
        _write(tmp_path / "elsewhere.json", value())
        os.symlink(tmp_path / "elsewhere.json", path)
    else:
        path.mkdir()
    assert read(path, monkeypatch) is None


@pytest.mark.parametrize("cache", list(CACHES))
def test_a_cache_file_too_large_to_be_one_is_not_read(tmp_path, monkeypatch, cache):
    value, _expected, read = CACHES[cache]
    path = tmp_path / "cache.json"
    _write(path, value())
    with open(path, "a") as f:
        f.truncate(64 << 20)  # (sparse: no disk used) JSON whitespace... of NULs
    assert read(path, monkeypatch) is None


@pytest.mark.parametrize("cache", list(CACHES))
def test_mutated_cache_files_read_as_valid_or_absent(tmp_path, monkeypatch, cache):
    value, expected, read = CACHES[cache]
    rng = random.Random(fz.seed())
    tally = fz.Tally()
    good = value()
    path = tmp_path / "cache.json"
    for case in range(fz.cases(1000)):
        if rng.random() < 0.3:
            data = fz.mutate_bytes(json.dumps(good).encode(), rng)
        else:
            try:
                data = json.dumps(fz.mutate_json(good, rng)).encode("utf-8", "surrogatepass")
            except (RecursionError, ValueError):
                data = b"[" * 100_000
        path.write_bytes(data)
        os.chmod(path, 0o644)

        def check():  # (a mutation may be another valid file: only its kind is known)
            got = read(path, monkeypatch)
            assert got is None or type(got) is type(expected())

        tally.check(f"case {case}: {data[:100]!r}", check)
    assert not tally.escapes, tally.report()


def test_cache_files_are_written_private_to_this_user_whatever_the_umask(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(roofline, "_memory", {})
    monkeypatch.setattr(roofline, "measure_peaks", lambda: roofline.Peaks(1.0, 1.0))
    old = os.umask(0)
    try:
        roofline.machine_peaks()
        parallel_cost._write(tmp_path / "calibration.json", _calibration())
    finally:
        os.umask(old)
    for name in ("machine_peaks.json", "calibration.json"):
        assert os.stat(tmp_path / name).st_mode & 0o777 == _files.OWN_FILE_MODE
    assert parallel_cost._read(tmp_path / "calibration.json") == _calibration()
    monkeypatch.setattr(roofline, "measure_peaks", lambda: pytest.fail("measured again"))
    monkeypatch.setattr(roofline, "_memory", {})
    assert roofline.machine_peaks() == roofline.Peaks(1.0, 1.0)
