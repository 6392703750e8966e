"""The fuzzer's programs (tests/torch_diff_fuzzing.py) captured: each program that agrees
with PyTorch eagerly is replayed as one function under ``ember.function`` and compared with
its eager replay in ember: every result's values, dtype and shape, and the inputs' gradients
of the fuzzer's weighted sum of the floating results. A program whose shapes depend on its
data is refused by capture with a TraceError (ember's rule) and skipped.

``python -m tests.torch_diff_capture LO HI [wide]`` runs seeds LO..HI-1 and prints each
divergence."""

from __future__ import annotations

import sys
import traceback
import warnings

import numpy as np

import ember
from ember.errors import TraceError
from ember.ops.checks import CheckFailedError
from tests.torch_diff_fuzzing import _check, _tolerance, compare_ember
from tests.torch_diff_ops import Fresh


def _replay(record, tensors):
    """The program's steps on ember tensors ``tensors`` (its inputs): every pool tensor."""
    pool = list(tensors)
    for call, positions, kept in record["steps"]:
        out = call.run(ember, [pool[i] for i in positions])
        if isinstance(out, (bool, int, float, str)):
            continue
        # (a traced tensor is no ember.Tensor: a list or tuple is what holds several results)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        pool.extend(outs[k] for k in kept)
    return pool


def _inputs(record):
    return [Fresh(arr, dtype).make(ember, grad) for arr, dtype, grad in record["inputs"]]


def _weighted_grads(inputs, pool):
    terms = []
    for t in pool:
        if t.requires_grad and t.dtype.is_floating_point:
            w = np.cos(np.arange(t.numel(), dtype=np.float64) + len(terms)).reshape(tuple(t.shape))
            terms.append((t.double() * ember.tensor(w)).sum())
    if not terms:
        return None
    sum(terms).backward()
    return [x.grad for x in inputs]


def check_capture(seed: int, wide: bool = False) -> list[str]:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        record: dict = {}
        if _check(seed, (3, 10), wide, record) or "steps" not in record:
            return []  # (an eager divergence is the eager fuzzer's finding)
        eager_in = _inputs(record)
        try:
            eager = _replay(record, eager_in)
        except Exception:  # noqa: BLE001 - an eager error (matched by PyTorch's): not captured
            return []
        log = " ; ".join(c.text for c, _, _ in record["steps"])
        if "leaf(" in log:
            # (a leaf made inside the function, requires_grad_() on a detached clone, is a
            # constant of the captured graph: its results need no grad there)
            return []
        captured_in = _inputs(record)
        try:
            captured = ember.function(lambda *xs: _replay(record, xs))(*captured_in)
        except (TraceError, CheckFailedError):
            # data-dependent shapes: refused while built, or by a run-time check (bincount's
            # values beyond a captured minlength), as documented
            return []
        except Exception as exc:  # noqa: BLE001
            tb = traceback.format_exc(limit=-4)
            return [
                f"seed {seed} capture raised {type(exc).__name__}({exc})\n{tb}\n program: {log}"
            ]
        problems = []
        if len(captured) != len(eager):
            return [f"seed {seed} capture: {len(captured)} results != eager {len(eager)}"]
        tol = _tolerance([(t, t, "") for t in eager])
        for k, (a, b) in enumerate(zip(eager, captured)):
            diff = compare_ember(a, b, f"seed {seed} capture result {k}", tol)
            if diff:
                problems.append(diff)
        if not problems:
            try:
                ge = _weighted_grads(eager_in, eager)
            except Exception:  # noqa: BLE001 - eager refuses (PyTorch does too): nothing
                ge = None
            if ge is not None:
                try:
                    gc = _weighted_grads(captured_in, captured)
                except Exception as exc:  # noqa: BLE001
                    return [f"seed {seed} capture backward raised {exc!r}\n program: {log}"]
                for i, (a, b) in enumerate(zip(ge, gc)):
                    if a is None and b is not None and not b.any():
                        # a captured function is one node: the inputs that its used results
                        # do not reach get zeros where eagerly they get no gradient at all
                        continue
                    if (a is None) != (b is None):
                        problems.append(f"seed {seed} capture grad of x{i}: {a} vs {b}")
                    elif a is not None:
                        diff = compare_ember(a, b, f"seed {seed} capture grad of x{i}", tol)
                        if diff:
                            problems.append(diff)
        return [p + f"\n program: {log}" for p in problems]


if __name__ == "__main__":
    lo, hi = int(sys.argv[1]), int(sys.argv[2])
    found = []
    for s in range(lo, hi):
        try:
            found.extend(check_capture(s, wide="wide" in sys.argv[3:]))
        except Exception as exc:  # noqa: BLE001
            found.append(f"seed {s}: harness {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    for f in found:
        print(f, "\n")
    print(f"{len(found)} divergences in {hi - lo} programs")
