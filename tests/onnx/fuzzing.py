"""Mutation fuzzing of ember's ONNX importer from valid seed models.

Each mutation is one of

* **bytes**: the serialized model with bits flipped, bytes inserted, deleted or overwritten, or
  cut short;
* **proto**: the parsed model changed at one place and serialized again (so the protobuf is
  well formed and only ember's own checks stand between it and the program): an attribute's
  value replaced by a hostile one (huge, negative, of another type, a string where a number
  was), a tensor's dims, element type or bytes changed, an input or output renamed, a node
  dropped, duplicated or moved before the nodes it reads, an op type or domain changed, an
  opset version changed, an external-data location pointing outside the model's folder.

`check` loads a model's bytes with ``ember.onnx.load`` and runs it on zeros of its declared
input shapes, captured and eagerly, and returns the description of any exception that is not
an `EmberError` (None when the model ran or was refused with an EmberError). `fuzz` runs
mutations until a count or a time is reached. tests/onnx/test_import_safety.py runs a seeded
slice; ``EMBER_FUZZ_SECONDS=600`` runs it for minutes.
"""

from __future__ import annotations

import random
import time
import traceback

import numpy as np

HOSTILE_VALUES = [0, -1, -(2**62), 2**62, 2**31, 7, 1e308, float("nan"), float("inf"), "../x"]


def seeds() -> list:
    """Small valid models over the importer's main paths (elementwise ops, shape arithmetic,
    convolution, pooling, reductions, control flow)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    f32 = TensorProto.FLOAT
    rng = np.random.default_rng(0)
    models = []

    def model(nodes, inputs, outputs, inits=(), opset=17):
        graph = helper.make_graph(nodes, "seed", inputs, outputs, initializer=list(inits))
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        onnx.checker.check_model(m)
        return m

    x = helper.make_tensor_value_info("x", f32, [2, 3])
    y = helper.make_tensor_value_info("y", f32, [2, 3])

    def out(*shape):
        return helper.make_tensor_value_info("out", f32, list(shape))

    models.append(
        model(
            [
                helper.make_node("Add", ["x", "y"], ["s"]),
                helper.make_node("Relu", ["s"], ["r"]),
                helper.make_node("Mul", ["r", "w"], ["out"]),
            ],
            [x, y],
            [out(2, 3)],
            [numpy_helper.from_array(rng.standard_normal((2, 3)).astype(np.float32), "w")],
        )
    )
    models.append(
        model(
            [
                helper.make_node("Shape", ["x"], ["shape"]),
                helper.make_node("ReduceProd", ["shape"], ["n"], keepdims=1),
                helper.make_node("Reshape", ["x", "n"], ["flat"]),
                helper.make_node("Softmax", ["flat"], ["out"], axis=0),
            ],
            [x],
            [out(6)],
        )
    )
    image = helper.make_tensor_value_info("x", f32, [1, 2, 6, 6])
    models.append(
        model(
            [
                helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
                helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                helper.make_node("ReduceMean", ["p"], ["out"], keepdims=0),
            ],
            [image],
            [out()],
            [
                numpy_helper.from_array(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "w"),
                numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b"),
            ],
        )
    )
    cond = helper.make_tensor_value_info("x", f32, [3])
    then_graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", f32, [3])],
    )
    else_graph = helper.make_graph(
        [helper.make_node("Exp", ["x"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", f32, [3])],
    )
    models.append(
        model(
            [
                helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
                helper.make_node("Greater", ["total", "zero"], ["positive"]),
                helper.make_node(
                    "If", ["positive"], ["out"], then_branch=then_graph, else_branch=else_graph
                ),
            ],
            [cond],
            [out(3)],
            [numpy_helper.from_array(np.array(0.0, np.float32), "zero")],
        )
    )
    models.extend(_contrib_seeds(helper, numpy_helper, rng))
    return [m.SerializeToString() for m in models]


def _contrib_seeds(helper, numpy_helper, rng) -> list:
    """onnxruntime's node kinds: a blocked-layout (com.microsoft.nchwc) convolution chain and
    a QOperator chain (QLinearConv, QLinearConcat, QLinearAveragePool, QLinearSoftmax)."""
    from onnx import TensorProto

    f32, u8 = TensorProto.FLOAT, TensorProto.UINT8
    nchwc, ms = "com.microsoft.nchwc", "com.microsoft"

    def model(nodes, inputs, outputs, inits, domain):
        graph = helper.make_graph(nodes, "seed", inputs, outputs, initializer=inits)
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid(domain, 1)]
        return helper.make_model(graph, opset_imports=opsets)

    def array(name, a):
        return numpy_helper.from_array(np.asarray(a), name)

    blocked = model(
        [
            helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], domain=nchwc,
                             kernel_shape=[3, 3], pads=[1, 1, 1, 1], activation="Relu"),
            helper.make_node("Conv", ["c1", "w2", "", "c1"], ["c2"], domain=nchwc,
                             kernel_shape=[1, 1], activation="Clip", activation_params=[0, 6]),
            helper.make_node("MaxPool", ["c2"], ["p"], domain=nchwc, kernel_shape=[2, 2],
                             strides=[2, 2]),
            helper.make_node("Upsample", ["p"], ["u"], domain=nchwc, scales=[1, 1, 2, 2]),
            helper.make_node("ReorderOutput", ["u"], ["r"], domain=nchwc, channels=6),
            helper.make_node("Pad", ["r", "pads"], ["r8"]),
            helper.make_node("ReorderInput", ["r8"], ["i"], domain=nchwc),
            helper.make_node("GlobalAveragePool", ["i"], ["g"], domain=nchwc),
            helper.make_node("ReorderOutput", ["g"], ["out"], domain=nchwc, channels=8),
        ],
        [helper.make_tensor_value_info("x", f32, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("out", f32, [1, 8, 1, 1])],
        [
            array("w1", rng.standard_normal((8, 3, 3, 3)).astype(np.float32)),
            array("b1", rng.standard_normal(8).astype(np.float32)),
            array("w2", rng.standard_normal((8, 8, 1, 1)).astype(np.float32)),
            array("pads", np.array([0, 0, 0, 0, 0, 2, 0, 0], np.int64)),
        ],
        nchwc,
    )  # fmt: skip
    scales = [array("s", np.float32(0.05)), array("z", np.uint8(128))]
    quantized = model(
        [
            helper.make_node("QLinearConv", ["x", "s", "z", "w", "ws", "wz", "s", "z"], ["c"],
                             pads=[1, 1, 1, 1]),
            helper.make_node("QLinearConcat", ["s", "z", "c", "s", "z", "x", "s", "z"], ["k"],
                             domain=ms, axis=1),
            helper.make_node("QLinearAveragePool", ["k", "s", "z", "s", "z"], ["a"], domain=ms,
                             kernel_shape=[2, 2], count_include_pad=1, ceil_mode=1),
            helper.make_node("QLinearSoftmax", ["a", "s", "z", "s", "z"], ["out"], domain=ms,
                             axis=1, opset=13),
        ],
        [helper.make_tensor_value_info("x", u8, [1, 2, 5, 5])],
        [helper.make_tensor_value_info("out", u8, [1, 4, 3, 3])],
        [
            *scales,
            array("w", rng.integers(-20, 20, (2, 2, 3, 3)).astype(np.int8)),
            array("ws", np.float32(0.01)),
            array("wz", np.int8(0)),
        ],
        ms,
    )  # fmt: skip
    return [blocked, quantized]


def _inputs(model):
    import onnx

    arrays = []
    inits = {i.name for i in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        if any(d > 64 for d in shape) or len(shape) > 6:
            return None
        try:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        except KeyError:  # an element type the mutation made up: the loader refuses it
            return None
        arrays.append(np.zeros(shape, dtype))
    return arrays


def run(data: bytes) -> None:
    """Load and run a model on zeros of its declared inputs, captured and eagerly."""
    import onnx

    from ember.onnx import load

    for capture in (True, False):
        function = load(data, capture=capture)
        arrays = _inputs(onnx.load_from_string(data))
        if arrays is not None:
            with np.errstate(all="ignore"):
                function(*arrays)


def check(data: bytes) -> str | None:
    """Load and run a (possibly damaged) model; the description of a non-ember error, or None."""
    from ember.errors import EmberError

    try:
        run(data)
    except EmberError:
        return None
    except Exception as err:  # noqa: BLE001 - what the fuzzer looks for
        frame = traceback.extract_tb(err.__traceback__)[-1]
        return f"{type(err).__name__}: {err} (at {frame.filename}:{frame.lineno})"
    return None


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to three mutations (a proto-level one needs bytes that still parse)."""
    for _ in range(rng.choice((1, 1, 2, 3))):
        if rng.random() < 0.3:
            data = _mutate_bytes(data, rng)
            continue
        try:
            data = _mutate_proto(data, rng)
        except Exception:  # noqa: BLE001 - bytes an earlier mutation left unparseable
            data = _mutate_bytes(data, rng)
    return data


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    raw = bytearray(data)
    if not raw:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    kind = rng.randrange(4)
    position = rng.randrange(len(raw))
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
    elif kind == 1:
        raw[position:position] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif kind == 2:
        del raw[position : position + rng.randint(1, 16)]
    else:
        raw = raw[:position]
    return bytes(raw)


def _mutate_proto(data: bytes, rng: random.Random) -> bytes:
    import onnx

    model = onnx.load_from_string(data)
    graphs = [model.graph]
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                graphs.append(attr.g)
    graph = rng.choice(graphs)
    nodes = list(graph.node)
    choice = rng.randrange(11)
    if choice == 0 and nodes:  # an attribute's value
        node = rng.choice(nodes)
        attrs = list(node.attribute)
        if attrs:
            attr = rng.choice(attrs)
            value = rng.choice(HOSTILE_VALUES)
            if attr.type == onnx.AttributeProto.INT and isinstance(value, int):
                attr.i = max(min(value, 2**63 - 1), -(2**63))
            elif attr.type == onnx.AttributeProto.INTS and attr.ints and isinstance(value, int):
                attr.ints[rng.randrange(len(attr.ints))] = value
            elif attr.type == onnx.AttributeProto.FLOAT and isinstance(value, float):
                attr.f = value
            else:
                attr.type = rng.choice([1, 2, 3, 6, 7])
    elif choice == 1 and graph.initializer:  # a tensor's dims
        tensor = rng.choice(list(graph.initializer))
        if tensor.dims:
            tensor.dims[rng.randrange(len(tensor.dims))] = rng.choice([0, 1, 2**40, 3, 1000])
        else:
            tensor.dims.append(rng.choice([0, 2, 2**40]))
    elif choice == 2 and graph.initializer:  # a tensor's element type
        tensor = rng.choice(list(graph.initializer))
        tensor.data_type = rng.randrange(0, 30)
    elif choice == 3 and nodes:  # a node reads a name that is not there
        node = rng.choice(nodes)
        if node.input:
            node.input[rng.randrange(len(node.input))] = rng.choice(["nowhere", "", "out"])
    elif choice == 4 and len(nodes) > 1:  # a node moved before what it reads
        index = rng.randrange(1, len(nodes))
        moved = graph.node.pop(index)
        graph.node.insert(0, moved)
    elif choice == 5 and nodes:  # a node dropped or duplicated
        index = rng.randrange(len(nodes))
        if rng.random() < 0.5:
            del graph.node[index]
        else:
            graph.node.append(nodes[index])
    elif choice == 6 and nodes:  # op type or domain
        node = rng.choice(nodes)
        if rng.random() < 0.5:
            node.op_type = rng.choice(["Conv", "If", "Loop", "NoSuchOp", "Reshape", "Softmax"])
        else:
            node.domain = rng.choice(["com.example", "ai.onnx.ml", ""])
    elif choice == 7:  # the opset
        model.opset_import[0].version = rng.choice([1, 6, 9, 13, 99, 0, -1])
    elif choice == 8 and graph.initializer:  # external data outside the model's folder
        tensor = rng.choice(list(graph.initializer))
        tensor.data_location = onnx.TensorProto.EXTERNAL
        del tensor.external_data[:]
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", rng.choice(["../../etc/passwd", "/etc/passwd", "x"])
    elif choice == 9 and graph.input:  # an input's declared shape
        vi = rng.choice(list(graph.input))
        dims = vi.type.tensor_type.shape.dim
        if dims:
            dims[rng.randrange(len(dims))].dim_value = rng.choice([0, 1, 5, 2**20])
    elif graph.initializer:  # a tensor's bytes
        tensor = rng.choice(list(graph.initializer))
        raw = bytearray(tensor.raw_data)
        if raw:
            del raw[rng.randrange(len(raw)) :]
        tensor.raw_data = bytes(raw)
    return model.SerializeToString()


def fuzz(count: int | None = None, seconds: float | None = None, seed: int = 0) -> dict:
    rng = random.Random(seed)
    bases = seeds()
    tally = {"runs": 0, "failures": []}
    start = time.time()
    while True:
        if count is not None and tally["runs"] >= count:
            break
        if seconds is not None and time.time() - start >= seconds:
            break
        data = mutate(rng.choice(bases), rng)
        problem = check(data)
        tally["runs"] += 1
        if problem:
            tally["failures"].append((data, problem))
    return tally
