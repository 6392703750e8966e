"""Model cases ember does not pass, each with its reason (tests/onnx/test_model_conformance.py)."""

EXPECTED_FAILURES: dict[str, str] = {}
