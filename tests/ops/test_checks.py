"""Run-time checks a graph keeps (ops/checks.py): ``_assert_async`` as PyTorch's, and
``clip_grad_norm_(error_if_nonfinite=True)`` inside ``ember.function``: the check runs when the
graph runs, names the user's line, and a failing one leaves the parameters as they were."""

import numpy as np
import pytest

import ember
from ember.ops.checks import CheckFailedError, check

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("value", [1.0, -2, True, 0.5 + 0j])
def test_assert_async_passes_a_nonzero_value_as_pytorch(value):
    torch._assert_async(torch.tensor(value))
    ember._assert_async(ember.tensor(value))


@pytest.mark.parametrize("value", [0.0, 0, False])
def test_assert_async_raises_on_zero_as_pytorch(value):
    with pytest.raises(RuntimeError, match="Expected Tensor with single nonzero value"):
        torch._assert_async(torch.tensor(value))
    with pytest.raises(RuntimeError, match="Expected Tensor with single nonzero value"):
        ember._assert_async(ember.tensor(value))
    with pytest.raises(CheckFailedError, match="my message"):
        ember._assert_async(ember.tensor(value), "my message")


def test_assert_async_takes_one_element():
    with pytest.raises(ember.EmberError, match="single-element"):
        ember._assert_async(ember.ones(2))


@pytest.mark.parametrize("executor", ["auto", "codegen", "arena"])
def test_a_check_in_a_graph_runs_with_the_graph(executor):
    @ember.function(executor=executor)
    def positive_sqrt(x):
        ember._assert_async((x >= 0).all(), "negative input")  # (its result unused: kept)
        return x.sqrt()

    np.testing.assert_allclose(positive_sqrt(ember.tensor([4.0, 9.0])).numpy(), [2.0, 3.0])
    with pytest.raises(CheckFailedError, match="negative input") as info:
        positive_sqrt(ember.tensor([4.0, -9.0]))
    assert f"{__file__}:" in str(info.value)  # the line that made the check
    assert any(n.op.name == "check" for n in positive_sqrt.graph.nodes if n.kind == "call")


def _clipped_step(error_if_nonfinite):
    ember.manual_seed(0)
    model = ember.nn.Linear(4, 2)
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        norm = ember.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
        opt.step()
        return norm

    return model, opt, step


def test_clip_grad_norm_error_if_nonfinite_in_a_captured_step():
    model, opt, step = _clipped_step(True)
    eager_model, _, eager_step = _clipped_step(True)
    compiled = ember.function(step)
    x = ember.randn(3, 4)
    for _ in range(2):
        np.testing.assert_allclose(compiled(x).numpy(), eager_step(x).numpy(), rtol=1e-5)
    np.testing.assert_allclose(
        model.weight.detach().numpy(), eager_model.weight.detach().numpy(), rtol=1e-5
    )
    traces = compiled.stats.traces
    before = [p.detach().numpy().copy() for p in model.parameters()]
    momentum = [opt.state[p]["momentum_buffer"].numpy().copy() for p in model.parameters()]
    with pytest.raises(RuntimeError, match="total norm of order 2.0 .* is non-finite"):
        compiled(x * float("inf"))
    with pytest.raises(RuntimeError, match="total norm of order 2.0 .* is non-finite"):
        eager_step(x * float("inf"))
    for p, b, m in zip(model.parameters(), before, momentum):  # the failed step changed nothing
        np.testing.assert_array_equal(p.detach().numpy(), b)
        np.testing.assert_array_equal(opt.state[p]["momentum_buffer"].numpy(), m)
    compiled(x)  # and the step goes on, with no retrace
    assert compiled.stats.traces == traces


def test_a_check_is_refused_on_onnx_export(tmp_path):
    pytest.importorskip("onnx")

    def f(x):
        return check(x, ember.isfinite(x), "finite") * 2

    with pytest.raises(ember.EmberError, match="check"):
        ember.onnx.export(f, tmp_path / "f.onnx", ember.ones(3))
    assert not (tmp_path / "f.onnx").exists()
