"""Typed attribute rules at load (files59, ops/_attr_rules.py): every op's attributes have a
rule (its own declaration or the registry's convention for the name), what the ops' public
functions make passes it, and a graph file's unusual attribute (an empty, nested or huge
tuple, a bool where a number goes, NaN, a negative size, an axis past the dimensions, a key the
op does not take) is refused at load with a `GraphFileError` naming the file, the node and the
field, before any shape rule or kernel sees it.

Escapes the mutation fuzz (tests/files59_attr_fuzz.py, every op with attributes) found: a
``pad_backward`` node whose ``in_shape`` did not fit its cotangent loaded (its shape rule
returned ``in_shape`` unchecked; the C adjoint reads the cotangent by ``in_shape`` and the
padding): its rule now checks the padding as the forward's and against the cotangent. A
``concat`` node's axis -1 corrupted the heap under the C graph runner (its copy step took the
axis unnormalized; the heap corruption first seen at a pad_backward case was this one's).
Without the rules, 3102 of 7062 mutations of the seed graphs loaded (one raw error escaped:
solve_triangular's ``unitriangular=-1`` reached SciPy); with them 808 do, each of which runs.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember.graph import GraphFileError, load_graph
from ember.io.checkpoint import read_safetensors, write_safetensors
from ember.ops import REGISTRY
from ember.ops._attr_rules import attr_rule, check_attrs, taken_keys
from ember.runtime.executors import get_executor

from . import files54_fuzzing as fz
from .files59_attr_fuzz import tagged

_UNUSUAL = [(), ((),), ((1, 2), (3,)), True, float("nan"), 2**63 - 1, -(2**40), "x", None]


def test_every_op_says_which_attributes_it_takes_and_each_has_a_rule():
    """The registry walk: each op's attribute keys are known (its kernel's or shape rule's
    signature, or its own declaration where both take ``**attrs``), and each keyword
    attribute of its kernel has a rule."""
    unknown, ruleless = [], []
    for name, op in sorted(REGISTRY.items()):
        if taken_keys(op) is None:
            unknown.append(name)
        if isinstance(op.kernel, np.ufunc):
            continue
        for p in inspect.signature(op.kernel).parameters.values():
            if p.kind is p.KEYWORD_ONLY and attr_rule(op, p.name) is None:
                ruleless.append(f"{name}.{p.name}")
    assert not unknown, f"ops whose attribute keys no signature or declaration gives: {unknown}"
    assert not ruleless, f"attributes without a rule: {ruleless}"


def _traced(fn, *args, opt_level=0):
    return ember.trace(fn, *args, opt_level=opt_level).graph


def _programs():
    x = ember.tensor(np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32))
    i = ember.tensor(np.array([[0, 1, 2, 3, 0]] * 2))
    j = ember.tensor(np.array([0, 2, 2]))
    src = ember.ones(3, 5)
    return [
        (lambda x: x.scatter_add(0, i, x[:2]) + x.scatter(1, i.t()[:4, :2], x[:, :2]), [x]),
        (lambda x: x.index_add(0, j, src) + x.gather(1, i.t()[:4, :2]).sum(), [x]),
        (lambda x: x.cumsum(1) + x.cummax(0).values + ember.add(x, x, alpha=2), [x]),
        (lambda x: x.as_strided((2, 2), (1, 2), 1).sum() + ember.linspace(0, 1, 5), [x]),
    ]


def test_rules_pass_what_the_public_functions_make():
    """The programs' own attributes (traced, and after the passes, fused programs included)."""
    for fn, args in _programs():
        for level in (0, 3):
            graph = _traced(fn, *args, opt_level=level)
            for node in graph.nodes:
                if node.kind == "call":
                    ranks = [len(v.type.shape) for v in node.inputs]
                    assert check_attrs(node.op, node.attrs, ranks) is None, node


def _saved(fn, args, tmp_path):
    path = tmp_path / "seed.graph"
    _traced(fn, *args).save(path)
    metadata, arrays = read_safetensors(str(path), lambda m, p: None)
    return metadata, arrays, json.loads(metadata["graph"])


def test_unusual_attributes_of_scatter_gather_index_add_scans_are_refused_by_field(tmp_path):
    refused = 0
    for fn, args in _programs():
        metadata, arrays, structure = _saved(fn, args, tmp_path)
        for n, node in enumerate(structure["nodes"]):
            for a, (key, record) in enumerate(node.get("attrs", [])):
                if record.get("t") not in ("int", "tuple", "bool", "float"):
                    continue
                for value in _UNUSUAL:
                    mutated = copy.deepcopy(structure)
                    mutated["nodes"][n]["attrs"][a][1] = tagged(value)
                    path = tmp_path / "m.graph"
                    write_safetensors(str(path), arrays, dict(metadata, graph=json.dumps(mutated)))
                    try:
                        graph = load_graph(path)
                    except GraphFileError as exc:
                        assert "m.graph" in str(exc), exc
                        if "attribute" in str(exc) and "should" in str(exc):
                            refused += 1
                            assert f"{key!r}" in str(exc) and node["op"] in str(exc), exc
                        continue
                    # (what loads is a value the op's public function could make: it runs)
                    inputs = [a.numpy() for a in args]
                    for executor in ("interpreter", "codegen"):
                        try:
                            get_executor(executor).prepare(graph)(*inputs)
                        except ember.errors.EmberError:
                            pass
    assert refused > 100


@pytest.mark.parametrize("value", [(), ((),), True, 2**62, -3, float("nan")])
def test_a_scatter_axis_is_refused_naming_node_and_field(tmp_path, value):
    x = ember.randn(3, 4)
    index = ember.tensor(np.array([[0, 1, 2, 0]]))
    metadata, arrays, structure = _saved(lambda x: x.scatter_add(0, index, x[:1]), [x], tmp_path)
    n = next(k for k, r in enumerate(structure["nodes"]) if r.get("op") == "scatter_add")
    structure["nodes"][n]["attrs"][0][1] = tagged(value)
    path = tmp_path / "m.graph"
    write_safetensors(str(path), arrays, dict(metadata, graph=json.dumps(structure)))
    name = structure["nodes"][n]["outputs"][0]["name"]
    with pytest.raises(GraphFileError, match=f"m.graph.*%{name}.*scatter_add's attribute 'axis'"):
        load_graph(path)


def test_a_key_the_op_does_not_take_is_refused(tmp_path):
    metadata, arrays, structure = _saved(lambda x: x.cumsum(0), [ember.randn(3)], tmp_path)
    n = next(k for k, r in enumerate(structure["nodes"]) if r.get("op") == "cumsum")
    structure["nodes"][n]["attrs"].append(["eps", tagged(0.5)])
    path = tmp_path / "m.graph"
    write_safetensors(str(path), arrays, dict(metadata, graph=json.dumps(structure)))
    with pytest.raises(GraphFileError, match="attribute 'eps': is no attribute op cumsum takes"):
        load_graph(path)


def test_a_pad_backward_whose_shape_does_not_fit_its_cotangent_is_refused(tmp_path):
    x = ember.randn(2, 3, 4, requires_grad=True)

    def fn(x):
        y = ember.nn.functional.pad(x, (2, 1), mode="replicate")
        return ember.autograd.grad(y.sum() * 2, x, create_graph=True)[0]

    metadata, arrays, structure = _saved(fn, [x.detach()], tmp_path)
    found = [k for k, r in enumerate(structure["nodes"]) if r.get("op") == "pad_backward"]
    if not found:
        pytest.skip("the trace left no pad_backward node")
    node = structure["nodes"][found[0]]
    a = [key for key, _ in node["attrs"]].index("in_shape")
    node["attrs"][a][1] = tagged((2, 3, 5))  # (one more than the cotangent's 7 - 2 - 1)
    path = tmp_path / "m.graph"
    write_safetensors(str(path), arrays, dict(metadata, graph=json.dumps(structure)))
    with pytest.raises(GraphFileError, match="m.graph.*pad_backward.*cotangent"):
        load_graph(path)


# ops of the recent stops and those whose C kernels read attributes (gap list of files59)
_FUZZED = [
    "scatter_add", "scatter", "gather", "index_backward", "cumsum", "add_alpha",
    "linspace", "as_strided_view", "pad", "pad_backward", "quantize_per_tensor", "argsort",
    "quantized_linear", "sparse_mm", "sampled_dot", "softmax", "cumprod", "logcumsumexp",
]  # fmt: skip


def test_mutated_attributes_of_every_op_from_a_file_load_and_run_or_are_refused(tmp_path):
    """The registry fuzz (tests/files59_attr_fuzz.py) in a process of its own, so a kernel
    writing past its output shows as its death: a seeded slice of ops here (all of them with
    ``EMBER_FUZZ_CASES`` set, every hostile value of each attribute)."""
    everything = "EMBER_FUZZ_CASES" in os.environ
    ops = [] if everything else _FUZZED
    per_attribute = 22 if everything else 6
    out = tmp_path / "report.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.setdefault("EMBER_FUZZ_EXECUTORS", "interpreter,codegen")
    command = [sys.executable, "-m", "tests.files59_attr_fuzz", str(out), str(fz.seed(59))]
    done = subprocess.run(
        [*command, str(per_attribute), "0", *ops],
        env=env,
        cwd=os.path.dirname(os.path.dirname(__file__)),
        capture_output=True,
        text=True,
        timeout=3000 if everything else 600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert not report["escapes"], "\n".join(report["escapes"][:10])
    assert report["refused"] > 0 and report["loaded"] > 0
    if not everything:
        missing = set(_FUZZED) - set(report["ops"])
        assert not missing, f"no seed graph calls {missing}"


def test_a_negative_concat_axis_from_a_file_runs_under_every_runner(tmp_path):
    """Found by the fuzz: a ``concat`` node's axis -1 (in range: the rules take it) reached the
    C graph runner's copy step, which took its inner extent from the whole output and wrote
    past it (heap corruption); the step now normalizes the axis (kernels/axes.py)."""
    from ember.runtime import cgraph

    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    path = tmp_path / "seed.graph"
    _traced(lambda x: ember.cat([x * 2, x + 1], 1), ember.tensor(x), opt_level=3).save(path)
    metadata, arrays = read_safetensors(str(path), lambda m, p: None)
    structure = json.loads(metadata["graph"])
    n = next(k for k, r in enumerate(structure["nodes"]) if r.get("op") == "concat")
    structure["nodes"][n]["attrs"][0][1] = tagged(-1)
    write_safetensors(str(path), arrays, dict(metadata, graph=json.dumps(structure)))
    graph = load_graph(path)
    runs = {name: get_executor(name).prepare(graph) for name in ("interpreter", "codegen")}
    steps = cgraph.c_steps(graph)
    if steps is not None:
        runs["c"] = cgraph.CGraphProgram(graph, steps)
    expected = np.concatenate([x * 2, x + 1], 1)
    for name, run in runs.items():
        (got,) = run(x)
        np.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("value", [True, 1j, "x", (1.0,)])
def test_an_add_alpha_that_is_no_real_number_is_refused(tmp_path, value):
    """Found by the fuzz under the C graph runner: ``alpha=True`` reached the fused loop's C
    template, a raw KeyError."""
    x = ember.randn(3)
    metadata, arrays, structure = _saved(lambda x: ember.add(x, x * 3, alpha=0.5), [x], tmp_path)
    n = next(k for k, r in enumerate(structure["nodes"]) if r.get("op") == "add_alpha")
    record = (
        tagged(value)
        if not isinstance(value, complex)
        else {"t": "npscalar", "v": ["complex64", 1.0]}
    )
    structure["nodes"][n]["attrs"][0][1] = record
    path = tmp_path / "m.graph"
    write_safetensors(str(path), arrays, dict(metadata, graph=json.dumps(structure)))
    with pytest.raises(GraphFileError, match="add_alpha's attribute 'alpha'|bad payload|NumPy"):
        load_graph(path)
