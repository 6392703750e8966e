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
    with pytest.raises(AttributeError, match="ember.save"):
        ember.jit.save  # noqa: B018
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
    with pytest.raises(AttributeError, match="own cache"):
        ember.compiler.reset  # noqa: B018


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
