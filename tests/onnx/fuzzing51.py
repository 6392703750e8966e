"""More of the importer under mutation (tests/onnx/fuzzing.py is the base): seeds of what
PyTorch's dynamo exporter and onnxruntime's tools write, and mutations of what those files
hold that the base fuzzer leaves alone.

Seeds (built with onnx.helper, so no exporter is needed): a transformer block at opset 23
(Attention with a boolean mask, RMSNormalization, LayerNormalization, Gelu, Trilu, Where,
CumSum, TopK, GatherElements) whose initializers carry torch.export's signature metadata;
recurrent layers (LSTM, bidirectional GRU with sequence lengths); a local function with an
attribute reference and a default, called twice; a Loop with a scan output and an If; a
com.microsoft fusion chain (SkipLayerNormalization, Attention, BiasGelu, FastGelu).

Mutations, on top of the base ones: a local function's body (a node dropped or duplicated, an
attribute reference renamed, a call of itself), value_info entries with wrong shapes or
element types, an extra or empty node output, an initializer with negative dims, a raw_data
longer or shorter than its dims, float_data next to raw_data, string data for a float tensor,
sparse initializers with indices out of range, the signature metadata's kinds and folded_from
texts, and attributes of the wrong type on the new seeds' operators.

`run` also loads each model with ``trainable=True`` (the Parameters, buffers and constants
onnx/_export_roles.py decides) and runs a forward and backward pass.
"""

from __future__ import annotations

import random
import time

import numpy as np

from . import fuzzing

KIND = "pkg.torch.export.graph_signature.InputSpec.kind"
FOLDED = "pkg.onnxscript.optimizer.folded_from"


def _mark(helper, graph, name: str, key: str, value: str) -> None:
    info = next((v for v in graph.value_info if v.name == name), None)
    if info is None:
        info = graph.value_info.add()
        info.name = name
    entry = info.metadata_props.add()
    entry.key, entry.value = key, value


def seeds() -> list:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    f32, i64, b = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    rng = np.random.default_rng(51)

    def array(name, a):
        return numpy_helper.from_array(np.asarray(a), name)

    def weights(name, *shape):
        return array(name, (0.3 * rng.standard_normal(shape)).astype(np.float32))

    def model(nodes, inputs, outputs, inits=(), opset=23, extra=(), functions=()):
        graph = helper.make_graph(nodes, "seed", inputs, outputs, initializer=list(inits))
        opsets = [helper.make_opsetid("", opset), *extra]
        m = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
        m.ir_version = 10
        return m

    models = []
    # a dynamo-style transformer block, opset 23
    block = model(
        [
            helper.make_node("RMSNormalization", ["x", "g"], ["n"], axis=-1, epsilon=1e-5),
            helper.make_node("MatMul", ["n", "wq"], ["q0"]),
            helper.make_node("Reshape", ["q0", "heads"], ["q1"]),
            helper.make_node("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
            helper.make_node("Trilu", ["ones", "zero"], ["tri"], upper=0),
            helper.make_node("Cast", ["tri"], ["mask"], to=b),
            helper.make_node("Attention", ["q", "q", "q", "mask"], ["a"]),
            helper.make_node("Transpose", ["a"], ["a1"], perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", ["a1", "flat"], ["a2"]),
            helper.make_node("LayerNormalization", ["a2", "g", "beta"], ["l"], axis=-1),
            helper.make_node("Gelu", ["l"], ["ge"], approximate="tanh"),
            helper.make_node("Mul", ["ge", "half"], ["h"]),
            helper.make_node("CumSum", ["h", "one"], ["c"], reverse=1),
            helper.make_node("TopK", ["c", "k"], ["tv", "ti"], axis=-1, largest=1),
            helper.make_node("GatherElements", ["h", "ti"], ["gathered"], axis=-1),
            helper.make_node("Greater", ["tv", "half"], ["big"]),
            helper.make_node("Where", ["big", "tv", "gathered"], ["out"]),
        ],
        [helper.make_tensor_value_info("x", f32, [2, 3, 4])],
        [helper.make_tensor_value_info("out", f32, [2, 3, 2])],
        [
            weights("g", 4),
            weights("beta", 4),
            weights("wq", 4, 4),
            array("heads", np.array([2, 3, 2, 2], np.int64)),
            array("flat", np.array([2, 3, 4], np.int64)),
            array("ones", np.ones((3, 3), np.float32)),
            array("zero", np.array(0, np.int64)),
            array("half", np.float32(0.5)),
            array("one", np.array(1, np.int64)),
            array("k", np.array([2], np.int64)),
        ],
    )
    for name in ("g", "beta", "wq"):
        _mark(helper, block.graph, name, KIND, "PARAMETER")
    _mark(helper, block.graph, "ones", FOLDED, "['val_1', 'val_2']")
    models.append(block)
    # recurrent layers
    models.append(
        model(
            [
                helper.make_node("LSTM", ["x", "lw", "lr", "lb"], ["ly", "lh", "lc"],
                                 hidden_size=3),
                helper.make_node("Squeeze", ["ly", "one"], ["s"]),
                helper.make_node("GRU", ["s", "gw", "gr", "", "lens"], ["gy", "out"],
                                 hidden_size=2, direction="bidirectional",
                                 linear_before_reset=1),
            ],
            [helper.make_tensor_value_info("x", f32, [4, 2, 3])],
            [helper.make_tensor_value_info("out", f32, [2, 2, 2])],
            [
                weights("lw", 1, 12, 3),
                weights("lr", 1, 12, 3),
                weights("lb", 1, 24),
                weights("gw", 2, 6, 3),
                weights("gr", 2, 6, 2),
                array("lens", np.array([4, 2], np.int32)),
                array("one", np.array([1], np.int64)),
            ],
            opset=18,
        )
    )  # fmt: skip
    # a local function with an attribute reference and a default
    scale_attr = helper.make_attribute("alpha", 0.5)
    ref = onnx.AttributeProto()
    ref.name, ref.ref_attr_name, ref.type = "alpha", "alpha", onnx.AttributeProto.FLOAT
    leaky = helper.make_node("LeakyRelu", ["a"], ["r"])
    leaky.attribute.append(ref)
    function = helper.make_function(
        "local",
        "ScaledLeaky",
        ["a", "w"],
        ["y"],
        [leaky, helper.make_node("Mul", ["r", "w"], ["y"])],
        [helper.make_opsetid("", 18)],
        attributes=[],
    )
    function.attribute_proto.append(scale_attr)
    models.append(
        model(
            [
                helper.make_node("ScaledLeaky", ["x", "w"], ["h"], domain="local", alpha=0.1),
                helper.make_node("ScaledLeaky", ["h", "w"], ["out"], domain="local"),
            ],
            [helper.make_tensor_value_info("x", f32, [2, 3])],
            [helper.make_tensor_value_info("out", f32, [2, 3])],
            [weights("w", 3)],
            opset=18,
            extra=[helper.make_opsetid("local", 1)],
            functions=[function],
        )
    )
    # a Loop with a carried value and a scan output, and an If
    body = helper.make_graph(
        [
            helper.make_node("Add", ["carried", "w"], ["next"]),
            # (the condition ends the loop by itself: a mutant without a trip count, which
            # ONNX runs until the condition is false, still stops)
            helper.make_node("Less", ["i", "limit"], ["keep"]),
            helper.make_node("ReduceSum", ["next"], ["total"], keepdims=0),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", i64, []),
            helper.make_tensor_value_info("condition", b, []),
            helper.make_tensor_value_info("carried", f32, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("keep", b, []),
            helper.make_tensor_value_info("next", f32, [2, 3]),
            helper.make_tensor_value_info("total", f32, []),
        ],
    )
    then = helper.make_graph(
        [helper.make_node("Neg", ["last"], ["picked"])],
        "then",
        [],
        [helper.make_tensor_value_info("picked", f32, [2, 3])],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["last"], ["kept"])],
        "else",
        [],
        [helper.make_tensor_value_info("kept", f32, [2, 3])],
    )
    models.append(
        model(
            [
                helper.make_node("Loop", ["trips", "go", "x"], ["last", "totals"], body=body),
                helper.make_node("ReduceSum", ["totals"], ["sum"], keepdims=0),
                helper.make_node("Greater", ["sum", "zero"], ["positive"]),
                helper.make_node("If", ["positive"], ["out"], then_branch=then,
                                 else_branch=other),
            ],
            [helper.make_tensor_value_info("x", f32, [2, 3])],
            [helper.make_tensor_value_info("out", f32, [2, 3])],
            [
                array("trips", np.array(3, np.int64)),
                array("limit", np.array(4, np.int64)),
                array("go", np.array(True)),
                weights("w", 2, 3),
                array("zero", np.float32(0)),
            ],
            opset=18,
        )
    )  # fmt: skip
    # onnxruntime's transformer fusions
    ms = "com.microsoft"
    models.append(
        model(
            [
                helper.make_node("SkipLayerNormalization", ["x", "skip", "g", "beta", "bias"],
                                 ["n"], domain=ms, epsilon=1e-5),
                helper.make_node("Attention", ["n", "qkv", "qkvb", "mask"], ["a"], domain=ms,
                                 num_heads=2),
                helper.make_node("MatMul", ["a", "up"], ["u"]),
                helper.make_node("BiasGelu", ["u", "ub"], ["bg"], domain=ms),
                helper.make_node("FastGelu", ["bg", "ub"], ["out"], domain=ms),
            ],
            [
                helper.make_tensor_value_info("x", f32, [2, 3, 4]),
                helper.make_tensor_value_info("skip", f32, [2, 3, 4]),
            ],
            [helper.make_tensor_value_info("out", f32, [2, 3, 6])],
            [
                weights("g", 4),
                weights("beta", 4),
                weights("bias", 4),
                weights("qkv", 4, 12),
                weights("qkvb", 12),
                array("mask", np.array([[1, 1, 1], [1, 1, 0]], np.int32)),
                weights("up", 4, 6),
                weights("ub", 6),
            ],
            opset=17,
            extra=[helper.make_opsetid(ms, 1)],
        )
    )  # fmt: skip
    return [m.SerializeToString() for m in models]


def run(data: bytes) -> None:
    """`fuzzing.run`, then a trainable import's forward and backward pass."""
    import onnx

    from ember.onnx import load

    fuzzing.run(data)
    module = load(data, trainable=True)
    arrays = fuzzing._inputs(onnx.load_from_string(data))
    if arrays is None:
        return
    with np.errstate(all="ignore"):
        out = module(*arrays)
        outs = out if isinstance(out, tuple) else (out,)
        total = None
        for o in outs:
            if o.dtype.is_floating_point:
                total = o.sum() if total is None else total + o.sum()
        if total is not None and total.requires_grad:
            total.backward()


def check(data: bytes) -> str | None:
    """The description of a non-ember error from `run`, or None."""
    import traceback

    from ember.errors import EmberError

    try:
        run(data)
    except EmberError:
        return None
    except Exception as err:  # noqa: BLE001 - what the fuzzer looks for
        frame = traceback.extract_tb(err.__traceback__)[-1]
        return f"{type(err).__name__}: {err} (at {frame.filename}:{frame.lineno})"
    return None


def _mutate(data: bytes, rng: random.Random) -> bytes:
    import onnx
    from onnx import TensorProto

    model = onnx.load_from_string(data)
    graph = model.graph
    choice = rng.randrange(10)
    if choice == 0 and model.functions:  # a local function's body
        function = rng.choice(list(model.functions))
        nodes = list(function.node)
        what = rng.randrange(4)
        if what == 0 and nodes:
            del function.node[rng.randrange(len(nodes))]
        elif what == 1 and nodes:
            function.node.append(rng.choice(nodes))
        elif what == 2:
            for node in function.node:
                for attr in node.attribute:
                    if attr.ref_attr_name:
                        attr.ref_attr_name = rng.choice(["nothing", "", "alpha"])
                        attr.type = rng.choice([1, 2, 3, 6])
        else:
            call = function.node.add()
            call.op_type, call.domain = function.name, function.domain
            call.input.append(function.input[0])
            call.output.append("again")
    elif choice == 1:  # value_info entries that disagree with the values
        names = [o for node in graph.node for o in node.output if o]
        if names:
            info = graph.value_info.add()
            info.name = rng.choice(names)
            tensor_type = info.type.tensor_type
            tensor_type.elem_type = rng.choice([1, 6, 7, 9, 10, 11])
            for _ in range(rng.randrange(4)):
                tensor_type.shape.dim.add().dim_value = rng.choice([0, 1, 7, 2**40])
    elif choice == 2 and graph.node:  # an extra or empty node output
        node = rng.choice(list(graph.node))
        if rng.random() < 0.5:
            node.output.append(rng.choice(["extra", "", node.output[0] if node.output else "x"]))
        elif node.output:
            node.output[rng.randrange(len(node.output))] = ""
    elif choice == 3 and graph.initializer:  # negative dims
        tensor = rng.choice(list(graph.initializer))
        tensor.dims.append(rng.choice([-1, -(2**40)]))
    elif choice == 4 and graph.initializer:  # raw data of the wrong length or kind
        tensor = rng.choice(list(graph.initializer))
        what = rng.randrange(4)
        if what == 0:
            tensor.raw_data = bytes(tensor.raw_data) + bytes(rng.randrange(1, 9))
        elif what == 1:
            tensor.float_data.extend([1.0, 2.0])
        elif what == 2:
            tensor.raw_data = b""
            tensor.string_data.append(b"not a number")
        else:
            tensor.raw_data = bytes(tensor.raw_data)[: rng.randrange(1, 5)]
    elif choice == 5 and graph.initializer:  # a sparse initializer
        dense = rng.choice(list(graph.initializer))
        sparse = graph.sparse_initializer.add()
        sparse.dims.extend(dense.dims or [4])
        sparse.values.CopyFrom(
            onnx.helper.make_tensor(dense.name, TensorProto.FLOAT, [2], [1.0, 2.0])
        )
        sparse.indices.CopyFrom(
            onnx.helper.make_tensor(
                "", TensorProto.INT64, [2], rng.choice([[0, 1], [-1, 2**40], [5, 5]])
            )
        )
        graph.initializer.remove(dense)
    elif choice == 6:  # the signature's metadata
        names = [t.name for t in graph.initializer] + ["nothing"]
        _mark(
            None,
            graph,
            rng.choice(names),
            rng.choice([KIND, FOLDED]),
            rng.choice(
                ["PARAMETER", "BUFFER", "CONSTANT_TENSOR", "USER_INPUT", "[", "['a'] * 9",
                 "[" * 200 + "]" * 200, "['g']", "42", ""]
            ),
        )  # fmt: skip
    elif choice == 7 and graph.node:  # an attribute of another type on a new operator
        node = rng.choice(list(graph.node))
        attr = node.attribute.add()
        attr.name = rng.choice(
            ["num_heads", "axis", "epsilon", "hidden_size", "direction", "upper", "is_causal",
             "q_num_heads", "scale", "softcap", "activations", "layout", "reverse"]
        )  # fmt: skip
        attr.type = rng.choice([1, 2, 3, 6, 7, 8])
        if attr.type == 2:
            attr.i = rng.choice([-1, 0, 3, 2**40])
        elif attr.type == 1:
            attr.f = rng.choice([float("nan"), -1.0, 0.0, 1e30])
        elif attr.type == 3:
            attr.s = rng.choice([b"", b"Tanh", b"\xff\xfe"])
        elif attr.type == 7:
            attr.ints.extend([rng.choice([-5, 0, 2**33])])
    else:
        return fuzzing._mutate_proto(data, rng)
    return model.SerializeToString()


def mutate(data: bytes, rng: random.Random) -> bytes:
    for _ in range(rng.choice((1, 1, 2))):
        try:
            data = _mutate(data, rng) if rng.random() < 0.7 else fuzzing.mutate(data, rng)
        except Exception:  # noqa: BLE001 - bytes an earlier mutation left unparseable
            data = fuzzing._mutate_bytes(data, rng)
    return data


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
