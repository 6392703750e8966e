"""Fused C loops (kernels/cfuse.py) built two ways, timed interleaved: by default at ``-O3``
against ``-O1 -ftree-vectorize`` (the optimisation level of the generated loops, which costs
compile time on every fresh cache; cfuse builds loops without reductions at the second).
Representative loops in float32 and float64: elementwise chains (a bias row, GELU through
erf, tanh's gradient, leaky_relu's slope), reductions (row sums and maxima, column sums) and
Adam's update (three outputs written in place).

Each case is run on one thread (``EMBER_NUM_THREADS=1``), timed with ``time.thread_time``,
the two builds alternating within each repetition; the outputs of both builds are checked equal
bit for bit first. Prints per case the median and fastest time per call of each build and the
ratio of the medians (second / first).

    EMBER_NUM_THREADS=1 python benchmarks/fused_opt_level.py [--reps 15] [--n 65536]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

os.environ.setdefault("EMBER_NUM_THREADS", "1")

from ember import dtypes as dt  # noqa: E402
from ember.kernels import cfuse  # noqa: E402
from ember.ops import REGISTRY  # noqa: E402
from ember.ops.program import Const, Input, Instr, Program, Temp  # noqa: E402
from ember.types import TensorType  # noqa: E402


def _i(name, *operands, **attrs):
    return Instr(REGISTRY[name], tuple(operands), tuple(sorted(attrs.items())))


def cases(dtype, rows, cols):
    """(name, program, outputs, in shapes, out shapes) of the representative loops."""
    x, c = Input, (lambda v: Const(float(v), dtype))
    full, row = (rows, cols), (cols,)
    yield "bias+relu", Program((_i("add", x(0), x(1)), _i("relu", Temp(0)))), (1,), [full, row]
    gelu = (
        _i("mul", x(0), c(0.7071067811865476)),
        _i("erf", Temp(0)),
        _i("add", Temp(1), c(1.0)),
        _i("mul", x(0), Temp(2)),
        _i("mul", Temp(3), c(0.5)),
    )
    yield "gelu(erf)", Program(gelu), (4,), [full]
    tanh_grad = (_i("mul", x(1), x(1)), _i("sub", c(1.0), Temp(0)), _i("mul", x(0), Temp(1)))
    yield "tanh grad", Program(tanh_grad), (2,), [full, full]
    yield "leaky_relu", Program((_i("leaky_relu", x(0), slope=0.01),)), (0,), [full]
    adam = (  # in: p, g, m, v
        _i("mul", x(2), c(0.9)),
        _i("mul", x(1), c(0.1)),
        _i("add", Temp(0), Temp(1)),  # m'
        _i("mul", x(3), c(0.999)),
        _i("mul", x(1), x(1)),
        _i("mul", Temp(4), c(0.001)),
        _i("add", Temp(3), Temp(5)),  # v'
        _i("sqrt", Temp(6)),
        _i("add", Temp(7), c(1e-8)),
        _i("mul", Temp(2), c(3e-4)),
        _i("div", Temp(9), Temp(8)),
        _i("sub", x(0), Temp(10)),  # p'
    )
    yield "adam", Program(adam), (11, 2, 6), [full] * 4
    rsum = (_i("mul", x(0), x(1)), _i("sum", Temp(0), axes=(1,), keepdims=False))
    yield "row sum(x*y)", Program(rsum), (1,), [full, full]
    rmax = (_i("max", x(0), axes=(1,), keepdims=True),)
    yield "row max", Program(rmax), (0,), [full]
    csum = (_i("mul", x(0), x(0)), _i("sum", Temp(0), axes=(0,), keepdims=False))
    yield "column sum(x*x)", Program(csum), (1,), [full]


def _types(program, outputs, in_types):
    from ember.ops.program import program_types

    types = program_types(program, in_types)
    return [types[j] for j in outputs]


def build(program, outputs, in_types, flags):
    saved = cfuse._loop_flags
    cfuse._loop_flags = lambda program, outputs: flags  # these flags, reductions or not
    try:
        return cfuse.build_program(program, outputs, _types(program, outputs, in_types), in_types)
    finally:
        cfuse._loop_flags = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--n", type=int, default=1 << 16, help="elements per call")
    parser.add_argument("--calls", type=int, default=20, help="calls per timed repetition")
    parser.add_argument("--first", default="-O3", help="the first build's optimisation flags")
    parser.add_argument(
        "--second", default="-O1 -ftree-vectorize", help="the second build's optimisation flags"
    )
    args = parser.parse_args()
    sides = []
    for level in (args.first, args.second):
        flags = tuple(w for f in cfuse._FLAGS for w in (level.split() if f == "-O3" else [f]))
        sides.append((level, flags))
    cols = 256
    rows = args.n // cols
    rng = np.random.default_rng(0)
    print(
        f"{args.n} elements ({rows} x {cols}), {args.calls} calls per repetition, "
        f"{args.reps} repetitions; ms per call, median (fastest)"
    )
    for dtype in (dt.float32, dt.float64):
        for name, program, outputs, shapes in cases(dtype, rows, cols):
            in_types = [TensorType(s, dtype) for s in shapes]
            arrays = [rng.standard_normal(s).astype(dtype.np) for s in shapes]
            if name == "adam":
                arrays[3] = np.abs(arrays[3])
            runs = [build(program, outputs, in_types, flags) for _, flags in sides]
            results = [run(*arrays) for run in runs]
            for a, b in zip(*results):
                assert a.tobytes() == b.tobytes(), name
            times = [[] for _ in sides]
            for _ in range(args.reps):
                for k, run in enumerate(runs):
                    start = time.thread_time()
                    for _ in range(args.calls):
                        run(*arrays)
                    times[k].append((time.thread_time() - start) / args.calls * 1e3)
            med = [statistics.median(t) for t in times]
            parts = [
                f"{label} {m:.3f} ({min(t):.3f})" for (label, _), m, t in zip(sides, med, times)
            ]
            ratio = f"  ratio {med[1] / med[0]:.3f}"
            print(f"{dtype.name:8s} {name:16s} " + "  ".join(parts) + ratio)


if __name__ == "__main__":
    main()
