"""F.interpolate with a scale_factor against PyTorch's CPU kernels: which index or weights
each output position reads when the scale is given (float32 arithmetic, nearest-exact's
double product rounded to float), the sizes a kernel copies whatever the scale (linear modes
and antialiased ones where the size is kept; 2-D nearest where it is kept or doubled), and
the error types (NotImplementedError for inputs no kernel takes)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CASES = [
    ((1, 2, 7), dict(scale_factor=2.3, mode="nearest-exact")),
    ((1, 2, 5), dict(scale_factor=2.65, mode="nearest")),
    ((1, 2, 1, 5, 2), dict(scale_factor=(2.85, 2.65, 2.36), mode="nearest")),
    ((1, 2, 3, 2), dict(scale_factor=(1.0, 2.36), mode="nearest")),  # 2-D: doubled is >> 1
    ((1, 2, 3, 5), dict(scale_factor=(1.1, 1.3), mode="nearest")),  # 2-D: kept is a copy
    ((1, 2, 7), dict(scale_factor=1.09, mode="linear")),  # kept size: a copy
    ((1, 2, 4, 5), dict(scale_factor=(1.1, 2.0), mode="bilinear")),
    ((1, 2, 3, 4, 5), dict(scale_factor=(1.1, 1.2, 1.1), mode="trilinear")),
    ((1, 2, 4, 5), dict(scale_factor=(1.1, 1.1), mode="bicubic")),  # (bicubic: no copy)
    ((1, 2, 3, 3), dict(scale_factor=(1.2, 0.5), mode="bilinear", antialias=True)),
    ((1, 2, 6, 3), dict(scale_factor=(2.0, 1.16), mode="bicubic", antialias=True)),
    ((1, 2, 6, 5), dict(scale_factor=(0.45, 1.5), mode="bicubic", antialias=True)),
]


@pytest.mark.parametrize("shape, kwargs", CASES, ids=[str(c[1]) for c in CASES])
def test_scaled_interpolation_reads_what_pytorch_reads(shape, kwargs):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = torch.nn.functional.interpolate(torch.tensor(x), **kwargs).numpy()
    got = ember.nn.functional.interpolate(ember.tensor(x), **kwargs).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "shape, kwargs",
    [
        ((1, 1, 4, 4), dict(size=2, mode="cubic")),
        ((1, 1, 4, 4), dict(size=2, mode="linear")),
        ((1, 1, 4), dict(size=2, mode="bilinear")),
        ((1, 1, 4), dict(size=2, mode="bicubic")),
        ((4, 4), dict(size=2)),
        ((1, 1, 2, 2, 2, 2), dict(size=2)),
    ],
)
def test_inputs_no_kernel_takes_raise_not_implemented_error(shape, kwargs):
    with pytest.raises(NotImplementedError):
        torch.nn.functional.interpolate(torch.ones(shape), **kwargs)
    with pytest.raises(NotImplementedError, match="interpolate") as info:
        ember.nn.functional.interpolate(ember.ones(shape), **kwargs)
    assert isinstance(info.value, ember.EmberError)
