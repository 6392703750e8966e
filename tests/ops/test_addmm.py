"""``addmm``, a primitive defined in ops/addmm.py only (kernel, VJP, cost, shape rule, workspace,
C step and an epilogue rule reusing linear's row blocks): PyTorch's values and gradients for
every broadcast of ``input`` and for beta and alpha, the errors, and, at O3, a following ReLU
or GELU taken as its epilogue with nothing else knowing about it. Its samples run in the
conformance harness too (samples_linalg.py)."""

import numpy as np
import pytest

import ember
from ember.errors import DTypeError, ShapeError
from ember.graph import interpreter
from ember.kernels import ccompile
from ember.tools import memory

F = ember.nn.functional
torch = pytest.importorskip("torch")
needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _arrays(shapes, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _close(got, want, dtype, k):
    """Within the rounding of a K-term product in another summation order (BLAS's blocking):
    a few eps of the sum of the magnitudes of the terms, |alpha| |mat1| @ |mat2| + |beta input|,
    which ``want`` (a float64 reference) is not far from."""
    tol = 4 * k * np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("input_shape", [(7, 5), (5,), (7, 1), (1, 5), (), (1, 1)])
@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, -2.0), (0.0, 3.0)])
def test_values_and_gradients_equal_pytorchs(dtype, input_shape, beta, alpha):
    arrays = _arrays([input_shape, (7, 40), (40, 5), (7, 5)], dtype)
    ours = [ember.tensor(a, requires_grad=True) for a in arrays[:3]]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays[:3]]
    got = ember.addmm(*ours, beta=beta, alpha=alpha)
    want = torch.addmm(*theirs, beta=beta, alpha=alpha)
    assert got.dtype == ours[0].dtype and tuple(got.shape) == tuple(want.shape)
    _close(got.detach().numpy(), want.detach().numpy(), dtype, 40)
    got.backward(ember.tensor(arrays[3]))
    want.backward(torch.tensor(arrays[3]))
    for mine, peer in zip(ours, theirs):
        assert mine.grad.shape == tuple(peer.grad.shape)
        _close(mine.grad.numpy(), peer.grad.numpy(), dtype, 7)


def test_beta_zero_ignores_the_input_and_the_method_form_agrees():
    i, a, b = _arrays([(3, 2), (3, 4), (4, 2)])
    i[0, 0], i[1, 1] = np.nan, np.inf
    got = ember.addmm(ember.tensor(i), ember.tensor(a), ember.tensor(b), beta=0)
    assert np.isfinite(got.numpy()).all()
    method = ember.tensor(i).addmm(ember.tensor(a), ember.tensor(b), beta=0)
    np.testing.assert_array_equal(method.numpy(), got.numpy())


def test_integer_tensors_take_integer_scalars():
    i, a, b = (
        np.arange(n, dtype=np.int64).reshape(s) for n, s in ((2, (2,)), (6, (3, 2)), (4, (2, 2)))
    )
    got = ember.addmm(ember.tensor(i), ember.tensor(a), ember.tensor(b), beta=2, alpha=3)
    want = torch.addmm(torch.tensor(i), torch.tensor(a), torch.tensor(b), beta=2, alpha=3)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    # a float alpha or beta is truncated for integer tensors, as PyTorch does
    got = ember.addmm(ember.tensor(i), ember.tensor(a), ember.tensor(b), beta=1.7, alpha=2.5)
    want = torch.addmm(torch.tensor(i), torch.tensor(a), torch.tensor(b), beta=1.7, alpha=2.5)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_errors_name_the_shapes():
    x, a, b = (ember.randn(*s) for s in ((3, 2), (3, 4), (4, 2)))
    with pytest.raises(ShapeError, match="cannot be multiplied"):
        ember.addmm(x, a, ember.randn(3, 2))
    with pytest.raises(ShapeError, match="cannot be multiplied"):
        ember.addmm(x, ember.randn(2, 3, 4), b)
    with pytest.raises(ShapeError, match="addmm"):
        ember.addmm(ember.randn(4, 2), a, b)  # 4 rows against the product's 3
    with pytest.raises(ShapeError, match="does not broadcast"):
        ember.addmm(ember.randn(1, 3, 2), a, b)
    with pytest.raises(DTypeError):
        ember.addmm(x > 0, a > 0, b > 0)


def _epilogue_nodes(compiled):
    return [n for n in compiled.graph.nodes if n.kind == "call"]


@needs_cc
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_following_activation_is_its_epilogue_at_o3(activation, dtype):
    def f(i, a, b):
        return getattr(F, activation)(ember.addmm(i, a, b, beta=0.5, alpha=2.0))

    arrays = _arrays([(64,), (48, 32), (32, 64)], dtype)
    compiled = ember.function(f)  # O3
    got = compiled(*map(ember.tensor, arrays)).numpy()
    (node,) = _epilogue_nodes(compiled)
    assert node.op.name == "fused_epilogue" and node.attrs["producer"].name == "addmm"
    assert node.attrs["producer_attrs"] == (("alpha", 2.0), ("beta", 0.5))
    traced = ember.trace(f, *map(ember.tensor, arrays), opt_level=0).graph
    want = interpreter.run(traced, arrays)[0]  # the unfused reference kernels
    _close(got, want, dtype, 32)
    peer = getattr(torch.nn.functional, activation)(
        torch.addmm(*map(torch.tensor, arrays), beta=0.5, alpha=2.0)
    )
    _close(got, peer.numpy(), dtype, 32)


@needs_cc
@pytest.mark.parametrize("input_shape", [(2100, 1024), (2100, 1), (1024,)])
def test_an_epilogue_over_several_blocks_reads_the_input_by_its_rows(input_shape):
    # 2100 rows of 1024 float32 are two blocks of kernels/cepilogue.py (8 MiB each)
    def f(i, a, b):
        return F.relu(ember.addmm(i, a, b, beta=-0.5)) * 3.0

    arrays = _arrays([input_shape, (2100, 16), (16, 1024)])
    compiled = ember.function(f)
    got = compiled(*map(ember.tensor, arrays)).numpy()  # (conftest checks the fused call too)
    assert [n.op.name for n in _epilogue_nodes(compiled)] == ["fused_epilogue"]
    want = np.maximum(arrays[1] @ arrays[2] - 0.5 * arrays[0], 0) * 3
    _close(got, want, np.float32, 16)


@needs_cc
def test_the_c_graph_runner_has_a_step_for_a_biased_product_and_its_relu():
    from ember.runtime import cgraph
    from ember.runtime.codegen import compile_graph

    arrays = _arrays([(64,), (48, 32), (32, 64)])
    tensors = list(map(ember.tensor, arrays))
    for fn, op in (
        (lambda i, a, b: ember.addmm(i, a, b), "addmm"),
        (lambda i, a, b: F.relu(ember.addmm(i, a, b)), "fused_epilogue"),  # the step's ReLU
    ):
        graph = ember.trace(fn, *tensors, opt_level=3).graph
        assert [n.op.name for n in graph.nodes if n.kind == "call"] == [op]
        steps = cgraph.c_steps(graph)
        assert steps is not None, str(graph)
        (got,) = cgraph.CGraphProgram(graph, steps)(*arrays)
        (want,) = compile_graph(graph)(*arrays)
        _close(got, want, np.float32, 32)
    scaled = ember.trace(lambda i, a, b: ember.addmm(i, a, b, alpha=2.0), *tensors).graph
    assert cgraph.c_steps(scaled) is None  # the step adds a bias: beta = alpha = 1 only


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
def test_the_memory_plan_counts_the_scaled_input(dtype, bare_executors):
    def f(i, a, b):
        return ember.addmm(i, a, b, beta=0.5)

    rng = np.random.default_rng(0)
    inputs = [
        ember.tensor(rng.standard_normal(s), dtype=dtype)
        for s in ((256, 512), (256, 384), (384, 512))
    ]
    report = memory(f, *inputs)
    measured = report.measure()
    assert abs(report.peak_bytes - measured) <= 0.05 * measured, (report.peak_bytes, measured)
