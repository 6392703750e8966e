"""ONNX's node conformance cases run through ember's backend (ember.onnx.backend).

``collect()`` builds onnx's node cases in memory (``onnx.backend.test.case.node``; the wheel
ships no node data); ``run_case(case)`` runs each data set through ``ember.onnx.backend`` and
compares with onnx's own ``Runner.assert_similar_outputs`` (its per-case rtol/atol). Run as a
script for a count by operator and the failures with their errors:

    PYTHONPATH=src python -m tests.onnx.conformance [substring ...]
"""

from __future__ import annotations

import collections
import functools
import sys
import time
import traceback
import warnings


@functools.lru_cache(maxsize=1)
def collect():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import numpy as np

        with np.errstate(all="ignore"):
            cases = collect_testcases(None)
    return {case.name: case for case in cases}


def op_types(case) -> list[str]:
    return sorted({node.op_type for node in case.model.graph.node})


def run_case(case) -> None:
    """Raise if ember's backend disagrees with the case's expected outputs."""
    import numpy as np
    from onnx.backend.test.runner import _normalize_tensor

    from ember.onnx import backend

    rep = backend.prepare(case.model, "CPU")
    for inputs, expected in case.data_sets:
        inputs = [_normalize_tensor(item) for item in inputs]
        expected = [_normalize_tensor(item) for item in expected]
        with np.errstate(all="ignore"):
            outputs = rep.run(inputs)
        assert_similar(expected, outputs, case.rtol, case.atol)


def assert_similar(expected, outputs, rtol, atol) -> None:
    """onnx's ``Runner.assert_similar_outputs``, with a sequence output compared element by
    element (onnx's own recursion hands it each element bare, and a 0-d element then fails
    inside ``len()`` before anything is compared)."""
    from onnx.backend.test.runner import Runner

    assert len(outputs) == len(expected), f"{len(outputs)} outputs, expected {len(expected)}"
    for want, got in zip(expected, outputs):
        if isinstance(want, (list, tuple)):
            assert isinstance(got, (list, tuple)), f"a sequence expected, got {type(got)}"
            assert len(got) == len(want), f"{len(got)} elements, expected {len(want)}"
            for w, g in zip(want, got):
                assert_similar([w], [g], rtol, atol)
        else:
            Runner.assert_similar_outputs([want], [got], rtol=rtol, atol=atol)


def main(argv: list[str]) -> int:
    cases = collect()
    names = [n for n in sorted(cases) if not argv or any(a in n for a in argv)]
    passed, failed = [], {}
    by_op = collections.defaultdict(lambda: [0, 0])
    start = time.time()
    for name in names:
        case = cases[name]
        try:
            run_case(case)
            passed.append(name)
            ok = True
        except Exception as err:  # noqa: BLE001 - a report of every failure
            last = traceback.extract_tb(err.__traceback__)[-1]
            failed[name] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]} [{last.name}]"
            ok = False
        for op in op_types(case):
            by_op[op][0 if ok else 1] += 1
    for name, why in failed.items():
        print(f"FAIL {name}: {why}")
    print()
    for op, (good, bad) in sorted(by_op.items(), key=lambda kv: -kv[1][1]):
        if bad:
            print(f"{op:32s} passed {good:4d} failed {bad:4d}")
    took = time.time() - start
    print(f"\n{len(passed)} passed, {len(failed)} failed of {len(names)} ({took:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
