"""ember.fft and stft/istft exported through ONNX's DFT (opset 17; from 20 its axis is an
input), complex values written as real/imaginary pairs on a last axis (refused by name before
onnx50): forward and inverse, one-sided and full, every norm, several axes, symbolic lengths,
complex products, quotients, conjugates, magnitudes, angles, exponentials, sums and slices.
Each against onnxruntime, NumPy and ember's own import of the file. Ops that have no pair
form still refuse complex values by name."""

from __future__ import annotations

import numpy as np
import pytest

import ember

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

fft = ember.fft


def _spectra(x):
    a = fft.rfft(x)
    c = fft.fft(x)
    return (
        fft.irfft(a * 2.0, n=x.shape[-1]),
        fft.ifft(c).real,
        fft.rfft(x, n=10, norm="ortho").abs(),
        ember.view_as_real(c),
        fft.fft2(x, norm="forward").imag,
        (a * a.conj()).real,
        fft.irfft(a * ember.tensor([1.0, 2, 3, 4], dtype=ember.complex64), n=7, norm="forward"),
        ember.view_as_real(c / (c + 1.0) - ember.complex(x, -x)),
        fft.irfft2(fft.rfft2(x), s=x.shape),
        fft.rfftn(x.unsqueeze(0), norm="ortho").abs(),
        ember.cat([(a * (0.6 + 0.8j)).angle(), x.angle()], -1),  # (off the branch cut)
        ember.view_as_real(ember.exp(a * 0.1)[:, 1:3].sum(0)),
        fft.fftshift(c.abs()) + fft.hfft(a, n=6),
    )


def _numpy_spectra(x):
    a, c = np.fft.rfft(x), np.fft.fft(x)
    return (
        np.fft.irfft(a * 2, n=x.shape[-1]),
        np.fft.ifft(c).real,
        np.abs(np.fft.rfft(x, n=10, norm="ortho")),
        np.stack([c.real, c.imag], -1),
        np.fft.fft2(x, norm="forward").imag,
        (a * a.conj()).real,
        np.fft.irfft(a * np.array([1, 2, 3, 4]), n=7, norm="forward"),
        None,
        np.fft.irfft2(np.fft.rfft2(x), s=x.shape),
        np.abs(np.fft.rfftn(x[None], norm="ortho")),
        np.concatenate([np.angle(a * (0.6 + 0.8j)), np.angle(x)], -1),
        None,
        np.fft.fftshift(np.abs(c)) + np.fft.hfft(a, n=6),
    )


@pytest.mark.parametrize("opset", [17, 20])
def test_transforms_against_onnxruntime_and_numpy(opset, tmp_path):
    x = np.random.default_rng(opset).standard_normal((3, 6)).astype(np.float32)
    path = tmp_path / "fft.onnx"
    ember.onnx.export(_spectra, path, ember.tensor(x), opset=opset)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    assert any(n.op_type == "DFT" for n in onnx.load(str(path)).graph.node)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x})
    want = [w.numpy() for w in _spectra(ember.tensor(x))]
    back = [b.numpy() for b in ember.onnx.load(path)(x)]
    for g, w, b, n in zip(got, want, back, _numpy_spectra(x.astype(np.float64))):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(b, w, rtol=1e-4, atol=1e-4)
        if n is not None:
            np.testing.assert_allclose(g, n, rtol=1e-4, atol=1e-4)


def test_symbolic_lengths_and_stft(tmp_path):
    def f(x):
        a = fft.rfft(x)
        frames = ember.stft(x, 8, hop_length=3, window=ember.hann_window(8), return_complex=True)
        return (
            fft.irfft(a * 0.5, n=x.shape[-1]),
            a.abs(),
            fft.fft(x, norm="ortho").real,
            (frames.abs() + 1e-6).log(),  # (the frames' count follows the length)
        )

    path = tmp_path / "sym.onnx"
    ember.onnx.export(f, path, input_signature=[ember.TensorSpec((None, None))], opset=20)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for shape in ((2, 32), (1, 17), (3, 40)):
        x = np.random.default_rng(shape[1]).standard_normal(shape).astype(np.float32)
        for g, w in zip(session.run(None, {"x": x}), f(ember.tensor(x))):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-4)
        torch = pytest.importorskip("torch")
        hann = torch.hann_window(8)
        want = torch.stft(torch.tensor(x), 8, hop_length=3, window=hann, return_complex=True)
        got = f(ember.tensor(x))[3].numpy()
        np.testing.assert_allclose(got, (want.abs() + 1e-6).log().numpy(), rtol=1e-4, atol=1e-4)

    window = ember.hann_window(8)

    def spectrogram(x):
        spec = ember.stft(x, 8, hop_length=2, window=window, return_complex=True)
        return spec.abs() ** 2, ember.istft(spec, 8, hop_length=2, window=window, length=32)

    x = np.random.default_rng(0).standard_normal((2, 32)).astype(np.float32)
    ember.onnx.export(spectrogram, path, ember.tensor(x), opset=18)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for g, w in zip(session.run(None, {"x": x}), spectrogram(ember.tensor(x))):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-4)


def test_ops_without_a_pair_form_refuse_complex_values_by_name(tmp_path):
    with pytest.raises(ember.errors.OnnxError, match=r"^pow: .*complex64"):
        ember.onnx.export(
            lambda t: ember.view_as_real(fft.rfft(t) ** 3), tmp_path / "p.onnx", ember.ones(4)
        )


def test_complex_inputs_and_outputs_are_pairs_and_old_opsets_refuse(tmp_path):
    z = (np.random.default_rng(0).standard_normal((4, 5, 2))).astype(np.float32)
    path = tmp_path / "c.onnx"
    ember.onnx.export(
        lambda t: fft.ifft(t * t.conj()), path, ember.tensor(z[..., 0] + 1j * z[..., 1])
    )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: z})
    c = z[..., 0] + 1j * z[..., 1]
    want = np.fft.ifft(c * c.conj())
    np.testing.assert_allclose(got, np.stack([want.real, want.imag], -1), rtol=1e-4, atol=1e-5)
    with pytest.raises(ember.errors.OnnxError, match=r"fft_r2c: .*before opset 17 \(DFT\)"):
        ember.onnx.export(lambda t: fft.rfft(t).abs(), path, ember.ones(4), opset=16)


def test_a_training_step_through_transforms(tmp_path):
    """The gradients of rfft, irfft and a magnitude: their VJPs pad spectra, pick with
    where and transform back, each on pairs (pad and where refused complex values before).
    The loss and the updated parameters against ember's eager step."""

    def stepper():
        ember.manual_seed(0)
        layer = ember.nn.Linear(8, 8)
        optimizer = ember.optim.SGD(layer.parameters(), lr=0.1)

        def step(x):
            y = layer(x)
            loss = fft.rfft(y).abs().mean() + fft.irfft(fft.rfft(y) * 0.5, n=8).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss

        return step, layer

    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    path = tmp_path / "step.onnx"
    ember.onnx.export(stepper()[0], path, ember.tensor(x), opset=18)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    loss, *updated = session.run(None, {session.get_inputs()[0].name: x})
    step, layer = stepper()
    np.testing.assert_allclose(loss, step(ember.tensor(x)).detach().numpy(), rtol=1e-5)
    for p in layer.parameters():
        p = p.detach().numpy()
        assert any(u.shape == p.shape and np.allclose(u, p, rtol=1e-4, atol=1e-6) for u in updated)
