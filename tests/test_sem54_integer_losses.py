"""Losses PyTorch computes on integer tensors (margin ranking, cosine embedding, triplet margin,
pairwise distance, Poisson NLL): their integer terms in the integer dtype first, wrapping as
PyTorch 2.13's, then promoted by the float margin or eps; and the losses that refuse integers
refused in both."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

INT_DTYPES = ["uint8", "int8", "int16", "int64"]
A = [[1, 100, 3], [20, 30, 40]]
B = [[120, 2, 7], [9, 90, 1]]


def _losses(lib, dtype):
    F = lib.nn.functional
    d = getattr(lib, dtype)
    a, b = lib.tensor(A, dtype=d), lib.tensor(B, dtype=d)
    sign = lib.tensor([1, -1]) if dtype != "uint8" else lib.tensor([1, 0], dtype=d)
    return {
        "margin_ranking_int_target": F.margin_ranking_loss(
            a[0], b[0], lib.tensor([1, 1, 1], dtype=d), reduction="none"
        ),
        "margin_ranking_float_target": F.margin_ranking_loss(
            a[0], b[0], lib.tensor([1.0, -1.0, 1.0]), reduction="none"
        ),
        "margin_ranking_int_margin": F.margin_ranking_loss(
            a[1], b[1], lib.tensor([1, 1, 1], dtype=d), margin=0
        ),
        "cosine_embedding": F.cosine_embedding_loss(a, b, sign.long(), reduction="none"),
        "triplet_margin": F.triplet_margin_loss(a, b, a, reduction="none"),
        "triplet_margin_swap": F.triplet_margin_loss(a, b, b.flip(0), swap=True, p=1),
        "triplet_with_distance": F.triplet_margin_with_distance_loss(a, b, a, reduction="none"),
        "pairwise_distance": F.pairwise_distance(a, b),
        "pairwise_distance_int_eps": F.pairwise_distance(a, b, eps=0),
        "poisson_nll_no_log": F.poisson_nll_loss(a, b, log_input=False, reduction="none"),
    }


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_terms_wrap_as_pytorch(dtype):
    expected, got = _losses(torch, dtype), _losses(ember, dtype)
    for name, want in expected.items():
        have = got[name]
        assert str(have.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], name
        np.testing.assert_allclose(have.numpy(), want.numpy(), rtol=1e-5, err_msg=name)


@pytest.mark.parametrize("name", ["l1_loss", "mse_loss", "huber_loss", "smooth_l1_loss"])
def test_elementwise_losses_refuse_integer_inputs(name):
    for lib in (torch, ember):
        a = lib.tensor([1, 200, 3], dtype=lib.uint8)
        with pytest.raises(RuntimeError):
            getattr(lib.nn.functional, name)(a, a)
        # an integer target with a float input: promoted, as in PyTorch
    a_t, a_e = torch.tensor([1.0, 2.0, 3.0]), ember.tensor([1.0, 2.0, 3.0])
    t_t = torch.tensor([250, 2, 7], dtype=torch.uint8)
    t_e = ember.tensor([250, 2, 7], dtype=ember.uint8)
    want = getattr(torch.nn.functional, name)(a_t, t_t)
    have = getattr(ember.nn.functional, name)(a_e, t_e)
    np.testing.assert_allclose(have.numpy(), want.numpy(), rtol=1e-6)
