"""ONNX's model conformance cases, the ones its wheel ships, run through ember.onnx.backend.

Kinds: ``pytorch-converted``, ``pytorch-operator`` and ``simple`` (a model and data sets each),
and ``real``, whose nine networks (ResNet-50, Inception v1/v2, DenseNet-121, ...) the wheel
ships in their ``light`` form: weights replaced by ConstantOfShape nodes, inputs made with
onnx's own dummy data (``Runner.generate_dummy_data``), the expected outputs beside the model.
Compared with onnx's ``Runner.assert_similar_outputs`` at each case's rtol/atol. As a script:

    PYTHONPATH=src python -m tests.onnx.model_cases [substring ...]
"""

from __future__ import annotations

import functools
import glob
import os
import sys
import time
import traceback

KINDS = ("pytorch-converted", "pytorch-operator", "simple", "real")


@functools.lru_cache(maxsize=1)
def collect() -> dict:
    from onnx.backend.test.loader import load_model_tests

    cases = {}
    for kind in KINDS:
        for case in load_model_tests(kind=kind):
            cases[f"{kind}/{case.name}"] = case
    return cases


def _data_dir() -> str:
    from onnx.backend.test.loader import DATA_DIR

    return DATA_DIR


def _runner():
    from onnx.backend.test.runner import Runner

    from ember.onnx import backend

    return Runner(backend, __name__)


def data_sets(case):
    """(model, [(inputs, expected outputs), ...]) of a model case."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.runner import Runner

    runner = _runner()
    if case.model_dir is None:  # a light network (kind "real")
        path = os.path.join(_data_dir(), "light", f"light_{case.model_name}.onnx")
        model = onnx.load(path)
        inits = {i.name for i in model.graph.initializer}
        inputs = [
            Runner.generate_dummy_data(x, seed=0, name=case.model_name, random=False)
            for x in model.graph.input
            if x.name not in inits
        ]
        expected = []
        for i in range(len(model.graph.output)):
            with open(f"{os.path.splitext(path)[0]}_output_{i}.pb", "rb") as f:
                tensor = onnx.TensorProto()
                tensor.ParseFromString(f.read())
            expected.append(numpy_helper.to_array(tensor))
        return model, [(inputs, expected)]
    model = onnx.load(os.path.join(case.model_dir, "model.onnx"))
    sets = []
    for folder in sorted(glob.glob(os.path.join(case.model_dir, "test_data_set*"))):
        inputs, expected = [], []
        for i in range(len(glob.glob(os.path.join(folder, "input_*.pb")))):
            runner._load_proto(
                os.path.join(folder, f"input_{i}.pb"), inputs, model.graph.input[i].type
            )
        for i in range(len(glob.glob(os.path.join(folder, "output_*.pb")))):
            runner._load_proto(
                os.path.join(folder, f"output_{i}.pb"), expected, model.graph.output[i].type
            )
        sets.append(([np.asarray(x) if not isinstance(x, list) else x for x in inputs], expected))
    return model, sets


def run_case(case) -> None:
    import numpy as np

    from ember.onnx import backend

    from .conformance import assert_similar

    model, sets = data_sets(case)
    rep = backend.prepare(model, "CPU")
    for inputs, expected in sets:
        with np.errstate(all="ignore"):
            outputs = rep.run(inputs)
        assert_similar(expected, outputs, case.rtol, case.atol)


def main(argv: list[str]) -> int:
    cases = collect()
    names = [n for n in sorted(cases) if not argv or any(a in n for a in argv)]
    failed = {}
    start = time.time()
    for name in names:
        try:
            run_case(cases[name])
        except Exception as err:  # noqa: BLE001 - a report of every failure
            last = traceback.extract_tb(err.__traceback__)[-1]
            failed[name] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]} [{last.name}]"
    for name, why in failed.items():
        print(f"FAIL {name}: {why}")
    took = time.time() - start
    passed = len(names) - len(failed)
    print(f"\n{passed} passed, {len(failed)} failed of {len(names)} ({took:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
