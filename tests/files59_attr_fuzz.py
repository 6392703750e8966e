"""Every registered op's attributes, mutated in a graph file (files59).

`seed_graphs` traces the conformance samples (tests/ops/samples_*.py), one graph per op that
has attributes, and `run` writes each graph again with one attribute of one of that op's nodes
replaced by a hostile value (an empty, nested or huge tuple, a negative or huge number, a bool
where a number goes, NaN, text, None), with fresh checksums. Each file is loaded: a refusal must
be a `GraphFileError` naming the file; what loads is run by the interpreter and by generated
code (whose kernels take the C fast paths), which return or raise an `EmberError`. Anything else
is recorded as an escape. Run as a script (``python -m tests.files59_attr_fuzz OUT SEED
PER_ATTRIBUTE OPT_LEVEL [ops...]``; ``EMBER_FUZZ_EXECUTORS``: which of `EXECUTORS` and "types"
run, ``EMBER_FUZZ_TRACE``: each case printed before it runs) so a crash (a C kernel writing
past its output) shows as the process's death rather than the test runner's; the report is
written to OUT as JSON.
"""

from __future__ import annotations

import copy
import json
import os
import random
import sys
import tempfile
import traceback
import warnings

import numpy as np

HOSTILE = [
    (),
    ((),),
    ((1, 2), (3,)),
    (((1,),),),
    (-1,),
    (0,),
    (2**40, 2**40),
    tuple(range(70)),
    -1,
    -(2**63),
    2**63 - 1,
    2**31,
    0,
    True,
    False,
    float("nan"),
    float("inf"),
    -0.5,
    1e308,
    None,
    "",
    "x",
]


EXECUTORS = ("interpreter", "codegen", "c")


def tagged(value) -> dict:
    """``value`` as the graph file's ``{"t": tag, "v": payload}`` record."""
    if isinstance(value, bool):
        return {"t": "bool", "v": value}
    if isinstance(value, int):
        return {"t": "int", "v": value}
    if isinstance(value, float):
        return {"t": "float", "v": value if np.isfinite(value) else str(value)}
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if value is None:
        return {"t": "none", "v": None}
    return {"t": "tuple", "v": [tagged(v) for v in value]}


def seed_graphs(ops=None, opt_level: int = 0):
    """``{op name: (graph file path, inputs)}``: for each op with attributes (of ``ops``, when
    given), the graph of the first conformance sample whose trace calls it, saved."""
    import ember
    from tests.ops.test_conformance import SAMPLES

    folder = tempfile.mkdtemp(prefix="files59_seeds_")
    found: dict = {}
    for sample in SAMPLES:
        inputs = [ember.tensor(x) if hasattr(x, "shape") else x for x in sample.inputs]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                graph = ember.trace(
                    lambda *a, s=sample: s.fn(*a, **s.kwargs), *inputs, opt_level=opt_level
                ).graph
        except Exception:  # (a sample the tracer does not take: another sample covers its op)
            continue
        new = {
            n.op.name
            for n in graph.nodes
            if n.kind == "call" and n.attrs and n.op.name not in found
            and (ops is None or n.op.name in ops)
        }  # fmt: skip
        if not new:
            continue
        path = os.path.join(folder, f"{len(found)}.graph")
        try:
            graph.save(path)
        except Exception:  # (an attribute no file holds: a recorded backward)
            continue
        arrays = [x.numpy() if hasattr(x, "numpy") else x for x in inputs]
        for name in new:
            found[name] = (path, arrays)
        if ops is not None and set(ops) <= set(found):
            break
    return found


def mutations(path: str, op: str, rng: random.Random, per_attribute: int):
    """(attribute key, hostile value, mutated structure) for ``op``'s nodes in the file."""
    from ember.io.checkpoint import read_safetensors

    metadata, arrays = read_safetensors(path, lambda m, p: None)
    structure = json.loads(metadata["graph"])
    for n, node in enumerate(structure["nodes"]):
        if node.get("op") != op:
            continue
        for a, (key, _) in enumerate(node["attrs"]):
            if isinstance(node["attrs"][a][1], dict) and node["attrs"][a][1].get("t") == "graph":
                continue  # (subgraphs: the loader's own fuzzers)
            for value in rng.sample(HOSTILE, min(per_attribute, len(HOSTILE))):
                mutated = copy.deepcopy(structure)
                mutated["nodes"][n]["attrs"][a][1] = tagged(value)
                yield key, value, metadata, arrays, mutated
        return  # (the op's first node)


def _checked_types(graph):
    """A runner of the interpreter that also checks each call's results against the types the
    node's shape rule gave: a rule that admits an attribute its kernel reads otherwise lets the
    C runner size a buffer one way and a loop another."""
    from ember.graph import interpreter

    def run(*arrays):
        values = interpreter.all_values(graph, list(arrays))
        for node in graph.nodes:
            for v in node.outputs if node.kind == "call" else ():
                got, want = np.shape(values[v.name]), tuple(v.type.shape)
                if all(isinstance(d, int) for d in want) and got != want:
                    raise AssertionError(f"%{v.name} ({node.op.name}): {got}, typed {want}")

    return run


def _runner(graph, executor: str):
    """The graph's runner: an executor's, or the C graph runner's (None where it has none)."""
    from ember.runtime import cgraph
    from ember.runtime.executors import get_executor

    if executor == "types":
        return _checked_types(graph)
    if executor != "c":
        return get_executor(executor).prepare(graph)
    steps = cgraph.c_steps(graph)
    return None if steps is None else cgraph.CGraphProgram(graph, steps)


def run(ops, seed: int, per_attribute: int, opt_level: int = 0, executors=EXECUTORS) -> dict:
    """The outcomes of every mutation of ``ops``' attributes: counts and the escapes."""
    import ember  # noqa: F401
    from ember.errors import EmberError
    from ember.graph import GraphFileError, load_graph
    from ember.io.checkpoint import write_safetensors

    rng = random.Random(seed)
    report = {"refused": 0, "loaded": 0, "ran": 0, "failed": 0, "escapes": [], "ops": []}
    folder = tempfile.mkdtemp(prefix="files59_mutants_")
    target = os.path.join(folder, "mutant.graph")
    seeds = seed_graphs(ops, opt_level)
    for op in sorted(seeds):
        path, inputs = seeds[op]
        report["ops"].append(op)
        for key, value, metadata, arrays, mutated in mutations(path, op, rng, per_attribute):
            where = f"{op}.{key}={value!r}"[:160]
            write_safetensors(target, arrays, dict(metadata, graph=json.dumps(mutated)))
            try:
                graph = load_graph(target)
            except GraphFileError as exc:
                report["refused"] += 1
                if "mutant.graph" not in str(exc):
                    report["escapes"].append(f"{where}: refusal names no file: {exc}")
                continue
            except Exception:
                report["escapes"].append(f"{where}: load: {traceback.format_exc(limit=-3)}")
                continue
            report["loaded"] += 1
            for executor in executors:
                if os.environ.get("EMBER_FUZZ_TRACE"):  # (which case a crash was in)
                    print(where, executor, file=sys.stderr, flush=True)
                try:
                    with warnings.catch_warnings(), np.errstate(all="ignore"):
                        warnings.simplefilter("ignore")
                        runner = _runner(graph, executor)
                        if runner is not None:
                            runner(*inputs)
                            report["ran"] += 1
                except EmberError:
                    report["failed"] += 1
                except Exception:
                    tb = traceback.format_exc(limit=-3)
                    report["escapes"].append(f"{where}: {executor}: {tb}")
    return report


if __name__ == "__main__":
    out, seed, per_attribute, opt_level, *names = sys.argv[1:]
    executors = tuple(os.environ.get("EMBER_FUZZ_EXECUTORS", ",".join(EXECUTORS)).split(","))
    result = run(names or None, int(seed), int(per_attribute), int(opt_level), executors)
    with open(out, "w") as f:
        json.dump(result, f)
