"""In-place methods: the direct route (one ufunc into the tensor's memory, when no gradient is
recorded) gives exactly what the general route (compute, then copy in) gives."""

import numpy as np
import pytest

import ember

CASES = [
    ("add_", (3, 4), np.float32, lambda: ember.randn(3, 4)),
    ("sub_", (3, 4), np.float32, lambda: ember.randn(4)),  # broadcast operand
    ("mul_", (3, 4), np.float32, lambda: 0.37),  # weak Python scalar keeps float32
    ("div_", (3, 4), np.float64, lambda: ember.randn(3, 1, dtype=ember.float64)),
    ("maximum_", (3, 4), np.float32, lambda: ember.randn(1, 4)),
    ("mul_", (5,), np.int64, lambda: 3),
    ("add_", (2, 2), np.float16, lambda: 1.5),
    ("exp_", (3, 4), np.float32, None),
    ("neg_", (6,), np.int32, None),
    ("sqrt_", (3,), np.float64, None),
]


def _general_route(method, x, arg):
    """What an in-place method means: the out-of-place op, written back in x's dtype."""
    out = getattr(ember, method[:-1])(x, *(() if arg is None else (arg,)))
    return out.numpy().astype(x.numpy().dtype)


@pytest.mark.parametrize("method, shape, dtype, make_arg", CASES, ids=[c[0] for c in CASES])
def test_direct_route_equals_the_general_route(method, shape, dtype, make_arg):
    ember.manual_seed(0)
    base = np.abs(np.random.default_rng(0).standard_normal(shape)) * 3 + 0.5
    x = ember.tensor(base.astype(dtype))
    arg = None if make_arg is None else make_arg()
    if dtype == np.int32 or dtype == np.int64:
        x = ember.tensor(np.arange(int(np.prod(shape))).reshape(shape).astype(dtype))
    expected = _general_route(method, x, arg)
    memory, version = x.numpy(), x._vc[0]
    with ember.no_grad():
        out = getattr(x, method)(*(() if arg is None else (arg,)))
    assert out is x and x.numpy() is memory  # written into the same memory
    assert x._vc[0] == version + 1
    assert x.numpy().dtype == dtype
    np.testing.assert_array_equal(x.numpy(), expected)


def test_views_see_the_write_and_aliasing_is_safe():
    x = ember.arange(6).float()
    view = x[2:]
    with ember.no_grad():
        x.add_(x)
    assert view.tolist() == [4.0, 6.0, 8.0, 10.0]
    x.mul_(x.flip(0))  # overlapping operand: the values read are the old ones
    assert x.tolist() == [0.0, 16.0, 24.0, 24.0, 16.0, 0.0]


def test_general_route_still_refuses_and_records():
    w = ember.ones(3, requires_grad=True)
    with pytest.raises(ember.AutogradError, match="leaf"):
        w.add_(1.0)
    y = w * 2
    y.mul_(3.0)  # recorded: the gradient sees the in-place multiply
    y.sum().backward()
    assert w.grad.tolist() == [6.0, 6.0, 6.0]


def test_promotions_the_target_cannot_hold_are_errors_or_general():
    x = ember.arange(3)  # int64
    with pytest.raises(ember.DTypeError):
        x.mul_(2.5)
    f = ember.ones(3)
    f.add_(ember.ones(3, dtype=ember.float64))  # float64 operand: general route, stays float32
    assert f.dtype == ember.float32 and f.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(ember.EmberError):
        f.add_(ember.ones(2, 3))  # would enlarge the target


torch = pytest.importorskip("torch")


def _through_views(lib):
    """In-place writes through views, each returning the base (PyTorch's CopySlices)."""

    def scaled_slice(w):  # x[:, :2] *= 2: a view's in-place op, then a setitem of it
        h = w * 1.0
        h[:, :2] *= 2.0
        return h

    def flat_view(w):  # the base reads writes made through a reshape and a strided slice
        h = w * 1.0
        v = h.view(-1)
        v[::3] += 1.0
        v.mul_(w.reshape(-1))
        return h

    def into_constant(w):  # a base without history takes the gradient written into it
        out = lib.zeros(3, 4, dtype=w.dtype)
        out[1].add_(w[0])
        out.narrow(1, 0, 2).mul_(2)
        return out * w

    def transposed_row(w):
        h = w * 3
        h.t()[0].sigmoid_()
        return h

    def chained_setitem(w):  # h[0][1:3] = ...: a setitem on a view of h
        h = w.clone()
        h[0][1:3] = w[2, :2] * 5
        return h

    def diagonal_fill(w):
        h = w.clone()
        h.diagonal().zero_()
        return h

    def stale_view(w):  # v is read after its base changed in place: it sees the change
        h = w * 1.0
        v = h[1:]
        h.mul_(w)
        return v * 2

    return [scaled_slice, flat_view, into_constant, transposed_row, chained_setitem,
            diagonal_fill, stale_view]  # fmt: skip


@pytest.mark.parametrize("captured", [False, True], ids=["eager", "function"])
@pytest.mark.parametrize("case", range(len(_through_views(torch))))
def test_inplace_through_views_updates_the_base_as_torch(case, captured):
    w0 = np.random.default_rng(case).standard_normal((3, 4))
    t_fn, e_fn = _through_views(torch)[case], _through_views(ember)[case]
    tw = torch.tensor(w0, requires_grad=True)
    t_out = t_fn(tw)
    cot = np.random.default_rng(10 + case).standard_normal(tuple(t_out.shape))
    (t_out * torch.tensor(cot)).sum().backward()

    def step(w):
        out = e_fn(w)
        (out * ember.tensor(cot)).sum().backward()
        return out

    ew = ember.tensor(w0, requires_grad=True)
    e_out = (ember.function(step) if captured else step)(ew)
    np.testing.assert_allclose(e_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_writes_through_views_inside_a_graph_reach_the_base():
    """Without gradients too: a captured function writes through views as eager code does."""

    def f(x):
        out = ember.zeros(3, 4)
        out[0][1:3] = 5.0
        out.narrow(1, 3, 1).fill_(7.0)
        y = x.clone()
        y.view(-1)[::5] = -1.0
        y.t()[1].mul_(10)
        return out, y

    x = ember.tensor(np.arange(12.0).reshape(3, 4))
    for want, got in zip(f(x), ember.function(f)(x)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert f(x)[0].numpy()[0].tolist() == [0, 5, 5, 7]


def test_views_pickle_and_copy_as_tensors_of_their_own():
    """A view's record of its base stays behind in a pickle or a deep copy (a DataLoader
    worker's ``data[i]``): the copy has memory of its own."""
    import copy
    import pickle

    x = ember.randn(3, 4)
    for copied in (pickle.loads(pickle.dumps(x[0])), copy.deepcopy(x[:, 1])):
        assert copied._view_of is None
        before = x.numpy().copy()
        copied.add_(1.0)
        np.testing.assert_array_equal(x.numpy(), before)


def test_pieces_of_a_split_share_memory_and_refuse_writes_with_history():
    """chunk / split / unbind pieces alias their input (writes reach it, versions are shared),
    and, as PyTorch, an in-place op giving one a history is refused instead of leaving the
    input's gradient silently wrong."""
    w = ember.ones(2, 4, requires_grad=True)
    h = w * 1
    a, _ = h.chunk(2, 1)
    with pytest.raises(ember.AutogradError, match="several views"):
        a.mul_(3)
    np.testing.assert_array_equal(h.detach().numpy(), 1.0)  # refused before writing
    z = ember.zeros(4)
    first, _ = z.chunk(2)
    with pytest.raises(ember.AutogradError, match="several views"):
        first.add_(w[0, :2])
    first.add_(1.0)
    with ember.no_grad():
        h.split([1, 3], 1)[1].mul_(2.0)
    assert z.tolist() == [1.0, 1.0, 0.0, 0.0]
    assert h.detach().numpy()[0].tolist() == [1.0, 2.0, 2.0, 2.0]
    assert h._version == 1
