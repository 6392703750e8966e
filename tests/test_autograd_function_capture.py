"""Custom autograd Functions inside captured graphs: ``ember.function`` (a recorded training
step, and a captured forward with its AOT backward), ``ember.compile`` and ``ember.grad`` call
the Function's own backward, as PyTorch's eager autograd does; compared with PyTorch."""

import numpy as np
import pytest

import ember
from ember.errors import AutogradError, ShapeError

torch = pytest.importorskip("torch")


def _functions(lib, seen):
    class LinearFn(lib.autograd.Function):
        """A linear layer whose backward is written by hand (and deliberately scaled, so a
        graph that differentiated the forward's ops instead would give other numbers)."""

        @staticmethod
        def forward(ctx, x, w, b):
            ctx.save_for_backward(x, w)
            return x @ w.T + b

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            seen.append(tuple(ctx.needs_input_grad))
            gx = g @ w * 0.5 if ctx.needs_input_grad[0] else None
            return gx, g.T @ x, g.sum(0) * 2.0

    class ClampMask(lib.autograd.Function):
        @staticmethod
        def forward(x, lo):
            return x.clamp(min=lo), x < lo, "clamped"

        @staticmethod
        def setup_context(ctx, inputs, output):
            _, mask, _ = output
            ctx.mark_non_differentiable(mask)
            ctx.save_for_backward(mask)
            ctx.set_materialize_grads(False)

        @staticmethod
        def backward(ctx, g, g_mask, g_text):
            (mask,) = ctx.saved_tensors
            return g.masked_fill(mask, 0.0), None

    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @lib.autograd.function.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2.0 * g * x

    return LinearFn, ClampMask, Square


def _model(lib, fns, x, w, b):
    linear, clamp, square = fns
    h, mask, text = clamp.apply(linear.apply(x, w, b), -0.2)
    assert text == "clamped" and mask.dtype == lib.bool and not mask.requires_grad
    return square.apply(h).mean() + mask.sum() * 0.0


R = np.random.default_rng(0)
X, W, B = R.standard_normal((4, 3)), R.standard_normal((2, 3)), R.standard_normal(2)


def _torch_steps(steps=2):
    seen = []
    fns = _functions(torch, seen)
    w = torch.tensor(W, requires_grad=True)
    b = torch.tensor(B, requires_grad=True)
    opt = torch.optim.SGD([w, b], lr=0.1)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = _model(torch, fns, torch.tensor(X), w, b)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, w.detach().numpy(), b.detach().numpy(), seen


def test_a_captured_training_step_calls_backward():
    seen = []
    fns = _functions(ember, seen)
    w = ember.tensor(W, requires_grad=True)
    b = ember.tensor(B, requires_grad=True)
    opt = ember.optim.SGD([w, b], lr=0.1)

    @ember.function
    def step(x):
        opt.zero_grad()
        loss = _model(ember, fns, x, w, b)
        loss.backward()
        opt.step()
        return loss

    losses = [step(ember.tensor(X)).item() for _ in range(2)]
    expected, w_ref, b_ref, torch_seen = _torch_steps()
    np.testing.assert_allclose(losses, expected, rtol=1e-12)
    np.testing.assert_allclose(w.detach().numpy(), w_ref, rtol=1e-12)
    np.testing.assert_allclose(b.detach().numpy(), b_ref, rtol=1e-12)
    # x needs no gradient, in the recorded backward as in PyTorch's
    assert seen[0] == torch_seen[0] == (False, True, True)


@pytest.mark.parametrize("capture", ["function", "compile"])
def test_a_captured_forward_backpropagates_through_backward(capture):
    seen = []
    fns = _functions(ember, seen)
    x = ember.tensor(X, requires_grad=True)
    w = ember.tensor(W, requires_grad=True)
    b = ember.tensor(B, requires_grad=True)
    wrap = ember.function if capture == "function" else ember.compile
    fn = wrap(lambda x, w, b: _model(ember, fns, x, w, b))
    loss = fn(x, w, b)
    loss.backward()

    tseen = []
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (X, W, B))
    tloss = _model(torch, _functions(torch, tseen), tx, tw, tb)
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-12)
    for e, t in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-12)
    assert seen == tseen == [(True, True, True)]


def test_ember_grad_uses_backward_and_differentiates_it_again():
    class Sin(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos() * 3.0  # not sin's derivative: the test sees which one ran

    x = ember.tensor([0.3, 1.2, -0.7])
    first = ember.grad(lambda x: Sin.apply(x).sum())(x)
    np.testing.assert_allclose(first.numpy(), 3.0 * np.cos(x.numpy()), rtol=1e-12)
    # the saved argument is the argument itself: the gradient of the gradient flows through it
    second = ember.grad(lambda x: ember.grad(lambda x: Sin.apply(x).sum())(x).sum())(x)
    np.testing.assert_allclose(second.numpy(), -3.0 * np.sin(x.numpy()), rtol=1e-12)


def test_once_differentiable_backward_has_no_second_derivative_in_a_graph():
    fns = _functions(ember, [])
    square = fns[2]
    x = ember.tensor([1.0, 2.0])
    first = ember.grad(lambda x: square.apply(x).sum())(x)
    np.testing.assert_allclose(first.numpy(), [2.0, 4.0])
    second = ember.grad(lambda x: ember.grad(lambda x: square.apply(x).sum())(x).sum())(x)
    np.testing.assert_allclose(second.numpy(), [0.0, 0.0])


def test_mark_dirty_under_capture_rebinds_the_argument():
    class Dirty(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            out = x.mul_(2)
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    def step(x):
        h = x * 1.0
        v = h[1:]  # a view of the argument: it sees the write
        out = Dirty.apply(h)
        loss = (out * out).sum() + v.sum()
        loss.backward()
        return out is h, out, v, loss

    results = []
    for fn in (step, ember.function(step)):
        x = ember.tensor([1.0, -2.0, 3.0], requires_grad=True)
        results.append([*fn(x), x.grad])
    eager, captured = results
    assert eager[0] and captured[0]
    for e, c in zip(eager[1:], captured[1:]):
        np.testing.assert_allclose(c.detach().numpy(), e.detach().numpy(), rtol=1e-6)
    # (PyTorch 2.13 on this program: out is h, loss 58, x.grad [8, 28, 78]; the custom
    # backward g * y with y = 2x, for (2x)^2 and for the view's 2x[1:])
    np.testing.assert_allclose(eager[3].detach().numpy(), 58.0)
    np.testing.assert_allclose(eager[4].numpy(), [8.0, 28.0, 78.0])


def test_errors_under_capture():
    class WrongShape(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g[:1]

    class DirtyDropped(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            x.mul_(2)
            return x + 1

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = ember.ones(3, requires_grad=True)
    with pytest.raises(AutogradError, match=r"DirtyDropped.forward marked argument 0 dirty"):
        ember.function(lambda x: DirtyDropped.apply(x * 1).sum())(x)
    with pytest.raises(ShapeError, match=r"WrongShape.backward returned a gradient of shape"):
        ember.grad(lambda x: WrongShape.apply(x).sum())(ember.ones(3))


def _requires_grad_seen(lib, capture):
    """What a Function's forward sees of its inputs, and what user code sees of the values a
    step computes, eagerly and inside a captured step (PyTorch: its eager run)."""
    seen = []

    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            seen.append(("forward", x.requires_grad, w.requires_grad, lib.is_grad_enabled()))
            ctx.save_for_backward(w)
            return x * w

        @staticmethod
        def backward(ctx, g):
            (w,) = ctx.saved_tensors
            return g * w, None

    w = lib.tensor(W[0], requires_grad=True)

    def step(x):
        h = x * 2.0
        y = Scale.apply(h, w)
        with lib.no_grad():
            z = y * 2
        seen.append(("values", h.requires_grad, y.requires_grad, z.requires_grad))
        seen.append(("detached", y.detach().requires_grad, (y > 0).requires_grad))
        loss = y.sum()
        loss.backward()
        return loss

    step = ember.function(step) if capture else step
    step(lib.tensor(X[0]))
    return seen


@pytest.mark.parametrize("capture", [False, True], ids=["eager", "function"])
def test_requires_grad_inside_forward_and_of_captured_values_match_torch(capture):
    assert _requires_grad_seen(ember, capture) == _requires_grad_seen(torch, False)
