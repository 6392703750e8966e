"""layer_norm's input gradient on rows whose values nearly cancel, against PyTorch 2.13: its
``a dy w + b x + c`` carries the rounding of two large terms there, which ember now shares
(ops/_layer_norm_torch.py: PyTorch's statistics and sums in its order), where the centred
formula it used before differed by far more than the fuzzers' tolerance."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.kernels import cnorm_act
from ember.ops import layer_norm as ln_op

torch = pytest.importorskip("torch")

CASES = [  # (numpy dtype, torch dtype, tolerance of the fuzzers)
    (np.float32, "float32", 2e-4),
    (np.float64, "float64", 1e-6),
    (np.float16, "float16", 1e-2),
    (ml_dtypes.bfloat16, "bfloat16", 4e-2),
]


def _rows(rng, rows, n, spread):
    return rng.standard_normal((rows, 1)) + rng.standard_normal((rows, n)) * spread


@pytest.mark.parametrize("np_dtype, t_dtype, tol", CASES, ids=[c[1] for c in CASES])
def test_cancelling_rows_gradient_matches_torch(np_dtype, t_dtype, tol):
    rng = np.random.default_rng(5115)
    td = getattr(torch, t_dtype)
    for n, spread, affine in [
        (2, 1e-3, True),
        (3, 1e-4, False),
        (13, 1e-3, True),
        (40, 1e-4, False),
        (300, 1e-3, True),
    ]:
        x = _rows(rng, 3, n, spread).astype(np.float32).astype(np_dtype)
        g = rng.standard_normal((3, n)).astype(np.float32).astype(np_dtype)
        w = rng.standard_normal(n).astype(np.float32).astype(np_dtype)
        xt = torch.tensor(x.astype(np.float64)).to(td).requires_grad_()
        wt = torch.tensor(w.astype(np.float64)).to(td) if affine else None
        bt = torch.zeros(n, dtype=td) if affine else None
        torch.nn.functional.layer_norm(xt, (n,), wt, bt).backward(
            torch.tensor(g.astype(np.float64)).to(td)
        )
        xe = ember.tensor(x, requires_grad=True)
        we = ember.tensor(w) if affine else None
        be = ember.zeros(n, dtype=xe.dtype) if affine else None
        ember.nn.functional.layer_norm(xe, (n,), we, be).backward(ember.tensor(g))
        got = xe.grad.float().numpy()
        want = xt.grad.float().numpy()
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"n={n}")


@pytest.mark.parametrize("np_dtype", [c[0] for c in CASES], ids=[c[1] for c in CASES])
def test_c_kernel_is_the_numpy_specification_bit_for_bit(np_dtype):
    if not cnorm_act.available(np.dtype(np_dtype)):
        pytest.skip("no C compiler")
    rng = np.random.default_rng(1)
    for n in (1, 5, 8, 17, 129, 300):
        x = _rows(rng, 4, n, 1e-2).astype(np_dtype)
        g = rng.standard_normal((4, n)).astype(np_dtype)
        w = rng.standard_normal(n).astype(np_dtype)
        c_dx, c_dw, c_db = cnorm_act.layer_norm_backward(x, w, g, 1e-5)
        dx, dw, db = ln_op._norm_grad_kernel(x, w, g, eps=1e-5)
        np.testing.assert_array_equal(c_dx, dx)
        np.testing.assert_allclose(c_dw.astype(np.float64), dw.astype(np.float64), rtol=1e-6)
