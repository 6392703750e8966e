"""Reading an ONNX model safely: the file, its external data, its tensors and attributes.

A model file is hostile input. Everything here turns what the file says into plain Python and
NumPy values, checked, before the importer sees it:

* the protobuf is parsed by the ``onnx`` package (never by hand); a file that does not parse
  raises `OnnxError` naming the file;
* external-data locations must stay inside the model's folder (no absolute paths, no ``..``,
  no symbolic link leading out), and their offsets and lengths must lie inside the data file;
* a tensor's declared size must match the bytes it carries, and no tensor may declare more
  than `MAX_TENSOR_BYTES`;
* names are checked: every node input is defined before it is read, no value is defined twice
  (so a graph with a cycle is refused), every graph output is defined.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .._file_limits import (
    PROTOBUF_MAX_BYTES,
    canonical_bools,
    check_allocation,
    inside_folder,
    open_regular,
    physical_memory,
)
from ..errors import OnnxError

# a declared tensor larger than this is refused before anything is allocated (the file would
# have to carry it anyway; this only stops a header that lies from reserving memory)
MAX_TENSOR_BYTES = 1 << 36

DEFAULT_DOMAIN = ""  # "ai.onnx"


def memory_bytes() -> int:
    """This machine's physical memory: no single value of a model may need more (a hostile
    shape would otherwise be allocated, lazily, until the system kills the process)."""
    return physical_memory()


def require_onnx():
    """The ``onnx`` package, or an `OnnxError` saying how to install it."""
    try:
        import onnx
    except ImportError as err:  # pragma: no cover - the test extra installs it
        raise OnnxError(
            "reading or writing ONNX models needs the 'onnx' package: pip install 'ember[onnx]'"
        ) from err
    return onnx


# the most iterations a Loop with a condition runs before ember calls it endless (a file can
# write a condition that never turns false, with no trip count or INT64_MAX as one); a model
# that means to loop longer is loaded with ``max_loop_iterations=`` larger, or None
MAX_LOOP_ITERATIONS = 1 << 20


@dataclass
class ModelSource:
    proto: object  # onnx.ModelProto, external data loaded
    name: str  # how errors name the model (its path, or "<bytes>")
    opsets: dict  # domain -> version
    max_loop_iterations: int | None = MAX_LOOP_ITERATIONS


def read_model(source, *, name: str | None = None) -> ModelSource:
    """Parse ``source`` (a path, bytes or a ModelProto) into a checked `ModelSource`."""
    onnx = require_onnx()
    base_dir = None
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        name = name or path
        if not os.path.isfile(path):
            raise OnnxError(f"{path}: no such ONNX model file")
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > PROTOBUF_MAX_BYTES:  # (refused before it is read into memory)
                raise OnnxError(
                    f"{path}: {size:,} bytes is more than a protobuf message can hold "
                    f"({PROTOBUF_MAX_BYTES:,}); a model that large keeps its tensors in "
                    "external data files"
                )
            data = f.read()
        base_dir = os.path.dirname(os.path.abspath(path))
        proto = _parse(onnx, data, name)
    elif isinstance(source, (bytes, bytearray, memoryview)):
        name = name or "<bytes>"
        proto = _parse(onnx, bytes(source), name)
    elif isinstance(source, onnx.ModelProto):
        name = name or (str(source.graph.name) or "<ModelProto>")
        proto = onnx.ModelProto()
        proto.CopyFrom(source)
    else:
        raise OnnxError(
            "ember.onnx.load takes a path, bytes or an onnx.ModelProto, "
            f"not {type(source).__name__}"
        )
    if not proto.HasField("graph"):
        raise OnnxError(f"{name}: the file holds no graph (not an ONNX model?)")
    proto = _inline_functions(onnx, proto, name)
    _load_external_data(onnx, proto, base_dir, name)
    opsets = {}
    for entry in proto.opset_import:
        if not isinstance(entry.domain, str):  # protobuf's bytes for text that is not UTF-8
            raise OnnxError(
                f"{name}: an opset import's domain is not valid UTF-8 text "
                f"({bytes(entry.domain)[:40]!r})"
            )
        domain = entry.domain if entry.domain != "ai.onnx" else DEFAULT_DOMAIN
        if not 0 <= int(entry.version) < 2**31:  # (onnx's checker: out of supported range)
            raise OnnxError(
                f"{name}: the opset import of domain {domain or 'ai.onnx'!r} has version "
                f"{int(entry.version)}, outside the range an opset version can have"
            )
        opsets[domain] = int(entry.version)
    if DEFAULT_DOMAIN not in opsets:
        # IR version 3 and later must name it (onnx's checker refuses a model whose nodes
        # use it without); older files meant opset 1
        if proto.ir_version >= 3 and any(n.domain in ("", "ai.onnx") for n in proto.graph.node):
            raise OnnxError(
                f"{name}: nodes use the default domain (ai.onnx), which the model imports no "
                "opset of; add an opset_import for domain '' with the version it was written for"
            )
        opsets[DEFAULT_DOMAIN] = 1
    return ModelSource(proto, name, opsets)


def _parse(onnx, data: bytes, name: str):
    from google.protobuf.message import DecodeError

    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as err:
        raise OnnxError(f"{name}: not a readable ONNX model ({err})") from None
    if not proto.ListFields():
        raise OnnxError(f"{name}: empty or unreadable ONNX model")
    return proto


def _inline_functions(onnx, proto, name: str):
    """The model with its local functions (``ModelProto.functions``: PyTorch's
    ``export_modules_as_functions``, onnxscript's) expanded at each call, by ONNX's own inliner
    (attribute references, default attributes and nested calls resolved as the spec says).
    A function that calls itself, directly or through others, is refused first."""
    if not proto.functions:
        return proto
    keys = {(f.domain, f.name, getattr(f, "overload", "")) for f in proto.functions}

    def calls(nodes) -> set:
        found = set()
        for node in nodes:
            key = (node.domain, node.op_type, getattr(node, "overload", ""))
            if key in keys:
                found.add(key)
            for attr in node.attribute:
                for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    found |= calls(g.node)
        return found

    callees = {
        (f.domain, f.name, getattr(f, "overload", "")): calls(f.node) for f in proto.functions
    }
    state: dict = {}  # key -> "open" while its callees are walked, "done" after

    def walk(key, path):
        if state.get(key) == "open":
            cycle = " -> ".join(f"{d}.{n}" if d else n for d, n, _ in (*path, key))
            raise OnnxError(f"{name}: local function calls itself ({cycle})")
        if state.get(key) is None:
            state[key] = "open"
            for callee in callees.get(key, ()):
                walk(callee, (*path, key))
            state[key] = "done"

    for key in callees:
        walk(key, ())
    # each call given the defaults (``attribute_proto``) of the attributes it leaves out: ONNX's
    # inliner drops a reference to an attribute the call does not set, which the spec (and
    # onnxruntime) bind to the function's default
    defaults = {
        (f.domain, f.name, getattr(f, "overload", "")): list(f.attribute_proto)
        for f in proto.functions
    }

    def bind_defaults(nodes) -> None:
        for node in nodes:
            key = (node.domain, node.op_type, getattr(node, "overload", ""))
            given = {a.name for a in node.attribute}
            node.attribute.extend(a for a in defaults.get(key, ()) if a.name not in given)
            for attr in node.attribute:
                for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    bind_defaults(g.node)

    bind_defaults(proto.graph.node)
    for function in proto.functions:
        bind_defaults(function.node)
    try:
        from onnx import inliner

        return inliner.inline_local_functions(proto)
    except Exception as err:  # (ONNX's C++ inliner raises its own error types)
        raise OnnxError(f"{name}: its local functions could not be expanded ({err})") from None


def _all_tensors(graph):
    """Every TensorProto a graph holds: initializers, Constant nodes' and subgraphs' values."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _all_tensors(attr.g)
            for g in attr.graphs:
                yield from _all_tensors(g)


def _load_external_data(onnx, proto, base_dir: str | None, name: str) -> None:
    external = [
        t for t in _all_tensors(proto.graph) if t.data_location == onnx.TensorProto.EXTERNAL
    ]
    if not external:
        return
    if base_dir is None:
        raise OnnxError(
            f"{name}: the model keeps tensors in external files; load it from its path so "
            "they can be found"
        )
    root = os.path.realpath(base_dir)
    total = 0  # bytes read for all tensors: each may name the whole of one large file again
    for tensor in external:
        info = {entry.key: entry.value for entry in tensor.external_data}
        location = info.get("location", "")
        what = f"{name}: tensor {tensor.name!r}'s external data"
        if not location:
            raise OnnxError(f"{what} names no file (refused)")
        # (the shared check: text without NUL, relative, no "..", no link out of the folder)
        full = inside_folder(root, location, what, OnnxError, None)
        try:
            stream = open_regular(full)
        except OSError:
            raise OnnxError(
                f"{name}: tensor {tensor.name!r}'s external data file {location!r} is missing"
            ) from None
        with stream:
            size = os.fstat(stream.fileno()).st_size
            try:
                offset = int(info.get("offset", 0))
                length = int(info["length"]) if "length" in info else size - offset
            except ValueError:
                raise OnnxError(
                    f"{name}: tensor {tensor.name!r} has a malformed external offset/length"
                ) from None
            if offset < 0 or length < 0 or offset + length > size:
                raise OnnxError(
                    f"{name}: tensor {tensor.name!r}'s external data ({location!r}, offset "
                    f"{offset}, length {length}) lies outside its {size}-byte file"
                )
            total += length
            check_allocation(total, f"{what} (with the tensors read before it)", OnnxError)
            stream.seek(offset)
            tensor.raw_data = stream.read(length)
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT


def tensor_to_array(tensor, where: str) -> np.ndarray:
    """A TensorProto's value as a NumPy array (checked against its declared shape)."""
    onnx = require_onnx()
    from onnx import numpy_helper

    dims = [int(d) for d in tensor.dims]
    if any(d < 0 for d in dims):
        raise OnnxError(f"{where}: tensor {tensor.name!r} declares a negative dimension {dims}")
    count = int(np.prod(dims, dtype=object)) if dims else 1
    try:
        itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
    except (KeyError, ValueError, TypeError):
        raise OnnxError(
            f"{where}: tensor {tensor.name!r} has unknown element type {tensor.data_type}"
        ) from None
    if count * itemsize > MAX_TENSOR_BYTES:
        raise OnnxError(
            f"{where}: tensor {tensor.name!r} declares shape {dims} "
            f"({count * itemsize} bytes), more than ember reads ({MAX_TENSOR_BYTES})"
        )
    if tensor.HasField("raw_data") and tensor.data_type != onnx.TensorProto.STRING:
        expected = count * itemsize
        if tensor.data_type in _SUB_BYTE:
            expected = (count * _SUB_BYTE[tensor.data_type] + 7) // 8
        if len(tensor.raw_data) != expected:
            raise OnnxError(
                f"{where}: tensor {tensor.name!r} declares shape {dims} but carries "
                f"{len(tensor.raw_data)} bytes (expected {expected})"
            )
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as err:  # the package's own checks: inconsistent fields
        raise OnnxError(f"{where}: tensor {tensor.name!r} cannot be read ({err})") from None
    if array.size != count:
        raise OnnxError(
            f"{where}: tensor {tensor.name!r} declares shape {dims} but holds {array.size} values"
        )
    return canonical_bools(array).reshape(dims)


def _sub_byte_types():
    onnx = require_onnx()
    table = {}
    for type_name, bits in (
        ("INT4", 4),
        ("UINT4", 4),
        ("FLOAT4E2M1", 4),
        ("INT2", 2),
        ("UINT2", 2),
    ):
        code = getattr(onnx.TensorProto, type_name, None)
        if code is not None:
            table[code] = bits
    return table


try:  # filled lazily where onnx is absent
    _SUB_BYTE = _sub_byte_types()
except OnnxError:  # pragma: no cover
    _SUB_BYTE = {}


def attribute_value(attr, where: str):
    """An AttributeProto's value as Python: numbers, strings (str), lists, NumPy arrays for
    tensors, GraphProtos left as they are (the importer builds them)."""
    onnx = require_onnx()
    kind = attr.type
    A = onnx.AttributeProto
    if kind == A.FLOAT:
        return float(attr.f)
    if kind == A.INT:
        return int(attr.i)
    if kind == A.STRING:
        return attr.s.decode("utf-8", errors="replace")
    if kind == A.TENSOR:
        return tensor_to_array(attr.t, where)
    if kind == A.GRAPH:
        return attr.g
    if kind == A.FLOATS:
        return [float(v) for v in attr.floats]
    if kind == A.INTS:
        return [int(v) for v in attr.ints]
    if kind == A.STRINGS:
        return [s.decode("utf-8", errors="replace") for s in attr.strings]
    if kind == A.TENSORS:
        return [tensor_to_array(t, where) for t in attr.tensors]
    if kind == A.GRAPHS:
        return list(attr.graphs)
    if kind == A.SPARSE_TENSOR:
        return sparse_to_array(attr.sparse_tensor, where)
    if kind == A.TYPE_PROTO:
        return attr.tp
    if kind == A.UNDEFINED and attr.ref_attr_name:
        raise OnnxError(f"{where}: attribute {attr.name!r} refers to a function attribute")
    raise OnnxError(f"{where}: attribute {attr.name!r} has unsupported type {kind}")


def sparse_to_array(sparse, where: str) -> np.ndarray:
    """A SparseTensorProto as a dense array: its dims checked (non-negative, within what ember
    reads), its indices ((nnz,) linear or (nnz, rank) coordinates) inside them and as many as
    its values."""
    name = sparse.values.name
    values = tensor_to_array(sparse.values, where)
    indices = tensor_to_array(sparse.indices, where)
    dims = [int(d) for d in sparse.dims]
    if any(d < 0 for d in dims):
        raise OnnxError(f"{where}: sparse tensor {name!r} declares a negative dimension {dims}")
    count = int(np.prod(dims, dtype=object)) if dims else 1
    # (the dense array is allocated here, whatever the file carries: within the memory)
    limit = min(MAX_TENSOR_BYTES, memory_bytes())
    if count * values.dtype.itemsize > limit:
        raise OnnxError(
            f"{where}: sparse tensor {name!r} declares shape {dims} "
            f"({count * values.dtype.itemsize} bytes dense), more than ember reads ({limit})"
        )
    if indices.dtype.kind not in "iu":
        raise OnnxError(f"{where}: sparse tensor {name!r} has {indices.dtype} indices")
    nnz = values.reshape(-1).size
    linear = indices.ndim == 1 and indices.size == nnz
    coordinates = indices.ndim == 2 and indices.shape == (nnz, len(dims))
    if not (linear or coordinates):
        raise OnnxError(
            f"{where}: sparse tensor {name!r} has indices of shape {indices.shape} for {nnz} "
            f"values of a rank-{len(dims)} tensor (expected ({nnz},) or ({nnz}, {len(dims)}))"
        )
    indices = indices.astype(np.int64)
    bounds = np.asarray(dims, np.int64)
    outside = (indices < 0) | (indices >= (count if linear else bounds))
    if outside.any():
        raise OnnxError(f"{where}: sparse tensor {name!r} has indices outside its shape {dims}")
    dense = np.zeros(dims, dtype=values.dtype)
    if nnz:
        positions = indices if linear else np.ravel_multi_index(tuple(indices.T), dims)
        dense.reshape(-1)[positions] = values.reshape(-1)
    return dense


def _check_text(graph, where: str) -> None:
    """protobuf hands out a string field that is not valid UTF-8 as bytes: refused here, so
    every name, type and domain the importer reads is a str."""
    fields = [("graph name", graph.name)]
    for vi in (*graph.input, *graph.output, *graph.value_info):
        fields.append(("value name", vi.name))
    for tensor in graph.initializer:
        fields.append(("initializer name", tensor.name))
    for node in graph.node:
        fields += [("node name", node.name), ("op type", node.op_type), ("domain", node.domain)]
        fields += [("node input", n) for n in node.input]
        fields += [("node output", n) for n in node.output]
        fields += [("attribute name", a.name) for a in node.attribute]
    for what, text in fields:
        if not isinstance(text, str):
            raise OnnxError(f"{where}: a {what} is not valid UTF-8 text ({bytes(text)[:40]!r})")


def free_names(graph) -> set[str]:
    """The names a GraphProto (and the graphs nested in it) reads from enclosing scopes."""
    defined = {vi.name for vi in graph.input}
    defined |= {t.name for t in graph.initializer}
    defined |= {s.values.name for s in graph.sparse_initializer}
    used = set()
    for node in graph.node:
        used.update(name for name in node.input if name)
        used |= _nested_reads(node)
        defined.update(name for name in node.output if name)
    used.update(vi.name for vi in graph.output)
    return used - defined


def _nested_reads(node) -> set[str]:
    """The enclosing-scope names the graphs in ``node``'s attributes (If's branches, a Loop's
    body) read."""
    used: set = set()
    for attr in node.attribute:
        for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
            used |= free_names(g)
    return used


def sort_nodes(graph) -> None:
    """Put ``graph``'s nodes in an order where each runs after the nodes whose outputs it reads
    (its inputs, and what its subgraphs read from this scope), keeping the file's order among
    nodes that do not depend on each other. ONNX asks for that order, but onnxruntime runs
    graphs without it, and its tools write some (the float16 converter appends the casts of the
    graph inputs after the nodes that read them). Nodes in a cycle keep their places, for
    `check_names` to refuse."""
    import heapq

    nodes = list(graph.node)
    producer = {}
    for index, node in enumerate(nodes):
        for name in node.output:
            if name:
                producer.setdefault(name, index)
    needs = [
        {producer[n] for n in (*node.input, *_nested_reads(node)) if n in producer} - {i}
        for i, node in enumerate(nodes)
    ]
    if all(all(j < i for j in deps) for i, deps in enumerate(needs)):
        return  # (in order already: the common case, left untouched)
    readers: list = [[] for _ in nodes]
    waiting = [len(deps) for deps in needs]
    for i, deps in enumerate(needs):
        for j in deps:
            readers[j].append(i)
    ready = [i for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for k in readers[i]:
            waiting[k] -= 1
            if waiting[k] == 0:
                heapq.heappush(ready, k)
    if len(order) < len(nodes):
        return  # a cycle: check_names names the node that reads what is not yet defined
    del graph.node[:]
    graph.node.extend(nodes[i] for i in order)


def check_names(graph, outer: set, where: str) -> None:
    """Every node reads names defined before it (or in an enclosing graph), no name is
    defined twice, every output is defined: a file that breaks these (a cycle, a typo) is
    refused here rather than failing somewhere inside."""
    _check_text(graph, where)
    defined = set(outer)
    own: set = set()

    def define(value: str, what: str):
        if not value:
            return
        if value in own:
            raise OnnxError(f"{where}: {what} defines {value!r}, which is already defined")
        own.add(value)
        defined.add(value)

    for vi in graph.input:
        define(vi.name, "graph input")
    for init in graph.initializer:
        if init.name not in own:  # an initializer may also be listed as an input (IR < 4)
            define(init.name, "initializer")
    for sparse in graph.sparse_initializer:
        define(sparse.values.name, "sparse initializer")
    for index, node in enumerate(graph.node):
        label = node_label(node, index)
        for value in node.input:
            if value and value not in defined:
                raise OnnxError(
                    f"{where}: {label} reads {value!r}, which no earlier node, input or "
                    "initializer defines (a cycle, or a node out of order)"
                )
        for value in node.output:
            define(value, label)
    for out in graph.output:
        if out.name not in defined:
            raise OnnxError(f"{where}: graph output {out.name!r} is never computed")


def node_label(node, index: int) -> str:
    name = f" {node.name!r}" if node.name else ""
    return f"node {index}{name} ({node.op_type})"
