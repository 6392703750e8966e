"""ember.grad / ember.value_and_grad (capture/grad.py) over graph autodiff (graph/autodiff.py)
agree with calculus, with eager autograd and with finite differences; higher-order gradients
compose; misuse fails with a clear error."""

import inspect

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import models
from ember.capture import GraphBuilder
from ember.graph import Graph
from ember.graph.autodiff import backward_graph_values
from ember.types import TensorType


def _t(values, dtype=np.float64):
    return ember.tensor(np.asarray(values, dtype=dtype))


def test_public_names_do_not_clash():
    # (unwrapped: once any Tensor subclass is defined in the process, by this test's file or
    # an earlier one, ember's public functions dispatch __torch_function__ through wrappers,
    # ember/_torch_function.py)
    assert inspect.unwrap(ember.grad) is ember.capture.grad.grad
    assert inspect.unwrap(ember.autograd.grad) is not inspect.unwrap(ember.grad)
    assert "grad" not in ember._ops.PUBLIC


def test_sum_of_cubes():
    x = _t([1.0, -2.0, 0.5])
    g = ember.grad(lambda x: (x**3).sum())(x)
    assert isinstance(g, ember.Tensor)
    np.testing.assert_allclose(g.numpy(), 3 * x.numpy() ** 2)


def test_sin_times_x():
    x = _t([0.3, 1.0, -2.5, 4.0])
    g = ember.grad(lambda x: (ember.sin(x) * x).sum())(x)
    xs = x.numpy()
    np.testing.assert_allclose(g.numpy(), np.cos(xs) * xs + np.sin(xs), rtol=1e-12)


def test_second_and_third_derivative_of_a_scalar_function():
    def f(x):
        return x**3

    x = _t(1.7)
    np.testing.assert_allclose(ember.grad(f)(x).numpy(), 3 * 1.7**2)
    np.testing.assert_allclose(ember.grad(ember.grad(f))(x).numpy(), 6 * 1.7)
    np.testing.assert_allclose(ember.grad(ember.grad(ember.grad(f)))(x).numpy(), 6.0)


def test_second_derivative_of_a_composite():
    # d²/dx² sin(x)·x = 2cos(x) − x·sin(x)
    x = _t(0.8)
    g2 = ember.grad(ember.grad(lambda x: ember.sin(x) * x))(x)
    np.testing.assert_allclose(g2.numpy(), 2 * np.cos(0.8) - 0.8 * np.sin(0.8), rtol=1e-12)


def test_nested_grad_treats_closed_over_tensor_as_constant():
    # d/dx [ x · d/dy (x·y) |_{y=x} ] = d/dx x² = 2x (no perturbation confusion)
    def outer(x):
        return x * ember.grad(lambda y: x * y)(x)

    np.testing.assert_allclose(ember.grad(outer)(_t(3.0)).numpy(), 6.0)


def test_multi_path_accumulation():
    x = _t([1.0, 2.0, 3.0])
    # x used twice by one op, and again through another branch
    g = ember.grad(lambda x: (x * x + ember.exp(x)).sum())(x)
    np.testing.assert_allclose(g.numpy(), 2 * x.numpy() + np.exp(x.numpy()), rtol=1e-12)

    def branches(x):
        b = x * 2.0  # b feeds two branches that meet again
        return (ember.sin(b) + b * b).sum()

    g = ember.grad(branches)(x)
    b = 2 * x.numpy()
    np.testing.assert_allclose(g.numpy(), 2 * (np.cos(b) + 2 * b), rtol=1e-12)


def test_argnums_tuple_and_unused_argument():
    x, y, z = _t([1.0, 2.0]), _t([3.0, -1.0]), _t([5.0, 5.0])
    gx, gy, gz = ember.grad(lambda x, y, z: (x * y).sum(), argnums=(0, 1, 2))(x, y, z)
    np.testing.assert_allclose(gx.numpy(), y.numpy())
    np.testing.assert_allclose(gy.numpy(), x.numpy())
    np.testing.assert_allclose(gz.numpy(), np.zeros(2))
    (g1,) = ember.grad(lambda x, y: (x * y).sum(), argnums=(1,))(x, y)
    np.testing.assert_allclose(g1.numpy(), x.numpy())
    g_last = ember.grad(lambda x, y: (x * y * y).sum(), argnums=-1)(x, y)
    np.testing.assert_allclose(g_last.numpy(), 2 * x.numpy() * y.numpy())


def test_broadcasting_and_python_args():
    w, b = _t([[1.0, 2.0], [3.0, 4.0]]), _t([0.5, -0.5])

    def f(w, b, scale):  # scale: a Python value, baked in
        return ((w + b) * scale).sum()

    gw, gb = ember.grad(f, argnums=(0, 1))(w, b, 3.0)
    np.testing.assert_allclose(gw.numpy(), np.full((2, 2), 3.0))
    np.testing.assert_allclose(gb.numpy(), np.full(2, 6.0))


def test_value_and_grad_with_aux():
    x = _t([1.0, 2.0, 3.0])

    def f(x):
        y = x * x
        return y.sum(), {"y": y, "n": (x.mean(),)}

    (value, aux), g = ember.value_and_grad(f, has_aux=True)(x)
    np.testing.assert_allclose(value.numpy(), 14.0)
    np.testing.assert_allclose(aux["y"].numpy(), [1.0, 4.0, 9.0])
    np.testing.assert_allclose(aux["n"][0].numpy(), 2.0)
    np.testing.assert_allclose(g.numpy(), 2 * x.numpy())
    g2, aux2 = ember.grad(f, has_aux=True)(x)
    np.testing.assert_allclose(g2.numpy(), g.numpy())
    np.testing.assert_allclose(aux2["y"].numpy(), aux["y"].numpy())
    value, g3 = ember.value_and_grad(lambda x: (x**3).sum())(x)
    np.testing.assert_allclose(value.numpy(), 36.0)
    np.testing.assert_allclose(g3.numpy(), 3 * x.numpy() ** 2)


def test_matches_finite_differences():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4))
    w = rng.standard_normal((4, 2))

    def f(a, w):
        h = ember.tanh(a @ w)
        return (ember.log(1 + h * h) * ember.sigmoid(h)).mean() + (a**2).sum() * 0.1

    ga, gw = ember.grad(f, argnums=(0, 1))(_t(a), _t(w))

    def numeric(arr, which):
        out = np.zeros_like(arr)
        eps = 1e-6
        for idx in np.ndindex(arr.shape):
            plus, minus = arr.copy(), arr.copy()
            plus[idx] += eps
            minus[idx] -= eps
            args_p = (plus, w) if which == 0 else (a, plus)
            args_m = (minus, w) if which == 0 else (a, minus)
            fp = f(*(_t(v) for v in args_p)).item()
            fm = f(*(_t(v) for v in args_m)).item()
            out[idx] = (fp - fm) / (2 * eps)
        return out

    np.testing.assert_allclose(ga.numpy(), numeric(a, 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw.numpy(), numeric(w, 1), rtol=1e-6, atol=1e-8)


def _mlp_and_batch():
    ember.manual_seed(0)
    model = models.mlp(784, 64, 10)
    x = ember.randn(8, 784)
    labels = ember.tensor(np.arange(8) % 10)
    return model, x, labels


def test_mlp_input_gradient_matches_eager_autograd():
    model, x, labels = _mlp_and_batch()

    def loss(x):  # the model's parameters are closed over (captured graph inputs)
        return F.cross_entropy(model(x), labels)

    value, g = ember.value_and_grad(loss)(x)

    xe = x.detach().requires_grad_()
    eager_loss = loss(xe)
    (expected,) = ember.autograd.grad(eager_loss, [xe])
    np.testing.assert_allclose(value.detach().numpy(), eager_loss.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(g.detach().numpy(), expected.detach().numpy(), rtol=1e-4, atol=1e-7)


def test_mlp_parameter_gradients_match_eager_backward():
    model, x, labels = _mlp_and_batch()
    params = [p for _, p in model.named_parameters()]

    def loss(w1, b1, w2, b2, w3, b3):
        h = F.relu(F.linear(x.flatten(1), w1, b1))
        h = F.relu(F.linear(h, w2, b2))
        return F.cross_entropy(F.linear(h, w3, b3), labels)

    grads = ember.grad(loss, argnums=tuple(range(6)))(*[p.detach() for p in params])

    model.zero_grad()
    F.cross_entropy(model(x), labels).backward()
    for p, g in zip(params, grads):
        assert g.shape == p.shape
        np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_grad_inside_trace_records_into_the_outer_graph():
    x = _t([0.5, 1.5])
    fn = ember.trace(lambda x: ember.grad(lambda y: (y**3).sum())(x) * 2, x)
    assert any(n.target == "pow" for n in fn.graph.call_nodes())
    np.testing.assert_allclose(fn(x).numpy(), 6 * x.numpy() ** 2)
    np.testing.assert_allclose(fn(_t([2.0, -1.0])).numpy(), [24.0, 6.0])


def test_backward_graph_values_multi_output_and_unreachable():
    builder = GraphBuilder(Graph())
    x = builder.input(TensorType((4,), ember.float64), "x")
    unused = builder.input(TensorType((2,), ember.float64), "unused")
    with builder:
        a, b = ember.split(x, 2)  # a multi-output node; only ``a`` reaches the output
        out = (a * a).sum()
        one = ember.ones((), dtype=ember.float64)
    gx, gu = backward_graph_values(builder, [out], [x, unused], [one])
    builder.graph.set_outputs([gx.value, gu.value])
    builder.graph.verify()
    from ember.runtime.codegen import compile_graph

    rx, ru = compile_graph(builder.graph)(np.array([1.0, 2.0, 3.0, 4.0]), np.zeros(2))
    np.testing.assert_allclose(rx, [2.0, 4.0, 0.0, 0.0])
    np.testing.assert_allclose(ru, [0.0, 0.0])


def test_integer_values_carry_no_gradient():
    x = _t([1.0, 3.0, 2.0])

    def f(x):
        i = ember.argmax(x)  # an integer value on the path: cut off, not an error
        return (x * i.to(x.dtype)).sum()

    np.testing.assert_allclose(ember.grad(f)(x).numpy(), [1.0, 1.0, 1.0])


def test_errors():
    x = _t([1.0, 2.0])
    with pytest.raises(ember.EmberError, match=r"shape \(2,\)"):
        ember.grad(lambda x: x * 2)(x)
    with pytest.raises(ember.DTypeError, match="int64"):
        ember.grad(lambda n: (n * 2).sum())(ember.tensor(np.array([1, 2])))
    with pytest.raises(ember.DTypeError, match="Python int"):
        ember.grad(lambda n: n * x.sum())(2)
    np.testing.assert_allclose(ember.grad(lambda s: s * s)(1.5).numpy(), 3.0)
    with pytest.raises(ember.EmberError, match="pair"):
        ember.grad(lambda x: x.sum(), has_aux=True)(x)
    with pytest.raises(ember.EmberError, match="argument 3"):
        ember.grad(lambda x: x.sum(), argnums=3)(x)


def test_leaf_updated_under_no_grad_takes_the_gradients_of_all_its_uses():
    """A parameter changed in place under no_grad inside the captured step (an embedding's
    max_norm renorm) is still the leaf: the uses after the update and those before it both
    give it their gradients, as eagerly (PyTorch: [6, 15] here)."""
    w = ember.tensor([1.0, 2.0], requires_grad=True)
    x = ember.tensor([3.0, 5.0])

    def step(x):
        y1 = (w * x).sum()
        with ember.no_grad():
            w.mul_(0.5)
        y2 = (w * w * x).sum()
        (y1 + y2).backward()
        return y1 + y2

    assert ember.function(step)(x).item() == 18.75
    np.testing.assert_allclose(w.grad.numpy(), [6.0, 15.0])
    np.testing.assert_allclose(w.detach().numpy(), [0.5, 1.0])

    emb = ember.nn.Embedding(5, 3, max_norm=1.0)
    with ember.no_grad():
        emb.weight.mul_(4.0)
    ids = ember.tensor([[1, 2, 2]])
    eager = ember.nn.Embedding(5, 3, max_norm=1.0)
    eager.load_state_dict(emb.state_dict())

    def loss(module):
        out = (module(ids) ** 2).sum()
        out.backward()
        return out

    want = loss(eager)
    got = ember.function(lambda: loss(emb))()
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
    np.testing.assert_allclose(emb.weight.grad.numpy(), eager.weight.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(
        emb.weight.detach().numpy(), eager.weight.detach().numpy(), rtol=1e-6
    )


def test_grad_respects_no_grad_inside_the_function_not_around_it():
    """As torch.func.grad: values ``fn`` computes under no_grad are constants to the gradient,
    and a no_grad region around the transform itself changes nothing."""

    def f(x):
        with ember.no_grad():
            y = x * 2.0
        return (y * x).sum()

    x = _t([0.0, 1.0, 2.0])
    np.testing.assert_allclose(ember.grad(f)(x).numpy(), [0.0, 2.0, 4.0])
    value, g = ember.value_and_grad(f)(x)
    np.testing.assert_allclose(g.numpy(), [0.0, 2.0, 4.0])
    with ember.no_grad():
        np.testing.assert_allclose(ember.grad(lambda x: (x * x).sum())(x).numpy(), [0, 2, 4])
        np.testing.assert_allclose(ember.grad(f)(x).numpy(), [0.0, 2.0, 4.0])
