"""Programs of hunt59 on model interchange and quantization: models exported by each library's
``onnx.export`` (PyTorch's TorchScript exporter on the PyTorch run, ember's own on ember's)
with dynamic batch axes and run by onnxruntime at two batch sizes; PyTorch-exported files read
by ``ember.onnx.load`` (a GRU tagger, a small transformer encoder layer, a CNN with
BatchNorm in eval) and compared with PyTorch; dynamic quantization of a Linear/LSTM model
and eager-mode static post-training quantization (QuantStub, fused Conv+BN+ReLU, per-channel
weights, a calibration pass) compared with PyTorch's quantized results.
"""

import io

import numpy as np
import pytest

import ember

from .harness import check_program

ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the exported files")
pytest.importorskip("onnx", reason="the onnx package writes and checks the exported files")
torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def export_and_run(lib, ctx):
    """A tagger (Embedding, bidirectional GRU, LayerNorm, Linear) exported with a dynamic
    batch and sequence axis and an int64 input, run by onnxruntime at two shapes; the same for
    an MLP with two inputs and two outputs."""
    nn = lib.nn

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 6)
            self.gru = nn.GRU(6, 5, batch_first=True, bidirectional=True)
            self.norm = nn.LayerNorm(10)
            self.out = nn.Linear(10, 4)

        def forward(self, ids):
            h, _ = self.gru(self.emb(ids))
            return self.out(self.norm(h)).log_softmax(-1)

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 4)
            self.b = nn.Linear(2, 4)

        def forward(self, x, y):
            h = torch_like_gelu(lib, self.a(x)) * self.b(y).sigmoid()
            return h.sum(-1), h.amax(-1, keepdim=True)

    model = ctx.init(Tagger(), "tagger").eval()
    two = ctx.init(Two(), "two").eval()
    rng = np.random.default_rng(0)
    ids = ctx.t(rng.integers(0, 10, (2, 5)))
    buf = io.BytesIO()
    lib.onnx.export(model, (ids,), buf, input_names=["ids"], output_names=["tags"], dynamic_axes={"ids": {0: "b", 1: "t"}, "tags": {0: "b", 1: "t"}}, opset_version=17, dynamo=False)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    out = []
    for shape in ((2, 5), (3, 7)):
        x = rng.integers(0, 10, shape)
        (got,) = sess.run(None, {"ids": x})
        with lib.no_grad():
            ref = model(ctx.t(x))
        out += [got, ref]
    buf2 = io.BytesIO()
    x0 = ctx.t(rng.standard_normal((2, 3)).astype(np.float32))
    y0 = ctx.t(rng.standard_normal((2, 2)).astype(np.float32))
    lib.onnx.export(two, (x0, y0), buf2, input_names=["x", "y"], output_names=["s", "m"], dynamic_axes={"x": {0: "n"}, "y": {0: "n"}}, opset_version=17, dynamo=False)
    sess2 = ort.InferenceSession(buf2.getvalue(), providers=["CPUExecutionProvider"])
    xs = rng.standard_normal((4, 3)).astype(np.float32)
    ys = rng.standard_normal((4, 2)).astype(np.float32)
    got2 = sess2.run(None, {"x": xs, "y": ys})
    with lib.no_grad():
        ref2 = two(ctx.t(xs), ctx.t(ys))
    return out + [got2, list(ref2), [i.name for i in sess2.get_inputs()], [o.name for o in sess.get_outputs()]]


def torch_like_gelu(lib, x):
    return lib.nn.functional.gelu(x, approximate="tanh")


def _torch_exported(model, args, **kwargs):
    buf = io.BytesIO()
    torch.onnx.export(model, args, buf, opset_version=17, dynamo=False, **kwargs)
    return buf.getvalue()


def test_pytorch_exported_files_run_on_ember():
    """Files written by PyTorch's exporter (a GRU tagger with dynamic axes, an encoder layer
    with a key padding mask as a second input, a CNN with BatchNorm, adaptive pooling and
    flatten) read by ember.onnx.load, captured and eager, at the export shape and another."""
    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    nn = torch.nn
    tagger = nn.Sequential(nn.Linear(4, 6), nn.Tanh())
    gru = nn.GRU(6, 5, batch_first=True)

    class Tag(nn.Module):
        def __init__(self):
            super().__init__()
            self.pre, self.gru, self.out = tagger, gru, nn.Linear(5, 3)

        def forward(self, x):
            h, hn = self.gru(self.pre(x))
            return self.out(h), hn

    enc = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = enc

        def forward(self, x, pad):
            return self.enc(x, src_key_padding_mask=pad)

    cnn = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3, stride=2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 2),
    )
    with torch.no_grad():
        cnn[1].running_mean.uniform_(-0.5, 0.5)
        cnn[1].running_var.uniform_(0.5, 2.0)
    models = [
        (Tag().eval(), [(2, 5, 4), (3, 7, 4)], {"input_names": ["x"], "dynamic_axes": {"x": {0: "b", 1: "t"}}}),
        (cnn.eval(), [(2, 3, 8, 8), (1, 3, 8, 8)], {"input_names": ["x"], "dynamic_axes": {"x": {0: "b"}}}),
    ]
    for model, shapes, kwargs in models:
        data = _torch_exported(model, (torch.randn(*shapes[0]),), **kwargs)
        for capture in (True, False):
            f = ember.onnx.load(data, capture=capture)
            for shape in shapes:
                x = rng.standard_normal(shape).astype(np.float32)
                with torch.no_grad():
                    want = model(torch.from_numpy(x))
                got = f(ember.tensor(x))
                want = want if isinstance(want, tuple) else (want,)
                got = got if isinstance(got, (tuple, list)) else (got,)
                for w, g in zip(want, got):
                    np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-5)
    x = torch.randn(2, 5, 8)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    enc_model = Enc().eval()
    data = _torch_exported(enc_model, (x, pad), input_names=["x", "pad"])
    f = ember.onnx.load(data)
    with torch.no_grad():
        want = enc_model(x, pad)
    got = f(ember.tensor(x.numpy()), ember.tensor(pad.numpy()))
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


def dynamic_quantization(lib, ctx):
    """quantize_dynamic on a model of Linear and LSTM layers (qint8 weights, activations
    quantized per batch at run time): outputs, the quantized modules' types and weights'
    int representation and scales, compared with PyTorch's."""
    nn = lib.nn
    q = lib.ao.quantization

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(4, 6, batch_first=True)
            self.fc = nn.Linear(6, 3)

        def forward(self, x):
            h, _ = self.lstm(x)
            return self.fc(h[:, -1])

    model = ctx.init(M(), "m").eval()
    qm = q.quantize_dynamic(model, {nn.Linear, nn.LSTM}, dtype=lib.qint8)
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((3, 5, 4)).astype(np.float32))
    with lib.no_grad():
        ref = model(x)
        out = qm(x)
    w = qm.fc.weight()
    return [out, ref, type(qm.fc).__name__, type(qm.lstm).__name__, w.int_repr(), w.q_scale(), w.dequantize()]


def static_quantization(lib, ctx):
    """Eager-mode post-training static quantization: QuantStub/DeQuantStub, Conv+BN+ReLU fused
    by fuse_modules (eval), the x86 qconfig's observers (histogram activations, per-channel
    symmetric weights), two calibration batches, convert; the quantized model's output, its
    int8 activations' scale and zero point, and a quantized Linear's weight."""
    nn = lib.nn
    q = lib.ao.quantization

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = q.QuantStub()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.relu = nn.ReLU()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(4, 3)
            self.dequant = q.DeQuantStub()

        def forward(self, x):
            x = self.quant(x)
            x = self.pool(self.relu(self.bn(self.conv(x)))).flatten(1)
            return self.dequant(self.fc(x))

    net = ctx.init(Net(), "net").eval()
    with lib.no_grad():
        net.bn.running_mean.copy_(lib.tensor([0.1, -0.2, 0.0, 0.3]))
        net.bn.running_var.copy_(lib.tensor([1.5, 0.7, 1.0, 2.0]))
    fused = q.fuse_modules(net, [["conv", "bn", "relu"]])
    fused.qconfig = q.get_default_qconfig("x86")
    prepared = q.prepare(fused)
    rng = np.random.default_rng(3)
    for _ in range(2):
        prepared(ctx.t(rng.standard_normal((4, 2, 6, 6)).astype(np.float32)))
    qnet = q.convert(prepared)
    x = ctx.t(rng.standard_normal((2, 2, 6, 6)).astype(np.float32))
    with lib.no_grad():
        out = qnet(x)
        ref = net(x)
    qx = qnet.quant(x)
    return [out, ref, float(qx.q_scale()), int(qx.q_zero_point()), qnet.fc.weight().int_repr(), type(qnet.conv).__name__]


PROGRAMS = [export_and_run, dynamic_quantization, static_quantization]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: getattr(p, "__name__", None))
def test_eager(program):
    check_program(program, rtol=1e-4, atol=1e-4)
