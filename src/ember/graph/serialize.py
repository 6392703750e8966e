"""The ember graph file: `save_graph(graph, path)` here, `load_graph(path)` in graph/load.py;
lossless and pickle-free.

A graph file is a standard safetensors file (written atomically, with a checksum of its header
and a CRC-32 per tensor, by the file layer shared with checkpoints, `ember.io.checkpoint`). Its
tensors are the graph's constants, named by their values; its ``__metadata__`` holds

* ``ember_graph``: the format version ("1");
* ``graph``: the structure as JSON: the graph name, the nodes in order (kind, op name, input
  value names, attributes, output value names and types), the graph inputs and outputs by
  value name, and the states of the random generators the nodes hold.

Attributes are stored as ``{"t": tag, "v": payload}`` with an explicit tag for every value
(``none bool int float complex str tuple list dtype sym generator npscalar graph op program``),
so tuples stay tuples, DTypes and SymDims come back as themselves, and non-finite floats survive
(a complex number, or a complex NumPy scalar's value, as its two parts). A complex64/complex128
constant is stored as its real and imaginary parts along a last axis of 2 (float32/float64:
safetensors has no complex dtype); the node's type says so, and loading checks the stored
tensor against it.
An op (an epilogue's producer) is stored by name and a fused program (ops/program.py) as its
instructions, ``{"op": name, "args": [...], "attrs": [[key, record], ...]}`` with each operand
``["in", i]``, ``["t", j]`` or ``["k", value, dtype name]``; both come back through the
registry, and an unknown op or a malformed instruction fails naming the attribute. Generators
are kept in one table and referenced by index, so nodes sharing a generator still share one
after loading; each comes back in the state it had when saved. ``ember.default_generator`` is stored
as a reference and loads as the loading process's default generator (its state is not
overwritten by loading a file). A graph-valued attribute (a cond branch, a loop body) is stored
nested, as the same structure; its constants are tensors named ``<node>.<attribute>/<value>``.

Loading rebuilds the graph through the Graph API (``add_input`` / ``add_constant`` /
``add_call`` with the stored output types), restores every value name exactly (so
``str(load_graph(p)) == str(graph)``) and verifies the result. Any malformed, truncated,
corrupt or foreign file, unknown op, bad attribute tag or dangling reference raises
`GraphFileError` naming the path and the problem.
"""

from __future__ import annotations

import json
import math
import os
from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes as dt
from .. import random as _random
from ..ops._registry import OpDef
from ..ops.program import Const, Input, Instr, Program
from ..symbolic import SymDim
from ..types import TensorType
from ._base import GraphBase, GraphError

if TYPE_CHECKING:
    from .ir import Graph

__all__ = ["FORMAT_KEY", "FORMAT_VERSION", "GraphFileError", "save_graph"]

FORMAT_KEY, FORMAT_VERSION = "ember_graph", "1"
_NODE_KINDS = ("input", "constant", "call")


class GraphFileError(GraphError):
    """A graph file that cannot be written, or is missing, malformed, corrupt or not ember's."""


# ------------------------------------------------------------------------------------ saving
def save_graph(graph: Graph, path: str | os.PathLike) -> None:
    """Write ``graph`` to ``path`` (atomically; the graph is verified first)."""
    from ..errors import CheckpointError
    from ..io.checkpoint import write_safetensors

    path = os.fspath(path)
    graph.verify()
    generators: list = []
    arrays: dict = {}
    structure = _encode_graph(graph, generators, arrays, "", path)
    structure["generators"] = [
        {"default": g is _random.default_generator, "state": g.json_state()} for g in generators
    ]
    metadata = {
        FORMAT_KEY: FORMAT_VERSION,
        "graph": json.dumps(structure, allow_nan=False, separators=(",", ":")),
    }
    try:
        write_safetensors(path, arrays, metadata)
    except CheckpointError as exc:
        raise GraphFileError(exc.detail, op="save_graph") from exc


def _encode_graph(graph: Graph, generators: list, arrays: dict, prefix: str, path: str) -> dict:
    """The JSON structure of ``graph``; its constants go into ``arrays`` under ``prefix`` +
    their value names (a subgraph's prefix is its node's value name, attribute and a slash,
    which no value name contains, so names never clash)."""
    for n in graph.nodes:
        if n.kind == "constant":
            arrays[prefix + n.name] = stored_constant(np.asarray(graph.constants[n.name]))
    return {
        "name": graph.name,
        "nodes": [_encode_node(n, generators, arrays, prefix, path) for n in graph.nodes],
        "inputs": [v.name for v in graph.inputs],
        "outputs": [v.name for v in graph.outputs],
    }


def _encode_node(node, generators: list, arrays: dict, prefix: str, path: str) -> dict:
    record = {"kind": node.kind}
    if node.kind == "call":
        record["op"] = node.op.name
    record["inputs"] = [v.name for v in node.inputs]
    where = f"{path}: node %{node.name} ({node.target})"
    record["attrs"] = []
    for k, v in node.attrs.items():
        if isinstance(v, GraphBase):  # a cond branch, a loop body: nested, with its constants
            sub = _encode_graph(v, generators, arrays, f"{prefix}{node.name}.{k}/", path)
            record["attrs"].append([k, {"t": "graph", "v": sub}])
        else:
            record["attrs"].append([k, _encode_attr(v, generators, f"{where} attribute {k!r}")])
    record["outputs"] = [{"name": v.name, "type": _encode_type(v.type)} for v in node.outputs]
    if node.scope is not None:
        record["scope"] = node.scope
    return record


def stored_constant(array: np.ndarray) -> np.ndarray:
    """A constant as the file holds it: a complex one (safetensors has no complex dtype) as its
    real and imaginary parts along a last axis of 2, the node's type saying it is complex."""
    if array.dtype.kind != "c":
        return array
    array = array if array.flags.c_contiguous else array.copy(order="C")  # (keeps a 0-d shape)
    return array.reshape(-1).view(array.real.dtype).reshape(*array.shape, 2)


def _encode_type(t: TensorType) -> dict:
    shape = [{"sym": d.to_json()} if isinstance(d, SymDim) else int(d) for d in t.shape]
    return {"shape": shape, "dtype": t.dtype.name}


def _encode_float(x: float):
    return x if math.isfinite(x) else repr(x)  # "inf", "-inf", "nan": JSON has no such numbers


def _encode_attr(value, generators: list, where: str) -> dict:
    if value is None:
        return {"t": "none", "v": None}
    if isinstance(value, bool):
        return {"t": "bool", "v": value}
    if isinstance(value, int):
        return {"t": "int", "v": value}
    if isinstance(value, float):
        return {"t": "float", "v": _encode_float(value)}
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if isinstance(value, OpDef):
        return {"t": "op", "v": value.name}
    if isinstance(value, Program):
        return {"t": "program", "v": [_encode_instr(i, generators, where) for i in value]}
    if isinstance(value, (tuple, list)):
        items = [_encode_attr(v, generators, where) for v in value]
        return {"t": "tuple" if isinstance(value, tuple) else "list", "v": items}
    if isinstance(value, dt.DType):
        return {"t": "dtype", "v": value.name}
    if isinstance(value, SymDim):
        return {"t": "sym", "v": value.to_json()}
    if isinstance(value, _random.Generator):
        for i, g in enumerate(generators):
            if g is value:
                return {"t": "generator", "v": i}
        generators.append(value)
        return {"t": "generator", "v": len(generators) - 1}
    if isinstance(value, complex):
        return {"t": "complex", "v": [_encode_float(value.real), _encode_float(value.imag)]}
    if isinstance(value, np.complexfloating):
        parts = [_encode_float(float(value.real)), _encode_float(float(value.imag))]
        return {"t": "npscalar", "v": [value.dtype.name, parts]}
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        item = value.item()
        item = _encode_float(item) if isinstance(item, float) else item
        return {"t": "npscalar", "v": [value.dtype.name, item]}
    raise GraphFileError(
        f"{where}: cannot store a value of type {type(value).__name__} ({value!r}); graph "
        "attributes must be None, bool, int, float, complex, str, tuples/lists of those, DTypes, "
        "SymDims or Generators",
        op="save_graph",
    )


def _encode_instr(instr: Instr, generators: list, where: str) -> dict:
    args = []
    for ref in instr.operands:
        if isinstance(ref, Const):
            value = ref.value if isinstance(ref.value, bool) else _encode_float(float(ref.value))
            args.append(["k", value, ref.dtype.name])
        else:
            args.append(["in" if isinstance(ref, Input) else "t", ref.index])
    attrs = [[k, _encode_attr(v, generators, where)] for k, v in instr.attrs]
    return {"op": instr.op.name, "args": args, "attrs": attrs}
