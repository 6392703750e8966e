"""The exported forms' semantics where ONNX's ops differ from ember's kernels: NaN in
reductions, arg-extremes and pooling, searchsorted's and histc's edges, running extremes,
erfc's tail, the cross-entropy ops in every configuration, and ops only eager code records,
each run by onnxruntime against ember."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.errors import OnnxError

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ember.onnx.exporter import to_model  # noqa: E402

from .test_export import _assert_same, _numpy, _run  # noqa: E402


def _graph_run(build, arrays):
    """A graph made with ``build(graph, *inputs) -> outputs`` on inputs typed as ``arrays``,
    exported and run by onnxruntime, against ember's interpreter."""
    from ember.graph.interpreter import run
    from ember.graph.ir import Graph
    from ember.types import TensorType

    g = Graph("direct")
    values = [
        g.add_input(TensorType(a.shape, ember.dtypes.from_numpy_dtype(a.dtype)), f"in{k}")
        for k, a in enumerate(arrays)
    ]
    g.set_outputs(build(g, *values))
    expected = [np.asarray(v) for v in run(g, arrays)]
    _assert_same(_run(to_model(g), *arrays), expected)


def test_ops_no_sample_exports():
    """gelu, gelu_tanh and hardtanh (in graphs they are composites) and adaptive max pooling
    over sizes its output divides: exported directly."""
    from ember.ops import REGISTRY

    def build(g, x):
        a = g.add_call(REGISTRY["gelu"], [x]).outputs[0]
        b = g.add_call(REGISTRY["gelu_tanh"], [x]).outputs[0]
        c = g.add_call(REGISTRY["hardtanh"], [x], {"lo": -0.5, "hi": 0.5}).outputs[0]
        pooled = g.add_call(REGISTRY["adaptive_max_pool"], [x], {"out_size": (2, 3)})
        return [a, b, c, *pooled.outputs]

    x = np.random.default_rng(0).standard_normal((2, 3, 4, 6)).astype(np.float32) * 2
    _graph_run(build, [x])


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("shape", [(4, 5), (2, 5, 3), (5,)])
def test_cross_entropy_ops(reduction, weighted, smoothing, shape):
    """softmax_cross_entropy and its backward (eager code's one-op form) against the kernels."""
    from ember.ops import REGISTRY

    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    target_shape = () if len(shape) == 1 else (shape[0], *shape[2:])
    target = rng.integers(0, 5, target_shape).astype(np.int64)
    arrays = [x, target]
    if weighted:
        arrays.append(rng.uniform(0.5, 2.0, 5).astype(np.float32))
    out_shape = target_shape if reduction == "none" else ()
    arrays.append(rng.standard_normal(out_shape).astype(np.float32))
    attrs = {"ignore_index": 2, "reduction": reduction, "smoothing": smoothing}

    def build(g, *values):
        loss = g.add_call(REGISTRY["softmax_cross_entropy"], list(values[:-1]), attrs)
        grad = g.add_call(REGISTRY["softmax_cross_entropy_backward"], list(values), attrs)
        return [loss.outputs[0], grad.outputs[0]]

    _graph_run(build, arrays)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", [(4, 5), (2, 5, 3), (5,)])
def test_nll_loss_ops(reduction, weighted, shape):
    """nll_loss and its backward (eager code's one-op form) against the kernels."""
    from ember.ops import REGISTRY

    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    target_shape = () if len(shape) == 1 else (shape[0], *shape[2:])
    target = rng.integers(0, 5, target_shape).astype(np.int64)
    arrays = [x, target]
    if weighted:
        arrays.append(rng.uniform(0.5, 2.0, 5).astype(np.float32))
    out_shape = target_shape if reduction == "none" else ()
    arrays.append(rng.standard_normal(out_shape).astype(np.float32))
    attrs = {"ignore_index": 2, "reduction": reduction}

    def build(g, *values):
        loss = g.add_call(REGISTRY["nll_loss"], list(values[:-1]), attrs)
        grad = g.add_call(REGISTRY["nll_loss_backward"], list(values), attrs)
        return [loss.outputs[0], grad.outputs[0]]

    _graph_run(build, arrays)


_NAN_CASES = {
    "amax": lambda t: t.amax(-1),
    "amin": lambda t: t.amin(0),
    "argmax": lambda t: t.argmax(-1),
    "argmin": lambda t: t.argmin(),
    "clamp": lambda t: t.clamp(-1.5, 2.5),
    "relu": lambda t: ember.relu(t),
    "maximum": lambda t: ember.maximum(t, 2.0),
    "sign": lambda t: t.sign(),
    "max_pool": lambda t: ember.nn.functional.max_pool1d(
        t.reshape(1, 2, 4), 2, return_indices=True
    ),
    "adaptive_max_pool": lambda t: ember.nn.functional.adaptive_max_pool1d(
        t.reshape(1, 2, 4), 2, return_indices=True
    ),
}


@pytest.mark.parametrize("name", list(_NAN_CASES))
def test_nan_propagates_as_in_ember(name):
    """ONNX's comparisons (MaxPool, the reductions, ArgMax) may skip NaN; the rules keep
    NumPy's NaN semantics, position included."""
    f = _NAN_CASES[name]
    x = ember.tensor(np.array([[1.0, np.nan, 3.0, -2.0], [0.5, 2.0, -1.0, 4.0]], np.float32))
    got = _run(to_model(f, x), x.numpy())
    for g, e in zip(got, _numpy(f(x))):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("sequence", ["sorted", "nan", "unsorted"])
def test_searchsorted_with_ties_and_nan(right, batched, sequence):
    """The export is PyTorch's binary search, step for step: eager ember's (and PyTorch's)
    answer also where the sorted sequence holds NaN or is out of order, where the search's
    path through it decides."""
    seq = np.array([-1.0, 0.0, 0.0, 2.5, 4.0], np.float32)
    if sequence == "nan":
        seq[3] = np.nan
    elif sequence == "unsorted":
        seq = np.array([2.0, 0.0, -2.0, 3.0, 2.0], np.float32)
    values = np.array([[0.0, -3.0, np.nan], [2.5, 9.0, 0.1]], np.float32)
    if batched:
        other = np.sort(np.array([3.0, -2.0, 0.1, 0.1, 7.0], np.float32))
        if sequence == "nan":
            other[0] = np.nan
        seq = np.stack([seq, other])
    s, v = ember.tensor(seq), ember.tensor(values)

    def f(a, b):
        return ember.searchsorted(a, b, right=right)

    got = _run(to_model(f, s, v), seq, values)
    _assert_same(got, _numpy(f(s, v)))
    torch = pytest.importorskip("torch")
    want = torch.searchsorted(torch.tensor(seq), torch.tensor(values), right=right)
    np.testing.assert_array_equal(got[0], want.numpy())


@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (0.0, 0.0), (2.0, 2.0)])
def test_histc(bounds):
    x = np.array([-2.0, -1.0, -0.5, 0.0, 0.3, 0.9999, 1.0, 3.0, np.nan, np.inf], np.float32)
    lo, hi = bounds

    def f(t):
        return ember.histc(t, bins=4, min=lo, max=hi)

    _assert_same(_run(to_model(f, ember.tensor(x)), x), _numpy(f(ember.tensor(x))))


@pytest.mark.parametrize("kind", ["cummax", "cummin"])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_running_extremes(kind, dim, dtype):
    """cummax / cummin (select_index's scans): ties take the later position, NaN wins."""
    x = np.array([[1.0, 3.0, 3.0, np.nan, 2.0], [0.0, -1.0, 0.0, 5.0, 5.0]])
    x = x.astype(dtype) if dtype is np.float32 else np.nan_to_num(x).astype(dtype)

    def f(t):
        out = getattr(ember, kind)(t, dim)
        return out.values, out.indices

    _assert_same(_run(to_model(f, ember.tensor(x)), x), _numpy(f(ember.tensor(x))))


def test_median_is_refused_naming_its_kind():
    with pytest.raises(OnnxError, match="kind=median"):
        to_model(lambda t: ember.median(t, 0).indices, ember.randn(3, 2))


def test_erfc_keeps_its_tail_in_float32_and_refuses_float64():
    x = np.concatenate([np.linspace(-6, 9, 301), [0.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    got = _run(to_model(ember.erfc, ember.tensor(x)), x)[0]
    want = ember.erfc(ember.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=1e-37)
    with pytest.raises(OnnxError, match="float64"):
        to_model(ember.erfc, ember.tensor(x.astype(np.float64)))


@pytest.mark.parametrize("where", ["middle", "first", "last", "gradient"])
def test_indexing_by_a_0d_tensor(where):
    """x[:, i] with i a 0-d tensor (an imported model's Gather by a scalar, BERT's pooler)
    drops the dimension: the exported GatherND read a one-element index and kept it, and
    onnx's checker then failed with a raw InferenceError."""
    import onnx

    x = ember.randn(2, 3, 4)
    i = ember.tensor(1)

    def fn(t):
        if where == "middle":
            return t[:, i] * 2.0
        if where == "first":
            return t[i] + 1.0
        if where == "last":
            return t[:, :, ember.tensor(-1)]
        return ember.grad(lambda u: (u[:, i] ** 2).sum())(t)

    model = onnx.load_from_string(to_model(fn, x).SerializeToString())
    _assert_same(_run(model, x.numpy()), _numpy(fn(x)))


def test_means_over_a_symbolic_batch(tmp_path):
    """A mean over a ``None`` dimension of the signature divides by a count known only when
    the model runs (the graph's ``full`` of a symbolic size): exported as the input's size,
    cast, so the file runs at every batch size; so does a range of such a size."""
    import onnxruntime as ort

    def f(x, y):
        loss = ember.nn.functional.cross_entropy(x, y)  # (its mean over the batch)
        return x.mean(0), x.mean(), ember.cat([x, x], 0).mean(0), loss

    spec = [ember.TensorSpec((None, 4), ember.float32), ember.TensorSpec((None,), ember.int64)]
    path = tmp_path / "means.onnx"
    ember.onnx.export(f, path, input_signature=spec)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    back = ember.onnx.load(path)
    rng = np.random.default_rng(0)
    for n in (1, 2, 5):
        x, y = rng.standard_normal((n, 4)).astype(np.float32), rng.integers(0, 4, n)
        expected = _numpy(f(ember.tensor(x), ember.tensor(y)))
        _assert_same(session.run(None, {"x": x, "y": y}), expected)
        _assert_same(_numpy(back(x, y)), expected)

    # a range of such a size (refused before onnx50): a running count of ones in the file
    def ranged(x):
        return x * ember.arange(x.shape[0]).reshape(-1, 1) + ember.arange(1, x.shape[0] + 3, 2)[1]

    ember.onnx.export(ranged, tmp_path / "r.onnx", input_signature=spec[:1])
    session = ort.InferenceSession(str(tmp_path / "r.onnx"), providers=["CPUExecutionProvider"])
    for n in (1, 4):
        x = rng.standard_normal((n, 4)).astype(np.float32)
        _assert_same(session.run(None, {"x": x}), _numpy(ranged(ember.tensor(x))))


def test_variance_assignment_and_batch_norm_over_a_symbolic_batch(tmp_path):
    """A variance over a ``None`` dimension divides by its count minus the correction when the
    model runs (it raised a ShapeError on ``N - 1``); ``y[i] = v`` and ``y[:, 1] = v`` on a
    tensor of symbolic shape scatter to positions built from the run's sizes (they were
    refused); training-mode batch_norm over a symbolic batch exports, its running variance
    scaled by the run's ``N / (N - 1)``. Each against ember at three batch sizes (N = 1: the
    unbiased variance of one row is NaN, as in PyTorch)."""
    import onnxruntime as ort

    F = ember.nn.functional

    def g(x, i):
        y = x.clone()
        y[i] = 0.0
        w = x.clone()
        w[:, 1] = x[:, 0] * 2.0
        return x.var(0), x.std(0, keepdim=True), x.var(), ember.var_mean(x, 0)[0], y, w

    def f(x, i):
        rm, rv = ember.zeros(3), ember.ones(3)
        bn = F.batch_norm(x, rm, rv, training=True, momentum=0.25)
        return (*g(x, i), bn, rv)

    spec = [ember.TensorSpec((None, 3), ember.float32), ember.TensorSpec((2,), ember.int64)]
    path = tmp_path / "sym.onnx"
    ember.onnx.export(f, path, input_signature=spec)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for n in (1, 2, 5):
        x, i = rng.standard_normal((n, 3)).astype(np.float32), np.array([0, -1])
        got = session.run(None, {"x": x, "i": i})
        if n == 1:  # (eager batch_norm refuses one row, as PyTorch's does)
            with np.errstate(invalid="ignore", divide="ignore"):  # (0 / 0: NaN, as expected)
                got, expected = got[:6], _numpy(g(ember.tensor(x), ember.tensor(i)))
            assert np.isnan(got[0]).all() and np.isnan(expected[0]).all()
            got, expected = got[4:], expected[4:]
        else:
            expected = _numpy(f(ember.tensor(x), ember.tensor(i)))
        _assert_same(got, expected)


def test_einsum_topk_and_same_convolutions_over_symbolic_sizes(tmp_path):
    """einsum's label sizes, topk's k against its dimension, gather's index against the input,
    a stride-1 "same" convolution's and average pooling's output sizes and instance_norm's
    check of its spatial size over ``None`` / named dimensions: each refused with 'cannot
    decide N > 1' or 'T + 2' while the graph was built; now exported and run by onnxruntime at
    two sizes against ember; chunk into equal pieces too. interpolate and tensor_split over a
    symbolic size raise a ShapeError naming it (they raised a TypeError)."""
    import onnxruntime as ort

    F = ember.nn.functional
    rng = np.random.default_rng(0)
    w1 = ember.tensor(rng.standard_normal((3, 2, 3)).astype(np.float32))
    w2 = ember.tensor(rng.standard_normal((3, 3, 5)).astype(np.float32))

    def f(a, b, scores, x):
        v, i = scores.topk(3)
        y = F.conv1d(F.conv1d(x, w1, padding=1), w2, padding=4, dilation=2)
        return (
            ember.einsum("bij,bjk->bik", a, b),
            ember.einsum("bii->b", a),
            ember.einsum("bij->j", a),
            v,
            i,
            y,
            F.avg_pool1d(y, 3, 1, 1),
            F.instance_norm(y),
        )

    spec = [
        ember.TensorSpec((None, 3, 3), ember.float32),
        ember.TensorSpec((None, 3, 2), ember.float32),
        ember.TensorSpec(("K",), ember.float32),
        ember.TensorSpec((None, 2, "T"), ember.float32),
    ]
    path = tmp_path / "sym.onnx"
    ember.onnx.export(f, path, input_signature=spec)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (1, 4):
        arrays = [
            rng.standard_normal(s).astype(np.float32)
            for s in ((n, 3, 3), (n, 3, 2), (n + 4,), (n, 2, 2 * n + 3))
        ]
        expected = _numpy(f(*[ember.tensor(a) for a in arrays]))
        feed = {i.name: a for i, a in zip(session.get_inputs(), arrays)}
        _assert_same(session.run(None, feed), expected)
    # upsampling a symbolic size by a whole factor exports (onnx50); 1/3 has no such form
    path = tmp_path / "i.onnx"
    ember.onnx.export(lambda t: F.interpolate(t, scale_factor=2.0), path, input_signature=spec[3:])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for t in (2, 5):
        x = rng.standard_normal((2, 2, t)).astype(np.float32)
        _assert_same(
            session.run(None, {"t": x}), _numpy(F.interpolate(ember.tensor(x), scale_factor=2.0))
        )
    with pytest.raises(ember.errors.ShapeError, match="interpolate: .*no fraction"):
        ember.onnx.export(
            lambda t: F.interpolate(t, scale_factor=1 / 3),
            tmp_path / "i.onnx",
            input_signature=spec[3:],
        )

    # chunk: equal pieces of 2 * N exported (it raised 'a size cannot be negative: -N'),
    # chunks <= 0 refused as PyTorch does (0: a ZeroDivisionError,
    # -1: four pieces)
    def halves(t):
        return [c * 2.0 for c in ember.cat([t, t], 0).chunk(2, 0)]

    path = tmp_path / "chunk.onnx"
    ember.onnx.export(halves, path, input_signature=[ember.TensorSpec((None, 3), ember.float32)])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (1, 3):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        _assert_same(session.run(None, {"t": x}), _numpy(halves(ember.tensor(x))))

    # an odd chunk or tensor_split of a symbolic size: pieces of ceil(N / 2) and N // 2
    # (onnx50: refused before)
    def pieces(t):
        return t.chunk(2, 0)[0] * 2.0, t.chunk(2, 0)[1] + 1.0, ember.tensor_split(t, 3, 0)[2]

    path = tmp_path / "c.onnx"
    ember.onnx.export(pieces, path, input_signature=[ember.TensorSpec((None, 3), ember.float32)])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (2, 3, 5):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        _assert_same(session.run(None, {"t": x}), _numpy(pieces(ember.tensor(x))))
    for chunks in (0, -1):
        with pytest.raises(ember.errors.ShapeError, match="greater than 0"):
            ember.ones(4).chunk(chunks)
