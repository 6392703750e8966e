"""F.grid_sample (ops/grid_sample.py) and F.affine_grid against PyTorch: every mode, padding
and alignment of 4-D and 5-D inputs eagerly in float64, values, first and second derivatives
(torch.autograd.grad with create_graph=True); half precision; PyTorch's refusals; affine_grid's
4-D and 5-D grids and theta's gradient; a captured warp's graph gradient."""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

import ember
import ember.nn.functional as F

torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")
TF = torch.nn.functional

_CASES = [
    (dims, mode, padding)
    for dims in (2, 3)
    for mode in ("bilinear", "nearest", "bicubic")
    for padding in ("zeros", "border", "reflection")
    if not (dims == 3 and mode == "bicubic")
]


@pytest.mark.parametrize("dims,mode,padding", _CASES)
def test_values_gradients_and_second_derivatives_equal_pytorchs(dims, mode, padding):
    rng = np.random.default_rng(zlib.crc32(repr((dims, mode, padding)).encode()))
    for align in (False, True):
        x = rng.standard_normal((2, 3, *(4, 5, 3)[:dims]))
        grid = rng.uniform(-1.4, 1.4, (2, *(3, 2, 2)[:dims], dims))
        w = rng.standard_normal((2, 3, *(3, 2, 2)[:dims]))
        tx, tg = (torch.tensor(v, requires_grad=True) for v in (x, grid))
        ex, eg = (ember.tensor(v, requires_grad=True) for v in (x, grid))
        ty = TF.grid_sample(tx, tg, mode, padding, align)
        ey = F.grid_sample(ex, eg, mode, padding, align)
        # (squared, so the output gradient depends on x and the grid: every term of the
        # second derivative, towards the output gradient too, is exercised)
        t1 = torch.autograd.grad((ty * torch.tensor(w)).pow(2).sum(), (tx, tg), create_graph=True)
        e1 = ember.autograd.grad((ey * ember.tensor(w)).pow(2).sum(), (ex, eg), create_graph=True)
        a, b = rng.standard_normal(x.shape), rng.standard_normal(grid.shape)
        t2 = torch.autograd.grad(
            (t1[0] * torch.tensor(a)).sum() + (t1[1] * torch.tensor(b)).sum(), (tx, tg)
        )
        e_total = (e1[0] * ember.tensor(a)).sum() + (e1[1] * ember.tensor(b)).sum()
        e2 = ember.autograd.grad(e_total, (ex, eg), allow_unused=True)
        what = f"{mode} {padding} align={align}"
        pairs = [(ey, ty), *zip(e1, t1), *zip(e2, t2)]
        for k, (got, want) in enumerate(pairs):
            got = np.zeros(want.shape) if got is None else got.detach().numpy()
            np.testing.assert_allclose(
                got, want.detach().numpy(), 1e-9, 1e-9, err_msg=f"{what} {k}"
            )


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_is_computed_in_float32(dtype):
    """16-bit inputs are computed in float32 and rounded once: PyTorch's float32 kernel on the
    same (rounded) inputs, rounded, to one 16-bit rounding. (PyTorch's own 16-bit kernel rounds
    its coordinates and weights as it goes: up to a few ulps off that.)"""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (2, 4, 3, 2)).astype(np.float32)
    td = getattr(torch, dtype)
    tx, tg = torch.tensor(x).to(td).float(), torch.tensor(grid).to(td).float()
    want = TF.grid_sample(tx, tg, align_corners=False).to(td).float().numpy()
    got = F.grid_sample(
        ember.tensor(x).to(getattr(ember, dtype)),
        ember.tensor(grid).to(getattr(ember, dtype)),
        align_corners=False,
    )
    assert str(got.dtype).split(".")[-1] == dtype
    # the two float32 results may round to neighbouring 16-bit values: one ulp
    ulp = float(torch.finfo(td).eps) * np.abs(want).max()
    np.testing.assert_allclose(got.float().numpy(), want, 0, ulp)


@pytest.mark.parametrize(
    "x_shape,grid_shape,kwargs,match",
    [
        ((1, 2, 3, 3, 3), (1, 2, 2, 2, 3), {"mode": "bicubic"}, "bicubic"),
        ((1, 2, 3, 3), (2, 2, 2, 2), {}, "same batch size"),
        ((1, 2, 3, 3), (1, 2, 2, 3), {}, "size 2 in last dimension"),
        ((1, 2, 3, 3), (1, 2, 2, 2, 2), {}, "as many dimensions"),
        ((1, 2, 0, 3), (1, 2, 2, 2), {}, "non-empty spatial"),
    ],
)
def test_refusals_are_pytorchs(x_shape, grid_shape, kwargs, match):
    x, grid = np.zeros(x_shape, np.float32), np.zeros(grid_shape, np.float32)
    with pytest.raises(RuntimeError):
        TF.grid_sample(torch.tensor(x), torch.tensor(grid), align_corners=False, **kwargs)
    with pytest.raises(RuntimeError, match=match) as refused:
        F.grid_sample(ember.tensor(x), ember.tensor(grid), align_corners=False, **kwargs)
    assert "grid_sample" in str(refused.value)


def test_empty_batches_and_outputs():
    for xs, gs in (
        ((0, 2, 3, 3), (0, 2, 2, 2)),
        ((1, 0, 3, 3), (1, 2, 2, 2)),
        ((1, 2, 3, 3), (1, 0, 2, 2)),
    ):
        x, grid = np.ones(xs), np.zeros(gs)
        want = TF.grid_sample(torch.tensor(x), torch.tensor(grid), align_corners=False)
        got = F.grid_sample(ember.tensor(x), ember.tensor(grid), align_corners=False)
        assert got.shape == tuple(want.shape)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 3, 3, 4, 5), (1, 2, 1, 1, 4)])
def test_affine_grid_and_thetas_gradient_equal_pytorchs(size):
    rng = np.random.default_rng(len(size))
    spatial = len(size) - 2
    for align in (False, True):
        theta = rng.standard_normal((size[0], spatial, spatial + 1))
        tt, et = torch.tensor(theta, requires_grad=True), ember.tensor(theta, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            want = TF.affine_grid(tt, size, align_corners=align)
            expected_warnings = len(caught)
            got = F.affine_grid(et, size, align_corners=align)
        assert len(caught) == 2 * expected_warnings  # (the unit-size warning, as PyTorch's)
        w = rng.standard_normal(tuple(want.shape))
        (want * torch.tensor(w)).sum().backward()
        (got * ember.tensor(w)).sum().backward()
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), 1e-12, 1e-12)
        np.testing.assert_allclose(et.grad.numpy(), tt.grad.numpy(), 1e-12, 1e-12)


def test_a_captured_volumetric_warp_and_its_gradient_equal_eager():
    """ember.function of a 5-D affine warp with its backward: the graph's values and gradients
    (through the grid_sample_backward node) are the eager tape's."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    theta = (np.eye(3, 4) + 0.1 * rng.standard_normal((2, 3, 4))).astype(np.float32)

    def step(x, theta):
        grid = F.affine_grid(theta, (2, 3, 3, 4, 5), align_corners=False)
        y = F.grid_sample(x, grid, "bilinear", "border", align_corners=False)
        loss = (y * y).mean()
        loss.backward()
        return loss

    results = []
    for fn in (step, ember.function(step)):
        ex, et = ember.tensor(x, requires_grad=True), ember.tensor(theta, requires_grad=True)
        loss = fn(ex, et)
        results.append((loss.item(), ex.grad.numpy(), et.grad.numpy()))
    (l0, gx0, gt0), (l1, gx1, gt1) = results
    assert abs(l0 - l1) <= 1e-6 * abs(l0)
    np.testing.assert_allclose(gx1, gx0, 1e-5, 1e-7)
    np.testing.assert_allclose(gt1, gt0, 1e-5, 1e-6)


@pytest.mark.parametrize("dims,opset", [(2, 16), (2, 20), (3, 20)])
def test_onnx_export_runs_on_onnxruntime(dims, opset):
    """GridSample at opset 16 (4-D, bilinear/nearest/bicubic names) and 20 (N-D,
    linear/nearest/cubic): onnxruntime's values; 5-D before opset 20 is refused."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from ember.onnx.exporter import to_model

    rng = np.random.default_rng(dims + opset)
    x = rng.standard_normal((2, 3, *(4, 5, 3)[:dims])).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (2, *(3, 2, 2)[:dims], dims)).astype(np.float32)
    for mode in ("bilinear", "nearest", "bicubic")[: 5 - dims]:
        for padding in ("zeros", "border", "reflection"):
            align = padding == "border"

            def fn(x, grid, mode=mode, padding=padding, align=align):
                return F.grid_sample(x, grid, mode, padding, align)

            model = to_model(fn, ember.tensor(x), ember.tensor(grid), opset=opset)
            session = ort.InferenceSession(model.SerializeToString())
            names = [i.name for i in session.get_inputs()]
            (got,) = session.run(None, dict(zip(names, (x, grid))))
            want = fn(ember.tensor(x), ember.tensor(grid)).numpy()
            np.testing.assert_allclose(got, want, 1e-5, 1e-5, err_msg=f"{mode} {padding}")
    if dims == 3:
        with pytest.raises(ember.errors.OnnxError, match="grid_sample: .*5-D.*opset 20"):
            to_model(lambda x, g: F.grid_sample(x, g, align_corners=False),
                     ember.tensor(x), ember.tensor(grid), opset=16)  # fmt: skip
