"""A graph file whose shapes are consistent (every node's type is what its op's rule infers) but
absurd: a ``broadcast_to`` of one row to 2**34 rows loaded, and running it raised a raw
MemoryError out of the generated code (the interpreter wrapped it; allocated lazily it could
have had the process killed). `load_graph` now refuses any value of known size that would need
more than the machine's memory, naming the file, the value and its shape, before anything is
allocated (subgraphs' values too)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _file_limits
from ember.graph import GraphFileError, load_graph
from ember.runtime.executors import get_executor

from .io.fuzzing import join, split


def _saved(tmp_path, fn, *args, opt_level=0):
    path = tmp_path / "g.graph"
    ember.trace(fn, *args, opt_level=opt_level).graph.save(path)
    return path


def _resized(path, old: str, new: str):
    header, body = split(path.read_bytes())
    text = header["__metadata__"]["graph"]
    assert old in text
    metadata = dict(header["__metadata__"], graph=text.replace(old, new))
    out = path.with_name("resized.graph")
    out.write_bytes(join({**header, "__metadata__": metadata}, body, refresh=True))
    return out


def test_a_broadcast_to_an_absurd_size_is_refused_at_load(tmp_path):
    path = _saved(tmp_path, lambda x: x.expand(4, 3) * 2.0, ember.randn(1, 3))
    graph = load_graph(path)
    out = get_executor("codegen").prepare(graph)(np.ones((1, 3), np.float32))
    np.testing.assert_array_equal(out[0], np.full((4, 3), 2.0))
    rows = 2**34  # (graph files' JSON is compact: graph/serialize.py)
    resized = _resized(path, "[4,3]", f"[{rows},3]")
    resized = _resized(resized, '{"t":"int","v":4}', f'{{"t":"int","v":{rows}}}')
    with pytest.raises(GraphFileError, match=rf"resized\.graph: value %0 of shape \({rows}, 3\)"):
        load_graph(resized)


def test_the_bound_is_the_machines_memory(tmp_path, monkeypatch):
    def loop(x):
        return ember.while_loop(lambda v: v.sum() < 100.0, lambda v: v * 2.0, x)

    path = _saved(tmp_path, loop, ember.ones(64))
    assert load_graph(path) is not None
    # (64 float32 values: 256 bytes, more than a machine of 200 bytes holds)
    monkeypatch.setattr(_file_limits, "physical_memory", lambda: 200)
    with pytest.raises(GraphFileError, match=r"g\.graph: value %\w+ of shape \(64,\)"):
        load_graph(path)
