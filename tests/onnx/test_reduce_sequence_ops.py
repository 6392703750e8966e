"""The importer's reductions, sequences and optionals (onnx/ops/reduce.py, sequence.py) on
models built with onnx.helper, against onnxruntime: reductions over random axes, opsets, dtypes,
keepdims, noop_with_empty_axes and empty sets; sequences and optionals as graph inputs and
outputs."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper as h  # noqa: E402

import ember  # noqa: E402
import ember.onnx  # noqa: E402

from ._ort_models import BOOL, F32, I64, assert_same, const, model, run_ort, vi  # noqa: E402

# ---------------------------------------------------------------------------------------------
# reductions


_REDUCE_OPS = [
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
]


def _reduce_case(op, opset, dtype, shape, axes, keepdims, noop):
    axes_input = opset >= (13 if op == "ReduceSum" else 18)
    inputs = ["x"]
    inits = []
    attrs = {"keepdims": keepdims}
    if axes is not None:
        if axes_input:
            inputs.append("axes")
            inits.append(const("axes", np.array(axes, np.int64)))
        else:
            attrs["axes"] = axes
    if axes_input and noop:
        attrs["noop_with_empty_axes"] = 1
    elem = h.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = h.make_node(op, inputs, ["y"], **attrs)
    outputs = [vi("y", elem, None)]  # its rank depends on the case: onnxruntime checks the model
    return model([node], [vi("x", elem, shape)], outputs, inits, opset=opset, check=False)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # log(0) = -inf
@pytest.mark.parametrize("op", _REDUCE_OPS)
def test_reductions_match_onnxruntime(op):
    rng = np.random.default_rng(zlib.crc32(repr(op).encode()))
    checked = 0
    for trial in range(16):
        opset = [11, 13, 18][trial % 3]
        dtype = [np.float32, np.float64, np.int32, np.int64][trial % 4]
        if op in ("ReduceLogSum", "ReduceLogSumExp", "ReduceL2") and dtype in (np.int32, np.int64):
            dtype = np.float32
        rank = int(rng.integers(0, 4))
        shape = [int(d) for d in rng.integers(1, 4, rank)]
        if trial % 5 == 4 and rank:
            shape[int(rng.integers(0, rank))] = 0  # an empty set
        choice = trial % 4
        if choice == 0 or not rank:
            axes = None
        else:
            count = int(rng.integers(1, rank + 1))
            axes = [int(a) - (rank if rng.random() < 0.5 else 0) for a in rng.permutation(rank)]
            axes = axes[:count]
        keepdims, noop = int(rng.integers(0, 2)), int(trial % 6 == 1)
        if op in ("ReduceMax", "ReduceMin") and 0 in shape:
            if np.dtype(dtype).kind == "i" or opset < 18:
                continue  # onnxruntime refuses these empty reductions
        if dtype in (np.int32, np.int64):
            x = rng.integers(-3, 4, shape).astype(dtype)
        else:
            x = rng.uniform(0.5, 2.0, shape).astype(dtype)
        m = _reduce_case(op, opset, dtype, shape, axes, keepdims, noop)
        try:
            (expected,) = run_ort(m, {"x": x})
        except Exception:  # noqa: BLE001 - a dtype onnxruntime has no kernel for
            continue
        f = ember.onnx.load(m.SerializeToString())
        assert_same(f(x), expected, rtol=1e-5, atol=1e-5)
        checked += 1
    assert checked >= 8


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # log(0) = -inf
def test_reductions_of_an_empty_set_give_their_identities():
    for op, dtype, fill in [
        ("ReduceMax", np.float32, -np.inf),
        ("ReduceMin", np.float32, np.inf),
        ("ReduceMax", np.int32, np.iinfo(np.int32).min),
        ("ReduceMin", np.int64, np.iinfo(np.int64).max),
        ("ReduceMax", np.bool_, False),
        ("ReduceProd", np.float32, 1.0),
        ("ReduceLogSum", np.float32, -np.inf),
        # undefined by ONNX; onnxruntime's 0, which PyTorch's exporter relies on (EmbeddingBag)
        ("ReduceMean", np.float32, 0.0),
        ("ReduceMean", np.int64, 0),
    ]:
        m = _reduce_case(op, 20 if dtype is np.bool_ else 18, dtype, [2, 0, 3], [1], 0, 0)
        out = ember.onnx.load(m.SerializeToString())(np.zeros((2, 0, 3), dtype)).numpy()
        assert out.dtype == np.dtype(dtype) and out.shape == (2, 3)
        assert (out == fill).all()


# ---------------------------------------------------------------------------------------------
# sequences and optionals as graph inputs and outputs


def test_sequence_inputs_and_outputs_end_to_end():
    seq_f32 = h.make_tensor_sequence_value_info
    nodes = [
        h.make_node("SequenceInsert", ["seq", "x", "pos"], ["seq2"]),
        h.make_node("SequenceErase", ["seq2", "minus1"], ["seq3"]),
        h.make_node("SequenceAt", ["seq3", "minus2"], ["at"]),
        h.make_node("SequenceLength", ["seq3"], ["length"]),
        h.make_node("ConcatFromSequence", ["seq3"], ["stacked"], axis=-1, new_axis=1),
        h.make_node("SplitToSequence", ["stacked", "split"], ["parts"], axis=0),
    ]
    inits = [
        const("pos", np.array(-1, np.int64)),
        const("minus1", np.array(-1, np.int64)),
        const("minus2", np.array(-2, np.int64)),
        const("split", np.array([1, 2], np.int64)),
    ]
    m = model(
        nodes,
        [seq_f32("seq", F32, [3, 2]), vi("x", F32, [3, 2])],
        [
            seq_f32("seq3", F32, None),
            vi("at", F32, None),
            vi("length", I64, None),
            vi("stacked", F32, None),
            seq_f32("parts", F32, None),
        ],
        inits,
        opset=17,
        check=False,  # the checker wants the sequences' element shapes
    )
    rng = np.random.default_rng(5)
    seq = [rng.standard_normal((3, 2)).astype(np.float32) for _ in range(3)]
    feeds = {"seq": seq, "x": np.full((3, 2), 7.0, np.float32)}
    expected = run_ort(m, feeds)
    f = ember.onnx.load(m.SerializeToString())
    for ours, theirs in zip(f(**feeds), expected):
        assert_same(ours, theirs)


def test_optional_inputs_and_outputs_end_to_end():
    opt = h.make_optional_type_proto(h.make_tensor_type_proto(F32, [2]))
    nodes = [
        h.make_node("OptionalHasElement", ["o"], ["has"]),
        h.make_node("Identity", ["o"], ["same"]),
    ]
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_value_info("o", opt)],
        [vi("has", BOOL, []), h.make_value_info("same", opt)],
    )
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    f = ember.onnx.load(m.SerializeToString())
    has, same = f(None)
    assert not bool(has.numpy()) and same is None
    has, same = f(np.array([1.0, 2.0], np.float32))
    assert bool(has.numpy())
    np.testing.assert_array_equal(same.numpy(), [1.0, 2.0])


def test_split_to_sequence_of_a_scalar_one_without_keepdims():
    """PyTorch's exporter writes ``unbind`` as SplitToSequence(x, split=1 (a scalar),
    keepdims=0); onnxruntime drops the axis there (the spec says keepdims is ignored once split
    is given; ember kept the axis: (4, 2, 1) where onnxruntime gives (4, 2)). A 1-D split and a
    scalar of 2 keep it, as in onnxruntime."""
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    for split, keepdims, axis in (
        (np.array(1), 0, 1),
        (np.array(1), 0, 0),
        (np.array(1), 1, 1),
        (np.array([1, 1, 1, 1]), 0, 1),
        (np.array(2), 1, 1),
    ):
        nodes = [
            h.make_node("SplitToSequence", ["x", "s"], ["q"], axis=axis, keepdims=keepdims),
            h.make_node("ConcatFromSequence", ["q"], ["y"], axis=0, new_axis=1),
        ]
        m = model(
            nodes,
            [vi("x", F32, [2, 4])],
            [vi("y", F32, None)],
            [const("s", split)],
            opset=13,
            check=False,
        )
        assert_same(ember.onnx.load(m)(x), run_ort(m, {"x": x})[0])
