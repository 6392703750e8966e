"""Regressions of hunt51, each compared with PyTorch 2.13:

* ``p.grad = t`` checks what is assigned, as PyTorch's setter: a tensor (or None) of p's dtype
  and size, never p itself.
* A tensor written into another by scatter, scatter_add, index_add, index_copy, index_put
  (``x[idx] = v`` with an advanced index) must have its dtype (a Python number is cast); a
  basic index, and one bool mask with a one-element value, cast as PyTorch's copy_ and
  masked_fill do. slice_scatter, select_scatter and diagonal_scatter cast their src.
* ``type(y.grad_fn).__name__`` of a copying reshape (UnsafeViewBackward0), sort, topk, roll,
  diagonal, unbind, pad, lerp, addcmul, baddbmm, square, rsub and more is PyTorch's.
* einsum of one operand that only reorders its labels is PyTorch's permuted view.
"""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _outcome(fn, lib):
    """(the exception's PyTorch-side category, or None) and the value when there is none."""
    try:
        value = fn(lib)
    except Exception as exc:  # noqa: BLE001 - the kind is what is compared
        return type(exc), None
    return None, value


def _same_outcome(fn):
    t_exc, t_val = _outcome(fn, torch)
    e_exc, e_val = _outcome(fn, ember)
    if t_exc is not None:
        assert e_exc is not None, f"PyTorch raised {t_exc.__name__}; ember returned {e_val!r}"
        mro = [c for c in t_exc.__mro__ if c.__module__ == "builtins"]
        assert issubclass(e_exc, mro[0]), (e_exc, t_exc)
        assert issubclass(e_exc, ember.EmberError)
        return
    assert e_exc is None, f"ember raised {e_exc.__name__} where PyTorch returned {t_val!r}"
    if isinstance(t_val, torch.Tensor):
        assert str(e_val.dtype).split(".")[-1] == str(t_val.dtype).split(".")[-1]
        np.testing.assert_array_equal(e_val.detach().numpy(), t_val.detach().numpy())


def _assign_grad(grad):
    def fn(lib):
        p = lib.nn.Parameter(lib.ones(3, 4))
        p.grad = grad(lib, p)
        return p.grad

    return fn


@pytest.mark.parametrize(
    "grad",
    [
        lambda lib, p: lib.zeros(4, 3),
        lambda lib, p: lib.zeros(12),
        lambda lib, p: lib.zeros(3, 4, dtype=lib.float64),
        lambda lib, p: lib.zeros(3, 4, dtype=lib.int64),
        lambda lib, p: 3.0,
        lambda lib, p: p,
        lambda lib, p: lib.full((3, 4), 2.0),
        lambda lib, p: None,
    ],
)
def test_assigned_grad_is_checked_as_pytorchs(grad):
    _same_outcome(_assign_grad(grad))


def test_assigned_grad_of_a_trained_model_still_steps():
    """Gradients assigned by hand (a parameter server's, a clipped copy) step as PyTorch's."""
    out = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        model = lib.nn.Linear(3, 2)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        for p in model.parameters():
            p.grad = lib.ones_like(p) * 0.5
        opt.step()
        out.append([p.detach().numpy() for p in model.parameters()])
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a, rtol=1e-6)


_IDX = [0, 2]
_MASK = [True, False, True, False, False]


def _writes(dtype_name):
    def src(lib, n=2):
        return lib.ones(n, dtype=getattr(lib, dtype_name))

    def setitem(index, value):
        def fn(lib):
            x = lib.zeros(5)
            x[index(lib)] = value(lib)
            return x

        return fn

    return {
        "scatter": lambda lib: lib.zeros(5).scatter(0, lib.tensor(_IDX), src(lib)),
        "scatter_": lambda lib: lib.zeros(5).scatter_(0, lib.tensor(_IDX), src(lib)),
        "scatter_add": lambda lib: lib.zeros(5).scatter_add(0, lib.tensor(_IDX), src(lib)),
        "scatter_add_": lambda lib: lib.zeros(5).scatter_add_(0, lib.tensor(_IDX), src(lib)),
        "scatter_reduce": lambda lib: lib.zeros(5).scatter_reduce(
            0, lib.tensor(_IDX), src(lib), "amax"
        ),
        "index_add": lambda lib: lib.zeros(5).index_add(0, lib.tensor(_IDX), src(lib)),
        "index_add_": lambda lib: lib.zeros(5).index_add_(0, lib.tensor(_IDX), src(lib)),
        "index_copy": lambda lib: lib.zeros(5).index_copy(0, lib.tensor(_IDX), src(lib)),
        "index_copy_": lambda lib: lib.zeros(5).index_copy_(0, lib.tensor(_IDX), src(lib)),
        "index_put": lambda lib: lib.zeros(5).index_put((lib.tensor(_IDX),), src(lib)),
        "index_put_acc": lambda lib: lib.zeros(5).index_put_(
            (lib.tensor(_IDX),), src(lib), accumulate=True
        ),
        "masked_scatter": lambda lib: lib.zeros(5).masked_scatter(lib.tensor(_MASK), src(lib)),
        "put_": lambda lib: lib.zeros(5).put_(lib.tensor(_IDX), src(lib)),
        "set_tensor_index": setitem(lambda lib: lib.tensor(_IDX), src),
        "set_list_index": setitem(lambda lib: _IDX, src),
        "set_mask": setitem(lambda lib: lib.tensor(_MASK), src),
        "set_mask_one_value": setitem(lambda lib: lib.tensor(_MASK), lambda lib: src(lib, 1)),
        "set_mask_0d_value": setitem(
            lambda lib: lib.tensor(_MASK), lambda lib: lib.tensor(2, dtype=src(lib).dtype)
        ),
        "set_slice": setitem(lambda lib: slice(0, 2), src),
        "set_int_0d": setitem(lambda lib: 1, lambda lib: lib.tensor(3, dtype=src(lib).dtype)),
        "set_number": setitem(lambda lib: lib.tensor(_IDX), lambda lib: 1.5),
        "slice_scatter": lambda lib: lib.zeros(2, 2).slice_scatter(src(lib).reshape(1, 2), 0, 0, 1),
        "select_scatter": lambda lib: lib.zeros(2, 2).select_scatter(src(lib), 0, 1),
        "diagonal_scatter": lambda lib: lib.zeros(2, 2).diagonal_scatter(src(lib)),
    }


@pytest.mark.parametrize("dtype_name", ["float32", "float64", "int64", "float16", "bool"])
@pytest.mark.parametrize("name", sorted(_writes("float32")))
def test_written_tensors_dtypes_are_checked_as_pytorchs(name, dtype_name):
    _same_outcome(_writes(dtype_name)[name])


def _node_names(lib):
    F = lib.nn.functional
    x = lib.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4), requires_grad=True)
    m = lib.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    cases = {
        "t": m.t(),
        "transpose": x.transpose(0, 1),
        "permute": x.permute(2, 0, 1),
        "torch.permute": lib.permute(x, (2, 0, 1)),
        "reshape_view": x.reshape(6, 4),
        "reshape_copy": x.transpose(0, 1).reshape(-1),
        "flatten_copy": x.transpose(0, 1).flatten(),
        "view": x.view(6, 4),
        "unbind": x.unbind(0)[1],
        "roll": x.roll(1, 0),
        "roll_flat": x.roll(2),
        "diagonal": lib.diagonal(m),
        "rsub_scalar": 1 - x,
        "rsub": lib.rsub(x, x),
        "sort": x.sort()[0],
        "topk": x.topk(2)[0],
        "kthvalue": x.kthvalue(2)[0],
        "logsumexp": x.logsumexp(1),
        "index_select": x.index_select(0, lib.tensor([1])),
        "pad_constant": F.pad(x, (1, 1)),
        "pad_reflect": F.pad(x, (1, 1), mode="reflect"),
        "pad_replicate": F.pad(x, (1, 1), mode="replicate"),
        "baddbmm": lib.baddbmm(x, x, lib.ones(2, 4, 4)),
        "addbmm": lib.addbmm(lib.ones(4, 4), x.transpose(1, 2), x),
        "addcmul": lib.addcmul(x, x, x, value=0.5),
        "addcdiv": lib.addcdiv(x, x, x.exp()),
        "lerp": lib.lerp(x, x * 2, 0.3),
        "lerp_tensor": lib.lerp(x, x * 2, lib.full_like(x, 0.7)),
        "square": x.square(),
        "mish": F.mish(x),
        "repeat_interleave": x.repeat_interleave(2, 0),
        "einsum_permute": lib.einsum("ijk->kji", x),
    }
    return {k: type(v.grad_fn).__name__ for k, v in cases.items()}


def test_grad_fn_names_of_shape_and_composite_ops_are_pytorchs():
    expected, actual = _node_names(torch), _node_names(ember)
    wrong = {k: (actual[k], v) for k, v in expected.items() if actual[k] != v}
    assert not wrong, wrong


def test_einsum_that_reorders_labels_is_a_view_as_pytorchs():
    for eq in ("ij->ji", "abc->cab", "abc->abc", "...ij->...ji"):
        results = []
        for lib in (torch, ember):
            x = lib.tensor(np.arange(24.0).reshape(2, 3, 4) if "c" in eq or "." in eq else [[1.0]])
            x = x if x.ndim == 3 or "." in eq else lib.tensor(np.arange(6.0).reshape(2, 3))
            y = lib.einsum(eq, x)
            y.mul_(2)  # a view: the input changes too
            results.append((y.is_contiguous(), y.stride(), x.numpy().copy()))
        (tc, ts, tx), (ec, es, ex) = results
        assert (ec, tuple(es)) == (tc, tuple(ts)), eq
        np.testing.assert_array_equal(ex, tx)
    with pytest.raises(RuntimeError):
        ember.einsum("abc->cba", ember.ones(3, 2, 3)).view(-1, 2)


@pytest.mark.parametrize(
    "shape, df, batch",
    [((), 4.0, ()), ((3,), 5.0, ()), ((2,), [3.0, 6.0], (2,)), ((), [3.5, 4.0], (2,))],
)
def test_wishart_draws_are_pytorchs(shape, df, batch):
    """Wishart samples by PyTorch's Bartlett draw and its retries (PyTorch redraws every
    sample its support check passes), so a seed gives PyTorch's matrices; rsample carries the
    gradient to df."""
    import warnings

    out = []
    for lib in (torch, ember):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.manual_seed(0)
            cov = np.broadcast_to(np.array([[2.0, 0.5], [0.5, 1.0]], np.float32), batch + (2, 2))
            d = lib.distributions.Wishart(lib.tensor(df), covariance_matrix=lib.tensor(cov.copy()))
            s = d.sample(shape)
            leaf = lib.tensor(df, requires_grad=True)
            r = lib.distributions.Wishart(leaf, covariance_matrix=lib.tensor(cov.copy())).rsample()
            r.sum().backward()
            out.append((s.numpy(), r.detach().numpy(), leaf.grad.numpy(), lib.rand(2).numpy()))
    for want, got in zip(*out):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "loss",
    [
        lambda lib, x: lib.std(x),
        lambda lib, x: x.std(0, correction=0).sum(),
        lambda lib, x: lib.std_mean(lib.stack([x, 2 * x]), 0)[0].sum(),
        lambda lib, x: x.half().std().float(),
        lambda lib, x: ((x - x.mean()) / (x.std() + 1e-5)).pow(2).sum(),
    ],
)
def test_std_of_a_constant_has_pytorchs_zero_gradient(loss):
    """PyTorch's std_backward masks a zero standard deviation (a constant feature): the
    gradient is 0 there, where sqrt's inf times var's 0 gave NaN (fuzz seed 6814)."""
    grads = []
    for lib in (torch, ember):
        x = lib.tensor([0.5, 0.5, 0.5], requires_grad=True)
        loss(lib, x).backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])


def test_xlogy_where_x_is_zero_is_positive_zero():
    """xlogy(0, y) is PyTorch's +0 (x * log(y) gave -0 for 0 < y < 1, whose sign a division
    or copysign later shows: fuzz seed 7324), its gradient still log(y); x < 0 at y = 1 keeps
    PyTorch's -0."""
    out = []
    for lib in (torch, ember):
        x = lib.tensor([0.0, 0.0, -0.0, -2.0, 1.0], requires_grad=True)
        y = lib.tensor([0.5, 2.0, 0.25, 1.0, 0.5])
        r = lib.xlogy(x, y)
        r.sum().backward()
        s = lib.special.xlog1py(x.detach(), y - 1)
        out.append((np.signbit(r.detach().numpy()), np.signbit(s.numpy()), x.grad.numpy()))
    for want, got in zip(*out):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["median", "nanmedian", "mode"])
def test_reducing_an_empty_bool_dimension_raises_pytorchs_index_error(kind):
    """The empty dimension is checked before the dtype, as PyTorch's order (fuzz 6781)."""
    with pytest.raises(IndexError):
        getattr(torch, kind)(torch.zeros(0, dtype=torch.bool), 0)
    with pytest.raises(IndexError):
        getattr(ember, kind)(ember.zeros(0, dtype=ember.bool), 0)


@pytest.mark.parametrize("dim", [0, -1, -2, 1, 3])
def test_cat_of_only_legacy_empty_tensors_ignores_the_dim(dim):
    """PyTorch skips 1-D empty tensors in cat; when every operand is one, any dim gives an
    empty result (fuzz seed 8309), while a real operand's rank still bounds the dim."""
    for lib in (torch, ember):
        assert tuple(lib.cat([lib.zeros(0), lib.zeros(0)], dim).shape) == (0,)
    for lib in (torch, ember):
        with pytest.raises(IndexError):
            lib.cat([lib.zeros(0), lib.zeros(2)], -2)


class _WorkerDraws:
    """Each sample: what its worker draws from NumPy, Python and the library's generator, and
    the worker's seed (a module-level class: workers may be spawned)."""

    def __init__(self, lib):
        self.lib = lib

    def __len__(self):
        return 6

    def __getitem__(self, i):
        import random

        info = self.lib.utils.data.get_worker_info()
        return (
            float(np.random.rand()),
            random.random(),
            float(self.lib.rand(1)),
            self.lib.initial_seed(),
            info.seed,
        )


def test_worker_seeds_and_draws_are_pytorchs():
    """A worker's seed is PyTorch's base seed + worker id, so get_worker_info().seed,
    initial_seed() (the usual worker_init_fn idiom) and what a dataset draws from the
    library's, NumPy's and Python's generators in a worker match PyTorch's."""
    out = []
    for lib in (torch, ember):
        lib.manual_seed(3)
        loader = lib.utils.data.DataLoader(
            _WorkerDraws(lib), batch_size=2, num_workers=2, shuffle=True
        )
        out.append([[np.asarray(f).tolist() for f in batch] for batch in loader])
    assert out[1] == out[0]
