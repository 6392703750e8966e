"""Suite-wide checks.

Every graph that generated code runs anywhere in the suite is also run by the reference
interpreter on copies of the same inputs (at its first four calls and its 8th, 16th, 32nd...:
`_checked_call`; likewise each C kernel checked below), and the two must give identical outputs
(the interpreter is the specification of every faster executor), or, where generated code runs
C (fused loops, an op's ``fast`` rule: ember's GEMM, the C convolutions and softmax), outputs
within rounding of the interpreter's pure NumPy; each C call is also checked tightly on its
own inputs below. An integer output that the graph rounded from floats it computed (a cast,
round or quantize of a computed float, `_rounded_from_float`) may differ by one unit where C
ran (its float may lie an ulp on the other side of .5); integers computed from integers stay
bit-exact. Graphs that draw random numbers are left out: running them twice would advance
the generators twice.

The default executor's other programs (the C graph runner, the parallel workers) are checked
against the interpreter the same way, within rounding.

Each such graph is also compiled for planned execution (``executor="arena"``: kernels write
into arena slots, plan/arena.py) and run once on copies of the inputs: its outputs must equal
generated code's (bit for bit without fused C loops, whose vector paths depend on alignment).
And the scheduling pass (plan/schedule.py) must leave each a valid graph whose planned peak is
not above that of the order it runs in.
"""

import functools
import inspect
import os
import sys

# Several xdist workers share this machine's cores: PyTorch, the reference, runs one thread
# in each (its default, one per core in every worker, oversubscribed the cores: a program
# comparing a small GPT with PyTorch took four times as long). Set before PyTorch is imported;
# ember's own thread count is left as it is, so its parallel paths stay under test.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") != "1":
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import ml_dtypes  # noqa: E402
import numpy as np
import pytest

import ember
from ember import random as ember_random
from ember.graph import Graph, interpreter
from ember.kernels import (
    cbatchnorm,
    cconv,
    cconv_weight,
    cdepthwise,
    cepilogue,
    cfuse,
    cgemm,
    chalf,
    chgemm,
    cindex,
    cpooling,
    cq8,
    crnn,
    csoftmax,
    csparse,
)
from ember.ops import _conv_kernels, recurrent
from ember.ops import batch_norm as _batch_norm
from ember.ops import quantized as _quantized
from ember.ops._scatter_kernels import add_slices as _add_slices_reference
from ember.ops.pool import _max_pool_kernel
from ember.ops.pool_scatter import _scatter_kernel
from ember.ops.program import Temp, evaluate_program
from ember.ops.quantize import quantize_array as _quantize_array
from ember.ops.softmax import _log_softmax_kernel, _softmax_kernel
from ember.plan import plan_memory
from ember.plan.arena import concrete
from ember.plan.schedule import schedule
from ember.runtime import auto, codegen

from . import global_switches

# ember reads a calibration or compiled-kernel cache only when it is this user's own file that
# nobody else can write (_files.open_own_file); the tests that write such files in its place do
# so with Python's defaults, so the suite fixes the mask rather than depend on the CI's
# (a umask of 002 would make them group-writable and refused)
os.umask(0o022)


def pytest_configure(config):
    """Before the workers start (in the process that starts them, or the only one): ember's
    bytecode, written once where it is missing or stale. With PYTHONDONTWRITEBYTECODE set (as
    in some CI images) every worker and every process the suite starts (MPI ranks, ``ember``
    commands, DataLoader workers) would otherwise compile ember's ~600 modules from source,
    about twice its import time, each time."""
    if hasattr(config, "workerinput"):
        return
    import compileall

    package = os.path.dirname(ember.__file__)
    if os.access(package, os.W_OK):  # (an installed, read-only ember has its bytecode)
        compileall.compile_dir(package, quiet=2, workers=0)


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (the suite's default, pyproject.toml): a worker per core this process may
    run on, as many as the machine's memory holds (a worker holds ember, PyTorch, ONNX Runtime
    and the kernels it loaded: about 1.5 GiB by the suite's end). Most tests run one thread
    and a fresh clone compiles its kernels as it goes, so on CI's two cores one worker's
    compiles and tests overlap the other's."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return cores or 1
    return max(1, min(cores or 1, memory // (2 * 2**30)))


def _checked_call(counts: dict, key) -> bool:
    """Whether this call of a checked program or kernel (``key`` in ``counts``) is checked:
    its first four calls, then its 8th, 16th, 32nd... A training loop runs the same code on
    new values at every step: the first calls catch what one call leaves for the next (a
    reused buffer), the doubling ones what drifts (a growing scale), and the checks no longer
    take most of a long loop's time."""
    n = counts[key] = counts.get(key, 0) + 1
    return n <= 4 or n & (n - 1) == 0


def _draws_random_numbers(graph) -> bool:
    # a cond branch or loop body (a graph-valued attribute) may draw too; a graph that prints
    # (ops/host_print.py: its effect's "print" channel) is run once per call as well, so
    # what it prints is the program's
    return any(
        n.kind == "call"
        and (
            n.op.kind == "random"
            or (n.op.effect is not None and n.op.effect.ordered == "print")
            or any(isinstance(a, Graph) and _draws_random_numbers(a) for a in n.attrs.values())
        )
        for n in graph.nodes
    )


def _checked_epilogue(build):
    """``cepilogue.build`` with each call checked against the node's reference kernel: BLAS may
    round a block of rows differently from the whole product, and the epilogue's exp, erf,
    tanh come from the vector math library, so within 1e-4 (float32) of each output's scale."""

    def checked_build(node, *args):
        run = build(node, *args)
        if run is None:
            return None

        counts = {}

        def call(*arrays, out=None):
            if not _checked_call(counts, None):
                return run(*arrays, out=out)
            # the reference first: with ``out`` the node writes into its inputs' memory
            expected = node.op.kernel(*arrays, **node.attrs)
            results = run(*arrays, out=out)
            for i, (got, want) in enumerate(zip(results, expected)):
                message = f"fused_epilogue %{node.name}: output {i}"
                assert got.shape == want.shape and got.dtype == want.dtype, message
                if want.dtype.kind != "f":
                    continue  # (a comparison of a rounded product may flip at a tie)
                finite = np.abs(want[np.isfinite(want)])
                scale = float(finite.max()) if finite.size else 0.0
                tol = 1e-4 if want.dtype == np.float32 else 1e-12
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=message)
            return results

        return call

    return checked_build


def _reduction_tolerance(node, instr, arrays, want):
    """How far a fused reduction may be from NumPy's, its terms being combined in another
    order: a sum within a multiple of sum(|terms|) (its rows in NumPy's pairwise order); any
    other reduction whose combining rounds (a product) within its n - 1 roundings either way
    and terms a few ulps apart, of the reduction of |terms|. In float64 (a half-precision
    result's too: ml_dtypes' finfo, as NumPy's has no bfloat16)."""
    rule = instr.op.reduction
    terms = evaluate_program(node.attrs["program"], (instr.operands[0].index,), arrays)[0]
    info = ml_dtypes.finfo(want.dtype)
    eps = float(info.eps)
    scale = np.asarray(instr.op.kernel(np.abs(terms), **instr.kwargs), np.float64)
    if rule.pairwise:
        return 16 * eps * (scale + np.abs(np.asarray(want, np.float64)))
    n = terms.size // max(want.size, 1)
    return 9 * n * eps * scale + n * float(info.smallest_subnormal)


def _coarsest_eps(want, arrays) -> float:
    """The largest eps among a fused loop's float result and float operands (bfloat16's,
    2**-7, from ml_dtypes: NumPy sees no float in it)."""
    floats = [a.dtype for a in (want, *arrays) if getattr(a, "dtype", None) is not None]
    return max(float(ml_dtypes.finfo(d).eps) for d in floats if _is_float(d))


def _ml_float(dtype) -> bool:
    """Whether ``dtype`` is one of ml_dtypes' floats (bfloat16, the float8s), which NumPy's
    testing compares without knowing NaN: compared as float32, exact for each of them."""
    return dtype.kind == "V" and dtype.name.startswith(("bfloat16", "float8", "float6", "float4"))


def _is_float(dtype) -> bool:
    return dtype.kind == "f" or dtype == ml_dtypes.bfloat16


def _program_rounds(node, arrays, output: int) -> bool:
    """Whether a fused loop's integer ``output`` is a float it computed, rounded (a cast or
    round of a float result, or integer arithmetic on such a value): the C loop's float
    arithmetic (libm's exp, a sum in another order) may be an ulp from NumPy's, and that moves
    a value lying at .5 to the other integer. Integers from integers, or from the loop's float
    inputs as given (identical on both sides), stay bit-exact."""
    program = node.attrs["program"]
    with np.errstate(all="ignore"):  # (the loop's own values: NaN and overflow included)
        temps = evaluate_program(program, range(len(program)), arrays)
    inexact: set = set()  # temps: computed floats, and integers rounded from them
    for j, instr in enumerate(program):
        if _is_float(temps[j].dtype) or any(
            isinstance(ref, Temp) and ref.index in inexact for ref in instr.operands
        ):
            inexact.add(j)
    return node.attrs["outputs"][output] in inexact


def _rounded_from_float(value) -> bool:
    """Whether the integer graph value ``value`` is a float the graph computed, rounded (a
    cast, round or quantize of a computed float, or integer arithmetic on such a value):
    fused C loops and C kernels compute floats within rounding of NumPy's, so a value at .5
    may round to either side. Integers computed from integers, or from the graph's float
    inputs and constants as given, stay bit-exact."""
    seen: dict = {}

    def inexact(v) -> bool:
        if id(v) not in seen:
            seen[id(v)] = False  # (no cycles in a graph; guards the recursion's own path)
            node = v.node
            seen[id(v)] = node.kind not in ("input", "constant") and (
                v.dtype.is_floating_point
                or v.dtype.is_complex
                or any(inexact(u) for u in node.inputs)
            )
        return seen[id(v)]

    return inexact(value)


def _checked_fused(build):
    """``cfuse.build`` with each call of the loop checked against the node's NumPy kernel:
    within 8 eps, or for a reduction combined in another order, `_reduction_tolerance`."""

    def checked_build(node):
        run = build(node)
        if run is None:
            return None

        counts = {}

        def fused_call(*arrays, out=None):
            if not _checked_call(counts, None):
                return run(*arrays, out=out)
            # the reference first: with ``out`` the loop writes into its inputs' memory (so
            # the tolerances below read copies of the inputs)
            expected = node.op.kernel(*arrays, **node.attrs)
            inputs = arrays if out is None else [np.array(a, copy=True) for a in arrays]
            results = run(*arrays, out=out)
            for i, (got, want) in enumerate(zip(results, expected)):
                message = f"fused node %{node.name}: output {i}"
                assert got.shape == want.shape and got.dtype == want.dtype, message
                # (a float64 result computed from float32 values carries float32's rounding)
                tol = 8 * _coarsest_eps(want, inputs) if _is_float(want.dtype) else 0
                instr = node.attrs["program"][node.attrs["outputs"][i]]
                rule = instr.op.reduction
                if rule is not None and not rule.exact:
                    tol = _reduction_tolerance(node, instr, inputs, want)
                    if want.dtype.itemsize == 2:  # (half precision: its arithmetic rounds)
                        got, want = got.astype(np.float64), want.astype(np.float64)
                    with np.errstate(invalid="ignore"):
                        close = (got == want) | (np.abs(got - want) <= tol)  # (== for infinities)
                    close |= np.isnan(got) & np.isnan(want)
                    assert close.all(), f"{message}: {got} vs {want}"
                    continue
                if want.dtype == ml_dtypes.bfloat16:  # (NumPy's testing sees no NaN in it)
                    got, want = got.astype(np.float32), want.astype(np.float32)
                if (
                    want.dtype.kind in "iu"
                    and not np.array_equal(got, want)
                    and _program_rounds(node, inputs, i)
                ):
                    tol = 1  # (an integer rounded from floats the loop computed in C)
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=message)
            return results

        return fused_call

    return checked_build


def _checked_exactly(build):
    """``build`` (a compile hook's implementation builder) with each call of what it builds
    checked against the node's NumPy kernel, bit for bit."""

    def checked_build(node):
        run = build(node)
        if run is None:
            return None

        def call(*arrays):
            expected = node.op.kernel(*arrays, **node.attrs)
            results = run(*arrays)
            many = isinstance(expected, tuple)
            for i, (got, want) in enumerate(
                zip(results if many else (results,), expected if many else (expected,))
            ):
                assert got.shape == want.shape and got.dtype == want.dtype, node.op.name
                assert got.tobytes() == want.tobytes(), f"{node.op.name} %{node.name}: output {i}"
            return results

        return call

    return checked_build


def _assert_same(
    got, want, fused: bool, message: str, graph_scale: float = 0.0, rounded=None
) -> None:
    # fused C loops use the C library's exp, tanh, erf...: a few ulps from NumPy's (and their
    # vector and scalar paths differ, which the alignment of an arena slot picks), and C
    # products and convolutions sum in another order than NumPy's BLAS; later ops may magnify
    # that (an Adam step divides by a difference of moments). Each C call is checked tightly
    # on its own inputs below; here, the scale of each output, and no finer than rounding at
    # the scale of the graph's largest output (``graph_scale``): an output that is zero in
    # exact arithmetic (the gradient of a BatchNorm bias that feeds another BatchNorm) holds
    # only cancellation noise of that order, different noise on each side.
    if _ml_float(want.dtype):  # (NumPy's testing sees no NaN in ml_dtypes' floats)
        got, want = np.asarray(got, np.float32), want.astype(np.float32)
    # (complex values run on NumPy's kernels, but from float values fused loops computed)
    if fused and want.dtype.kind in "fc":
        finite = np.abs(want[np.isfinite(want)])
        scale = float(finite.max()) if finite.size else 0.0
        noise = 64 * float(np.finfo(want.dtype).eps) * graph_scale
        atol = max(1e-3 * scale, noise) + np.finfo(want.dtype).tiny
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=atol, err_msg=message)
    elif (
        fused
        and want.dtype.kind in "iu"
        and rounded is not None
        and not np.array_equal(got, want)
        and rounded()
    ):
        # an integer rounded from floats computed within rounding of each other (a quantized
        # softmax's sum in another order puts 132.5 on either side): within one unit
        diff = np.abs(np.asarray(got, np.int64) - np.asarray(want, np.int64))
        assert got.shape == want.shape and diff.max() <= 1, f"{message}: {got} vs {want}"
    else:
        np.testing.assert_array_equal(got, want, err_msg=message)


def _largest_float(arrays) -> float:
    """The largest finite magnitude among ``arrays``' floating values (0 when none)."""
    largest = 0.0
    for a in arrays:
        a = np.asarray(a)
        if a.dtype.kind == "f" and a.size:
            finite = np.abs(a[np.isfinite(a)])
            if finite.size:
                largest = max(largest, float(finite.max()))
    return largest


def _checked_auto(original):
    """The default executor's programs with each run of the C graph runner or the parallel
    workers (generated code is checked above) compared with the interpreter's, on copies of
    the same inputs: within rounding (the runner's products are ember's GEMM, NumPy's BLAS
    the interpreter's)."""

    def checked(self, *arrays):
        if isinstance(self._program, codegen.CompiledGraph) or _draws_random_numbers(self.graph):
            return original(self, *arrays)
        if not _checked_call(self.__dict__.setdefault("_suite_calls", {}), None):
            return original(self, *arrays)
        expected = interpreter.run(self.graph, [np.array(a, copy=True) for a in arrays])
        results = original(self, *arrays)
        assert len(results) == len(expected)
        largest = _largest_float(expected)
        for i, (got, want) in enumerate(zip(results, expected)):
            message = f"graph {self.graph.name}: output {i} ({self.choice.chosen})"
            rounded = functools.partial(_rounded_from_float, self.graph.outputs[i])
            _assert_same(np.asarray(got), want, True, message, largest, rounded)
        return results

    return checked


def _arena_version(compiled):
    """``compiled``'s graph compiled for planned execution, at its first call; None after,
    or for a program that is itself planned."""
    if compiled.arena is not None or getattr(compiled, "_arena_checked", False):
        return None  # (once per program: the same code runs at every call)
    compiled._arena_checked = True
    return codegen.compile_graph(compiled.graph, getattr(compiled, "inplace_request", None), True)


def _schedule_does_not_raise_the_peak(graph) -> None:
    if getattr(graph, "_schedule_checked", False) or not concrete(graph):
        return
    graph._schedule_checked = True
    reordered, changed = schedule(graph.copy())
    if not changed:
        return  # (the order it runs in: nothing to compare)
    reordered.verify()  # still a topological order
    stored = plan_memory(graph).peak_bytes
    assert plan_memory(reordered).peak_bytes <= stored, f"graph {graph.name}: memory-aware order"


def _assert_close_to_reference(got, want, message):
    """Sums taken in another order than NumPy's BLAS: within 1e-4 (float32) of the scale. Half
    precision (float32 sums rounded to 16 bits once): the float32 bound, plus one unit in the
    last place of the 16-bit value (a float32 sum on the other side of a tie)."""
    assert got.shape == want.shape and got.dtype == want.dtype, message
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=message)
    scale = float(np.abs(want[finite]).max()) if finite.any() else 0.0
    if want.dtype in (np.float16, ember.bfloat16.np):
        g, w = got[finite].astype(np.float64), want[finite].astype(np.float64)
        ulp = np.spacing(np.abs(want[finite])).astype(np.float64)
        bad = np.abs(g - w) > 1e-4 * scale + ulp
        assert not bad.any(), f"{message}: {g[bad][:5]} != {w[bad][:5]}"
        return
    tol = 1e-4 if want.dtype == np.float32 else 1e-11
    np.testing.assert_allclose(
        got[finite], want[finite], rtol=tol, atol=tol * scale, err_msg=message
    )


def _checked_product(fast):
    """``cgemm.matmul`` with each call that computes checked against ``np.matmul``: each
    element within ``2 K eps (|a| @ |b|)``, the bound of a K-term dot product summed in any
    order."""

    def call(a, b, out=None):
        got = fast(a, b, out)
        if got is not None:
            want = np.matmul(a, b)
            message = f"cgemm.matmul on {a.shape} @ {b.shape}"
            assert got.shape == want.shape and got.dtype == want.dtype, message
            with np.errstate(invalid="ignore", over="ignore"):
                eps = np.finfo(a.dtype).eps
                bound = np.matmul(np.abs(a), np.abs(b)) * (2 * a.shape[-1] * eps)
                ok = (got == want) | (np.isnan(got) & np.isnan(want))
                ok |= np.isfinite(want) & (np.abs(got - want) <= bound)
            assert ok.all(), message
        return got

    return call


def _checked_half_product(fast):
    """``chgemm.matmul`` (bfloat16 / float16 operands, float32 sums, one rounding) with each
    call that computes checked against NumPy's float32 product rounded once (the reference
    kernel's arithmetic): each element within one rounding of the half type (eps of its
    magnitude, a float32 sum on the other side of a tie; a bias is added to the float32 sums
    before that rounding, as PyTorch adds it) plus ``2 K eps32 (|a| @ |b|)``, a float32 sum's
    reordering."""

    def call(a, b, out=None, bias=None):
        got = fast(a, b, out, bias)
        if got is not None:
            a32, b32 = a.astype(np.float32), b.astype(np.float32)
            want = np.matmul(a32, b32)
            if bias is not None:
                want += bias.astype(np.float32)
            want = want.astype(a.dtype)
            message = f"chgemm.matmul on {a.shape} @ {b.shape}"
            assert got.shape == want.shape and got.dtype == want.dtype, message
            g, w = got.astype(np.float64), want.astype(np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                eps = float(ml_dtypes.finfo(a.dtype).eps)
                scale = np.matmul(np.abs(a32), np.abs(b32)).astype(np.float64)
                bound = eps * (np.abs(w) + eps * scale)
                bound += 2 * a.shape[-1] * float(np.finfo(np.float32).eps) * scale
                ok = (g == w) | (np.isnan(g) & np.isnan(w))
                ok |= np.isfinite(w) & (np.abs(g - w) <= bound)
            assert ok.all(), message
        return got

    return call


def _checked_cast(fast):
    """``chalf.cast`` with each call checked against NumPy's ``astype`` bit for bit (NaN as
    NaN: payloads are not specified)."""

    def call(x, dtype, out=None):
        got = fast(x, dtype, out)
        if got is not None:
            with np.errstate(invalid="ignore", over="ignore"):
                want = x.astype(dtype)
                nan = np.isnan(want.astype(np.float32))
            assert got.shape == want.shape and got.dtype == want.dtype, "chalf.cast"
            np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
            bits = np.uint16 if want.itemsize == 2 else np.uint32
            assert (got.view(bits)[~nan] == want.view(bits)[~nan]).all(), "chalf.cast"
        return got

    return call


def _log_softmax_reference(x, axis, dtype=None):
    """ops/softmax.py's NumPy kernel, of x widened to ``dtype`` (a NumPy dtype) when given."""
    return _log_softmax_kernel(
        x, axis=axis, dtype=None if dtype is None else ember.dtypes.as_dtype(dtype)
    )


def _checked_softmax(fast, reference):
    """A kernels/csoftmax.py kernel checked against the NumPy kernel of ops/softmax.py: the
    same arithmetic but for the C library's exp and the order of each row's sum, so within
    64 ulps of the row's scale (the row: along the kernel's axis)."""
    signature = inspect.signature(fast)

    def call(x, *args, **kwargs):
        got = fast(x, *args, **kwargs)
        if got is not None:
            bound = signature.bind(x, *args, **kwargs)
            bound.apply_defaults()
            axis = bound.arguments["axis"]
            want = reference(*bound.args)
            assert got.shape == want.shape and got.dtype == want.dtype, fast.__name__
            half = want.dtype in (np.float16, ember.bfloat16.np)
            # (half precision: float32 arithmetic rounded once, so the float32 bound plus one
            # unit in the last place of the 16-bit result)
            ulp = np.spacing(np.abs(want)).astype(np.float64) if half else 0.0
            g, w = (a.astype(np.float64) for a in (got, want)) if half else (got, want)
            finite = np.isfinite(w)
            np.testing.assert_array_equal(np.isfinite(g), finite, err_msg=fast.__name__)
            tol = 64 * np.finfo(np.float32 if half else w.dtype).eps
            scale = np.max(np.abs(np.where(finite, w, 0)), axis=axis, keepdims=True)
            limit = tol * np.maximum(scale, 1) + np.where(finite, ulp, 0)
            close = np.abs(np.where(finite, g - w, 0)) <= limit
            assert close.all(), f"csoftmax.{fast.__name__}"
        return got

    return call


def _checked_recurrent(name, reference):
    """A kernels/crnn.py whole-layer kernel checked against ops/recurrent.py's NumPy kernel on
    the same inputs: the same arithmetic but for the C library's exp and tanh and the order of
    the products' sums, so within 64 eps * sqrt(the terms summed) of each output's scale."""
    fast = getattr(crnn, name)

    def call(*args, **kwargs):  # (``packs``: a frozen weight's kept panels)
        got = fast(*args, **kwargs)
        if got is not None:
            *arrays, reverse = args
            want = reference(*[np.array(a, copy=True) for a in arrays], reverse=reverse)
            # (a step's products sum gates x hidden terms; the weight gradient's, steps x rows)
            steps, rows = want[0].shape[:2]
            terms = max(1, arrays[-1].shape[0] * steps, steps * rows)
            for k, (g, w) in enumerate(zip(got, want)):
                assert g.shape == w.shape and g.dtype == w.dtype, f"crnn.{name}: output {k}"
                finite = np.isfinite(w)
                np.testing.assert_array_equal(np.isfinite(g), finite, err_msg=f"crnn.{name}")
                tol = 64 * np.finfo(w.dtype).eps * np.sqrt(terms)
                scale = max(1.0, float(np.max(np.abs(w[finite]), initial=0)))
                np.testing.assert_allclose(
                    g[finite], w[finite], rtol=tol, atol=tol * scale, err_msg=f"crnn.{name}"
                )
        return got

    return call


def _checked_conv(name, module=cconv):
    """``cconv.<name>`` (or ``cdepthwise.<name>``) with each call that returns an array
    checked against the NumPy kernel of ops/_conv_kernels.py (the forward and the input
    gradient with their bias added after, the forward's residual after that, its clamp (a
    ReLU) last)."""
    fast, reference = getattr(module, name), getattr(_conv_kernels, name)
    counts = {}

    def call(a, b, p, groups, *epilogue, **kwargs):
        got = fast(a, b, p, groups, *epilogue, **kwargs)
        if got is not None and _checked_call(counts, (a.shape, b.shape, str(a.dtype), groups)):
            half = a.dtype in (np.float16, ember.bfloat16.np)
            # the reference's arithmetic: half precision's float32 sums plus the bias, rounded
            # once, as the ops and PyTorch do
            wide = (lambda v: v.astype(np.float32)) if half else (lambda v: v)
            want = reference(wide(a), wide(b), p, groups)
            bias = epilogue[0] if epilogue else kwargs.get("bias")
            if bias is not None:
                want = want + wide(bias).reshape((1, -1) + (1,) * (want.ndim - 2))
            want = want.astype(a.dtype)
            residual = (epilogue[3:] or (kwargs.get("residual"),))[0]
            if residual is not None:  # (a residual block's shortcut, added before the clamp)
                want = want + residual
            clamp = (epilogue[1:] or (kwargs.get("relu", kwargs.get("clamp")),))[0]
            if clamp is True:  # a ReLU: maximum(x, 0)
                clamp = (0.0, np.inf, True, False)
            if clamp:  # (lo, hi, lo takes ties, hi takes ties), NaN kept
                lo, hi = (want.dtype.type(b) for b in clamp[:2])
                want = np.where(want <= lo if clamp[2] else want < lo, lo, want)
                want = np.where(want >= hi if clamp[3] else want > hi, hi, want)
            if clamp and len(clamp) > 5 and clamp[5] is not None:  # the store's activation
                activation = clamp[5]  # (kernels/cconv_activation.py: its NumPy kernels)
                with np.errstate(all="ignore"):
                    want = evaluate_program(activation.program, (activation.output,), [want])[0]
            message = f"{module.__name__}.{name} on {a.shape}, {b.shape}"
            _assert_close_to_reference(got, want, message)
            mask = (epilogue[2:] or (kwargs.get("mask"),))[0]
            if mask is not None:  # got > 0 exactly; want may round to the other side of 0
                # (or got != 0, NaN true, where the clamp block's fifth entry says so)
                not_zero = bool(clamp) and len(clamp) > 4 and clamp[4]
                test = np.not_equal if not_zero else np.greater
                assert np.array_equal(mask, test(got, 0)), message
                flips = mask != test(want, 0)
                scale = np.abs(np.nan_to_num(want, nan=0, posinf=0, neginf=0)).max()
                assert np.all(np.abs(want[flips]) <= 1e-4 * scale), message
        return got

    return call


def _checked_batch_norm(name):
    """``cbatchnorm.<name>`` with each call that returns arrays checked against the NumPy
    kernels of ops/batch_norm.py: within 1e-4 (float32) of each result's own scale, times the
    input's conditioning (its largest magnitude over its smallest channel deviation: centring
    rounds at the scale of the values, not of their deviations). A sum's scale is the sum of
    its terms' magnitudes (a mean near zero, a weight gradient that cancels)."""
    fast = getattr(cbatchnorm, name)
    counts = {}

    def call(*args):
        got = fast(*args)
        if got is None or not _checked_call(counts, tuple(np.shape(a) for a in args)):
            return got
        axes = (0,) + tuple(range(2, args[0].ndim))
        if name == "train_forward":
            x, w, b, eps = args
            want = _batch_norm._train_kernel(x, w, b, eps=eps)
            spread = np.sqrt(want[2].astype(np.float64) + eps)
            ax = np.abs(x.astype(np.float64))
            scales = [None, ax.max(initial=0), (ax * ax).max(initial=0)]
        elif name == "train_backward":
            gy, x, mean, var, w, eps = args
            zeros = np.zeros_like(mean)
            want = _batch_norm._backward_kernel(gy, zeros, zeros, x, mean, var, w, eps=eps)
            spread = np.sqrt(var.astype(np.float64) + eps)
            view = (1, -1) + (1,) * (x.ndim - 2)
            ag = np.abs(gy.astype(np.float64))
            xhat = np.abs(x - mean.reshape(view)) / spread.reshape(view)
            scales = [None, (ag * xhat).sum(axes).max(initial=0), ag.sum(axes).max(initial=0)]
        else:
            if name == "eval_normalize":  # the terms rounded to x's dtype, then the affine
                x, *per_channel, eps = args
                terms = _batch_norm._scale_shift(*per_channel, eps)
                args = (x, *(t.astype(x.dtype).astype(np.float64) for t in terms))
            x, scale, shift = args
            view = (1, -1) + (1,) * (x.ndim - 2)
            y = x.astype(np.float64) * scale.reshape(view) + shift.reshape(view)
            want, spread, scales = (y.astype(x.dtype),), None, [None]
        x = args[0] if name != "train_backward" else args[1]
        values = np.abs(x[np.isfinite(x)])
        condition = 1.0
        if spread is not None and values.size and np.isfinite(spread).all():
            condition = max(1.0, float(values.max()) / max(float(spread.min()), 1e-30))
        got_all = got if isinstance(got, tuple) else (got,)
        for g, w, scale in zip(got_all, want, scales):
            message = f"cbatchnorm.{name} on {x.shape}"
            assert g.shape == w.shape and g.dtype == w.dtype, message
            finite = np.isfinite(w)
            np.testing.assert_array_equal(np.isfinite(g), finite, err_msg=message)
            if scale is None or not np.isfinite(scale):
                scale = float(np.abs(w[finite]).max()) if finite.any() else 0.0
            if w.dtype in (np.float16, ember.bfloat16.np):
                # double arithmetic in another order, rounded once to 16 bits: the double bound,
                # plus one unit in the last place (a sum on the other side of a tie)
                gf, wf = g[finite].astype(np.float64), w[finite].astype(np.float64)
                ulp = np.spacing(np.abs(w[finite])).astype(np.float64)
                limit = 1e-11 * condition * (np.abs(wf) + scale) + ulp
                assert np.all(np.abs(gf - wf) <= limit), message
                continue
            tol = (1e-4 if w.dtype == np.float32 else 1e-11) * condition
            np.testing.assert_allclose(
                g[finite], w[finite], rtol=tol, atol=tol * scale, err_msg=message
            )
        return got

    return call


def _scatter_reference(g, indices, in_size, mask=None, fill=0.0, out=None, window=None):
    out = _scatter_kernel(g, indices, in_size=in_size, window=window)
    return out if mask is None else np.where(mask, out, out.dtype.type(fill))


def _max_pool_reference(x, kernel, stride, padding, dilation, out_size, codes=None):
    from ember.kernels.pool_geometry import pool_out_size

    # the output size tells whether windows past the end were asked for
    floor = tuple(
        pool_out_size(n, k, s, p, d, False)
        for n, k, s, p, d in zip(x.shape[2:], kernel, stride, padding, dilation)
    )
    attrs = dict(kernel=kernel, stride=stride, padding=padding, dilation=dilation)
    # (half precision: the NumPy kernel on a float32 copy, rounded back)
    ceil_mode = tuple(out_size) != floor
    return _max_pool_kernel(x, **attrs, ceil_mode=ceil_mode, codes=codes is not None)


def _checked_pooling(fast, reference):
    """A kernels/cpooling.py kernel with each call that returns something checked against the
    NumPy kernel of ops/pool.py, bit for bit."""

    def call(*args, **kwargs):
        got = fast(*args, **kwargs)
        if got is not None:
            want = reference(*args, **kwargs)
            pairs = zip(got, want) if isinstance(want, tuple) else ((got, want),)
            for g, w in pairs:
                assert g.shape == w.shape and g.dtype == w.dtype, fast.__name__
                assert g.tobytes() == w.tobytes(), f"cpooling.{fast.__name__}"
        return got

    return call


def _checked_index(fast):
    """kernels/cindex.py's scatter-add with each call that returns something checked against
    the NumPy kernel (ops/_scatter_kernels.py), bit for bit."""

    def call(in_shape, axis, idx, g):
        got = fast(in_shape, axis, idx, g)
        if got is not None:
            want = _add_slices_reference(in_shape, axis, idx, g)
            assert got.shape == want.shape and got.dtype == want.dtype
            # (NaN where NaN: its sign and payload follow the order of an addition's operands,
            # which the compiler may swap)
            nan = np.isnan(want.astype(np.float64))
            assert np.array_equal(np.isnan(got.astype(np.float64)), nan), "cindex.add_slices"
            assert got[~nan].tobytes() == want[~nan].tobytes(), "cindex.add_slices"
        return got

    return call


def _checked_csr(fast):
    """kernels/csparse.py's CSR product with each call checked against the product in float64
    within the error bound of its sums (each result element sums at most a row's nonzeros,
    fused multiply-adds or not: gamma_n |A| |x|)."""

    def call(indptr, indices, data, x, rows):
        got = fast(indptr, indices, data, x, rows)
        if got is not None and got.size:
            counts = np.diff(indptr)
            row_of = np.repeat(np.arange(rows), counts)
            want = np.zeros(got.shape)
            scale = np.zeros(got.shape)
            np.add.at(want, row_of, data[:, None].astype(np.float64) * x[indices])
            np.add.at(scale, row_of, np.abs(data[:, None].astype(np.float64) * x[indices]))
            n = int(counts.max()) + 1 if counts.size else 1
            eps = np.finfo(got.dtype).eps / 2
            # (NaN and infinities where the float64 sums have them; bounded errors elsewhere)
            finite = np.isfinite(want)
            assert np.array_equal(np.isnan(got), np.isnan(want)), "csparse.csr_mm NaN"
            assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)]), "csparse.csr_mm inf"
            error = np.abs(got - want)[finite]
            assert np.all(error <= (1.01 * n * eps * scale)[finite]), "csparse.csr_mm"
        return got

    return call


# (owner, attribute) -> the executor or kernel builder as it runs outside the tests
_ORIGINALS: dict = {}
_RECURRENT_REFERENCES = {
    "lstm_forward": recurrent._lstm_kernel,
    "lstm_backward": recurrent._lstm_grad_kernel,
    "gru_forward": recurrent._gru_kernel,
    "gru_backward": recurrent._gru_grad_kernel,
}


def _checked_q8(name):
    """kernels/cq8's ``name`` (linear, conv2d) checked against the ops' NumPy reference (the
    exact int32 sums, then the epilogue), bit for bit."""
    fast = getattr(cq8, name)

    def call(x, w, scale, bias, **kw):
        got = fast(x, w, scale, bias, **kw)
        if got is None:
            return None
        zp = kw.get("x_zero_point", 0)
        if name == "linear":
            acc = _quantized.linear_acc(x, w, zp)
        else:
            geometry = [
                kw.get(k, d)
                for k, d in (("stride", (1, 1)), ("padding", (0, 0)), ("dilation", (1, 1)))
            ]
            acc = _quantized.conv_acc(x, w, zp, *geometry, kw.get("groups", 1))
        bias = np.zeros(w.shape[0], np.float32) if bias is None else bias
        want = _quantized.epilogue(
            acc, np.asarray(scale, np.float32), np.asarray(bias, np.float32),
            relu=kw.get("relu", False), out_dtype=kw.get("out_dtype", "float32"),
            out_scale=kw.get("out_scale", 1.0), out_zero_point=kw.get("out_zero_point", 0),
            axis=1,
        )  # fmt: skip
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), f"cq8.{name}"
        return got

    return call


def _checked_quantize(fast):
    """kernels/cq8's quantize checked against ops/quantize.py's NumPy definition, bit for bit."""

    def call(x, scale, zero_point, out_dtype, portable=False):
        got = fast(x, scale, zero_point, out_dtype, portable)
        if got is not None:
            lo, hi = (0, 255) if out_dtype == "uint8" else (-128, 127)
            want = _quantize_array(x, np.float32(scale), zero_point, lo, hi, np.dtype(out_dtype))
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), "cq8.quantize"
        return got

    return call


def _check(monkeypatch, owner, name: str, checked) -> None:
    """Replace ``owner.name`` by its ``checked`` version for one test, remembering the original
    for `bare_executors`."""
    _ORIGINALS.setdefault((owner, name), getattr(owner, name))
    monkeypatch.setattr(owner, name, checked)


@pytest.fixture
def bare_executors(monkeypatch):
    """The executors and kernels without this file's checks: tests that measure memory
    (tracemalloc would count the reference runs' arrays) or time use this fixture."""
    for (owner, name), original in _ORIGINALS.items():
        monkeypatch.setattr(owner, name, original)


@pytest.fixture(autouse=True)
def process_switches_unchanged():
    """Each test leaves the process-wide switches (tests/global_switches.py: ember's grad mode,
    default dtype, autocast, flags and printoptions, NumPy's and PyTorch's, the environment, the
    working folder) as it found them, else it fails, naming them, and they are put back: a
    leaked switch would show only as a later test's failure, in some orders and not others.
    Set up before this file's other fixtures (they ask for it), so what they and the test's
    own fixtures (monkeypatch) change is undone before the check."""
    before = global_switches.snapshot()
    yield
    changed = global_switches.changed_since(before)
    if changed:
        pytest.fail(
            "the test changed process-wide switches and did not restore them (use a `with` "
            "block or monkeypatch):\n  " + "\n  ".join(changed),
            pytrace=False,
        )


# PyTorch's default generator's seed in a fresh process (torch.initial_seed() there)
_TORCH_DEFAULT_SEED = 67280421310721


@pytest.fixture(autouse=True)
def default_generator_seeded_per_test(process_switches_unchanged):
    """Every test starts from the state ember's default generator has in a fresh process, and
    leaves it as it found it: a test's random weights do not depend on which tests ran before
    it (an unseeded test passed or failed with the suite's order and its selection). PyTorch's
    too, once imported: a reference module's random initial weights, copied into ember's, come
    from it."""
    saved = ember.get_rng_state()
    ember.manual_seed(ember_random._DEFAULT_SEED)  # as in a fresh process
    torch = sys.modules.get("torch")
    torch_saved = None if torch is None else torch.get_rng_state()
    if torch is not None:
        torch.manual_seed(_TORCH_DEFAULT_SEED)
    yield
    ember.set_rng_state(saved)
    if torch_saved is not None:
        torch.set_rng_state(torch_saved)


@pytest.fixture(autouse=True)
def generated_code_equals_the_interpreter(process_switches_unchanged, monkeypatch):
    original = codegen.CompiledGraph.__call__

    def checked(self, *arrays):
        if _draws_random_numbers(self.graph):
            return original(self, *arrays)
        if not _checked_call(self.__dict__.setdefault("_suite_calls", {}), None):
            return original(self, *arrays)
        # the interpreter first, on copies: generated code may update inputs in place
        expected = interpreter.run(self.graph, [np.array(a, copy=True) for a in arrays])
        planned = _arena_version(self)
        if planned is not None:
            copies = [np.array(a, copy=True) for a in arrays]
            # its plain function: a recording profiler must see the suite's calls, not this check
            in_arena = [np.array(r, copy=True) for r in planned._fn(*copies)]
        results = original(self, *arrays)
        assert len(results) == len(expected)
        fused = any(
            n.kind == "call" and (n.op.fused is not None or n.op.fast is not None)
            for n in self.graph.nodes
        )
        largest = _largest_float(expected)
        if planned is not None:
            for i, (got, want) in enumerate(zip(in_arena, results)):
                message = f"graph {self.graph.name}: output {i} in planned (arena) execution"
                rounded = functools.partial(_rounded_from_float, self.graph.outputs[i])
                _assert_same(got, np.asarray(want), fused, message, largest, rounded)
            _schedule_does_not_raise_the_peak(self.graph)
        for i, (got, want) in enumerate(zip(results, expected)):
            message = f"graph {self.graph.name}: output {i}"
            rounded = functools.partial(_rounded_from_float, self.graph.outputs[i])
            _assert_same(np.asarray(got), want, fused, message, largest, rounded)
        return results

    _check(monkeypatch, codegen.CompiledGraph, "__call__", checked)
    _check(monkeypatch, auto.AutoProgram, "__call__", _checked_auto(auto.AutoProgram.__call__))
    _check(monkeypatch, cfuse, "build", _checked_fused(cfuse.build))
    # bit-identical to the NumPy kernel
    _check(monkeypatch, cpooling, "build_scatter", _checked_exactly(cpooling.build_scatter))
    _check(monkeypatch, cpooling, "scatter", _checked_pooling(cpooling.scatter, _scatter_reference))
    _check(monkeypatch, cindex, "add_slices", _checked_index(cindex.add_slices))
    _check(monkeypatch, csparse, "csr_mm", _checked_csr(csparse.csr_mm))
    _check(
        monkeypatch,
        cpooling,
        "max_pool_2d",
        _checked_pooling(cpooling.max_pool_2d, _max_pool_reference),
    )
    _check(monkeypatch, cepilogue, "build", _checked_epilogue(cepilogue.build))
    for name in ("conv_forward", "conv_input_grad", "conv_weight_grad"):
        compiled = cconv_weight if name == "conv_weight_grad" else cconv
        _check(monkeypatch, compiled, name, _checked_conv(name, compiled))
        _check(monkeypatch, cdepthwise, name, _checked_conv(name, cdepthwise))
    for name in ("train_forward", "train_backward", "eval_forward", "eval_normalize"):
        _check(monkeypatch, cbatchnorm, name, _checked_batch_norm(name))
    _check(monkeypatch, cgemm, "matmul", _checked_product(cgemm.matmul))
    for name in ("linear", "conv2d"):
        _check(monkeypatch, cq8, name, _checked_q8(name))
    _check(monkeypatch, cq8, "quantize", _checked_quantize(cq8.quantize))
    _check(monkeypatch, chgemm, "matmul", _checked_half_product(chgemm.matmul))
    _check(monkeypatch, chalf, "cast", _checked_cast(chalf.cast))
    for name, reference in _RECURRENT_REFERENCES.items():
        _check(monkeypatch, crnn, name, _checked_recurrent(name, reference))
    _check(
        monkeypatch,
        csoftmax,
        "softmax",
        _checked_softmax(
            csoftmax.softmax, lambda x, safe, axis: _softmax_kernel(x, axis=axis, safe=safe)
        ),
    )
    _check(
        monkeypatch,
        csoftmax,
        "log_softmax",
        _checked_softmax(csoftmax.log_softmax, _log_softmax_reference),
    )
    yield
