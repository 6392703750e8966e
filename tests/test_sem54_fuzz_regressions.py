"""Divergences from PyTorch 2.13 found by the differential fuzzers (seeds 5000-6200, both
profiles), each reduced to its cause."""

import math

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def test_pow_exponent_gradient_multiplies_the_upstream_gradient_outside_the_mask():
    # seed 5526: pow_backward_exponent is g * where(x == 0 & y >= 0, 0, x ** y * log x), so a
    # NaN (or infinite) g gives NaN at a zero base too; ember masked g * ... to 0
    results = []
    for lib in (torch, ember):
        b = lib.tensor([1.0, 0.0, 1.0, 0.0, 2.0, -1.0, 0.0], requires_grad=True)
        e = lib.tensor([0.5, 0.5, -1.0, -1.0, 0.0, 0.5, 0.0], requires_grad=True)
        up = lib.tensor([math.nan, math.nan, 1.0, 1.0, math.inf, 1.0, math.inf])
        gb, ge = lib.autograd.grad(lib.pow(b, e), (b, e), up)
        mask = lib.tensor([True, False, True, False])
        (gm,) = lib.autograd.grad(
            lib.pow(mask, e[:4]), e, lib.tensor([math.nan, math.nan, 1.0, 1.0])
        )
        results.append([t.numpy() for t in (gb, ge, gm)])
    for got, want in zip(results[1], results[0]):
        np.testing.assert_array_equal(got, want)


FILL_CASES = {
    "full": lambda lib, u, i8, c: lib.full((2,), 300, dtype=lib.uint8),
    "fill_": lambda lib, u, i8, c: u.clone().fill_(300),
    "index_fill": lambda lib, u, i8, c: u.index_fill(0, lib.tensor([0]), 300),
    "scatter_value": lambda lib, u, i8, c: u.scatter(0, lib.tensor([0]), 300),
    "masked_fill_int8_200": lambda lib, u, i8, c: i8.masked_fill(c, 200),
    "masked_fill_int8_-129": lambda lib, u, i8, c: i8.masked_fill(c, -129),
    "masked_fill_uint8_-255": lambda lib, u, i8, c: u.masked_fill(c, -255),
    "masked_fill_uint8_-256": lambda lib, u, i8, c: u.masked_fill(c, -256),
    "masked_fill_float_into_uint8": lambda lib, u, i8, c: u.masked_fill(c, 1e10),
    "where_number_into_int8": lambda lib, u, i8, c: lib.where(c, 200, i8),
    "where_uint8_2_31": lambda lib, u, i8, c: lib.where(c, 2147483648, u),
    "where_two_numbers": lambda lib, u, i8, c: lib.where(c, 300, 1),
    "where_number_into_float": lambda lib, u, i8, c: lib.where(c, 300, lib.tensor([1.0, 2.0])),
    "clamp_bound": lambda lib, u, i8, c: u.clamp(max=300),
    "setitem": lambda lib, u, i8, c: u.clone().__setitem__(0, 300),
    "add_wraps": lambda lib, u, i8, c: u + 300,
}


@pytest.mark.parametrize("name", list(FILL_CASES))
def test_numbers_written_into_integer_tensors_checked_as_pytorch(name):
    # seed 6460 (wide): where(cond, 2147483648, uint8 tensor); PyTorch's checked_convert
    # refuses a number outside the dtype's range wherever one is written (fills, where's and
    # clamp's numbers, x[i] = v), not in arithmetic, which wraps
    results = []
    for lib in (torch, ember):
        u, i8 = lib.tensor([1, 2], dtype=lib.uint8), lib.tensor([1, 2], dtype=lib.int8)
        c = lib.tensor([True, False])
        try:
            out = FILL_CASES[name](lib, u, i8, c)
        except RuntimeError as error:
            results.append(("error", "without overflow" in str(error)))
        else:
            results.append(("value", None if out is None else out.tolist()))
    assert results[1] == results[0]


@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (0.0, 6.0), (-0.5, 3.0), (2.0, -1.0)])
def test_hardtanh_of_unsigned_integers_as_pytorch(bounds):
    # seed 7437 (wide): PyTorch refuses a bound negative once truncated to an integer
    results = []
    for lib in (torch, ember):
        u = lib.tensor([1, 200], dtype=lib.uint8)
        try:
            results.append(lib.nn.functional.hardtanh(u, *bounds).tolist())
        except (RuntimeError, ValueError) as error:
            results.append(error)
    want, got = results
    if isinstance(want, Exception):
        assert isinstance(got, type(want)), got
    else:
        assert got == want


@pytest.mark.parametrize("how", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", ["int64", "float32"])
def test_scatter_reduce_into_a_transposed_tensor(how, include_self, dtype):
    # seed 7508 (wide): the kernel copied x in its own (transposed) order, so the flat view
    # it wrote through was a copy and the result was x unchanged
    x0 = np.array([[0, -2], [-4, -3], [0, 2], [2, 0]])
    index = np.random.default_rng(0).integers(0, 4, size=(2, 4))
    results = []
    for lib in (torch, ember):
        x = lib.tensor(x0).to(getattr(lib, dtype)).transpose(0, 1)
        out = x.scatter_reduce(-1, lib.tensor(index), x * 2, how, include_self=include_self)
        results.append(out.numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


def test_remainder_of_a_number_by_a_tensor_has_no_derivative():
    # seed 6446 (wide): PyTorch's node of remainder(3.0, x) is NotImplemented, and backward
    # through it raises; the other overloads differentiate
    for lib in (torch, ember):
        x = lib.tensor([1.5, 2.5], requires_grad=True)
        for y in (lib.remainder(3.0, x), 3.0 % x):
            assert type(y.grad_fn).__name__ == "NotImplemented"
            with pytest.raises(RuntimeError, match="derivative for aten::remainder is not"):
                y.sum().backward()
        (x % 2.0).sum().backward()
        assert x.grad.tolist() == [1.0, 1.0]


def test_pow_by_a_bool_exponent_tensor_refuses_backward():
    # seed 5131 (wide): PyTorch's pow backward computes exponent - 1, refused for bool
    for lib in (torch, ember):
        x = lib.tensor([1.5, 2.5], requires_grad=True)
        for exponent in (lib.tensor([True, False]), lib.tensor(True)):
            y = lib.pow(x, exponent)  # (the forward is allowed)
            with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool"):
                y.sum().backward()
        lib.pow(x, True).sum().backward()  # (a Python bool exponent differentiates)
        assert x.grad.tolist() == [1.0, 1.0]
