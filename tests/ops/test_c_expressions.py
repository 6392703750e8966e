"""Every op's C expression (its ``c`` rule, the fused loops' source: kernels/cfuse.py) against
its NumPy kernel, for every op in the registry that has one, so a new op is covered the moment
it declares its expression.

Each op runs as one fused program over every signature its rules take among the types a fused
loop computes in (float32, float64, bool; integer types never fuse: transforms/fuse.py keeps
them out, C's integer arithmetic is not NumPy's): one instruction per signature, and where the
op can read its own result, a second one on it (a two-instruction chain, its intermediate held
in a C temporary). The values are every combination of NaN, +-Inf, +-0.0, subnormals, the
largest finite values, the edges of exp's overflow and ordinary numbers, then random ones.

Tolerances come from the numerics: an expression of IEEE operations only (arithmetic,
comparisons, selects, casts, ``fabs`` and ``sqrt``, all correctly rounded) equals NumPy bit for
bit, NaN's sign and payload aside; one calling another C library function (exp, tanh, erf...,
from glibc's vector math) is within `ULPS` units in the last place of NumPy's (each within a
few ulps of the exact result), with NaN and infinities where NumPy has them.
"""

from __future__ import annotations

import inspect
import itertools
import re

import numpy as np
import pytest

import ember
from ember.errors import EmberError
from ember.kernels import ccompile, cfuse
from ember.ops import REGISTRY
from ember.ops.program import Input, Instr, Program, Temp, program_types
from ember.types import TensorType

pytestmark = pytest.mark.skipif(
    not ccompile.compiler_available(), reason="no C compiler: fused loops run the NumPy kernels"
)

FUSABLE = (ember.float32, ember.float64, ember.bool_)
# ops whose shape rule needs attributes: the values to try (a new such op fails below until
# it is listed here)
_BOUNDS = [
    dict(lo=0.0, hi=6.0),
    dict(lo=-1.0, hi=1.0),
    dict(lo=-0.3, hi=0.3),
    dict(lo=-np.inf, hi=2),
]
_SOFTPLUS = [
    dict(beta=1.0, threshold=20.0),
    dict(beta=2.0, threshold=5.0),
    dict(beta=0.5, threshold=1.0),
]
# elu, selu (PyTorch's constants), celu (input_scale = 1 / alpha)
_ELU = [
    dict(alpha=1.0, scale=1.0, input_scale=1.0),
    dict(alpha=1.6732632423543772, scale=1.0507009873554805, input_scale=1.0),
    dict(alpha=1.7, scale=1.0, input_scale=1 / 1.7),
]
# clip's: open bounds (None), ties at signed zeros, lo > hi and a NaN bound (np.clip's bits)
_CLIP = [
    *_BOUNDS,
    dict(lo=0.0, hi=None),
    dict(lo=None, hi=0.5),
    dict(lo=-0.0, hi=None),
    dict(lo=None, hi=-0.0),
    dict(lo=-0.0, hi=0.0),
    dict(lo=1.0, hi=-1.0),
    dict(lo=float("nan"), hi=1.0),
    dict(lo=None, hi=float("nan")),
]
ATTRS = {
    "add_alpha": [dict(alpha=0.1), dict(alpha=-1.7), dict(alpha=3.0)],
    "cast": [{"dtype": d} for d in FUSABLE],
    "clip": _CLIP,
    "hardtanh": _BOUNDS,
    "hardtanh_backward": _BOUNDS,
    "leaky_relu": [dict(slope=0.01), dict(slope=0.2), dict(slope=-0.5), dict(slope=1.7)],
    "leaky_relu_backward": [dict(slope=0.01), dict(slope=-0.5)],
    "softplus": _SOFTPLUS,
    "softplus_backward": _SOFTPLUS,
    "elu": _ELU,
    "elu_backward": _ELU,
    "threshold": [dict(threshold=0.5, value=-2.0), dict(threshold=-1.0, value=0.25)],
    "threshold_backward": [dict(threshold=0.5), dict(threshold=-1.0)],
    "hardshrink": [dict(lambd=0.5), dict(lambd=0.0)],
    "softshrink": [dict(lambd=0.5), dict(lambd=0.0)],
    "shrink_backward": [dict(lambd=0.5), dict(lambd=0.0)],
    "huber": [dict(delta=1.0), dict(delta=0.3)],
    "huber_backward": [dict(delta=1.0), dict(delta=0.3)],
    "smooth_l1": [dict(beta=1.0), dict(beta=0.3)],
    "smooth_l1_backward": [dict(beta=1.0), dict(beta=0.3)],
}
# expressions with a root inside their domain, where they cancel (silu's gradient factor
# 1 + x (1 - s) is zero near x = -1.28): a few ulps of exp's rounding there are many of the
# result's, so their bound is `ULPS` relative to the sum of the terms' magnitudes instead


def _sigmoid64(x):
    with np.errstate(all="ignore"):
        return 1 / (1 + np.exp(-x.astype(np.float64)))


TERMS = {
    "silu_backward": lambda g, x: (
        np.abs(g.astype(np.float64)) * _sigmoid64(x) * (1 + np.abs(x) * (1 - _sigmoid64(x)))
    ),
}
# correctly rounded C functions (IEEE 754 requires sqrt to be; fabs is exact)
EXACT_FUNCTIONS = {"fabs", "sqrt"}
ULPS = 4
C_OPS = sorted((op for op in REGISTRY.values() if op.c is not None), key=lambda op: op.name)


def _specials(dtype) -> np.ndarray:
    if dtype is ember.bool_:
        return np.array([False, True])
    info = np.finfo(dtype.np)
    values = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-8, -7e5]
    values += [info.max, -info.max, info.tiny, -info.tiny, info.smallest_subnormal]
    values += [88.72, 88.73, -103.9, 709.78, 709.79, -745.2, 1e30, -1e30]  # exp's edges
    return np.array(values).astype(dtype.np)


def _random(dtype, n: int, rng) -> np.ndarray:
    if dtype is ember.bool_:
        return rng.random(n) < 0.5
    magnitude = 10.0 ** rng.uniform(-3, 3, n)
    return (rng.standard_normal(n) * magnitude).astype(dtype.np)


# the loop's length: every combination of two operands' special values, then random ones
LENGTH = len(_specials(ember.float32)) ** 2 + 2000


def _inputs(dtypes, rng) -> list[np.ndarray]:
    """Every combination of the special values (of the first two operands), then random."""
    grids = [_specials(d) for d in dtypes[:2]]
    combos = list(itertools.product(*grids))
    columns = [np.array([c[i] for c in combos], dtypes[i].np) for i in range(len(grids))]
    columns += [np.zeros(0, d.np) for d in dtypes[2:]]  # (where's y: random against x's)
    return [np.concatenate([c, _random(d, LENGTH - len(c), rng)]) for c, d in zip(columns, dtypes)]


def _signatures(op) -> list:
    """(operand dtypes, attributes) the op takes: its rule accepts them with a fusable result."""
    params = inspect.signature(op.infer).parameters.values()
    arity = sum(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
    needs_attrs = any(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params)
    if needs_attrs and op.name not in ATTRS:
        pytest.fail(f"{op.name} needs attributes: list values to try in ATTRS")
    found = []
    for dtypes in itertools.product(FUSABLE, repeat=arity):
        for attrs in ATTRS.get(op.name, [{}]):
            try:
                result = op.infer(*(TensorType((), d) for d in dtypes), **attrs)
            except EmberError:
                continue
            if result.dtype in FUSABLE:
                found.append((dtypes, attrs))
    return found


def _kernel_agrees(op, dtypes, attrs, arrays) -> bool:
    """Whether the NumPy kernel takes these operands, giving the rule's dtype (``sub`` of bools
    raises, ``div`` of bools gives float64: no public function makes such a call)."""
    want = op.infer(*(TensorType((), d) for d in dtypes), **attrs).dtype
    try:
        with np.errstate(all="ignore"):
            got = np.asarray(op.kernel(*arrays, **attrs))
    except (TypeError, ValueError, EmberError):
        return False
    return got.dtype == want.np


def _program(op, rng):
    """One program running every signature of ``op``: per signature its operands, one
    instruction on them and, where the op reads its own result, a second on the first's."""
    instructions, outputs, inputs, labels = [], [], [], []
    for dtypes, attrs in _signatures(op):
        arrays = _inputs(dtypes, rng)
        if not _kernel_agrees(op, dtypes, attrs, arrays):
            continue
        first = len(inputs)
        inputs += arrays
        operands = tuple(Input(first + i) for i in range(len(dtypes)))
        items = tuple(sorted(attrs.items()))
        instructions.append(Instr(op, operands, items))
        outputs.append(len(instructions) - 1)
        tag = f"{op.name}({', '.join(d.name for d in dtypes)}{', ' if attrs else ''}{attrs or ''})"
        labels.append(tag)
        result = op.infer(*(TensorType((), d) for d in dtypes), **attrs).dtype
        reads = [i for i, d in enumerate(dtypes) if d is result]
        if reads:  # the chain: op(..., t, ...) with the first result in its first such operand
            chained = list(operands)
            chained[reads[0]] = Temp(len(instructions) - 1)
            instructions.append(Instr(op, tuple(chained), items))
            outputs.append(len(instructions) - 1)
            labels.append(f"{tag} chained")
    return Program(instructions), tuple(outputs), inputs, labels


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """How many floats of the dtype lie between ``got`` and ``want``, elementwise."""
    signed = {4: np.int32, 8: np.int64}[got.dtype.itemsize]
    a, b = got.view(signed).astype(np.int64), want.view(signed).astype(np.int64)
    low = np.iinfo(signed).min
    a = np.where(a < 0, low - a, a)  # floats in order: -0.0 and 0.0 at 0, negatives below
    b = np.where(b < 0, low - b, b)
    au, bu = a.astype(np.uint64), b.astype(np.uint64)  # (differences up to 2**64: no overflow)
    return np.where(a >= b, au - bu, bu - au)


def _exact(op) -> bool:
    """Whether the op's C expression is IEEE operations only (see the module docstring)."""
    return set(re.findall(r"(\w+)\{f\}\(", op.c)) <= EXACT_FUNCTIONS


def _compare(op) -> None:
    """Run ``op``'s program (`_program`) as one C loop and compare it with the kernels."""
    program, outputs, inputs, labels = _program(op, np.random.default_rng(0))
    assert program, f"{op.name}: no signature among {[d.name for d in FUSABLE]}"
    in_types = [TensorType(a.shape, ember.dtypes.from_numpy_dtype(a.dtype)) for a in inputs]
    out_types = [TensorType((LENGTH,), t.dtype) for t in program_types(program, in_types)]
    got = cfuse.build_program(program, outputs, out_types, in_types)(*inputs)
    # each instruction's kernel on its operands as the loop had them: a chained instruction
    # reads the loop's own first result (an error of a few ulps there would be magnified by
    # the second function's condition, exp(exp(x)), and say nothing of the second)
    with np.errstate(all="ignore"):
        want = [
            np.asarray(i.op.kernel(*(r.pick(inputs, got, None) for r in i.operands), **i.kwargs))
            for i in program
        ]
    exact = _exact(op)
    for instr, g, w, label in zip(program, got, want, labels, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, label
        if w.dtype.kind != "f":
            np.testing.assert_array_equal(g, w, err_msg=label)
            continue
        nan = np.isnan(w)
        np.testing.assert_array_equal(np.isnan(g), nan, err_msg=f"{label}: NaN")
        if exact:
            bad = ~nan & (g.view(f"u{g.itemsize}") != w.view(f"u{w.itemsize}"))
        elif op.name in TERMS:
            with np.errstate(all="ignore"):
                terms = TERMS[op.name](*(r.pick(inputs, got, None) for r in instr.operands))
                error = np.abs(g.astype(np.float64) - w)
            near = error <= ULPS * np.finfo(w.dtype).eps * terms
            bad = ~nan & (_ulps(g, w) > ULPS) & ~near
        else:
            bad = ~nan & (_ulps(g, w) > ULPS)
        where = np.flatnonzero(bad)[:5]
        assert not bad.any(), f"{label}: {g[where]} vs {w[where]} for inputs at {where}"


@pytest.mark.parametrize("op", C_OPS, ids=lambda op: op.name)
def test_the_c_expression_equals_the_numpy_kernel(op):
    _compare(op)
