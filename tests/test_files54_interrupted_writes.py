"""Interrupted writes: every writer of a file (checkpoints, graph files, ONNX models with and
without their data file, profiler traces, the viewer's page and DOT drawings, calibrations)
that fails midway (the disk full after half the bytes, or a rename refused) leaves the old
file as it was and no temporary file behind."""

from __future__ import annotations

import errno
import os

import pytest

import ember
from ember import _files, nn
from ember.io import checkpoint
from ember.runtime import parallel_cost
from ember.tools import viz

pytest.importorskip("onnx")


class _DiskFull:
    """A file object that writes half of what it is given, then fails as a full disk does."""

    def __init__(self, f):
        self._f = f

    def write(self, data):
        self._f.write(bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


def _full_disk(monkeypatch):
    monkeypatch.setattr(_files, "open", lambda *a, **k: _DiskFull(open(*a, **k)), raising=False)


def _rename_fails(monkeypatch, folder, after: int = 0):
    """``os.replace`` in _files refused once, after ``after`` successful calls into ``folder``
    (the writes under test: a cache or calibration written on the way, a first call's
    measurement in the compile cache, is not counted)."""
    calls = []
    real = os.replace

    def replace(src, dst):
        if not str(dst).startswith(str(folder)):
            return real(src, dst)
        calls.append(dst)
        if len(calls) == after + 1:
            raise OSError(errno.EIO, "Input/output error")
        real(src, dst)

    monkeypatch.setattr(_files.os, "replace", replace)


def _linear():
    ember.manual_seed(0)
    return nn.Linear(64, 32), ember.randn(2, 64)


def _graph():
    return ember.trace(lambda x: (x * 2).relu(), ember.randn(3)).graph


def _writers():
    def onnx_single(path):
        model, x = _linear()
        ember.onnx.export(model, path, x, external_data=False)

    def onnx_external(path):
        model, x = _linear()
        ember.onnx.export(model, path, x, external_data=True)

    def trace(path):
        with ember.profiler.profile() as prof:
            ember.randn(4).relu()
        prof.export_chrome_trace(str(path))

    return {
        "onnx model": onnx_single,
        "onnx model and data": onnx_external,
        "profiler trace": trace,
        "viewer page": lambda path: viz.html(_graph(), str(path)),
        "dot drawing": lambda path: viz.dot(_graph(), str(path)),
        "calibration": lambda path: parallel_cost._write(path, _calibration()),
    }


def _calibration():
    return parallel_cost.Calibration(
        cores=2, handoff_s=3e-5, fork_s=5e-5, step_s=0.0,
        blas=[(8192.0, 4e-6, 4e-6, 2.0)], numpy=[(3072.0, 6e-7, 5e-7, 2.0)], machine="test",
        c_conv=[], c_copy=[],
    )  # fmt: skip


def _old_files(folder, name, writer):
    """The files ``writer`` of ``name`` replaces, with old contents; name -> bytes."""
    old = {name: b"the old file"}
    if writer == "onnx model and data":
        old[name + ".data"] = b"the old data"
    for file, data in old.items():
        (folder / file).write_bytes(data)
    return old


def _folder(folder) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


WRITERS = _writers()


CASES = [(w, f) for w in WRITERS for f in ("disk full", "rename refused")]
CASES.append(("onnx model and data", "second rename refused"))


@pytest.mark.parametrize(("writer", "failure"), CASES)
def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(
    tmp_path, monkeypatch, writer, failure
):
    name = "out.onnx" if writer.startswith("onnx") else "out.file"
    old = _old_files(tmp_path, name, writer)
    if failure == "disk full":
        _full_disk(monkeypatch)
    else:
        _rename_fails(monkeypatch, tmp_path, after=0 if failure == "rename refused" else 1)
    calibration = writer == "calibration"
    raised = None
    try:
        WRITERS[writer](tmp_path / name)
    except (OSError, ember.EmberError) as exc:
        raised = exc
    assert raised is not None or calibration  # (an unwritable calibration is only not kept)
    assert _folder(tmp_path) == old
    monkeypatch.undo()  # and the same write, uninterrupted, replaces them
    WRITERS[writer](tmp_path / name)
    assert set(_folder(tmp_path)) == set(old)
    assert all(data != old[file] for file, data in _folder(tmp_path).items())


def test_checkpoints_and_graph_files_interrupted_before_their_rename(tmp_path, monkeypatch):
    path = tmp_path / "state.ckpt"
    ember.save({"w": ember.ones(3)}, path)
    graph_path = tmp_path / "g.graph"
    _graph().save(graph_path)
    before = _folder(tmp_path)

    def fail(_path):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(checkpoint, "_fsync_file", fail)  # (the bytes written, not yet renamed)
    with pytest.raises(ember.EmberError, match="state.ckpt .*the previous file.* is unchanged"):
        ember.save({"w": ember.zeros(5)}, path)
    with pytest.raises(ember.EmberError, match="g.graph .*the previous file.* is unchanged"):
        _graph().save(graph_path)
    assert _folder(tmp_path) == before
    assert ember.load(path)["w"].tolist() == [1.0, 1.0, 1.0]


def test_writing_together_restores_what_was_renamed_when_a_later_rename_fails(
    tmp_path, monkeypatch
):
    (tmp_path / "a").write_bytes(b"old a")
    _rename_fails(monkeypatch, tmp_path, after=1)
    with pytest.raises(OSError):
        _files.write_atomic_together({tmp_path / "a": b"new a", tmp_path / "b": b"new b"})
    assert _folder(tmp_path) == {"a": b"old a"}
    monkeypatch.undo()
    _files.write_atomic_together({tmp_path / "a": b"new a", tmp_path / "b": b"new b"})
    assert _folder(tmp_path) == {"a": b"new a", "b": b"new b"}


def test_a_gemm_tuning_that_cannot_be_written_still_serves_this_process(tmp_path, monkeypatch):
    from ember.kernels import gemm_tune

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(gemm_tune, "_loaded", {})
    monkeypatch.setattr(gemm_tune, "_current", None)
    rows = ((524288, 2e-5, 1e-5, 1),)
    few = (1,) * len(gemm_tune._FEW_ROWS)
    tuning = gemm_tune.GemmTuning(
        gemm_tune.machine_key(), 1e-5, 1e11, 3e10, {"float32": rows}, {"float32": few},
        {"float32": (0,) * len(few)},
    )  # fmt: skip
    monkeypatch.setattr(gemm_tune, "measure", lambda *_: tuning)
    _full_disk(monkeypatch)  # (a product's first call must not fail on a full disk)
    assert gemm_tune.calibrate() is tuning
    assert [p.name for p in tmp_path.iterdir()] == []
