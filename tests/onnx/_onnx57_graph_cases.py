"""Hand-built ONNX graphs in the less common forms of their operators (onnx.helper), for
tests/onnx/test_onnx57_graph_forms.py: optional inputs and outputs left empty, negative axes
and indices, broadcasting, axes given as inputs, opset 11's 2-D Softmax, Slice steps, Split
with and without its input, Cast's saturation, LayerNormalization's mean and inverse standard
deviation, GroupNormalization's opset-18 scales, If/Loop/Scan reading outer-scope values,
sequence ops, Pad's negative pads, Resize's nearest modes, Einsum strings, int, bool, float16
and float64 graphs, attention written out. Each case is ``name -> () -> (model, feeds[, tol])``
drawn from one seeded generator per case."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as TP
from onnx import TypeProto
from onnx import helper as h
from onnx import numpy_helper as nh

CASES: dict = {}
N = h.make_node
rng = np.random.default_rng(0)


def case(name):
    def deco(fn):
        CASES[name] = fn
        return fn

    return deco


def reseed(name: str) -> None:
    """One generator per case, so a case draws the same arrays whichever runs first."""
    global rng
    rng = np.random.default_rng(sum(map(ord, name)))


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def i64(*values):
    return np.array(values, np.int64)


def _type(a):
    return h.np_dtype_to_tensor_dtype(a.dtype)


def model(nodes, inputs, outputs, inits=(), opset=18):
    """A model of ``nodes``; ``inputs`` (name, example array) pairs typed by the arrays, of
    unknown shape; ``outputs`` names of unstated type; ``inits`` (name, array) initializers."""
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info(n, _type(a), None) for n, a in inputs],
        [h.make_value_info(o, TypeProto()) for o in outputs],
        [nh.from_array(a, n) for n, a in inits],
    )
    ir = 8 if opset < 21 else 10
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=ir)


@case("softmax11_axis1_3d")
def _():
    return model(
        [
            N("Softmax", ["x"], ["y"], axis=1),
            N("LogSoftmax", ["x"], ["z"], axis=1),
            N("Hardmax", ["x"], ["w"], axis=1),
        ],
        [("x", f32(2, 3, 4))],
        ["y", "z", "w"],
        opset=11,
    ), {"x": f32(2, 3, 4)}


@case("gather_neg_int32")
def _():
    x = f32(4, 5, 3)
    return model(
        [N("Gather", ["x", "i"], ["y"], axis=-2), N("GatherElements", ["x", "j"], ["z"], axis=-1)],
        [("x", x)],
        ["y", "z"],
        [
            ("i", np.array([[-1, 0], [2, -5]], np.int32)),
            ("j", rng.integers(-3, 3, (4, 5, 2)).astype(np.int64)),
        ],
    ), {"x": x}


@case("gathernd_neg_dyn")
def _():
    x = f32(3, 4, 5)
    return model([N("GatherND", ["x", "i"], ["y"])], [("x", x), ("i", i64(0))], ["y"]), {
        "x": x,
        "i": np.array([[-1, 2], [0, -4]], np.int64),
    }


@case("scatternd_neg_max")
def _():
    x = f32(4, 3)
    return model(
        [N("ScatterND", ["x", "i", "u"], ["y"], reduction="max")],
        [("x", x), ("u", f32(2, 3))],
        ["y"],
        [("i", np.array([[-1], [0]], np.int64))],
    ), {"x": x, "u": f32(2, 3)}


@case("scatterelements_neg")
def _():
    x = f32(3, 4)
    return model(
        [N("ScatterElements", ["x", "i", "u"], ["y"], axis=-1, reduction="add")],
        [("x", x), ("u", f32(3, 2))],
        ["y"],
        [("i", np.array([[-1, 0], [1, -1], [2, 2]], np.int64))],
        opset=16,
    ), {"x": x, "u": f32(3, 2)}


@case("topk_smallest_dynk")
def _():
    x = f32(3, 7)
    return model(
        [N("TopK", ["x", "k"], ["v", "i"], axis=0, largest=0)],
        [("x", x), ("k", i64(2))],
        ["v", "i"],
    ), {"x": x, "k": i64(2)}


@case("reduce_axes_input_dyn")
def _():
    x = f32(2, 3, 4)
    nodes = [
        N("ReduceMean", ["x", "a"], ["y"], keepdims=1),
        N("ReduceSumSquare", ["x", "a"], ["z"], keepdims=0),
        N("ReduceMin", ["x", "e"], ["w"], noop_with_empty_axes=1),
        N("ReduceL1", ["x", ""], ["v"], keepdims=0),
    ]
    return model(
        nodes, [("x", x), ("a", i64(0))], ["y", "z", "w", "v"], [("e", np.zeros(0, np.int64))]
    ), {"x": x, "a": i64(-1, 0)}


@case("reduce13_sum_axes_input")
def _():
    x = f32(2, 3, 4)
    return model(
        [
            N("ReduceSum", ["x", "a"], ["y"], keepdims=0),
            N("ReduceMax", ["x"], ["z"], axes=[-1, 1], keepdims=1),
        ],
        [("x", x), ("a", i64(0))],
        ["y", "z"],
        opset=13,
    ), {"x": x, "a": i64(-2)}


@case("split13_input_and_attr11")
def _():
    x = f32(7, 4)
    return model(
        [N("Split", ["x", "s"], ["a", "b", "c"], axis=-2)],
        [("x", x)],
        ["a", "b", "c"],
        [("s", i64(1, 4, 2))],
        opset=13,
    ), {"x": x}


@case("split11_equal")
def _():
    x = f32(6, 4)
    return model(
        [N("Split", ["x"], ["a", "b", "c"], axis=0)], [("x", x)], ["a", "b", "c"], opset=11
    ), {"x": x}


@case("split18_uneven_dyn")
def _():
    x = f32(7, 4)
    return model(
        [N("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)], [("x", x)], ["a", "b", "c"]
    ), {"x": f32(8, 4)}


@case("slice_steps")
def _():
    x = f32(6, 7, 5)
    nodes = [
        N("Slice", ["x", "s", "e", "a", "st"], ["y"]),
        N("Slice", ["x", "s2", "e2"], ["z"]),
        N("Slice", ["x", "s3", "e3", "a3", "st3"], ["w"]),
    ]
    inits = [
        ("s", i64(-1, 1)),
        ("e", i64(-9223372036854775807, 100)),
        ("a", i64(0, -1)),
        ("st", i64(-2, 3)),
        ("s2", i64(2, -3)),
        ("e2", i64(-1, 7)),
        ("s3", i64(5)),
        ("e3", i64(0)),
        ("a3", i64(1)),
        ("st3", i64(-1)),
    ]
    return model(nodes, [("x", x)], ["y", "z", "w"], inits), {"x": x}


@case("slice_dyn_inputs")
def _():
    x = f32(6, 7)
    return model(
        [N("Slice", ["x", "s", "e", "a", "st"], ["y"])],
        [("x", x), ("s", i64(0)), ("e", i64(0)), ("a", i64(0)), ("st", i64(0))],
        ["y"],
    ), {"x": x, "s": i64(5, 1), "e": i64(0, 9), "a": i64(0, 1), "st": i64(-2, 2)}


@case("where_broadcast")
def _():
    return model(
        [N("Where", ["c", "a", "b"], ["y"])],
        [
            ("c", np.array([True, False, True])),
            ("a", f32(2, 1, 3)),
            ("b", np.float32(2.0).reshape(())),
        ],
        ["y"],
    ), {"c": np.array([[True, False, True]] * 4), "a": f32(2, 1, 3), "b": np.array(2.0, np.float32)}


@case("cast_saturate_f8")
def _():
    x = (f32(10) * 1000).astype(np.float32)
    nodes = [
        N("Cast", ["x"], ["a"], to=TP.FLOAT8E4M3FN, saturate=1),
        N("Cast", ["a"], ["y"], to=TP.FLOAT),
        N("Cast", ["x"], ["b"], to=TP.FLOAT8E5M2, saturate=0),
        N("Cast", ["b"], ["z"], to=TP.FLOAT),
    ]
    return model(nodes, [("x", x)], ["y", "z"], opset=19), {"x": x}


@case("cast_bf16_f16_double")
def _():
    x = f32(3, 4) * 100
    nodes = [
        N("Cast", ["x"], ["a"], to=TP.BFLOAT16),
        N("Cast", ["a"], ["y"], to=TP.FLOAT),
        N("Cast", ["x"], ["b"], to=TP.FLOAT16),
        N("CastLike", ["b", "d"], ["z"]),
        N("Cast", ["x"], ["c"], to=TP.INT8),
        N("Cast", ["x"], ["u"], to=TP.UINT8),
        N("Cast", ["x"], ["bo"], to=TP.BOOL),
    ]
    return model(
        nodes, [("x", x), ("d", np.zeros(1, np.float64))], ["y", "z", "c", "u", "bo"], opset=19
    ), {"x": x, "d": np.zeros(1, np.float64)}


@case("layernorm_stash")
def _():
    x = f32(2, 3, 4)
    return model(
        [N("LayerNormalization", ["x", "g", "b"], ["y", "m", "r"], axis=1, epsilon=1e-3)],
        [("x", x)],
        ["y", "m", "r"],
        [("g", f32(3, 4)), ("b", f32(4))],
        opset=17,
    ), {"x": x}


@case("layernorm_f16")
def _():
    x = f32(2, 3, 8).astype(np.float16)
    return (
        model(
            [N("LayerNormalization", ["x", "g", "b"], ["y"])],
            [("x", x)],
            ["y"],
            [("g", f32(8).astype(np.float16)), ("b", f32(8).astype(np.float16))],
            opset=17,
        ),
        {"x": x},
        3e-3,
    )


@case("layernorm_double")
def _():
    x = f32(2, 3, 8).astype(np.float64)
    return model(
        [N("LayerNormalization", ["x", "g", "b"], ["y", "m", "r"], axis=-2)],
        [("x", x)],
        ["y", "m", "r"],
        [("g", f32(3, 8).astype(np.float64)), ("b", f32(8).astype(np.float64))],
        opset=17,
    ), {"x": x}


@case("groupnorm18")
def _():
    x = f32(2, 6, 5)
    return model(
        [N("GroupNormalization", ["x", "g", "b"], ["y"], num_groups=3, epsilon=1e-2)],
        [("x", x)],
        ["y"],
        [("g", f32(3)), ("b", f32(3))],
        opset=18,
    ), {"x": x}


@case("if_outer_scope")
def _():
    x = f32(3, 4)
    then = h.make_graph(
        [N("Add", ["x", "w"], ["t"]), N("Relu", ["t"], ["o"])],
        "then",
        [],
        [h.make_tensor_value_info("o", TP.FLOAT, None)],
    )
    els = h.make_graph(
        [N("Mul", ["x", "w"], ["o2"])], "else", [], [h.make_tensor_value_info("o2", TP.FLOAT, None)]
    )
    nodes = [
        N("ReduceSum", ["x"], ["s"], keepdims=0),
        N("Greater", ["s", "zero"], ["c"]),
        N("If", ["c"], ["y"], then_branch=then, else_branch=els),
    ]
    return model(nodes, [("x", x)], ["y"], [("w", f32(4)), ("zero", np.array(0, np.float32))]), {
        "x": x
    }


@case("loop_outer_scope_scan_out")
def _():
    x = f32(3)
    body = h.make_graph(
        [
            N("Add", ["v", "w"], ["v2"]),
            N("Cast", ["i"], ["i_f"], to=TP.FLOAT),
            N("Mul", ["v2", "i_f"], ["sc"]),
            N("Identity", ["cond"], ["cond2"]),
        ],
        "body",
        [
            h.make_tensor_value_info("i", TP.INT64, []),
            h.make_tensor_value_info("cond", TP.BOOL, []),
            h.make_tensor_value_info("v", TP.FLOAT, None),
        ],
        [
            h.make_tensor_value_info("cond2", TP.BOOL, []),
            h.make_tensor_value_info("v2", TP.FLOAT, None),
            h.make_tensor_value_info("sc", TP.FLOAT, None),
        ],
    )
    nodes = [N("Loop", ["n", "", "x"], ["y", "s"], body=body)]
    return model(nodes, [("x", x), ("n", i64(4).reshape(()))], ["y", "s"], [("w", f32(3))]), {
        "x": x,
        "n": np.array(4, np.int64),
    }


@case("loop_cond_only")
def _():
    x = np.array([1.0], np.float32)
    body = h.make_graph(
        [
            N("Mul", ["v", "two"], ["v2"]),
            N("ReduceSum", ["v2"], ["s"], keepdims=0),
            N("Less", ["s", "lim"], ["c2"]),
        ],
        "body",
        [
            h.make_tensor_value_info("i", TP.INT64, []),
            h.make_tensor_value_info("cond", TP.BOOL, []),
            h.make_tensor_value_info("v", TP.FLOAT, None),
        ],
        [
            h.make_tensor_value_info("c2", TP.BOOL, []),
            h.make_tensor_value_info("v2", TP.FLOAT, None),
        ],
    )
    return model(
        [N("Loop", ["", "c", "x"], ["y"], body=body)],
        [("x", x), ("c", np.array(True))],
        ["y"],
        [("two", np.array(2, np.float32)), ("lim", np.array(100, np.float32))],
    ), {"x": x, "c": np.array(True)}


@case("scan_outer_reverse")
def _():
    x = f32(5, 3)
    body = h.make_graph(
        [
            N("Add", ["acc", "xi"], ["t"]),
            N("Mul", ["t", "w"], ["acc2"]),
            N("Identity", ["acc2"], ["o"]),
        ],
        "b",
        [
            h.make_tensor_value_info("acc", TP.FLOAT, [3]),
            h.make_tensor_value_info("xi", TP.FLOAT, [3]),
        ],
        [
            h.make_tensor_value_info("acc2", TP.FLOAT, [3]),
            h.make_tensor_value_info("o", TP.FLOAT, [3]),
        ],
    )
    return model(
        [
            N(
                "Scan",
                ["a0", "x"],
                ["af", "ys"],
                body=body,
                num_scan_inputs=1,
                scan_input_directions=[1],
                scan_output_axes=[-1],
            )
        ],
        [("a0", np.zeros(3, np.float32)), ("x", x)],
        ["af", "ys"],
        [("w", np.full(3, 0.5, np.float32))],
    ), {"a0": np.zeros(3, np.float32), "x": x}


@case("sequence_ops")
def _():
    a, b = f32(2, 3), f32(4, 3)
    nodes = [
        N("SequenceConstruct", ["a", "b"], ["s"]),
        N("SequenceInsert", ["s", "a", "pos"], ["s2"]),
        N("SequenceAt", ["s2", "neg"], ["y"]),
        N("SequenceErase", ["s2", "neg"], ["s3"]),
        N("SequenceLength", ["s3"], ["n"]),
        N("ConcatFromSequence", ["s3"], ["c"], axis=-2),
        N("SplitToSequence", ["b", "sp"], ["s4"], axis=0),
        N("ConcatFromSequence", ["s4"], ["d"], axis=0, new_axis=0),
        N("SplitToSequence", ["a"], ["s5"], axis=1, keepdims=0),
        N("ConcatFromSequence", ["s5"], ["e"], axis=-1, new_axis=1),
    ]
    return model(
        nodes,
        [("a", a), ("b", b)],
        ["y", "n", "c", "d", "e"],
        [("pos", i64(-1).reshape(())), ("neg", i64(-2).reshape(())), ("sp", i64(3, 1))],
    ), {"a": a, "b": b}


@case("sequence_empty_map")
def _():
    a = f32(2, 3)
    body = h.make_graph(
        [N("Relu", ["t"], ["u"])],
        "m",
        [h.make_tensor_value_info("t", TP.FLOAT, None)],
        [h.make_tensor_value_info("u", TP.FLOAT, None)],
    )
    nodes = [
        N("SequenceEmpty", [], ["s"], dtype=TP.FLOAT),
        N("SequenceInsert", ["s", "a"], ["s1"]),
        N("SequenceInsert", ["s1", "a", "z"], ["s2"]),
        N("SequenceMap", ["s2"], ["s3"], body=body),
        N("SequenceAt", ["s3", "z"], ["y"]),
    ]
    return model(nodes, [("a", a)], ["y"], [("z", i64(0).reshape(()))], opset=17), {"a": a}
