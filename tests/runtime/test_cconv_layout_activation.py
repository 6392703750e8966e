"""A convolution store's activation (kernels/cconv_activation.py) in every layout of the one-group
forward step: the column panels (plain and relaid), the channels-wide layout and its blocks of
samples (kernels/cconv_wide.py, kernels/cconv_taps.py), which activate a whole tile of positions
or samples in one call. The layouts sum in one order and run one compiled activation over
whole vectors, so they agree bit for bit; each agrees with the NumPy kernels (the
convolution, the bias, ``y * sigmoid(y)``) within the vector math library's few ulps. Channel
counts that fill no whole vector and position counts that fill no whole tile check the padded
rows; NaN and infinities go through."""

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cconv
from ember.kernels.conv_plan import plan
from ember.kernels.cstep import STEP_CALL, data_address, function_address
from ember.ops import _conv_kernels as K
from ember.ops import conv, conv_epilogue
from ember.transforms import DCE, optimize
from ember.transforms.epilogue import EPILOGUE
from ember.transforms.fuse import FUSE

pytestmark = pytest.mark.skipif(
    not ccompile.compiler_available(), reason="the C kernels' layouts need a C compiler"
)

F = ember.nn.functional
WAYS = [(False, False), (False, True), (True, False), (True, True)]
# (samples, in channels, out channels, height, width, kernel, stride): channels that fill no
# vector (20, 40), positions that fill no tile (5x5, 3x7), a stride's runs
GEOMETRIES = [
    (8, 24, 20, 5, 5, 3, 1),
    (4, 16, 40, 3, 7, 1, 1),
    (6, 8, 36, 9, 9, 3, 2),
]


def _stored_clamp(x, w, b, activation):
    """The clamp block's tuple (its sixth entry the activation) of the fused node that
    ``activation(conv2d(x, w, b))`` becomes."""
    graph = ember.trace(
        lambda x, w, b: activation(F.conv2d(x, w, b)),
        *map(ember.tensor, (x, w, b)),
        opt_level=0,
    ).graph
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE])
    (node,) = [n for n in fused.nodes if n.kind == "call" and n.op.name == "fused_epilogue"]
    spec = conv_epilogue.epilogue_plan(node, conv._conv_infer, conv._compiled)[0]
    assert spec.activation is not None
    return spec.clamp


def _run(made, x, w, b, out_shape):
    step, args, _ = made
    out = np.full(out_shape, 7.0, x.dtype)
    block = args.copy()
    block[0], block[1], block[2], block[3] = map(data_address, (x, w, b, out))
    STEP_CALL(function_address(step))(data_address(block))
    return out


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_layout_stores_the_same_activated_values(geometry, dtype):
    n, cin, cout, h, wd, k, stride = geometry
    rng = np.random.default_rng(sum(geometry))
    x = (3 * rng.standard_normal((n, cin, h, wd))).astype(dtype)
    x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    w = rng.standard_normal((cout, cin, k, k)).astype(dtype)
    b = rng.standard_normal(cout).astype(dtype)
    clamp = _stored_clamp(x[:1, :, :k, :k], w, b, lambda y: y * ember.sigmoid(y))
    p = plan((h, wd), (k, k), (stride, stride), ((k // 2, k // 2),) * 2, (1, 1), cin * k * k, cout)
    out_shape = (n, cout, *p.out_size)
    with np.errstate(all="ignore"):  # (NaN and infinities in x)
        y = K.conv_forward(x, w, p, 1) + b[:, None, None]
        want = y * (1 / (1 + np.exp(-y.astype(np.float64)))).astype(dtype)
    got = {}
    for way in WAYS:
        made = cconv.forward_step(x.shape, w.shape, p, dtype, clamp, wide=way[0], split=way[1])
        if made is not None:
            got[way] = _run(made, x, w, b, out_shape)
    # (the column and wide layouts ran, and the samples' blocks where there are enough samples)
    assert (True, False) in got and (False, False) in got
    assert n < 8 or (True, True) in got
    first = got[(False, False)]
    for way, out in got.items():
        np.testing.assert_array_equal(out, first, err_msg=str(way))
    rtol, atol = (1e-5, 1e-5) if dtype == np.float32 else (1e-12, 1e-12)
    np.testing.assert_array_equal(np.isnan(first), np.isnan(want))
    np.testing.assert_allclose(first, want, rtol=rtol, atol=atol)
