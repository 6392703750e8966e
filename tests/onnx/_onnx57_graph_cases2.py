"""More hand-built ONNX graphs for tests/onnx/test_onnx57_graph_forms.py (see
_onnx57_graph_cases.py): declared input shapes with symbolic sizes, values passed straight
to outputs, Constant's attribute forms, skipped optional outputs, a uint8 image's
preprocessing, empty tensors, the shape arithmetic exporters write, per-axis and blocked
quantization, windows/STFT/mel matrices, losses with ignore_index, recurrent nodes in
ONNX's other configurations, nested If returning sequences, a Loop growing its state."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as TP
from onnx import TypeProto
from onnx import helper as h
from onnx import numpy_helper as nh

from . import _onnx57_graph_cases as base
from ._onnx57_graph_cases import i64

CASES: dict = {}
N = h.make_node


def case(name):
    def deco(fn):
        CASES[name] = fn
        return fn

    return deco


def f32(*shape):
    return base.rng.standard_normal(shape).astype(np.float32)


def model_raw(nodes, inputs_vi, outputs, inits=(), opset=13, ir=8):
    g = h.make_graph(
        nodes,
        "g",
        inputs_vi,
        [h.make_value_info(o, TypeProto()) for o in outputs],
        [nh.from_array(a, n) for n, a in inits],
    )
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=ir)


@case("passthrough_outputs")
def _():
    x = f32(2, 3)
    m = model_raw(
        [N("Relu", ["x"], ["y"])],
        [h.make_tensor_value_info("x", TP.FLOAT, ["b", 3])],
        ["y", "x", "c", "y"],
        [("c", f32(4))],
    )
    return m, {"x": x}


@case("constant_forms")
def _():
    x = f32(3)
    nodes = [
        N("Constant", [], ["a"], value_floats=[1.0, 2.0, 3.0]),
        N("Constant", [], ["b"], value_int=2),
        N("Constant", [], ["c"], value_ints=[3]),
        N("Constant", [], ["d"], value_float=0.5),
        N("Cast", ["b"], ["bf"], to=TP.FLOAT),
        N("Mul", ["x", "a"], ["t"]),
        N("Add", ["t", "bf"], ["t2"]),
        N("Mul", ["t2", "d"], ["y"]),
        N(
            "Constant",
            [],
            ["sp"],
            sparse_value=h.make_sparse_tensor(
                nh.from_array(np.array([5.0], np.float32), "v"),
                nh.from_array(np.array([1], np.int64), "i"),
                [3],
            ),
        ),
        N("Add", ["y", "sp"], ["z"]),
        N("Reshape", ["z", "c"], ["w"]),
    ]
    return model_raw(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [3])], ["w"]), {"x": x}


@case("empty_optional_outputs")
def _():
    x = f32(1, 2, 6, 6)
    xs = f32(4, 2, 3)
    nodes = [
        N("MaxPool", ["x"], ["y", ""], kernel_shape=[2, 2]),
        N("Dropout", ["y"], ["z", ""]),
        N("LSTM", ["xs", "W", "R", "", "", "", ""], ["", "h", ""], hidden_size=5),
    ]
    return model_raw(
        nodes,
        [
            h.make_tensor_value_info("x", TP.FLOAT, None),
            h.make_tensor_value_info("xs", TP.FLOAT, None),
        ],
        ["z", "h"],
        [("W", f32(1, 20, 3)), ("R", f32(1, 20, 5))],
        opset=14,
    ), {"x": x, "xs": xs}


@case("uint8_image_preproc")
def _():
    img = base.rng.integers(0, 255, (1, 5, 6, 3)).astype(np.uint8)
    nodes = [
        N("Transpose", ["img"], ["t"], perm=[0, 3, 1, 2]),
        N("Resize", ["t", "", "sc"], ["r"], mode="nearest"),
        N("Cast", ["r"], ["f"], to=TP.FLOAT),
        N("Div", ["f", "c255"], ["n"]),
        N("Sub", ["n", "mean"], ["y"]),
        N("Resize", ["t", "", "", "sz"], ["r2"], mode="linear"),
        N("Concat", ["t", "t"], ["cc"], axis=1),
        N("ArgMax", ["cc"], ["am"], axis=1),
    ]
    return model_raw(
        nodes,
        [h.make_tensor_value_info("img", TP.UINT8, [1, "h", "w", 3])],
        ["y", "r2", "am"],
        [
            ("sc", np.array([1, 1, 2, 2], np.float32)),
            ("sz", i64(1, 3, 7, 9)),
            ("c255", np.array(255, np.float32)),
            ("mean", np.array([0.5, 0.4, 0.3], np.float32).reshape(1, 3, 1, 1)),
        ],
        opset=13,
    ), {"img": img}


@case("scalar_zero_size")
def _():
    x = np.zeros((0, 3), np.float32)
    s = np.array(2.5, np.float32)
    nodes = [
        N("Mul", ["x", "s"], ["y"]),
        N("ReduceSum", ["x"], ["z"], axes=[0], keepdims=0),
        N("ReduceMax", ["x"], ["w"], axes=[1], keepdims=0),
        N("Concat", ["x", "x"], ["c"], axis=0),
        N("MatMul", ["x", "m"], ["mm"]),
    ]
    return model_raw(
        nodes,
        [
            h.make_tensor_value_info("x", TP.FLOAT, ["n", 3]),
            h.make_tensor_value_info("s", TP.FLOAT, []),
        ],
        ["y", "z", "w", "c", "mm"],
        [("m", f32(3, 2))],
        opset=11,
    ), {"x": x, "s": s}


@case("squeeze_unsqueeze_forms")
def _():
    x = f32(1, 3, 1, 4)
    nodes = [
        N("Squeeze", ["x"], ["a"]),
        N("Unsqueeze", ["a", "ax"], ["b"]),
        N("Squeeze", ["x", "ax2"], ["c"]),
        N("Unsqueeze", ["c", "ax3"], ["d"]),
    ]
    return model_raw(
        nodes,
        [h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 1, 4])],
        ["a", "b", "c", "d"],
        [("ax", i64(-1, 0)), ("ax2", i64(-2)), ("ax3", i64(-1, 1, -3))],
        opset=13,
    ), {"x": x}


@case("unsqueeze11_attr")
def _():
    x = f32(3, 4)
    return model_raw(
        [N("Unsqueeze", ["x"], ["y"], axes=[-1, 0]), N("Squeeze", ["y"], ["z"], axes=[-1])],
        [h.make_tensor_value_info("x", TP.FLOAT, [3, 4])],
        ["y", "z"],
        opset=11,
    ), {"x": x}


@case("dynamic_reshape_chain")
def _():
    nodes = [
        N("Shape", ["x"], ["s"]),
        N("Gather", ["s", "i0"], ["b"]),
        N("Gather", ["s", "i1"], ["t"]),
        N("Unsqueeze", ["b", "z"], ["bu"]),
        N("Unsqueeze", ["t", "z"], ["tu"]),
        N("Concat", ["bu", "tu", "h", "m1", "empty"], ["shp"], axis=0),
        N("Reshape", ["x", "shp"], ["y"]),
        N("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3]),
        N("Div", ["t", "two"], ["half"]),
        N("Unsqueeze", ["half", "z"], ["hu"]),
        N("Slice", ["x", "zero1", "hu", "one1"], ["sl"]),
        N("Expand", ["one_f", "s"], ["ones"]),
        N("Add", ["x", "ones"], ["xp"]),
    ]
    inits = [
        ("i0", i64(0).reshape(())),
        ("i1", i64(1).reshape(())),
        ("z", i64(0)),
        ("h", i64(2)),
        ("m1", i64(-1)),
        ("empty", np.zeros(0, np.int64)),
        ("two", i64(2).reshape(())),
        ("zero1", i64(0)),
        ("one1", i64(1)),
        ("one_f", np.ones(1, np.float32)),
    ]
    return model_raw(
        nodes,
        [h.make_tensor_value_info("x", TP.FLOAT, ["B", "T", 8])],
        ["yt", "sl", "xp"],
        inits,
        opset=13,
    ), {"x": f32(3, 6, 8)}


@case("expand_bidirectional")
def _():
    x = f32(3, 4)
    return model_raw(
        [N("Expand", ["x", "s"], ["y"]), N("Expand", ["x", "s2"], ["z"])],
        [h.make_tensor_value_info("x", TP.FLOAT, [3, 4])],
        ["y", "z"],
        [("s", i64(1)), ("s2", i64(2, 1, 1))],
    ), {"x": x}


@case("matmul_1d")
def _():
    a, b, c = f32(4), f32(2, 4, 3), f32(3)
    return model_raw(
        [
            N("MatMul", ["a", "b"], ["y"]),
            N("MatMul", ["b", "c"], ["z"]),
            N("MatMul", ["a", "a"], ["w"]),
        ],
        [h.make_tensor_value_info(n, TP.FLOAT, None) for n in "abc"],
        ["y", "z", "w"],
    ), {"a": a, "b": b, "c": c}


@case("conv1d_group_nobias_conv3d_asym")
def _():
    x, v = f32(2, 4, 9), f32(1, 2, 5, 6, 4)
    nodes = [
        N("Conv", ["x", "w"], ["y"], group=2, pads=[2, 0], strides=[2], dilations=[2]),
        N("Conv", ["v", "w3", "b3"], ["z"], pads=[0, 1, 1, 1, 0, 2], strides=[1, 2, 1]),
    ]
    return model_raw(
        nodes,
        [
            h.make_tensor_value_info("x", TP.FLOAT, None),
            h.make_tensor_value_info("v", TP.FLOAT, None),
        ],
        ["y", "z"],
        [("w", f32(6, 2, 3)), ("w3", f32(3, 2, 2, 3, 2)), ("b3", f32(3))],
    ), {"x": x, "v": v}


@case("quant_per_axis_blocked")
def _():
    x = f32(4, 6)
    nodes = [
        N("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=0),
        N("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=0),
        N("QuantizeLinear", ["x", "sb", "zb"], ["qb"], axis=1, block_size=3),
        N("DequantizeLinear", ["qb", "sb", "zb"], ["yb"], axis=1, block_size=3),
        N("QuantizeLinear", ["x", "s16"], ["q16"]),
        N("DequantizeLinear", ["q16", "s16"], ["y16"]),
    ]
    inits = [
        ("s", np.array([0.01, 0.02, 0.03, 0.05], np.float32)),
        ("zp", np.array([0, 10, -5, 3], np.int8)),
        ("sb", np.abs(f32(4, 2)) * 0.02 + 0.01),
        ("zb", base.rng.integers(0, 20, (4, 2)).astype(np.uint8)),
        ("s16", np.array(0.01, np.float32)),
    ]
    return model_raw(
        nodes,
        [h.make_tensor_value_info("x", TP.FLOAT, None)],
        ["q", "y", "qb", "yb", "q16", "y16"],
        inits,
        opset=21,
        ir=10,
    ), {"x": x}


@case("dequant_f16_scale")
def _():
    q = base.rng.integers(-100, 100, (3, 4)).astype(np.int8)
    return model_raw(
        [N("DequantizeLinear", ["q", "s"], ["y"])],
        [h.make_tensor_value_info("q", TP.INT8, None)],
        ["y"],
        [("s", np.array(0.05, np.float16))],
        opset=19,
        ir=9,
    ), {"q": q}


@case("windows_stft_mel")
def _():
    x = f32(1, 64)
    nodes = [
        N("HannWindow", ["n"], ["w"], periodic=1),
        N("HammingWindow", ["n"], ["w2"], periodic=0),
        N("BlackmanWindow", ["n"], ["w3"]),
        N("STFT", ["x", "step", "w", "n"], ["sp"], onesided=1),
        N("MelWeightMatrix", ["nm", "dft", "sr", "lo", "hi"], ["mel"]),
    ]
    inits = [
        ("n", np.array(16, np.int64)),
        ("step", np.array(4, np.int64)),
        ("nm", np.array(5, np.int64)),
        ("dft", np.array(16, np.int64)),
        ("sr", np.array(8000, np.int64)),
        ("lo", np.array(100, np.float32)),
        ("hi", np.array(3000, np.float32)),
    ]
    return (
        model_raw(
            nodes,
            [h.make_tensor_value_info("x", TP.FLOAT, None)],
            ["w", "w2", "w3", "sp", "mel"],
            inits,
            opset=17,
        ),
        {"x": x},
        1e-4,
    )


@case("losses_ignore_index")
def _():
    x = f32(3, 5, 2)
    t = np.array([[1, -1], [4, 0], [-1, 2]], np.int64)
    nodes = [
        N(
            "SoftmaxCrossEntropyLoss",
            ["x", "t", "w"],
            ["l", "lp"],
            ignore_index=-1,
            reduction="mean",
        ),
        N("NegativeLogLikelihoodLoss", ["x", "t"], ["n"], ignore_index=-1, reduction="sum"),
        N("SoftmaxCrossEntropyLoss", ["x", "t"], ["l2"], ignore_index=-1, reduction="none"),
    ]
    return model_raw(
        nodes,
        [
            h.make_tensor_value_info("x", TP.FLOAT, None),
            h.make_tensor_value_info("t", TP.INT64, None),
        ],
        ["l", "lp", "n", "l2"],
        [("w", np.abs(f32(5)))],
        opset=13,
    ), {"x": x, "t": t}


@case("gru_lbr0_rnn_reverse_lens")
def _():
    x = f32(5, 2, 3)
    nodes = [
        N(
            "GRU",
            ["x", "W", "R", "B", "L"],
            ["y", "h"],
            hidden_size=4,
            linear_before_reset=0,
            direction="bidirectional",
        ),
        N(
            "RNN",
            ["x", "Wr", "Rr", "", "L"],
            ["y2", "h2"],
            hidden_size=4,
            direction="reverse",
            activations=["Relu"],
        ),
        N(
            "LSTM",
            ["x", "Wl", "Rl", "Bl", "L", "", "", "P"],
            ["y3", "h3", "c3"],
            hidden_size=4,
            input_forget=0,
            layout=0,
        ),
    ]
    inits = [
        ("W", f32(2, 12, 3) * 0.5),
        ("R", f32(2, 12, 4) * 0.5),
        ("B", f32(2, 24) * 0.5),
        ("L", np.array([5, 3], np.int32)),
        ("Wr", f32(1, 4, 3) * 0.5),
        ("Rr", f32(1, 4, 4) * 0.5),
        ("Wl", f32(1, 16, 3) * 0.5),
        ("Rl", f32(1, 16, 4) * 0.5),
        ("Bl", f32(1, 32) * 0.5),
        ("P", f32(1, 12) * 0.5),
    ]
    return model_raw(
        nodes,
        [h.make_tensor_value_info("x", TP.FLOAT, None)],
        ["y", "h", "y2", "h2", "y3", "h3", "c3"],
        inits,
        opset=14,
    ), {"x": x}


@case("lrn_hardmax13")
def _():
    x = f32(2, 5, 3, 3)
    return model_raw(
        [
            N("LRN", ["x"], ["y"], size=3, alpha=1e-2, beta=0.6, bias=2.0),
            N("Hardmax", ["x"], ["z"], axis=1),
        ],
        [h.make_tensor_value_info("x", TP.FLOAT, None)],
        ["y", "z"],
    ), {"x": x}


@case("det_inverse")
def _():
    x = f32(2, 3, 3)
    return (
        model_raw(
            [N("Det", ["x"], ["y"])],
            [h.make_tensor_value_info("x", TP.FLOAT, None)],
            ["y"],
            opset=11,
        ),
        {"x": x},
        1e-4,
    )


@case("concat_empty_int")
def _():
    x = base.rng.integers(0, 5, (2, 3)).astype(np.int32)
    return model_raw(
        [N("Concat", ["x", "e", "x"], ["y"], axis=-1)],
        [h.make_tensor_value_info("x", TP.INT32, None)],
        ["y"],
        [("e", np.zeros((2, 0), np.int32))],
    ), {"x": x}


@case("if_returns_sequence_and_nested")
def _():
    x = f32(3)
    inner_t = h.make_graph(
        [N("Neg", ["x"], ["o"])], "it", [], [h.make_tensor_value_info("o", TP.FLOAT, None)]
    )
    inner_e = h.make_graph(
        [N("Abs", ["x"], ["o2"])], "ie", [], [h.make_tensor_value_info("o2", TP.FLOAT, None)]
    )
    then = h.make_graph(
        [
            N("If", ["c2"], ["r"], then_branch=inner_t, else_branch=inner_e),
            N("SequenceConstruct", ["r", "x"], ["s"]),
        ],
        "then",
        [],
        [h.make_tensor_sequence_value_info("s", TP.FLOAT, None)],
    )
    els = h.make_graph(
        [N("SequenceConstruct", ["x"], ["s2"])],
        "else",
        [],
        [h.make_tensor_sequence_value_info("s2", TP.FLOAT, None)],
    )
    nodes = [
        N("If", ["c"], ["seq"], then_branch=then, else_branch=els),
        N("ConcatFromSequence", ["seq"], ["y"], axis=0),
    ]
    return model_raw(
        nodes,
        [
            h.make_tensor_value_info("x", TP.FLOAT, None),
            h.make_tensor_value_info("c", TP.BOOL, []),
            h.make_tensor_value_info("c2", TP.BOOL, []),
        ],
        ["y"],
        opset=13,
    ), {"x": x, "c": np.array(True), "c2": np.array(False)}


@case("loop_dynamic_concat_growth")
def _():
    x = f32(1, 3)
    body = h.make_graph(
        [
            N("Concat", ["acc", "xx"], ["acc2"], axis=0),
            N("Identity", ["cond"], ["c2"]),
            N("Shape", ["acc2"], ["sh"]),
        ],
        "b",
        [
            h.make_tensor_value_info("i", TP.INT64, []),
            h.make_tensor_value_info("cond", TP.BOOL, []),
            h.make_tensor_value_info("acc", TP.FLOAT, None),
        ],
        [
            h.make_tensor_value_info("c2", TP.BOOL, []),
            h.make_tensor_value_info("acc2", TP.FLOAT, None),
            h.make_tensor_value_info("sh", TP.INT64, None),
        ],
    )
    nodes = [N("Identity", ["x"], ["xx"]), N("Loop", ["n", "t", "x"], ["y", "shapes"], body=body)]
    return model_raw(
        nodes,
        [
            h.make_tensor_value_info("x", TP.FLOAT, None),
            h.make_tensor_value_info("n", TP.INT64, []),
        ],
        ["y", "shapes"],
        [("t", np.array(True))],
    ), {"x": x, "n": np.array(3, np.int64)}


@case("float16_resize_pool_norm")
def _():
    x = f32(1, 4, 6, 6).astype(np.float16)
    nodes = [
        N("Resize", ["x", "", "sc"], ["r"], mode="linear"),
        N("AveragePool", ["r"], ["p"], kernel_shape=[3, 3], strides=[3, 3]),
        N("InstanceNormalization", ["p", "g", "b"], ["y"]),
        N("GlobalAveragePool", ["x"], ["gp"]),
        N("ReduceMean", ["x"], ["rm"], axes=[2, 3]),
    ]
    return (
        model_raw(
            nodes,
            [h.make_tensor_value_info("x", TP.FLOAT16, None)],
            ["y", "gp", "rm"],
            [
                ("sc", np.array([1, 1, 1.5, 1.5], np.float32)),
                ("g", f32(4).astype(np.float16)),
                ("b", f32(4).astype(np.float16)),
            ],
            opset=13,
        ),
        {"x": x},
        5e-3,
    )


@case("gather_scalar_index_rank0")
def _():
    x = f32(4, 5)
    return model_raw(
        [N("Gather", ["x", "i"], ["y"], axis=1), N("Gather", ["x", "j"], ["z"], axis=0)],
        [
            h.make_tensor_value_info("x", TP.FLOAT, None),
            h.make_tensor_value_info("i", TP.INT64, []),
        ],
        ["y", "z"],
        [("j", np.array([[3, -4]], np.int64))],
    ), {"x": x, "i": np.array(-2, np.int64)}
