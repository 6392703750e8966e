"""Conv nets exported with symbolic image sizes (``TensorSpec((None, 3, None, None))``):
strided convolutions and poolings give sizes such as ``(H+1)//2``, upsampling doubles them, a
U-Net concatenates its skip connections, flatten/view/reshape and slices from the end work on
them, adaptive average pooling takes them to 1x1, shape ops (strided slices, roll, splits,
unfold, reflect padding) work on them. Before onnx50 a symbolic size could only be
a product of symbols (``N - 1`` was refused), so none of these exported. Each file passes the
checker and shape inference and runs in onnxruntime at several batch and image sizes, equal to
ember; ember's own captured function runs them too, and a graph file keeps the expressions."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import TensorSpec

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

SPEC = [TensorSpec((None, 3, None, None))]


class _Block(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.relu(self.norm(self.conv(x)))


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down1, self.down2, self.mid = _Block(3, 8), _Block(8, 16), _Block(16, 16)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.up2, self.up1 = _Block(32, 8), _Block(16, 8)
        self.pool, self.head = nn.MaxPool2d(2), nn.Conv2d(8, 2, 1)

    def forward(self, x):
        a = self.down1(x)
        b = self.down2(self.pool(a))
        m = self.mid(self.pool(b))
        u = self.up2(ember.cat([self.up(m), b], 1))
        u = self.up1(ember.cat([F.interpolate(u, size=a.shape[2:], mode="bilinear"), a], 1))
        return self.head(u)


class Strided(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 7, stride=2, padding=3)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2)  # (no padding: H - 2 before the stride)
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.c3 = nn.Conv2d(8, 4, 3, stride=2, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = self.pool(F.relu(self.c2(F.relu(self.c1(x)))))
        z = F.interpolate(self.c3(y), scale_factor=2.0, mode="bilinear")
        n = y.shape[-1]
        return (
            z[:, :, 1:-1],
            y[..., : n // 2],
            self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1)),
            y.view(y.shape[0], -1).sum(1),
            y.reshape(y.shape[0], 8, -1).mean(-1),
            F.avg_pool2d(y, 2, ceil_mode=False).flatten(2),
        )


def _outputs(value) -> list:
    return [v.detach().numpy() for v in (value if isinstance(value, tuple) else (value,))]


def _check(model, path, shapes):
    model.eval()
    ember.onnx.export(model, path, input_signature=SPEC)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    captured = ember.function(model, input_signature=SPEC)
    rng = np.random.default_rng(0)
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        want = _outputs(model(ember.tensor(x)))
        got = session.run(None, {session.get_inputs()[0].name: x})
        assert len(got) == len(want)
        for g, w, c in zip(got, want, _outputs(captured(ember.tensor(x)))):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(c, w, rtol=1e-4, atol=1e-5)


def test_a_unet_with_symbolic_image_sizes(tmp_path):
    _check(UNet(), tmp_path / "unet.onnx", [(1, 3, 16, 16), (2, 3, 32, 24), (3, 3, 8, 40)])


def test_strided_convolutions_slices_and_flattening(tmp_path):
    shapes = [(1, 3, 64, 64), (2, 3, 61, 47), (3, 3, 33, 100)]
    _check(Strided(), tmp_path / "strided.onnx", shapes)


class Shapes(nn.Module):
    """Shape ops over symbolic sizes that needed their values before: strided and negative
    slices, roll, reflect padding, splits by a symbolic size, unfold, tensor_split, pixel
    (un)shuffle, a reshape whose -1 divides a product of symbols, ceil-mode pooling."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 12, 3, padding=1)

    def forward(self, x):
        h = x.shape[2]
        top, bottom = x.split(h // 2, 2)
        return (
            x[:, :, ::2, 1::3] * 2.0,
            x[:, :, -3:, :-2],
            ember.roll(x, 1, 2) + ember.roll(x, -2, 3),
            F.pad(x, (1, 1, 2, 2), mode="reflect"),
            top - bottom,
            F.unfold(x, 3, padding=1, stride=2),
            ember.tensor_split(x, 3, 3)[1],
            F.pixel_unshuffle(F.pixel_shuffle(self.conv(x), 2), 2),
            x.reshape(x.shape[0], -1, 4).sum(-1),
            F.max_pool2d(x, 3, 2, ceil_mode=True) + F.avg_pool2d(x, 3, 2, ceil_mode=True),
        )


def test_shape_ops_over_symbolic_sizes(tmp_path):
    _check(Shapes(), tmp_path / "shapes.onnx", [(1, 3, 16, 12), (2, 3, 20, 24), (3, 3, 8, 36)])


class Resized(nn.Module):
    """interpolate over symbolic sizes at ratios no whole factor gives (downsampling, 1.5,
    a segmentation head resized to its input's size, align_corners=True) and bicubic: PyTorch's
    source positions computed in the graph, the taps gathered."""

    def forward(self, x):
        coarse = F.avg_pool2d(x, 4)
        return (
            F.interpolate(coarse, size=x.shape[2:], mode="bilinear", align_corners=True),
            F.interpolate(coarse, size=x.shape[2:], mode="bilinear"),
            F.interpolate(x, scale_factor=0.5, mode="bilinear"),
            F.interpolate(x, scale_factor=1.5, mode="nearest"),
            F.interpolate(F.max_pool2d(x, 2), size=x.shape[2:]),
            F.interpolate(F.max_pool2d(x, 2), size=x.shape[2:], mode="nearest-exact"),
            F.interpolate(x, scale_factor=2.0, mode="bicubic"),
            F.interpolate(coarse, size=x.shape[2:], mode="bicubic", align_corners=True),
        )


def test_resizing_at_any_ratio_against_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    _check(Resized(), tmp_path / "resized.onnx", [(1, 3, 16, 16), (2, 3, 21, 13)])
    x = np.random.default_rng(0).standard_normal((2, 3, 21, 13)).astype(np.float32)
    t = torch.tensor(x)
    coarse = tf.avg_pool2d(t, 4)
    want = (
        tf.interpolate(coarse, size=t.shape[2:], mode="bilinear", align_corners=True),
        tf.interpolate(coarse, size=t.shape[2:], mode="bilinear"),
        tf.interpolate(t, scale_factor=0.5, mode="bilinear"),
        tf.interpolate(t, scale_factor=1.5, mode="nearest"),
        tf.interpolate(tf.max_pool2d(t, 2), size=t.shape[2:]),
        tf.interpolate(tf.max_pool2d(t, 2), size=t.shape[2:], mode="nearest-exact"),
        tf.interpolate(t, scale_factor=2.0, mode="bicubic"),
        tf.interpolate(coarse, size=t.shape[2:], mode="bicubic", align_corners=True),
    )
    captured = ember.function(Resized(), input_signature=SPEC)
    for got, w in zip(captured(ember.tensor(x)), want):
        np.testing.assert_allclose(got.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)


def test_sizes_that_have_no_form_name_the_op_and_line(tmp_path):
    """A scale that is no small fraction, antialiased taps and adaptive windows over a
    symbolic size are refused naming the op and this file's line."""
    with pytest.raises(ember.ShapeError, match=r"interpolate: .*no fraction") as info:
        ember.onnx.export(
            lambda x: F.interpolate(x, scale_factor=1 / 3),
            tmp_path / "a.onnx",
            input_signature=SPEC,
        )
    assert "test_onnx50_symbolic_sizes.py" in str(info.value)
    with pytest.raises(ember.ShapeError, match="adaptive_avg_pool: .*to 7"):
        ember.onnx.export(nn.AdaptiveAvgPool2d(7), tmp_path / "c.onnx", input_signature=SPEC)
    with pytest.raises(ember.ShapeError, match="interpolate: mode 'bilinear' builds its"):
        ember.onnx.export(
            lambda x: F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True),
            tmp_path / "b.onnx",
            input_signature=SPEC,
        )


def test_expression_sizes_in_graph_files(tmp_path):
    """A captured graph whose types hold floor divisions and sums saves and loads."""
    from ember.graph.load import load_graph
    from ember.graph.serialize import save_graph

    f = ember.function(Strided().eval(), input_signature=SPEC)
    f(ember.ones(1, 3, 20, 20))
    save_graph(f.graph, tmp_path / "g.json")
    back = load_graph(tmp_path / "g.json")
    assert [v.type for v in back.outputs] == [v.type for v in f.graph.outputs]
    assert any("//" in str(d) for v in back.outputs for d in v.type.shape)


def test_a_gpt_with_a_symbolic_length(tmp_path):
    """ember.zoo's GPT slices its position table and causal mask to the input's length and
    counts positions with arange(T): over a symbolic length these were refused (a range's
    length fixed while the graph is built, a static table sliced by a symbolic bound)."""
    from ember import zoo

    spec = zoo.SPECS["gpt"]
    ember.manual_seed(0)
    model = zoo.build("gpt", ember, **spec.test_sizes).eval()
    signature = [TensorSpec((None, None), ember.int64)]
    path = tmp_path / "gpt.onnx"
    ember.onnx.export(model, path, input_signature=signature)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    captured = ember.function(model, input_signature=signature)
    tokens, _ = zoo.inputs("gpt", 3, **spec.test_sizes)
    for length in (tokens.shape[1], 3, 1):
        t = tokens[:, :length].copy()
        with ember.no_grad():
            want = model(ember.tensor(t)).numpy()
        (got,) = session.run(None, {session.get_inputs()[0].name: t})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(
            captured(ember.tensor(t)).detach().numpy(), want, rtol=1e-5, atol=1e-6
        )


def test_a_training_step_over_symbolic_image_sizes(tmp_path):
    """The backward of strided convolutions and poolings over symbolic sizes: window codes to
    plane positions computed in the graph, and ConvTranspose's rows past the last window
    padded or cropped at run time (their number depends on the size's parity). Losses and
    updated parameters against ember's eager step at even and odd sizes."""

    def build():
        ember.manual_seed(0)
        return nn.Sequential(
            nn.Conv2d(3, 4, 3, 1, 1),
            nn.ReLU(),
            nn.Conv2d(4, 4, 3, 2, 1),
            nn.BatchNorm2d(4),
            nn.MaxPool2d(2),
            nn.Conv2d(4, 4, 3, padding=1),
            nn.AvgPool2d(2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(4, 3),
        )

    def stepper(model):
        optimizer = ember.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss

        return step

    path = tmp_path / "step.onnx"
    signature = [SPEC[0], TensorSpec((None,), ember.int64)]
    ember.onnx.export(stepper(build()), path, input_signature=signature)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for shape in ((2, 3, 16, 16), (3, 3, 13, 18), (1, 3, 9, 11)):
        x = np.random.default_rng(shape[2]).standard_normal(shape).astype(np.float32)
        y = np.arange(shape[0]) % 3
        loss, *updated = session.run(None, {"x": x, "y": y})
        model = build()
        want = stepper(model)(ember.tensor(x), ember.tensor(y))
        np.testing.assert_allclose(loss, want.detach().numpy(), rtol=1e-5)
        for p in model.parameters():  # (each updated parameter is among the outputs)
            p = p.detach().numpy()
            assert any(
                u.shape == p.shape and np.allclose(u, p, rtol=1e-4, atol=1e-6) for u in updated
            )


def test_sizes_declared_as_multiples(tmp_path):
    """TensorSpec((None, 3, 16 * h, 16 * w)): every stride divides the sizes exactly, so the
    types stay products (the output is 16*h by 16*w); the file computes h as the input's
    size over 16 (before onnx50 a symbol had to be some input's dimension on its own)."""
    from ember.symbolic import sym

    model = UNet().eval()
    spec = [TensorSpec((None, 3, 16 * sym("h"), 16 * sym("w")))]
    path = tmp_path / "unet16.onnx"
    ember.onnx.export(model, path, input_signature=spec)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert session.get_outputs()[0].shape == ["N", 2, "16*h", "16*w"]
    for shape in ((1, 3, 32, 16), (2, 3, 48, 64)):
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        (got,) = session.run(None, {"x": x})
        np.testing.assert_allclose(
            got, model(ember.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5
        )
