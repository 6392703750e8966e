"""Issue 19's elementwise math, pointwise composites, rearranging and products under
``ember.function`` (compiled, optimized, fused) against eager execution, values and gradients;
and the errors and PyTorch details the OpInfo database does not show."""

import numpy as np
import pytest

import ember
from ember.errors import DivisionByZeroError, DTypeError, ShapeError
from ember.kernels import ccompile

from .harness import rng

R = rng(1990)
NEW_ELEMENTWISE = ("tan", "asin", "acos", "atan", "sinh", "cosh", "log2", "log10", "square")


def _call_ops(graph):
    return [n.op.name for n in graph.nodes if n.kind == "call"]


def _check_compiled(fn, *arrays, rtol=1e-5, atol=1e-6, verify=True):
    """``fn`` compiled (opt level 3, every pass checked against the interpreter when
    ``verify``) against eager, on float32 tensors made from ``arrays``; then its gradient
    (``ember.grad`` of a weighted sum, compiled) against the eager tape's. Returns the
    compiled forward function."""
    tensors = [ember.tensor(a.astype(np.float32)) for a in arrays]
    eager = fn(*tensors)
    eager = eager if isinstance(eager, tuple) else (eager,)
    compiled = ember.function(fn, opt_level=3, verify=verify)
    got = compiled(*tensors)
    got = got if isinstance(got, tuple) else (got,)
    for g, e in zip(got, eager, strict=True):
        assert g.dtype == e.dtype and tuple(g.shape) == tuple(e.shape)
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=rtol, atol=atol)
    weights = [ember.tensor(R.standard_normal(tuple(e.shape)).astype(np.float32)) for e in eager]

    def objective(*ts):
        out = fn(*ts)
        out = out if isinstance(out, tuple) else (out,)
        return sum(((o * w).sum() for o, w in zip(out, weights)), ember.tensor(0.0))

    argnums = tuple(range(len(tensors)))
    graph_grads = ember.function(ember.grad(objective, argnums=argnums), verify=verify)(*tensors)
    leaves = [t.clone().requires_grad_() for t in tensors]
    objective(*leaves).backward()
    for g, leaf in zip(graph_grads, leaves, strict=True):
        np.testing.assert_allclose(g.numpy(), leaf.grad.numpy(), rtol=rtol, atol=atol)
    return compiled


# ------------------------------------------------------------------------------ elementwise


def _elementwise(x, y):
    u = x * 0.4  # in (-0.8, 0.8): the domain of asin and acos
    p = y * y + 0.5
    return (
        u.tan() + u.asin() * u.acos() - ember.atan(x) + x.sinh() / x.cosh(),
        ember.log2(p) - ember.log10(p) + ember.square(x) + ember.atan2(x, y),
        ember.fmod(x * 3, p) + ember.remainder(x * 3, p) + ember.add(x, y, alpha=-2.5),
    )


@pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler: nothing fuses")
def test_new_elementwise_ops_fuse_into_one_loop_and_match_eager():
    x, y = R.uniform(-2, 2, (4, 5)), R.uniform(-2, 2, (4, 5))
    compiled = _check_compiled(_elementwise, x, y)
    ops = _call_ops(compiled.graph)
    assert "fused_elementwise" in ops
    # every op with a C expression joined a fused loop: none is left as a node of its own
    assert not set(ops) & set(NEW_ELEMENTWISE + ("atan2", "fmod")), ops


def test_elementwise_under_capture_without_fusion():
    x, y = R.uniform(-2, 2, (3, 4)), R.uniform(-2, 2, (3, 4))
    tensors = [ember.tensor(a) for a in (x, y)]
    eager = _elementwise(*tensors)
    got = ember.function(_elementwise, opt_level=0)(*tensors)
    for g, e in zip(got, eager, strict=True):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12)


def test_inplace_methods_write_and_differentiate():
    x = ember.tensor(R.uniform(-0.5, 0.5, (2, 3)), requires_grad=True)
    h = x * 1.0
    h.tan_().square_().add_(x, alpha=2).lerp_(x, 0.25)
    h.sum().backward()
    a = x.detach().numpy()
    want = (np.tan(a) ** 2 + 2 * a) * 0.75 + a * 0.25
    np.testing.assert_allclose(h.detach().numpy(), want, rtol=1e-12)
    grad = (2 * np.tan(a) * (1 + np.tan(a) ** 2) + 2) * 0.75 + 0.25
    np.testing.assert_allclose(x.grad.detach().numpy(), grad, rtol=1e-12)


def test_add_and_sub_alpha_follow_pytorch_rules():
    i = ember.tensor([1, 2])
    np.testing.assert_array_equal(ember.add(i, i, alpha=3).numpy(), [4, 8])
    np.testing.assert_array_equal(i.sub(5, alpha=2).numpy(), [-9, -8])
    with pytest.raises(DTypeError, match="alpha must not be a floating point"):
        ember.add(i, i, alpha=2.5)
    with pytest.raises(DTypeError, match="bool alpha"):
        ember.add(ember.tensor([1.0]), 1.0, alpha=True)
    b = ember.tensor([True, False])
    np.testing.assert_array_equal(ember.add(b, b, alpha=0).numpy(), [True, False])


def test_fmod_and_integer_division_by_zero():
    x, y = ember.tensor([-7, 7, -7]), ember.tensor([2, -2, -2])
    np.testing.assert_array_equal(ember.fmod(x, y).numpy(), [-1, 1, -1])
    np.testing.assert_array_equal(ember.remainder(x, y).numpy(), [1, -1, -1])
    with pytest.raises(DivisionByZeroError, match="fmod"):
        ember.fmod(x, 0)


# ---------------------------------------------------------------------- pointwise composites


def _composites(x, y, w):
    return (
        ember.addcmul(x, y, w, value=0.5) + ember.addcdiv(x, y, w * w + 1, value=-2.0),
        ember.lerp(x, y, w) + x.lerp(y, 0.8),
        ember.nan_to_num(ember.log(x)) * ember.isclose(x, y, atol=0.5),
    )


def test_pointwise_composites_compiled_match_eager():
    x, y, w = (R.uniform(-1, 2, (3, 4)) for _ in range(3))
    _check_compiled(_composites, x, y, w)


def test_allclose_is_a_python_bool_and_needs_values_when_captured():
    a = ember.tensor([1.0, np.nan])
    assert ember.allclose(a, a, equal_nan=True) is True
    assert a.allclose(a) is False
    with pytest.raises(ember.TraceError):
        ember.function(lambda t: ember.tensor(1.0) if ember.allclose(t, t) else t)(a)


def test_composites_refuse_what_pytorch_refuses():
    f32, f64 = ember.ones(2, dtype=ember.float32), ember.ones(2, dtype=ember.float64)
    i = ember.tensor([1, 2])
    with pytest.raises(DTypeError, match="lerp"):
        ember.lerp(f32, f64, 0.5)
    with pytest.raises(DTypeError, match="isclose"):
        ember.isclose(f32, f64)
    with pytest.raises(DTypeError, match="integer division"):
        ember.addcdiv(f32, i, i)
    with pytest.raises(DTypeError, match="bool"):
        ember.addcmul(ember.tensor([True]), ember.tensor([True]), ember.tensor([True]))
    np.testing.assert_array_equal(ember.addcmul(i, i, i, value=2.5).numpy(), [3, 10])


# ------------------------------------------------------------------ rearranging and products


def _rearranged(a, v, b):
    gx, gy = ember.meshgrid(v, v[:3], indexing="xy")
    return (
        ember.roll(a, (1, -2), (0, 1)) + a.roll(3),
        ember.diag(v, 1)[:4, 2:] + ember.diag(a)[:, None] * ember.diagonal(a, -1, 1, 0),
        ember.hstack([a, b]).t() @ ember.vstack([a[:2], a[2:]]),
        gx * gy,
    )


def test_rearranging_compiled_matches_eager():
    a, v, b = R.standard_normal((4, 4)), R.standard_normal((4,)), R.standard_normal((4, 2))
    _check_compiled(_rearranged, a, v, b)


def _products(a, b, x1, x2):
    return (
        ember.tensordot(a, b, ([0, 2], [1, 0])),
        ember.baddbmm(x1[0, :3, :2], x1[:, :3], x2.transpose(1, 2), beta=0.5, alpha=2.0),
        ember.cdist(x1, x2) + ember.cdist(x1, x2, p=1.0),
        ember.cdist(x1, x2, compute_mode="use_mm_for_euclid_dist"),
    )


def test_products_compiled_match_eager():
    a, b = R.standard_normal((2, 3, 4)), R.standard_normal((4, 2, 5))
    x1, x2 = R.standard_normal((2, 5, 3)), R.standard_normal((2, 2, 3))
    _check_compiled(_products, a, b, x1, x2, rtol=1e-4, atol=1e-5)


def test_cdist_gradient_is_zero_at_a_zero_distance():
    x1 = ember.tensor([[0.0, 1.0], [2.0, 2.0]], requires_grad=True)
    x2 = ember.tensor([[0.0, 1.0]], requires_grad=True)
    for p in (2.0, 0.5, 3.0):
        x1.grad = x2.grad = None
        ember.cdist(x1, x2, p).sum().backward()
        assert np.isfinite(x1.grad.numpy()).all() and np.isfinite(x2.grad.numpy()).all()
        np.testing.assert_array_equal(x1.grad.numpy()[0], [0.0, 0.0])


def test_shape_errors_name_the_op():
    with pytest.raises(ShapeError, match="diag"):
        ember.diag(ember.ones(2, 2, 2))
    with pytest.raises(ShapeError, match="tensordot"):
        ember.tensordot(ember.ones(2, 3), ember.ones(4, 2), 1)
    with pytest.raises(ShapeError, match="baddbmm"):
        ember.baddbmm(ember.ones(3, 2, 2), ember.ones(2, 2, 2), ember.ones(2, 2, 2))
    with pytest.raises(ShapeError, match="roll"):
        ember.roll(ember.ones(2, 3), (1, 2))
    with pytest.raises(ShapeError, match="t"):
        ember.ones(2, 3, 4).t()
    with pytest.raises(DTypeError, match="cdist"):
        ember.cdist(ember.ones(2, 2, dtype=ember.float16), ember.ones(2, 2, dtype=ember.float16))


def test_symbolic_batch_sizes():
    """Under an input signature with a symbolic batch, what does not need the batch's value
    compiles (cdist takes the product form for an unknown row count); rolling along the
    symbolic dimension too."""
    x, y = ember.randn(5, 3), ember.randn(4, 3)
    sig = [ember.TensorSpec((None, 3)), ember.TensorSpec((4, 3))]

    def f(a, b):
        return (
            ember.cdist(a, b),
            ember.roll(a, (1, -1), (1, 1)) + ember.lerp(a, a.square(), 0.3),
            ember.tensordot(a, a, ([0], [0])),
            ember.vstack([a, a]).t(),
        )

    got = ember.function(f, input_signature=sig)(x, y)
    want = f(x, y)
    want = (ember.cdist(x, y, compute_mode="use_mm_for_euclid_dist"),) + want[1:]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
    # rolling along the symbolic dimension itself (symbolic sizes take sums and remainders)
    rolled = ember.function(lambda a: ember.roll(a, 1, 0), input_signature=sig[:1])
    for rows in (5, 2):
        a = ember.randn(rows, 3)
        np.testing.assert_array_equal(rolled(a).numpy(), ember.roll(a, 1, 0).numpy())
