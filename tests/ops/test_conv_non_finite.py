"""A non-finite input, weight or output gradient of a convolution reaches exactly the outputs
and gradients that read it, as in PyTorch's float64 kernels (zero padding is a value: a NaN
weight times the zero border is NaN). ember's flat layout computes columns outside the output
(cropped from the forward result, zero in the output gradient): 0 * nan there once made NaN
weight and input gradients where PyTorch's are finite (ops/_conv_kernels.py `_zero_garbage`).

(PyTorch's float32 kernels skip the padded taps, so a NaN weight leaves some border outputs
finite there and NaN in its own float64 kernels; the float64 semantics is the reference.)"""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _masks_and_values_agree(got, want, rtol):
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=rtol)


def _cases(seed, count):
    rng = np.random.default_rng(seed)
    made = 0
    while made < count:
        dims = int(rng.integers(1, 4))
        transpose = bool(rng.random() < 0.3)
        n = int(rng.integers(1, 3))
        c = int(rng.integers(1, 4)) * (2 if rng.random() < 0.3 else 1)
        spatial = tuple(int(rng.integers(3, 9 if dims < 3 else 6)) for _ in range(dims))
        out = int(rng.integers(1, 4))
        k, p, d = (int(rng.integers(lo, hi)) for lo, hi in ((1, 4), (0, 3), (1, 3)))
        s = 1 if rng.random() < 0.7 else 2  # (stride 1: the flat layout)
        groups = 1
        if rng.random() < 0.3:
            out = groups = c
        if any(size + 2 * p - d * (k - 1) - 1 < 0 for size in spatial):
            continue
        if transpose and p >= k * d:
            continue
        where = int(rng.integers(0, 3))  # the input, the weight or the output gradient
        made += 1
        yield dims, transpose, (n, c) + spatial, out, (k, s, p, d, groups), where, rng


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_values_reach_what_reads_them(dtype):
    rtol = 2e-4 if dtype == np.float32 else 1e-9
    for dims, transpose, x_shape, out, (k, s, p, d, groups), where, rng in _cases(7, 50):
        c = x_shape[1]
        x = rng.standard_normal(x_shape).astype(dtype)
        w_shape = ((c, out // groups) if transpose else (out, c // groups)) + (k,) * dims
        w = rng.standard_normal(w_shape).astype(dtype)
        bad = np.nan if rng.random() < 0.7 else np.inf
        if where == 0:
            x[tuple(int(rng.integers(0, n)) for n in x.shape)] = bad
        elif where == 1:
            w[tuple(int(rng.integers(0, n)) for n in w.shape)] = bad
        name = f"conv{'_transpose' if transpose else ''}{dims}d"
        attrs = dict(stride=s, padding=p, dilation=d, groups=groups)
        xt = torch.tensor(x.astype(np.float64), requires_grad=True)
        wt = torch.tensor(w.astype(np.float64), requires_grad=True)
        try:
            yt = getattr(torch.nn.functional, name)(xt, wt, **attrs)
        except RuntimeError:  # (an output PyTorch refuses, e.g. too small for the kernel)
            continue
        g = rng.standard_normal(tuple(yt.shape)).astype(dtype)
        if where == 2:
            g[tuple(int(rng.integers(0, n)) for n in g.shape)] = np.nan
        yt.backward(torch.tensor(g.astype(np.float64)))
        xe = ember.tensor(x, requires_grad=True)
        we = ember.tensor(w, requires_grad=True)
        ye = getattr(ember.nn.functional, name)(xe, we, **attrs)
        ye.backward(ember.tensor(g))
        context = f"{name} x{x_shape} w{w_shape} {attrs} non-finite in {'x w gy'.split()[where]}"
        for got, want, what in (
            (ye.detach().numpy(), yt.detach().numpy(), "output"),
            (xe.grad.numpy(), xt.grad.numpy(), "input grad"),
            (we.grad.numpy(), wt.grad.numpy(), "weight grad"),
        ):
            try:
                with np.errstate(invalid="ignore"):
                    _masks_and_values_agree(got.astype(np.float64), want, rtol)
            except AssertionError as exc:
                raise AssertionError(f"{context}: {what}\n{exc}") from None


@pytest.mark.parametrize("where", ["x", "w"])
def test_flat_layout_columns_outside_the_output_stay_out_of_gradients(where):
    """A 3x3 stride-1 convolution without padding runs the flat layout (rows of the full input
    width, two columns per row outside the output): a NaN read only there reaches no
    gradient."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 7, 7))
    w = rng.standard_normal((1, 2, 3, 3))
    if where == "x":
        x[0, 1, 3, 0] = np.nan  # (the first column: what a wrapped garbage column reads)
    else:
        w[0, 1, 2, 2] = np.nan
    g = rng.standard_normal((2, 1, 5, 5))
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    torch.nn.functional.conv2d(xt, wt).backward(torch.tensor(g))
    xe, we = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    ember.nn.functional.conv2d(xe, we).backward(ember.tensor(g))
    _masks_and_values_agree(xe.grad.numpy(), xt.grad.numpy(), 1e-9)
    _masks_and_values_agree(we.grad.numpy(), wt.grad.numpy(), 1e-9)
