"""Half-precision (bfloat16, float16) fast rules shared by the op families: NumPy has no fast
half-precision arithmetic, so these run ember's C kernels on the 16-bit values.

* `via_float32(fast32)`: an op whose NumPy kernel computes half precision in float32 and
  rounds its results once (gelu, layer norm, softmax and their gradients) runs its float32 C
  kernel on operands widened in C, its results rounded in C (kernels/chalf.py): the
  reference's own arithmetic, to the float32 kernel's rounding, then one rounding.
* `elementwise_fast(name)`: an elementwise op with a C expression runs eagerly as a one-
  instruction fused loop (kernels/cfuse.py) reading and writing the 16-bit values, each result
  rounded as NumPy rounds it (float32 and float64 operands too, where they are large and the
  loop is measured faster than NumPy's kernel with the same bits: `_loop_wins`), written into
  ``out=`` where generated code gives one (an arena slot, or a dying operand's buffer).
  Operands of one shape (or 0-d) run as one flat loop over a symbolic length, broadcast ones
  over symbolic sizes: one compiled loop per pattern of broadcast dimensions serves every size.
* `reduction_fast(name, otherwise)`: a reduction with a `ReductionRule` (sum, max, min) over
  half-precision operands runs eagerly as a one-reduction fused loop (kernels/creduce.py):
  16-bit terms accumulated in float (a sum's leading axes in double), each result rounded
  once, the reference kernel's bits (it sums 16-bit terms in float32 and float64 in the same
  order); axes the loops cannot take (a middle block between kept axes) run ``otherwise``.
* `square_sum(x, axes)`: a 2-norm's squares summed in one fused loop (float32 and float64, the
  trailing axes, where measured faster), NumPy's pairwise order and so its bits.
* `widened_workspace(node)`: the memory planner's count of `via_float32`'s float32 copies.

Elementwise operands smaller than the measured size whose broadcast result is larger are
offered the loop too (`_broadcast_size`), measured by the result's size class.
"""

from __future__ import annotations

import functools
import math
import re
import time

import numpy as np

from .. import dtypes as dt
from ..symbolic import sym
from ..types import TensorType

__all__ = [
    "HALF",
    "c_runs",
    "elementwise_fast",
    "loop_reduces",
    "reduction_fast",
    "square_sum",
    "via_float32",
    "widened_workspace",
]

HALF = (dt.float16.np, dt.bfloat16.np)
_BY_NP = {dt.float16.np: dt.float16, dt.bfloat16.np: dt.bfloat16}
_FUSABLE = {np.dtype(np.float32): dt.float32, np.dtype(np.float64): dt.float64}
_FUSABLE.update({np.dtype(np.bool_): dt.bool_, **_BY_NP})


def c_runs() -> bool:
    """Whether the half-precision fast rules run (a C compiler: kernels/chalf.py's casts)."""
    from ..kernels import ccompile

    return ccompile.compiler_available()


def widened_workspace(node) -> int:
    """A `via_float32` rule's temporaries beyond its results: the float32 copies of its
    half-precision operands and its float32 results (each twice the half-precision size)."""
    from ._util import half_precision, value_bytes

    return sum(2 * value_bytes(v) for v in (*node.inputs, *node.outputs) if half_precision(v))


def via_float32(fast32):
    """``fast32`` (a float32 C kernel's fast rule, None where it does not apply) extended to
    half-precision operands: those widened to float32, the results rounded back."""
    from ..kernels import chalf

    def fast(*arrays, **attrs):
        dtype = next((a.dtype for a in arrays if isinstance(a, np.ndarray)), None)
        if dtype not in HALF:
            return fast32(*arrays, **attrs)
        wide = [
            chalf.to_float32(a) if isinstance(a, np.ndarray) and a.dtype == dtype else a
            for a in arrays
        ]
        result = fast32(*wide, **attrs)
        if result is None:
            return None
        if isinstance(result, tuple):
            return tuple(chalf.from_float32(r, dtype) for r in result)
        return chalf.from_float32(result, dtype)

    fast.__name__ = getattr(fast32, "__name__", "fast")
    return fast


# one compiled loop per (op, attributes, operand dtypes, operand shape patterns)
_LOOPS: dict = {}
_SIZES = [sym(f"n{axis}") for axis in range(32)]


def elementwise_fast(name: str, float_when=None, measured_from: int | None = None):
    """The fast rule of the elementwise op ``name`` (registered with a C expression): for
    half-precision operands, and for large C-contiguous float32/float64 ones where the loop
    computes NumPy's bits faster than NumPy (`_loop_wins`); None (the NumPy kernel runs) for
    any other operands, and without a compiler. Operands of one shape (or 0-d) run as one
    flat loop of any length; broadcast ones over symbolic sizes, one loop per pattern of
    broadcast dimensions. ``float_when(arrays)``: whether float operands may take the loop at
    all, for an op whose NumPy kernel makes temporaries on some operands (the memory planner
    counts the kernel's: the loop may replace it only where the two hold the same memory).
    ``measured_from``: the size from which float operands ask `_loop_wins` (`_MEASURED_FROM`
    unless given), smaller for an op whose NumPy kernel is slow at every size (add_alpha's
    emulated fused multiply-add)."""
    smallest = _MEASURED_FROM if measured_from is None else measured_from

    def fast(*arrays, out=None, **attrs):
        # ``out``: generated code's arena slot, or a dying operand's buffer (plan/arena.py):
        # the loop reads each element before writing it (kernels/cfuse.py)
        for a in arrays:  # (every eager elementwise call passes here: a cheap way out first)
            if a.dtype in _BY_NP or a.size >= smallest:
                break
        else:  # (small float32/float64 operands: NumPy's kernel, unless they broadcast large)
            if _broadcast_size(arrays) < smallest:
                return None
        compact = _compact(arrays)
        result = looped(compact, out, attrs)
        if result is None and compact is not arrays:  # (an op whose operands share a shape)
            result = looped(arrays, out, attrs)
        return result

    def looped(arrays, out, attrs):
        half = big = False
        for a in arrays:  # (every eager elementwise call passes here: one cheap pass)
            if a.dtype in _BY_NP:
                half = True
                break
            if a.size >= smallest:
                big = True
        if not half and not big:  # (operands that broadcast to a large result)
            big = _broadcast_size(arrays) >= smallest
        # float32 / float64: NumPy's kernel, unless the loop is measured faster (a loop with
        # NumPy's bits per process, one calling the vector math library once per machine)
        if not half and not (big and _large(arrays)):
            return None
        if not half and float_when is not None and not float_when(arrays):
            return None
        if any(a.dtype not in _FUSABLE for a in arrays):
            return None
        arrays = [np.asarray(a) for a in arrays]  # (a NumPy scalar: a 0-d array)
        shapes = {a.shape for a in arrays if a.ndim}
        if not shapes:
            return None  # (0-d operands only: NumPy's)
        if len(shapes) == 1:  # one flat loop
            (shape,) = shapes
            n = math.prod(shape)
            types = tuple(() if not a.ndim else (_SIZES[0],) for a in arrays)
            run = _loop(name, attrs, arrays, types)
            if run is None:
                return None

            def flat():  # (a strided operand copied: measured with the loop it feeds)
                return [a if not a.ndim else np.ascontiguousarray(a).reshape(n) for a in arrays]

            if not half and not _float_loop_runs(run, name, attrs, arrays, lambda: run(*flat())):
                return None
            if out is None:
                # (the result made in its own shape: a reshaped flat array would be a view,
                # which a gradient accumulated into a leaf's .grad must copy)
                out = np.empty(shape, run.out_dtypes[0])
            into = (out.reshape(n),) if out.flags.c_contiguous else None
            (result,) = run(*flat(), out=into)
            return _written(result.reshape(shape), out)
        try:
            shape = np.broadcast_shapes(*shapes)
        except ValueError:
            return None
        if len(shape) > len(_SIZES):
            return None
        run = _loop(name, attrs, arrays, tuple(_pattern(a.shape, shape) for a in arrays))
        if run is None:
            return None
        size = math.prod(shape)
        call = lambda: run(*arrays)  # noqa: E731
        if not half and not _float_loop_runs(run, name, attrs, arrays, call, size=size):
            return None
        (result,) = run(*arrays, out=None if out is None else (out,))
        return _written(result, out)

    fast.declines_complex = True  # (only the float dtypes of _FUSABLE take the loop)
    # its first test, for OpDef.run to make without calling it (ops/_fast_rule.py `_preferring`)
    fast.declines_unless = (_BY_NP, smallest)
    return fast


def _compact(arrays):
    """The operands, each broadcast view among them (stride 0 along an axis longer than 1, as
    ``broadcast_to`` or a sum's gradient makes) read as its one slice along such axes, where
    the others still give the result its full shape: the loop broadcasts it again, where
    NumPy's kernel or a flat loop would read (or first copy) the repeated values."""
    if not any(0 in a.strides for a in arrays if isinstance(a, np.ndarray) and a.ndim):
        return arrays
    full = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    compact = [
        a[
            tuple(
                slice(0, 1) if s == 0 and d > 1 else slice(None) for s, d in zip(a.strides, a.shape)
            )
        ]
        if isinstance(a, np.ndarray) and a.ndim and 0 in a.strides
        else a
        for a in arrays
    ]
    return compact if np.broadcast_shapes(*(np.shape(a) for a in compact)) == full else arrays


# Below this many elements a float32/float64 op stays NumPy's without measuring: a loop is a
# C compile on first use (cached on disk) and its Python wrapper costs a few microseconds,
# against at most a few tens of microseconds to win on such an operand (kernels/cfuse.py's
# PARALLEL_MIN: where the loop's threads start)
_MEASURED_FROM = 1 << 18
# (loop, the operands' size class) -> whether the loop beat NumPy's kernel there
_LOOP_WINS: dict = {}


def _large(arrays) -> bool:
    """Whether float32/float64 (or bool) operands, one of them at least `_MEASURED_FROM`
    elements, are worth `_loop_wins`'s question: of types the loop reads. (A strided operand
    of a flat loop is copied first, which NumPy's kernel would read in place: the question is
    then asked of the copy and the loop together, apart from contiguous operands'.)"""
    for a in arrays:
        if a.dtype not in _FUSABLE:
            return False
    return c_runs()


def _broadcast_size(arrays) -> int:
    """The element count of the operands' broadcast result where their shapes differ (0 where
    they share one, or do not broadcast)."""
    shapes = [np.shape(a) for a in arrays]
    if len(shapes) < 2 or all(s == shapes[0] for s in shapes):
        return 0
    try:
        return math.prod(np.broadcast_shapes(*shapes))
    except ValueError:
        return 0


def _loop_wins(run, name, attrs, arrays, call, kernel=None, size=None) -> bool:
    """Whether the compiled loop ``run`` (``call()`` runs it on these operands) replaces the
    op's NumPy kernel on float32/float64 operands of this size class (a power of two):
    measured once per process, the faster of two calls each. Only a loop that computes
    NumPy's bits is a candidate (`c_gives_numpy_bits`: no exp, sin or other function NumPy
    may round otherwise), so the choice changes the time, never the result. It wins where its
    threads share a large operand (NumPy's kernels run on one) and where NumPy's kernel is
    slow for its own reasons (``maximum``, a ReLU, several times a loop's time on one
    thread)."""
    contiguous = all(a.flags.c_contiguous for a in arrays)
    # (``size``: a broadcast result's, larger than any operand)
    key = (id(run), (size or max(a.size for a in arrays)).bit_length(), contiguous)
    won = _LOOP_WINS.get(key)
    if won is None:
        if kernel is None:
            from ._registry import REGISTRY

            numpy = REGISTRY[name].kernel
            numpy_time = min(_timed(lambda: numpy(*arrays, **attrs)) for _ in range(2))
        else:  # (a NumPy computation of ``attrs`` that is no op's kernel: `square_sum`)
            numpy_time = min(_timed(lambda: kernel(*arrays, attrs)) for _ in range(2))
        loop_time = min(_timed(call) for _ in range(2))
        won = _LOOP_WINS[key] = loop_time < numpy_time
    return won


# C functions whose results are exact or correctly rounded by IEEE 754, so NumPy's own
# (vectorized) versions give the same bits; any other (exp, sin, atan2, the vector math
# library's and libm's alike) may round otherwise than NumPy's implementation
_EXACT_FUNCTIONS = frozenset(
    ("sqrt", "fabs", "fmin", "fmax", "fmod", "copysign", "floor", "ceil", "trunc", "rint")
)


@functools.cache
def c_gives_numpy_bits(name: str) -> bool:
    """Whether the elementwise op ``name``'s C expression computes NumPy's bits: IEEE
    arithmetic, comparisons and selections, and only `_EXACT_FUNCTIONS` (written
    ``name{f}(``)."""
    from ._registry import REGISTRY

    c = REGISTRY[name].c
    return isinstance(c, str) and set(re.findall(r"(\w+)\{f\}\(", c)) <= _EXACT_FUNCTIONS


def _float_loop_runs(run, name, attrs, arrays, call, size=None) -> bool:
    """Whether the compiled loop ``run`` replaces the op ``name``'s NumPy kernel on these
    float32/float64 operands: `_loop_wins` (per process) where the loop gives NumPy's bits,
    else ops/_vector_loops.py's choice, kept per machine (its results differ from NumPy's by
    the vector math library's ulps, so the choice may not change between processes)."""
    if c_gives_numpy_bits(name):
        return _loop_wins(run, name, attrs, arrays, call, size=size)
    from ._registry import REGISTRY
    from ._vector_loops import loop_chosen

    numpy = REGISTRY[name].kernel
    dtypes = ",".join(str(a.dtype) for a in arrays)
    return loop_chosen(name, dtypes, call, lambda: numpy(*arrays, **attrs))


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def reduction_fast(name: str, otherwise=None, float32_bits: bool = False):
    """The fast rule of the reduction ``name`` (an op with a `ReductionRule`, attributes
    ``axes`` and ``keepdims``) for one half-precision operand: `reduction_loop`'s loop, else
    ``otherwise(x, axes=, keepdims=)`` (None: the NumPy kernel); None for other dtypes.
    ``float32_bits``: the loop gives the kernel's bits on C-contiguous float32 operands too
    (the sum's: rows pairwise in float32, NumPy's order, the rest accumulated in double), so
    it runs on large ones where measured faster (`_loop_wins`)."""

    def fast(x, *, axes, keepdims):
        if x.dtype not in _BY_NP:
            if float32_bits and x.dtype == _FLOAT32 and x.size >= _MEASURED_FROM:
                return _float32_reduction(x, axes, keepdims)
            return None
        run = reduction_loop(name, x, axes, keepdims)
        if run is None:
            return None if otherwise is None else otherwise(x, axes=axes, keepdims=keepdims)
        (result,) = run(x)
        return result

    def _float32_reduction(x, axes, keepdims):
        if not x.flags.c_contiguous:  # (the kernel accumulates a strided operand in double)
            return None
        run = reduction_loop(name, x, axes, keepdims)
        if run is None:
            return None
        attrs = {"axes": axes, "keepdims": keepdims}
        if not _loop_wins(run, name, attrs, [x], lambda: run(x)):
            return None
        return run(x)[0]

    # (OpDef.run skips the call for other dtypes, complex ones among them: ops/_registry.py)
    fast.declines_unless = (_BY_NP, _MEASURED_FROM if float32_bits else math.inf)
    fast.declines_complex = True
    return fast


_FLOAT32 = np.dtype(np.float32)


def reduction_loop(name: str, x: np.ndarray, axes, keepdims):
    """The compiled one-reduction loop of ``name`` over ``x`` along ``axes``, or None where
    `loop_reduces` says there is none or there is no compiler. One loop per pattern of unit
    dimensions serves every size."""
    shape = x.shape
    if not loop_reduces(shape, axes) or not c_runs():
        return None
    pattern = tuple(1 if d == 1 else _SIZES[i] for i, d in enumerate(shape))
    return _loop(name, {"axes": tuple(axes), "keepdims": bool(keepdims)}, [x], (pattern,))


def square_sum(x: np.ndarray, axes: tuple):
    """``np.add.reduce(x * x, axes)`` in one compiled pass, NumPy's bits (its pairwise order),
    for a C-contiguous float32/float64 ``x`` reduced along trailing axes (a row's squares are
    never stored), where the loop is measured faster than those two NumPy calls on operands
    of this size class (`_loop_wins`); else None."""
    if x.dtype not in (np.float32, np.float64) or not x.flags.c_contiguous or not x.size:
        return None
    axes = tuple(sorted(a % x.ndim for a in axes)) if x.ndim else ()
    if not axes or axes != tuple(range(x.ndim - len(axes), x.ndim)) or not c_runs():
        return None
    pattern = tuple(1 if d == 1 else _SIZES[i] for i, d in enumerate(x.shape))
    key = ("square_sum", x.dtype, pattern, axes)
    if key not in _LOOPS:
        _LOOPS[key] = _square_sum_loop(x.dtype, pattern, axes)
    run = _LOOPS[key]
    if run is None:
        return None
    if not _loop_wins(run, "square_sum", axes, [x], lambda: run(x), kernel=_squares_summed):
        return None
    return run(x)[0]


def _squares_summed(x, axes):
    return np.add.reduce(x * x, axis=axes)


def _square_sum_loop(dtype, pattern, axes):
    from ..kernels import cfuse
    from ._registry import REGISTRY
    from .program import Input, Instr, Temp

    mul, total = REGISTRY["mul"], REGISTRY["sum"]
    kind = _FUSABLE[np.dtype(dtype)]
    x_type = TensorType(pattern, kind)
    attrs = (("axes", axes), ("keepdims", False))
    program = (Instr(mul, (Input(0), Input(0)), ()), Instr(total, (Temp(0),), attrs))
    out_type = total.infer(x_type, axes=axes, keepdims=False)
    return cfuse.build_program(program, (1,), [out_type], [x_type])


def loop_reduces(shape, axes) -> bool:
    """Whether a fused reduction loop takes ``axes`` of ``shape``: something is reduced, no
    size is empty or symbolic (the kernel fills an empty reduction's identity, or raises), and
    the reduced axes that are not 1 form a leading or a trailing block of the shape, or both
    (kernels/creduce.py `split_axes`)."""
    from ..kernels import creduce

    if not axes or not all(isinstance(d, int) and d > 0 for d in shape):
        return False
    return creduce.split_axes(tuple(shape), axes) is not None


def _written(result, out):
    """``result``, in ``out`` where one was given (copied there where the loop could not write
    into it)."""
    if out is None or result is out or np.shares_memory(result, out):
        return result if out is None else out
    out[...] = result
    return out


def _pattern(shape, out) -> tuple:
    """``shape``'s dimensions as a loop's value type sees them: 1 where it is broadcast (or
    the result's is 1), else its axis's symbolic size (never 1)."""
    lead = len(out) - len(shape)
    return tuple(
        1 if d == 1 or out[lead + i] == 1 else _SIZES[lead + i] for i, d in enumerate(shape)
    )


def _loop(name, attrs, arrays, shapes):
    """The compiled loop for these operands, or None (the op declines them, no compiler)."""
    items = tuple(sorted(attrs.items()))
    # (a zero attribute's sign too: 0.0 == -0.0 would share one loop between clamp(x, 0.0)
    # and clamp(x, -0.0), whose results differ in the sign of the zeros they give)
    zeros = tuple(v.hex() for _, v in items if isinstance(v, float) and v == 0)
    key = (name, items, zeros, tuple(a.dtype for a in arrays), shapes)
    try:
        hash(key)
    except TypeError:  # (an attribute that is no constant: the NumPy kernel's)
        return None
    if key not in _LOOPS:
        _LOOPS[key] = _build(name, attrs, arrays, shapes)
    return _LOOPS[key]


def _build(name, attrs, arrays, shapes):
    from ..kernels import cfuse
    from ._registry import REGISTRY
    from .program import Input, Instr

    op = REGISTRY[name]
    in_types = [TensorType(s, _FUSABLE[a.dtype]) for a, s in zip(arrays, shapes)]
    try:
        out_type = op.infer(*in_types, **attrs)
    except Exception:  # (the eager call's own check raises; here the kernel decides)
        return None
    if out_type.dtype.np not in _FUSABLE:
        return None
    instr = Instr(op, tuple(Input(i) for i in range(len(arrays))), tuple(sorted(attrs.items())))
    run = cfuse.build_program((instr,), (0,), [out_type], in_types)
    return run


def _attach_loop(op) -> None:
    """An elementwise op with a C expression and no fast rule of its own runs that expression
    eagerly where it is the faster (`elementwise_fast`): every registered op, and each one
    registered later (ops/_registry.py's hooks)."""
    if op.fast is None and op.kind == "elementwise" and isinstance(op.c, str):
        op.attach_fast(elementwise_fast(op.name))


def _attach_loops() -> None:
    from ._registry import REGISTER_HOOKS, REGISTRY

    for op in list(REGISTRY.values()):
        _attach_loop(op)
    REGISTER_HOOKS.append(_attach_loop)


_attach_loops()
