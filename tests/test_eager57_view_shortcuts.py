"""Eager shortcuts of stop 57 against PyTorch: a strided reshape's view test kept per layout
(ops/shape.py `_viewable_sizes`), unbind's pieces reshaped without squeeze's public path, the
causal attention mask kept per size (ops/attention.py `causal_keep`), the kept shape-rule
answers of ``where`` and ``index``, the channels-last test's early refusal of a head split's
permuted view (ops/_memory_format.py `preserved`) and equal batches of a batched product
(kernels/cgemm.py). Each checks the values, gradients, node names, views and errors the
slower path gave."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.errors import EmberError, ShapeError
from ember.ops import attention as attention_op

torch = pytest.importorskip("torch")


def _pair(shape, seed=0):
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return ember.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)


# (a layout made from a contiguous tensor, the new shape): views where PyTorch views, copies
# (UnsafeViewBackward0) where it must
RESHAPES = [
    (lambda x: x.t(), (3, 4), (12,)),
    (lambda x: x.t(), (3, 4), (4, 3)),
    (lambda x: x[:, 1:], (3, 4), (9,)),
    (lambda x: x[:, 1:], (3, 4), (3, 3, 1)),
    (lambda x: x.permute(2, 0, 1), (2, 3, 4), (4, 6)),
    (lambda x: x.permute(1, 0, 2), (2, 3, 4), (3, 8)),
    (lambda x: x.transpose(1, 2), (2, 3, 4), (2, 12)),
    (lambda x: x.transpose(1, 2), (2, 3, 1), (2, 3)),
    (lambda x: x[::2], (4, 3), (6,)),
    (lambda x: x[:, :0], (3, 4), (0, 5)),
]


@pytest.mark.parametrize("make, shape, new", RESHAPES)
def test_strided_reshape_views_copies_and_names_as_pytorch(make, shape, new):
    for _ in range(2):  # (the second call answers from the kept layout test)
        ex, tx = _pair(shape)
        es, ts = make(ex), make(tx)
        eo, to = es.reshape(new), ts.reshape(new)
        assert type(eo.grad_fn).__name__ == type(to.grad_fn).__name__
        assert eo._is_view == (to._base is not None)
        np.testing.assert_array_equal(eo.detach().numpy(), to.detach().numpy())
        weights = np.arange(eo.numel(), dtype=np.float32).reshape(new)
        (eo * ember.tensor(weights)).sum().backward()
        (to * torch.tensor(weights)).sum().backward()
        np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())


def test_view_of_an_unviewable_layout_is_refused_every_time():
    x = ember.randn(3, 4).t()
    for _ in range(2):
        with pytest.raises(ShapeError, match=r"strides \(1, 4\)"):
            x.view(12)
    with pytest.raises(RuntimeError):
        torch.randn(3, 4).t().view(12)
    assert x.view(4, 3).shape == (4, 3)  # (its own shape views)


def test_unbind_pieces_values_gradients_names_and_views_as_pytorch():
    ex, tx = _pair((2, 3, 3, 2, 4))
    ep = ex.permute(2, 0, 3, 1, 4)
    tp = tx.permute(2, 0, 3, 1, 4)
    epieces, tpieces = ep.unbind(0), tp.unbind(0)
    assert len(epieces) == len(tpieces) == 3
    for e, t in zip(epieces, tpieces):
        assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride()
        assert type(e.grad_fn).__name__ == "UnbindBackward0" == type(t.grad_fn).__name__
        assert e._is_view and e._vc is ex._vc  # (a view: its base's version counter)
        np.testing.assert_array_equal(e.detach().numpy(), t.detach().numpy())
    (epieces[0] * 2 + epieces[2] * epieces[1]).sum().backward()
    (tpieces[0] * 2 + tpieces[2] * tpieces[1]).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)
    # unbind along the last axis, and along an empty one
    a, b = ember.arange(6.0).reshape(2, 3).unbind(1), torch.arange(6.0).reshape(2, 3).unbind(1)
    for e, t in zip(a, b):
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    assert ember.zeros(0, 3).unbind(0) == ()


def test_unbind_piece_written_in_place_bumps_its_base_and_fails_backward_as_pytorch():
    base = ember.randn(3, 4, requires_grad=True)
    y = base * 1
    pieces = y.unbind(0)
    before = y._version
    with ember.no_grad():
        pieces[1].add_(1.0)
    assert y._version == before + 1
    np.testing.assert_array_equal(pieces[1].detach().numpy(), y[1].detach().numpy())


def _sdpa_pair(shape, seed):
    return [_pair(shape, seed + i) for i in range(3)]


@pytest.mark.parametrize("rows, cols", [(5, 5), (3, 6), (6, 3)])
def test_causal_attention_gradients_as_pytorch_and_the_kept_mask_untouched(rows, cols):
    for seed in (0, 1):  # (the second call takes the kept mask)
        (eq, tq), (ek, tk), (ev, tv) = _sdpa_pair((2, 2, rows, 4), seed)
        ek, tk = _pair((2, 2, cols, 4), seed + 5)
        ev, tv = _pair((2, 2, cols, 3), seed + 7)
        eo = ember.nn.functional.scaled_dot_product_attention(eq, ek, ev, is_causal=True)
        to = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
        np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), atol=1e-5)
        g = np.random.default_rng(seed).standard_normal(tuple(to.shape)).astype(np.float32)
        eo.backward(ember.tensor(g))
        to.backward(torch.tensor(g))
        for e, t in ((eq, tq), (ek, tk), (ev, tv)):
            np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), atol=1e-4, rtol=1e-4)
    keep = attention_op.causal_keep(rows, cols)
    np.testing.assert_array_equal(keep.numpy(), np.tri(rows, cols, dtype=bool))
    assert not keep.numpy().flags.writeable
    with pytest.raises((EmberError, ValueError)):
        keep.fill_(True)  # (a kept mask refuses writes: no later call can see them)
    np.testing.assert_array_equal(
        attention_op.causal_keep(rows, cols).numpy(), np.tri(rows, cols, dtype=bool)
    )


def test_causal_mask_is_recorded_as_ops_while_a_graph_is_built_and_meta_stays_meta():
    q, k, v = (ember.randn(1, 2, 4, 8) for _ in range(3))
    fn = ember.function(
        lambda a, b, c: ember.nn.functional.scaled_dot_product_attention(a, b, c, is_causal=True)
    )
    want = ember.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    np.testing.assert_allclose(fn(q, k, v).numpy(), want.numpy(), atol=1e-6)
    with ember.device("meta"):  # (PyTorch's: CPU operands give a CPU result)
        got = ember.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert not got.is_meta
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    mq = ember.empty(1, 2, 4, 8, device="meta", requires_grad=True)
    out = ember.nn.functional.scaled_dot_product_attention(mq, mq, mq, is_causal=True)
    assert out.is_meta and tuple(out.shape) == (1, 2, 4, 8)
    assert attention_op.causal_keep(3, 3).is_meta is False


def test_where_and_index_refusals_raise_every_time_with_kept_answers():
    x, y = ember.randn(3), ember.randn(3)
    for _ in range(2):
        assert ember.where(x > 0, x, y).shape == (3,)
        with pytest.raises(EmberError, match="bool"):
            ember.where(x, x, y)  # (a float condition)
        with pytest.raises(EmberError):
            ember.where(x > 0, x, ember.randn(4))  # (shapes that do not broadcast)
        table = ember.randn(5, 2)
        assert table[ember.tensor([0, 4])].shape == (2, 2)
        with pytest.raises(EmberError):
            table[ember.tensor([0, 5])]  # (out of range: the kernel's check, every call)
        with pytest.raises(EmberError):
            table[ember.tensor([0.0, 1.0])]  # (a float index)


def test_channels_last_kept_and_permuted_views_row_major_as_pytorch():
    data = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    cases = [
        lambda lib, x: x.to(memory_format=lib.channels_last),
        lambda lib, x: x.permute(0, 2, 1, 3),  # (a head split: channels not innermost)
        lambda lib, x: x.permute(0, 3, 1, 2),
    ]
    for make in cases:
        e = make(ember, ember.tensor(data))
        t = make(torch, torch.tensor(data))
        eo, to = e * 2 + 1, t * 2 + 1
        assert eo.stride() == to.stride(), (eo.stride(), to.stride())
        np.testing.assert_array_equal(eo.numpy(), to.numpy())


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [((4, 2, 24, 32), (4, 2, 32, 24)), ((3, 24, 32), (32, 24)), ((1, 24, 32), (5, 32, 24))],
)
def test_batched_products_with_equal_and_broadcast_batches(a_shape, b_shape):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    got = (ember.tensor(a) @ ember.tensor(b)).numpy()
    want = (torch.tensor(a) @ torch.tensor(b)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    with pytest.raises(EmberError):
        ember.randn(3, 24, 32) @ ember.randn(2, 32, 24)


def test_linear_of_a_sequence_gradients_and_second_order_as_pytorch():
    ex, tx = _pair((2, 3, 4))
    ew, tw = _pair((5, 4), 1)
    eb, tb = _pair((5,), 2)
    for _ in range(2):  # (the second backward takes the product's kept signature)
        for t in (ex, ew, eb, tx, tw, tb):
            t.grad = None
        ember.nn.functional.linear(ex, ew, eb).pow(2).sum().backward()
        torch.nn.functional.linear(tx, tw, tb).pow(2).sum().backward()
        for e, t in ((ex, tx), (ew, tw), (eb, tb)):
            np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)
    (egx,) = ember.autograd.grad(
        ember.nn.functional.linear(ex, ew, eb).pow(2).sum(), ex, create_graph=True
    )
    (tgx,) = torch.autograd.grad(
        torch.nn.functional.linear(tx, tw, tb).pow(2).sum(), tx, create_graph=True
    )
    assert egx.grad_fn is not None
    np.testing.assert_allclose(
        ember.autograd.grad(egx.sum(), ew, retain_graph=True)[0].numpy(),
        torch.autograd.grad(tgx.sum(), tw, retain_graph=True)[0].numpy(),
        rtol=1e-5,
        atol=1e-5,
    )


def test_class_index_targets_refused_every_time():
    logits = ember.randn(4, 3, requires_grad=True)
    for _ in range(2):
        for bad in ([0, 1, 3, 2], [0, -1, 1, 2]):
            with pytest.raises(IndexError):
                ember.nn.functional.cross_entropy(logits, ember.tensor(bad))
        kept = ember.nn.functional.cross_entropy(
            logits, ember.tensor([0, -100, 1, 2]), ignore_index=-100
        )
        want = torch.nn.functional.cross_entropy(
            torch.tensor(logits.detach().numpy()), torch.tensor([0, -100, 1, 2])
        )
        np.testing.assert_allclose(kept.item(), want.item(), rtol=1e-6)
    empty = ember.nn.functional.cross_entropy(
        ember.randn(0, 3), ember.tensor([], dtype=ember.int64), reduction="sum"
    )
    assert empty.item() == 0.0


def test_small_products_of_transposed_operands_are_numpys_in_place_product():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((7, 5)).astype(np.float32)
    b = rng.standard_normal((7, 6)).astype(np.float32)
    c = rng.standard_normal((6, 4)).astype(np.float32)
    got = (ember.tensor(a).t() @ ember.tensor(b)).numpy()  # (a column-major left operand)
    np.testing.assert_array_equal(got, np.matmul(a.T, b))
    got = (ember.tensor(b) @ ember.tensor(c.T.copy()).t()).numpy()  # (column-major right)
    np.testing.assert_array_equal(got, np.matmul(b, c))
    strided = ember.tensor(a)[::2]  # (neither layout: BLAS gets a contiguous copy)
    np.testing.assert_array_equal(
        (strided @ ember.tensor(c[:5])).numpy(), np.matmul(np.ascontiguousarray(a[::2]), c[:5])
    )


def test_basic_indexing_with_kept_answers_refuses_and_differentiates_as_pytorch():
    ex, tx = _pair((3, 4, 5))
    for _ in range(2):  # (the second call answers from the kept shape rule)
        for index in ((slice(None), -1), (1, slice(1, None, 2)), (None, 0), (Ellipsis, 2)):
            eo, to = ex[index], tx[index]
            assert tuple(eo.shape) == tuple(to.shape)
            assert type(eo.grad_fn).__name__ == type(to.grad_fn).__name__
            np.testing.assert_array_equal(eo.detach().numpy(), to.detach().numpy())
            eo.sum().backward()
            to.sum().backward()
        np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())
        with pytest.raises(IndexError):
            ex[3]
        with pytest.raises(IndexError):
            ex[:, :, 5]
