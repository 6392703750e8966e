"""Round trips: what ``ember.onnx.export`` writes, ``ember.onnx.load`` reads back equal to the
ember program it came from (the zoo models, ember.models' blocks, scripted control flow, a
whole training step run three times by the imported model), and the imported graph exported
again runs the same in onnxruntime."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ember
from ember import nn, zoo

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ember.onnx.exporter import to_model  # noqa: E402

from .test_export import _ember_models, collatz_like  # noqa: E402


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _flat(o)]
    return [out.numpy() if hasattr(out, "numpy") else np.asarray(out)]


def _same(got, want, rtol=1e-4, atol=1e-5):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", zoo.ZOO)
def test_zoo_models_round_trip(name, tmp_path):
    spec = zoo.SPECS[name]
    ember.manual_seed(0)
    model = zoo.build(name, ember, **spec.test_sizes)
    model.eval()
    x = ember.tensor(zoo.inputs(name, spec.test_batch, **spec.test_sizes)[0])
    path = tmp_path / f"{name}.onnx"
    ember.onnx.export(model, path, x)
    with ember.no_grad():
        want = _flat(model(x))
    imported = ember.onnx.load(str(path))
    _same(_flat(imported(x)), want)
    assert imported.eager_reason is None, imported.eager_reason
    # and once more through the exporter: the imported graph is an ember program like any other
    again = tmp_path / f"{name}_again.onnx"
    ember.onnx.export(imported.graph, again)
    session = ort.InferenceSession(str(again))
    _same(session.run(None, {session.get_inputs()[0].name: x.numpy()}), want)


@pytest.mark.parametrize("name", list(_ember_models()))
def test_ember_models_round_trip(name, tmp_path):
    fn, args = _ember_models()[name]
    if isinstance(fn, nn.Module):
        fn.eval()
    path = tmp_path / f"{name}.onnx"
    ember.onnx.export(fn, path, *args)
    with ember.no_grad():
        want = _flat(fn(*args))
    _same(_flat(ember.onnx.load(str(path))(*args)), want)


def test_scripted_control_flow_round_trips_captured():
    model = to_model(ember.script(collatz_like), ember.ones(3), ember.tensor(2.0))
    imported = ember.onnx.load(model)
    for scale in (0.1, 3.0, -3.0, 40.0, -500.0):
        x = ember.tensor(np.linspace(-1, 2, 3).astype(np.float32) * scale)
        n = ember.tensor(np.float32(1.5))
        _same(_flat(imported(x, n)), _flat(collatz_like(x, n)))
    assert imported.eager_reason is None, imported.eager_reason


def test_an_exported_training_step_trains_when_imported():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = ember.randn(4, 6)
    y = ember.tensor(np.array([0, 2, 1, 2]))

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step(x, y)
    exported = to_model(step, x, y)
    updates = json.loads({p.key: p.value for p in exported.metadata_props}["ember.updates"])
    imported = ember.onnx.load(exported)
    initial = {t.name: onnx.numpy_helper.to_array(t) for t in exported.graph.initializer}
    state = {i.name: initial[i.name] for i in exported.graph.input if i.name in initial}
    outputs = imported.output_names
    losses = []
    for _ in range(3):
        got = dict(zip(outputs, imported(x, y, **state)))
        losses.append(got[outputs[0]].item())
        for out, name in updates.items():
            state[name] = got[out].numpy()
    expected = [step(x, y).item() for _ in range(3)]
    np.testing.assert_allclose(losses, expected, rtol=1e-5, atol=1e-6)
