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
