"""Graph files whose fused programs are valid-looking past the JSON checks but carry what no
ember writes: a constant of an integer dtype that is no integer of it (``inf``, ``nan``,
``0.5``, ``2**70`` as an int64 constant), which printing the program for an error turned into a
raw OverflowError out of ``load_graph``; or an instruction without an attribute its op's C
expression reads (``huber`` without ``delta``), which loaded (the reference kernel takes its
default) and then raised a KeyError out of code generation. Both are now refused by
`check_program` (ops/program.py) with a `GraphFileError` naming the file. Seeded mutations of
the programs' constants, dtypes and ops are loaded and run by the interpreter, generated code
and the C graph runner, which must agree or refuse with an `EmberError`.
"""

from __future__ import annotations

import copy
import json
import os
import random

import numpy as np
import pytest

import ember
from ember.errors import EmberError
from ember.graph import GraphFileError, load_graph
from ember.ops import REGISTRY
from ember.runtime import cgraph
from ember.runtime.executors import get_executor

from .io.fuzzing import join, split


def _fused(x, b):
    return ((x + b).relu() * 2.0 + 0.1).sum(axis=1), (x * b * 3.0).tanh() - 1.5


@pytest.fixture(scope="module")
def seed_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("g") / "fused.graph"
    ember.trace(_fused, ember.randn(4, 3), ember.randn(3), opt_level=3).graph.save(path)
    header, body = split(path.read_bytes())
    return header, body, json.loads(header["__metadata__"]["graph"])


def _write(path, seed_file, structure) -> str:
    header, body, _ = seed_file
    metadata = dict(header["__metadata__"], graph=json.dumps(structure))
    path.write_bytes(join({**header, "__metadata__": metadata}, body, refresh=True))
    return str(path)


def _constants(tree, found):
    if isinstance(tree, dict):
        for v in tree.values():
            _constants(v, found)
    elif isinstance(tree, list):
        if len(tree) == 3 and tree[0] == "k":
            found.append(tree)
        for v in tree:
            _constants(v, found)
    return found


def _instructions(tree, found):
    if isinstance(tree, dict):
        if set(tree) == {"op", "args", "attrs"}:
            found.append(tree)
        for v in tree.values():
            _instructions(v, found)
    elif isinstance(tree, list):
        for v in tree:
            _instructions(v, found)
    return found


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 0.5, 2.0**70, -(2.0**64)])
def test_an_integer_constant_that_is_no_integer_is_refused(tmp_path, seed_file, value):
    structure = copy.deepcopy(seed_file[2])
    constant = _constants(structure, [])[0]
    constant[1], constant[2] = value, "int64"
    with pytest.raises(GraphFileError, match=r"m\.graph.*bad operand.*int64"):
        load_graph(_write(tmp_path / "m.graph", seed_file, structure))
    constant[1] = 3.0  # a constant of int64, in a float32 program: refused by mul's rule, printed
    with pytest.raises(GraphFileError, match=r"mul\(t1, 3\).*share one dtype"):
        load_graph(_write(tmp_path / "ok.graph", seed_file, structure))


def test_an_instruction_without_the_attribute_its_c_reads_is_refused(tmp_path, seed_file):
    structure = copy.deepcopy(seed_file[2])
    relu = next(i for i in _instructions(structure, []) if i["op"] == "relu")
    relu["op"] = "huber"  # (its C expression reads {delta})
    with pytest.raises(GraphFileError, match=r"huber.*delta"):
        load_graph(_write(tmp_path / "m.graph", seed_file, structure))
    relu["attrs"] = [["delta", {"t": "float", "v": 0.5}]]
    assert load_graph(_write(tmp_path / "ok.graph", seed_file, structure)) is not None


VALUES = [float("nan"), float("inf"), float("-inf"), 1e308, -0.0, 5e-324, 3.4e38, 1e39, 7.0]
DTYPES = ["float64", "int64", "bool", "int8", "uint8", "float16", "bfloat16", "int32"]


def _run_everywhere(graph, arrays) -> dict:
    outcomes = {}
    for name in ("interpreter", "codegen", "c"):
        try:
            if name == "c":
                steps = cgraph.c_steps(graph)
                if steps is None:
                    continue
                program = cgraph.CGraphProgram(graph, steps)
            else:
                program = get_executor(name).prepare(graph)
            outcomes[name] = [np.asarray(o, np.float64) for o in program(*arrays)]
        except EmberError as exc:
            outcomes[name] = type(exc).__name__
    return outcomes


def test_seeded_program_mutations_load_and_run_alike_or_are_refused(tmp_path, seed_file):
    rng = random.Random(int(os.environ.get("EMBER_FUZZ_SEED", "56")))
    cases = int(os.environ.get("EMBER_FUZZ_CASES", "60"))
    elementwise = sorted(n for n, op in REGISTRY.items() if op.c is not None)
    arrays = [np.random.default_rng(0).standard_normal(s).astype(np.float32) for s in [(4, 3), 3]]
    ran = 0
    for case in range(cases):
        structure = copy.deepcopy(seed_file[2])
        for _ in range(rng.choice([1, 2, 3])):
            choice = rng.random()
            if choice < 0.5:
                rng.choice(_constants(structure, []))[1] = rng.choice(VALUES)
            elif choice < 0.75:
                rng.choice(_constants(structure, []))[2] = rng.choice(DTYPES)
            else:
                rng.choice(_instructions(structure, []))["op"] = rng.choice(elementwise)
        path = _write(tmp_path / "m.graph", seed_file, structure)
        try:
            graph = load_graph(path)
        except GraphFileError:
            continue
        ran += 1
        outcomes = _run_everywhere(graph, arrays)
        reference = outcomes.pop("interpreter")
        for name, got in outcomes.items():
            if isinstance(reference, list) and isinstance(got, list):
                for a, b in zip(reference, got, strict=True):
                    np.testing.assert_allclose(
                        b, a, rtol=1e-3, atol=1e-3, err_msg=f"case {case}: {name}"
                    )
    assert ran > cases // 10
