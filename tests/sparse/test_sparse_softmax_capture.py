"""``ember.sparse.softmax`` / ``log_softmax`` inside ``ember.function``: a coalesced sparse
argument is captured (values and gradients as PyTorch's eager ones); an uncoalesced one is
refused with an error naming the op."""

import numpy as np
import pytest
import torch

import ember
from ember.errors import TraceError

IDX = np.array([[0, 0, 1, 2, 2, 1], [0, 2, 1, 0, 3, 3], [1, 0, 2, 2, 1, 0]])
VALS = np.array([1.0, 2.0, -3.0, 4.0, 0.5, 1.5])
SIZE = (3, 4, 3)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_captured_sparse_softmax_matches_pytorch(dim, log):
    name = "log_softmax" if log else "softmax"
    w = np.linspace(-1.0, 1.0, 36).reshape(SIZE)
    tv = torch.tensor(VALS, requires_grad=True)
    ts = torch.sparse_coo_tensor(torch.tensor(IDX), tv, SIZE).coalesce()
    t_out = getattr(torch.sparse, name)(ts, dim).to_dense()
    (t_out * torch.tensor(w)).sum().backward()

    @ember.function
    def f(s, w):
        out = getattr(ember.sparse, name)(s, dim).to_dense()
        return out, (out * w).sum()

    ev = ember.tensor(VALS, requires_grad=True)
    es = ember.sparse_coo_tensor(ember.tensor(IDX), ev, SIZE).coalesce()
    out, loss = f(es, ember.tensor(w))
    assert f.stats.traces == 1  # (captured: a TraceError would have been raised)
    # the unspecified entries are zeros in both to_dense() forms
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12, atol=1e-12)
    loss.backward()
    # (the leaves are the values in the input's order, before coalescing)
    np.testing.assert_allclose(ev.grad.numpy(), tv.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_uncoalesced_argument_is_refused_naming_the_op():
    @ember.function
    def f(s):
        return ember.sparse.softmax(s, 1).to_dense()

    s = ember.sparse_coo_tensor(ember.tensor(IDX), ember.tensor(VALS), SIZE)
    with pytest.raises(TraceError, match="sparse.softmax of an uncoalesced"):
        f(s)
