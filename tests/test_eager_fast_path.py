"""The eager path's shortcuts keep PyTorch's semantics (issue 20: the per-op overhead was cut by
restructuring the dispatch, the tape's nodes and the backward engine, never by skipping a rule).

Each test compares with PyTorch the cases the shortcuts touch: gradients buffered per output of
a multi-output node (hooks and ``retain_grad`` on an output past the first, a backward started
from it, ``autograd.grad`` capturing it), a VJP told which inputs need a gradient, the complex
and float8 refusals now made where the eager mode types the operands (and before autocast's
casts), the shape rules fed the operands' types, and a node that keeps no operand it does not
save."""

import weakref

import numpy as np
import pytest
import torch

import ember
from ember.errors import ComplexDTypeError, KernelDTypeError
from ember.ops._util import half_precision
from ember.types import TensorType

_X = np.array([[0.5, -1.25, 2.0], [3.0, 0.75, -0.5]])


def _pair(requires_grad=True):
    return (
        ember.tensor(_X, requires_grad=requires_grad),
        torch.tensor(_X, requires_grad=requires_grad),
    )


def _close(e, t):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_hooks_and_retain_grad_on_a_second_output():
    results = []
    for lib, x in zip((ember, torch), _pair()):
        first, second = lib.split(x * 2.0, [1, 1], dim=0)
        seen = []
        second.register_hook(lambda g, seen=seen: seen.append(g.clone()) or g * 3.0)
        second.retain_grad()
        ((first * 5.0).sum() + (second * second).sum()).backward()
        results.append((x.grad, second.grad, seen[0]))
    for e, t in zip(*results):
        _close(e, t)


def test_backward_from_a_second_output_and_grad_capturing_one():
    ex, tx = _pair()
    eo, to = ex.max(dim=1), tx.max(dim=1)
    _close(eo.values, to.values)
    # a root at output 0 of max, and autograd.grad reaching the second piece of an unbind
    (eg,) = ember.autograd.grad(ember.unbind(ex * ex, 0)[1].sum(), ex)
    (tg,) = torch.autograd.grad(torch.unbind(tx * tx, 0)[1].sum(), tx)
    _close(eg, tg)
    eo.values.sum().backward()
    to.values.sum().backward()
    _close(ex.grad, tx.grad)


def test_a_vjp_told_which_inputs_need_gradients():
    ex, tx = _pair()
    ec, tc = _pair(requires_grad=False)
    for lib, x, c in ((ember, ex, ec), (torch, tx, tc)):
        y = lib.tanh(x * c) / (c + 4.0) - x
        y.backward(lib.ones_like(y))
    _close(ex.grad, tx.grad)
    assert ec.grad is None and tc.grad is None


def test_multi_path_gradients_accumulate_before_the_producer_runs():
    ex, tx = _pair()
    for lib, x in ((ember, ex), (torch, tx)):
        h = x.sin()
        y = h
        for k in range(5):
            y = y * h + k
        lib.cat([y, h, h.transpose(0, 1).reshape(2, 3)], 1).sum().backward()
    _close(ex.grad, tx.grad)


def test_complex_and_float8_refusals_name_the_op_eagerly_and_under_autocast():
    z = ember.tensor(np.array([1 + 2j, 3 - 1j], dtype=np.complex64))
    with pytest.raises(ComplexDTypeError, match="relu"):
        ember.relu(z)
    f8 = ember.tensor(np.array([1.0, 2.0], dtype=np.float32)).to(ember.float8_e4m3fn)
    with pytest.raises(KernelDTypeError, match="exp"):
        ember.exp(f8)
    with ember.autocast("cpu"):  # matmul's autocast rule sees it first, and leaves it be
        with pytest.raises(KernelDTypeError, match="matmul"):
            ember.matmul(f8.reshape(1, 2), f8.reshape(2, 1))
    # while a graph is built, the registry refuses (the eager mode never sees the call)
    with pytest.raises(ComplexDTypeError, match="relu"):
        ember.function(lambda t: ember.relu(t))(z)


def test_shape_rules_see_types_and_errors_name_shapes_as_tuples():
    a = ember.tensor(np.ones((2, 3), np.float32))
    b = ember.tensor(np.ones((4, 3), np.float32))
    with pytest.raises(ember.errors.ShapeError, match=r"\(2, 3\).*\(4, 3\)"):
        a + b
    with pytest.raises(ember.errors.ShapeError, match="does not match the others"):
        ember.cat([a, b.reshape(3, 4)], 0)
    np.testing.assert_array_equal(ember.cat([a, b], 0).numpy(), np.ones((6, 3)))


def test_a_node_keeps_only_what_its_vjp_reads():
    x = ember.tensor(np.ones(4), requires_grad=True)
    other = ember.tensor(np.arange(4.0))
    y = x + other  # add's gradient reads neither operand
    ref = weakref.ref(other)
    del other  # (freed at once: nothing else holds it, no cycle to wait for)
    assert ref() is None
    assert all(type(t) is TensorType for t in (*y.grad_fn.in_types, *y.grad_fn.out_types))
    assert y.grad_fn.needs_input_grad == (True, False)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(4))


def test_transpose_of_a_0d_tensor_and_of_one_axis_with_itself():
    for dims in ((0, 0), (-1, 0)):
        _close(ember.tensor(2.5).transpose(*dims), torch.tensor(2.5).transpose(*dims))
    x = ember.tensor(_X)
    assert x.transpose(1, -1) is not x  # (a new view, as PyTorch's)
    with pytest.raises(ember.errors.AxisError):
        x.transpose(0, 2)


def test_half_precision_of_arrays_dtypes_and_types():
    for dtype in (ember.float16, ember.bfloat16):
        assert half_precision(np.zeros(1, dtype.np))
        assert half_precision(TensorType((1,), dtype))
    for dtype in (ember.float32, ember.float64, ember.int64, ember.complex64):
        assert not half_precision(np.zeros(1, dtype.np))
        assert not half_precision(TensorType((1,), dtype))
