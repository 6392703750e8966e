"""The readers fuzzed over the recent stops' ops and values (tests/files59_recent_fuzz.py): graph
files and ONNX models of as_strided views, add with alpha, linspace, cumulative scans, fake and
real quantization and CSR products, checkpoints of quantized and CSR tensors, safetensors
files. Run in a process of its own so a crash is seen as one and a hang as its timeout; a seeded
slice here, ``EMBER_FUZZ_CASES`` (and ``EMBER_FUZZ_SEED``) runs more."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from . import files54_fuzzing as fz


def test_mutated_recent_files_are_read_or_refused_with_an_ember_error(tmp_path):
    out = tmp_path / "report.json"
    cases = fz.cases(600)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    command = [sys.executable, "-m", "tests.files59_recent_fuzz", str(out), str(fz.seed(59))]
    done = subprocess.run(
        [*command, str(cases)],
        env=env,
        cwd=os.path.dirname(os.path.dirname(__file__)),
        capture_output=True,
        text=True,
        timeout=max(600, cases),  # (a hang: a reader waiting on what a file declares)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["cases"] == cases
    assert not report["escapes"], "\n".join(report["escapes"][:10])
    graphs = {s for s in report["seeds"] if s.startswith("graph_")}
    assert len(graphs) == 12, report["seeds"]  # (each program traced, before and after passes)


def test_a_huge_hex_quantization_parameter_is_refused_by_name():
    """Found by this fuzz: a checkpoint's per-channel zero point "0x1p99999" raised a raw
    OverflowError from float.fromhex out of ember.load."""
    import numpy as np

    from ember.errors import CheckpointError
    from ember.io import _quantized

    def bad(what):
        return CheckpointError(f"ckpt: {what}", op="load")

    node = {"dtype": "quint8", "scales": ["0x1p-4"], "zero_points": ["0x1p99999"], "axis": 0}
    ints = np.zeros((1, 3), np.uint8)
    try:
        _quantized.decode(ints, node, bad)
    except CheckpointError as exc:
        assert "0x1p99999" in str(exc)
    else:
        raise AssertionError("a zero point past float's range was taken")
