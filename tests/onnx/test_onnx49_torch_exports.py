"""Models PyTorch's TorchScript exporter writes (``dynamo=False``) imported by ember, against
onnxruntime and PyTorch: F.interpolate with ``align_corners=True`` and a scale factor that
gives no whole length under a dynamic image size (Resize divides by the output length less
one), and fine-tuning a fresh BatchNorm whose running statistics the exporter merged with
its weight and bias (``trainable=True``: the statistics stay buffers of their own)."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
nn = torch.nn


def _export(model, args, opset, dynamic_axes=None, **kwargs) -> bytes:
    buffer = io.BytesIO()
    names = [f"x{i}" for i in range(len(args))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model.eval(),
            args,
            buffer,
            opset_version=opset,
            dynamo=False,
            input_names=names,
            dynamic_axes=dynamic_axes,
            **kwargs,
        )
    return buffer.getvalue()


class _Interpolate(nn.Module):
    def __init__(self, mode, scale):
        super().__init__()
        self.mode, self.scale = mode, scale

    def forward(self, x):
        return nn.functional.interpolate(
            x, scale_factor=self.scale, mode=self.mode, align_corners=True
        )


@pytest.mark.parametrize("opset", [11, 13, 17])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_align_corners_with_fractional_scales_under_dynamic_sizes(mode, opset):
    model = _Interpolate(mode, (2.0, 1.5))
    data = _export(
        model, (torch.randn(2, 3, 6, 8),), opset, dynamic_axes={"x0": {0: "b", 2: "h", 3: "w"}}
    )
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    f = ember.onnx.load(data)
    rng = np.random.default_rng(0)
    # 9 * 1.5 and 7 * 1.5 give no whole length; 8 * 1.5 does
    for shape in [(2, 3, 6, 8), (1, 3, 5, 9), (3, 3, 4, 7)]:
        x = rng.standard_normal(shape).astype(np.float32)
        want = session.run(None, {"x0": x})[0]
        got = f(x).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        expected = model(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def _step_pair(model, module, x, y, steps=3, lr=0.1):
    """Losses of SGD steps on PyTorch's model and ember's import of it, side by side."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    ember_optimizer = ember.optim.SGD(list(module.parameters()), lr=lr)
    losses = []
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        out = module(ember.tensor(x.numpy()))
        ember_loss = ember.nn.functional.cross_entropy(out, ember.tensor(y.numpy()))
        ember_optimizer.zero_grad()
        ember_loss.backward()
        ember_optimizer.step()
        losses.append((float(ember_loss.detach().numpy()), float(loss.detach())))
    return losses


@pytest.mark.parametrize("opset", [13, 17])
def test_fine_tuning_keeps_merged_batchnorm_statistics_apart(opset):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 3),
    )
    x = torch.randn(4, 3, 6, 6)
    y = torch.randint(0, 3, (4,))
    data = _export(model, (x,), opset, dynamic_axes={"x0": {0: "b"}}, do_constant_folding=False)
    proto = onnx.load_from_string(data)
    merged = [n for n in proto.graph.node if n.op_type == "Identity"]
    assert merged, "the exporter no longer merges the fresh statistics; the test needs them"
    module = ember.onnx.load(data, trainable=True)
    trained = {name for name, _ in module.named_parameters()}
    torch_trained = [p for p in model.parameters() if p.requires_grad]
    assert len(trained) == len(torch_trained)
    buffers = dict(module.named_buffers())
    assert len(buffers) == 2
    before = {name: b.numpy().copy() for name, b in buffers.items()}
    for got, want in _step_pair(model, module, x, y):
        assert got == pytest.approx(want, rel=1e-5, abs=1e-6)
    for name, value in module.named_buffers():
        np.testing.assert_array_equal(value.numpy(), before[name])
    stats = [model[1].running_mean.numpy(), model[1].running_var.numpy()]
    np.testing.assert_array_equal(sorted(map(tuple, before.values())), sorted(map(tuple, stats)))


class _Nearest(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return nn.functional.interpolate(x, scale_factor=self.scale, mode="nearest")


@pytest.mark.parametrize("scale", [0.6, 0.7, 1.3, 2.2])
def test_nearest_scales_pick_onnxruntimes_pixels(scale):
    """Resize's nearest coordinates are float32 (3 / 0.6f is 5.0, not 4.9999998)."""
    model = _Nearest(scale)
    dynamic = {"x0": {0: "b", 2: "h", 3: "w"}}
    data = _export(model, (torch.randn(1, 2, 10, 10),), 13, dynamic_axes=dynamic)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    f = ember.onnx.load(data)
    for h, w in [(10, 10), (7, 13), (15, 6)]:
        x = np.arange(2 * h * w, dtype=np.float32).reshape(1, 2, h, w)
        want = session.run(None, {"x0": x})[0]
        np.testing.assert_array_equal(f(x).numpy(), want)
        np.testing.assert_array_equal(f(x).numpy(), model(torch.from_numpy(x)).numpy())
