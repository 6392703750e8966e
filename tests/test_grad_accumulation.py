"""A leaf's ``.grad`` across backward passes, as PyTorch's AccumulateGrad keeps it: outside
grad mode the gradient is added into the ``.grad`` in place (the same tensor and memory, its
version bumped), whoever holds it (a reference the user kept, a view of other memory, sees the
sum, as in PyTorch); a graph's value (``create_graph``) is replaced by a new sum."""

import numpy as np

import ember


def _leaf():
    return ember.tensor(np.arange(1.0, 4.0, dtype=np.float32), requires_grad=True)


def test_a_grad_nobody_holds_is_added_into_in_place():
    x = _leaf()
    (x * 2).sum().backward()
    memory, version = x.grad._data.ctypes.data, x.grad._version
    (x * 3).sum().backward()
    assert x.grad._data.ctypes.data == memory
    assert x.grad._version == version + 1
    np.testing.assert_array_equal(x.grad.numpy(), [5, 5, 5])


def test_a_grad_the_user_kept_sees_the_sum():
    # PyTorch: ``variable_grad += new_grad`` whatever the grad's use count
    x = _leaf()
    (x * 2).sum().backward()
    kept = x.grad
    (x * 3).sum().backward()
    np.testing.assert_array_equal(kept.numpy(), [5, 5, 5])
    assert x.grad is kept


def test_a_grad_set_to_a_view_of_other_memory_writes_through():
    x = _leaf()
    backing = np.full(6, 7.0, dtype=np.float32)
    x.grad = ember.from_numpy(backing[::2])
    (x * 2).sum().backward()
    np.testing.assert_array_equal(backing, [9, 7, 9, 7, 9, 7])
    np.testing.assert_array_equal(x.grad.numpy(), [9, 9, 9])


def test_the_gradient_given_to_backward_is_never_written():
    x = _leaf()
    go = ember.ones(3)
    x.backward(go)
    x.backward(go)
    np.testing.assert_array_equal(go.numpy(), [1, 1, 1])
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 2])


def test_create_graph_builds_a_differentiable_sum():
    x = _leaf()
    (x * x).sum().backward(create_graph=True)
    first = x.grad
    (x * x).sum().backward(create_graph=True)
    assert x.grad is not first and x.grad.grad_fn is not None
    np.testing.assert_array_equal(x.grad.detach().numpy(), 4 * x.detach().numpy())


def test_accumulating_micro_batches_equals_one_pass():
    rng = np.random.default_rng(0)
    w = ember.tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    data = rng.standard_normal((8, 4)).astype(np.float32)
    for part in np.split(data, 4):
        (ember.tensor(part) @ w).square().sum().backward()
    accumulated = w.grad.numpy().copy()
    w.grad = None
    (ember.tensor(data) @ w).square().sum().backward()
    np.testing.assert_allclose(accumulated, w.grad.numpy(), rtol=1e-5)


def test_hooks_see_each_gradient_and_post_hooks_the_sum():
    x = _leaf()
    seen, sums = [], []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    x.register_post_accumulate_grad_hook(lambda t: sums.append(t.grad.numpy().copy()))
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    assert [s.tolist() for s in seen] == [[2, 2, 2], [3, 3, 3]]
    assert [s.tolist() for s in sums] == [[2, 2, 2], [5, 5, 5]]
