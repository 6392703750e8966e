"""PyTorch's ``torch.jit`` and ``torch.compiler`` names on ember (programs and libraries call
them), ``ember.dtype``, ``broadcast_shapes`` and ``randint_like``; compared with torch where it
computes something."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn

torch = pytest.importorskip("torch")


def test_jit_trace_captures_and_runs_other_shapes():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    traced = ember.jit.trace(model, ember.ones(1, 3))
    x = ember.randn(5, 3)
    np.testing.assert_allclose(traced(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)

    seen = []

    def fn(x, y):
        seen.append(ember.jit.is_tracing())
        return x * y + 1

    f = ember.jit.trace(fn, (ember.ones(2), ember.ones(2)))
    assert seen == [True]  # captured while the example ran
    np.testing.assert_array_equal(f(ember.ones(3), ember.full((3,), 2.0)).numpy(), [3.0] * 3)
    assert not ember.jit.is_tracing() and not ember.jit.is_scripting()


def test_jit_freeze_and_optimize_for_inference():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    tmodel = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(), torch.nn.Linear(4, 2)
    )
    model.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tmodel.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    with pytest.raises(RuntimeError, match="eval mode"):
        ember.jit.freeze(ember.jit.script(model))  # training mode, as PyTorch's refusal
    with pytest.raises(RuntimeError, match="eval mode"):
        torch.jit.freeze(torch.jit.script(tmodel))
    want = torch.jit.freeze(torch.jit.script(tmodel.eval()))(torch.tensor(x)).numpy()
    frozen = ember.jit.freeze(ember.jit.script(model.eval()), preserved_attrs=["training"])
    np.testing.assert_allclose(frozen(ember.tensor(x)).detach().numpy(), want, rtol=1e-5, atol=1e-6)
    traced = ember.jit.trace(model, ember.tensor(x))
    np.testing.assert_allclose(
        ember.jit.freeze(traced)(ember.tensor(x)).detach().numpy(), want, rtol=1e-5
    )
    model.train()
    fast = ember.jit.optimize_for_inference(ember.jit.script(model))  # put in eval mode
    assert not model.training
    np.testing.assert_allclose(fast(ember.tensor(x)).detach().numpy(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ember.EmberError, match="preserved_attrs"):
        ember.jit.freeze(model, preserved_attrs=["no_such"])


def test_jit_script_converts_control_flow(tmp_path):
    @ember.jit.script
    def absolute_sum(x):
        if x.sum() > 0:
            y = x.sum()
        else:
            y = -x.sum()
        return y

    assert absolute_sum(ember.tensor([-1.0, -2.0])).item() == 3.0
    g = ember.function(absolute_sum)  # one graph, both branches inside
    assert g(ember.tensor([1.0, 2.0])).item() == 3.0
    assert g(ember.tensor([-4.0, 1.0])).item() == 3.0


def test_jit_decorators_and_fork():
    class M(nn.Module):
        @ember.jit.ignore
        def helper(self, x):
            return x + 1

        @ember.jit.export
        def other(self, x):
            return x * 2

        @ember.jit.unused
        def unused(self, x):
            return x

        def forward(self, x):
            future = ember.jit.fork(self.helper, x)
            return ember.jit.wait(future) + ember.jit.annotate(ember.Tensor, self.other(x))

    np.testing.assert_array_equal(M()(ember.ones(2)).numpy(), [4.0, 4.0])
    with pytest.raises(AttributeError, match="ember.jit"):
        ember.jit.no_such_thing  # noqa: B018


def test_compiler_names():
    flags = []

    def fn(x):
        flags.append(ember.compiler.is_compiling())
        return ember.compiler.disable(lambda t: t * 2)(x)

    compiled = ember.compiler.compile(fn)
    compiled(ember.ones(2))
    fn(ember.ones(2))
    assert flags == [True, False]
    assert ember.compiler.allow_in_graph(fn) is fn
    assert ember.compiler.reset() is None  # (tests/test_dynamo_names.py: what it empties)


def test_dtype_type_and_printing():
    assert isinstance(ember.float32, ember.dtype) and isinstance(ember.ones(1).dtype, ember.dtype)
    assert str(ember.float32) == str(torch.float32).replace("torch.", "ember.")
    assert f"{ember.int64}" == "ember.int64" and ember.int64.name == "int64"


def test_broadcast_shapes_and_randint_like_as_in_pytorch():
    for shapes in [((3, 1), (1, 4)), (3, (2, 1), ()), ((5, 1, 2), (4, 1))]:
        assert tuple(ember.broadcast_shapes(*shapes)) == tuple(torch.broadcast_shapes(*shapes))
    with pytest.raises(RuntimeError, match="broadcast"):
        ember.broadcast_shapes((2, 3), (4, 3))
    x = ember.ones(50, 4)
    r = ember.randint_like(x, 3)
    assert r.dtype == ember.float32 and r.shape == x.shape
    assert set(np.unique(r.numpy())) <= {0.0, 1.0, 2.0}
    r = ember.randint_like(ember.ones(200, dtype=ember.int32), -2, 2)
    assert r.dtype == ember.int32 and set(np.unique(r.numpy())) == {-2, -1, 0, 1}


def test_jit_save_and_load_round_trip_a_trace_through_onnx(tmp_path):
    """A traced module saved and loaded (as ONNX: any batch size, weights as Parameters),
    to a path and to a stream; a traced function; a TorchScript archive refused by name."""
    import io

    pytest.importorskip("onnx")
    ember.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
        nn.Linear(4 * 8 * 8, 5),
    ).eval()  # fmt: skip
    traced = ember.jit.trace(model, ember.randn(2, 3, 8, 8))
    ember.jit.save(traced, str(tmp_path / "m.pt"))
    loaded = ember.jit.load(str(tmp_path / "m.pt"))
    x = ember.randn(5, 3, 8, 8)  # (another batch size than the trace's)
    np.testing.assert_allclose(loaded(x).detach().numpy(), model(x).detach().numpy(), atol=1e-5)
    assert len(list(loaded.parameters())) >= 4
    buffer = io.BytesIO()
    ember.jit.save(traced, buffer)
    buffer.seek(0)
    assert tuple(ember.jit.load(buffer)(x).shape) == (5, 5)

    f = ember.jit.trace(lambda a, b: a * b + 1, (ember.ones(3), ember.ones(3)))
    ember.jit.save(f, str(tmp_path / "f.pt"))
    out = ember.jit.load(str(tmp_path / "f.pt"))(ember.ones(4), ember.full((4,), 2.0))
    np.testing.assert_array_equal(out.detach().numpy(), [3.0] * 4)

    torch.jit.save(torch.jit.trace(torch.nn.Linear(2, 2), torch.ones(1, 2)), tmp_path / "ts.pt")
    with pytest.raises(ember.EmberError, match="TorchScript archive"):
        ember.jit.load(str(tmp_path / "ts.pt"))
    with pytest.raises(ember.EmberError, match="ember.jit.trace"):
        ember.jit.save(ember.jit.script(model), str(tmp_path / "s.pt"))


def test_ao_quantization_and_autograd_grad_mode_paths():
    from ember.ao.quantization import quantize_dynamic

    model = ember.nn.Sequential(ember.nn.Linear(4, 3))
    quantized = quantize_dynamic(model, {ember.nn.Linear})
    x = ember.randn(2, 4)
    np.testing.assert_allclose(quantized(x).detach().numpy(), model(x).detach().numpy(), atol=0.05)
    assert ember.ao.quantization.quantize is ember.quantization.quantize
    with ember.autograd.grad_mode.no_grad():
        assert not ember.is_grad_enabled()
    # PyTorch's spelling of the call: dtype=torch.qint8 (its values kept as int8)
    spelled = quantize_dynamic(model, {ember.nn.Linear}, dtype=ember.qint8)
    np.testing.assert_array_equal(spelled(x).detach().numpy(), quantized(x).detach().numpy())
    assert ember.qint8 != ember.int8 and str(ember.quint8) == "ember.quint8"
