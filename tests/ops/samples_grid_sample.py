"""Conformance samples for grid_sample_backward (ops/grid_sample.py), called directly: its own
VJP (grid_sample's second derivative, ops/_grid_sample_second.py) by finite differences and
against PyTorch's double backward (torch.autograd.grad with create_graph=True), 4-D bilinear,
bicubic and nearest, 5-D trilinear (tests/ops/test_grid_sample.py sweeps every mode, padding
and alignment eagerly); and F.grid_sample on 5-D inputs (the 4-D forms are
samples_issue19nnf.py's)."""

import ember
from ember.ops._registry import apply
from ember.ops.grid_sample import GRID_SAMPLE_BACKWARD

from .harness import Sample, rng

r = rng(41)
F = ember.nn.functional


def _torch_grad(mode, padding, align):
    def fn(x, grid, g):
        torch = __import__("torch")
        x = x if x.requires_grad else x.detach().requires_grad_()
        grid = grid if grid.requires_grad else grid.detach().requires_grad_()
        y = torch.nn.functional.grid_sample(x, grid, mode, padding, align)
        return torch.autograd.grad(y, (x, grid), g, create_graph=True)

    return fn


def _sample(name, in_shape, out_shape, mode, padding, align, span=1.3):
    dims = len(in_shape) - 2
    x = r.standard_normal(in_shape)
    grid = r.uniform(-span, span, (in_shape[0], *out_shape, dims))
    g = r.standard_normal((*in_shape[:2], *out_shape))
    a = {"mode": mode, "padding_mode": padding, "align_corners": align}
    return Sample(
        f"grid_sample_backward/{name}",
        lambda x, grid, g: apply(GRID_SAMPLE_BACKWARD, x, grid, g, output_mask=(True, True), **a),
        (x, grid, g),
        torch_fn=_torch_grad(mode, padding, align),
        rtol=1e-6,
        atol=1e-8,
    )


def _forward(name, mode, padding, align):
    x = r.standard_normal((2, 2, 3, 4, 3))
    grid = r.uniform(-1.2, 1.2, (2, 2, 3, 2, 3))
    return Sample(
        f"F.grid_sample/5-d {name}",
        lambda x, grid: F.grid_sample(x, grid, mode, padding, align),
        (x, grid),
        torch_fn=lambda x, grid: __import__("torch").nn.functional.grid_sample(
            x, grid, mode, padding, align
        ),
    )


SAMPLES = [
    _sample("bilinear zeros", (2, 3, 4, 5), (3, 2), "bilinear", "zeros", False),
    _sample("bicubic reflection", (1, 2, 4, 3), (2, 3), "bicubic", "reflection", True),
    _sample("nearest border", (2, 2, 3, 4), (2, 2), "nearest", "border", False),
    _sample("trilinear border", (1, 2, 3, 4, 3), (2, 2, 2), "bilinear", "border", True),
    _forward("trilinear zeros", "bilinear", "zeros", False),
    _forward("nearest reflection", "nearest", "reflection", True),
]
