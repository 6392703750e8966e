"""ember.ao.quantization against PyTorch 2.13's torch.ao.quantization on the same weights and
calibration data: observers' parameters (histogram search, per-channel symmetric weights),
dynamic quantization of Linear and LSTM (weights' integers and scales, outputs), and the
eager-mode static workflow (QuantStub, fuse_modules, prepare, calibration, convert) on
Conv2d(+BatchNorm)(+ReLU) and Linear(+ReLU) models, whose quantized outputs must be PyTorch's
integers (a value may differ by one quantization step where the two float computations land
on either side of a rounding tie, which the test counts)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch", reason="PyTorch (the reference) is not installed")
tq = pytest.importorskip("torch.ao.quantization")


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # (PyTorch deprecates its eager-mode quantization)
        warnings.simplefilter("ignore")
        yield


def _load(model, torch_model):
    state = {
        k: ember.tensor(v.detach().numpy().copy()) for k, v in torch_model.state_dict().items()
    }
    model.load_state_dict(state)
    return model


@pytest.mark.parametrize("reduce_range", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_histogram_observer_parameters_are_pytorchs(seed, reduce_range):
    r = np.random.default_rng(seed)
    ours = ember.ao.quantization.HistogramObserver(reduce_range=reduce_range)
    theirs = tq.HistogramObserver(reduce_range=reduce_range)
    for b in range(3):  # (each batch widens the range: the old histogram is upsampled)
        x = (r.standard_normal((4, 3, 5, 5)) * (1 + b) + seed * 0.4).astype(np.float32)
        if seed == 1:
            x = np.maximum(x, 0)
        ours(ember.tensor(x))
        theirs(torch.tensor(x))
    (s, z), (ts, tz) = ours.calculate_qparams(), theirs.calculate_qparams()
    np.testing.assert_array_equal(np.asarray(s, np.float32), ts.numpy())
    np.testing.assert_array_equal(np.asarray(z), tz.numpy())


class _Dyn(torch.nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 6, num_layers=layers)
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x):
        h, (hn, cn) = self.lstm(x)
        return self.fc(h), hn, cn


class _EmberDyn(ember.nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.lstm = ember.nn.LSTM(4, 6, num_layers=layers)
        self.fc = ember.nn.Linear(6, 3)

    def forward(self, x):
        h, (hn, cn) = self.lstm(x)
        return self.fc(h), hn, cn


@pytest.mark.parametrize("layers", [1, 2])
def test_dynamic_quantization_is_pytorchs(layers):
    torch.manual_seed(layers)
    theirs = _Dyn(layers).eval()
    ours = _load(_EmberDyn(layers), theirs).eval()
    tqm = tq.quantize_dynamic(theirs, {torch.nn.Linear, torch.nn.LSTM}, dtype=torch.qint8)
    qm = ember.ao.quantization.quantize_dynamic(
        ours, {ember.nn.Linear, ember.nn.LSTM}, dtype=ember.qint8
    )
    assert type(qm.fc).__name__ == type(tqm.fc).__name__ == "Linear"
    assert type(qm.lstm).__name__ == type(tqm.lstm).__name__ == "LSTM"
    w, tw = qm.fc.weight(), tqm.fc.weight()
    np.testing.assert_array_equal(w.int_repr().numpy(), tw.int_repr().numpy())
    assert w.q_scale() == tw.q_scale() and w.q_zero_point() == tw.q_zero_point() == 0
    np.testing.assert_array_equal(w.dequantize().numpy(), tw.dequantize().numpy())
    x = np.random.default_rng(layers).standard_normal((5, 3, 4)).astype(np.float32) * 2
    with torch.no_grad():
        want = tqm(torch.tensor(x))
    got = qm(ember.tensor(x))
    for g, t in zip(got, want):  # (float outputs: the same integers, sigmoid/tanh's ulps apart)
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)
    # (ember's dense linear, a float input of three dimensions)
    y = np.random.default_rng(9).uniform(-3, 1, (2, 4, 6)).astype(np.float32)
    np.testing.assert_allclose(
        qm.fc(ember.tensor(y)).numpy(), tqm.fc(torch.tensor(y)).numpy(), rtol=1e-5, atol=1e-6
    )


def _static(lib, relu: bool, bn: bool):
    nn, q = lib.nn, lib.ao.quantization

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = q.QuantStub()
            self.conv = nn.Conv2d(3, 5, 3, padding=1, stride=2)
            self.bn = nn.BatchNorm2d(5) if bn else nn.Identity()
            self.relu = nn.ReLU() if relu else nn.Identity()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(5, 4)
            self.fc_relu = nn.ReLU()
            self.fc2 = nn.Linear(4, 3)
            self.dequant = q.DeQuantStub()

        def forward(self, x):
            x = self.pool(self.relu(self.bn(self.conv(self.quant(x))))).flatten(1)
            return self.dequant(self.fc2(self.fc_relu(self.fc(x))))

    return Net()


@pytest.mark.parametrize("backend", ["x86", "qnnpack"])
@pytest.mark.parametrize("relu, bn", [(True, True), (False, True), (True, False), (False, False)])
def test_static_workflow_is_pytorchs(backend, relu, bn):
    if backend == "qnnpack" and "qnnpack" not in torch.backends.quantized.supported_engines:
        pytest.skip("this PyTorch build has no qnnpack engine")
    torch.manual_seed(3)
    theirs = _static(torch, relu, bn).eval()
    if bn:
        with torch.no_grad():
            theirs.bn.running_mean.uniform_(-0.3, 0.3)
            theirs.bn.running_var.uniform_(0.5, 2.0)
    ours = _load(_static(ember, relu, bn), theirs).eval()
    groups = [["fc", "fc_relu"]] + (
        [["conv", "bn", "relu"][: 2 + relu]] if bn else [["conv", "relu"]] if relu else []
    )
    results = []
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = "x86" if backend == "x86" else "qnnpack"
    try:
        for lib, model in ((torch, theirs), (ember, ours)):
            q = lib.ao.quantization
            fused = q.fuse_modules(model, groups)
            fused.qconfig = q.get_default_qconfig(backend)
            prepared = q.prepare(fused)
            r = np.random.default_rng(7)
            for _ in range(3):
                prepared(lib.tensor(r.standard_normal((4, 3, 9, 9)).astype(np.float32)))
            qnet = q.convert(prepared)
            x = lib.tensor(r.standard_normal((6, 3, 9, 9)).astype(np.float32) * 1.5)
            with lib.no_grad():
                out = qnet(x)
                qx = qnet.quant(x)
            results.append(
                (
                    out.numpy(),
                    qx.q_scale(),
                    qx.q_zero_point(),
                    qnet.fc.weight().int_repr().numpy(),
                    type(qnet.conv).__name__,
                    type(qnet.fc).__name__,
                    qnet.fc2.scale,
                )
            )
    finally:
        torch.backends.quantized.engine = previous
    (t_out, *t_rest), (e_out, *e_rest) = results
    assert e_rest[0] == t_rest[0] and e_rest[1] == t_rest[1]
    np.testing.assert_array_equal(e_rest[2], t_rest[2])
    assert e_rest[3:5] == t_rest[3:5] and e_rest[5] == pytest.approx(t_rest[5], rel=1e-6)
    step = t_rest[5]
    off = np.abs(e_out - t_out)
    assert off.max() <= step * 1.001, off.max() / step  # (at most one quantization step...)
    assert np.count_nonzero(off) <= max(1, off.size // 20)  # (...and rarely)


def test_quantized_layers_refuse_float_inputs_and_bad_fusions():
    q = ember.ao.quantization
    model = ember.nn.Sequential(q.QuantStub(), ember.nn.Linear(3, 2), q.DeQuantStub()).eval()
    model.qconfig = q.get_default_qconfig("x86")
    prepared = q.prepare(model)
    prepared(ember.randn(4, 3))
    qm = q.convert(prepared)
    with pytest.raises(ember.errors.QuantizationError, match="quint8 quantized input"):
        qm[1](ember.randn(2, 3))
    with pytest.raises(ember.errors.QuantizationError, match="cannot fuse"):
        q.fuse_modules(ember.nn.Sequential(ember.nn.ReLU(), ember.nn.Linear(2, 2)), [["0", "1"]])
    bn = ember.nn.Sequential(ember.nn.Conv2d(1, 1, 1), ember.nn.BatchNorm2d(1))
    with pytest.raises(ember.errors.QuantizationError, match="eval mode"):
        q.fuse_modules(bn, [["0", "1"]])
