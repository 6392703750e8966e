"""The eager dispatch's shortcuts take the general path's results and errors (issue 20: per-op
overhead).

Each shortcut is checked on both sides of its condition against the path it skips:
``OpDef.run``'s size gate (a fast rule's ``declines_unless``: operands that broadcast, Python
scalars' 0-d constants, which now skip the fast rule without working out the broadcast shape),
its complex-operand check in the same function as the gate, the one wrapper that renames
PyTorch's keywords and takes ``out=``, and ``ops.api``'s names kept as module attributes."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
import torch

import ember
from ember.errors import ArgumentTypeError, ShapeError
from ember.ops import REGISTRY, api
from ember.ops import _registry as reg
from ember.ops import _util as reg_util

_RNG = np.random.default_rng(53)
_SIZE = 1 << 10  # the spy's gate: operands whose broadcast result may hold this many


def _spy(gate: bool, declines: bool = False):
    """A fast rule recording its calls: 2 * x + y (None where ``declines``)."""
    calls = []

    def fast(*arrays, **attrs):
        calls.append(tuple(a.shape for a in arrays))
        return None if declines else np.add(2 * arrays[0], arrays[1])

    if gate:
        fast.declines_unless = ({np.dtype(np.float16)}, _SIZE)
    return fast, calls


def _kernel(x, y):
    return np.subtract(x, y)


@pytest.mark.parametrize(
    "shapes, dtype, fast_runs",
    [
        (((8, 8), (8, 8)), np.float32, False),  # small, one shape
        (((20, 20), (20, 20)), np.float32, False),  # product past the size, one shape
        (((8, 8), (8,)), np.float32, False),  # broadcast, product below the size
        (((8, 8), ()), np.float32, False),  # a Python scalar's 0-d constant
        (((0, 8), (8,)), np.float32, False),  # an empty result
        (((64, 1), (1, 64)), np.float32, True),  # broadcast to a large result
        (((30, 30), (30,)), np.float32, True),  # product past the size, result below it
        (((2048,), ()), np.float32, True),  # one large operand
        (((8, 8), (8,)), np.float16, True),  # a dtype the rule takes at any size
    ],
)
def test_the_size_gate_calls_the_fast_rule_unless_it_surely_declines(shapes, dtype, fast_runs):
    arrays = [_RNG.standard_normal(s).astype(dtype) for s in shapes]
    fast, calls = _spy(gate=True)
    got = reg._preferring(fast, _kernel)(*arrays)
    assert bool(calls) == fast_runs
    want = np.add(2 * arrays[0], arrays[1]) if fast_runs else _kernel(*arrays)
    np.testing.assert_array_equal(got, want)
    # a rule that declines leaves the kernel's result, whichever side of the gate
    fast, calls = _spy(gate=True, declines=True)
    np.testing.assert_array_equal(reg._preferring(fast, _kernel)(*arrays), _kernel(*arrays))


@pytest.mark.parametrize("gate", [False, True])
def test_complex_operands_run_the_kernel_and_others_the_fast_rule(gate):
    x = _RNG.standard_normal((4, 4))
    for y, fast_runs in ((x + 1j, False), (x, True), (np.float64(1.5), True)):
        fast, calls = _spy(gate=False)
        if gate:  # (a gate no operand passes: the complex check decides alone)
            fast.declines_unless = ({np.dtype(np.complex128), np.dtype(np.float64)}, 1)
        run = reg._preferring(fast, _kernel, real_only=True)
        got = run(x, y)
        assert bool(calls) == fast_runs
        np.testing.assert_array_equal(got, np.add(2 * x, y) if fast_runs else _kernel(x, y))


@pytest.mark.parametrize(
    "name, shapes, dtype",
    [
        ("add", ((8, 8), (8,)), np.float32),
        ("mul", ((3, 1, 5), (1, 4, 5)), np.float64),
        ("sub", ((8, 8), ()), np.float32),
        ("add", ((8, 8), (8,)), np.float16),
        ("mul", ((8, 8), ()), ml_dtypes.bfloat16),
        ("maximum", ((6, 1), (1, 7)), np.float32),
    ],
)
def test_registered_elementwise_ops_give_their_rules_bits(name, shapes, dtype):
    """Small float32/float64 operands take NumPy's kernel, half precision the C loop, as
    calling the fast rule first gave."""
    op = REGISTRY[name]
    arrays = [_RNG.standard_normal(s).astype(dtype) for s in shapes]
    got = op.run(*arrays)
    from_fast = op.fast(*arrays)
    want = op.kernel(*arrays) if from_fast is None else from_fast
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_broadcasting_and_scalar_arithmetic_match_pytorch():
    a = _RNG.standard_normal((5, 6)).astype(np.float32)
    row = _RNG.standard_normal(6).astype(np.float32)
    e, t = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    er, tr = ember.tensor(row, requires_grad=True), torch.tensor(row, requires_grad=True)
    ye = ((e + er) * 0.5 - 2.0 / (1.5 + e * e)).sum()
    yt = ((t + tr) * 0.5 - 2.0 / (1.5 + t * t)).sum()
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-6)
    ye.backward()
    yt.backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(er.grad.numpy(), tr.grad.numpy(), rtol=1e-6, atol=1e-7)
    assert type(ye.grad_fn).__name__ == type(yt.grad_fn).__name__


def test_one_wrapper_renames_keywords_and_takes_out():
    a = _RNG.standard_normal((3, 4)).astype(np.float32)
    b = _RNG.standard_normal((3, 4)).astype(np.float32)
    ea, eb, ta, tb = ember.tensor(a), ember.tensor(b), torch.tensor(a), torch.tensor(b)
    eo, to = ember.empty(3, 4), torch.empty(3, 4)
    assert ember.add(input=ea, other=eb, out=eo) is eo
    torch.add(input=ta, other=tb, out=to)
    np.testing.assert_array_equal(eo.numpy(), to.numpy())
    np.testing.assert_array_equal(ember.sub(ea, other=eb).numpy(), torch.sub(ta, other=tb))
    with pytest.raises(ArgumentTypeError, match=r"got both input= and x="):
        ember.add(input=ea, x=ea, other=eb)
    with pytest.raises(ArgumentTypeError, match=r"got both input= and x="):
        ember.add(input=ea, x=ea, other=eb, out=eo)
    w = _RNG.standard_normal((2, 4)).astype(np.float32)
    got = ember.nn.functional.linear(input=ea, weight=ember.tensor(w))
    want = torch.nn.functional.linear(input=ta, weight=torch.tensor(w))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_the_resize_warning_still_names_the_callers_line():
    ea = ember.tensor(_RNG.standard_normal((3, 4)).astype(np.float32))
    out = ember.empty(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ember.add(input=ea, other=ea, out=out)
    (warning,) = [w for w in caught if "resized" in str(w.message)]
    assert warning.filename == __file__
    assert tuple(out.shape) == (3, 4)


def test_the_resize_warning_names_the_callers_line_past_torch_function_wrappers():
    # (a Tensor subclass with __torch_function__ puts a wrapper frame between the user and
    # the public function: the warning's stack level is counted, not fixed)
    class Tagged(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs or {})

    ea = ember.tensor(_RNG.standard_normal((3, 4)).astype(np.float32))
    for out in (ember.empty(2), ember.empty(2).as_subclass(Tagged)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ember.add(ea, ea, out=out)
        (warning,) = [w for w in caught if "resized" in str(w.message)]
        assert warning.filename == __file__


def test_api_names_follow_a_later_export():
    name = "_eager53_probe"
    first, second = (lambda x: x), (lambda x: -x)
    try:
        reg.export(first, name=name)
        assert api._eager53_probe is first
        assert api._eager53_probe is first  # (now a module attribute)
        reg.export(second, name=name)
        assert api._eager53_probe is second
    finally:
        reg.PUBLIC.pop(name, None)
        api._forget(name)
    with pytest.raises(AttributeError, match="no op function"):
        api._eager53_probe  # noqa: B018


def test_two_shapes_broadcast_as_the_general_loop():
    """Two shapes take their own loop; a third, empty shape sends them through the general
    one, which must agree (sizes, and a ShapeError naming the clashing dimension)."""
    rng = np.random.default_rng(0)
    for _ in range(3000):
        x, y = (tuple(rng.integers(0, 4, rng.integers(1, 5)).tolist()) for _ in range(2))
        try:
            want = reg_util.broadcast_shapes("add", x, y, ())
        except ShapeError as exc:
            with pytest.raises(ShapeError) as got:
                reg_util.broadcast_shapes("add", x, y)
            clash = str(exc).split("(dimension ")[1].split(")")[0]
            assert f"(dimension {clash})" in str(got.value)
            continue
        assert reg_util.broadcast_shapes("add", x, y) == want == np.broadcast_shapes(x, y)
