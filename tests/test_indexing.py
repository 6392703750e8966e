"""Behaviour of indexing beyond the conformance samples: view semantics, setitem and in-place
writes with autograd, errors, and property tests of indexing against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember

from .ops.harness import TORCH_MISSING, torch

needs_torch = pytest.mark.skipif(torch is None, reason=TORCH_MISSING)


def _x(*shape, dtype=np.float64):
    return ember.tensor(np.arange(np.prod(shape), dtype=dtype).reshape(shape))


# --------------------------------------------------------------------------------- views


def test_basic_indexing_is_a_view_sharing_memory_and_version():
    x = _x(3, 4)
    y = x[1:, ::-2]
    assert np.shares_memory(y.numpy(), x.numpy())
    x.add_(100)
    np.testing.assert_array_equal(y.numpy(), x.numpy()[1:, ::-2])
    assert y._version == x._version == 1
    y.mul_(0)  # writes through the view reach x
    assert (x.numpy()[1:, 3] == 0).all() and (x.numpy()[0] == np.arange(4) + 100).all()
    assert x._version == 2


def test_single_element_index_is_a_0d_view():
    x = _x(2, 3)
    y = x[1, 2]
    assert y.shape == () and np.shares_memory(y.numpy(), x.numpy())
    x[1, 2] = 7.0
    assert y.item() == 7.0


def test_advanced_indexing_copies():
    x = _x(3, 4)
    y = x[[0, 2]]
    assert not np.shares_memory(y.numpy(), x.numpy())
    z = x[x > 5]
    assert not np.shares_memory(z.numpy(), x.numpy())
    np.testing.assert_array_equal(z.numpy(), np.arange(6, 12))


def test_setitem_writes_in_place_and_views_see_it():
    x = _x(3, 4)
    row = x[1]
    x[1, 1:3] = ember.tensor([-1.0, -2.0])
    x[:, 0] = 9  # a Python int into a float tensor
    x[x > 10] = 0.5  # mask
    x[[0, 0], [3, 3]] = -5.0
    expected = np.arange(12.0).reshape(3, 4)
    expected[1, 1:3] = [-1, -2]
    expected[:, 0] = 9
    expected[expected > 10] = 0.5
    expected[[0, 0], [3, 3]] = -5
    np.testing.assert_array_equal(x.numpy(), expected)
    np.testing.assert_array_equal(row.numpy(), expected[1])
    assert x.dtype is ember.float64


def test_setitem_casts_the_value_to_the_tensor_dtype():
    x = ember.zeros(3, dtype=ember.int64)
    x[1] = 2.7  # truncated like PyTorch
    assert x.dtype is ember.int64 and x.tolist() == [0, 2, 0]
    f = ember.zeros(2, dtype=ember.float32)
    f[0] = ember.tensor(1.5, dtype=ember.float64)
    assert f.dtype is ember.float32 and f.tolist() == [1.5, 0.0]


# ------------------------------------------------------------------------- autograd and setitem


@needs_torch
def test_setitem_on_a_non_leaf_gives_correct_gradients():
    rng = np.random.default_rng(0)
    a0, b0, c0 = rng.standard_normal((3, 4)), rng.standard_normal(2), rng.standard_normal((3, 4))

    def run(lib, a, b):
        y = a * 2
        y[0, 1:3] = b  # overwrites part of y; b flows in
        y[y > 1] = 0.0  # a mask computed from y itself
        return (y * lib.tensor(c0)).sum()

    a, b = ember.tensor(a0, requires_grad=True), ember.tensor(b0, requires_grad=True)
    run(ember, a, b).backward()
    ta = torch.tensor(a0, requires_grad=True)
    tb = torch.tensor(b0, requires_grad=True)
    run(torch, ta, tb).backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy())


def test_setitem_bumps_the_version_checked_by_backward():
    a = ember.tensor(np.ones((2, 2)), requires_grad=True)
    b = a * 1
    c = b * b  # saves b
    b[0] = 3.0
    with pytest.raises(ember.AutogradError, match="mul"):
        c.sum().backward()


def test_setitem_on_a_leaf_that_requires_grad_is_refused():
    a = ember.zeros(3, requires_grad=True)
    with pytest.raises(ember.AutogradError, match="leaf"):
        a[0] = 1.0
    with ember.no_grad():
        a[0] = 1.0
    assert a.tolist() == [1.0, 0.0, 0.0]


def test_repeated_indices_accumulate_gradients():
    a = ember.tensor(np.zeros(4), requires_grad=True)
    (a[[1, 1, 3, 1]] * ember.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert a.grad.tolist() == [0.0, 7.0, 0.0, 3.0]
    w = ember.tensor(np.zeros((3, 2)), requires_grad=True)
    ember.index_select(w, 0, ember.tensor([2, 2, 0])).sum().backward()
    assert w.grad.tolist() == [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]


def test_index_put_accumulate_sums_repeats():
    x = ember.zeros(3)
    out = ember.index_put(x, ember.tensor([0, 0, 2]), ember.tensor([1.0, 2.0, 5.0]), True)
    assert out.tolist() == [3.0, 0.0, 5.0]
    x.index_put_((ember.tensor([1]),), ember.tensor(4.0))
    assert x.tolist() == [0.0, 4.0, 0.0]


def test_masked_fill_inplace_and_gradient():
    x = ember.tensor([1.0, -2.0, 3.0])
    x.masked_fill_(x < 0, 0.0)
    assert x.tolist() == [1.0, 0.0, 3.0]
    a = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = ember.tensor(5.0, requires_grad=True)
    (
        a.masked_fill(ember.tensor([True, False, True]), v) * ember.tensor([1.0, 2.0, 3.0])
    ).sum().backward()
    assert a.grad.tolist() == [0.0, 2.0, 0.0] and v.grad.item() == 4.0


def test_integer_and_bool_inputs():
    x = _x(4, dtype=np.int32)
    assert x[ember.tensor([3, 0], dtype=ember.int32)].tolist() == [3, 0]
    assert x[np.array([True, False, True, False])].tolist() == [0, 2]
    assert x[True].shape == (1, 4) and x[False].shape == (0, 4)
    assert x[[]].shape == (0,)
    assert ember.nonzero(x).tolist() == [[1], [2], [3]]
    assert [t.tolist() for t in ember.nonzero(_x(2, 2), as_tuple=True)] == [[0, 1, 1], [1, 0, 1]]


def test_one_hot_is_int64_and_checks_classes():
    out = ember.one_hot(ember.tensor([2, 0]))
    assert out.dtype is ember.int64 and out.tolist() == [[0, 0, 1], [1, 0, 0]]
    with pytest.raises(IndexError, match="one_hot"):
        ember.one_hot(ember.tensor([3]), 3)
    with pytest.raises(IndexError, match="one_hot"):
        ember.one_hot(ember.tensor([-1, 0]))


# ------------------------------------------------------------------------------------ errors


def test_out_of_range_int_names_the_op_and_shape():
    x = _x(3, 4)
    with pytest.raises(IndexError, match=r"getitem.*index 5.*size 4.*\(3, 4\)") as info:
        x[0, 5]
    assert isinstance(info.value, ember.ShapeError)
    assert "test_indexing.py" in str(info.value)
    with pytest.raises(IndexError, match=r"-4.*size 3"):
        x[-4]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 1, 2]
    with pytest.raises(IndexError, match="single Ellipsis"):
        x[..., 0, ...]


def test_out_of_range_index_tensor_names_the_shape():
    x = _x(3, 4)
    with pytest.raises(IndexError, match=r"index.*7.*\(3, 4\)"):
        x[ember.tensor([0, 7])]
    with pytest.raises(IndexError, match=r"gather.*\(3, 4\)"):
        ember.gather(x, 1, ember.tensor([[4]]))
    with pytest.raises(IndexError, match=r"scatter_add.*\(3, 4\)"):
        ember.scatter_add(x, 0, ember.tensor([[3]]), ember.ones(1, 1, dtype=ember.float64))


def test_shape_mismatches_name_the_op_and_shapes():
    x = _x(3, 4)
    with pytest.raises(ember.ShapeError, match=r"getitem.*mask of shape \(4,\).*\(3, 4\)"):
        x[ember.tensor([True, False, True, True])]
    with pytest.raises(ember.ShapeError, match=r"index_put.*shape \(3,\).*\(2,\)"):
        x[0, :2] = ember.ones(3, dtype=ember.float64)
    with pytest.raises(ember.ShapeError, match=r"\(2,\).*\(3,\).*cannot be broadcast"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(ember.ShapeError, match=r"gather.*\(2,\).*\(3, 4\)"):
        ember.gather(x, 0, ember.tensor([0, 1]))
    with pytest.raises(ember.ShapeError, match=r"masked_fill.*\(2, 4\).*\(3, 4\)"):
        x.masked_fill(ember.ones(2, 4, dtype=ember.bool), 0.0)
    with pytest.raises(ember.ShapeError, match=r"index_select.*1-D"):
        ember.index_select(x, 0, ember.tensor([[0]]))


def test_bad_index_types():
    x = _x(3)
    with pytest.raises(TypeError, match="valid indices"):
        x[1.5]
    with pytest.raises(TypeError, match="integer or bool"):
        x[ember.tensor([0.0])]
    with pytest.raises(ValueError, match="step cannot be zero"):
        x[::0]


# ----------------------------------------------------------------------- properties vs NumPy

_SHAPE = st.lists(st.integers(1, 4), min_size=1, max_size=3)


@st.composite
def _basic_index(draw):
    shape = draw(_SHAPE)
    items = []
    for n in shape[: draw(st.integers(0, len(shape)))]:
        kind = draw(st.sampled_from(["int", "slice", "none"]))
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            bound = st.none() | st.integers(-n - 2, n + 2)
            step = draw(st.none() | st.integers(-3, 3).filter(bool))
            items.append(slice(draw(bound), draw(bound), step))
        else:
            items.append(None)
            items.append(slice(None))
    if draw(st.booleans()):  # at the end it covers the dimensions not yet indexed
        items.append(Ellipsis)
    return shape, tuple(items)


@settings(max_examples=150, deadline=None)
@given(_basic_index())
def test_basic_indexing_matches_numpy(case):
    shape, index = case
    a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    x = ember.tensor(a, requires_grad=True)
    y = x[index]
    np.testing.assert_array_equal(y.detach().numpy(), a[index])
    y.sum().backward()  # each selected element once: the gradient counts selections
    expected = np.zeros_like(a)
    expected[index] += 1
    np.testing.assert_array_equal(x.grad.numpy(), expected)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_one_advanced_index_matches_numpy(data):
    shape = data.draw(_SHAPE)
    axis = data.draw(st.integers(0, len(shape) - 1))
    n = shape[axis]
    idx = np.array(data.draw(st.lists(st.integers(-n, n - 1), max_size=5)), dtype=np.int64)
    index = (slice(None),) * axis + (idx,)
    a = np.random.default_rng(0).standard_normal(shape)
    x = ember.tensor(a, requires_grad=True)
    y = x[index]
    np.testing.assert_array_equal(y.detach().numpy(), a[index])
    y.sum().backward()
    expected = np.zeros_like(a)
    np.add.at(expected, index, 1.0)
    np.testing.assert_allclose(x.grad.numpy(), expected)


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_setitem_matches_numpy(data):
    shape, index = data.draw(_basic_index())
    a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    target_shape = a[index].shape
    value_shape = tuple(data.draw(st.sampled_from([1, s])) for s in target_shape)
    value = -1.0 - np.arange(np.prod(value_shape)).reshape(value_shape)
    x = ember.tensor(a.copy())
    x[index] = ember.tensor(value)
    a[index] = value
    np.testing.assert_array_equal(x.numpy(), a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_large_scatter_adds_match_numpy_add_at(dtype, axis):
    """Large enough for the sparse-matrix kernel; repeated and negative indices accumulate."""
    rng = np.random.default_rng(axis)
    shape = [6, 40, 30]
    n = shape[axis]
    idx = rng.integers(-n, n, 300)
    w = ember.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)
    picked = ember.index_select(w, axis, ember.tensor(idx))
    cot = rng.standard_normal(picked.shape).astype(dtype)
    (picked * ember.tensor(cot)).sum().backward()
    expected = np.zeros(shape, dtype)
    np.add.at(expected, (slice(None),) * axis + (idx,), cot)
    assert w.grad.dtype == dtype and w.grad.numpy().flags.c_contiguous
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-5, atol=1e-4)

    index = rng.integers(0, n, [s if d != axis else 50 for d, s in enumerate(shape)])
    src = rng.standard_normal(index.shape).astype(dtype)
    out = ember.scatter_add(ember.zeros(*shape, dtype=w.dtype), axis, ember.tensor(index), src)
    expected = np.zeros(shape, dtype)
    coords = list(np.meshgrid(*[np.arange(s) for s in index.shape], indexing="ij"))
    coords[axis] = index
    np.add.at(expected, tuple(coords), src)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-4)


@needs_torch
@pytest.mark.parametrize(
    "mask_kind, value_shape, accumulate",
    [
        ("elements", None, False),
        ("rows", (3,), False),
        ("elements", (), True),
        ("rows", None, True),
    ],
)
def test_masked_setitem_is_a_select_captured_too(mask_kind, value_shape, accumulate):
    """x[mask] = v with v broadcast over what the mask leaves has a static shape: eager and
    ember.function give PyTorch's values and gradients (``scores[mask] = -inf``)."""
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((4, 3))
    m0 = x0 > 0.3 if mask_kind == "elements" else x0[:, 0] > 0
    v0 = 5.0 if value_shape is None else rng.standard_normal(value_shape)

    def run(lib, x, v):
        y = x * 1
        y.index_put_((lib.tensor(m0),), lib.as_tensor(v, dtype=y.dtype), accumulate=accumulate)
        (y * y).sum().backward()
        return y

    def inputs(lib):
        v = v0 if value_shape is None else lib.tensor(v0, requires_grad=True)
        return lib.tensor(x0, requires_grad=True), v

    tx, tv = inputs(torch)
    want = run(torch, tx, tv).detach().numpy()
    for captured in (False, True):
        ex, ev = inputs(ember)
        got = (ember.function(lambda x, v: run(ember, x, v)) if captured else
               lambda x, v: run(ember, x, v))(ex, ev)  # fmt: skip
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-12)
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
        if value_shape is not None:
            np.testing.assert_allclose(ev.grad.numpy(), tv.grad.numpy(), rtol=1e-12)


def test_basic_indexing_of_a_symbolic_size():
    """Full and prefix slices and indices of a dimension whose size is symbolic (an input
    signature's None) are recorded, with their gradients; so are indices from the end (N - k,
    refused before symbolic sizes took sums: onnx50)."""
    spec = [ember.TensorSpec((None, 3), ember.float32)]
    cases = [
        lambda x: x[:, 0],
        lambda x: x[0],
        lambda x: x[..., 1:],
        lambda x: x.t()[1],
        lambda x: x.narrow(1, 0, 2)[:2],
        lambda x: x.unbind(1)[2],
        lambda x: x[-1],
        lambda x: x[1:-1],
    ]
    for fn in cases:

        def step(x, fn=fn):
            y = fn(x)
            (y * y).sum().backward()
            return y

        captured = ember.function(step, input_signature=spec)
        for n in (4, 6):
            x = ember.tensor(np.random.default_rng(n).standard_normal((n, 3)), dtype=ember.float32)
            a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
            np.testing.assert_allclose(
                captured(a).detach().numpy(), step(b).detach().numpy(), rtol=1e-6
            )
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)


@pytest.mark.skipif(torch is None, reason=TORCH_MISSING)
def test_one_hot_with_num_classes_is_captured():
    classes = np.array([2, 0, 3])
    f = ember.function(lambda t: ember.nn.functional.one_hot(t, 5).float() * 2)
    want = torch.nn.functional.one_hot(torch.tensor(classes), 5).float() * 2
    np.testing.assert_array_equal(f(ember.tensor(classes)).numpy(), want.numpy())


@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x: x[x > 0], "getitem"),
        (lambda x: ember.masked_select(x, x > 0), "getitem"),
        (lambda x: x.nonzero(), "nonzero"),
        (lambda x: ember.argwhere(x), "nonzero"),
        (lambda x: ember.bincount((x > 0).long()), "bincount"),
    ],
)
def test_data_dependent_sizes_under_capture_name_the_op_and_the_alternative(fn, op):
    want = rf"^{op}: the size of the result .*or call it outside"
    with pytest.raises(ember.TraceError, match=want) as info:
        ember.function(fn)(ember.tensor(np.array([1.0, -2.0, 3.0])))
    assert info.value.op == op and "test_indexing.py" in info.value.location
