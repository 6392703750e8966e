"""C kernels for ``fused_elementwise`` nodes: source generation and the Python call wrapper.

`build(node)` returns a function ``(*arrays) -> tuple of arrays`` running the node's program as
one C loop, or None when no C compiler is available (one warning; the NumPy reference kernel
runs instead). The code generator (runtime/codegen.py) calls it through the op's
``extra["compile"]`` hook.

The loop. The group's output shape is its iteration space; every input broadcasts to it. The
broadcast pattern is static (from the value types: a size-1 dimension against a larger one is
broadcast), so the source is specialised on it: output dimensions of size 1 are dropped, and
neighbouring dimensions where every input is either full or broadcast alike merge, which turns
the usual cases into one flat loop (same-shape operands and scalars) or two (a bias row). The
innermost loop is ``#pragma omp simd`` with broadcast operands hoisted; outer rows (or, for a
flat loop, chunks) are shared among OpenMP threads when there is enough work.

Exactness. Arithmetic, comparisons, selects and casts are IEEE operations that agree bit for
bit with NumPy (``-ffp-contract=off`` keeps ``a * b + c`` from becoming a fused multiply-add;
``-fno-trapping-math`` only lets selects be computed branch-free).
Transcendental functions (exp, tanh, erf, ...) come from the C library's vector math (glibc's
libmvec, declared ``simd`` so the loops vectorize), within a few ulps of NumPy's.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from .. import dtypes as dt
from ..graph.symbolic import has_symbols

__all__ = ["build", "source_of"]

_C_TYPES = {dt.float32: "float", dt.float64: "double", dt.bool_: "_Bool"}
# arrays of bool are read and written as bytes (NumPy's layout): GCC does not vectorize loads
# and stores through _Bool pointers, while values stay _Bool so conversions give 0 or 1
_ARRAY_TYPES = {**_C_TYPES, dt.bool_: "unsigned char"}
_VECTOR_MATH = ("exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "erf")
_FLAGS = (
    "-O3",
    "-march=native",
    "-fPIC",
    "-shared",
    "-fopenmp",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-ffp-contract=off",
    "-std=gnu11",
)
# elements below which one thread is faster: waking the others and sharing the cores with
# NumPy's BLAS threads costs more than a SIMD loop over this many values (~0.1 ms)
PARALLEL_MIN = 1 << 18


def _literal(value, dtype) -> str:
    if dtype is dt.bool_:
        return "1" if value else "0"
    suffix = "f" if dtype is dt.float32 else ""
    value = float(value)
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return ("-" if value < 0 else "") + "INFINITY"
    return f"(({_C_TYPES[dtype]}){value.hex()}{suffix})"


def _plan(in_types, shape) -> tuple[list[list[int]], list[list[bool]]]:
    """Collapsed dimensions (lists of original axes) and, per input, which are full (not
    broadcast) in each collapsed dimension."""
    rank = len(shape)
    axes = [a for a in range(rank) if shape[a] != 1]
    flags = []
    for t in in_types:
        padded = (1,) * (rank - len(t.shape)) + tuple(t.shape)
        flags.append([padded[a] != 1 for a in axes])
    groups: list[list[int]] = []
    group_flags: list[list[bool]] = [[] for _ in in_types]
    for k, a in enumerate(axes):
        if groups and all(f[k] == f[k - 1] for f in flags):
            groups[-1].append(a)
            continue
        groups.append([a])
        for i, f in enumerate(flags):
            group_flags[i].append(f[k])
    return groups, group_flags


def source_of(program, outputs, out_types, in_types, symbol="fused") -> str:
    """The C source of a fused program (see the module docstring)."""
    shape = tuple(out_types[0].shape)
    groups, full = _plan(in_types, shape)
    k = max(len(groups), 1)
    c_in = [_C_TYPES[t.dtype] for t in in_types]
    params = ["long n", "const long* restrict dims"]
    # no ``restrict``: an output may be written into an input's own memory (an in-place
    # parameter update); each element is read before it is written, which plain C keeps
    params += [f"const {_ARRAY_TYPES[t.dtype]}* a{i}" for i, t in enumerate(in_types)]
    params += [f"{_ARRAY_TYPES[t.dtype]}* r{j}" for j, t in enumerate(out_types)]
    used_math: set[tuple[str, str]] = set()
    body, types = [], []
    for j, (name, operands, _attrs) in enumerate(program):
        from ..ops._registry import REGISTRY

        op = REGISTRY[name]
        args, arg_types = [], []
        for ref in operands:
            if ref[0] == "in":
                args.append(f"x{ref[1]}")
                arg_types.append(in_types[ref[1]].dtype)
            elif ref[0] == "t":
                args.append(f"t{ref[1]}")
                arg_types.append(types[ref[1]])
            else:
                kd = dt.as_dtype(ref[2])
                args.append(_literal(ref[1], kd))
                arg_types.append(kd)
        out_dtype = _result_dtype(op, arg_types, _attrs)
        types.append(out_dtype)
        single = "f" if dt.float32 in (out_dtype, *arg_types) else ""
        for fn in _VECTOR_MATH:
            if f"{fn}{{f}}(" in op.extra["c"]:
                used_math.add((fn + single, "float" if single else "double"))
        expr = op.extra["c"].format(*args, T=_C_TYPES[out_dtype], f=single)
        body.append(f"{_C_TYPES[out_dtype]} t{j} = {expr};")
    lines = ["#include <math.h>", "#include <stddef.h>"]
    for fn, ctype in sorted(used_math):  # glibc's libmvec has vector versions of these
        lines.append(f'__attribute__((simd("notinbranch"))) {ctype} {fn}({ctype});')
    lines.append(f"void {symbol}({', '.join(params)}) {{")
    loads = []
    for i in range(len(in_types)):
        inner_full = bool(groups) and full[i][-1]
        loads.append((i, inner_full))
    stores = [f"r{jj}[base + i] = t{j};" for jj, j in enumerate(outputs)]
    # two copies of the loop: the threaded one only where there is enough work. (An OpenMP
    # ``if`` clause would still enter the runtime on every call, which costs far more than a
    # small loop.)
    if k == 1:
        for parallel in (True, False):
            lines.append(f"  {'if' if parallel else 'else'} {_enough(parallel)}{{")
            lines.append(
                f"  #pragma omp {'parallel for simd schedule(static)' if parallel else 'simd'}"
            )
            lines.append("  for (long i = 0; i < n; i++) {")
            lines.append("    const long base = 0;")
            for i, inner_full in loads:
                lines.append(f"    {c_in[i]} x{i} = a{i}[{'i' if inner_full else '0'}];")
            lines += ["    " + line for line in body + stores]
            lines += ["  }", "  }"]
    else:
        lines.append(f"  const long inner = dims[{k - 1}];")
        lines.append("  const long outer = inner ? n / inner : 0;")
        for i in range(len(in_types)):  # each input's strides over the collapsed dimensions
            flags = ", ".join("1" if f else "0" for f in full[i])
            lines.append(f"  static const int f{i}[{k}] = {{{flags}}};")
            lines.append(f"  long s{i}[{k}]; long run{i} = 1;")
            lines.append(f"  for (int d = {k - 1}; d >= 0; d--) {{")
            lines.append(f"    s{i}[d] = f{i}[d] ? run{i} : 0; run{i} *= f{i}[d] ? dims[d] : 1;")
            lines.append("  }")
        for parallel in (True, False):
            lines.append(f"  {'if' if parallel else 'else'} {_enough(parallel)}{{")
            if parallel:
                lines.append("  #pragma omp parallel for schedule(static)")
            lines.append("  for (long o = 0; o < outer; o++) {")
            lines.append("    long rem = o;")
            for i in range(len(in_types)):
                lines.append(f"    long b{i} = 0;")
            lines.append(f"    for (int d = {k - 2}; d >= 0; d--) {{")
            lines.append("      const long idx = rem % dims[d]; rem /= dims[d];")
            for i in range(len(in_types)):
                lines.append(f"      b{i} += idx * s{i}[d];")
            lines.append("    }")
            lines.append("    const long base = o * inner;")
            for i, inner_full in loads:
                if not inner_full:
                    lines.append(f"    const {c_in[i]} h{i} = a{i}[b{i}];")
            lines.append("    #pragma omp simd")
            lines.append("    for (long i = 0; i < inner; i++) {")
            for i, inner_full in loads:
                load = f"a{i}[b{i} + i]" if inner_full else f"h{i}"
                lines.append(f"      {c_in[i]} x{i} = {load};")
            lines += ["      " + line for line in body + stores]
            lines += ["    }", "  }", "  }"]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _enough(parallel: bool) -> str:
    return f"(n > {PARALLEL_MIN}) " if parallel else ""


def _result_dtype(op, arg_types, attrs):
    from ..ops._registry import TensorType

    return op.infer(*[TensorType((), t) for t in arg_types], **dict(attrs)).dtype


def _types(out_types):
    from ..ops.fused import _types

    return _types(out_types)


def build(node):
    """A C implementation of the ``fused_elementwise`` ``node``, or None (no compiler)."""
    from . import ccompile

    if not ccompile.compiler_available():
        ccompile.warn_no_compiler()
        return None
    attrs = node.attrs
    in_types = [v.type for v in node.inputs]
    out_types = list(_types(attrs["out_types"]))
    source = source_of(attrs["program"], attrs["outputs"], out_types, in_types)
    argtypes = [ctypes.c_long, ctypes.c_void_p] + [ctypes.c_void_p] * (
        len(in_types) + len(out_types)
    )
    libs = ("-lmvec", "-lm") if "simd(" in source else ("-lm",)
    try:
        fn = ccompile.load(source, "fused", argtypes, flags=_FLAGS + libs)
    except ccompile.CompileError:
        if "simd(" not in source:
            raise
        # no vector math library here: plain scalar calls, still one loop
        source = "\n".join(line for line in source.splitlines() if "simd(" not in line) + "\n"
        fn = ccompile.load(source, "fused", argtypes, flags=_FLAGS + ("-lm",))
    run = _wrapper(fn, in_types, out_types)
    run.c_source = source
    return run


def _wrapper(fn, in_types, out_types):
    rank = len(out_types[0].shape)
    np_in = [t.dtype.np for t in in_types]
    np_out = [t.dtype.np for t in out_types]
    static_shape = tuple(out_types[0].shape)
    groups, _ = _plan(in_types, static_shape)

    def layout(shape):
        n = math.prod(shape)
        dims = [math.prod(shape[a] for a in g) for g in groups] or [n]
        return n, np.array(dims, np.int64)

    # shapes known when compiling (no symbolic size): the layout is worked out once
    fixed = None if has_symbols(static_shape) else (static_shape, *layout(static_shape))

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
        outs = [np.empty(shape, d) for d in np_out]
        if out is not None:  # write into these (a parameter's own memory), where they fit
            outs = [
                o
                if o is not None and o.shape == shape and o.dtype == d and o.flags.c_contiguous
                else new
                for o, new, d in zip(out, outs, np_out)
            ]
        if n:
            fn(
                n,
                dims.ctypes.data,
                *[a.ctypes.data for a in arrays],
                *[o.ctypes.data for o in outs],
            )
        return tuple(outs)

    return run
