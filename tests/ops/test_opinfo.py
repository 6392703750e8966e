"""ember's public functions against PyTorch, OpInfo style (opinfo.py explains the database).

Per OpInfo: values and gradients in float64 on every sample and spelling; the dtype sweep;
the promotion table for binary functions. Then: every public function is covered (or listed
in a database's ``NO_TORCH`` with the reason) and the samples reached every registered op."""

from __future__ import annotations

import importlib
import pkgutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.ops import REGISTRY, _registry

from .opinfo import (
    ALL_DTYPES,
    EMBER,
    FLOATS,
    TORCH,
    TORCH_MISSING,
    Sample,
    attempt,
    cast_array,
    cast_sample,
    compare,
    convert,
    flatten,
    keys_of,
    recording,
    rng,
    run,
    spellings_of,
    torch,
    with_complex,
)

# the last test of this file checks what its other tests reached: under pytest-xdist (the
# suite's default) they all run in one worker, in file order (--dist loadgroup)
pytestmark = pytest.mark.xdist_group("test_opinfo")

_HERE = Path(__file__).parent
OPS = []
NO_TORCH: dict[str, str] = {}
INTERNAL: dict[str, str] = {}
for _info in sorted(pkgutil.iter_modules([str(_HERE)]), key=lambda m: m.name):
    if _info.name.startswith("opinfo_"):
        _module = importlib.import_module(f"{__package__}.{_info.name}")
        OPS += _module.OPS
        NO_TORCH.update(getattr(_module, "NO_TORCH", {}))
        INTERNAL.update(getattr(_module, "INTERNAL", {}))
OPS = [with_complex(op) for op in OPS]  # (opinfo.COMPLEX_SWEEP: complex dtypes swept too)


def _ids(ops):
    seen = Counter()
    ids = []
    for op in ops:
        seen[op.name] += 1
        ids.append(op.name if seen[op.name] == 1 else f"{op.name}#{seen[op.name]}")
    return ids


CASES = Counter()  # what each test ran, for the summary test
_FORWARD: set[str] = set()
_VJP: set[str] = set()


def _skip_without_torch():
    if torch is None:
        pytest.skip(TORCH_MISSING)


# ------------------------------------------------------------------ values and gradients


def _float_outputs(lib, out):
    return [
        o
        for o in flatten(lib, out)
        if lib.is_tensor(o) and lib.dtype_of(o) in FLOATS and o.requires_grad
    ]


def _gradients(lib, out, leaves, cots):
    outs = _float_outputs(lib, out)
    if not outs or not leaves:
        return None
    total = 0
    for o, c in zip(outs, cots):
        cot = ember.tensor(c, dtype=o.dtype) if lib.name == "ember" else torch.tensor(c)
        total = total + (o * cot.to(o.dtype)).sum()
    grads = lib.grad(total, leaves)
    return [np.zeros(tuple(x.shape)) if g is None else lib.numpy(g) for g, x in zip(grads, leaves)]


def check_sample(op, spelling, sample: Sample):
    where = f"{op.name} [{spelling}] {sample.desc}"
    with_grad = op.grad and sample.grad and not op.random
    sources = []
    e_args, e_kwargs, e_leaves = convert(EMBER, sample, with_grad, sources)
    t_args, t_kwargs, t_leaves = convert(TORCH, sample, with_grad)
    if op.random:
        ember.manual_seed(0)
        torch.manual_seed(0)
    e_out, e_exc = attempt(lambda: run(op, EMBER, spelling, e_args, e_kwargs))
    t_out, t_exc = attempt(lambda: run(op, TORCH, spelling, t_args, t_kwargs))
    if sample.desc in op.differences or f"[{spelling}] {sample.desc}" in op.differences:
        return  # a documented deliberate difference (the op's docstring and the database)
    if t_exc is not None or e_exc is not None:
        assert e_exc is not None, f"{where}: torch raises {t_exc!r}, ember returns"
        assert t_exc is not None, f"{where}: ember raises {e_exc!r}, torch returns"
        return
    compare(op, e_out, t_out, where, values=not op.random)
    if op.random and op.check is not None:
        op.check(e_out)
    if not with_grad:
        return
    e_float = _float_outputs(EMBER, e_out)
    t_float = _float_outputs(TORCH, t_out)
    assert len(e_float) == len(t_float), f"{where}: outputs that carry gradients differ"
    r = rng(11)
    cots = [r.standard_normal(tuple(o.shape)) for o in t_float]
    e_grads = _gradients(EMBER, e_out, e_leaves, cots)
    t_grads = _gradients(TORCH, t_out, t_leaves, cots)
    if t_grads is None:
        return
    for k, (g, t, x) in enumerate(zip(e_grads, t_grads, sources)):
        g, t = np.array(g, np.float64), np.array(t, np.float64)
        if g.shape == x.shape:  # (elementwise: the documented exceptions at NaN and inf)
            skip = np.zeros(x.shape, bool)
            if not sample.grad_at_nan:
                skip |= np.isnan(x)
            if op.inf_grads is not None:
                skip |= np.isinf(x)
            g[skip] = t[skip] = 0.0
        np.testing.assert_allclose(
            g,
            t,
            rtol=op.grad_rtol or op.rtol * 10,
            atol=op.atol * 10,
            err_msg=f"{where}: gradient of input {k}",
        )
    CASES["gradients"] += 1


@pytest.mark.parametrize("op", OPS, ids=_ids(OPS))
def test_values_and_gradients_match_pytorch(op):
    _skip_without_torch()
    with recording() as rec:
        for spelling in spellings_of(op):
            for sample in op.samples():
                if sample.only is not None and spelling not in sample.only:
                    continue
                check_sample(op, spelling, sample)
                CASES["samples"] += 1
    _FORWARD.update(rec.forward)
    _VJP.update(rec.vjp)


# ------------------------------------------------------------------------- dtype sweep


def _sweep(op, dtype):
    if op.dtype_samples is not None:
        return op.dtype_samples(dtype)
    samples = [s for s in op.samples() if not s.strided and s.only is None]
    return [cast_sample(s, dtype) for s in samples[: op.sweep]]


@pytest.mark.parametrize(
    "op", [op for op in OPS if op.dtypes], ids=_ids([o for o in OPS if o.dtypes])
)
def test_dtypes_match_pytorch(op):
    """Every dtype: ember and torch both accept or both refuse; then the same result dtype
    and values (within the dtype's rounding)."""
    _skip_without_torch()
    spelling = spellings_of(op)[0]
    refused = []
    for dtype in op.dtypes:
        for sample in _sweep(op, dtype):
            where = f"{op.name} [{spelling}] {sample.desc}"
            e_args, e_kwargs, _ = convert(EMBER, sample, False)
            t_args, t_kwargs, _ = convert(TORCH, sample, False)
            if op.random:
                ember.manual_seed(0)
                torch.manual_seed(0)
            e_out, e_exc = attempt(lambda: run(op, EMBER, spelling, e_args, e_kwargs))
            t_out, t_exc = attempt(lambda: run(op, TORCH, spelling, t_args, t_kwargs))
            CASES["dtype cases"] += 1
            if dtype in op.dtype_differences:
                continue  # documented in the database
            if (e_exc is None) != (t_exc is None):
                refused.append(
                    f"{where}: "
                    + (f"ember raises {e_exc!r}" if e_exc else f"torch raises {t_exc!r}")
                )
                continue
            if e_exc is None:
                compare(op, e_out, t_out, where, values=not op.random)
    assert not refused, "dtype support differs from PyTorch:\n" + "\n".join(refused)


# --------------------------------------------------------------------- promotion table

_SHAPES = [((2, 3), (2, 3)), ((2, 3), ()), ((), (2, 3)), ((), ())]
_SCALARS = (True, 2, 1.5)


def _binary_call(op):
    if getattr(op, "binary", None) is not None:
        return op.binary
    spelling = spellings_of(op)[0]
    return lambda lib, x, y: run(op, lib, spelling, [x, y], {})


@pytest.mark.parametrize(
    "op", [op for op in OPS if op.promotion], ids=_ids([o for o in OPS if o.promotion])
)
def test_promotion_table_matches_pytorch(op):
    """Tensors of every pair of dtypes (dimensioned and 0-d), and every dtype with Python
    bool, int and float scalars on either side: the result dtype and values PyTorch gives."""
    _skip_without_torch()
    call = _binary_call(op)
    # (x's and y's values apart, so no quotient sits on an integer: PyTorch reads a 0-d operand
    # at its own precision in half-precision arithmetic, where ember rounds it to the result
    # dtype first, which can move floor(x / y) across an integer when x == y)
    base = rng(12).uniform(0.6, 1.6, (2, 3))
    other = rng(13).uniform(0.6, 1.6, (2, 3))
    problems = []

    def one(x, y, where):
        def to(lib, v):
            if isinstance(v, np.ndarray):
                return lib.tensor(v, False)
            return v

        e_out, e_exc = attempt(lambda: call(EMBER, to(EMBER, x), to(EMBER, y)))
        t_out, t_exc = attempt(lambda: call(TORCH, to(TORCH, x), to(TORCH, y)))
        CASES["promotion cases"] += 1
        if isinstance(t_exc, TypeError) and e_exc is None:
            return  # a call form PyTorch's signature refuses (torch.eq(2, x)): no dtype to compare
        if (e_exc is None) != (t_exc is None):
            problems.append(f"{where}: " + (f"ember {e_exc!r}" if e_exc else f"torch {t_exc!r}"))
        elif e_exc is None:
            try:
                compare(op, e_out, t_out, where)
            except AssertionError as exc:
                problems.append(" ".join(str(exc).split())[:300])

    for a in ALL_DTYPES:
        for b in ALL_DTYPES:
            for sa, sb in _SHAPES:
                x = cast_array(base[: sa[0]] if sa else np.array(base[0, 0]), a)
                y = cast_array(other[: sb[0]] if sb else np.array(other[1, 1]), b)
                one(x, y, f"{a}{list(sa)} with {b}{list(sb)}")
        for s in _SCALARS if op.scalars else ():
            for shape in ((2, 3), ()):
                x = cast_array(base if shape else np.array(base[0, 0]), a)
                one(x, s, f"{a}{list(shape)} with {s!r}")
                one(s, x, f"{s!r} with {a}{list(shape)}")
    assert not problems, f"{len(problems)} promotion cases differ:\n" + "\n".join(problems[:40])


# ------------------------------------------------------------------------------ coverage


def _public_keys() -> set:
    keys = {f"T:{n}" for n in _registry.PUBLIC}
    keys |= {f"F:{n}" for n in _registry.FUNCTIONAL}
    methods = _registry.METHODS
    own_inplace = {n for n in methods if n.endswith("_") and n[:-1] in methods}
    keys |= {f"M:{n}" for n in methods if n not in own_inplace}
    keys |= {f"I:{n}" for n in (*_registry.INPLACE, *own_inplace)}
    return keys


def test_every_public_function_has_an_opinfo():
    """A new public function (ember.f, F.f, Tensor.f, Tensor.f_) fails here until the
    database has samples for it, or NO_TORCH says why PyTorch has nothing to compare with."""
    public = _public_keys()
    covered = set().union(*(keys_of(op) for op in OPS))
    missing = sorted(public - covered - set(NO_TORCH))
    assert not missing, f"public functions without an OpInfo: {missing}"
    stale = sorted(set(NO_TORCH) - public)
    assert not stale, f"NO_TORCH lists what ember does not export: {stale}"
    both = sorted(set(NO_TORCH) & covered)
    assert not both, f"both in NO_TORCH and covered: {both}"


def test_the_samples_reach_every_registered_op():
    """Runs after the parametrized tests of this module: every primitive ran forward (and
    every VJP ran) in some sample, but the internal ops INTERNAL lists with the reason."""
    if not _FORWARD:
        pytest.skip("run together with test_values_and_gradients_match_pytorch")
    missing = sorted(set(REGISTRY) - _FORWARD - set(INTERNAL))
    assert not missing, f"registered ops no OpInfo sample runs: {missing}"
    with_vjp = {n for n, op in REGISTRY.items() if op.vjp is not None}
    unchecked = sorted(with_vjp - _VJP - set(INTERNAL))
    assert not unchecked, f"VJPs no OpInfo sample runs against PyTorch's gradients: {unchecked}"
    stale = sorted(
        name for name in set(INTERNAL) & _FORWARD if name in _VJP or name not in with_vjp
    )
    assert not stale, f"INTERNAL lists ops the samples do run: {stale}"


def test_summary():
    """How much the suite ran (printed with -s; CASES fills as the tests above run)."""
    covered = set().union(*(keys_of(op) for op in OPS)) & _public_keys()
    print(
        f"\nOpInfo: {len(OPS)} entries, {len(covered)} public entry points covered "
        f"({len(NO_TORCH)} without a PyTorch counterpart); "
        + ", ".join(f"{v} {k}" for k, v in sorted(CASES.items()))
    )
