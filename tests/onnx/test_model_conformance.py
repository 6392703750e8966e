"""ONNX's model cases (the wheel's pytorch-converted, pytorch-operator, simple and light
networks) through ember.onnx.backend; the ones ember does not pass are listed with their reasons
in xfail_models.py (strict: a listed case that passes fails), and the ill-conditioned ones whose
expected values depend on how rounding falls (checked for what does not, xfailed if they differ)."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

from .model_cases import collect, run_case  # noqa: E402
from .xfail_models import EXPECTED_FAILURES, ILL_CONDITIONED  # noqa: E402

CASES = sorted(collect())


def test_expected_failures_name_real_cases():
    unknown = sorted(set(EXPECTED_FAILURES) - set(CASES))
    assert not unknown, f"expected failures that are no model case: {unknown}"


@pytest.mark.parametrize("name", CASES)
def test_model_case(name, request):
    case = collect()[name]
    if name in EXPECTED_FAILURES:
        try:
            run_case(case)
        except Exception:  # noqa: BLE001 - an expected failure, whatever it raises
            pytest.xfail(EXPECTED_FAILURES[name])
        pytest.fail(f"{name} passes: remove it from xfail_models.py")
    if name in ILL_CONDITIONED:
        # (the suite's check of each compiled run against the interpreter would see the same
        # rounding-dependent difference inside the run)
        request.getfixturevalue("bare_executors")
        try:
            run_case(case)
        except AssertionError:
            _still_probabilities(case)
            pytest.xfail(ILL_CONDITIONED[name])
        return
    run_case(case)


def _still_probabilities(case) -> None:
    """What an ill-conditioned classifier's output must be whatever the rounding: each sample a
    probability distribution of the expected shape."""
    import numpy as np

    from ember.onnx import backend

    from .model_cases import data_sets

    model, sets = data_sets(case)
    rep = backend.prepare(model, "CPU")
    for inputs, expected in sets:
        with np.errstate(all="ignore"):
            outputs = rep.run(inputs)
        for want, got in zip(expected, outputs):
            got = np.asarray(got)
            assert got.shape == np.asarray(want).shape and np.isfinite(got).all()
            assert (got >= 0).all()
            # each sample's probabilities sum to 1 over all its other axes: squeezenet's softmax
            # runs over axis 1 of an (N, 1000, 1, 1) output, resnet50's over the last of (N, 1000)
            per_sample = got.reshape(got.shape[0], -1).sum(axis=1)
            np.testing.assert_allclose(per_sample, 1.0, rtol=1e-5)
