"""nll_loss's and cross_entropy's target dtypes as PyTorch 2.13's: class indices int64, or uint8
for inputs of one or two dimensions, every other dtype refused in PyTorch's words; a target of
the input's shape is cross_entropy's class probabilities, which must be floating and whose
dtype promotes the loss's."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch", reason="PyTorch (the reference) is not installed")

DTYPES = ["int64", "uint8", "int32", "int16", "int8", "bool", "float16", "float32", "float64"]
SHAPES = [(4,), (3, 4), (2, 4, 3), (2, 4, 2, 3)]


def _outcome(lib, fn, x, target):
    F = lib.nn.functional
    xt, tt = lib.tensor(x, requires_grad=True), lib.tensor(target)
    try:
        loss = getattr(F, fn)(
            xt if fn == "cross_entropy" else xt.log_softmax(min(1, x.ndim - 1)), tt
        )
    except RuntimeError as exc:
        return "error", str(exc).split("\n")[0]
    loss.backward()
    return loss.detach().numpy(), xt.grad.numpy()


@pytest.mark.parametrize("fn", ["nll_loss", "cross_entropy"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_class_index_dtypes(fn, shape, dtype):
    r = np.random.default_rng(len(shape))
    x = r.standard_normal(shape).astype(np.float32)
    target_shape = () if len(shape) == 1 else (shape[0], *shape[2:])
    target = r.integers(0, 2, target_shape).astype(dtype)
    want = _outcome(torch, fn, x, target)
    got = _outcome(ember, fn, x, target)
    if want[0] == "error":
        assert got[0] == "error", f"PyTorch refuses: {want[1]}"
        assert got[1].endswith(want[1]), (got[1], want[1])  # (ember's names the op first)
    else:
        assert got[0] != "error", got[1]
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 4, 3)], ids=str)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int64", "uint8"])
@pytest.mark.parametrize("input_dtype", ["float32", "float64"])
def test_targets_of_the_inputs_shape_are_probabilities(shape, dtype, input_dtype):
    r = np.random.default_rng(7)
    x = r.standard_normal(shape).astype(input_dtype)
    target = (
        r.uniform(0, 1, shape).astype(dtype) if dtype.startswith("float") else np.ones(shape, dtype)
    )
    want = _outcome(torch, "cross_entropy", x, target)
    got = _outcome(ember, "cross_entropy", x, target)
    if want[0] == "error":
        assert got[0] == "error" and got[1].endswith(want[1]), (got[1], want[1])
        return
    assert got[0] != "error", got[1]
    assert got[0].dtype == want[0].dtype  # (float64 probabilities: a float64 loss)
    tol = 2e-3 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(got[0], want[0], rtol=tol, atol=tol)
    np.testing.assert_allclose(got[1], want[1], rtol=tol, atol=tol)


def test_nll_loss_refuses_multi_target_first():
    x = np.zeros((3, 4), np.float32)
    for target in (np.zeros((3, 4), np.float32), np.zeros((3, 4), np.int64)):
        with pytest.raises(
            RuntimeError, match="0D or 1D target tensor expected, multi-target not supported"
        ):
            ember.nn.functional.nll_loss(ember.tensor(x), ember.tensor(target))
        with pytest.raises(
            RuntimeError, match="0D or 1D target tensor expected, multi-target not supported"
        ):
            torch.nn.functional.nll_loss(torch.tensor(x), torch.tensor(target))
