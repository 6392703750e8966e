"""``ember.trace`` as both PyTorch's matrix trace and ember's graph capture, and the built-in
error types PyTorch raises for the same mistakes."""

import numpy as np
import pytest

import ember
from ember.errors import EmberError

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (4, 2)])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int64"])
def test_trace_of_a_tensor_is_the_matrix_trace(shape, dtype):
    a = (np.arange(np.prod(shape)).reshape(shape) - 3).astype(dtype)
    want = torch.trace(torch.tensor(a))
    for got in (
        ember.trace(ember.tensor(a)),
        ember.tensor(a).trace(),
        ember.trace(input=ember.tensor(a)),
    ):
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(got.numpy(), want.numpy())


def test_trace_gradient_matches_pytorch():
    a = np.random.default_rng(0).standard_normal((3, 4))
    x = ember.tensor(a, requires_grad=True)
    (ember.trace(x) * 2).backward()
    t = torch.tensor(a, requires_grad=True)
    (torch.trace(t) * 2).backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())


def test_trace_of_a_vector_is_refused_as_pytorch_does():
    with pytest.raises(RuntimeError):
        torch.trace(torch.ones(3))
    with pytest.raises(RuntimeError, match="trace"):
        ember.trace(ember.ones(3))


def test_trace_of_a_function_still_captures_a_graph():
    def f(x):
        return (x * 2).sum()

    traced = ember.trace(f, ember.ones(3, 3))
    assert isinstance(traced.graph, ember.Graph)
    assert float(traced(ember.full((3, 3), 2.0))) == 36.0
    m = ember.nn.Linear(3, 2)
    traced = ember.trace(m, ember.ones(4, 3))
    np.testing.assert_allclose(
        traced(ember.ones(4, 3)).detach().numpy(), m(ember.ones(4, 3)).detach().numpy()
    )
    # a captured function may itself call ember.trace on a tensor
    g = ember.trace(lambda x: ember.trace(x) + 1, ember.eye(3))
    assert float(g(ember.eye(3) * 2)) == 7.0


def test_randint_with_an_empty_range_raises_runtime_error():
    with pytest.raises(RuntimeError):
        torch.randint(5, 2, (1,))
    with pytest.raises(RuntimeError, match="randint") as info:
        ember.randint(5, 2, (1,))
    assert isinstance(info.value, (EmberError, ValueError))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_float_only_ops_on_integers_raise_not_implemented_error(name):
    with pytest.raises(NotImplementedError):
        getattr(torch, name)(torch.tensor([1, 2]), 0)
    with pytest.raises(NotImplementedError, match=name) as info:
        getattr(ember, name)(ember.tensor([1, 2]), 0)
    assert isinstance(info.value, (EmberError, RuntimeError, TypeError))


@pytest.mark.parametrize("name", ["view_as_real", "view_as_complex", "stft", "istft", "polar"])
def test_complex_functions_exist_now(name):
    # (named as missing before complex dtypes; tests/ops/test_complex.py and test_stft.py
    # check their values against PyTorch's)
    assert callable(getattr(ember, name)) and hasattr(torch, name)
