"""In-place calls whose operands alias the written tensor, against PyTorch 2.13: the indexed
writes (scatter family, index_copy/add/put, advanced-index assignment) and out= of indexed
reads refuse even a full overlap (PyTorch's ``assert_no_overlap``), elementwise in-place ops
allow it; and ``v.copysign_(v)`` differentiates, as PyTorch saves only self and the result."""

from __future__ import annotations

import pytest

import ember

torch = pytest.importorskip("torch")


def _cases(m):
    i = m.zeros(3, 4, dtype=m.int64)
    perm = m.tensor([1, 0, 2])
    return {
        "scatter_": lambda x: x.scatter_(1, i, x),
        "scatter_detached": lambda x: x.scatter_(1, i, x.detach()),
        "scatter_add_": lambda x: x.scatter_add_(1, i, x),
        "scatter_reduce_": lambda x: x.scatter_reduce_(1, i, x, "amax"),
        "index_copy_": lambda x: x.index_copy_(0, perm, x),
        "index_add_": lambda x: x.index_add_(0, perm, x),
        "index_put_": lambda x: x.index_put_((perm,), x),
        "index_put_accumulate": lambda x: x.index_put_((perm,), x, accumulate=True),
        "setitem_advanced": lambda x: x.__setitem__(perm, x),
        "setitem_advanced_0d": lambda x: x.__setitem__(perm, x[0, 0]),
        "setitem_advanced_row": lambda x: x.__setitem__(m.tensor([1, 0]), x[0]),
        "setitem_basic_0d": lambda x: x.__setitem__(0, x[0, 1]),
        "setitem_strided": lambda x: x.__setitem__((slice(None), m.tensor([0, 1])), x[:, 2:]),
        "setitem_clone": lambda x: x.__setitem__(perm, x.clone()),
        "gather_out": lambda x: m.gather(x, 1, i, out=x),
        "index_select_out": lambda x: m.index_select(x, 0, perm, out=x),
        "take_out": lambda x: m.take(x, m.tensor([1, 0]), out=x.view(-1)[:2]),
        "index_fill_": lambda x: x.index_fill_(0, m.tensor([1]), x[0, 0]),
        "copy_": lambda x: x.copy_(x),
        "add_out": lambda x: m.add(x, x, out=x),
        "addcmul_": lambda x: x.addcmul_(x, x),
    }


def _outcome(m, name):
    x = m.arange(12.0).reshape(3, 4)
    try:
        _cases(m)[name](x)
    except RuntimeError as e:
        return "refused", str(e).split("\n")[0]
    return "ok", x.tolist()


@pytest.mark.parametrize("name", list(_cases(torch)))
def test_overlap_refusals_follow_torch(name):
    want, t = _outcome(torch, name)
    got, e = _outcome(ember, name)
    assert got == want, (name, e)
    if want == "ok":
        assert e == t
    else:
        assert "refer to a single memory location" in e and "refer to a single" in t


@pytest.mark.parametrize("module", [torch, ember], ids=["torch", "ember"])
def test_copysign_inplace_with_itself_differentiates(module):
    m = module
    leaf = m.tensor([1.0, -2.0, 0.0, 3.0], requires_grad=True)
    v = leaf * 1.5
    v.copysign_(v)
    (v * m.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    expect = torch.tensor([1.0, -2.0, 0.0, 3.0], requires_grad=True)
    w = expect * 1.5
    w.copysign_(w.detach().clone())
    (w * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert leaf.grad.tolist() == expect.grad.tolist()


def test_copysign_other_written_before_backward():
    got = []
    for m in (torch, ember):
        x = m.tensor([1.0, -2.0, 3.0], requires_grad=True)
        y = m.tensor([-1.0, 1.0, -1.0], requires_grad=True)
        o = y * 1
        z = m.copysign(x * 2, o)
        o.mul_(-1)  # other's value is not needed by the gradient
        z.sum().backward()
        got.append((x.grad.tolist(), y.grad.tolist()))
    assert got[0] == got[1]
