"""In-place ops whose operand partly overlaps the written tensor (ops/_overlap.py): refused
when called where PyTorch 2.13 refuses them, computed where it computes them (full overlap,
strided operands, products into their input, fills, disjoint regions)."""

import numpy as np
import pytest

import ember
from ember.errors import EmberError

torch = pytest.importorskip("torch")

# each case: (name, fn(lib, y)) with y a fresh 3x3 float tensor 0..8
CASES = [
    ("mul_t", lambda lib, y: y.mul_(y.t())),
    ("add_t", lambda lib, y: y.add_(y.t(), alpha=2)),
    ("sub_shift", lambda lib, y: y[1:].sub_(y[:-1])),
    ("add_row_broadcast", lambda lib, y: y.add_(y[0])),
    ("add_0d_element", lambda lib, y: y.add_(y[0, 0])),
    ("mul_first_row", lambda lib, y: y.mul_(y[:1])),
    ("add_flat_prefix", lambda lib, y: y.add_(y.view(9)[:3])),
    ("atan2_t", lambda lib, y: y.atan2_(y.t())),
    ("copysign_t", lambda lib, y: y.copysign_(y.t())),
    ("addcmul_t", lambda lib, y: y.addcmul_(y.t(), y, value=0.5)),
    ("addcdiv_t", lambda lib, y: y.addcdiv_(y, y.t() + 1)),
    ("lerp_end_t", lambda lib, y: y.lerp_(y.t(), 0.5)),
    ("lerp_weight_t", lambda lib, y: y.lerp_(lib.zeros(3, 3), y.t())),
    ("clamp_min_t", lambda lib, y: y.clamp_(min=y.t())),
    ("copy_t", lambda lib, y: y.copy_(y.t())),
    ("copy_row", lambda lib, y: y.copy_(y[0])),
    ("setitem_t", lambda lib, y: y.__setitem__(slice(None), y.t())),
    ("setitem_shift", lambda lib, y: y.__setitem__(slice(1, None), y[:2])),
    ("setitem_advanced", lambda lib, y: y.__setitem__(lib.tensor([0, 1]), y[1:])),
    ("index_put_row", lambda lib, y: y.index_put_((lib.tensor([0]),), y[1])),
    ("index_add_row", lambda lib, y: y.index_add_(0, lib.tensor([0]), y[1:2])),
    ("put_element", lambda lib, y: y.put_(lib.tensor([0]), y[1, :1])),
    ("add_out_t", lambda lib, y: lib.add(y, 1, out=y.t())),
    ("neg_out_t", lambda lib, y: lib.neg(y.t(), out=y)),
    ("clamp_out_t", lambda lib, y: lib.clamp(y, 0, 4, out=y.t())),
    ("cumsum_out_t", lambda lib, y: lib.cumsum(y, 0, out=y.t())),
    ("cat_out_shift", lambda lib, y: lib.cat([y[:1], y[1:2]], out=y[1:])),
    ("sort_out_t", lambda lib, y: lib.sort(y, out=(y.t(), lib.empty(3, 3, dtype=lib.int64)))),
    # allowed by PyTorch (where PyTorch's kernel reads what it has already written, the
    # values are its loop order's: only that ember computes is checked, ALLOWED_ANY_VALUES)
    ("add_self", lambda lib, y: y.add_(y)),
    ("mul_same_view", lambda lib, y: y[:, 0].mul_(y[:, 0])),
    ("add_strided_column", lambda lib, y: y.add_(y[:, :1])),
    ("add_columns", lambda lib, y: y[:, 1].add_(y[:, 0])),
    ("add_expanded_row", lambda lib, y: y.add_(y[0].expand(3, 3))),
    ("add_reshaped_self", lambda lib, y: y.view(9).add_(y.reshape(9))),
    ("copy_disjoint_rows", lambda lib, y: y[0].copy_(y[1])),
    ("setitem_row", lambda lib, y: y.__setitem__(0, y[1])),
    ("setitem_0d", lambda lib, y: y.__setitem__(slice(None), y[0, 0])),
    ("fill_0d", lambda lib, y: y.fill_(y[0, 0])),
    ("masked_fill_0d", lambda lib, y: y.masked_fill_(y > 3, y[0, 0])),
    ("index_fill_0d", lambda lib, y: y.index_fill_(1, lib.tensor([1]), y[0, 1])),
    ("masked_scatter_t", lambda lib, y: y.masked_scatter_(y > 3, y.t())),
    ("addmm_t", lambda lib, y: y.addmm_(y.t(), y)),
    ("addmv_row", lambda lib, y: y[0].addmv_(y, y[1])),
    ("baddbmm_t", lambda lib, y: y[None].baddbmm_(y[None], y.t()[None])),
    ("exp_out_self", lambda lib, y: lib.exp(y, out=y)),
    ("mm_out_t", lambda lib, y: lib.mm(y, y, out=y.t())),
    ("sum_out_row", lambda lib, y: lib.sum(y, 0, out=y[0])),
]

ALLOWED_ANY_VALUES = {
    "add_strided_column",
    "add_expanded_row",
    "addmm_t",
    "baddbmm_t",
    "mm_out_t",
    "sum_out_row",
}


def _run(lib, fn, dtype):
    y = lib.arange(9, dtype=dtype).reshape(3, 3)
    try:
        fn(lib, y)
    except RuntimeError as error:
        return error
    return y.tolist()


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_partial_overlap_refused_as_pytorch(name, fn):
    expected = _run(torch, fn, torch.float32)
    got = _run(ember, fn, ember.float32)
    if isinstance(expected, Exception):
        assert isinstance(got, EmberError), f"{name}: PyTorch refuses, ember gave {got}"
        assert "refer to a single memory location" in str(got)
    else:
        assert not isinstance(got, Exception), f"{name}: ember refused: {got}"
        if name not in ALLOWED_ANY_VALUES:
            np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_integer_and_bool_in_place_refused_too():
    for lib in (torch, ember):
        y = lib.arange(9).reshape(3, 3)
        with pytest.raises(RuntimeError, match="single memory location"):
            y.add_(y.t())
    y = ember.arange(9).reshape(3, 3)
    with pytest.raises(EmberError, match="single memory location"):
        y.bitwise_and_(y.t())
    m = ember.arange(9).reshape(3, 3) > 3
    with pytest.raises(EmberError, match="single memory location"):
        m.logical_and_(m.t())


def test_refused_while_recording_and_value_unchanged():
    x = ember.arange(9.0).reshape(3, 3).requires_grad_()
    y = x * 1.0
    with pytest.raises(EmberError, match="single memory location"):
        y.mul_(y.t())
    assert y.tolist() == (x * 1.0).tolist()  # (refused before anything was written)
