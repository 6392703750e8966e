"""ONNX's model cases (the wheel's pytorch-converted, pytorch-operator, simple and light
networks) through ember.onnx.backend; the ones ember does not pass are listed with their reasons
in xfail_models.py (strict: a listed case that passes fails)."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

from .model_cases import collect, run_case  # noqa: E402
from .xfail_models import EXPECTED_FAILURES  # noqa: E402

CASES = sorted(collect())


def test_expected_failures_name_real_cases():
    unknown = sorted(set(EXPECTED_FAILURES) - set(CASES))
    assert not unknown, f"expected failures that are no model case: {unknown}"


@pytest.mark.parametrize("name", CASES)
def test_model_case(name):
    case = collect()[name]
    if name in EXPECTED_FAILURES:
        try:
            run_case(case)
        except Exception:  # noqa: BLE001 - an expected failure, whatever it raises
            pytest.xfail(EXPECTED_FAILURES[name])
        pytest.fail(f"{name} passes: remove it from xfail_models.py")
    run_case(case)
