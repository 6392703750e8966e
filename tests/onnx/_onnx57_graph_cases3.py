"""More hand-built ONNX graphs for tests/onnx/test_onnx57_graph_forms.py (see
_onnx57_graph_cases.py): Pad's negative pads and older forms, Resize's nearest modes and
Upsample, Einsum strings, Clip and Gemm with omitted inputs, ArgMax's last index, Shape's
start/end, Reshape's allowzero, Expand, OneHot, Trilu, Range, Mod, bit operations, NonZero,
Unique, Compress, DepthToSpace and integer MatMul. Pooling, convolution and activation
attributes, normalizations, sequences of Optional and attention are in
_onnx57_graph_cases4.py."""

from __future__ import annotations

import numpy as np
from onnx import helper as h

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
