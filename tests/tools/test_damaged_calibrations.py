"""Measured-machine files that are damaged but valid JSON (the wrong kinds of values, negative or
non-finite numbers) are measured again, as their docstrings promise, never a raw exception:
``machine_peaks.json`` (profiler/roofline.py) and the parallel calibration
(runtime/parallel_cost.py)."""

import json
from dataclasses import asdict

import pytest

from ember.profiler import roofline
from ember.runtime import parallel_cost

PEAKS = roofline.Peaks(100.0, 10.0)


@pytest.fixture
def peaks_file(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(roofline, "_memory", {})
    measured = []
    monkeypatch.setattr(roofline, "measure_peaks", lambda: measured.append(1) or PEAKS)
    return tmp_path / "machine_peaks.json", measured


@pytest.mark.parametrize(
    "entry",
    [
        [1, 2],
        "fast",
        {"gflops": "x", "gbps": 1},
        {"gflops": 1},
        {"gflops": None, "gbps": None},
        {"gflops": -5.0, "gbps": 10.0},
        {"gflops": 0, "gbps": 10.0},
        {"gflops": True, "gbps": 10.0},
        {"gflops": 1e400, "gbps": 1.0},  # (JSON reads it as inf)
    ],
    ids=str,
)
def test_a_damaged_peaks_entry_is_measured_again(peaks_file, entry):
    path, measured = peaks_file
    path.write_text(json.dumps({roofline._machine_key(): entry}).replace("Infinity", "1e400"))
    assert roofline.machine_peaks() == PEAKS and measured == [1]
    stored = json.loads(path.read_text())[roofline._machine_key()]
    assert stored["gflops"] == PEAKS.gflops  # and the file is repaired


def test_a_peaks_file_nested_too_deep_is_measured_again(peaks_file):
    path, measured = peaks_file
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert roofline.machine_peaks() == PEAKS and measured == [1]


def _calibration() -> parallel_cost.Calibration:
    return parallel_cost.Calibration(
        cores=2,
        handoff_s=3e-5,
        fork_s=5e-5,
        step_s=0.0,
        blas=[(8192.0, 4e-6, 4e-6, 2.0), (65536.0, 5e-6, 5e-6, 3.0)],
        numpy=[(3072.0, 6e-7, 5e-7, 2.0), (12288.0, 7e-7, 7e-7, 3.0)],
        machine="test",
        c_conv=[(589824.0, 1e-5, 1.0)],
        c_copy=[],
    )


def _damage(data, edit):
    data = json.loads(json.dumps(data))
    edit(data)
    return data


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(cores="2"),
        lambda d: d.update(cores=0),
        lambda d: d.update(handoff_s=-1.0),
        lambda d: d.update(fork_s=None),
        lambda d: d.update(blas="fast"),
        lambda d: d.update(blas=[]),
        lambda d: d.update(blas=[[8192.0, 4e-6, 4e-6]]),
        lambda d: d.update(blas=[[8192.0, 4e-6, 4e-6, 2.0], [8192.0, 5e-6, 5e-6, 3.0]]),
        lambda d: d.update(numpy=[[3072.0, 0.0, 5e-7, 2.0]]),
        lambda d: d.update(c_conv=[[1.0, "x", 1.0]]),
        lambda d: d.update(machine=7),
        lambda d: d.update(runner="gpu"),
        lambda d: d.update(extra=1),
        lambda d: d.pop("step_s"),
    ],
)
def test_a_damaged_calibration_is_measured_again(tmp_path, monkeypatch, edit):
    path = tmp_path / "calibration.json"
    good = dict(asdict(_calibration()), format=parallel_cost.FORMAT_VERSION)
    path.write_text(json.dumps(good))
    assert parallel_cost._read(path) == _calibration()
    path.write_text(json.dumps(_damage(good, edit)))
    assert parallel_cost._read(path) is None
    # and calibrate() measures again and replaces the file
    monkeypatch.setattr(parallel_cost, "calibration_path", lambda: path)
    monkeypatch.setattr(parallel_cost, "_loaded", {})
    monkeypatch.setattr(parallel_cost, "measure", _calibration)
    assert parallel_cost.calibrate() == _calibration()
    assert parallel_cost._read(path) == _calibration()


@pytest.mark.parametrize(
    "text", ["[1, 2]", '"x"', "null", "[" * 100_000], ids=["list", "str", "null", "deep"]
)
def test_a_calibration_file_that_is_no_object_is_measured_again(tmp_path, text):
    path = tmp_path / "calibration.json"
    path.write_text(text)
    assert parallel_cost._read(path) is None
