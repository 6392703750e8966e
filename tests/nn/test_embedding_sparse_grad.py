"""``F.embedding(sparse=True)``: the weight's gradient is a sparse COO tensor, as PyTorch's, and
the optimizers take it or refuse it as PyTorch's do (functional/_embedding_sparse.py)."""

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as F
from ember import optim
from ember.errors import EmberError
from ember.ops.sparse_tensor import SparseTensor

IDX = np.array([[1, 2], [1, 4]])
W0 = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)


def _pair():
    return ember.tensor(W0, requires_grad=True), torch.tensor(W0, requires_grad=True)


def _same_sparse(e, t):
    assert isinstance(e, SparseTensor) and t.layout == torch.sparse_coo
    assert e.is_coalesced() == t.is_coalesced()
    np.testing.assert_array_equal(e._indices().numpy(), t._indices().numpy())
    np.testing.assert_allclose(e._values().numpy(), t._values().numpy(), rtol=1e-6)


def test_gradient_is_sparse_uncoalesced_without_padding_rows():
    ew, tw = _pair()
    for lib, w in ((ember, ew), (torch, tw)):
        out = lib.nn.functional.embedding(lib.tensor(IDX), w, padding_idx=4, sparse=True)
        (out * lib.tensor(np.arange(12.0, dtype=np.float32).reshape(2, 2, 3))).sum().backward()
    _same_sparse(ew.grad, tw.grad)
    # a second backward puts its entries beside the first's (uncoalesced), as PyTorch's
    for lib, w in ((ember, ew), (torch, tw)):
        lib.nn.functional.embedding(lib.tensor(IDX), w, sparse=True).sum().backward()
    _same_sparse(ew.grad, tw.grad)
    np.testing.assert_allclose(ew.grad.to_dense().numpy(), tw.grad.to_dense().numpy())


def test_sparse_meets_dense_and_non_leaf_weights():
    ew, tw = _pair()
    for lib, w in ((ember, ew), (torch, tw)):
        out = lib.nn.functional.embedding(lib.tensor(IDX), w, sparse=True)
        (out.sum() + (w * 2).sum()).backward()
    assert type(ew.grad) is ember.Tensor and tw.grad.layout == torch.strided
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy())
    # a non-leaf weight: ember's gradient flows on dense (same values as PyTorch's)
    ew, tw = _pair()
    for lib, w in ((ember, ew), (torch, tw)):
        lib.nn.functional.embedding(lib.tensor(IDX), w * 3, sparse=True).sum().backward()
    np.testing.assert_allclose(ew.grad.to_dense().numpy(), tw.grad.to_dense().numpy())


def test_autograd_grad_and_hooks_see_the_sparse_gradient():
    ew, tw = _pair()
    seen = []
    ew.register_hook(lambda g: seen.append(type(g)))
    (g,) = ember.autograd.grad(F.embedding(ember.tensor(IDX), ew, sparse=True).sum(), ew)
    (tg,) = torch.autograd.grad(
        torch.nn.functional.embedding(torch.tensor(IDX), tw, sparse=True).sum(), tw
    )
    _same_sparse(g, tg)
    F.embedding(ember.tensor(IDX), ew, sparse=True).sum().backward()
    assert seen == [SparseTensor]


def test_scale_grad_by_freq_refused_at_backward_as_pytorch():
    ew, _ = _pair()
    out = F.embedding(ember.tensor(IDX), ew, sparse=True, scale_grad_by_freq=True)
    with pytest.raises(EmberError, match="scale_grad_by_freq not supported with sparse"):
        out.sum().backward()


def test_zero_grad_keeps_an_empty_sparse_gradient():
    e = ember.nn.Embedding(5, 3, sparse=True)
    e(ember.tensor(IDX)).sum().backward()
    opt = optim.SGD(e.parameters(), lr=0.1)
    opt.zero_grad(set_to_none=False)
    assert isinstance(e.weight.grad, SparseTensor) and e.weight.grad._nnz() == 0
    assert e.weight.grad.to_dense().numpy().sum() == 0.0


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1)),
    ("SparseAdam", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, weight_decay=0.1)),
    ("Adam", dict(lr=0.1)),
    ("AdamW", dict(lr=0.1)),
    ("RMSprop", dict(lr=0.1)),
]


def _train(lib, name, kwargs, capture=False):
    e = lib.nn.Embedding(5, 3, sparse=True)
    with lib.no_grad():
        e.weight.copy_(lib.tensor(W0))
    opt = getattr(lib.optim, name)(e.parameters(), **kwargs)

    def step(i):
        opt.zero_grad()
        e(i).pow(2).sum().backward()
        opt.step()

    if capture:
        step = ember.function(step)
    try:
        for _ in range(3):
            step(lib.tensor(IDX))
    except (RuntimeError, EmberError) as err:
        return str(err)
    return e.weight.detach().numpy()


@pytest.mark.parametrize("name,kwargs", CASES, ids=str)
def test_optimizers_take_or_refuse_sparse_gradients_as_pytorch(name, kwargs):
    want, got = _train(torch, name, kwargs), _train(ember, name, kwargs)
    if isinstance(want, str):
        assert isinstance(got, str) and want in got
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["SGD", "Adagrad", "SparseAdam"])
def test_captured_step_computes_the_dense_equivalent(name):
    want = _train(torch, name, dict(lr=0.1))
    np.testing.assert_allclose(_train(ember, name, dict(lr=0.1), True), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs", [dict(mode="mean"), dict(mode="sum", padding_idx=2), dict(mode="mean", padding_idx=0)]
)
def test_embedding_bag_sparse_gradient_matches_pytorch(kwargs):
    grads = []
    for lib in (ember, torch):
        e = lib.nn.EmbeddingBag(5, 3, sparse=True, **kwargs)
        with lib.no_grad():
            e.weight.copy_(lib.tensor(W0))
        out = e(lib.tensor([[0, 2, 1], [2, 2, 3]]))
        (out * lib.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))).sum().backward()
        grads.append(e.weight.grad)
    _same_sparse(*grads)


def test_embedding_bag_max_mode_refuses_sparse_as_pytorch():
    with pytest.raises(ValueError, match="max mode does not support sparse weights"):
        ember.nn.EmbeddingBag(5, 3, mode="max", sparse=True)(ember.tensor([[0, 1]]))
