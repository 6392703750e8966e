"""Expected failures among the conformance cases of reductions, control flow, sequences,
optionals and the training preview operators (onnx/ops/reduce.py, control.py, sequence.py,
training.py), each with its reason: none."""

EXPECTED_FAILURES: dict[str, str] = {}
