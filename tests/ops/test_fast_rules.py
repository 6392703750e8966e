"""Every op's ``fast`` rule (its C implementation) agrees with its NumPy reference kernel on the
registry's conformance samples, and the rules an OpDef takes are typed: a misspelled one fails
when the op is defined."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ember.errors import EmberError
from ember.ops import REGISTRY, OpDef

from .harness import ember_forward, ember_gradients
from .test_conformance import SAMPLES, _float32

# the last test of this file checks what its other tests reached: under pytest-xdist (the
# suite's default) they all run in one worker, in file order (--dist loadgroup)
pytestmark = pytest.mark.xdist_group("test_fast_rules")

FAST_OPS = sorted(name for name, op in REGISTRY.items() if op.fast is not None)
# the half-precision dtypes and their eps (bfloat16's from ml_dtypes: NumPy's finfo refuses it)
_HALF = {np.dtype(d): float(ml_dtypes.finfo(d).eps) for d in (ml_dtypes.bfloat16, np.float16)}
_EXERCISED: set[str] = set()


def _close(got, want, what: str) -> None:
    """Within the rounding of a reordered sum: the C kernels sum products and exponentials in
    other orders than NumPy's BLAS and loops (1e-4 of the scale in float32, 1e-11 in float64);
    indices, masks and integers exactly."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, what
    half = _HALF.get(want.dtype)
    if want.dtype.kind != "f" and half is None:
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    if half is not None:  # compared in float64, which holds them exactly
        got, want = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=what)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    scale = float(np.abs(want[finite]).max()) if finite.any() else 0.0
    tol = 1e-4 if want.dtype.itemsize <= 4 else 1e-11
    if half is not None:
        # the C kernels compute half precision in float32 and round once: the float32
        # tolerance, plus a rounding moved across a tie (or the reference's extra roundings
        # in half precision, sigmoid's): two eps of the half type
        allowed = 2 * half * np.abs(want[finite]) + tol * scale
        assert (np.abs(got - want)[finite] <= allowed).all(), what
        return
    np.testing.assert_allclose(got[finite], want[finite], rtol=tol, atol=tol * scale, err_msg=what)


def _checking(op):
    def run(*arrays, **attrs):
        # a random op's two runs draw from one generator state (the fast rule's draws, not
        # the stream after the kernel's, must equal the kernel's)
        generator = attrs.get("generator")
        before = None if generator is None else generator.json_state()
        want = op.kernel(*[np.array(a, copy=True) for a in arrays], **attrs)
        if before is not None:
            after = generator.json_state()
            generator.set_state(before)
        got = op.fast(*arrays, **attrs)
        if got is None:  # (declined: the reference runs, the stream left past its draws)
            if before is not None:
                generator.set_state(after)
            return want
        _EXERCISED.add(op.name)
        pairs = zip(got, want) if isinstance(want, tuple) else ((got, want),)
        for k, (g, w) in enumerate(pairs):
            _close(g, w, f"{op.name}: output {k} of its fast rule")
        return got

    return run


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.name)
def test_fast_rules_agree_with_the_reference_kernels(sample, monkeypatch):
    from ember.ops import _half

    # a loop that runs where measured faster (ops/_half.py `_loop_wins`) runs on every sample
    # here, whatever this machine measures, so its bits are checked on all of them
    monkeypatch.setattr(_half, "_loop_wins", lambda *args, **kwargs: True)
    for name in FAST_OPS:
        op = REGISTRY[name]
        monkeypatch.setattr(op, "run", _checking(op))
        # (the eager signature cache keeps each signature's runner, the kernel itself where the
        # fast rule's gate says it surely declines: with the gate open and a fresh cache, every
        # call here goes through the checked run, which tries the fast rule)
        monkeypatch.setattr(op, "gate", None)
        monkeypatch.setattr(op, "infer_cache", {})
    if sample.grad:  # (the backward pass runs the gradient ops' fast rules too)
        ember_gradients(sample, sample.inputs)
    else:
        ember_forward(sample, sample.inputs)
    if sample.float32:
        ember_forward(sample, _float32(sample.inputs))
        for half in _HALF:  # (the half-precision fast rules: ops/_half.py, kernels/chgemm.py)
            try:
                ember_forward(sample, _in(half, sample.inputs))
            except EmberError:
                pass  # (an op that refuses half precision: no fast rule ran)


def _in(dtype, arrays):
    """The float arrays among ``arrays`` rounded to ``dtype``."""
    return [
        a.astype(dtype) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in arrays
    ]


def test_every_fast_rule_was_exercised():
    """Runs after the parametrized test above (pytest keeps file order)."""
    if not _EXERCISED:
        pytest.skip("the samples did not run (selected alone, or no C compiler)")
    from ember.kernels import ccompile

    if not ccompile.compiler_available():
        pytest.skip("no C compiler: every fast rule declines")
    missing = sorted(set(FAST_OPS) - _EXERCISED)
    assert not missing, f"ops whose fast rule no conformance sample runs: {missing}"


def test_a_misspelled_rule_fails_when_the_op_is_defined():
    with pytest.raises(TypeError, match="workspce"):
        OpDef(
            name="bad",
            kind="elementwise",
            infer=lambda x: x,
            kernel=lambda x: x,
            workspce=lambda node, layouts: 0,
        )


def test_a_c_expression_belongs_to_an_elementwise_op():
    with pytest.raises(ValueError, match="only elementwise ops"):
        OpDef(name="bad", kind="reduce", infer=lambda x: x, kernel=lambda x: x, c="({0})")


def test_run_prefers_the_fast_rule_and_falls_back_to_the_kernel():
    calls = []

    def fast(x):
        calls.append("fast")
        return None if x.size == 0 else x + 1

    op = OpDef(name="plus_one", kind="elementwise", infer=lambda x: x, kernel=lambda x: x + 1)
    assert op.run is op.kernel  # no fast rule: run is the kernel itself
    op = OpDef(
        name="plus_one", kind="elementwise", infer=lambda x: x, kernel=lambda x: x + 1, fast=fast
    )
    np.testing.assert_array_equal(op.run(np.zeros(2)), np.ones(2))
    assert op.run(np.zeros(0)).shape == (0,) and calls == ["fast", "fast"]


def test_every_elementwise_op_with_a_c_expression_runs_it_eagerly():
    """An OpDef with a C expression takes the loop as its fast rule (ops/_half.py) without
    saying so: half precision always, float32/float64 where measured faster."""
    missing = sorted(
        name
        for name, op in REGISTRY.items()
        if op.kind == "elementwise" and isinstance(op.c, str) and op.fast is None
    )
    assert not missing, f"elementwise ops with a C expression but no fast rule: {missing}"


def test_broadcast_views_are_read_in_place_by_the_loop():
    """A sum's gradient (a broadcast scalar) times a large activation: the loop reads the one
    value where NumPy would copy or re-read it; the result is NumPy's, bit for bit."""
    from ember.kernels import ccompile
    from ember.ops._half import _compact

    x = np.random.default_rng(0).standard_normal((4, 64, 32, 32)).astype(np.float32)
    g = np.broadcast_to(np.float32(0.5), x.shape)
    compact = _compact([g, x])
    assert compact[0].shape == (1, 1, 1, 1) and compact[1] is x
    # (every operand broadcast: the result's shape would shrink, so nothing is compacted)
    both = [np.broadcast_to(np.float32(1), (3, 4)), np.broadcast_to(np.float32(2), (3, 4))]
    assert _compact(both) is both
    got = REGISTRY["mul"].run(g, x)
    np.testing.assert_array_equal(got, g * x)
    if ccompile.compiler_available():
        half = x.astype(ml_dtypes.bfloat16)
        hg = np.broadcast_to(ml_dtypes.bfloat16(0.5), x.shape)
        np.testing.assert_array_equal(
            REGISTRY["mul"].run(hg, half).astype(np.float32),
            (hg.astype(np.float32) * half.astype(np.float32))
            .astype(ml_dtypes.bfloat16)
            .astype(np.float32),
        )


def test_selections_small_and_large_give_wheres_bits():
    # small operands take NumPy's where, large ones the bit selection: both copy each chosen
    # value's bits (NaN payloads, -0.0), in place too where the caller hands its temporaries
    from ember.ops import _select

    rng = np.random.default_rng(2)
    for n in (1, 7, _select._WHERE_BELOW, _select._WHERE_BELOW + 1, 5000):
        for dtype in (np.float32, np.float64, np.int8, np.uint16, np.bool_):
            x = (rng.standard_normal(n) * 9).astype(dtype)
            y = (rng.standard_normal(n) * 9).astype(dtype)
            if dtype == np.float32:
                x[0], y[-1] = np.float32(np.nan), -0.0
            cond = rng.random(n) < 0.5
            want = np.where(cond, x, y).view(np.uint8)
            got = _select.select_bits(cond, x, y)
            assert got.flags.owndata and np.array_equal(got.view(np.uint8), want)
            into = x.copy()
            got = _select.select_bits(cond, into, y.copy(), overwrite=True)
            assert got is into and np.array_equal(got.view(np.uint8), want)


def test_selections_return_arrays_that_own_their_memory():
    """where's kernel (ops/_select.py) gives a result that is no view of a bits array, so a
    gradient that is one becomes a leaf's .grad without a copy."""
    from ember.ops._select import select_bits

    rng = np.random.default_rng(1)
    cond = rng.random((5, 7)) > 0.5
    x, y = rng.standard_normal((5, 7)), rng.standard_normal((1, 7))
    for a, b in ((x, y), (x, np.zeros(())), (np.zeros(()), y)):
        got = select_bits(cond, a, b)
        assert got.base is None and got.flags.owndata
        np.testing.assert_array_equal(got, np.where(cond, a, b))


def test_the_2_norm_loop_gives_the_kernels_bits_where_it_runs(monkeypatch):
    """vector_norm's squares summed in one loop (ops/_half.py `square_sum`): NumPy's pairwise
    order, so the kernel's bits, over trailing axes of any size, float32 and float64, with
    NaN, infinities and signed zeros; leading axes, strided and integer operands decline."""
    from ember.kernels import ccompile
    from ember.ops import _half

    if not ccompile.compiler_available():
        pytest.skip("no C compiler")
    monkeypatch.setattr(_half, "_loop_wins", lambda *args, **kwargs: True)
    op = REGISTRY["vector_norm"]
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        for shape, axes in [
            ((7, 1000), (1,)),
            ((3, 5, 300), (1, 2)),
            ((4097,), (0,)),
            ((2, 1), (1,)),
        ]:
            x = rng.standard_normal(shape).astype(dtype)
            x.reshape(-1)[:2] = [np.nan, -0.0]
            x.reshape(-1)[-1] = np.inf
            for keepdims in (False, True):
                got = op.fast(x, ord=2.0, axes=axes, keepdims=keepdims)
                want = op.kernel(x, ord=2.0, axes=axes, keepdims=keepdims)
                assert got is not None and got.shape == want.shape and got.dtype == want.dtype
                np.testing.assert_array_equal(got, want)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    assert op.fast(x, ord=2.0, axes=(0,), keepdims=False) is None
    assert op.fast(x[:, ::2], ord=2.0, axes=(1,), keepdims=False) is None
    assert op.fast(x, ord=1.0, axes=(1,), keepdims=False) is None
