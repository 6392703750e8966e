"""PyTorch's keyword spellings of operands (``input=``, ``other=``, ``input1=``),
varargs dims and placement arguments, on ``ember.*``, ``ember.nn.functional.*`` and Tensor
methods, against PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

X = np.random.default_rng(0).standard_normal((2, 3))
W = np.random.default_rng(1).standard_normal((4, 3))
B3 = np.random.default_rng(2).standard_normal((5, 3, 3))


def _calls(lib):
    F = lib.nn.functional
    x, w = lib.tensor(X), lib.tensor(W)
    return [
        F.linear(input=x, weight=w, bias=w[:, 0]),
        F.pad(input=x, pad=(1, 2), mode="constant", value=-1.0),
        F.one_hot(input=lib.tensor([0, 2]), num_classes=4),
        F.bilinear(input1=x, input2=x, weight=lib.tensor(B3)),
        F.sigmoid(input=x),
        lib.add(input=x, other=x, alpha=2),
        lib.sub(x, other=w[:2], alpha=0.5),
        lib.matmul(input=x, other=w.T),
        lib.sum(input=x, dim=1),
        lib.exp(input=x),
        lib.clamp(input=x, min=-0.5),
        lib.where(x > 0, x, 0.0),
        x.flip(0, 1),
        lib.flip(x, dims=(1,)),
        x.clone(memory_format=lib.contiguous_format),
    ]


def test_pytorch_keyword_spellings():
    got, want = _calls(ember), _calls(torch)
    assert len(got) == len(want)
    for k, (g, t) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12, err_msg=f"call {k}")
        assert g.numpy().dtype == t.numpy().dtype, f"call {k}"


def test_keyword_aliases_keep_identity_and_refuse_both_spellings():
    # one public object per function, whichever namespace shows it
    assert ember.sigmoid is ember.nn.functional.sigmoid
    assert ember.pad is ember.nn.functional.pad
    assert ember.nn.functional.linear.__name__ == "linear"
    with pytest.raises(TypeError, match="both input= and x="):
        ember.exp(input=ember.ones(2), x=ember.ones(2))
    with pytest.raises(TypeError, match="memory_format"):
        ember.ones(2).clone(memory_format="channels_last")


def _second_operand_calls(lib):
    x, w, v = lib.tensor(X), lib.tensor(W), lib.tensor(X[0])
    b = lib.tensor(B3)
    return [
        x.add(other=x, alpha=2),
        x.mul(other=x),
        x.sub(other=x * 3, alpha=0.5),
        x.div(other=x + 4, rounding_mode="floor"),
        x.pow(exponent=2),
        lib.pow(x, exponent=3),
        x.matmul(other=w.T),
        x.mm(mat2=w.T),
        lib.mm(x, mat2=w.T),
        b.bmm(mat2=b),
        lib.bmm(b, mat2=b),
        v.dot(tensor=v),
        lib.dot(v, tensor=v),
        lib.mv(w, vec=v),
        w.mv(vec=v),
        lib.outer(v, vec2=v),
        lib.where(x > 0, input=x, other=-x),
        x.clone().add_(other=x, alpha=3),
        x.clone().pow_(exponent=2),
    ]


def test_pytorch_second_operand_keywords():
    """Tensor methods and functions with PyTorch's names for the second operand (other=,
    exponent=, mat2=, tensor=, vec=, vec2=)."""
    got, want = _second_operand_calls(ember), _second_operand_calls(torch)
    assert len(got) == len(want)
    for k, (g, t) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12, err_msg=f"call {k}")
        assert g.numpy().dtype == t.numpy().dtype, f"call {k}"
    with pytest.raises(TypeError, match="both other= and y="):
        ember.ones(2).add(ember.ones(2), other=ember.ones(2), y=ember.ones(2))


def test_top_level_margin_ranking_loss_broadcasts_as_aten():
    """``torch.margin_ranking_loss`` (aten's op) broadcasts its operands; F's wants one rank
    (PyTorch's autocast test lists call it with (8, 8) inputs and an (8,) target)."""
    import torch

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 8, 8))
    y = np.sign(rng.standard_normal(8))
    for reduction in (0, 1, 2):
        want = torch.margin_ranking_loss(
            torch.tensor(a), torch.tensor(b), torch.tensor(y), 0.1, reduction
        )
        got = ember.margin_ranking_loss(
            ember.tensor(a), ember.tensor(b), ember.tensor(y), 0.1, reduction
        )
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    with pytest.raises(ember.EmberError, match="same number of dimensions"):
        ember.nn.functional.margin_ranking_loss(ember.tensor(a), ember.tensor(b), ember.tensor(y))


NUMPY_SPELLINGS = [
    "sort", "argsort", "softmax", "log_softmax", "median", "nanmedian", "nansum", "nanmean",
    "cummax", "cummin", "unsqueeze", "unbind", "diff", "var_mean", "std_mean", "mode",
    "logcumsumexp", "count_nonzero", "aminmax", "trapezoid", "sum", "mean", "amax",
]  # fmt: skip


@pytest.mark.parametrize("name", NUMPY_SPELLINGS)
def test_numpy_spellings_of_dim_and_keepdim(name):
    """PyTorch's argument parser takes NumPy's ``axis`` for ``dim`` and ``keepdims`` for
    ``keepdim`` (numpy_compatibility_arg_names), in functions and methods alike."""
    import torch

    x = np.random.default_rng(0).standard_normal((3, 4))

    def flat(result):
        items = result if isinstance(result, (tuple, list)) else [result]
        return [np.asarray(r.detach().numpy() if hasattr(r, "detach") else r) for r in items]

    for kwargs in ({"axis": 1}, {"axis": 1, "keepdims": True}):
        try:
            want = getattr(torch, name)(torch.tensor(x), **kwargs)
        except (TypeError, RuntimeError):  # (a function PyTorch gives no keepdim)
            continue
        gots = [getattr(ember, name)(ember.tensor(x), **kwargs)]
        if hasattr(torch.Tensor, name):  # (the method, where PyTorch has one)
            gots.append(getattr(ember.tensor(x), name)(**kwargs))
        for got in gots:
            for a, b in zip(flat(got), flat(want), strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-12, err_msg=f"{name} {kwargs}")
