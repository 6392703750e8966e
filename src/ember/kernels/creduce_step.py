"""The C graph runner's step of a lone reduction whose kernel takes the terms one after another
(ops/_rules.py `ReductionRule.sequential`): each result starts from its first term and takes
the others in C order of the reduced axes, as NumPy's ``multiply.reduce`` (a float product)
and an integer maximum or minimum do, so the step gives the kernel's bits.

Why not the fused loop's step (kernels/cfuse.py): it accumulates in SIMD lanes, which rounds a
product otherwise than NumPy, so generated code (NumPy's kernel) and the runner would differ.

The terms of result j are at ``base[j] + terms[i]`` (elements): two offset tables made once per
node, ``terms`` the identity where the reduced axes are the trailing ones (a contiguous row).
Integers wrap as NumPy's do (``-fwrapv``).
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from .cstep import CStep, function_address

__all__ = ["DTYPES", "reduce_step"]

# C types of the dtypes the step reads
DTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
DTYPES[np.dtype(np.int64)] = "long long"

_TEMPLATE = r"""
void ember_seq_{name}(const long *args) {
  const {t} *x = (const {t} *)args[0];
  {t} *out = ({t} *)args[1];
  long n = args[2], m = args[3], row = args[4];
  const long *base = (const long *)args[5], *terms = (const long *)args[6];
  for (long j = 0; j < n; j++) {
    const {t} *p = x + base[j];
    {t} acc = p[row ? 0 : terms[0]];
    for (long i = 1; i < m; i++) {
      {t} t = p[row ? i : terms[i]];
      acc = {accumulate};
    }
    out[j] = acc;
  }
}
"""


@functools.cache
def _function(accumulate: str, dtype: np.dtype):
    """The step function of ``accumulate`` (``{acc}``, ``{x}``) on ``dtype``, or None."""
    from . import ccompile

    if not ccompile.compiler_available():
        return None
    name = f"{DTYPES[dtype].replace(' ', '_')}"
    body = accumulate.format(acc="acc", x="t")
    source = _TEMPLATE.replace("{name}", name).replace("{t}", DTYPES[dtype])
    source = source.replace("{accumulate}", body)
    try:
        return ccompile.load(source, f"ember_seq_{name}", [ctypes.c_void_p], flags=_FLAGS)
    except ccompile.CompileError:
        return None


# no fused multiply-add, no reassociation: each product rounds as NumPy's; integers wrap
_FLAGS = ("-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fwrapv", "-std=gnu11")


def _offsets(shape: tuple, strides: tuple, axes) -> np.ndarray:
    """Element offsets of every index over ``axes`` (C order), the others 0."""
    o = np.zeros((), np.int64)
    for a in axes:
        o = o[..., None] + np.arange(shape[a], dtype=np.int64) * strides[a]
    return o.ravel()


def reduce_step(accumulate: str, dtype, shape: tuple, axes: tuple) -> CStep | None:
    """The step reducing a C-contiguous array of ``shape`` and ``dtype`` over ``axes`` with
    ``accumulate`` (see the module docstring), or None (no compiler, another dtype, nothing
    to reduce or no result)."""
    dtype = np.dtype(dtype)
    if dtype not in DTYPES or not axes:
        return None
    m = math.prod(shape[a] for a in axes)
    n = math.prod(d for a, d in enumerate(shape) if a not in axes)
    if m == 0 or n == 0:
        return None  # (an empty reduction: the kernel's identity or its error)
    fn = _function(accumulate, dtype)
    if fn is None:
        return None
    strides = tuple(math.prod(shape[a + 1 :]) for a in range(len(shape)))
    base = _offsets(shape, strides, [a for a in range(len(shape)) if a not in axes])
    terms = _offsets(shape, strides, sorted(axes))
    row = int(np.array_equal(terms, np.arange(m)))
    args = [0, 0, n, m, row, base.ctypes.data, terms.ctypes.data]
    slots = [(0, "in", 0), (1, "out", 0)]
    return CStep(function_address(fn), np.array(args, np.int64), slots, (fn, base, terms))
