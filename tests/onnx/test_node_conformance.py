"""ONNX's node conformance cases (onnx 1.23: 1,884, built in memory) through ember.onnx.backend.

Every case runs; the ones ember does not pass are listed, each with its reason, in the
``xfail_*.py`` modules beside this file (strict: a listed case that passes fails the test, so
the lists stay true)."""

from __future__ import annotations

import importlib
import pathlib

import pytest

pytest.importorskip("onnx")

from .conformance import collect, run_case  # noqa: E402


def _expected_failures() -> dict[str, str]:
    merged: dict[str, str] = {}
    for path in sorted(pathlib.Path(__file__).parent.glob("xfail_*.py")):
        module = importlib.import_module(f"{__package__}.{path.stem}")
        for name, reason in module.EXPECTED_FAILURES.items():
            assert name not in merged, f"{name} is listed twice ({path.name})"
            merged[name] = reason
    return merged


EXPECTED = _expected_failures()
CASES = sorted(collect())


def test_expected_failures_name_real_cases():
    unknown = sorted(set(EXPECTED) - set(CASES))
    assert not unknown, f"expected failures that are no conformance case: {unknown}"


@pytest.mark.parametrize("name", CASES)
def test_node_case(name):
    case = collect()[name]
    if name in EXPECTED:
        try:
            run_case(case)
        except Exception:  # noqa: BLE001 - an expected failure, whatever it raises
            pytest.xfail(EXPECTED[name])
        pytest.fail(f"{name} passes: remove it from the expected failures ({EXPECTED[name]})")
    run_case(case)
