"""More hand-built ONNX graphs for tests/onnx/test_onnx57_graph_forms.py (see
_onnx57_graph_cases.py): Pad's negative pads and older forms, Resize's nearest modes and
Upsample, Einsum strings, Clip and Gemm with omitted inputs, ArgMax's last index, Shape's
start/end, pooling, convolution and activation attributes, normalizations, sequences of
Optional, attention written out in float32 and float16."""

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


@case("pad_negative_crop")
def _():
    x = f32(2, 5, 6)
    return model(
        [
            N("Pad", ["x", "p", "v"], ["y"], mode="constant"),
            N("Pad", ["x", "p2"], ["z"], mode="edge"),
        ],
        [("x", x)],
        ["y", "z"],
        [
            ("p", i64(0, -1, 2, 0, 1, -2)),
            ("v", np.array(1.5, np.float32)),
            ("p2", i64(0, 2, -1, 0, -2, 3)),
        ],
    ), {"x": x}


@case("pad11_reflect_int")
def _():
    x = base.rng.integers(0, 9, (2, 5, 6)).astype(np.int32)
    return model(
        [N("Pad", ["x", "p"], ["y"], mode="reflect")],
        [("x", x)],
        ["y"],
        [("p", i64(0, 1, 2, 0, 3, 1))],
        opset=11,
    ), {"x": x}


@case("pad2_attr")
def _():
    x = f32(2, 3)
    return model(
        [N("Pad", ["x"], ["y"], mode="constant", pads=[1, 0, 0, 2], value=3.0)],
        [("x", x)],
        ["y"],
        opset=10,
    ), {"x": x}


@case("resize_sizes_nearest_modes")
def _():
    x = f32(1, 2, 5, 7)
    nodes = [
        N(
            "Resize",
            ["x", "", "", "sz"],
            ["y"],
            mode="nearest",
            nearest_mode="floor",
            coordinate_transformation_mode="asymmetric",
        ),
        N(
            "Resize",
            ["x", "", "", "sz"],
            ["z"],
            mode="nearest",
            nearest_mode="ceil",
            coordinate_transformation_mode="half_pixel",
        ),
        N("Resize", ["x", "", "sc"], ["w"], mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1),
        N(
            "Resize",
            ["x", "", "", "sz"],
            ["v"],
            mode="linear",
            coordinate_transformation_mode="half_pixel_symmetric",
        ),
    ]
    return model(
        nodes,
        [("x", x)],
        ["y", "z", "w", "v"],
        [("sz", i64(1, 2, 8, 4)), ("sc", np.array([1, 1, 1.6, 0.8], np.float32))],
        opset=19,
    ), {"x": x}


@case("resize11_roi_scales_empty")
def _():
    x = f32(1, 2, 3, 4)
    return model(
        [
            N(
                "Resize",
                ["x", "roi", "sc"],
                ["y"],
                mode="linear",
                coordinate_transformation_mode="align_corners",
            )
        ],
        [("x", x)],
        ["y"],
        [("roi", np.zeros(0, np.float32)), ("sc", np.array([1, 1, 2, 3], np.float32))],
        opset=11,
    ), {"x": x}


@case("upsample9")
def _():
    x = f32(1, 2, 3, 4)
    return model(
        [
            N("Upsample", ["x", "sc"], ["y"], mode="linear"),
            N("Upsample", ["x", "sc"], ["z"], mode="nearest"),
        ],
        [("x", x)],
        ["y", "z"],
        [("sc", np.array([1, 1, 2, 1.5], np.float32))],
        opset=9,
    ), {"x": x}


@case("einsum_more")
def _():
    a, b, c = f32(2, 3, 4), f32(4, 5), f32(3)
    nodes = [
        N("Einsum", ["a", "b"], ["y"], equation="...j,jk->...k"),
        N("Einsum", ["a"], ["z"], equation="bij->"),
        N("Einsum", ["c", "c"], ["w"], equation="i,i"),
        N("Einsum", ["c", "c"], ["v"], equation="i,j->ij"),
        N("Einsum", ["a"], ["u"], equation="bij->jib"),
        N("Einsum", ["a", "c"], ["t"], equation="Bij,i->Bj"),
    ]
    return model(nodes, [("a", a), ("b", b), ("c", c)], ["y", "z", "w", "v", "u", "t"], opset=12), {
        "a": a,
        "b": b,
        "c": c,
    }


@case("clip_empty_min")
def _():
    x = f32(3, 4)
    xi = base.rng.integers(-9, 9, (3, 4)).astype(np.int32)
    return model(
        [
            N("Clip", ["x", "", "mx"], ["y"]),
            N("Clip", ["xi", "mn"], ["z"]),
            N("Clip", ["x"], ["w"]),
        ],
        [("x", x), ("xi", xi)],
        ["y", "z", "w"],
        [("mx", np.array(0.3, np.float32)), ("mn", np.array(-2, np.int32))],
        opset=13,
    ), {"x": x, "xi": xi}


@case("gemm_variants")
def _():
    a, b = f32(4, 3), f32(5, 4)
    nodes = [
        N("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0),
        N("Gemm", ["a", "w"], ["z"], transA=0),
        N("Gemm", ["a", "w", "c1"], ["v"], beta=0.0),
    ]
    return model(
        nodes,
        [("a", a), ("b", b)],
        ["y", "z", "v"],
        [
            ("c", np.array(1.5, np.float32)),
            ("w", f32(3, 2)),
            ("c1", np.array([np.inf, 1], np.float32)),
        ],
        opset=13,
    ), {"a": a, "b": b}


@case("argmax_last_index")
def _():
    x = np.array([[1, 3, 3, 2], [5, 5, 1, 5]], np.float32)
    return model(
        [
            N("ArgMax", ["x"], ["y"], axis=-1, select_last_index=1),
            N("ArgMin", ["x"], ["z"], axis=0, keepdims=0, select_last_index=1),
        ],
        [("x", x)],
        ["y", "z"],
    ), {"x": x}


@case("dropout_mask_training_false")
def _():
    x = f32(3, 4)
    return model(
        [N("Dropout", ["x", "r", "t"], ["y", "m"])],
        [("x", x)],
        ["y", "m"],
        [("r", np.array(0.5, np.float32)), ("t", np.array(False))],
        opset=13,
    ), {"x": x}


@case("shape_start_end")
def _():
    x = f32(2, 3, 4, 5)
    return model(
        [
            N("Shape", ["x"], ["a"], start=-3, end=-1),
            N("Shape", ["x"], ["b"], start=2),
            N("Size", ["x"], ["c"]),
            N("Shape", ["x"], ["d"], start=10),
        ],
        [("x", x)],
        ["a", "b", "c", "d"],
        opset=15,
    ), {"x": x}


@case("reshape_allowzero_and_zero")
def _():
    x = f32(2, 3, 4)
    e = np.zeros((0, 4), np.float32)
    return model(
        [N("Reshape", ["x", "s"], ["y"]), N("Reshape", ["e", "s2"], ["z"], allowzero=1)],
        [("x", x), ("e", e)],
        ["y", "z"],
        [("s", i64(0, -1)), ("s2", i64(4, 0))],
        opset=14,
    ), {"x": x, "e": e}


@case("expand_lower_rank_tile")
def _():
    x = f32(3, 1)
    return model(
        [N("Expand", ["x", "s"], ["y"]), N("Tile", ["x", "r"], ["z"])],
        [("x", x)],
        ["y", "z"],
        [("s", i64(2, 1, 4)), ("r", i64(2, 3))],
        opset=13,
    ), {"x": x}


@case("onehot_neg")
def _():
    idx = np.array([[0, -1], [2, -3]], np.int64)
    return model(
        [N("OneHot", ["i", "d", "v"], ["y"], axis=-2)],
        [("i", idx)],
        ["y"],
        [("d", np.array(4.0, np.float32)), ("v", np.array([-1, 7], np.int32))],
        opset=11,
    ), {"i": idx}


@case("trilu_k")
def _():
    x = f32(2, 4, 5)
    return model(
        [
            N("Trilu", ["x", "k"], ["y"], upper=0),
            N("Trilu", ["x"], ["z"]),
            N("Trilu", ["x", "k2"], ["w"], upper=1),
        ],
        [("x", x)],
        ["y", "z", "w"],
        [("k", i64(-1).reshape(())), ("k2", i64(2).reshape(()))],
        opset=14,
    ), {"x": x}


@case("range_float_neg")
def _():
    return model(
        [N("Range", ["s", "l", "d"], ["y"]), N("Range", ["si", "li", "di"], ["z"])],
        [("s", np.array(3.0, np.float32))],
        ["y", "z"],
        [
            ("l", np.array(-1.2, np.float32)),
            ("d", np.array(-0.7, np.float32)),
            ("si", np.array(10, np.int32)),
            ("li", np.array(1, np.int32)),
            ("di", np.array(-3, np.int32)),
        ],
        opset=11,
    ), {"s": np.array(3.0, np.float32)}


@case("mod_int_float")
def _():
    a = base.rng.integers(-9, 9, (4, 5)).astype(np.int32)
    b = np.array([3, -4, 5, -2, 7], np.int32)
    x = f32(4, 5) * 3
    return model(
        [
            N("Mod", ["a", "b"], ["y"]),
            N("Mod", ["a", "b"], ["z"], fmod=1),
            N("Mod", ["x", "m"], ["w"], fmod=1),
            N("Div", ["a", "b"], ["q"]),
        ],
        [("a", a), ("x", x)],
        ["y", "z", "w", "q"],
        [("b", b), ("m", np.array(-0.7, np.float32))],
        opset=13,
    ), {"a": a, "x": x}


@case("bitops")
def _():
    a = base.rng.integers(0, 200, (3, 4)).astype(np.uint8)
    s = np.array([1, 2, 3, 0], np.uint8)
    b = base.rng.random((3, 4)) > 0.5
    return model(
        [
            N("BitShift", ["a", "s"], ["y"], direction="LEFT"),
            N("BitShift", ["a", "s"], ["z"], direction="RIGHT"),
            N("BitwiseNot", ["a"], ["w"]),
            N("BitwiseXor", ["a", "s"], ["v"]),
            N("Xor", ["b", "bb"], ["u"]),
            N("Not", ["b"], ["t"]),
        ],
        [("a", a), ("b", b)],
        ["y", "z", "w", "v", "u", "t"],
        [("s", s), ("bb", np.array([True, False, True, False]))],
    ), {"a": a, "b": b}


@case("nonzero_unique_compress")
def _():
    x = np.array([[1, 0, 2], [0, 3, 1], [1, 0, 2]], np.float32)
    return model(
        [
            N("NonZero", ["x"], ["y"]),
            N("Unique", ["x"], ["u", "i", "inv", "c"], axis=0, sorted=1),
            N("Unique", ["x"], ["u2", "i2", "inv2", "c2"], sorted=0),
            N("Compress", ["x", "cond"], ["z"]),
            N("Compress", ["x", "cond2"], ["w"], axis=-1),
        ],
        [("x", x)],
        ["y", "u", "i", "inv", "c", "u2", "i2", "inv2", "c2", "z", "w"],
        [("cond", np.array([True, False, True, True])), ("cond2", np.array([False, True]))],
        opset=11,
    ), {"x": x}


@case("depth_space")
def _():
    x = f32(2, 8, 3, 4)
    return model(
        [
            N("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD"),
            N("DepthToSpace", ["x"], ["z"], blocksize=2, mode="DCR"),
            N("SpaceToDepth", ["z"], ["w"], blocksize=2),
        ],
        [("x", x)],
        ["y", "z", "w"],
        opset=13,
    ), {"x": x}


@case("int_matmul_add")
def _():
    a = base.rng.integers(-5, 5, (3, 4)).astype(np.int32)
    b = base.rng.integers(-5, 5, (4, 2)).astype(np.int32)
    a8 = base.rng.integers(0, 255, (3, 4)).astype(np.uint8)
    b8 = base.rng.integers(-128, 127, (4, 2)).astype(np.int8)
    return model(
        [N("MatMul", ["a", "b"], ["y"]), N("MatMulInteger", ["a8", "b8", "az"], ["z"])],
        [("a", a), ("b", b), ("a8", a8), ("b8", b8)],
        ["y", "z"],
        [("az", np.array(3, np.uint8))],
        opset=13,
    ), {"a": a, "b": b, "a8": a8, "b8": b8}


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
