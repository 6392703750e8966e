"""The C source of a fused loop (kernels/cfuse.py compiles and calls it): `source_of`.

The program (ops/program.py) is read as the values it is, never imported: each instruction's
``op`` gives its C expression (``op.c``), its shape rule (``op.infer``, for the C types) or,
for a reduction ending the loop, its `ReductionRule` (``op.reduction``, written out by
kernels/creduce.py); each operand is read with ``operand.pick``.

The loop. The group's output shape is its iteration space; every input broadcasts to it. The
broadcast pattern is static (from the value types: a size-1 dimension against a larger one is
broadcast), so the source is specialised on it: output dimensions of size 1 are dropped, and
neighbouring dimensions where every input is either full or broadcast alike merge, which turns
the usual cases into one flat loop (same-shape operands and scalars) or two (a bias row). The
innermost loop is ``#pragma omp simd`` with broadcast operands hoisted; outer rows (or, for a
flat loop, chunks) are shared among the threads of ember's pool (kernels/cpool.py: threads that
block when idle, unlike OpenMP's, which spin and starve NumPy's BLAS) when there is enough work.

Exactness. Arithmetic, comparisons, selects and casts are IEEE operations that agree bit for
bit with NumPy (``-ffp-contract=off`` keeps ``a * b + c`` from becoming a fused multiply-add;
``-fno-trapping-math`` only lets selects be computed branch-free).
Transcendental functions (exp, tanh, erf, ...) come from the C library's vector math (glibc's
libmvec, declared ``simd`` so the loops vectorize), within a few ulps of NumPy's.

Constants. A program's constants (``Const`` operands, numeric attributes such as a slope) are
run-time arguments of the loop (`Constants`: the ``cvals`` array, read into locals before the
loops), so programs that differ only in them (a learning rate, an eps) share one compiled
library; the C arithmetic on the same values is the same, so the bits are too. Zero,
infinities, NaN and powers of two stay literals, where GCC's exact rewrites (``x / 8`` a
multiplication) make faster code, and so do the constants of an expression that calls a math
function, which GCC would evaluate on a literal correctly rounded (`baked`).

Half precision. bfloat16 and float16 arrays are read and written as their 16 bits
(kernels/chalf.py's conversions) and computed in float, each instruction's result rounded to
its dtype as NumPy rounds each op's. A reduction of them accumulates in float (a sum's leading
axes in double), as the float32 reduction does, and rounds each result once to 16 bits
(kernels/creduce.py: `creduce.Result`).
"""

from __future__ import annotations

import math
import re

import numpy as np

from .. import dtypes as dt
from ..symbolic import has_symbols
from ..types import TensorType
from . import cache_sizes, chalf, creduce

__all__ = ["PARALLEL_MIN", "BLOCK", "iteration_shape", "loop_groups", "source_of", "step_source"]
__all__ += ["source_and_constants", "stream_min"]

_C_TYPES = {dt.float32: "float", dt.float64: "double", dt.bool_: "_Bool"}
# half precision: stored in 16 bits (kernels/chalf.py's conversions on each load and store),
# computed in float, each instruction's result rounded to its dtype as NumPy rounds each op's
_HALF = {dt.bfloat16: "bf16", dt.float16: "f16"}
_C_TYPES.update(dict.fromkeys(_HALF, "float"))
# the NaN an op creates from operands that are not NaN, ``{nan}`` in a C expression
# (ops/_created_nan.py): PyTorch's is positive in float32/float64, its sign bit set in 16 bits
_HALF_NAN = '(-__builtin_nanf(""))'
# arrays of bool are read and written as bytes (NumPy's layout): GCC does not vectorize loads
# and stores through _Bool pointers, while values stay _Bool so conversions give 0 or 1
_ARRAY_TYPES = {**_C_TYPES, dt.bool_: "unsigned char", **dict.fromkeys(_HALF, "uint16_t")}
_VECTOR_MATH = ("exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "erf")
# What a loop needs of <math.h> and <stdlib.h>, declared: parsing the two headers took about a
# sixth of a small loop's build time. An op's C calls a math function as ``name{f}(...)``; one
# whose arity is not listed here brings <math.h> back.
_MATH_CALL = re.compile(r"\b([a-z][a-z0-9_]*)\{f\}\(")
_MATH_ARITY = dict.fromkeys(
    "exp expm1 exp2 log log1p log2 log10 sin cos tan asin acos atan sinh cosh tanh asinh acosh "
    "atanh erf erfc sqrt cbrt fabs floor ceil trunc round rint nearbyint lgamma tgamma".split(),
    1,
) | dict.fromkeys("atan2 copysign fmod pow hypot fmax fmin remainder nextafter".split(), 2)
_STDLIB = ("void *malloc(size_t);", "void free(void *);", "void abort(void);")
_MATH_MACROS = ("#define INFINITY (__builtin_inff())", '#define NAN (__builtin_nanf(""))')


def _library_declarations(used_math) -> list[str]:
    """The C library's functions and macros a loop may use, declared; ``used_math``: the
    (function, "f" or "") its ops call. glibc's libmvec has vector versions of `_VECTOR_MATH`,
    which GCC calls when they are declared SIMD-enabled."""
    if any(fn not in _MATH_ARITY for fn, _ in used_math):
        return ["#include <math.h>", *_STDLIB]
    lines = [*_STDLIB, *_MATH_MACROS]
    for fn, single in sorted(used_math):
        ctype = "float" if single else "double"
        simd = '__attribute__((simd("notinbranch"))) ' if fn in _VECTOR_MATH else ""
        args = ", ".join([ctype] * _MATH_ARITY[fn])
        lines.append(f"{simd}{ctype} {fn}{single}({args});")
    return lines


# elements below which one thread is faster: waking the others and sharing the cores with
# NumPy's BLAS threads costs more than a SIMD loop over this many values (a fraction of a
# millisecond)
PARALLEL_MIN = 1 << 18
# A flat loop writes its outputs with non-temporal stores (in blocks of BLOCK elements) where
# the bytes it reads and writes exceed this fraction of the last-level cache: the consumer's own
# operands need the rest, so such outputs would be evicted before they are read again, and
# streaming them skips reading each line before it is overwritten. Smaller outputs are written
# through the cache, where the next op (a backward's read of the activation) finds them.
STREAM_CACHE_FRACTION = 0.5
BLOCK = 64
_ARRAY_BYTES = {"float": 4, "double": 8, "unsigned char": 1, "uint16_t": 2}


def stream_min(bytes_per_element: int) -> int:
    """Elements from which a flat loop moving ``bytes_per_element`` bytes an element (inputs
    read in full and outputs) writes with non-temporal stores (`STREAM_CACHE_FRACTION`)."""
    budget = STREAM_CACHE_FRACTION * cache_sizes.last_level_bytes()
    return max(4 * BLOCK, math.ceil(budget / max(bytes_per_element, 1)))


def baked(value: float) -> bool:
    """Whether a constant stays in the loop's source rather than being one of its run-time
    arguments (`Constants`): zero, infinities, NaN and powers of two (1 included), the values
    with which GCC rewrites an expression without changing its bits (``x * 1`` is ``x``,
    ``x / 8`` a multiplication by 0.125, ``x * 2`` an addition, a comparison with infinity
    decided). Every other value takes the same instruction whether it is a literal or a
    register, so loops that differ only in such constants (learning rates, eps, a slope) share
    one compiled library."""
    value = float(value)
    return value == 0 or not math.isfinite(value) or abs(math.frexp(value)[0]) == 0.5


class Constants:
    """A loop's run-time constants: each distinct (value, C type) a local ``cv<i>`` of its
    function, read from the ``cvals`` argument (doubles; a float32 or half-precision
    instruction's constant is a float, exactly a double) before the loops, so the vectorized
    loops hold it in a register as they would a literal. `literal` gives the C text of a
    constant: a literal where `baked`, or where ``fold`` (an expression calling a C math
    function: GCC evaluates ``exp`` of a literal correctly rounded, the library at run time
    need not be); else its local's name."""

    def __init__(self):
        self.values: list[float] = []
        self._names: dict[tuple, str] = {}

    def literal(self, value, ctype: str, fold: bool = False) -> str:
        value = float(value)
        if fold or baked(value):
            return creduce.c_literal(value, ctype)
        key = (value.hex(), ctype)
        if key not in self._names:
            self._names[key] = f"cv{len(self.values)}"
            self.values.append(value)
        return self._names[key]

    def declarations(self) -> list[str]:
        """The locals' declarations, for the top of each function running the loop."""
        ctypes = {name: ctype for (_, ctype), name in self._names.items()}
        return [f"  const {ctypes[f'cv{i}']} cv{i} = cvals[{i}];" for i in range(len(self.values))]

    def array(self) -> np.ndarray:
        """The ``cvals`` argument (at least one element: its address is always passed)."""
        return np.array(self.values or [0.0], np.float64)


def _literal(constants: Constants, fold: bool):
    """``operand.pick``'s constant: a bool's 0 or 1, a number through ``constants``."""

    def literal(value, dtype) -> str:
        if dtype is dt.bool_:
            return "1" if value else "0"
        return constants.literal(value, _C_TYPES[dtype], fold)

    return literal


class _Constant:
    """A numeric attribute for an expression's ``{name}`` field: the constant rounded to the
    result's dtype (``{lo}``: NumPy's kernel compares a Python float with a ``dtype`` array so,
    a bound between two bfloat16 values included), or with ``{name:compute}`` to the type the
    loop computes in (float32 for half precision: a factor such as leaky_relu's slope, which
    the NumPy kernel and PyTorch multiply in float32); written through `Constants`."""

    __slots__ = ("value", "dtype", "constants", "fold")

    def __init__(self, value: float, dtype, constants: Constants, fold: bool):
        self.value, self.dtype, self.constants, self.fold = value, dtype, constants, fold

    def __format__(self, spec: str) -> str:
        ctype = _C_TYPES.get(self.dtype, "double")
        if spec == "compute":
            rounded = np.float32 if ctype == "float" else np.float64
        elif spec == "open":
            return "0"
        elif spec in ("", "lower", "upper"):
            half_or_single = self.dtype in _HALF or self.dtype is dt.float32
            rounded = self.dtype.np if half_or_single else np.float64
        else:
            raise ValueError(f"unknown attribute format {spec!r} (expected '' or 'compute')")
        value = float(np.asarray(self.value, dtype=rounded))
        return self.constants.literal(value, ctype, self.fold)


class _OpenBound:
    """A None attribute for an expression's ``{name:lower}`` or ``{name:upper}`` field: an
    open bound, the infinity on its side (clip's missing lo or hi: ``x > -inf`` and ``x < inf``
    decide as no bound does, NaN included); ``{name:open}`` is 1 for it, 0 for a number. Any
    other field of a None attribute is an error in the op's expression."""

    __slots__ = ("name", "ctype")

    def __init__(self, name: str, ctype: str):
        self.name, self.ctype = name, ctype

    def __format__(self, spec: str) -> str:
        if spec == "open":
            return "1"
        if spec not in ("lower", "upper"):
            raise ValueError(
                f"attribute {self.name!r} is None: an expression reads it as {{{self.name}:lower}},"
                f" {{{self.name}:upper}} or {{{self.name}:open}}, not {spec!r}"
            )
        return creduce.c_literal(float("-inf" if spec == "lower" else "inf"), self.ctype)


def _attribute_constants(attrs, dtype, constants: Constants, fold: bool) -> dict:
    """The instruction's numeric attributes as C constants for its expression's ``{name}``
    fields (`_Constant`). The op's shape rule has checked them (a fused program from a graph
    file is hostile); anything else stays out of the source."""
    numbers = {
        name: _Constant(value, dtype, constants, fold)
        for name, value in attrs
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    ctype = _C_TYPES.get(dtype, "double")
    opens = {name: _OpenBound(name, ctype) for name, value in attrs if value is None}
    return {**numbers, **opens}


def _plan(in_types, shape, axes=()) -> tuple[list[list[int]], list[list[bool]], str]:
    """Collapsed dimensions (lists of original axes), per input which are full (not broadcast)
    in each collapsed dimension, and the loop's kind: "flat" (no reduction), "rows" (reduced
    trailing axes: they form the last collapsed dimension, whatever their sizes, and the inner
    loop runs over one row's reduced elements), "columns" (reduced leading axes form the first
    collapsed dimension, the outer loop) or "both" (a leading and a trailing block; see
    kernels/creduce.py). transforms/fuse.py checks that every input is full across all of a
    reduced block or broadcast across all of it."""
    rank = len(shape)
    if not axes:
        return (*_flat_plan(in_types, shape), "flat")
    lead, tail = creduce.split_axes(shape, axes)
    if not creduce.live(shape, lead):
        lead, kind = [], "rows"  # (the tail block may be empty: rows of one element)
    elif creduce.live(shape, tail):
        kind = "both"
    else:
        tail, kind = [], "columns"
    middle = [a for a in range(rank) if a not in lead and a not in tail]
    padded = [(1,) * (rank - len(t.shape)) + tuple(t.shape) for t in in_types]
    groups, flags = _flat_plan(
        [type(t)(tuple(p[a] for a in middle), t.dtype) for t, p in zip(in_types, padded)],
        tuple(shape[a] for a in middle),
    )
    groups = [[middle[a] for a in g] for g in groups]
    if lead:
        groups.insert(0, lead)
        for f, p in zip(flags, padded):
            f.insert(0, any(p[a] != 1 for a in lead))
    if kind != "columns":
        groups.append(tail)
        for f, p in zip(flags, padded):
            f.append(any(p[a] != 1 for a in tail))
    return groups, flags, kind


def _flat_plan(in_types, shape) -> tuple[list[list[int]], list[list[bool]]]:
    """An elementwise loop's collapsed dimensions: size-1 output dimensions dropped, and
    neighbours merged where every input is full in both or broadcast in both."""
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


def iteration_shape(program, outputs, out_types, in_types) -> tuple:
    """The shape a fused program loops over: its elementwise results' (a ``fused_reduce``'s
    reductions come from values of this shape). Sizes may be symbolic."""
    for j, t in zip(outputs, out_types):
        if program[j].op.reduction is None:
            return tuple(t.shape)
    # every output is a reduction: the rank from the first one's, the sizes from the inputs
    attrs = dict(program[outputs[0]].attrs)
    reduced = len(out_types[0].shape)
    rank = reduced if attrs["keepdims"] else reduced + len(attrs["axes"])
    shape = []
    for a in range(rank):
        sizes = [t.shape[a - rank + len(t.shape)] for t in in_types if a - rank + len(t.shape) >= 0]
        shape.append(next((d for d in sizes if d != 1), 1))
    return tuple(shape)


def source_of(program, outputs, out_types, in_types, symbol="fused") -> str:
    """The C source of a fused program (see the module docstring)."""
    return source_and_constants(program, outputs, out_types, in_types, symbol)[0]


def source_and_constants(program, outputs, out_types, in_types, symbol="fused") -> tuple:
    """(the C source of a fused program, its run-time constants: the ``cvals`` array)."""
    shape = iteration_shape(program, outputs, out_types, in_types)
    axes = next((tuple(dict(e.attrs)["axes"]) for e in program if e.op.reduction is not None), ())
    groups, full, kind = _plan(in_types, shape, axes)
    k = max(len(groups), 1)
    # a bool input's values are read as the bytes they are (0 or 1, NumPy's invariant): C's
    # promotions make such a byte behave as the _Bool would in every expression, and the loads
    # vectorize (a _Bool variable, normalized on each load, made a mask loop 3.5x slower)
    c_in = [_ARRAY_TYPES[t.dtype] for t in in_types]
    params = ["long n", "const long* restrict dims", "const double* restrict cvals"]
    # no ``restrict``: an output may be written into an input's own memory (an in-place
    # parameter update); each element is read before it is written, which plain C keeps
    params += [f"const {_ARRAY_TYPES[t.dtype]}* a{i}" for i, t in enumerate(in_types)]
    params += [f"{_ARRAY_TYPES[t.dtype]}* r{j}" for j, t in enumerate(out_types)]
    used_math: set[tuple[str, str]] = set()
    body, types, terms = [], [], []  # per instruction: its dtype, its C expression
    names = [
        f"{_HALF[t.dtype]}_load(x{i})" if t.dtype in _HALF else f"x{i}"
        for i, t in enumerate(in_types)
    ]
    in_dtypes = [t.dtype for t in in_types]
    constants = Constants()
    for j, instr in enumerate(program):
        op = instr.op
        fold = "{f}(" in (op.c or "")  # (a C math function's call: see `Constants`)
        literal = _literal(constants, fold)
        args = [ref.pick(names, terms, literal) for ref in instr.operands]
        arg_types = [
            ref.pick(in_dtypes, types, lambda value, dtype: dtype) for ref in instr.operands
        ]
        if op.reduction is not None:  # accumulated per row (see _loop_source)
            types.append(arg_types[0])
            terms.append(args[0])
            continue
        terms.append(f"t{j}")
        out_dtype = _result_dtype(op, arg_types, instr.attrs)
        types.append(out_dtype)
        single = "f" if {dt.float32, *_HALF} & {out_dtype, *arg_types} else ""
        consts = _attribute_constants(instr.attrs, out_dtype, constants, fold)
        for fn in _MATH_CALL.findall(op.c):
            used_math.add((fn, single))
        if out_dtype in _HALF:  # t<j> the stored bits where it is an output, t<j>f its value
            half = _HALF[out_dtype]
            # a double to float16 rounded once (through float, to odd), as NumPy's cast does;
            # to bfloat16 through float32, rounded twice, as ml_dtypes' cast does
            if dt.float64 in arg_types and out_dtype is dt.float16:
                expr = op.c.format(*args, T="double", f=single, nan=_HALF_NAN, **consts)
                expr = "round_odd(" + expr + ")"
            else:
                expr = op.c.format(*args, T="float", f=single, nan=_HALF_NAN, **consts)
            body.append(f"uint16_t t{j} = {half}_store({expr});")
            body.append(f"float t{j}f = {half}_load(t{j});")
            terms[-1] = f"t{j}f"
            continue
        nan = f'__builtin_nan{single}("")'  # (ops/_created_nan.py: positive)
        expr = op.c.format(*args, T=_C_TYPES[out_dtype], f=single, nan=nan, **consts)
        body.append(f"{_C_TYPES[out_dtype]} t{j} = {expr};")
    lines = ["#include <stddef.h>", *_library_declarations(used_math)]
    if any(t.dtype in _HALF for t in (*in_types, *out_types)) or _HALF.keys() & set(types):
        lines.append(chalf.CONVERT)
    # GCC's builtins rather than <immintrin.h>, whose parsing took 0.1 s of every kernel's build
    lines += [
        "#ifdef __AVX__",
        "typedef long long ember_v4di __attribute__((vector_size(32)));",
        "#endif",
    ]
    out_c = [_ARRAY_TYPES[t.dtype] for t in out_types]
    # the reductions among the outputs: (output position, the op's rule, its term's C name)
    reds = [(jj, program[j].op.reduction, terms[j]) for jj, j in enumerate(outputs)]
    reds = [r for r in reds if r[1] is not None]
    # how the reductions hold their results: a half-precision one accumulates in float (its
    # terms are floats: loaded from 16 bits, or an instruction's t<j>f) and is rounded once
    outs = [creduce.Result(_C_TYPES[t.dtype], _HALF.get(t.dtype)) for t in out_types]
    # a loop over a known number of elements below the streaming threshold has no streaming
    # blocks: the code never runs, and it was half a small loop's compile time
    elements = None if has_symbols(shape) else math.prod(shape)
    lines += _loop_source(
        symbol,
        params,
        c_in,
        out_c,
        k,
        full,
        body,
        outputs,
        reds,
        kind,
        outs,
        constants.declarations(),
        elements,
    )
    return "\n".join(lines) + "\n", constants.array()


def _loop_source(
    symbol,
    params,
    c_in,
    out_c,
    k,
    full,
    body,
    outputs,
    reds=(),
    kind="flat",
    outs=(),
    cv=(),
    elements=None,
):
    """The kernel: a function running the loop over a range of its iterations (elements of a
    flat loop, or rows), and the entry point, which hands the whole range to the thread pool
    (kernels/cpool.py) when there is enough work, else runs it here. ``reds`` lists the
    outputs that are reductions, ``(output position, `ReductionRule`, the term's C name)``: the
    loop is then by rows, each row's inner loop accumulating them, so the result does not
    depend on the thread count; ``outs`` gives each output's `creduce.Result` (its value type,
    and whether it is stored in 16 bits); ``cv`` declares the run-time constants (`Constants`)
    in each function running the loop; ``elements``: the loop's element count where it is
    known (None: symbolic). A ``kind`` "columns" or "both" loop (reductions over leading axes)
    is written by kernels/creduce.py."""
    n_in = len(c_in)
    reduced = {jj for jj, _, _ in reds}
    names = [p.rsplit("*", 1)[-1].split()[-1] for p in params]
    lines = ["typedef void (*ember_task)(void *, long, long);"]
    pairwise = sorted({outs[jj].ctype for jj, rule, _ in reds if rule.pairwise})
    # a whole-tensor reduction's one long row, its pieces shared over the threads
    pieces = kind == "rows" and creduce.pieces_apply(reds)
    if (pairwise and kind != "columns") or pieces:  # (a column loop adds whole rows)
        lines += creduce.SEGMENTS
        for ctype in pairwise:
            lines += creduce.pairwise_sum(ctype)
    lines.append("typedef void (*ember_pool)(ember_task, void *, long, long);")
    fields = [p.replace("restrict ", "") for p in params]
    if k > 1 or reds:
        fields += [f"long s{i}[{k}]" for i in range(n_in)]
    if kind == "columns":  # each block of rows' partial reductions (kernels/creduce.py)
        fields += [f"{creduce.acc_type(rule, outs[jj].ctype)}* p{jj}" for jj, rule, _ in reds]
    if pieces:
        fields += creduce.pieces_fields(reds, outs)
    lines.append("struct job { " + " ".join(f + ";" for f in fields) + " };")
    if kind == "columns":
        lines.append(creduce.COLUMNS_SIGNATURE + " {")
    else:
        lines.append("static void part(void *job_, long lo, long hi) {")
        lines.append("  const struct job *job = job_;")
    # the job's fields the kernel reads as locals (its parameters')
    unpack = [f"  {f.rsplit(name, 1)[0]}{name} = job->{name};" for f, name in zip(fields, names)]
    unpack += ["  (void)cvals;", *cv]
    lines += unpack
    stores = [f"r{jj}[base + i] = t{j};" for jj, j in enumerate(outputs) if jj not in reduced]
    if kind in ("columns", "both"):
        lines += creduce.column_part(
            c_in, outs, k, full, body, outputs, reds, inner_reduced=kind == "both"
        )
    elif k == 1 and not reds:
        lines += _flat_part(c_in, out_c, full, body, outputs, stores, elements)
    else:
        lines += _row_part(c_in, outs, k, full, body + stores, reds)
    if pieces:
        lines += creduce.pieces_task(unpack, c_in, outs, k, full, body + stores, reds)
    lines.append(f"void {symbol}({', '.join(params)}, ember_pool pool) {{")
    lines.append("  struct job job = { " + ", ".join(names) + " };")
    if k == 1 and not reds:
        lines.append("  const long count = n, align = 64;")
    else:
        for i in range(n_in):  # each input's strides over the collapsed dimensions
            flags = ", ".join("1" if f else "0" for f in full[i])
            lines.append(f"  static const int f{i}[{k}] = {{{flags}}};")
            lines.append(f"  long run{i} = 1;")
            lines.append(f"  for (int d = {k - 1}; d >= 0; d--) {{")
            lines.append(
                f"    job.s{i}[d] = f{i}[d] ? run{i} : 0; run{i} *= f{i}[d] ? dims[d] : 1;"
            )
            lines.append("  }")
        if kind == "columns":  # the kept elements, in whole cache lines per thread
            lines.append(f"  const long count = n / dims[0], align = {creduce.COLUMN_ALIGN};")
        elif kind == "both":  # the kept rows
            lines.append(f"  const long count = n / (dims[0] * dims[{k - 1}]), align = 1;")
        else:
            lines.append(f"  const long count = dims[{k - 1}] ? n / dims[{k - 1}] : 0, align = 1;")
    # threads only where there is enough work: waking them costs tens of microseconds
    if kind == "columns":
        lines += creduce.row_blocks_entry(outs, reds, PARALLEL_MIN)
    if pieces:
        lines += creduce.pieces_entry(outs, reds, k, PARALLEL_MIN)
    lines.append(f"  if (pool && n > {PARALLEL_MIN}) pool(part, &job, count, align);")
    lines.append("  else part(&job, 0, count);")
    lines.append("}")
    return lines


def _flat_part(c_in, out_c, full, body, outputs, stores, elements=None) -> list[str]:
    """The body of ``part(job, lo, hi)`` for a flat loop (no reduction, one collapsed
    dimension): elements ``lo`` to ``hi``, the middle of long ranges in streaming blocks
    (none where ``elements``, the loop's known size, is below `stream_min`)."""
    n_in = len(c_in)
    inner_full = [bool(full[i]) and full[i][-1] for i in range(n_in)]
    loads = [f"{c_in[i]} x{i} = a{i}[{'i' if inner_full[i] else '0'}];" for i in range(n_in)]
    lines = ["  (void)n; (void)dims;", "  long start = lo;"]
    if "uint16_t" not in out_c:  # (GCC 12 leaves the block loop over float16 stores scalar)
        moved = sum(_ARRAY_BYTES[c] for c, f in zip(c_in, inner_full) if f)
        moved += sum(_ARRAY_BYTES[c] for c in out_c)
        threshold = stream_min(moved)
        if elements is None or elements >= threshold:
            lines += _streaming_blocks(out_c, loads, body, outputs, threshold)
    lines.append("  #pragma omp simd")
    lines.append("  for (long i = start; i < hi; i++) {")
    lines.append("    const long base = 0;")
    lines += ["    " + line for line in loads + body + stores]
    return lines + ["  }", "}"]


def _row_part(c_in, outs, k, full, statements, reds) -> list[str]:
    """The body of ``part(job, lo, hi)`` for a loop by rows (the last collapsed dimension the
    inner loop): rows ``lo`` to ``hi``, each running ``statements`` over its elements and
    ending its reductions (kernels/creduce.py's accumulators; ``outs``: each output's
    `creduce.Result`), each row's results rounded once into their outputs."""
    n_in = len(c_in)
    inner_full = [full[i][-1] for i in range(n_in)]
    lines = [f"  const long inner = dims[{k - 1}];", "  (void)n;"]
    lines += creduce.row_scratch(reds, outs)  # (scratch for the whole range of rows)
    lines.append("  for (long o = lo; o < hi; o++) {")
    lines.append("    long rem = o;")
    lines += [f"    long b{i} = 0;" for i in range(n_in)]
    lines.append(f"    for (int d = {k - 2}; d >= 0; d--) {{")
    lines.append("      const long idx = rem % dims[d]; rem /= dims[d];")
    lines += [f"      b{i} += idx * job->s{i}[d];" for i in range(n_in)]
    lines.append("    }")
    lines.append("    const long base = o * inner;")
    for i in range(n_in):
        if not inner_full[i]:
            lines.append(f"    const {c_in[i]} h{i} = a{i}[b{i}];")
    clauses, accumulate, results = creduce.accumulators(reds, outs, lines)
    finish = [f"r{jj}[o] = {outs[jj].store(value, outs[jj].ctype)};" for jj, value in results]
    values = [(c_in[i], f"a{i}[b{i} + i]" if inner_full[i] else f"h{i}") for i in range(n_in)]
    lines += creduce.row_loop(values, statements + accumulate, reds, outs, "    ", clauses)
    lines += ["    " + line for line in finish] + ["  }"]
    return lines + creduce.free_scratch(reds) + ["}"]


def _streaming_blocks(out_c, loads, body, outputs, min_elements) -> list[str]:
    """Lines of a flat loop's middle part, for loops of at least ``min_elements`` on CPUs
    with AVX: blocks of `BLOCK` elements computed into aligned scratch arrays, then written
    with non-temporal stores, which skip reading each output cache line before overwriting it
    (a fifth less memory traffic for a loop like ``x * w + b``). Sets ``start`` past the
    blocks written."""
    out_vars = [f"r{jj}" for jj in range(len(outputs))]
    lines = ["#ifdef __AVX__", f"  if (n >= {min_elements} && hi - lo >= {4 * BLOCK}) {{"]
    lines.append("    long peel = lo;")
    lines.append(f"    while (peel < hi && ((size_t)({out_vars[0]} + peel) & 63)) peel++;")
    aligned = " && ".join(f"((size_t)({r} + peel) & 31) == 0" for r in out_vars)
    lines.append(f"    if ({aligned}) {{")
    lines.append("      #pragma omp simd")
    lines.append("      for (long i = lo; i < peel; i++) {")
    lines.append("        const long base = 0;")
    stores = [f"r{jj}[base + i] = t{j};" for jj, j in enumerate(outputs)]
    lines += ["        " + line for line in loads + body + stores]
    lines.append("      }")
    lines.append("      long b = peel;")
    lines.append(f"      for (; b + {BLOCK} <= hi; b += {BLOCK}) {{")
    for jj, ctype in enumerate(out_c):
        lines.append(f"        {ctype} tmp{jj}[{BLOCK}] __attribute__((aligned(64)));")
    lines.append("        #pragma omp simd")
    lines.append(f"        for (long j = 0; j < {BLOCK}; j++) {{")
    lines.append("          const long i = b + j;")
    scratch = [f"tmp{jj}[j] = t{j};" for jj, j in enumerate(outputs)]
    lines += ["          " + line for line in loads + body + scratch]
    lines.append("        }")
    for jj in range(len(outputs)):
        lines.append(f"        for (size_t q = 0; q < sizeof tmp{jj}; q += 32)")
        lines.append(
            f"          __builtin_ia32_movntdq256((ember_v4di *)((char *)(r{jj} + b) + q), "
            f"*(const ember_v4di *)((const char *)tmp{jj} + q));"
        )
    lines.append("      }")
    lines.append("      __builtin_ia32_sfence();")
    lines.append("      start = b;")
    lines += ["    }", "  }", "#endif"]
    return lines


def _result_dtype(op, arg_types, attrs):
    return op.infer(*[TensorType((), t) for t in arg_types], **dict(attrs)).dtype


def step_source(in_types, out_types) -> str:
    """The graph runner's entry (runtime/cgraph.py): ``fused_step(args)`` calls the loop with
    args n, dims, the constants (`Constants`), the inputs, the outputs, the pool (or 0)."""
    n_in = len(in_types)
    casts = ["a[0]", "(const long *)a[1]", "(const double *)a[2]"]
    casts += [f"(const {_ARRAY_TYPES[t.dtype]} *)a[{3 + i}]" for i, t in enumerate(in_types)]
    casts += [f"({_ARRAY_TYPES[t.dtype]} *)a[{3 + n_in + j}]" for j, t in enumerate(out_types)]
    casts.append(f"(ember_pool)a[{3 + n_in + len(out_types)}]")
    return f"void fused_step(const long *a) {{ fused({', '.join(casts)}); }}\n"


def loop_groups(program, outputs, in_types, shape) -> list:
    """The loop's collapsed dimensions (lists of the iteration shape's axes; see `_plan`),
    around the axes its reduced outputs reduce."""
    reduced = (program[j] for j in outputs if program[j].op.reduction is not None)
    axes = next((tuple(dict(e.attrs)["axes"]) for e in reduced), ())
    return _plan(in_types, shape, axes)[0]
