"""``out=`` on ember's public functions, as PyTorch's (ops/_out.py): the result written into
``out`` and ``out`` returned, tuples for several results, resizing (with PyTorch's warning
unless empty), the casting rule, and no differentiation; compared with torch 2.13."""

import warnings

import numpy as np
import pytest

import ember
from ember.errors import EmberError

torch = pytest.importorskip("torch")


def _both(fn_name, *args, out_shape, out_dtype="float32", **kwargs):
    """(ember's out, torch's out) after ``fn_name(*args, out=...)`` on each library."""
    results = []
    for lib in (ember, torch):
        made = [lib.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
        out = lib.full(out_shape, 7.0).to(getattr(lib, out_dtype))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            returned = getattr(lib, fn_name)(*made, out=out, **kwargs)
        assert returned is out, fn_name
        resized = any("resized" in str(w.message) for w in caught)
        results.append((out.numpy() if lib is torch else out.numpy(), resized))
    return results


def test_out_writes_casts_and_resizes_as_pytorch():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(3).astype("f4")
    cases = [
        ("add", (a, b), {}, (2, 3), "float32"),
        ("mul", (a, 2.0), {}, (2, 3), "float64"),  # written converted into a wider float
        ("exp", (a,), {}, (6,), "float32"),  # resized, with the warning
        ("sum", (a,), {"dim": 1}, (0,), "float32"),  # empty: resized silently
        ("matmul", (a, a.T.copy()), {}, (2, 2), "float32"),
        ("cumsum", (a,), {"dim": 0}, (2, 3), "float32"),
        ("clamp", (a,), {"min": -0.5, "max": 0.5}, (2, 3), "float32"),
        ("where", (a > 0, a, b), {}, (2, 3), "float32"),
        ("eq", (a, a), {}, (2, 3), "float32"),  # a bool result into a float
        ("arange", (5,), {}, (5,), "int64"),
        ("zeros", ((2, 2),), {}, (1,), "float32"),
    ]
    for name, args, kwargs, shape, dtype in cases:
        (got, got_warned), (want, want_warned) = _both(
            name, *args, out_shape=shape, out_dtype=dtype, **kwargs
        )
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=name)
        assert got_warned == want_warned, name
    x = ember.tensor([3.0, 1.0, 2.0])
    values, indices = ember.empty(0), ember.empty(0, dtype=ember.int64)
    result = ember.sort(x, out=(values, indices))
    assert result.values is values and result.indices is indices
    assert values.tolist() == [1.0, 2.0, 3.0] and indices.tolist() == [1, 2, 0]
    cat = ember.empty(3)
    assert ember.cat([ember.ones(2), ember.zeros(1)], out=cat) is cat and cat.tolist() == [1, 1, 0]


def test_out_refuses_what_pytorch_refuses():
    with pytest.raises(EmberError, match="can't be cast to the desired output type Long"):
        ember.add(ember.ones(2), ember.ones(2), out=ember.empty(2, dtype=ember.int64))
    with pytest.raises(EmberError, match="don't support automatic differentiation"):
        ember.add(ember.ones(2, requires_grad=True), 1, out=ember.empty(2))
    with ember.no_grad():  # (no differentiation asked: allowed)
        ember.add(ember.ones(2, requires_grad=True), 1, out=ember.empty(2))
    with pytest.raises(TypeError, match="unexpected keyword argument 'out'"):
        ember.tensor([1.0], out=ember.empty(1))
    with pytest.raises(TypeError, match="tuple of 2 Tensors"):
        ember.sort(ember.ones(3), out=ember.empty(3))
