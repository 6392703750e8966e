"""ember.linalg on complex matrices against PyTorch: values, and gradients of real losses (the
conjugate Wirtinger convention), in complex64 and complex128, single and batched, eagerly and
captured. Eigenvectors and singular vectors are defined up to a phase each: their losses read
phase-free quantities (|V|^2, V diag V^H), as any meaningful loss must."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

DTYPES = [("complex64", 2e-3), ("complex128", 1e-9)]


def test_the_conjugate_transposes_conjugate():
    z = np.array([[1 + 2j, 3], [4j, 5 - 1j]])
    for t in (
        ember.tensor(z).mH,
        ember.tensor(z).H,
        ember.tensor(z).adjoint(),
        ember.adjoint(ember.tensor(z)),
    ):
        np.testing.assert_array_equal(t.numpy(), z.conj().T)
    r = ember.ones(2, 3)
    assert tuple(r.mH.shape) == (3, 2) and r.mH.dtype is ember.float32
    with pytest.raises(ember.EmberError, match="mH"):
        _ = ember.ones(3).mH


def _matrix(rng, shape, dtype, kind="general"):
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    n = shape[-1]
    if kind == "hermitian":
        a = a @ np.swapaxes(a, -1, -2).conj() + n * np.eye(n)
    elif kind == "general" and shape[-1] == shape[-2]:
        a = a + n * np.eye(n)  # well conditioned
    return a.astype(dtype)


def _weights(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _loss(lib, outs, weights):
    total = 0
    for out, w in zip(outs, weights):
        if w is None:
            continue
        w = lib.tensor(w)
        if out.dtype.is_complex:
            total = total + (out * w).real.sum() + (out * w).imag.sum() * 0.5
        else:
            total = total + (out * w.real).sum()
    return total


def _phase_free(lib, outs):
    """(eigen/singular) vectors' moduli squared: what a loss may read of them."""
    return [o.abs() ** 2 if o.dtype.is_complex and o.ndim >= 2 else o for o in outs]


def _check(name, fn, a_np, tol, *, phase_free=False, extra=()):
    rng = np.random.default_rng(7)

    def run(lib):
        a = lib.tensor(a_np, requires_grad=True)
        rest = [lib.tensor(x, requires_grad=True) for x in extra]
        outs = fn(lib, a, *rest)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        if phase_free:
            outs = _phase_free(lib, outs)
        return a, rest, outs

    a_t, rest_t, outs_t = run(torch)
    weights = [
        _weights(rng, tuple(o.shape), o.detach().resolve_conj().numpy().dtype)
        if o.dtype.is_complex
        else rng.standard_normal(tuple(o.shape)).astype(o.detach().numpy().dtype)
        for o in outs_t
    ]
    _loss(torch, outs_t, weights).backward()
    a_e, rest_e, outs_e = run(ember)
    _loss(ember, outs_e, weights).backward()
    for i, (o_t, o_e) in enumerate(zip(outs_t, outs_e)):
        assert o_e.dtype.name == str(o_t.dtype).split(".")[-1], (name, i, o_e.dtype, o_t.dtype)
        np.testing.assert_allclose(
            o_e.detach().numpy(),
            o_t.detach().resolve_conj().numpy(),
            rtol=tol,
            atol=tol,
            err_msg=f"{name} output {i}",
        )
    for x_t, x_e in zip([a_t, *rest_t], [a_e, *rest_e]):
        np.testing.assert_allclose(
            x_e.grad.numpy(),
            x_t.grad.resolve_conj().numpy(),
            rtol=tol * 10,
            atol=tol * 10,
            err_msg=f"{name} gradient",
        )


CASES = {
    "inv": (lambda lib, a: lib.linalg.inv(a), "general", False),
    "det": (lambda lib, a: lib.linalg.det(a), "general", False),
    "slogdet": (lambda lib, a: tuple(lib.linalg.slogdet(a)), "general", False),
    "logdet": (lambda lib, a: lib.logdet(a), "general", False),
    "cholesky": (lambda lib, a: lib.linalg.cholesky(a), "hermitian", False),
    "cholesky_upper": (lambda lib, a: lib.linalg.cholesky(a, upper=True), "hermitian", False),
    "eigh": (lambda lib, a: tuple(lib.linalg.eigh(a)), "hermitian", True),
    "eigh_product": (
        lambda lib, a: (lambda w, v: (v * w.unsqueeze(-2).to(v.dtype)) @ v.mH)(*lib.linalg.eigh(a)),
        "hermitian",
        False,
    ),
    "eigvalsh": (lambda lib, a: lib.linalg.eigvalsh(a), "hermitian", False),
    "svd": (lambda lib, a: tuple(lib.linalg.svd(a, full_matrices=False)), "general", True),
    "svd_product": (
        lambda lib, a: (lambda u, s, vh: (u * s.unsqueeze(-2).to(u.dtype)) @ vh)(
            *lib.linalg.svd(a, full_matrices=False)
        ),
        "general",
        False,
    ),
    "svdvals": (lambda lib, a: lib.linalg.svdvals(a), "general", False),
    "qr": (lambda lib, a: tuple(lib.linalg.qr(a)), "general", False),
    "pinv": (lambda lib, a: lib.linalg.pinv(a), "general", False),
    "pinv_hermitian": (lambda lib, a: lib.linalg.pinv(a, hermitian=True), "hermitian", False),
    "matrix_power": (lambda lib, a: lib.linalg.matrix_power(a, 3), "general", False),
    "matrix_exp": (lambda lib, a: lib.linalg.matrix_exp(a * 0.3), "general", False),
    "vector_norm": (lambda lib, a: lib.linalg.vector_norm(a, dim=-1), "general", False),
    "norm_3": (lambda lib, a: lib.linalg.vector_norm(a, 3), "general", False),
    "fro": (lambda lib, a: lib.linalg.matrix_norm(a), "general", False),
    "nuc": (lambda lib, a: lib.linalg.matrix_norm(a, "nuc"), "general", False),
    "spectral": (lambda lib, a: lib.linalg.matrix_norm(a, 2), "general", False),
    "one_norm": (lambda lib, a: lib.linalg.matrix_norm(a, 1), "general", False),
    "linalg_norm": (lambda lib, a: lib.linalg.norm(a), "general", False),
    "tensor_norm": (lambda lib, a: a.norm(), "general", False),
    "lu_factor": (lambda lib, a: lib.linalg.lu_factor(a).LU, "general", False),
    "lu": (lambda lib, a: tuple(lib.linalg.lu(a))[1:], "general", False),
    "lu_solve": (
        lambda lib, a: lib.linalg.lu_solve(*lib.linalg.lu_factor(a), a[..., :2] * (1 + 1j)),
        "general",
        False,
    ),
    "lu_solve_adjoint": (
        lambda lib, a: lib.linalg.lu_solve(*lib.linalg.lu_factor(a), a[..., :2], adjoint=True),
        "general",
        False,
    ),
    "lu_solve_right": (
        lambda lib, a: lib.linalg.lu_solve(*lib.linalg.lu_factor(a), a[..., :2, :], left=False),
        "general",
        False,
    ),
    "inv_ex": (lambda lib, a: lib.linalg.inv_ex(a).inverse, "general", False),
    "cholesky_ex": (lambda lib, a: lib.linalg.cholesky_ex(a).L, "hermitian", False),
    "vecdot": (lambda lib, a: lib.linalg.vecdot(a, a.flip(-1) * 2), "general", False),
    "cond": (lambda lib, a: lib.linalg.cond(a), "general", False),
    "lstsq": (lambda lib, a: lib.linalg.lstsq(a, a[..., :2] * 1j).solution, "general", False),
    "adjoint": (lambda lib, a: (a.mH @ a, a.adjoint(), lib.adjoint(a)), "general", False),
}


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("case", sorted(CASES))
def test_square_routines_equal_torch(case, batch, dtype, tol):
    fn, kind, phase_free = CASES[case]
    rng = np.random.default_rng(abs(hash(case)) % 1000 if False else len(case))
    a = _matrix(rng, (*batch, 4, 4), dtype, kind)
    _check(case, fn, a, tol, phase_free=phase_free)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 5, 3)])
@pytest.mark.parametrize("case", ["svd", "svd_product", "svdvals", "qr", "pinv", "lu_factor", "lu"])
def test_rectangular_routines_equal_torch(case, shape, dtype, tol):
    fn, _, phase_free = CASES[case]
    a = _matrix(np.random.default_rng(len(shape) + shape[-1]), shape, dtype, "rectangular")
    _check(case, fn, a, tol, phase_free=phase_free)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_solves_equal_torch(dtype, tol):
    rng = np.random.default_rng(3)
    a = _matrix(rng, (2, 4, 4), dtype)
    b = _weights(rng, (2, 4, 3), dtype)
    _check("solve", lambda lib, a, b: lib.linalg.solve(a, b), a, tol, extra=(b,))
    _check(
        "solve_left", lambda lib, a, b: lib.linalg.solve(a, b.mT, left=False), a, tol, extra=(b,)
    )
    lower = np.tril(a)
    for upper in (False, True):
        t = np.triu(a) if upper else lower
        _check(
            "solve_triangular",
            lambda lib, a, b, upper=upper: lib.linalg.solve_triangular(a, b, upper=upper),
            t,
            tol,
            extra=(b,),
        )


def test_rank_of_complex_matrices_equals_torch():
    rng = np.random.default_rng(9)
    a = _matrix(rng, (3, 5, 4), np.complex128, "rectangular")
    a[1] = np.outer(a[1, :, 0], a[1, 0, :])  # rank 1
    want = torch.linalg.matrix_rank(torch.tensor(a)).numpy()
    np.testing.assert_array_equal(ember.linalg.matrix_rank(ember.tensor(a)).numpy(), want)


def test_captured_complex_linear_algebra_equals_eager():
    rng = np.random.default_rng(5)
    a_np = _matrix(rng, (3, 3), np.complex128)

    def step(a):
        u, s, vh = ember.linalg.svd(a)
        return ember.linalg.inv(a).abs().sum() + s.sum() + ember.linalg.det(a).real

    a1 = ember.tensor(a_np, requires_grad=True)
    step(a1).backward()
    a2 = ember.tensor(a_np, requires_grad=True)
    ember.function(step)(a2).backward()
    np.testing.assert_allclose(a2.grad.numpy(), a1.grad.numpy(), rtol=1e-10, atol=1e-10)
