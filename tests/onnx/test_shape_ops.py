"""ember's shape and indexing converters against onnxruntime on single-node models with random
shapes and attributes, across opset versions (where the conformance cases are thin: older
opsets' attribute forms, negative steps and pads, reductions, unsigned and string types,
captured and eager runs), and the folding of a model's shape arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402

import ember.onnx  # noqa: E402

RNG = np.random.default_rng(21)


def _model(op, inputs: dict, n_out=1, opset=13, attrs=None, constants=()):
    """One ``op`` node over ``inputs``: graph inputs, except those named in ``constants``,
    which are initializers (as a real model holds its shapes, axes and indices)."""
    graph_inputs = [
        h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(np.asarray(a).dtype), a.shape)
        for n, a in inputs.items()
        if n not in constants
    ]
    inits = [onnx.numpy_helper.from_array(np.asarray(inputs[n]), n) for n in constants]
    outs = [f"y{i}" for i in range(n_out)]
    node = h.make_node(op, list(inputs), outs, **(attrs or {}))
    graph = h.make_graph(
        [node],
        "g",
        graph_inputs,
        [h.make_empty_tensor_value_info(o) for o in outs],
        initializer=inits,
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _compare(got, want, op, attrs, exact):
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = g.numpy() if hasattr(g, "numpy") else np.asarray(g)
        assert g.shape == w.shape, (op, attrs, g.shape, w.shape)
        assert g.dtype == w.dtype, (op, attrs, g.dtype, w.dtype)
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _check(op, inputs: dict, n_out=1, opset=13, attrs=None, exact=True, captured=True):
    """ember equals onnxruntime on one node: with every input given at the call (the shapes,
    axes and indices then are data: eagerly, and op by op), and with all inputs but the first
    as initializers (captured into an ember graph unless ``captured`` is False)."""
    model = _model(op, inputs, n_out, opset, attrs)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, inputs)
    f = ember.onnx.load(model)
    _compare(f(*inputs.values()), want, op, attrs, exact)
    _compare(f.run_eager(*inputs.values()), want, op, attrs, exact)
    first = next(iter(inputs))
    constants = [n for n in inputs if n != first]
    g = ember.onnx.load(_model(op, inputs, n_out, opset, attrs, constants))
    _compare(g(inputs[first]), want, op, attrs, exact)
    if captured and g.eager_reason is not None:
        raise AssertionError(f"{op} {attrs}: not captured: {g.eager_reason}")
    return f


def _i64(values):
    return np.asarray(values, dtype=np.int64)


def _rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------------------------------------
# shapes


@pytest.mark.parametrize("seed", range(6))
def test_slice_random_steps_and_clamping(seed):
    rng = np.random.default_rng(seed)
    x = _rand(5, 6, 4)
    axes = sorted(rng.choice(3, size=rng.integers(1, 4), replace=False).tolist())
    starts, ends, steps = [], [], []
    for _ in axes:
        step = int(rng.choice([-3, -2, -1, 1, 2, 3]))
        starts.append(int(rng.integers(-9, 9)))
        ends.append(int(rng.choice([rng.integers(-9, 9), 2**62, -(2**62)])))
        steps.append(step)
    inputs = {"x": x, "s": _i64(starts), "e": _i64(ends), "a": _i64(axes), "st": _i64(steps)}
    _check("Slice", inputs)


def test_slice_opset_1_attributes():
    x = _rand(4, 5)
    _check("Slice", {"x": x}, opset=9, attrs={"starts": [1, -4], "ends": [100, -1], "axes": [0, 1]})


@pytest.mark.parametrize("opset", [5, 14])
def test_reshape_zero_and_inferred(opset):
    x = _rand(2, 3, 4)
    _check("Reshape", {"x": x, "s": _i64([0, -1, 2])}, opset=opset)
    if opset >= 14:
        empty = np.zeros((0, 3), np.float32)
        _check("Reshape", {"x": empty, "s": _i64([3, 0])}, opset=opset, attrs={"allowzero": 1})


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze_attribute_and_input(opset):
    x = _rand(1, 3, 1, 2)
    if opset < 13:
        _check("Squeeze", {"x": x}, opset=opset, attrs={"axes": [0, -2]})
        _check("Unsqueeze", {"x": x}, opset=opset, attrs={"axes": [-1, 0]})
    else:
        _check("Squeeze", {"x": x, "a": _i64([0, -2])}, opset=opset)
        _check("Unsqueeze", {"x": x, "a": _i64([-1, 0])}, opset=opset)
    _check("Squeeze", {"x": x}, opset=opset)


@pytest.mark.parametrize(
    "opset, attrs, split, n_out",
    [
        (11, {"axis": 1, "split": [1, 4, 2]}, None, 3),
        (11, {"axis": -1}, None, 2),
        (13, {"axis": 1}, [3, 0, 4], 3),
        (18, {"axis": 1, "num_outputs": 3}, None, 3),  # uneven: 3, 3, 1
        (18, {"axis": 0, "num_outputs": 2}, None, 2),
        (18, {"axis": 0, "num_outputs": 3}, None, 3),  # 4 rows: 2, 2, 0
    ],
)
def test_split_forms(opset, attrs, split, n_out):
    x = _rand(4, 7, 2) if attrs.get("axis") != -1 else _rand(3, 4)
    inputs = {"x": x} if split is None else {"x": x, "s": _i64(split)}
    _check("Split", inputs, n_out=n_out, opset=opset, attrs=attrs)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("opset", [2, 11, 18])
def test_pad_modes_and_negative_pads(mode, opset):
    x = _rand(3, 4, 5)
    if opset < 11:
        pads = [1, 0, 2, 2, 1, 0]
        _check("Pad", {"x": x}, opset=opset, attrs={"mode": mode, "pads": pads, "value": 1.5})
        return
    pads = [1, -1, 2, 0, 2, -2] if mode in ("constant", "edge") else [1, 0, 2, 2, 1, 3]
    inputs = {"x": x, "p": _i64(pads), "v": np.asarray(-2.0, np.float32)}
    if opset >= 18:
        inputs = {"x": x, "p": _i64(pads[:2] + pads[3:5]), "v": inputs["v"], "a": _i64([2, -3])}
    _check("Pad", inputs, opset=opset, attrs={"mode": mode})


@pytest.mark.parametrize(
    "mode, shape, pads",
    [
        ("wrap", (2,), [1, 3]),  # past the size: the period repeats
        ("edge", (3,), [4, 5]),
        ("wrap", (4,), [-1, 2]),
        ("constant", (2,), [-3, 4]),  # cropped past the data: only the padding value
        ("constant", (0,), [-1, 3]),
        ("edge", (0, 4), [2, 2, -2, -1]),  # an empty result
    ],
)
def test_pad_edge_cases_like_onnxruntime(mode, shape, pads):
    x = _rand(*shape)
    _check("Pad", {"x": x, "p": _i64(pads)}, opset=13, attrs={"mode": mode})


def test_empty_axes():
    x = np.zeros((0, 3), np.float32)
    for exclusive in (0, 1):
        attrs = {"exclusive": exclusive}
        _check("CumSum", {"x": x, "a": np.asarray(0, np.int64)}, opset=14, attrs=attrs)
    _check("ArgMax", {"x": np.zeros((2, 0, 0), np.float32)}, attrs={"axis": 1})
    _check("TopK", {"x": _rand(2, 3), "k": _i64([0])}, n_out=2, opset=11)


def test_pad_reflect_past_the_edge_repeats_like_numpy():
    x = _rand(2, 3)
    model = _model("Pad", {"x": x, "p": _i64([0, 5, 0, 7])}, opset=13, attrs={"mode": "reflect"})
    got = ember.onnx.load(model)(x, _i64([0, 5, 0, 7])).numpy()
    np.testing.assert_array_equal(got, np.pad(x, [(0, 0), (5, 7)], mode="reflect"))


def test_transpose_concat_tile_expand_depth_space():
    x = _rand(2, 8, 3, 3)
    _check("Transpose", {"x": x}, attrs={"perm": [2, 0, 3, 1]})
    _check("Concat", {"a": x, "b": x[:, :3]}, attrs={"axis": -3})
    _check("Tile", {"x": x, "r": _i64([1, 2, 0, 3])})
    _check("Expand", {"x": _rand(3, 1), "s": _i64([2, 1, 4])})
    for mode in ("DCR", "CRD"):
        _check("DepthToSpace", {"x": x}, attrs={"blocksize": 2, "mode": mode})
    _check("SpaceToDepth", {"x": _rand(2, 3, 4, 6)}, attrs={"blocksize": 2})


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64, np.int8])
def test_data_movement_of_types_ember_lacks(dtype):
    x = (np.arange(24) * 7 % 11).astype(dtype).reshape(2, 3, 4)
    _check("Transpose", {"x": x}, attrs={"perm": [1, 2, 0]})
    _check("Slice", {"x": x, "s": _i64([3]), "e": _i64([-9]), "a": _i64([2]), "st": _i64([-2])})
    _check("Gather", {"x": x, "i": _i64([[1, -1], [0, 0]])}, attrs={"axis": 1})
    _check("Concat", {"a": x, "b": x}, attrs={"axis": 0})
    # onnxruntime has no Pad or TopK for some of these types: NumPy says what they give
    model = _model("Pad", {"x": x, "p": _i64([0, 1, 0, 1, 0, 2])}, opset=13, attrs={"mode": "wrap"})
    got = ember.onnx.load(model)(x, _i64([0, 1, 0, 1, 0, 2]))
    np.testing.assert_array_equal(np.asarray(got), np.pad(x, [(0, 1), (1, 0), (0, 2)], "wrap"))
    model = _model("TopK", {"x": x, "k": _i64([2])}, n_out=2, opset=11, attrs={"largest": 0})
    values, indices = ember.onnx.load(model)(x, _i64([2]))
    order = np.argsort(x, axis=-1, kind="stable")[..., :2]
    np.testing.assert_array_equal(np.asarray(indices), order)
    np.testing.assert_array_equal(np.asarray(values), np.take_along_axis(x, order, -1))
    assert np.asarray(values).dtype == dtype


def test_strings_move():
    words = np.array([["a", "bb"], ["ccc", ""]], dtype=object)
    nodes = [
        h.make_node("Constant", [], ["w"], value=onnx.numpy_helper.from_array(words)),
        h.make_node("Concat", ["w", "w"], ["c"], axis=1),
        h.make_node("Transpose", ["c"], ["t"]),
        h.make_node("Gather", ["t", "i"], ["y"], axis=0),
    ]
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("i", TensorProto.INT64, [2])],
        [h.make_empty_tensor_value_info("y")],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    got = ember.onnx.load(model)(_i64([-1, 0]))
    assert np.asarray(got).tolist() == [["bb", ""], ["a", "ccc"]]


def test_unique_of_strings_and_nonzero_of_uint64():
    words = np.array(["b", "a", "b", "c", "a"], dtype=object)
    graph = h.make_graph(
        [
            h.make_node("Constant", [], ["w"], value=onnx.numpy_helper.from_array(words)),
            h.make_node("Unique", ["w"], ["y", "first", "inverse", "counts"], sorted=0),
            h.make_node("NonZero", ["u"], ["nz"]),
        ],
        "g",
        [h.make_tensor_value_info("u", TensorProto.UINT64, [3])],
        [h.make_empty_tensor_value_info(n) for n in ("y", "first", "inverse", "counts", "nz")],
    )
    f = ember.onnx.load(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]))
    y, first, inverse, counts, nz = f(np.asarray([0, 2**63, 5], np.uint64))
    assert np.asarray(y).tolist() == ["b", "a", "c"]
    assert first.tolist() == [0, 1, 3] and inverse.tolist() == [0, 1, 0, 2, 1]
    assert counts.tolist() == [2, 2, 1]
    assert nz.tolist() == [[1, 2]]


def test_range_trilu_eyelike_constant_of_shape():
    for start, limit, delta, dtype in [(1, 10, 3, np.int32), (2.5, -3.0, -0.7, np.float32)]:
        inputs = {n: np.asarray(v, dtype) for n, v in zip("sld", (start, limit, delta))}
        # (the size depends on start's value, a graph input here: eager)
        _check("Range", inputs, opset=11, exact=False, captured=False)
    x = _rand(3, 4, 5)
    for upper in (0, 1):
        for k in (-2, 0, 3):
            _check("Trilu", {"x": x, "k": _i64(k)}, opset=14, attrs={"upper": upper})
    _check("EyeLike", {"x": _rand(3, 5)}, opset=9, attrs={"k": -1, "dtype": TensorProto.INT32})
    value = h.make_tensor("v", TensorProto.INT32, [1], [7])
    shape = {"s": _i64([2, 0, 3])}
    _check("ConstantOfShape", shape, opset=9, attrs={"value": value}, captured=False)


def test_center_crop_pad_odd_sizes():
    x = _rand(5, 4, 3)
    model = _model("CenterCropPad", {"x": x, "s": _i64([2, 7])}, opset=18, attrs={"axes": [0, -2]})
    got = ember.onnx.load(model)(x, _i64([2, 7])).numpy()
    want = np.zeros((2, 7, 3), np.float32)
    want[:, 1:5] = x[1:3]  # crop 3 (1 before, 2 after), pad 3 (1 before, 2 after)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", range(3))
def test_col2im(case):
    attrs = [
        {},
        {"strides": [2, 1], "pads": [1, 0, 1, 2]},
        {"dilations": [2, 2], "pads": [1, 1, 1, 1]},
    ][case]
    image, block = _i64([5, 6]), _i64([2, 3])
    strides, dil = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    blocks = [
        (int(image[i]) + pads[i] + pads[i + 2] - dil[i] * (int(block[i]) - 1) - 1) // strides[i] + 1
        for i in range(2)
    ]
    x = _rand(2, 3 * 6, blocks[0] * blocks[1])
    _check("Col2Im", {"x": x, "i": image, "b": block}, opset=18, attrs=attrs, exact=False)


# ---------------------------------------------------------------------------------------------
# indexing


def test_gathers_with_negative_indices_and_batch_dims():
    x = _rand(3, 4, 5)
    _check("Gather", {"x": x, "i": np.asarray(-2, np.int32)}, attrs={"axis": 1})
    _check("GatherElements", {"x": x, "i": _i64(RNG.integers(-5, 5, (3, 4, 2)))}, attrs={"axis": 2})
    _check("GatherND", {"x": x, "i": _i64([[[1, -1], [0, 3]], [[2, 0], [-3, -4]]])})
    _check("GatherND", {"x": x, "i": _i64([[[1]], [[-1]], [[0]]])}, attrs={"batch_dims": 1})
    _check("GatherND", {"x": x, "i": _i64([[1, -1], [0, 3], [2, 0]])}, attrs={"batch_dims": 1})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatters(reduction):
    opset = 18 if reduction != "none" else 11
    attrs = {} if reduction == "none" else {"reduction": reduction}
    x = _rand(4, 3, 2)
    index = _i64([[0, 2, -1], [3, 2, 1]]).reshape(2, 3, 1).repeat(2, axis=2)
    _check(
        "ScatterElements",
        {"x": x, "i": index, "u": _rand(2, 3, 2)},
        opset=opset,
        attrs={"axis": 0, **attrs},
        exact=False,
    )
    # ScatterND: unique indices where the order would matter, duplicates with a reduction
    nd = _i64([[1, 2], [-1, 0]]) if reduction == "none" else _i64([[1, 2], [1, 2], [0, -3]])
    updates = _rand(nd.shape[0], 2)
    _check("ScatterND", {"x": x, "i": nd, "u": updates}, opset=opset, attrs=attrs, exact=False)


def test_tensor_scatter_modes():
    cache = _rand(2, 3, 6, 4)
    update = _rand(2, 3, 3, 4)
    for mode, where in (("linear", [0, 3]), ("circular", [5, 2])):
        model = _model(
            "TensorScatter",
            {"c": cache, "u": update, "w": _i64(where)},
            opset=24,
            attrs={"mode": mode},
        )
        got = ember.onnx.load(model)(cache, update, _i64(where)).numpy()
        want = cache.copy()
        for b in range(2):
            for s in range(3):
                pos = (where[b] + s) % 6 if mode == "circular" else where[b] + s
                want[b, :, pos] = update[b, :, s]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("axis_", [0, -1, 1])
def test_one_hot(axis_):
    indices = _i64([[0, -1, 5], [2, -4, 3]])  # -4 and 5 are out of range for depth 4
    values = np.asarray([-1.0, 3.0], np.float32)
    inputs = {"i": indices, "d": np.asarray(4.0, np.float32), "v": values}
    _check("OneHot", inputs, opset=11, attrs={"axis": axis_})


def test_topk_argmax_ties_and_orders():
    x = np.asarray([[3, 1, 3, 2, 1], [0, 0, 0, 5, 5]], np.float32)
    for largest in (0, 1):
        _check("TopK", {"x": x, "k": _i64([3])}, n_out=2, opset=11, attrs={"largest": largest})
    _check("TopK", {"x": x}, n_out=2, opset=1, attrs={"k": 2, "axis": 0})
    for op in ("ArgMax", "ArgMin"):
        for last in (0, 1):
            for keep in (0, 1):
                attrs = {"axis": -1, "keepdims": keep, "select_last_index": last}
                _check(op, {"x": x}, opset=12, attrs=attrs)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum(exclusive, reverse):
    x = RNG.integers(-5, 5, (3, 4)).astype(np.int32)
    for a in (0, -1):
        attrs = {"exclusive": exclusive, "reverse": reverse}
        _check("CumSum", {"x": x, "a": np.asarray(a, np.int64)}, opset=14, attrs=attrs)


def test_reverse_sequence_and_einsum():
    x = _rand(4, 3, 2)
    _check("ReverseSequence", {"x": x, "l": _i64([4, 1, 2])}, opset=10)
    y = _rand(3, 4, 2)
    attrs = {"batch_axis": 0, "time_axis": 1}
    _check("ReverseSequence", {"x": y, "l": _i64([0, 4, 3])}, opset=10, attrs=attrs)
    a, b = _rand(2, 3, 4), _rand(2, 4, 5)
    _check("Einsum", {"a": a, "b": b}, opset=12, attrs={"equation": "bij, bjk -> bik"}, exact=False)
    _check("Einsum", {"a": _rand(3, 3)}, opset=12, attrs={"equation": "ii"}, exact=False)


def test_data_dependent_ops_run_eagerly():
    x = np.asarray([[0, 2, 0], [3, 3, 0]], np.float32)
    f = _check("NonZero", {"x": x}, captured=False)
    assert f.eager_reason is not None  # capture found the size depends on the data
    _check("Compress", {"x": x, "c": np.asarray([True, False, True])}, attrs={"axis": 1})
    _check("Compress", {"x": x, "c": np.asarray([False, True, True, True])})
    for attrs in ({}, {"sorted": 0}, {"axis": 1, "sorted": 0}, {"axis": -2}):
        _check("Unique", {"x": x}, n_out=4, opset=11, attrs=attrs, captured=False)


def test_values_known_only_at_run_time_stay_captured():
    """Trilu's k and Pad's constant value do not decide a shape: as graph inputs they keep
    the model capturable."""
    x = _rand(3, 4, 5)
    for upper in (0, 1):
        f = _check("Trilu", {"x": x, "k": _i64(-1)}, opset=14, attrs={"upper": upper})
        assert f.eager_reason is None
    model = _model("Pad", {"x": x, "p": _i64([0, 1, -1, 2, 0, 1]), "v": np.float32(3)}, opset=13)
    model.graph.initializer.append(onnx.numpy_helper.from_array(_i64([0, 1, -1, 2, 0, 1]), "p"))
    del model.graph.input[1]
    f = ember.onnx.load(model)
    got = f(x, np.asarray(3.0, np.float32)).numpy()
    want = np.pad(x[:, :, 1:], [(0, 2), (1, 0), (0, 1)], constant_values=3.0)
    np.testing.assert_array_equal(got, want)
    assert f.eager_reason is None


def test_compress_with_a_known_condition_stays_captured():
    cond = onnx.numpy_helper.from_array(np.asarray([True, False, True, True]), "c")
    graph = h.make_graph(
        [h.make_node("Compress", ["x", "c"], ["y"], axis=1)],
        "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [h.make_empty_tensor_value_info("y")],
        initializer=[cond],
    )
    f = ember.onnx.load(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]))
    x = _rand(2, 4)
    np.testing.assert_array_equal(f(x).numpy(), x[:, [0, 2, 3]])
    assert f.eager_reason is None


def test_shape_arithmetic_folds_in_the_captured_graph():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape: plain numbers in the ember graph."""
    nodes = [
        h.make_node("Shape", ["x"], ["shape"]),
        h.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        h.make_node("Unsqueeze", ["batch", "zero1"], ["batch1"]),
        h.make_node("Cast", ["batch1"], ["batch32"], to=TensorProto.INT32),
        h.make_node("Concat", ["batch32", "minus1"], ["target32"], axis=0),
        h.make_node("Cast", ["target32"], ["target"], to=TensorProto.INT64),
        h.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = [
        h.make_tensor("zero", TensorProto.INT32, [], [0]),
        h.make_tensor("zero1", TensorProto.INT64, [1], [0]),
        h.make_tensor("minus1", TensorProto.INT32, [1], [-1]),
    ]
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 4])],
        [h.make_empty_tensor_value_info("y")],
        initializer=inits,
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    f = ember.onnx.load(model)
    for n in (2, 5):
        x = _rand(n, 3, 4)
        np.testing.assert_array_equal(f(x).numpy(), x.reshape(n, 12))
    assert f.eager_reason is None
    assert "gather" not in str(f.graph)


def test_gradients_flow_through_the_converters():
    """The converters are ember ops on the tape: the gradient of a linear function of an input
    through Gather, Pad (reflect), Slice (negative step), Transpose, Concat, ScatterND and
    CumSum equals its finite difference."""
    nodes = [
        h.make_node("Gather", ["w", "idx"], ["g"], axis=0),
        h.make_node("Pad", ["g", "pads"], ["p"], mode="reflect"),
        h.make_node("Slice", ["p", "starts", "ends", "axes", "steps"], ["s"]),
        h.make_node("Transpose", ["s"], ["t"], perm=[1, 0]),
        h.make_node("Concat", ["t", "t"], ["c"], axis=1),
        h.make_node("ScatterND", ["c", "where", "upd"], ["sc"], reduction="add"),
        h.make_node("CumSum", ["sc", "axis"], ["y"], exclusive=1),
    ]
    inits = {
        "idx": _i64([4, -1, 0]),
        "pads": _i64([0, 2, 0, 1]),
        "starts": _i64([-1]),
        "ends": _i64([-100]),
        "axes": _i64([1]),
        "steps": _i64([-2]),
        "where": _i64([[1], [0]]),
        "axis": _i64(1),
    }
    graph = h.make_graph(
        nodes,
        "g",
        [
            h.make_tensor_value_info("w", TensorProto.DOUBLE, [5, 4]),
            h.make_tensor_value_info("upd", TensorProto.DOUBLE, [2, 6]),
        ],
        [h.make_empty_tensor_value_info("y")],
        initializer=[onnx.numpy_helper.from_array(v, n) for n, v in inits.items()],
    )
    f = ember.onnx.load(h.make_model(graph, opset_imports=[h.make_opsetid("", 18)]))
    weight, upd = RNG.standard_normal((5, 4)), RNG.standard_normal((2, 6))
    w = ember.tensor(weight, requires_grad=True)
    out = f.run_eager(w, upd)
    r = RNG.standard_normal(tuple(out.shape))
    (out * ember.tensor(r)).sum().backward()

    def value(array):
        return float((f(array, upd).numpy() * r).sum())

    numeric = np.zeros_like(weight)
    for i in np.ndindex(weight.shape):
        bump = np.zeros_like(weight)
        bump[i] = 1.0
        numeric[i] = value(weight + bump) - value(weight)  # exact: the function is linear
    np.testing.assert_allclose(w.grad.numpy(), numeric, atol=1e-9)
