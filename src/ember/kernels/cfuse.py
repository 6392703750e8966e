"""C kernels for ``fused_elementwise`` nodes: the build and the Python call wrapper.

`build(node)` returns a function ``(*arrays) -> tuple of arrays`` running the node's program as
one C loop, or None when no C compiler is available (one warning; the NumPy reference kernel
runs instead). The code generator (runtime/codegen.py) calls it through the op's
``compile`` rule; the C graph runner (runtime/cgraph.py) takes the loop's step (`c_step`).
The loop's C source, and what it computes exactly, is kernels/cfuse_source.py's.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from ..symbolic import has_symbols
from ..types import as_types
from .cfuse_source import (
    BLOCK,
    PARALLEL_MIN,
    iteration_shape,
    loop_groups,
    source_and_constants,
    source_of,
    step_source,
    stream_min,
)
from .cstep import data_address

__all__ = ["BLOCK", "PARALLEL_MIN", "build", "build_program", "c_step", "loop_request"]
__all__ += ["source_of", "stream_min"]

_FLAGS = (
    "-O3",  # (a loop without reductions: `_ELEMENTWISE_LEVEL`, `_loop_flags`)
    "-march=native",
    "-fPIC",
    "-shared",
    "-fopenmp-simd",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-ffp-contract=off",
    "-std=gnu11",
)
# Elementwise loops (no reduction) are built at -O1 with the vectorizer on: the `#pragma omp
# simd` loops vectorize alike, and GCC 12 spends a quarter less time on them than at -O2, which
# had been a quarter less than -O3 (benchmarks/fused_opt_level.py: chains, GELU, tanh's
# gradient, leaky_relu, Adam's update, float32 and float64, as fast as at -O3 within the noise
# on AMD Zen 4 at -O2 and on Intel Ice Lake at this level); a loop with reductions keeps -O3,
# whose row maxima and sums ran up to 1.3x faster. Compile time matters: a fresh cache (a
# model's first run, every CI run) compiles each of a graph's loops.
_ELEMENTWISE_LEVEL = ("-O1", "-ftree-vectorize")


def build(node):
    """A C implementation of the ``fused_elementwise`` ``node``, or None (no compiler)."""
    attrs = node.attrs
    in_types = [v.type for v in node.inputs]
    return build_program(attrs["program"], attrs["outputs"], attrs["out_types"], in_types)


def build_program(program, outputs, out_types, in_types):
    """A function ``(*arrays, out=None) -> tuple of arrays`` running ``program`` as one C loop
    over inputs of ``in_types`` (a symbolic size: any size, worked out at each call), or None
    when no C compiler is available (one warning)."""
    from . import ccompile, cpool

    if not ccompile.compiler_available():
        ccompile.warn_no_compiler()
        return None
    out_types = list(as_types(out_types))
    source, constants, flags, libs = _loop_build(program, outputs, out_types, list(in_types))
    argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_void_p] * (
        len(in_types) + len(out_types) + 1
    )
    try:
        fn = ccompile.load(source, "fused", argtypes, flags=flags + libs)
    except ccompile.CompileError:
        if "simd(" not in source:
            raise
        # no vector math library here: plain scalar calls, still one loop
        source = "\n".join(line for line in source.splitlines() if "simd(" not in line) + "\n"
        libs = ("-lm",)
        fn = ccompile.load(source, "fused", argtypes, flags=flags + libs)
    run = _wrapper(fn, in_types, out_types, cpool.parallel_for(), program, outputs, constants)
    run.c_source = source
    run.constants = constants
    run.step = ccompile.load(source, "fused_step", [ctypes.c_void_p], flags=flags + libs)
    return run


# (program, outputs, out_types, in_types) -> `_loop_build`'s: a graph's loops are asked for
# their sources before they are built (`loop_request`), and the C runner builds a loop the
# generated code built too
_BUILDS: dict = {}
_BUILDS_KEPT = 512


def _attribute_bits(program) -> tuple:
    """Each instruction's float attributes as their bits: the programs' own equality takes
    0.0 for -0.0, whose loops differ (clip(x, 0.0, -0.0) against clip(x, -0.0, 0.0))."""
    return tuple(
        tuple(v.hex() for _, v in instr.attrs if isinstance(v, float) and v == 0)
        for instr in program
    )


def _loop_build(program, outputs, out_types: list, in_types: list) -> tuple:
    """(source, its constants, flags, libraries) of ``program``'s loop."""
    key = (program, _attribute_bits(program), tuple(outputs), tuple(out_types), tuple(in_types))
    found = _BUILDS.get(key)
    if found is None:
        source, constants = source_and_constants(program, outputs, out_types, in_types)
        source += step_source(in_types, out_types)
        libs = ("-lmvec", "-lm") if "simd(" in source else ("-lm",)
        constants.flags.writeable = False  # (shared by every build of this loop)
        found = (source, constants, _loop_flags(program, outputs), libs)
        if len(_BUILDS) >= _BUILDS_KEPT:
            _BUILDS.pop(next(iter(_BUILDS)))
        _BUILDS[key] = found
    return found


def loop_request(program, outputs, out_types, in_types) -> tuple[str, tuple]:
    """(source, flags) of the loop `build_program` builds: kernels/cbatch.py builds a graph's
    loops together before they are loaded."""
    out_types = list(as_types(out_types))
    source, _, flags, libs = _loop_build(program, outputs, out_types, list(as_types(in_types)))
    return source, flags + libs


def _loop_flags(program, outputs) -> tuple:
    """The compiler flags of ``program``'s loop: `_FLAGS`, at `_ELEMENTWISE_LEVEL` without
    reductions."""
    if any(program[j].op.reduction is not None for j in outputs):
        return _FLAGS
    return tuple(w for f in _FLAGS for w in (_ELEMENTWISE_LEVEL if f == "-O3" else (f,)))


def c_step(program, outputs, out_types, in_types):
    """The C graph runner's step of a fused loop (`build_program`'s, called with an argument
    block: the element count, the collapsed dimensions, the arrays, the pool), or None: a
    symbolic or empty iteration space, no compiler."""
    from . import cpool
    from .cstep import CStep, function_address

    out_types = list(as_types(out_types))
    in_types = list(as_types(in_types))
    shape = iteration_shape(program, outputs, out_types, in_types)
    if has_symbols(shape) or any(has_symbols(t.shape) for t in (*in_types, *out_types)):
        return None
    n = math.prod(shape)
    if n == 0:
        return None  # (reductions over nothing: the wrapper fills their identity)
    run = build_program(program, outputs, out_types, in_types)
    if run is None:
        return None
    _, dims = _layout(loop_groups(program, outputs, in_types, shape), shape)
    n_in, n_out = len(in_types), len(out_types)
    args = [n, data_address(dims), data_address(run.constants)] + [0] * (n_in + n_out)
    args = np.array(args + [cpool.parallel_for() or 0])
    slots = [(3 + i, "in", i) for i in range(n_in)]
    slots += [(3 + n_in + j, "out", j) for j in range(n_out)]
    keep = (run.step, dims, run)
    # (no ``restrict`` in the loop: an output may be an input's memory, cfuse_source.py)
    return CStep(
        function_address(run.step), args.astype(np.int64), slots, keep, overwrites_operand=True
    )


def _layout(groups, shape) -> tuple:
    """(elements, the collapsed dimensions' sizes as the loop's ``dims``) for ``shape``."""
    n = math.prod(shape)
    return n, np.array([math.prod(shape[a] for a in g) for g in groups] or [n], np.int64)


def _wrapper(fn, in_types, out_types, pool, program, outputs, constants):
    static_shape = iteration_shape(program, outputs, out_types, in_types)
    rank = len(static_shape)
    np_in = [t.dtype.np for t in in_types]
    np_out = [t.dtype.np for t in out_types]
    # per output: None (elementwise, the loop's shape) or the (axes, keepdims) it reduces
    reductions = [
        (dict(program[j].attrs)["axes"], dict(program[j].attrs)["keepdims"])
        if program[j].op.reduction is not None
        else None
        for j in outputs
    ]
    # what a reduction over no terms gives (an empty loop writes nothing)
    empty = [
        program[j].op.reduction.identity if r is not None else 0
        for j, r in zip(outputs, reductions)
    ]
    groups = loop_groups(program, outputs, in_types, static_shape)

    def layout(shape):
        return _layout(groups, shape)

    def out_shape(shape, reduction):
        if reduction is None:
            return shape
        axes, keepdims = reduction
        if keepdims:
            return tuple(1 if a in axes else d for a, d in enumerate(shape))
        return tuple(d for a, d in enumerate(shape) if a not in axes)

    # shapes known when compiling (no symbolic size): the layout is worked out once
    fixed = None if has_symbols(static_shape) else (static_shape, *layout(static_shape))
    held = (constants, data_address(constants))  # (the run-time constants, kept alive)

    def run(*arrays, out=None):
        # (np.ascontiguousarray would turn a 0-d array into shape (1,))
        arrays = [
            a if a.dtype == d and a.flags.c_contiguous else np.array(a, dtype=d, order="C")
            for a, d in zip(arrays, np_in)
        ]
        if fixed is not None:
            shape, n, dims = fixed
        else:
            shape = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else ()
            shape = (1,) * (rank - len(shape)) + shape
            n, dims = layout(shape)
        # (an empty loop leaves reductions over empty rows at their identity); a given ``out``
        # that fits (a parameter's own memory) is written into, and no array is allocated for it
        given = out if out is not None else (None,) * len(np_out)
        outs = []
        for o, d, r, e in zip(given, np_out, reductions, empty):
            want = out_shape(shape, r)
            fits = (
                o is not None
                and o.shape == want
                and o.dtype == d
                and o.flags.c_contiguous
                and r is None
            )
            if fits:
                outs.append(o)
            else:
                outs.append(np.empty(want, d) if n or r is None else np.full(want, e, d))
        if n:
            fn(
                n,
                data_address(dims),
                held[1],
                *[data_address(a) for a in arrays],
                *[data_address(o) for o in outs],
                pool,
            )
        return tuple(outs)

    run.out_dtypes = tuple(np_out)
    return run
