"""Reading the ember graph file (graph/serialize.py describes the format and writes it):
`load_graph(path)` rebuilds the graph through the Graph API, checking every field, and
verifies it; anything malformed raises `GraphFileError` naming the path and the problem.

A file is hostile until checked. Names are held to what the Graph API itself makes, since they
reach generated code, drawings and HTML: value names are letters, digits and underscores (what
`Graph._fresh` makes of any hint), symbol names and attribute keys are Python identifiers, and
graph names and scopes are printable text; sizes are whole numbers below 2**63, and attribute
values nest at most `MAX_DEPTH` deep. (Code generation does not rely on this: it spells every
name it writes safely itself, runtime/codegen.py.)
"""

from __future__ import annotations

import json
import keyword
import math
import os

import numpy as np

from .. import dtypes as dt
from .. import random as _random
from .._file_limits import check_allocation
from ..errors import ShapeError
from ..ops._attr_rules import check_attrs
from ..ops._registry import REGISTRY, OpDef
from ..ops.program import Const, Input, Instr, Program, Temp
from ..symbolic import SymDim
from ..types import TensorType
from ._base import GraphError
from .ir import Graph, Value
from .serialize import _NODE_KINDS, FORMAT_KEY, FORMAT_VERSION, GraphFileError

__all__ = ["MAX_DEPTH", "load_graph"]

MAX_DEPTH = 32  # nesting of attribute values (tuples of tuples) and of subgraphs
_MAX_SIZE = 2**63  # dimensions, coefficients: what an int64 holds
_MAX_POWER = 64  # of a symbol in a symbolic size


def load_graph(path: str | os.PathLike, *, runnable: bool = True) -> Graph:
    """Read a graph written by `save_graph` (or `Graph.save`) and verify it. ``runnable``: also
    refuse a graph with a value (of known size) past this machine's memory, which running it
    would allocate; False for tools that only read it (``ember inspect``, ``ember viz``: they
    count such sizes exactly, never allocate them)."""
    from ..errors import CheckpointError
    from ..io.checkpoint import read_safetensors

    path = os.fspath(path)
    try:
        metadata, arrays = read_safetensors(path, _check_metadata)
    except CheckpointError as exc:
        raise GraphFileError(f"cannot load a graph: {exc.detail}", op="load_graph") from exc
    try:
        structure = json.loads(metadata.get("graph", ""))
    except (ValueError, RecursionError) as exc:  # (ValueError: an int of too many digits)
        raise _bad(path, f"its graph metadata is not valid JSON ({exc})") from exc
    try:
        graph = _Loader(path, arrays).build(structure)
    except RecursionError as exc:  # a structure nested deeper than the checks reach
        raise _bad(path, "its structure is nested too deeply") from exc
    if runnable:
        _check_sizes(graph, path)
    return graph


def _check_sizes(graph: Graph, path: str) -> None:
    """Refuse a graph any of whose values (of known size) would need more than this machine's
    memory: its shapes come from the file, and running it would allocate them (a broadcast to
    2**34 rows loaded, then raised a raw MemoryError from generated code, or worse, allocated
    lazily until the system killed the process)."""
    for node in graph.nodes:
        for value in node.outputs:
            shape = value.type.shape
            if all(isinstance(d, int) for d in shape):
                nbytes = math.prod(shape) * value.type.dtype.itemsize
                what = f"{path}: value %{value.name} of shape {tuple(shape)}"
                check_allocation(nbytes, what, GraphFileError, "load_graph")
        for attr in node.attrs.values():
            if isinstance(attr, Graph):  # (a cond's branches, a loop's body)
                _check_sizes(attr, path)


def _check_metadata(metadata, path: str) -> None:
    from ..errors import CheckpointError

    if not isinstance(metadata, dict) or FORMAT_KEY not in metadata:
        checkpoint = isinstance(metadata, dict) and "ember_checkpoint" in metadata
        what = "an ember checkpoint" if checkpoint else "a plain safetensors file"
        raise CheckpointError(
            f"{path} is {what}, not an ember graph file (its metadata has no {FORMAT_KEY!r} entry)",
            op="load_graph",
        )
    if metadata[FORMAT_KEY] != FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has graph format version {metadata[FORMAT_KEY]!r}; this ember reads "
            f"version {FORMAT_VERSION}",
            op="load_graph",
        )


def _bad(path: str, message: str) -> GraphFileError:
    return GraphFileError(f"{path}: malformed graph file: {message}", op="load_graph")


def _short(value, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages about hostile values."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int of too many digits, a deep structure
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_value_name(name) -> bool:
    """What `Graph._fresh` can make: letters, digits and underscores, at least one."""
    return isinstance(name, str) and bool(name) and all(c.isalnum() or c == "_" for c in name)


def _is_identifier(name) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def _is_text(name) -> bool:
    return isinstance(name, str) and name.isprintable()


class _Loader:
    """Rebuilds one graph from its JSON structure, checking every field as it goes."""

    def __init__(self, path: str, arrays: dict, prefix: str = ""):
        self.path = path
        self.arrays = arrays  # shared with the loaders of subgraphs, which take theirs
        self.prefix = prefix  # of this graph's constants' names in the file (see _encode_graph)
        self.graph: Graph | None = None
        self.values: dict[str, Value] = {}
        self.generators: list = []

    def fail(self, message: str) -> GraphFileError:
        return _bad(self.path, message)

    def field(self, record, key: str, kind, where: str):
        if not isinstance(record, dict) or key not in record:
            raise self.fail(f"{where} has no {key!r} entry")
        value = record[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.fail(f"{where}: {key!r} should be a {kind.__name__}, got {_short(value)}")
        return value

    def name(self, record, key: str, check, what: str, where: str) -> str:
        """The string ``record[key]``, which ``check`` must accept (``what`` says what)."""
        value = self.field(record, key, str, where)
        if not check(value):
            raise self.fail(f"{where}: {key!r} should be {what}, got {_short(value)}")
        return value

    def build(self, structure) -> Graph:
        if not isinstance(structure, dict):
            raise self.fail("the graph metadata is not a JSON object")
        records = self.field(structure, "generators", list, "the graph")
        self.generators = [self.generator(g, i) for i, g in enumerate(records)]
        self.structure(structure)
        if self.arrays:
            raise self.fail(f"tensors {sorted(self.arrays)} belong to no constant node")
        try:
            graph = self.graph.verify()
        except GraphError as exc:
            raise self.fail(f"the stored graph does not verify: {exc.detail}") from exc
        return graph

    def subgraph(self, structure, prefix: str, where: str) -> Graph:
        """A graph held in an attribute; verified with its node's graph."""
        if not isinstance(structure, dict):
            raise self.fail(f"{where}: a subgraph should be a JSON object")
        if prefix.count("/") > MAX_DEPTH:
            raise self.fail(f"{where}: subgraphs nest more than {MAX_DEPTH} deep")
        loader = _Loader(self.path, self.arrays, prefix)
        loader.generators = self.generators
        return loader.structure(structure)

    def structure(self, structure) -> Graph:
        """Build the nodes, inputs and outputs of one graph (no verification)."""
        self.graph = Graph(self.name(structure, "name", _is_text, "printable text", "the graph"))
        for position, record in enumerate(self.field(structure, "nodes", list, "the graph")):
            self.node(record, f"node {position}")
        names = self.field(structure, "inputs", list, "the graph")
        inputs = [self.ref(n, "graph input") for n in names]
        for v in inputs:
            if v.node.kind != "input":
                raise self.fail(f"graph input %{v.name} is not an input node")
        if len({id(v) for v in inputs}) != len(inputs):
            raise self.fail("the graph's inputs name a value twice")
        unlisted = [n.name for n in self.graph.nodes if n.kind == "input"]
        unlisted = [name for name in unlisted if name not in names]
        if unlisted:  # (generated code would read a value no argument gives)
            raise self.fail(f"input node %{unlisted[0]} is not among the graph's inputs")
        self.graph.inputs = inputs
        outputs = self.field(structure, "outputs", list, "the graph")
        self.graph.set_outputs([self.ref(n, "graph output") for n in outputs])
        return self.graph

    def generator(self, record, index: int):
        where = f"generator {index}"
        if self.field(record, "default", bool, where):
            return _random.default_generator
        try:
            return _random.Generator().set_state(self.field(record, "state", dict, where))
        except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as exc:
            raise self.fail(f"{where} has an invalid state ({type(exc).__name__}: {exc})") from exc

    def ref(self, name, where: str) -> Value:
        if not isinstance(name, str) or name not in self.values:
            shown = name if is_value_name(name) and len(name) <= 80 else _short(name)
            raise self.fail(f"{where} refers to %{shown}, which no earlier node defines")
        return self.values[name]

    def attr_entry(self, item, where: str) -> None:
        """``[key, record]`` with ``key`` an identifier (it becomes a keyword argument)."""
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            raise self.fail(f"{where} has a malformed attribute entry {_short(item)}")
        if not _is_identifier(item[0]):
            raise self.fail(f"{where}: attribute key {_short(item[0])} is not an identifier")

    def node(self, record, where: str) -> None:
        kind = self.field(record, "kind", str, where)
        if kind not in _NODE_KINDS:
            raise self.fail(f"{where} has unknown kind {kind!r}")
        outputs = self.field(record, "outputs", list, where)
        plain = "letters, digits and underscores"
        names = [self.name(o, "name", is_value_name, plain, f"{where} output") for o in outputs]
        types = [self.type(self.field(o, "type", dict, f"{where} output"), where) for o in outputs]
        where = f"{where} (%{names[0] if names else '?'})"
        inputs = [self.ref(n, f"{where} input") for n in self.field(record, "inputs", list, where)]
        attrs = {}
        for item in self.field(record, "attrs", list, where):
            self.attr_entry(item, where)
            if item[0] in attrs:
                raise self.fail(f"{where}: attribute {item[0]!r} is given twice")
            if isinstance(item[1], dict) and item[1].get("t") == "graph" and names:
                prefix = f"{self.prefix}{names[0]}.{item[0]}/"
                attrs[item[0]] = self.subgraph(item[1].get("v"), prefix, where)
                continue
            attrs[item[0]] = self.attr(item[1], f"{where} attribute {item[0]!r}")
        if kind != "call" and (len(outputs) != 1 or inputs or attrs):
            raise self.fail(f"{where}: a {kind} node has one output, no inputs and no attributes")
        g = self.graph
        if kind == "input":
            node = g.add_input(types[0], names[0]).node
        elif kind == "constant":
            array = self.arrays.pop(self.prefix + names[0], None)
            if array is None:
                raise self.fail(f"{where}: the file holds no tensor for this constant")
            array = self.constant_array(array, types[0], where)
            node = g.add_constant(array, names[0]).node
        else:
            op_name = self.field(record, "op", str, where)
            op = REGISTRY.get(op_name)
            if op is None:
                raise self.fail(
                    f"{where} calls the unknown op {op_name!r} (not in this ember's registry; "
                    "was the file written by a newer ember or with a custom op not imported?)"
                )
            self.check_attrs(op, attrs, [len(v.type.shape) for v in inputs], where)
            try:
                node = g.add_call(op, inputs, attrs, out_types=types, names=names)
            except GraphError as exc:
                raise self.fail(f"{where}: {exc.detail}") from exc
        scope = record.get("scope")
        if scope is not None:
            if not _is_text(scope):
                raise self.fail(f"{where}: the scope must be printable text, got {_short(scope)}")
            node.scope = scope
        for value, name in zip(node.outputs, names):
            self.rename(value, name, where)

    def rename(self, value: Value, name: str, where: str) -> None:
        """Give ``value`` its stored name (the Graph API picks fresh ones)."""
        if name in self.values:
            raise self.fail(f"{where}: the value name %{name} is defined twice")
        g = self.graph
        if value.name != name:
            if name in g._taken:
                raise self.fail(f"{where}: the value name %{name} is already taken")
            g._taken.discard(value.name)
            g._taken.add(name)
            if value.node.kind == "constant":
                g.constants[name] = g.constants.pop(value.name)
            value.name = name
        self.values[name] = value

    def constant_array(self, array: np.ndarray, t: TensorType, where: str) -> np.ndarray:
        """The stored tensor of a constant of type ``t``, checked against it: a complex one is
        stored as float parts along a last axis of 2 (graph/serialize.py `stored_constant`)."""
        dtype, shape = t.dtype, t.shape
        if dtype.is_complex:
            shape = (*shape, 2)
        stored = dt.to_real(dtype) if dtype.is_complex else dtype
        if array.shape != tuple(shape) or dt.from_numpy_dtype(array.dtype) != stored:
            raise self.fail(f"{where}: the stored tensor does not match the constant's type")
        if dtype.is_complex:  # (a fresh array: the parts' file buffer is read-only)
            array = array.copy(order="C").reshape(-1).view(dtype.np).reshape(t.shape)
        return array

    def type(self, record: dict, where: str) -> TensorType:
        shape = []
        for d in self.field(record, "shape", list, f"{where} type"):
            if isinstance(d, dict) and set(d) == {"sym"}:
                shape.append(self.symdim(d["sym"], where))
            elif _is_int(d) and 0 <= d < _MAX_SIZE:
                shape.append(d)
            else:
                raise self.fail(f"{where}: bad dimension {_short(d)} in a type")
        return TensorType(tuple(shape), self.dtype(record.get("dtype"), where))

    def dtype(self, name, where: str) -> dt.DType:
        if not isinstance(name, str) or name not in _DTYPE_NAMES:
            raise self.fail(f"{where}: unknown dtype {_short(name)}")
        return dt.as_dtype(name)

    def symdim(self, record, where: str):
        """``{"coefficient": k, "factors": [[name, power], ...]}``: k and the powers whole
        numbers from 1, the names distinct identifiers; or ``{"terms": ...}``, any other
        expression (symbolic.py's `SymDim.to_json`, which checks it as it reads it)."""

        def bad(problem: str) -> GraphFileError:
            return self.fail(f"{where}: bad symbolic dimension {_short(record)}: {problem}")

        if isinstance(record, dict) and set(record) == {"terms"}:  # any other expression
            try:
                made = SymDim.from_json(record)
            except (ValueError, ShapeError) as error:  # (from_json checks every field)
                raise bad(str(error)) from None
            names = made.symbols() if isinstance(made, SymDim) else set()
            if not all(_is_identifier(n) for n in names):
                raise bad("a symbol name is not an identifier")
            return made
        if not (isinstance(record, dict) and set(record) == {"coefficient", "factors"}):
            raise bad("expected an object with 'coefficient' and 'factors', or 'terms'")
        coefficient, factors = record["coefficient"], record["factors"]
        if not (_is_int(coefficient) and 1 <= coefficient < _MAX_SIZE):
            raise bad("the coefficient should be a whole number from 1 below 2**63")
        if not (isinstance(factors, list) and 1 <= len(factors) <= 16):
            raise bad("the factors should be a list of 1 to 16 [name, power] pairs")
        powers: dict = {}
        for factor in factors:
            if not (isinstance(factor, list) and len(factor) == 2):
                raise bad(f"factor {_short(factor)} is not a [name, power] pair")
            name, power = factor
            if not _is_identifier(name):
                raise bad(f"the symbol name {_short(name)} is not an identifier")
            if not (_is_int(power) and 1 <= power <= _MAX_POWER):
                raise bad(f"the power of {name} should be a whole number from 1 to {_MAX_POWER}")
            if name in powers:
                raise bad(f"the symbol {name} appears twice")
            powers[name] = power
        return SymDim.from_json(record)

    def op(self, name: str, where: str) -> OpDef:
        op = REGISTRY.get(name)
        if op is None:
            raise self.fail(
                f"{where} names the unknown op {name!r} (not in this ember's registry; was the "
                "file written by a newer ember or with a custom op not imported?)"
            )
        return op

    def instr(self, record, position: int, where: str) -> Instr:
        """One instruction of a fused program (see the module docstring)."""
        if not (isinstance(record, dict) and set(record) == {"op", "args", "attrs"}):
            raise self.fail(f"{where}: expected {{'op', 'args', 'attrs'}}, got {_short(record)}")
        name, args, attrs = record["op"], record["args"], record["attrs"]
        if not isinstance(name, str) or not isinstance(args, list) or not isinstance(attrs, list):
            raise self.fail(f"{where}: 'op' must be a name, 'args' and 'attrs' lists")
        operands = tuple(self.operand(a, position, where) for a in args)
        items = []
        for item in attrs:
            self.attr_entry(item, where)
            items.append((item[0], self.attr(item[1], f"{where} attribute {item[0]!r}")))
        op = self.op(name, where)
        self.check_attrs(op, dict(items), None, where)
        return Instr(op, operands, tuple(items))

    def check_attrs(self, op: OpDef, attrs: dict, ranks, where: str) -> None:
        """Refuse an attribute its op's rule refuses (ops/_attr_rules.py): no shape rule or
        kernel sees an attribute its public function could not have made."""
        refused = check_attrs(op, attrs, ranks)
        if refused is not None:
            key, problem = refused
            raise self.fail(f"{where}: {op.name}'s attribute {key!r}: {problem}")

    def operand(self, record, position: int, where: str):
        """``["in", i]``, ``["t", j]`` (an earlier instruction) or ``["k", value, dtype]``."""
        if isinstance(record, list) and len(record) == 2 and record[0] in ("in", "t"):
            index = record[1]
            if _is_int(index) and 0 <= index and (record[0] == "in" or index < position):
                return Input(index) if record[0] == "in" else Temp(index)
        elif isinstance(record, list) and len(record) == 3 and record[0] == "k":
            dtype = self.dtype(record[2], where)
            value = record[1]
            if dtype is not dt.bool_ and not isinstance(value, bool) and _is_float(value):
                value = float(value)
            if Const.holds(value, dtype):
                return Const(value, dtype)
        raise self.fail(f"{where}: bad operand {_short(record)}")

    def attr(self, record, where: str, depth: int = 0):
        if not (isinstance(record, dict) and set(record) == {"t", "v"}):
            raise self.fail(
                f"{where}: expected a {{'t': tag, 'v': value}} record, got {_short(record)}"
            )
        tag, v = record["t"], record["v"]
        ok = _PAYLOAD_CHECKS.get(tag) if isinstance(tag, str) else None
        if ok is None:
            raise self.fail(f"{where}: unknown attribute tag {_short(tag)}")
        if not ok(v):
            raise self.fail(f"{where}: bad payload {_short(v)} for tag {tag!r}")
        if tag in ("none", "bool", "int", "str"):
            return v
        if tag == "float":
            return float(v)
        if tag in ("tuple", "list"):
            if depth >= MAX_DEPTH:
                raise self.fail(f"{where}: attribute values nest more than {MAX_DEPTH} deep")
            items = [self.attr(x, where, depth + 1) for x in v]
            return tuple(items) if tag == "tuple" else items
        if tag == "dtype":
            return self.dtype(v, where)
        if tag == "sym":
            return self.symdim(v, where)
        if tag == "op":
            return self.op(v, where)
        if tag == "program":
            return Program(self.instr(x, j, f"{where} instruction {j}") for j, x in enumerate(v))
        if tag == "generator":
            if v >= len(self.generators):
                raise self.fail(f"{where}: refers to generator {v}, which the file does not hold")
            return self.generators[v]
        if tag == "complex":
            return complex(float(v[0]), float(v[1]))
        try:  # npscalar (a complex one as its two parts)
            if isinstance(v[1], list):
                return np.dtype(v[0]).type(complex(float(v[1][0]), float(v[1][1])))
            return np.dtype(v[0]).type(v[1])
        except (TypeError, ValueError, OverflowError) as exc:
            raise self.fail(f"{where}: bad NumPy scalar {_short(v)}") from exc


_COMPLEX_NAMES = tuple(d.name for d in dt.COMPLEX_DTYPES)
_DTYPE_NAMES = frozenset(d.name for d in dt.ALL_DTYPES) | frozenset(_COMPLEX_NAMES)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_attr_int(v) -> bool:
    return _is_int(v) and -(2**64) < v < 2**64  # int64 and uint64 values (seeds), no more


def _is_float(v) -> bool:
    if _is_int(v):
        return abs(v) < 2**1023  # float() of a larger int overflows
    return isinstance(v, float) or (isinstance(v, str) and v in ("inf", "-inf", "nan"))


def _is_parts(v) -> bool:
    """A complex number's real and imaginary parts, as floats are stored."""
    return isinstance(v, list) and len(v) == 2 and all(_is_float(x) for x in v)


_PAYLOAD_CHECKS = {
    "none": lambda v: v is None,
    "bool": lambda v: isinstance(v, bool),
    "int": _is_attr_int,
    "float": _is_float,
    "str": lambda v: isinstance(v, str),
    "tuple": lambda v: isinstance(v, list),
    "list": lambda v: isinstance(v, list),
    "dtype": lambda v: isinstance(v, str),
    "sym": lambda v: isinstance(v, dict),
    "generator": lambda v: _is_int(v) and v >= 0,
    "op": lambda v: isinstance(v, str),
    "program": lambda v: isinstance(v, list),
    "complex": lambda v: _is_parts(v),
    "npscalar": lambda v: (
        isinstance(v, list)
        and len(v) == 2
        and (
            (
                v[0] in ("bool", *(d.name for d in dt.ALL_DTYPES if d.name != "bfloat16"))
                and (isinstance(v[1], bool) or _is_float(v[1]))
            )
            or (v[0] in _COMPLEX_NAMES and _is_parts(v[1]))
        )
    ),
}
