"""Conformance samples for ops/real_complex.py, ops/fft.py, ops/stft.py and ops/eig.py: real
inputs taken through complex values and back to real results, so every complex primitive (its
rule against its kernel, its gradient against finite differences and PyTorch) runs in float64
and float32."""

import numpy as np

import ember

from .harness import Sample, rng

r = rng(17)
A = r.standard_normal((3, 4))
B = r.standard_normal((3, 4))
P = r.standard_normal((3, 4, 2))
X = r.standard_normal((2, 5, 6))


def torch():
    import torch as t

    return t


def _parts(m, a, b):
    z = m.complex(a, b)
    w = z * z.conj() + z * z
    return m.real(w), m.imag(w), m.angle(z + 0.5), m.abs(z)


def _views(m, p):
    z = m.view_as_complex(p)
    return m.view_as_real(m.exp(z) / (z + 2.0))


def _transforms(m, x):
    fft = m.fft
    z = fft.fft(x, n=7, norm="ortho")
    return (
        m.view_as_real(z),
        fft.irfft(fft.rfft(x) * 2.0, n=6),
        fft.irfft2(fft.rfft2(x, s=(4, 5)), s=(4, 5), norm="forward"),
        m.view_as_real(fft.ifftn(z, dim=(0, 2))),
        fft.hfft(z, n=9),
        m.view_as_real(fft.ihfft(x, norm="forward").resolve_conj()),
    )


def _eig(m, a):
    # functions of the eigenvalues and of the eigenvectors' moduli: independent of their order
    # and of each eigenvector's phase, so finite differences see a smooth function
    values, vectors = m.linalg.eig(a)
    moduli = vectors.abs() ** 2
    return (
        (values * values).real.sum(-1),
        (values * values.conj()).real.sum(-1),
        (moduli * moduli).sum((-2, -1)),
        m.linalg.eigvals(a).real.sum(-1),
    )


def _stft(m, x, w):
    s = m.stft(x, 6, 2, window=w, return_complex=True)
    return m.view_as_real(s), m.istft(s * 1.5, 6, 2, window=w, length=11)


SAMPLES = [
    Sample(
        "complex/parts",
        lambda a, b: _parts(ember, a, b),
        (A, B),
        torch_fn=lambda a, b: _parts(torch(), a, b),
    ),
    Sample(
        "view_as_real/view_as_complex",
        lambda p: _views(ember, p),
        (P,),
        torch_fn=lambda p: _views(torch(), p),
    ),
    Sample(
        "fft/transforms",
        lambda x: _transforms(ember, x),
        (X,),
        torch_fn=lambda x: _transforms(torch(), x),
    ),
    Sample(
        "linalg/eig",
        lambda a: _eig(ember, a),
        (r.standard_normal((2, 4, 4)),),
        torch_fn=lambda a: _eig(torch(), a),
    ),
    Sample(
        "stft/istft",
        lambda x, w: _stft(ember, x, w),
        (r.standard_normal((2, 11)), np.abs(r.standard_normal(6)) + 0.5),
        torch_fn=lambda x, w: _stft(torch(), x, w),
    ),
]
