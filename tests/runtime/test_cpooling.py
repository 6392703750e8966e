"""kernels/cpooling.py: the C kernels of max pooling and its gradient equal the NumPy kernels
of ops/pool.py bit for bit (ties, NaN, padding, dilation, ceil_mode, overlapping windows;
float32, float64, and bfloat16/float16 read and written in 16 bits; flat int64 indices and
window codes), and the code generator uses them."""

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cpooling
from ember.ops.pool import MAX_POOL
from ember.ops.pool_codes import flat_from_codes
from ember.ops.pool_scatter import POOL_SCATTER

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

CASES = [  # (shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((1, 2, 7, 9), (3, 3), (2, 1), (1, 1), (1, 1), False),
    ((2, 1, 9, 7), (3, 2), (2, 2), (1, 0), (2, 1), True),
    ((3, 2, 5, 5), (2, 2), (2, 2), (0, 0), (1, 1), True),  # windows past the edge
    ((64, 32, 26, 26), (2, 2), (2, 2), (0, 0), (1, 1), False),  # threads
]


def _nodes(x_shape, dtype, kernel, stride, padding, dilation, ceil_mode, flat=False):
    """The max_pool node and its gradient's pool_scatter node, from a traced gradient (with
    ``flat``, of a pooling that returns its indices: flat int64 ones, else window codes)."""

    def loss(x):
        pool = ember.nn.functional.max_pool2d
        y = pool(x, kernel, stride, padding, dilation, ceil_mode, return_indices=flat)
        y = y[0] if flat else y
        return (y * y).sum()

    graph = ember.trace(ember.grad(loss), ember.zeros(x_shape, dtype=dtype), opt_level=0).graph
    nodes = {n.op.name: n for n in graph.nodes if n.kind == "call"}
    return nodes["max_pool"], nodes["pool_scatter"]


FLOATS = [ember.float32, ember.float64, ember.bfloat16, ember.float16]


@pytest.mark.parametrize("indices", ["codes", "flat"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])))
def test_the_max_pool_gradient_equals_the_numpy_kernel(case, dtype, indices):
    shape = case[0]
    pool_node, scatter_node = _nodes(shape, dtype, *case[1:], flat=indices == "flat")
    window = scatter_node.attrs.get("window")
    assert (window is None) == (indices == "flat")
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, shape).astype(dtype.np)  # small integers: ties everywhere
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, 5)] = np.nan
    flat[rng.integers(0, flat.size, 5)] = -np.inf
    values, indices = MAX_POOL.kernel(x, **pool_node.attrs)

    g = rng.standard_normal(values.shape).astype(dtype.np)
    got = cpooling.build_scatter(scatter_node)(g, indices)
    want = POOL_SCATTER.kernel(g, indices, **scatter_node.attrs)
    assert got.dtype == want.dtype
    assert got.tobytes() == want.tobytes()  # overlapping windows add in the same order
    # the ReLU-gradient epilogue: where(mask, scattered, fill), fill a value of the dtype
    mask = rng.random(want.shape) < 0.5
    fill = np.asarray(0.5, dtype.np)
    in_size = scatter_node.attrs["in_size"]
    masked = cpooling.scatter(g, indices, in_size, mask, float(fill), window=window)
    assert masked.tobytes() == np.where(mask, want, fill).tobytes()


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16], ids=str)
def test_half_precision_scatter_of_planes_past_the_stack_sums_in_float32(dtype):
    # a 130x130 plane (16,900 values) is summed in a heap plane; overlapping 3x3 windows at
    # stride 1 add up to nine gradients into one value: in float32, rounded once
    shape = (1, 2, 130, 130)
    pool_node, scatter_node = _nodes(shape, dtype, (3, 3), (1, 1), (1, 1), (1, 1), False)
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, shape).astype(dtype.np)
    values, indices = MAX_POOL.kernel(x, **pool_node.attrs)
    g = (1 + rng.random(values.shape) / 64).astype(dtype.np)
    got = cpooling.build_scatter(scatter_node)(g, indices)
    want = POOL_SCATTER.kernel(g, indices, **scatter_node.attrs)
    assert got.tobytes() == want.tobytes()
    indices = flat_from_codes(indices, scatter_node.attrs["window"], shape[2:])
    wide = np.zeros(shape, np.float64)  # exact sums, rounded once: within half an ulp
    np.add.at(
        wide.reshape(2, -1),
        (np.arange(2)[:, None], indices.reshape(2, -1)),
        g.astype(np.float64).reshape(2, -1),
    )
    ulp = np.spacing(np.abs(wide).astype(dtype.np)).astype(np.float64)
    assert np.all(np.abs(got.astype(np.float64) - wide) <= 0.5 * ulp + 1e-6 * np.abs(wide))


def test_the_code_generator_runs_the_bfloat16_pooling_and_its_gradient_in_c():
    model = ember.nn.Sequential(ember.nn.Conv2d(1, 4, 3), ember.nn.ReLU(), ember.nn.MaxPool2d(2))
    model.to(ember.bfloat16)

    def step(x):
        return ember.grad(lambda x: model(x).float().sum())(x)

    fn = ember.function(step, executor="codegen")
    x = ember.randn(2, 1, 10, 10).to(ember.bfloat16)
    got = fn(x)
    want = step(x)
    assert got.dtype == ember.bfloat16
    np.testing.assert_array_equal(
        got.detach().numpy().view(np.uint16), want.detach().numpy().view(np.uint16)
    )
    assert "k_pool_scatter_" in fn.code or "fused_epilogue" in fn.code
    assert "k_max_pool_" in fn.code


@pytest.mark.parametrize("dtype", [d.np for d in FLOATS], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("codes", [None, np.uint8], ids=["flat", "codes"])
@pytest.mark.parametrize(
    "shape, kernel, stride, padding, dilation, ceil_mode",
    [
        ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1), False),
        ((1, 2, 9, 7), (3, 3), (2, 1), (0, 0), (1, 1), False),  # overlapping, rows not all read
        ((2, 1, 11, 9), (3, 2), (2, 3), (0, 0), (2, 1), False),  # dilation
        ((64, 32, 28, 28), (2, 2), (2, 2), (0, 0), (1, 1), False),  # the CNN's first pool
        ((8, 32, 16, 16), (3, 3), (1, 1), (1, 1), (1, 1), False),  # the inception block's
        ((2, 3, 9, 8), (3, 3), (2, 2), (1, 1), (1, 1), False),  # ResNet's stem, odd sizes
        ((1, 2, 7, 10), (5, 3), (2, 3), (2, 0), (1, 2), False),  # padding on one axis, dilated
        ((2, 2, 8, 7), (2, 3), (2, 2), (0, 1), (1, 1), True),  # windows past the end
        ((1, 1, 5, 5), (2, 2), (2, 2), (0, 0), (1, 1), True),
    ],
)
def test_max_pool_equals_the_numpy_kernel(
    shape, kernel, stride, padding, dilation, ceil_mode, dtype, codes
):
    from ember.kernels.pool_geometry import pool_out_size

    rng = np.random.default_rng(1)
    x = rng.integers(-3, 4, shape).astype(dtype)  # ties everywhere
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, 7)] = np.nan
    flat[rng.integers(0, flat.size, 7)] = -np.inf
    out = tuple(
        pool_out_size(n, k, s, p, d, ceil_mode)
        for n, k, s, p, d in zip(shape[2:], kernel, stride, padding, dilation)
    )
    got = cpooling.max_pool_2d(x, kernel, stride, padding, dilation, out, codes)
    attrs = dict(kernel=kernel, stride=stride, padding=padding, dilation=dilation)
    # (half: on a float32 copy)
    want = MAX_POOL.kernel(x, **attrs, ceil_mode=ceil_mode, codes=codes is not None)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()
    if codes is not None:  # the codes name the elements PyTorch's flat indices do
        window = (kernel, stride, padding, dilation)
        flat = MAX_POOL.kernel(x, **attrs, ceil_mode=ceil_mode)[1]
        np.testing.assert_array_equal(flat_from_codes(got[1], window, shape[2:]), flat)


def test_max_pool_of_a_padded_plane_of_minus_infinity_points_inside_the_input():
    # every element is -inf: the maximum is the window's first element inside the input, never
    # a padding position (whose value is -inf too)
    x = np.full((1, 1, 4, 4), -np.inf, np.float32)
    values, indices = cpooling.max_pool_2d(x, (3, 3), (1, 1), (1, 1), (1, 1), (4, 4))
    assert np.all(values == -np.inf)
    rows, cols = np.divmod(indices[0, 0], 4)
    want_rows = np.maximum(np.arange(4) - 1, 0)[:, None] + np.zeros(4, int)
    want_cols = np.maximum(np.arange(4) - 1, 0)[None, :] + np.zeros((4, 1), int)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(cols, want_cols)


def test_max_pool_declines_other_dtypes():
    x = np.zeros((1, 1, 5, 5), np.int32)
    assert cpooling.max_pool_2d(x, (2, 2), (2, 2), (0, 0), (1, 1), (2, 2)) is None


@pytest.mark.parametrize("dtype", [np.float32, ember.bfloat16.np, np.float16], ids=str)
def test_max_pool_of_planes_past_a_stack_frame_equals_the_numpy_kernel(dtype):
    # a 202x224 frame of float32 is over FRAME_LIMIT_BYTES: the caller frames every plane (in
    # the input's dtype; half precision is widened as it is read)
    x = np.random.default_rng(2).standard_normal((1, 2, 200, 200)).astype(dtype)
    x[0, 1, :3, :3] = -np.inf
    x[0, 0, 5, 7] = np.nan
    got = cpooling.max_pool_2d(x, (3, 3), (1, 1), (1, 1), (1, 1), (200, 200))
    attrs = dict(kernel=(3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1))
    want = MAX_POOL.kernel(x, **attrs, ceil_mode=False)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


def test_one_dimensional_and_one_row_windows_equal_the_numpy_kernel():
    # 1-d pooling runs as rows of height one, and windows of one row, one column or one
    # element as one loop or none (nested loops of one iteration left the loop scalar): all
    # equal to the NumPy kernel, ties, NaN and -inf included, flat indices and window codes
    from ember.kernels.pool_geometry import pool_out_size

    rng = np.random.default_rng(3)
    cases = [  # (shape, kernel, stride, padding, dilation, ceil_mode, dtype)
        ((2, 3, 17), (2,), (2,), (0,), (1,), False, np.float32),
        ((1, 2, 30), (3,), (2,), (1,), (1,), True, np.float64),
        ((2, 2, 40), (20,), (5,), (3,), (1,), False, np.float32),  # past the unrolling
        ((2, 2, 15), (3,), (1,), (0,), (2,), False, np.float32),
        ((1, 2, 6, 9), (1, 3), (1, 2), (0, 1), (1, 1), False, np.float32),
        ((1, 2, 9, 6), (3, 1), (2, 1), (1, 0), (1, 1), True, np.float64),
        ((1, 2, 5, 6), (1, 1), (2, 2), (0, 0), (1, 1), False, np.float32),
    ]
    for shape, kernel, stride, padding, dilation, ceil_mode, dtype in cases:
        x = rng.integers(-3, 4, shape).astype(dtype)
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, 3)] = np.nan
        flat[rng.integers(0, flat.size, 3)] = -np.inf
        out = tuple(
            pool_out_size(n, k, s, p, d, ceil_mode)
            for n, k, s, p, d in zip(shape[2:], kernel, stride, padding, dilation)
        )
        attrs = dict(kernel=kernel, stride=stride, padding=padding, dilation=dilation)
        for codes in (None, np.uint8):
            got = cpooling.max_pool_2d(x, kernel, stride, padding, dilation, out, codes)
            want = MAX_POOL.kernel(x, **attrs, ceil_mode=ceil_mode, codes=codes is not None)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape, (shape, kernel)
                assert g.tobytes() == w.tobytes(), (shape, kernel, codes)
