"""Helpers of the complex-number tests (test_complex.py, test_fft.py, test_stft.py): random
real and complex inputs, one function run on ember and on torch, values, dtypes and the
gradients of a random real loss compared."""

from __future__ import annotations

import numpy as np

import ember

torch = __import__("pytest").importorskip("torch")

REAL, CPLX = "r", "c"
_DTYPES = {
    "float32": (np.float32, np.complex64),
    "float64": (np.float64, np.complex128),
}
# float32: each value within a few ulps times the size of the problem; float64 far tighter
TOL = {"float32": 2e-5, "float64": 1e-10}


def random_inputs(rng, specs, precision):
    """Arrays for ``specs`` [(shape, REAL or CPLX)] in ``precision`` ("float32", "float64")."""
    real_t, complex_t = _DTYPES[precision]
    out = []
    for shape, kind in specs:
        if kind == CPLX:
            a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
            out.append(a.astype(complex_t))
        else:
            out.append(rng.standard_normal(shape).astype(real_t))
    return out


def dtype_name(dtype) -> str:
    return str(dtype).rsplit(".", 1)[-1]


def _loss(module, out, weights):
    w = module.tensor(weights)
    if out.is_complex():
        return (module.real(out) * w[..., 0] + module.imag(out) * w[..., 1]).sum()
    return (out * w[..., 0]).sum()


def compare(fn, arrays, precision, *, tfn=None, grad=True, seed=0, scale=1.0):
    """Run ``fn(module, *tensors)`` on ember and torch: the same dtype and shape, values
    within the precision's tolerance (relative to the result's largest magnitude times
    ``scale``), and the gradients of a random real loss of the result equal too."""
    tfn = tfn or fn
    et = [ember.tensor(a, requires_grad=grad) for a in arrays]
    tt = [torch.tensor(a, requires_grad=grad) for a in arrays]
    eo, to = fn(ember, *et), tfn(torch, *tt)
    assert dtype_name(eo.dtype) == dtype_name(to.dtype), (eo.dtype, to.dtype)
    assert tuple(eo.shape) == tuple(to.shape), (eo.shape, to.shape)
    want = to.detach().resolve_conj().numpy()
    tol = TOL[precision] * scale * max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(eo.detach().numpy(), want, rtol=0, atol=tol)
    if not grad:
        return
    rng = np.random.default_rng(seed + 1)
    weights = rng.standard_normal((*want.shape, 2)).astype(_DTYPES[precision][0])
    _loss(ember, eo, weights).backward()
    _loss(torch, to, weights).backward()
    for i, (a, b) in enumerate(zip(et, tt)):
        if b.grad is None:
            assert a.grad is None or not np.any(a.grad.numpy()), f"input {i}"
            continue
        assert a.grad is not None, f"input {i}: no gradient"
        assert dtype_name(a.grad.dtype) == dtype_name(b.grad.dtype), (i, a.grad.dtype)
        gw = b.grad.resolve_conj().numpy()
        gtol = TOL[precision] * scale * max(1.0, float(np.abs(gw).max(initial=0.0)))
        np.testing.assert_allclose(a.grad.numpy(), gw, rtol=0, atol=gtol, err_msg=f"input {i}")
