"""ember's converters of the heavier nn operators (Resize, Upsample, GridSample, RoiAlign,
NonMaxSuppression, Attention, RNN/LSTM/GRU, ...) against onnxruntime on single-node models
with random shapes and attributes, where the conformance cases are thin: Resize's attribute
combinations and older opsets, sequence_lens and layouts of the recurrent layers, activations
with parameters, adaptive RoiAlign sampling, attention masks and caches; captured and eager;
and that the recurrent layers in PyTorch's configuration run as ember's whole-layer ops."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper as h  # noqa: E402

import ember.onnx  # noqa: E402

RNG = np.random.default_rng(2121)


def _model(op, inputs: dict, n_out=1, opset=20, attrs=None, constants=(), omitted=()):
    """One ``op`` node over ``inputs`` (graph inputs, except ``constants``: initializers);
    names in ``omitted`` are left out of the node's input list (an empty name)."""
    graph_inputs = [
        h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(np.asarray(a).dtype), a.shape)
        for n, a in inputs.items()
        if n not in constants and a is not None
    ]
    inits = [onnx.numpy_helper.from_array(np.asarray(inputs[n]), n) for n in constants]
    outs = [f"y{i}" for i in range(n_out)]
    names = [("" if inputs[n] is None else n) for n in inputs]
    node = h.make_node(op, names, outs, **(attrs or {}))
    graph = h.make_graph(
        [node], "g", graph_inputs, [h.make_empty_tensor_value_info(o) for o in outs], inits
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _as_tuple(values):
    return values if isinstance(values, tuple) else (values,)


def _run(
    op,
    inputs,
    *,
    n_out=1,
    opset=20,
    attrs=None,
    constants=(),
    rtol=1e-4,
    atol=1e-5,
    captured=True,
    reference_breaks_ties=False,
):
    """ember (captured and eager) equals onnxruntime on one node; returns ember's function.
    ``constants`` are initializers (their values are known while the model is captured).
    ``reference_breaks_ties``: where onnxruntime and ONNX's reference evaluator disagree, ember
    must equal the reference (which ONNX's conformance cases are computed by)."""
    model = _model(op, inputs, n_out, opset, attrs, constants)
    feeds = {n: a for n, a in inputs.items() if n not in constants and a is not None}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    if reference_breaks_ties:
        from onnx.reference import ReferenceEvaluator

        reference = ReferenceEvaluator(model).run(None, feeds)
        if not all(
            r.shape == w.shape and np.allclose(r, w, rtol=rtol, atol=atol)
            for r, w in zip(reference, want)
        ):
            want = [np.asarray(r, dtype=w.dtype) for r, w in zip(reference, want)]
    f = ember.onnx.load(model)
    for got in (f(**feeds), f.run_eager(**feeds)):
        got = _as_tuple(got)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            g = g.numpy() if hasattr(g, "numpy") else np.asarray(g)
            assert g.shape == w.shape, (op, attrs, g.shape, w.shape)
            assert g.dtype == w.dtype, (op, attrs, g.dtype, w.dtype)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{op} {attrs}")
    if captured:
        assert f.eager_reason is None, f"{op} {attrs}: not captured: {f.eager_reason}"
    return f


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Resize and Upsample


_COORDS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
           "asymmetric"]  # fmt: skip


def _resizing_scales(shape):
    """Scales for the last two axes whose lengths both change: onnxruntime copies the input
    where a scale other than 1 leaves every length as it was, ONNX's reference resamples. No
    length becomes 1 either: there pytorch_half_pixel reads position 0 in onnxruntime (the
    spec's words) and (0.5) / scale - 0.5 in ONNX's reference, its conformance cases and
    PyTorch, which ember follows."""
    while True:
        scales = np.array([1, 1, RNG.uniform(0.4, 2.6), RNG.uniform(0.4, 2.6)], np.float32)
        lengths = np.floor(scales[2:].astype(np.float64) * shape[2:])
        if (lengths != shape[2:]).all() and (lengths > 1).all():
            return scales


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_modes_and_coordinates_against_onnxruntime(mode):
    global RNG
    RNG = np.random.default_rng(["nearest", "linear", "cubic"].index(mode))  # (any test order)
    nearest_modes = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
    for coord, trial in itertools.product(_COORDS, range(3)):
        x = _f32(2, 3, int(RNG.integers(2, 7)), int(RNG.integers(2, 7)))
        attrs = {"mode": mode, "coordinate_transformation_mode": coord}
        if mode == "nearest":
            attrs["nearest_mode"] = nearest_modes[trial % 4]
        if mode == "cubic":
            attrs["cubic_coeff_a"] = float(RNG.choice([-0.5, -0.75]))
            attrs["exclude_outside"] = trial % 2
        # align_corners with a scale whose output length is fractional divides by the integer
        # length less one, as onnxruntime (ONNX's reference divides by the fractional one)
        if trial == 0:
            scales = _resizing_scales(x.shape)
            inputs = {"x": x, "roi": None, "scales": scales}
        else:
            sizes = np.array([2, 3, RNG.integers(1, 11), RNG.integers(1, 11)], np.int64)
            inputs = {"x": x, "roi": None, "scales": None, "sizes": sizes}
        # onnxruntime departs from ONNX's reference on some corners: pytorch_half_pixel onto
        # one element (the spec's words read position 0, the reference and PyTorch do not)
        # and half_pixel_symmetric with some nearest modes, where ember follows the
        # reference; align_corners with a fractional length, where ember follows onnxruntime
        # and PyTorch (see above)
        _run(
            "Resize",
            inputs,
            opset=19,
            attrs=attrs,
            constants=[n for n in inputs if n != "x" and inputs[n] is not None],
            reference_breaks_ties=coord != "align_corners",
        )


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias_axes_and_aspect_policies(mode):
    for policy in ("stretch", "not_larger", "not_smaller"):
        x = _f32(2, 9, 11, 3)
        sizes = np.array([4, 5], np.int64)
        attrs = {"mode": mode, "antialias": 1, "axes": [1, 2], "keep_aspect_ratio_policy": policy}
        inputs = {"x": x, "roi": None, "scales": None, "sizes": sizes}
        _run("Resize", inputs, opset=18, attrs=attrs, constants=["sizes"])
    scales = np.array([0.6, 1.7], np.float32)
    inputs = {"x": _f32(2, 3, 8, 7), "roi": None, "scales": scales}
    _run("Resize", inputs, opset=18, attrs={"mode": mode, "axes": [-1, 2]}, constants=["scales"])


def test_resize_tf_crop_and_resize_with_extrapolation():
    x = _f32(1, 2, 6, 5)
    roi = np.array([0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4], np.float32)
    sizes = np.array([1, 2, 7, 4], np.int64)
    for mode in ("nearest", "linear", "cubic"):
        attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize",
                 "extrapolation_value": 2.5}  # fmt: skip
        inputs = {"x": x, "roi": roi, "scales": None, "sizes": sizes}
        _run("Resize", inputs, opset=13, attrs=attrs, constants=["roi", "sizes"])


def test_resize_integer_input_and_older_opsets():
    x = RNG.integers(0, 255, (1, 2, 4, 5)).astype(np.uint8)
    scales = np.array([1, 1, 1.5, 0.6], np.float32)
    for mode in ("nearest", "linear"):
        inputs = {"x": x, "roi": np.zeros(0, np.float32), "scales": scales}
        _run("Resize", inputs, opset=11, attrs={"mode": mode}, constants=["roi", "scales"],
             atol=1.01)  # fmt: skip
    for scales in ([1, 1, 2, 3], [1, 1, 0.5, 0.4], [1, 1, 1.7, 0.6], [1, 1, 1.5, 2.5]):
        scales = np.array(scales, np.float32)
        for mode in ("nearest", "linear"):
            inputs = {"x": _f32(1, 2, 5, 6), "scales": scales}
            _run("Resize", inputs, opset=10, attrs={"mode": mode}, constants=["scales"])
            if scales.min() >= 1:  # onnxruntime's Upsample refuses to shrink
                _run("Upsample", inputs, opset=9, attrs={"mode": mode}, constants=["scales"])


def test_resize_sizes_from_the_data_run_eagerly():
    x = _f32(1, 1, 3, 4)
    inputs = {"x": x, "roi": None, "scales": None, "sizes": np.array([1, 1, 5, 2], np.int64)}
    f = _run("Resize", inputs, opset=19, attrs={"mode": "linear"}, captured=False)
    assert f.eager_reason is not None


# ---------------------------------------------------------------------------------------------
# recurrent layers


def _rnn_inputs(kind, *, dirs, steps, batch, size, hidden, lens=False, states=True,
                peep=False, layout=0, bias=True):  # fmt: skip
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    x = _f32(steps, batch, size) if layout == 0 else _f32(batch, steps, size)
    inputs = {
        "x": x,
        "w": _f32(dirs, gates * hidden, size) * 0.5,
        "r": _f32(dirs, gates * hidden, hidden) * 0.5,
        "b": _f32(dirs, 2 * gates * hidden) * 0.5 if bias else None,
        "lens": RNG.integers(1, steps + 1, batch).astype(np.int32) if lens else None,
    }
    state_shape = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    inputs["h0"] = _f32(*state_shape) if states else None
    if kind == "LSTM":
        inputs["c0"] = _f32(*state_shape) if states else None
        inputs["p"] = _f32(dirs, 3 * hidden) if peep else None
    return inputs


def _rnn_case(kind, attrs, **shape):
    inputs = _rnn_inputs(kind, **dict(shape, layout=0))
    dirs = shape["dirs"]
    attrs = dict(attrs, hidden_size=shape["hidden"])
    attrs.setdefault("direction", {1: "forward", 2: "bidirectional"}[dirs])
    n_out = 3 if kind == "LSTM" else 2
    constants = [n for n in ("w", "r", "b", "p") if n in inputs and inputs[n] is not None]
    f = _run(kind, inputs, n_out=n_out, opset=14, attrs=attrs, constants=constants)
    if shape.get("layout"):
        # onnxruntime runs layout 0 only: the batch-major model must give the same, transposed
        swapped = {n: (a if n in constants or n == "lens" or a is None else np.swapaxes(a, 0, 1))
                   for n, a in inputs.items()}  # fmt: skip
        want = _as_tuple(f(**{n: a for n, a in inputs.items()
                              if n not in constants and a is not None}))  # fmt: skip
        model = _model(kind, swapped, n_out, 14, dict(attrs, layout=1), constants)
        g = ember.onnx.load(model)
        got = _as_tuple(g(**{n: a for n, a in swapped.items()
                             if n not in constants and a is not None}))  # fmt: skip
        y = np.transpose(want[0].numpy(), (2, 0, 1, 3))
        np.testing.assert_allclose(got[0].numpy(), y, rtol=1e-5, atol=1e-6)
        for a, b in zip(got[1:], want[1:]):
            np.testing.assert_allclose(a.numpy(), np.swapaxes(b.numpy(), 0, 1), rtol=1e-5,
                                       atol=1e-6)  # fmt: skip
        assert g.eager_reason is None
    return f


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_recurrent_directions_lengths_and_layouts(kind):
    for dirs, lens, layout, states in itertools.product((1, 2), (False, True), (0, 1), (0, 1)):
        shape = dict(dirs=dirs, steps=int(RNG.integers(1, 6)), batch=3, size=4, hidden=5,
                     lens=lens, layout=layout, states=bool(states))  # fmt: skip
        _rnn_case(kind, {}, **shape)
    shape = dict(dirs=1, steps=4, batch=3, size=4, hidden=5, lens=True)
    _rnn_case(kind, {"direction": "reverse"}, **shape)


def test_recurrent_activations_clip_and_peepholes():
    shape = dict(dirs=2, steps=4, batch=2, size=3, hidden=4)
    acts = {"RNN": ["LeakyRelu", "HardSigmoid"], "GRU": ["HardSigmoid", "ScaledTanh"] * 2,
            "LSTM": ["HardSigmoid", "Affine", "Tanh", "Sigmoid", "Elu", "Softsign"]}  # fmt: skip
    for kind, names in acts.items():
        attrs = {"activations": names, "activation_alpha": [0.3, 0.4, 0.7],
                 "activation_beta": [0.2, 0.1], "clip": 1.5}  # fmt: skip
        _rnn_case(kind, attrs, **shape, lens=True)
    _rnn_case("LSTM", {"input_forget": 1}, **shape)
    _rnn_case("LSTM", {}, **dict(shape, lens=True), peep=True)
    _rnn_case("GRU", {"linear_before_reset": 1}, **dict(shape, lens=True))
    for kind in ("RNN", "GRU", "LSTM"):  # no B: no bias terms at all
        _rnn_case(kind, {}, **shape, bias=False)
        _rnn_case(kind, {"linear_before_reset": 1} if kind == "GRU" else {}, **shape, bias=False)


def _op_names(graph) -> set:
    return {node.op.name for node in graph.nodes} if hasattr(graph, "nodes") else set()


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
def test_pytorch_configurations_run_as_whole_layer_ops(kind):
    attrs = {"linear_before_reset": 1} if kind == "GRU" else {}
    shape = dict(dirs=2, steps=5, batch=3, size=4, hidden=6)
    f = _rnn_case(kind, attrs, **shape)
    text = str(f.graph)
    assert f"{kind.lower()}_layer" in text, text
    assert "scan" not in text
    g = _rnn_case(kind, {"clip": 9.0}, **shape)
    assert "scan" in str(g.graph)


def test_recurrent_gradients_flow_to_initializers():
    inputs = _rnn_inputs("LSTM", dirs=1, steps=3, batch=2, size=3, hidden=4)
    model = _model("LSTM", inputs, 3, 14, {"hidden_size": 4}, constants=["w", "r", "b"])
    module = ember.onnx.load(model, trainable=True)
    y, _, _ = module(inputs["x"], inputs["h0"], inputs["c0"])
    y.sum().backward()
    grads = [p.grad for p in module.parameters()]
    assert len(grads) == 3 and all(g is not None and np.abs(g.numpy()).sum() > 0 for g in grads)


# ---------------------------------------------------------------------------------------------
# sampling: GridSample, RoiAlign, NonMaxSuppression


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_grid_sample_paddings_and_alignment(mode):
    for padding, align in itertools.product(("zeros", "border", "reflection"), (0, 1)):
        x = _f32(2, 3, 5, 6)
        grid = RNG.uniform(-1.4, 1.4, (2, 4, 3, 2)).astype(np.float32)
        attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
        _run("GridSample", {"x": x, "grid": grid}, opset=20, attrs=attrs)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_grid_sample_volumetric_runs_the_op(mode):
    """5-D GridSample (opset 20) against onnxruntime; 4-D and 5-D nodes import as ember's
    grid_sample op (ops/grid_sample.py), not a composite of gathers."""
    for padding, align in itertools.product(("zeros", "border", "reflection"), (0, 1)):
        x = _f32(2, 2, 3, 4, 5)
        grid = RNG.uniform(-1.4, 1.4, (2, 2, 3, 2, 3)).astype(np.float32)
        attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
        f = _run("GridSample", {"x": x, "grid": grid}, opset=20, attrs=attrs)
        assert [n.op.name for n in f.graph.call_nodes()] == ["grid_sample"]


def test_grid_sample_opset16_names():
    x, grid = _f32(1, 2, 4, 4), RNG.uniform(-1.2, 1.2, (1, 3, 5, 2)).astype(np.float32)
    for mode in ("bilinear", "nearest", "bicubic"):
        _run("GridSample", {"x": x, "grid": grid}, opset=16, attrs={"mode": mode})


@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roi_align_sampling(mode):
    x = _f32(2, 3, 10, 12)
    rois = np.array([[0, 0, 9, 9], [1.5, 2.2, 7.7, 9.1], [3, 1, 3.4, 1.2], [-2, -1, 14, 13]],
                    np.float32)  # fmt: skip
    idx = np.array([0, 1, 1, 0], np.int64)
    for ratio, how in itertools.product((0, 2), ("half_pixel", "output_half_pixel")):
        attrs = {"mode": mode, "output_height": 3, "output_width": 4, "sampling_ratio": ratio,
                 "spatial_scale": 0.75, "coordinate_transformation_mode": how}  # fmt: skip
        _run("RoiAlign", {"x": x, "rois": rois, "i": idx}, opset=16, attrs=attrs,
             captured=ratio > 0)  # fmt: skip
        # rois known while capturing: adaptive sampling is captured too
        _run("RoiAlign", {"x": x, "rois": rois, "i": idx}, opset=16, attrs=attrs,
             constants=["rois", "i"])  # fmt: skip


def test_non_max_suppression_against_onnxruntime():
    for center, trial in itertools.product((0, 1), range(3)):
        boxes = RNG.uniform(0, 10, (2, 12, 4)).astype(np.float32)
        if not center:
            boxes[..., 2:] = boxes[..., :2] + RNG.uniform(-3, 5, (2, 12, 2))
        else:
            boxes[..., 2:] = RNG.uniform(0.5, 5, (2, 12, 2))
        scores = RNG.uniform(0, 1, (2, 3, 12)).astype(np.float32)
        scores[0, 0, :4] = 0.5  # ties
        inputs = {
            "boxes": boxes,
            "scores": scores,
            "max": np.array([int(RNG.integers(1, 8))], np.int64),
            "iou": np.array([RNG.uniform(0.1, 0.7)], np.float32),
            "thr": np.array([0.3 if trial else 0.0], np.float32),
        }
        _run("NonMaxSuppression", inputs, opset=11, attrs={"center_point_box": center},
             constants=["max", "iou", "thr"], captured=False)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# attention


def test_attention_masks_caches_and_heads():
    b, hq, hk, lq, lp, e = 2, 4, 2, 3, 5, 8
    lk = lq
    cases = []
    for mask_kind, causal, past in itertools.product(("none", "bool", "float"),
                                                     (0, 1), (False, True)):  # fmt: skip
        total = lk + (lp if past else 0)
        inputs = {"q": _f32(b, hq, lq, e), "k": _f32(b, hk, lk, e), "v": _f32(b, hk, lk, e)}
        width = total
        if mask_kind == "bool":
            inputs["mask"] = RNG.uniform(size=(lq, width)) > 0.3
        elif mask_kind == "float":
            inputs["mask"] = _f32(b, 1, lq, width)
        else:
            inputs["mask"] = None
        if past:
            inputs["pk"], inputs["pv"] = _f32(b, hk, lp, e), _f32(b, hk, lp, e)
        cases.append((inputs, causal, past))
    for inputs, causal, past in cases:
        attrs = {"is_causal": causal}
        _run("Attention", inputs, n_out=3 if past else 1, opset=23, attrs=attrs)


def test_attention_3d_and_scores_output():
    # (softcap is left to the conformance cases: onnxruntime 1.32 disagrees with ONNX's
    # reference there)
    b, lq, lk, hq, hk, e = 2, 4, 6, 6, 3, 4
    inputs = {"q": _f32(b, lq, hq * e), "k": _f32(b, lk, hk * e), "v": _f32(b, lk, hk * 5)}
    for mode in (0, 1, 2, 3):
        attrs = {"q_num_heads": hq, "kv_num_heads": hk, "scale": 0.3,
                 "qk_matmul_output_mode": mode}  # fmt: skip
        # a float mask: onnxruntime writes a bool mask's -inf as float32's lowest in the scores
        model_inputs = dict(inputs, mask=_f32(lq, lk), pk=None, pv=None)
        _run("Attention", model_inputs, n_out=4, opset=23, attrs=attrs)


def test_attention_softcap_windows_and_padding_against_the_reference():
    # onnxruntime 1.32 differs from ONNX's reference on softcap: compare with the reference
    from onnx.reference import ReferenceEvaluator

    b, hq, hk, lq, lk, e = 2, 4, 2, 3, 6, 4
    inputs = {"q": _f32(b, hq, lq, e), "k": _f32(b, hk, lk, e), "v": _f32(b, hk, lk, e),
              "mask": _f32(lq, lk - 1)}  # fmt: skip
    for attrs in ({"softcap": 1.5, "is_causal": 1}, {"softcap": 3.0, "qk_matmul_output_mode": 1},
                  {"left_window_size": 1, "right_window_size": 2},
                  {"is_causal": 1, "left_window_size": 2}):  # fmt: skip
        opset = 25 if "left_window_size" in attrs else 23
        model = _model("Attention", inputs, 4, opset, attrs)
        want = ReferenceEvaluator(model).run(None, inputs)
        got = ember.onnx.load(model)(**inputs)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-6, err_msg=str(attrs))
    nonpad = {"q": _f32(b, hq, lq, e), "k": _f32(b, hk, lk, e), "v": _f32(b, hk, lk, e),
              "mask": None, "pk": None, "pv": None, "n": np.array([4, 6], np.int64)}  # fmt: skip
    model = _model("Attention", nonpad, 1, 24, {"is_causal": 1})
    want = ReferenceEvaluator(model).run(None, {k: v for k, v in nonpad.items() if v is not None})
    got = ember.onnx.load(model)(**{k: v for k, v in nonpad.items() if v is not None})
    np.testing.assert_allclose(got.numpy(), want[0], rtol=1e-5, atol=1e-6)


def test_deform_conv_groups_masks_and_geometry():
    for group, og, stride, dil, pad in ((1, 1, 1, 1, 0), (2, 1, 2, 1, 1), (1, 2, 1, 2, 2),
                                        (2, 2, 2, 2, 1)):  # fmt: skip
        n, c, size, oc, k = 2, 4, 7, 6, 3
        out = (size + 2 * pad - (dil * (k - 1) + 1)) // stride + 1
        inputs = {
            "x": _f32(n, c, size, size),
            "w": _f32(oc, c // group, k, k),
            "offset": _f32(n, og * k * k * 2, out, out) * 1.5,
            "b": _f32(oc),
            "mask": RNG.uniform(0, 1, (n, og * k * k, out, out)).astype(np.float32),
        }
        attrs = {"group": group, "offset_group": og, "strides": [stride] * 2,
                 "dilations": [dil] * 2, "pads": [pad] * 4, "kernel_shape": [k, k]}  # fmt: skip
        _run("DeformConv", inputs, opset=19, attrs=attrs, constants=["w", "b"])
        _run("DeformConv", dict(inputs, b=None, mask=None), opset=19, attrs=attrs)


def test_recurrent_scan_path_is_differentiable():
    inputs = _rnn_inputs("GRU", dirs=2, steps=3, batch=2, size=3, hidden=4, lens=True)
    attrs = {"hidden_size": 4, "direction": "bidirectional", "clip": 2.0}
    model = _model("GRU", inputs, 2, 14, attrs, constants=["w", "r", "b"])
    module = ember.onnx.load(model, trainable=True)
    y, _ = module(inputs["x"], inputs["lens"], inputs["h0"])
    y.sum().backward()
    grads = [p.grad for p in module.parameters()]
    assert len(grads) == 3 and all(g is not None and np.abs(g.numpy()).sum() > 0 for g in grads)
