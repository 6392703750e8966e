"""More hand-built ONNX graphs for tests/onnx/test_onnx57_graph_forms.py (see
_onnx57_graph_cases.py; split from _onnx57_graph_cases3.py): float16 convolution and softmax,
pooling, convolution and activation attributes, element tests and rounding, EyeLike and
ConstantOfShape, normalizations (BatchNormalization's training outputs, instance, Lp, MVN),
mixed Pow, ReverseSequence and GatherElements, CenterCropPad and Col2Im, AffineGrid and GELU,
Optional's operators, attention written out in float32 and float16."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

from . import _onnx57_graph_cases as base
from ._onnx57_graph_cases import i64, model

CASES: dict = {}
N = h.make_node


def case(name):
    def deco(fn):
        CASES[name] = fn
        return fn

    return deco


def f32(*shape):
    return base.rng.standard_normal(shape).astype(np.float32)


@case("f16_conv_softmax")
def _():
    x = f32(1, 3, 8, 8).astype(np.float16)
    return (
        model(
            [
                N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2]),
                N("Relu", ["y"], ["r"]),
                N("Flatten", ["r"], ["f"]),
                N("Softmax", ["f"], ["s"], axis=-1),
            ],
            [("x", x)],
            ["s"],
            [("w", (f32(4, 3, 3, 3) * 0.2).astype(np.float16))],
            opset=13,
        ),
        {"x": x},
        2e-3,
    )


@case("maxpool_indices_dil")
def _():
    x = f32(1, 2, 7, 8)
    return model(
        [
            N(
                "MaxPool",
                ["x"],
                ["y", "i"],
                kernel_shape=[3, 2],
                strides=[2, 2],
                dilations=[1, 2],
                ceil_mode=1,
                pads=[1, 0, 1, 1],
            ),
            N("MaxPool", ["x"], ["z", "j"], kernel_shape=[2, 2], storage_order=1),
        ],
        [("x", x)],
        ["y", "i", "z", "j"],
        opset=12,
    ), {"x": x}


@case("lppool_globallp")
def _():
    x = f32(1, 2, 6, 6)
    return model(
        [
            N("LpPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], p=3, pads=[1, 1, 1, 1]),
            N("GlobalLpPool", ["x"], ["z"], p=1),
        ],
        [("x", x)],
        ["y", "z"],
        opset=18,
    ), {"x": x}


@case("convtranspose_outshape_same")
def _():
    x = f32(1, 4, 5, 5)
    return model(
        [
            N("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_shape=[12, 11], group=2),
            N("ConvTranspose", ["x", "w"], ["z"], strides=[2, 2], auto_pad="SAME_UPPER", group=2),
            N(
                "ConvTranspose",
                ["x", "w", "b"],
                ["v"],
                strides=[3, 2],
                pads=[1, 0, 0, 2],
                output_padding=[2, 1],
                dilations=[1, 2],
                group=2,
            ),
        ],
        [("x", x)],
        ["y", "z", "v"],
        [("w", f32(4, 3, 3, 3)), ("b", f32(6))],
        opset=11,
    ), {"x": x}


@case("conv_same_lower")
def _():
    x = f32(1, 2, 7, 8)
    return model(
        [
            N("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER", strides=[2, 3]),
            N("Conv", ["x", "w"], ["z"], auto_pad="VALID", dilations=[2, 1]),
            N("Conv", ["x", "w"], ["v"], auto_pad="SAME_UPPER"),
        ],
        [("x", x)],
        ["y", "z", "v"],
        [("w", f32(3, 2, 3, 2))],
        opset=11,
    ), {"x": x}


@case("activations_attrs")
def _():
    x = f32(3, 4) * 3
    nodes = [
        N("HardSigmoid", ["x"], ["a"], alpha=0.3, beta=0.4),
        N("Selu", ["x"], ["b"], alpha=1.5, gamma=2.0),
        N("Celu", ["x"], ["c"], alpha=0.7),
        N("ThresholdedRelu", ["x"], ["d"], alpha=0.5),
        N("Shrink", ["x"], ["e"], lambd=0.8, bias=0.3),
        N("LeakyRelu", ["x"], ["f"], alpha=0.2),
        N("Elu", ["x"], ["g"], alpha=0.4),
        N("Softplus", ["x"], ["hh"]),
        N("Softsign", ["x"], ["i"]),
        N("Mish", ["x"], ["j"]),
        N("Gelu", ["x"], ["k"], approximate="tanh"),
        N("HardSwish", ["x"], ["l"]),
    ]
    return model(nodes, [("x", x)], list("abcdefg") + ["hh", "i", "j", "k", "l"], opset=20), {
        "x": x
    }


@case("isnan_isinf_round")
def _():
    x = np.array([np.nan, np.inf, -np.inf, 0.5, 1.5, 2.5, -0.5, -2.5], np.float32)
    return model(
        [
            N("IsNaN", ["x"], ["a"]),
            N("IsInf", ["x"], ["b"], detect_negative=0),
            N("IsInf", ["x"], ["c"], detect_positive=0),
            N("Round", ["x"], ["d"]),
            N("Sign", ["x"], ["e"]),
        ],
        [("x", x)],
        list("abcde"),
        opset=13,
    ), {"x": x}


@case("eyelike_constofshape")
def _():
    x = f32(3, 5)
    return model(
        [
            N("EyeLike", ["x"], ["a"], k=-1, dtype=TP.INT32),
            N("Shape", ["x"], ["s"]),
            N("ConstantOfShape", ["s"], ["b"], value=nh.from_array(np.array([7], np.int64))),
            N("ConstantOfShape", ["e"], ["c"]),
        ],
        [("x", x)],
        ["a", "b", "c"],
        [("e", np.zeros(0, np.int64))],
        opset=13,
    ), {"x": x}


@case("bn_training_outputs")
def _():
    x = f32(4, 3, 2, 2)
    return model(
        [
            N(
                "BatchNormalization",
                ["x", "g", "b", "m", "v"],
                ["y", "rm", "rv"],
                training_mode=1,
                momentum=0.8,
            )
        ],
        [("x", x)],
        ["y", "rm", "rv"],
        [("g", f32(3)), ("b", f32(3)), ("m", f32(3)), ("v", np.abs(f32(3)))],
        opset=15,
    ), {"x": x}


@case("instnorm_lpnorm_mvn")
def _():
    x = f32(2, 3, 4, 5)
    return model(
        [
            N("InstanceNormalization", ["x", "g", "b"], ["a"], epsilon=1e-3),
            N("LpNormalization", ["x"], ["c"], p=1, axis=-2),
            N("MeanVarianceNormalization", ["x"], ["d"], axes=[1, 3]),
        ],
        [("x", x)],
        ["a", "c", "d"],
        [("g", f32(3)), ("b", f32(3))],
        opset=13,
    ), {"x": x}


@case("pow_mixed")
def _():
    x = np.abs(f32(3, 4)) + 0.5
    xi = base.rng.integers(1, 5, (3, 4)).astype(np.int64)
    return model(
        [
            N("Pow", ["x", "e"], ["a"]),
            N("Pow", ["xi", "ei"], ["b"]),
            N("Pow", ["x", "xi"], ["c"]),
            N("Pow", ["xi", "ef"], ["d"]),
        ],
        [("x", x), ("xi", xi)],
        list("abcd"),
        [
            ("e", np.array(2, np.int64)),
            ("ei", np.array(3, np.int32)),
            ("ef", np.array(2.0, np.float32)),
        ],
        opset=15,
    ), {"x": x, "xi": xi}


@case("reversesequence_gatherelements")
def _():
    x = f32(4, 3, 2)
    return model(
        [N("ReverseSequence", ["x", "l"], ["y"], batch_axis=1, time_axis=0)],
        [("x", x)],
        ["y"],
        [("l", i64(4, 1, 3))],
        opset=10,
    ), {"x": x}


@case("centercroppad_col2im")
def _():
    x = f32(2, 5, 7)
    c = f32(1, 2 * 4, 6)
    return model(
        [
            N("CenterCropPad", ["x", "s"], ["y"], axes=[-2, -1]),
            N("Col2Im", ["c", "is", "bs"], ["z"]),
        ],
        [("x", x), ("c", c)],
        ["y", "z"],
        [("s", i64(6, 4)), ("is", i64(3, 4)), ("bs", i64(2, 2))],
        opset=18,
    ), {"x": x, "c": c}


@case("affinegrid_gelu")
def _():
    th = f32(2, 2, 3)
    return model(
        [N("AffineGrid", ["th", "sz"], ["g"], align_corners=0), N("Gelu", ["g"], ["y"])],
        [("th", th)],
        ["y"],
        [("sz", i64(2, 1, 3, 4))],
        opset=20,
    ), {"th": th}


@case("optional_ops")
def _():
    x = f32(3)
    return model(
        [
            N("Optional", ["x"], ["o"]),
            N("OptionalHasElement", ["o"], ["h"]),
            N("OptionalGetElement", ["o"], ["y"]),
            N("Optional", [], ["e"], type=h.make_tensor_type_proto(TP.FLOAT, None)),
            N("OptionalHasElement", ["e"], ["h2"]),
        ],
        [("x", x)],
        ["h", "y", "h2"],
        opset=18,
    ), {"x": x}


@case("attention_bool_mask")
def _():
    q, k, v = f32(2, 2, 4, 8), f32(2, 2, 5, 8), f32(2, 2, 5, 8)
    mask = base.rng.random((2, 1, 1, 5)) > 0.3
    nodes = [
        N("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        N("MatMul", ["q", "kt"], ["s"]),
        N("Mul", ["s", "sc"], ["s2"]),
        N("Where", ["m", "s2", "ninf"], ["s3"]),
        N("Softmax", ["s3"], ["p"], axis=-1),
        N("MatMul", ["p", "v"], ["o"]),
        N("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        N("Reshape", ["ot", "shp"], ["y"]),
    ]
    return model(
        nodes,
        [("q", q), ("k", k), ("v", v), ("m", mask)],
        ["y"],
        [
            ("sc", np.array(1 / np.sqrt(8), np.float32)),
            ("ninf", np.array(-np.inf, np.float32)),
            ("shp", i64(0, 0, -1)),
        ],
        opset=17,
    ), {"q": q, "k": k, "v": v, "m": mask}


@case("attention_additive_f16")
def _():
    q, k, v = [f32(1, 3, 6, 4).astype(np.float16) for _ in range(3)]
    bias = np.triu(np.full((6, 6), -65504.0, np.float32), 1).astype(np.float16)
    nodes = [
        N("MatMul", ["q", "kt"], ["s"]),
        N("Div", ["s", "d"], ["s2"]),
        N("Add", ["s2", "bias"], ["s3"]),
        N("Softmax", ["s3"], ["p"], axis=3),
        N("MatMul", ["p", "v"], ["o"]),
        N("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
    ]
    return (
        model(
            nodes,
            [("q", q), ("k", k), ("v", v)],
            ["o"],
            [("d", np.array(2, np.float16)), ("bias", bias)],
            opset=13,
        ),
        {"q": q, "k": k, "v": v},
        3e-3,
    )
