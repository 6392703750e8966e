"""ember.trace: the captured graph computes what eager computes; data-dependent Python fails
loudly at the user's line; Python-constant control flow is baked in."""

import numpy as np
import pytest

import ember
from ember import models, nn


def _encoder_layer():
    return nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True)


CASES = {
    "mlp": (lambda: models.mlp(784, 64, 10), (8, 784)),
    "cnn": (lambda: models.cnn(1, 28, 10), (4, 1, 28, 28)),
    "encoder": (_encoder_layer, (2, 5, 16)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_trace_equals_eager_on_both_executors(name):
    build, shape = CASES[name]
    ember.manual_seed(0)
    model = build()
    x = ember.randn(*shape)
    expected = model(x).detach().numpy()
    codegen = ember.trace(model, x)
    interpreted = ember.trace(model, x, executor="interpreter")
    np.testing.assert_allclose(codegen(x).detach().numpy(), expected, rtol=1e-6, atol=1e-6)
    # the interpreter runs the NumPy reference kernels, generated code ember's C ones where
    # they apply (GEMM, convolutions, fused loops): equal to rounding
    np.testing.assert_allclose(
        codegen(x).detach().numpy(), interpreted(x).detach().numpy(), rtol=1e-6, atol=1e-6
    )
    codegen.graph.verify()
    assert "def " in codegen.code


def test_captured_parameters_are_read_at_every_call():
    model = nn.Linear(3, 2)
    x = ember.randn(4, 3)
    f = ember.trace(model, x)
    with ember.no_grad():
        model.weight.mul_(2.0)
    np.testing.assert_allclose(f(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    # the parameters require grad: the joint graph also takes the output's cotangent
    assert [v.name for v in f.graph.inputs] == ["input", "weight", "bias", "grad_0"]
    assert [v.name for v in f.graphs["forward"].inputs] == ["input", "weight", "bias"]


def test_data_dependent_if_raises_trace_error_at_the_users_line():
    def relu_or_negate(x):
        if x.sum() > 0:  # data-dependent
            return x
        return -x

    with pytest.raises(ember.TraceError) as info:
        ember.trace(relu_or_negate, ember.randn(3))
    line = relu_or_negate.__code__.co_firstlineno + 1
    assert f"{__file__}:{line}" in str(info.value)
    assert "ember.where" in str(info.value)


@pytest.mark.parametrize(
    "use",
    [lambda x: float(x.sum()), lambda x: x.max().item() > 0, lambda x: [1, 2, 3][x.argmax()]],
    ids=["float", "item", "index"],
)
def test_other_uses_of_values_raise(use):
    with pytest.raises(ember.TraceError):
        ember.trace(use, ember.randn(3))


def test_python_constant_branches_are_baked_in():
    def scaled(x, double):
        if double:  # a Python value: fine
            x = x * 2
        for _ in range(3):
            x = x + 1
        return x, x.shape[0]

    x = ember.ones(2)
    f = ember.trace(lambda t: scaled(t, True)[0], x, opt_level=0)  # the graph as traced
    assert f(x).tolist() == [5.0, 5.0]
    assert sum(1 for _ in f.graph.call_nodes()) == 4


def test_wrong_argument_shape_or_dtype_is_named():
    f = ember.trace(lambda x: x * 2, ember.ones(2, 3))
    with pytest.raises(ember.ShapeError, match="expects f32\\[2, 3\\]"):
        f(ember.ones(3, 3))
    with pytest.raises(ember.EmberError, match="dtype"):
        f(ember.ones(2, 3, dtype=ember.float64))


def test_in_place_updates_are_functionalized():
    def f(x):
        y = x * 1.0
        y.add_(1.0)
        y.mul_(3.0)
        return y

    x = ember.arange(3).float()
    traced = ember.trace(f, x)
    assert traced(x).tolist() == [3.0, 6.0, 9.0]
    assert x.tolist() == [0.0, 1.0, 2.0]


def test_attributes_without_a_python_literal_reach_the_generated_code():
    """NaN and the infinities print as ``nan`` and ``inf``, no Python names: the generated code
    passes such attribute values in as objects (here the -inf of an attention mask, also with
    no C compiler, where the fused loop's program runs as NumPy kernels)."""
    from ember.runtime import codegen

    assert not codegen._is_literal(float("-inf")) and not codegen._is_literal(float("nan"))
    assert codegen._is_literal((1.5, -2.0)) and not codegen._is_literal((1.0, float("inf")))
    mask = ember.tensor(np.tril(np.ones((4, 4), bool)))
    x = ember.randn(4, 4)
    traced = ember.trace(lambda m, s: ember.where(m, s, float("-inf")) * 2, mask, x)
    want = np.where(mask.numpy(), x.numpy(), -np.inf) * 2
    np.testing.assert_array_equal(traced(mask, x).numpy(), want)
