"""Operator attribute variants against onnxruntime, one single-node model each (onnx.helper):
Resize's modes and coordinate transformations, Pad's modes with ``axes``, ScatterND and
ScatterElements reductions, GatherND's ``batch_dims``, Einsum equations, reductions with
``noop_with_empty_axes``, Split's ``num_outputs``, TopK, CumSum's ``exclusive``/``reverse``,
NonMaxSuppression, RoiAlign, GridSample, LayerNormalization's ``axis``, GroupNormalization,
and opset 23's RMSNormalization, RotaryEmbedding and Attention.

Left out, where onnxruntime departs from ONNX's reference and ember follows the reference:
nearest Resize on a coordinate that lands on a rounding boundary (tf_crop_and_resize's
1.5, half_pixel_symmetric's 2.0: onnxruntime computes those in another precision), ReduceMean
over an empty axis (NaN; onnxruntime 0), MaxPool's SAME padding with dilations (onnxruntime
ignores the dilation), and TopK with ``sorted=0`` (an order ONNX leaves open)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import ember  # noqa: E402
import ember.onnx  # noqa: E402

_rng = np.random.default_rng(0)


def _f32(*shape):
    return _rng.standard_normal(shape).astype(np.float32)


def _i64(*values):
    return np.array(values, np.int64)


def _case(label, op, inputs, attrs=None, opset=18, outputs=1, static=()):
    """(label, op, [arrays or None], attributes, opset, outputs, positions given as
    initializers)."""
    return pytest.param(op, inputs, attrs or {}, opset, outputs, static, id=label)


def _resize_cases():
    x = _f32(1, 2, 4, 5)
    roi = np.array([0, 0, 0.2, 0.1, 1, 1, 0.8, 0.9], np.float32)
    none = np.zeros(0, np.float32)
    for mode, how in itertools.product(
        ["nearest", "linear", "cubic"],
        ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"],
    ):
        attrs = {"mode": mode, "coordinate_transformation_mode": how}
        if how == "tf_crop_and_resize":
            attrs["extrapolation_value"] = 0.5
        r = roi if how == "tf_crop_and_resize" else none
        scales = np.array([1, 1, 2.0, 1.5], np.float32)
        yield _case(f"Resize-{mode}-{how}", "Resize", [x, r, scales], attrs, 19, 1, (1, 2))
    for mode, policy in itertools.product(["nearest", "linear"], ["stretch", "not_larger"]):
        attrs = {"mode": mode, "axes": [2, 3], "keep_aspect_ratio_policy": policy}
        yield _case(
            f"Resize-axes-{mode}-{policy}",
            "Resize",
            [x, None, None, _i64(7, 3)],
            attrs,
            18,
            1,
            (3,),
        )
    scales = np.array([1, 1, 0.5, 0.4], np.float32)
    for mode in ["linear", "cubic"]:
        attrs = {"mode": mode, "antialias": 1}
        yield _case(f"Resize-antialias-{mode}", "Resize", [x, None, scales], attrs, 18, 1, (2,))


def _other_cases():
    xp = _f32(2, 3, 4)
    for mode in ["constant", "reflect", "edge", "wrap"]:
        pads = [xp, _i64(1, 2, 0, 1), np.array(0.5, np.float32), _i64(0, 2)]
        yield _case(f"Pad-{mode}-axes", "Pad", pads, {"mode": mode}, 19, 1, (1, 2, 3))
        yield _case(f"Pad-{mode}-dynamic", "Pad", [xp, _i64(0, 1, 2, 1, 1, 0)], {"mode": mode}, 19)
    data = _f32(4, 3)
    for red in ["none", "add", "mul", "max", "min"]:
        idx = _i64(1, 3, 1).reshape(3, 1) if red != "none" else _i64(1, 3).reshape(2, 1)
        yield _case(
            f"ScatterND-{red}", "ScatterND", [data, idx, _f32(len(idx), 3)], {"reduction": red}
        )
        ie = _i64(0, 1, 0, 3, 1, 2) if red != "none" else _i64(0, 1, 2, 3, 2, 1)
        yield _case(
            f"ScatterElements-{red}",
            "ScatterElements",
            [data, ie.reshape(2, 3), _f32(2, 3)],
            {"axis": 0, "reduction": red},
        )
    d = _f32(2, 3, 4, 5)
    yield _case(
        "GatherND-b1", "GatherND", [d, _i64(1, 2, 0, -1).reshape(2, 1, 2)], {"batch_dims": 1}
    )
    yield _case(
        "GatherND-b2", "GatherND", [d, _i64(1, 2, 0, 3, 0, 1).reshape(2, 3, 1)], {"batch_dims": 2}
    )
    for eq, shapes in [
        ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
        ("ii->i", [(3, 3)]),
        ("...ij,...jk", [(2, 2, 3), (2, 3, 4)]),
        ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
        ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 2)]),
        ("iij->ij", [(3, 3, 2)]),
    ]:
        yield _case(f"Einsum-{eq}", "Einsum", [_f32(*s) for s in shapes], {"equation": eq}, 12)
    r = _f32(2, 3, 4)
    for op in ["ReduceSum", "ReduceMax", "ReduceL2", "ReduceLogSumExp", "ReduceProd"]:
        for noop in (0, 1):
            attrs = {"noop_with_empty_axes": noop, "keepdims": 0}
            yield _case(
                f"{op}-empty-axes-noop{noop}", op, [r, np.zeros(0, np.int64)], attrs, 18, 1, (1,)
            )
            yield _case(f"{op}-dynamic-axes-noop{noop}", op, [r, _i64(-1, 0)], attrs)
    s = _f32(7, 4)
    for n in (2, 3, 4):
        yield _case(f"Split-num_outputs{n}", "Split", [s], {"num_outputs": n, "axis": 0}, 18, n)
    t = _f32(3, 6)
    for largest in (0, 1):
        yield _case(
            f"TopK-largest{largest}", "TopK", [t, _i64(3)], {"largest": largest}, 11, 2, (1,)
        )
    c = _f32(3, 4)
    for ex, rev in itertools.product((0, 1), (0, 1)):
        attrs = {"exclusive": ex, "reverse": rev}
        yield _case(f"CumSum-ex{ex}-rev{rev}", "CumSum", [c, np.array(-1, np.int32)], attrs, 14)
    boxes = np.array(
        [
            [
                [0, 0, 1, 1],
                [0, 0.1, 1, 1.1],
                [0, -0.1, 1, 0.9],
                [0, 10, 1, 11],
                [0, 10.1, 1, 11.1],
                [0, 100, 1, 101],
            ]
        ],
        np.float32,
    )
    scores = np.array(
        [[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3], [0.1, 0.8, 0.6, 0.2, 0.9, 0.4]]], np.float32
    )
    for cpb in (0, 1):
        b = boxes if cpb == 0 else boxes[..., [1, 0, 3, 2]]
        nms = [b, scores, _i64(3), np.array([0.5], np.float32), np.array([0.4], np.float32)]
        yield _case(
            f"NonMaxSuppression-cpb{cpb}",
            "NonMaxSuppression",
            nms,
            {"center_point_box": cpb},
            11,
            1,
            (2, 3, 4),
        )
    feat, rois = _f32(2, 3, 8, 8), np.array([[0, 0, 4, 4], [1, 1, 7, 6]], np.float32)
    for how, sr in itertools.product(["half_pixel", "output_half_pixel"], (0, 2)):
        attrs = {
            "mode": "avg",
            "coordinate_transformation_mode": how,
            "output_height": 3,
            "output_width": 2,
            "sampling_ratio": sr,
            "spatial_scale": 0.9,
        }
        yield _case(f"RoiAlign-{how}-sr{sr}", "RoiAlign", [feat, rois, _i64(0, 1)], attrs, 16)
    gx, grid = _f32(1, 2, 5, 6), (_rng.random((1, 4, 3, 2)) * 2.4 - 1.2).astype(np.float32)
    for mode, pad, ac in itertools.product(
        ["linear", "nearest", "cubic"], ["zeros", "border", "reflection"], (0, 1)
    ):
        attrs = {"mode": mode, "padding_mode": pad, "align_corners": ac}
        yield _case(f"GridSample-{mode}-{pad}-ac{ac}", "GridSample", [gx, grid], attrs, 20)
    ln = _f32(2, 3, 4)
    for ax in (-1, -2, 0):
        shape = ln.shape[ax:]
        yield _case(
            f"LayerNormalization-axis{ax}",
            "LayerNormalization",
            [ln, _f32(*shape), _f32(*shape)],
            {"axis": ax, "epsilon": 1e-3},
            17,
            3,
        )
    gn = _f32(2, 6, 3, 3)
    for groups in (1, 3, 6):
        yield _case(
            f"GroupNormalization-{groups}",
            "GroupNormalization",
            [gn, _f32(6), _f32(6)],
            {"num_groups": groups},
            21,
        )
    yield _case("RMSNormalization", "RMSNormalization", [ln, _f32(3, 4)], {"axis": -2}, 23)
    xr, pos = _f32(1, 2, 3, 8), _i64(0, 1, 2).reshape(1, 3)
    for inter in (0, 1):
        yield _case(
            f"RotaryEmbedding-interleaved{inter}",
            "RotaryEmbedding",
            [xr, _f32(4, 4), _f32(4, 4), pos],
            {"interleaved": inter},
            23,
        )
        yield _case(
            f"RotaryEmbedding-partial{inter}",
            "RotaryEmbedding",
            [xr, _f32(4, 2), _f32(4, 2), pos],
            {"interleaved": inter, "rotary_embedding_dim": 4},
            23,
        )
    q, k, v = _f32(2, 3, 4, 8), _f32(2, 3, 6, 8), _f32(2, 3, 6, 5)
    yield _case("Attention-causal", "Attention", [q, k, v], {"is_causal": 1}, 23)
    yield _case("Attention-softcap", "Attention", [q, k, v], {"scale": 0.3, "softcap": 2.0}, 23)
    yield _case("Attention-bool-mask", "Attention", [q, k, v, _rng.random((4, 6)) < 0.6], {}, 23)
    yield _case(
        "Attention-past",
        "Attention",
        [q, k, v, None, _f32(2, 3, 2, 8), _f32(2, 3, 2, 5)],
        {},
        23,
        3,
    )


_TYPES = {np.float32: TP.FLOAT, np.int64: TP.INT64, np.int32: TP.INT32, np.bool_: TP.BOOL}


def _model(op, inputs, attrs, opset, outputs, static) -> tuple[bytes, dict]:
    names = [f"in{i}" if a is not None else "" for i, a in enumerate(inputs)]
    outs = [f"out{i}" for i in range(outputs)]
    feeds, infos, inits = {}, [], []
    for i, (name, array) in enumerate(zip(names, inputs)):
        if array is None:
            continue
        if i in static:
            inits.append(numpy_helper.from_array(array, name))
        else:
            feeds[name] = array
            infos.append(h.make_tensor_value_info(name, _TYPES[array.dtype.type], array.shape))
    graph = h.make_graph(
        [h.make_node(op, names, outs, **attrs)],
        op.lower(),
        infos,
        [onnx.ValueInfoProto(name=o) for o in outs],
        inits,
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    inferred = onnx.shape_inference.infer_shapes(model)  # (the outputs' element types)
    types = {v.name: v.type for v in (*inferred.graph.value_info, *inferred.graph.output)}
    first = _TYPES[next(a for a in inputs if a is not None).dtype.type]
    for out in model.graph.output:
        known = types[out.name].tensor_type.elem_type if out.name in types else 0
        out.type.tensor_type.elem_type = known or first  # (else the input's: a normalization)
    return model.SerializeToString(), feeds


@pytest.mark.parametrize(
    "op, inputs, attrs, opset, outputs, static", [*_resize_cases(), *_other_cases()]
)
def test_equals_onnxruntime(op, inputs, attrs, opset, outputs, static):
    data, feeds = _model(op, inputs, attrs, opset, outputs, static)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    got = ember.onnx.load(data)(*feeds.values())
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = g.numpy()
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)
