"""A convolution store's activation: an elementwise function of the stored value alone (SiLU as
ONNX files write it, ``x * sigmoid(x)``; HardSwish, HardSigmoid, GELU, sigmoid, tanh, ...),
applied by the C stores (kernels/cconv_source.py, kernels/cconv_taps.py, kernels/cconv_wide.py,
kernels/cdepthwise_source.py, kernels/cdepthwise_wide_source.py) to each run of values just
stored, while it is in cache, instead of a second pass over the whole output.

The function is the program's own fused loop (kernels/cfuse.py: each op's C expression, its
``c`` rule), compiled for a symbolic length and called in place on the stored run, so its
arithmetic is the unfused loop's, element for element (glibc's vector math within its few
ulps where a run's tail takes the scalar calls). Which programs come down to an `Activation`
is ops/conv_epilogue.py's `epilogue_spec`.

The stores find it in kernels/cclamp.py's clamp block: entry 5 is 1 where there is an
activation, entries 6 and 7 the bits of the loop's address and of its constants' address.
Float32 and float64 stores only (a 16-bit store rounds before its activation would read it).
"""

from __future__ import annotations

import ctypes
import threading
from typing import NamedTuple

import numpy as np

__all__ = ["Activation", "C_ACTIVATE", "loop_addresses"]

# the stores' side (one copy per C source that includes it): ``act_on(c)`` says whether the
# clamp block ``c`` carries an activation, ``activate(c, to, n)`` runs it over n values in place
C_ACTIVATE = r"""
#ifndef EMBER_ACTIVATE
#define EMBER_ACTIVATE 1
typedef void (*ember_activation)(long, const long *, const double *, const void *, void *,
                                 void *);
static inline int act_on(const double *c) { return c && c[5] != 0; }
/* the clamp block's activation (kernels/cconv_activation.py) over to[0..n), in place: its
   fused loop, called on this thread (no pool) */
static void activate(const double *c, void *to, long n) {
  unsigned long long fn_bits, cv_bits;
  __builtin_memcpy(&fn_bits, c + 6, sizeof fn_bits);
  __builtin_memcpy(&cv_bits, c + 7, sizeof cv_bits);
  ((ember_activation)(unsigned long)fn_bits)(n, &n, (const double *)(unsigned long)cv_bits,
                                             to, to, 0);
}
#endif
"""


class Activation(NamedTuple):
    """An elementwise program of one input (the stored value, ``Input(0)``) whose output
    ``output`` is what the store writes; hashable, so it keys compiled steps as a clamp does."""

    program: tuple  # ops/program.py's Program
    output: int  # the instruction whose value is stored


# (activation, dtype name) -> (loop, its constants, (loop address, constants address))
_LOOPS: dict = {}
_LOCK = threading.Lock()


def loop_addresses(activation: Activation, dtype) -> tuple[int, int] | None:
    """(the address of ``activation``'s compiled loop over ``dtype`` values, the address of
    its constants), kept for the process's life (C steps hold them), or None without a
    compiler."""
    from .. import dtypes as dt
    from ..symbolic import sym
    from ..types import TensorType
    from . import ccompile, cfuse
    from .cstep import data_address, function_address

    key = (activation, np.dtype(dtype).name)
    found = _LOOPS.get(key)
    if found is not None:
        return found[2]
    if not ccompile.compiler_available():
        return None
    size = sym("n")
    t = TensorType((size,), dt.as_dtype(np.dtype(dtype)))
    source, constants, flags, libs = cfuse._loop_build(
        activation.program, (activation.output,), [t], [t]
    )
    argtypes = [ctypes.c_long] + [ctypes.c_void_p] * 5
    try:
        fn = ccompile.load(source, "fused", argtypes, flags=flags + libs)
    except ccompile.CompileError:
        if "simd(" not in source:
            raise
        # no vector math library here: plain scalar calls (cfuse.build_program's fallback)
        source = "\n".join(line for line in source.splitlines() if "simd(" not in line) + "\n"
        fn = ccompile.load(source, "fused", argtypes, flags=flags + ("-lm",))
    constants = np.ascontiguousarray(constants, np.float64)
    addresses = (function_address(fn), data_address(constants) if constants.size else 0)
    with _LOCK:
        _LOOPS.setdefault(key, (fn, constants, addresses))
    return _LOOPS[key][2]
