"""grid_sample_backward exported (ops/_grid_sample_onnx.py: the shared tap rules emitting ONNX
nodes) and run by onnxruntime against ember's kernel: every mode, padding and alignment in
4-D, trilinear and nearest in 5-D, grids reaching past the borders (and one NaN), each output
alone; and a spatial transformer's training step exported and run three steps."""

import json

import numpy as np
import pytest

import ember
from ember import nn
from ember.ops._registry import apply
from ember.ops.grid_sample import GRID_SAMPLE_BACKWARD

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from ember.onnx.exporter import to_model  # noqa: E402

CASES = [
    (mode, padding, align, (2, 3, 5, 4), (3, 2))
    for mode in ("bilinear", "nearest", "bicubic")
    for padding in ("zeros", "border", "reflection")
    for align in (False, True)
] + [
    (mode, padding, align, (1, 2, 3, 4, 2), (2, 1, 3))
    for mode in ("bilinear", "nearest")
    for padding in ("zeros", "reflection")
    for align in (False, True)
]


def _run(model, arrays):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: a for i, a in zip(session.get_inputs(), arrays)})


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c[:3])) + f"-{len(c[3])}d")
def test_grid_sample_backward_in_onnxruntime(case):
    mode, padding, align, in_shape, out_shape = case
    r = np.random.default_rng(len(in_shape) * 100 + hash(case[:3]) % 97)
    dims = len(in_shape) - 2
    x = r.standard_normal(in_shape).astype(np.float32)
    grid = r.uniform(-1.4, 1.4, (in_shape[0], *out_shape, dims)).astype(np.float32)
    grid.reshape(-1)[:2] = [1.0, -1.0]  # (points on the borders)
    g = r.standard_normal((*in_shape[:2], *out_shape)).astype(np.float32)
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    for mask in ((True, True), (True, False), (False, True)):

        def f(x, grid, g, mask=mask):
            return apply(GRID_SAMPLE_BACKWARD, x, grid, g, output_mask=mask, **attrs)

        tensors = [ember.tensor(a) for a in (x, grid, g)]
        expected = [t.numpy() for t in f(*tensors)]
        got = _run(to_model(f, *tensors), (x, grid, g))
        for k, (e, o) in enumerate(zip(expected, got)):
            # float32 sums in another order: an ulp per term (at most 64 taps and points per
            # sum) of the largest result
            atol = 64 * 2**-24 * max(np.abs(e).max(), 1.0)
            np.testing.assert_allclose(o, e, rtol=0, atol=atol, err_msg=f"{mask} {k}")


def test_a_nan_grid_value_and_float64():
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 3))
    grid = np.array([[[[0.2, np.nan], [0.5, -0.3]]]])
    g = np.ones((1, 2, 1, 2))
    attrs = {"mode": "bilinear", "padding_mode": "zeros", "align_corners": False}

    def f(x, grid, g):
        return apply(GRID_SAMPLE_BACKWARD, x, grid, g, output_mask=(True, True), **attrs)

    tensors = [ember.tensor(a) for a in (x, grid, g)]
    for e, o in zip(f(*tensors), _run(to_model(f, *tensors), (x, grid, g))):
        assert o.dtype == np.float64
        np.testing.assert_allclose(o, e.numpy(), rtol=1e-12, atol=1e-12, equal_nan=True)


def test_a_spatial_transformer_training_step_runs_three_steps():
    ember.manual_seed(0)
    loc = nn.Linear(12, 6)
    head = nn.Linear(2 * 4 * 4, 3)
    params = [*loc.parameters(), *head.parameters()]
    opt = ember.optim.SGD(params, lr=0.05, momentum=0.9)
    x = ember.randn(2, 2, 5, 6)
    y = ember.tensor(np.array([0, 2]))

    def step(x, y):
        opt.zero_grad()
        theta = loc(x.mean(1).reshape(2, -1)[:, :12]).reshape(2, 2, 3)
        grid = nn.functional.affine_grid(theta, (2, 2, 4, 4), align_corners=False)
        warped = nn.functional.grid_sample(x, grid, align_corners=False)
        loss = nn.functional.cross_entropy(head(warped.reshape(2, -1)), y)
        loss.backward()
        opt.step()
        return loss

    step(x, y)
    exported = to_model(step, x, y)
    assert "GridSample" in {n.op_type for n in exported.graph.node}
    updates = json.loads({p.key: p.value for p in exported.metadata_props}["ember.updates"])
    session = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    initial = {t.name: onnx.numpy_helper.to_array(t) for t in exported.graph.initializer}
    args = [i.name for i in exported.graph.input if i.name not in initial]
    state = {i.name: initial[i.name] for i in exported.graph.input if i.name in initial}
    outputs = [o.name for o in session.get_outputs()]
    losses = []
    for _ in range(3):
        got = dict(
            zip(outputs, session.run(None, {**dict(zip(args, (x.numpy(), y.numpy()))), **state}))
        )
        losses.append(float(got[outputs[0]]))
        for out, name in updates.items():
            state[name] = got[out]
    expected = [step(x, y).item() for _ in range(3)]
    np.testing.assert_allclose(losses, expected, rtol=1e-5, atol=1e-6)
