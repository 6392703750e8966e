"""ember.autograd.Function and ember.autograd.functional against PyTorch, running the same
source text with ``lib`` bound to ember or torch, and against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.errors import AutogradError, ShapeError

torch = pytest.importorskip("torch")

SOURCE = """
class StraightClamp(lib.autograd.Function):
    # clamp forward, identity (straight-through) backward; non-tensor bounds
    @staticmethod
    def forward(ctx, x, lo, hi):
        return x.clamp(lo, hi)

    @staticmethod
    def backward(ctx, g):
        return g, None, None


class MyExp(lib.autograd.Function):
    # the newer style: forward without ctx, setup_context saves the output
    @staticmethod
    def forward(x):
        return x.exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class MulAdd(lib.autograd.Function):
    # two inputs, two outputs, needs_input_grad, a scale that is not a tensor
    @staticmethod
    def forward(ctx, a, b, scale):
        ctx.save_for_backward(a, b)
        ctx.scale = scale
        ctx.needs = ctx.needs_input_grad
        return a * b * scale, a + b

    @staticmethod
    def backward(ctx, g_prod, g_sum):
        a, b = ctx.saved_tensors
        ga = g_prod * b * ctx.scale + g_sum if ctx.needs_input_grad[0] else None
        gb = g_prod * a * ctx.scale + g_sum if ctx.needs_input_grad[1] else None
        return ga, gb, None


class ArgmaxAndMax(lib.autograd.Function):
    # a non-differentiable output, and grads not materialized
    @staticmethod
    def forward(ctx, x):
        idx = x.argmax(-1)
        ctx.mark_non_differentiable(idx)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, idx)
        return idx, x.amax(-1)

    @staticmethod
    def backward(ctx, g_idx, g_max):
        x, idx = ctx.saved_tensors
        if g_max is None:
            return None
        onehot = (lib.arange(x.shape[-1]) == idx.unsqueeze(-1)).to(x.dtype)
        return onehot * g_max.unsqueeze(-1)
"""


def _build(lib):
    namespace = {"lib": lib}
    exec(SOURCE, namespace)  # noqa: S102 - the test's own source, run for both libraries
    return namespace


EMBER, TORCH = _build(ember), _build(torch)


def _pair(array):
    return (
        ember.tensor(array, requires_grad=True),
        torch.tensor(array, requires_grad=True),
    )


def _close(e, t, tol=1e-12):
    np.testing.assert_allclose(
        np.asarray(e.detach().numpy()), t.detach().numpy(), rtol=tol, atol=tol
    )


def test_straight_through_clamp_and_saved_output_match_torch():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3))
    results = []
    for lib, ns, a in ((ember, EMBER, None), (torch, TORCH, None)):
        a = lib.tensor(x, requires_grad=True)
        y = ns["MyExp"].apply(ns["StraightClamp"].apply(a, -0.5, 0.5))
        (y * y).sum().backward()
        results.append((y, a.grad))
    _close(results[0][0], results[1][0])
    _close(results[0][1], results[1][1])


def test_grad_fn_name_and_second_order_through_saved_output():
    x = np.linspace(-1.0, 1.0, 5)
    e, t = _pair(x)
    ye, yt = EMBER["MyExp"].apply(e), TORCH["MyExp"].apply(t)
    assert ye.grad_fn.name() == "MyExpBackward"
    (ge,) = ember.autograd.grad(ye.sum(), e, create_graph=True)
    (gt,) = torch.autograd.grad(yt.sum(), t, create_graph=True)
    (gge,) = ember.autograd.grad((ge * ge).sum(), e)
    (ggt,) = torch.autograd.grad((gt * gt).sum(), t)
    _close(gge, ggt)


@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)])
def test_two_outputs_and_needs_input_grad(needs):
    rng = np.random.default_rng(1)
    a0, b0 = rng.standard_normal(3), rng.standard_normal(3)
    grads = []
    for lib, ns in ((ember, EMBER), (torch, TORCH)):
        a = lib.tensor(a0, requires_grad=needs[0])
        b = lib.tensor(b0, requires_grad=needs[1])
        prod, total = ns["MulAdd"].apply(a, b, 2.5)
        (prod.sum() * 3 + (total * total).sum()).backward()
        assert tuple(prod.grad_fn.needs) == (*needs, False)
        grads.append([None if v.grad is None else v.grad for v in (a, b)])
    for ge, gt in zip(*grads):
        assert (ge is None) == (gt is None)
        if ge is not None:
            _close(ge, gt)


def test_non_differentiable_output_and_unmaterialized_grads():
    x = np.random.default_rng(2).standard_normal((2, 4))
    e, t = _pair(x)
    ie, me = EMBER["ArgmaxAndMax"].apply(e)
    it, mt = TORCH["ArgmaxAndMax"].apply(t)
    assert not ie.requires_grad and not it.requires_grad
    (me * 2).sum().backward()
    (mt * 2).sum().backward()
    _close(e.grad, t.grad)


def test_ember_gradcheck_on_custom_functions():
    x = ember.tensor(np.random.default_rng(5).standard_normal(3), requires_grad=True)
    y = ember.tensor(np.random.default_rng(6).standard_normal(3), requires_grad=True)
    assert ember.autograd.gradcheck(lambda a, b: EMBER["MulAdd"].apply(a, b, 1.5), (x, y))
    assert ember.autograd.gradcheck(EMBER["MyExp"].apply, (x,))

    class WrongGrad(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * a

        @staticmethod
        def backward(ctx, g):
            return g  # should be 2 a g

    with pytest.raises(AutogradError, match="Jacobian mismatch for output 0"):
        ember.autograd.gradcheck(WrongGrad.apply, (x,))
    assert ember.autograd.gradcheck(WrongGrad.apply, (x,), raise_exception=False) is False


def test_gradcheck_by_finite_differences():
    x = np.random.default_rng(3).standard_normal(4)

    def f(v):
        p, s = EMBER["MulAdd"].apply(v, v * 2, 0.7)
        return (EMBER["MyExp"].apply(p) + s * s).sum()

    v = ember.tensor(x, requires_grad=True)
    f(v).backward()
    eps = 1e-6
    numeric = []
    for i in range(4):
        d = np.zeros(4)
        d[i] = eps
        hi = f(ember.tensor(x + d)).item()
        lo = f(ember.tensor(x - d)).item()
        numeric.append((hi - lo) / (2 * eps))
    np.testing.assert_allclose(v.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_setup_context_style_binds_keywords_and_defaults():
    class Scale(ember.autograd.Function):
        @staticmethod
        def forward(x, factor=3.0):
            return x * factor

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.factor = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.factor, None

    x = ember.ones(2, requires_grad=True)
    Scale.apply(x).sum().backward()
    Scale.apply(x, factor=2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])


def test_no_grad_mode_records_nothing_and_identity_output_is_an_alias():
    class Identity(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = ember.ones(3, requires_grad=True)
    with ember.no_grad():
        assert Identity.apply(x).grad_fn is None
    y = Identity.apply(x)
    assert y is not x and x.grad_fn is None and y.grad_fn is not None
    y.register_hook(lambda g: g * 10)  # hooks on a custom function's output run first
    y.retain_grad()
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [20.0, 20.0, 20.0])
    np.testing.assert_array_equal(y.grad.numpy(), [10.0, 10.0, 10.0])


def test_errors_name_the_function():
    class WrongCount(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    class WrongShape(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return ember.ones(7)

    class Saves(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x

    x = ember.ones(3, requires_grad=True)
    with pytest.raises(AutogradError, match="WrongCount.backward returned 1 gradients"):
        WrongCount.apply(x, x).sum().backward()
    with pytest.raises(ShapeError, match="WrongShape.backward"):
        WrongShape.apply(x).sum().backward()
    y = Saves.apply(x)
    y.sum().backward()
    with pytest.raises(AutogradError, match="SavesBackward a second time"):
        y.sum().backward()
    z = x * 1
    w = Saves.apply(z)
    z.mul_(3)
    with pytest.raises(AutogradError, match="modified by an in-place"):
        w.sum().backward()
    with pytest.raises(AutogradError, match=r"Saves.apply\(...\)"):
        Saves()


def test_capture_calls_backward():
    """(tests/test_autograd_function_capture.py has the rest)"""

    def f(x):
        return EMBER["MyExp"].apply(x).sum()

    x = ember.ones(3, requires_grad=True)
    ember.function(f)(x).backward()
    eager = ember.ones(3, requires_grad=True)
    f(eager).backward()
    np.testing.assert_allclose(x.grad.numpy(), eager.grad.numpy(), rtol=1e-12)


def test_capture_without_gradients_records_forward():
    """With gradients off nothing calls backward: a captured function, and the ONNX export of
    a module (an inference graph, as torch.onnx.export's), record forward's ops."""
    import onnxruntime as ort

    x = ember.tensor(np.linspace(-1, 1, 6).reshape(2, 3))

    def f(x):
        a, b = EMBER["MulAdd"].apply(x, x * 2, 3.0)
        return EMBER["MyExp"].apply(a) + EMBER["StraightClamp"].apply(b, -0.5, 0.5)

    with ember.no_grad():
        np.testing.assert_allclose(ember.function(f)(x).numpy(), f(x).numpy(), rtol=1e-12)

    class Model(ember.nn.Module):
        def forward(self, x):
            return f(x)

    path = pytest.importorskip("tempfile").mktemp(suffix=".onnx")
    ember.onnx.export(Model(), path, x)
    (got,) = ort.InferenceSession(path).run(None, {"x": x.numpy()})
    np.testing.assert_allclose(got, f(x).detach().numpy(), rtol=1e-12)


def test_once_differentiable_and_torch_spelling_imports():
    from ember.autograd.function import once_differentiable
    from ember.autograd.functional import jacobian

    class Square(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = ember.tensor([1.0, 2.0], requires_grad=True)
    (g,) = ember.autograd.grad(Square.apply(x).sum(), x, create_graph=True)
    assert not g.requires_grad
    np.testing.assert_allclose(jacobian(lambda v: v * v, x).numpy(), np.diag([2.0, 4.0]))


# ------------------------------------------------------------------ autograd.functional


def _fn(lib):
    def f(a, b):
        return (a.exp() * b).sum(-1), a * b.sum()

    return f


def test_functional_matches_torch():
    rng = np.random.default_rng(4)
    a0, b0 = rng.standard_normal((2, 3)), rng.standard_normal(3)
    ea, ta = ember.tensor(a0), torch.tensor(a0)
    eb, tb = ember.tensor(b0), torch.tensor(b0)
    je = ember.autograd.functional.jacobian(_fn(ember), (ea, eb))
    jt = torch.autograd.functional.jacobian(_fn(torch), (ta, tb))
    for row_e, row_t in zip(je, jt):
        for e, t in zip(row_e, row_t):
            _close(e, t)

    def scalar(lib):
        return lambda a, b: (a.exp() * b).sum() * b.sum()

    he = ember.autograd.functional.hessian(scalar(ember), (ea, eb))
    ht = torch.autograd.functional.hessian(scalar(torch), (ta, tb))
    for row_e, row_t in zip(he, ht):
        for e, t in zip(row_e, row_t):
            _close(e, t)
    v0 = rng.standard_normal((2, 3))
    ve, vt = ember.tensor(v0), torch.tensor(v0)
    oe, ge = ember.autograd.functional.vjp(lambda a: a.exp() * a, ea, ve)
    ot, gt = torch.autograd.functional.vjp(lambda a: a.exp() * a, ta, vt)
    _close(oe, ot)
    _close(ge, gt)
    oe, ge = ember.autograd.functional.jvp(lambda a: a.exp() * a, ea, ve)
    ot, gt = torch.autograd.functional.jvp(lambda a: a.exp() * a, ta, vt)
    _close(ge, gt)
    oe, ge = ember.autograd.functional.hvp(lambda a: (a.exp() * a).sum(), ea, ve)
    ot, gt = torch.autograd.functional.hvp(lambda a: (a.exp() * a).sum(), ta, vt)
    _close(oe, ot)
    _close(ge, gt)


def test_functional_strict_and_create_graph():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(AutogradError, match="does not depend on input 1"):
        ember.autograd.functional.jacobian(lambda a, b: a * 2, (x, x * 1), strict=True)
    jac = ember.autograd.functional.jacobian(lambda a: a * a * a, x, create_graph=True)
    jac.sum().backward()  # d/dx sum(diag(3 x^2)) = 6 x
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])


def test_mark_dirty_bumps_the_version_once_more_as_pytorch():
    import torch

    def versions(lib):
        class AddOne(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                ctx.save_for_backward(x)
                return x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors  # saved as the output: no version error
                return g * x

        class MarkOnly(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g

        out = []
        for fn in (AddOne, MarkOnly):
            leaf = lib.ones(3, requires_grad=True)
            b = leaf.clone()
            y = fn.apply(b)
            out.append((b._version, y._version, y is b))
            y.sum().backward()
            out.append(leaf.grad.tolist())
            c = lib.ones(3)
            with lib.no_grad():
                fn.apply(c)
            out.append(c._version)
        return out

    assert versions(ember) == versions(torch)


def test_forward_may_read_its_inputs_as_numpy_arrays():
    """PyTorch runs a Function's forward without recording, where ``numpy()`` of a tensor
    that requires grad is given (autograd_function_db's NumpyCube); outside no_grad it is
    refused."""

    class NumpyCube(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return ember.tensor(x.numpy() ** 3)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

    x = ember.tensor([1.0, -2.0, 0.5], requires_grad=True)
    y = NumpyCube.apply(x)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.array([1.0, 4.0, 0.25]))
    with ember.no_grad():
        assert x.numpy() is not None
    with pytest.raises(ember.EmberError, match="requires grad"):
        x.numpy()
