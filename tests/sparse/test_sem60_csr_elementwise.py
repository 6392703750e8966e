"""A CSR matrix's elementwise ops keep its layout as PyTorch 2.13's: functions zero at zero,
negation, products by a number or a dense tensor, sums of two CSR matrices; a sum with a
dense tensor is dense; subtraction and division are refused with PyTorch's message."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch", reason="PyTorch (the reference) is not installed")

DENSE = np.array([[0.0, 1.5, 0.0, -2.0], [0.0, 0.0, 0.0, 0.0], [3.0, 0.0, -0.5, 0.0]], np.float32)
OTHER = np.array([[1.0, 0.0, 0.0, 2.0], [0.0, 4.0, 0.0, 0.0], [0.0, 0.0, 0.5, 0.0]], np.float32)
ONES = np.arange(12, dtype=np.float32).reshape(3, 4) - 5

CASES = {
    "mul_number": lambda L, a, b: a * 2.5,
    "rmul_number": lambda L, a, b: 2.5 * a,
    "mul_method": lambda L, a, b: a.mul(-3.0),
    "mul_dense": lambda L, a, b: a * L.tensor(ONES),
    "add_csr": lambda L, a, b: a + b,
    "add_method": lambda L, a, b: a.add(b),
    "add_dense": lambda L, a, b: a + L.tensor(ONES),
    "neg": lambda L, a, b: -a,
    "neg_method": lambda L, a, b: a.neg(),
    "abs": lambda L, a, b: a.abs(),
    "sin": lambda L, a, b: a.sin(),
    "relu": lambda L, a, b: a.relu(),
    "square": lambda L, a, b: a.square(),
    "pow": lambda L, a, b: a.pow(2),
    "sub": lambda L, a, b: a - b,
    "div": lambda L, a, b: a / 2,
}


def _run(lib, case):
    a, b = lib.tensor(DENSE).to_sparse_csr(), lib.tensor(OTHER).to_sparse_csr()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (PyTorch's beta warning)
            out = CASES[case](lib, a, b)
    except RuntimeError as exc:
        return "error", str(exc).split("\n")[0]
    layout = str(out.layout).split(".")[-1]
    if layout == "sparse_csr":
        parts = [out.crow_indices(), out.col_indices(), out.values()]
        return layout, [p.detach().numpy() for p in parts]
    return layout, out.detach().numpy()


@pytest.mark.parametrize("case", sorted(CASES))
def test_csr_elementwise_as_pytorch(case):
    want, got = _run(torch, case), _run(ember, case)
    assert got[0] == want[0], (got, want)
    if want[0] == "error":
        assert got[1].endswith(want[1]), (got[1], want[1])
    elif want[0] == "sparse_csr":
        for g, w in zip(got[1], want[1]):
            np.testing.assert_allclose(g, w, rtol=1e-6)
    else:
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
