"""The eager tape: chain rule over several paths, higher-order gradients, autograd.grad, hooks,
in-place safety and the engine's errors. Expected values are derived by hand."""

import numpy as np
import pytest

import ember
from ember.ops import _registry
from ember.ops._registry import OpDef, apply, register
from ember.ops._util import same_type


def test_multi_path_chain_rule_sums_both_paths():
    # b feeds c and d; g = c * d with c = b**2 and d = 2b + sin(b)
    b = ember.tensor([0.5, -1.5, 2.0], dtype=ember.float64, requires_grad=True)
    c = b * b
    d = 2 * b + ember.sin(b)
    g = (c * d).sum()
    g.backward()
    bv = b.detach().numpy()
    # dg/db = dg/dc * dc/db + dg/dd * dd/db = d * 2b + c * (2 + cos b)
    expected = (2 * bv + np.sin(bv)) * 2 * bv + bv**2 * (2 + np.cos(bv))
    np.testing.assert_allclose(b.grad.detach().numpy(), expected, rtol=1e-12)


def test_diamond_with_shared_intermediate_runs_each_node_once():
    x = ember.tensor(3.0, dtype=ember.float64, requires_grad=True)
    h = x * x  # used by both branches
    y = h * 2 + h * h
    y.backward()
    # y = 2x^2 + x^4 -> 4x + 4x^3
    assert x.grad.item() == pytest.approx(4 * 3 + 4 * 27)


def test_gradients_accumulate_across_backward_calls():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3 + 2, 3 + 4])


def test_second_and_third_order_gradients():
    x = ember.tensor(1.5, dtype=ember.float64, requires_grad=True)
    y = x**3
    (g1,) = ember.autograd.grad(y, x, create_graph=True)
    (g2,) = ember.autograd.grad(g1, x, create_graph=True)
    (g3,) = ember.autograd.grad(g2, x)
    assert g1.item() == pytest.approx(3 * 1.5**2)
    assert g2.item() == pytest.approx(6 * 1.5)
    assert g3.item() == pytest.approx(6.0)


def test_higher_order_through_transcendental_and_broadcast():
    x = ember.tensor([[0.3, -0.7]], dtype=ember.float64, requires_grad=True)
    w = ember.tensor([[1.0], [2.0]], dtype=ember.float64, requires_grad=True)
    y = (ember.tanh(x * w)).sum()
    (gx,) = ember.autograd.grad(y, x, create_graph=True)
    gx.sum().backward()
    xv, wv = x.detach().numpy(), w.detach().numpy()
    t = np.tanh(xv * wv)
    # d/dw of sum_j d/dx_j y = d/dw sum (1 - t^2) w = sum_j (1 - t^2) - 2 t (1 - t^2) x w
    expected_w = ((1 - t**2) - 2 * t * (1 - t**2) * xv * wv).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(w.grad.numpy(), expected_w, rtol=1e-10)


def test_grad_with_grad_outputs_and_non_leaf_inputs():
    x = ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64, requires_grad=True)
    h = x * 2
    y = h * h
    gh, gx = ember.autograd.grad(y, (h, x), grad_outputs=ember.tensor([1.0, 0.5, 2.0]).double())
    np.testing.assert_allclose(gh.numpy(), 2 * h.detach().numpy() * [1.0, 0.5, 2.0])
    np.testing.assert_allclose(gx.numpy(), 8 * x.detach().numpy() * [1.0, 0.5, 2.0])
    assert x.grad is None  # autograd.grad never touches .grad


def test_grad_unused_input():
    x = ember.tensor(1.0, requires_grad=True)
    z = ember.tensor(2.0, requires_grad=True)
    y = x * 2
    with pytest.raises(ember.AutogradError, match="not used"):
        ember.autograd.grad(y, (x, z), retain_graph=True)
    gx, gz = ember.autograd.grad(y, (x, z), allow_unused=True)
    assert gx.item() == 2.0 and gz is None


def test_backward_twice_without_retain_graph_is_a_clear_error():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * 2).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.exp([1.0, 2.0]), rtol=1e-6)
    with pytest.raises(ember.AutogradError, match="second time.*retain_graph=True"):
        y.backward()


def test_non_scalar_backward_needs_gradient():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(ember.AutogradError, match="scalar outputs.*shape \\(2,\\)"):
        y.backward()
    y.backward(ember.tensor([1.0, 10.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 20.0])


def test_backward_of_tensor_without_grad_is_a_clear_error():
    with pytest.raises(ember.AutogradError, match="does not require grad"):
        ember.tensor([1.0]).sum().backward()


def test_op_without_vjp_raises_at_backward_naming_it():
    op = register(
        OpDef(name="test_no_vjp", kind="elementwise", infer=same_type, kernel=lambda x: x * 1)
    )
    try:
        x = ember.tensor([1.0], requires_grad=True)
        y = apply(op, x)
        assert y.requires_grad
        with pytest.raises(ember.AutogradError, match="test_no_vjp has no gradient"):
            y.sum().backward()
    finally:
        del _registry.REGISTRY["test_no_vjp"]


def test_no_grad_enable_grad_and_set_grad_enabled():
    x = ember.tensor([1.0], requires_grad=True)
    with ember.no_grad():
        assert not (x * 2).requires_grad
        with ember.enable_grad():
            assert (x * 2).requires_grad
    with ember.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad

    @ember.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    assert ember.is_grad_enabled()


def test_grad_fn_is_inspectable():
    a = ember.tensor([1.0], requires_grad=True)
    b = ember.tensor([2.0])
    y = (a * b).exp()
    assert y.grad_fn.name() == "ExpBackward0"
    ((mul_node, nr),) = y.grad_fn.next_functions
    assert mul_node.name() == "MulBackward0" and nr == 0
    acc, none = mul_node.next_functions
    assert acc[0].name() == "AccumulateGrad" and acc[0].variable is a
    assert none == (None, 0)  # (PyTorch's entry for an input that needs no gradient)
    assert a.is_leaf and not y.is_leaf


def test_hooks_on_leaf_and_non_leaf_and_retain_grad():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    handle = x.register_hook(lambda g: seen.append(g.numpy().copy()))
    h = x * 3
    h.retain_grad()
    h.register_hook(lambda g: g * 10)  # replaces the gradient flowing into h's producer
    (h * h).sum().backward()
    # as in PyTorch, the retained gradient is the one after the hooks, whatever their order
    np.testing.assert_allclose(h.grad.numpy(), 10 * 2 * h.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), 10 * 2 * h.detach().numpy() * 3)
    np.testing.assert_allclose(seen[0], x.grad.numpy())
    handle.remove()
    x.grad = None
    (x * 1).sum().backward()
    assert len(seen) == 1


def test_leaf_gradients_never_alias_each_other():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = ember.tensor([3.0, 4.0], requires_grad=True)
    (x + y).sum().backward()
    x.grad.mul_(5)
    np.testing.assert_allclose(y.grad.numpy(), [1.0, 1.0])


def test_inplace_on_leaf_requiring_grad_is_refused():
    w = ember.tensor([1.0], requires_grad=True)
    with pytest.raises(ember.AutogradError, match="leaf tensor that requires grad"):
        w.add_(1)
    with ember.no_grad():
        w.add_(1)
    assert w.item() == 2.0 and w._version == 1


def test_inplace_on_non_leaf_keeps_correct_history():
    x = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    a = x * 2
    a.add_(1)
    a.mul_(3)  # mul_ needs only the 3 for a's gradient, not a's overwritten value
    a.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0])
    np.testing.assert_allclose(a.detach().numpy(), (x.detach().numpy() * 2 + 1) * 3)


def test_overwriting_a_value_saved_for_backward_is_detected():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()  # exp saves its output
    y.add_(1)
    with pytest.raises(ember.AutogradError, match="modified by an in-place operation"):
        y.sum().backward()

    a = x * 2
    b = a * a  # saves a
    a.add_(1)
    with pytest.raises(ember.AutogradError, match="input [01] of mul.*in-place"):
        b.sum().backward()


def test_detach_shares_data_and_version():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None
    d.add_(1)
    np.testing.assert_allclose(x.detach().numpy(), [2.0, 3.0])
    assert x._version == 1


def test_requires_grad_only_for_floats():
    with pytest.raises(ember.DTypeError, match="floating-point"):
        ember.tensor([1, 2]).requires_grad_()
    x = ember.tensor([1.0]).requires_grad_()
    assert x.requires_grad


def test_backward_inputs_argument_limits_accumulation():
    x = ember.tensor(2.0, requires_grad=True)
    y = ember.tensor(3.0, requires_grad=True)
    (x * y).backward(inputs=[x])
    assert x.grad.item() == 3.0 and y.grad is None


def test_integer_outputs_do_not_require_grad():
    x = ember.tensor([1.0, 3.0, 2.0], requires_grad=True)
    assert not ember.argmax(x).requires_grad
    assert not (x > 1).requires_grad


def test_grad_materialize_grads_and_batched_grads_match_torch():
    torch = pytest.importorskip("torch")
    results = {}
    for lib in (torch, ember):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        unused = lib.tensor([4.0], requires_grad=True)
        y = x * x
        zeros = lib.autograd.grad(y.sum(), [x, unused], materialize_grads=True, retain_graph=True)
        (jac,) = lib.autograd.grad(y, x, lib.eye(3), is_grads_batched=True, retain_graph=True)
        (none_,) = lib.autograd.grad(y.sum(), [unused], allow_unused=True)
        with pytest.raises(ValueError, match="allow_unused"):
            lib.autograd.grad(y.sum(), [x], allow_unused=False, materialize_grads=True)
        results[lib] = [g.detach().numpy() for g in zeros] + [jac.numpy()], none_
    for want, got in zip(results[torch][0], results[ember][0]):
        np.testing.assert_array_equal(got, want)
    assert results[ember][1] is None and results[torch][1] is None
