"""Differential fuzzing of eager ember against PyTorch with random small programs.

A program starts from one to three random tensors (float32, float64, int64 or bool; rank 0-3,
sometimes a zero-size dimension; the floating ones require grad) and applies 3-10 steps drawn
from `ops_vocab.OPS`: elementwise math with tensors and Python scalars (type promotion),
reductions with dims and keepdim, basic and advanced indexing, gathers and scatters, joins and
splits, views, products, normalizations, sorts and scans, masked fills and in-place ops on
non-leaf tensors and their views. Parameters are drawn from the PyTorch values' shapes, now and
then out of range, so errors are exercised too. Every step runs on both frameworks: a PyTorch
exception must be matched by an ember exception that is an instance of the same built-in type;
otherwise values (NaNs equal), dtypes, shapes and ``requires_grad`` must agree. Finally a
weighted sum of every floating result is differentiated and the inputs' gradients compared
(None where PyTorch has None).

`check(seed)` returns a list of divergences (empty when none); `fuzz(seeds)` runs many.
``python tests/torch_diff_fuzzing.py 0 3000`` runs seeds 0-2999 and prints each divergence.
"""

from __future__ import annotations

import random
import sys
import traceback
import warnings

import numpy as np
import torch

import ember
import tests.torch_diff_ops_dtypes  # noqa: F401 - fills the wide profile's tables
import tests.torch_diff_ops_nn  # noqa: F401 - registers the wide profile's layers and linalg
import tests.torch_diff_ops_views  # noqa: F401 - registers the wide profile's view ops
from tests.torch_diff_ops import OPS, WIDE_DTYPES, WIDE_OPS, Ctx, Fresh, _array

DTYPES = ["float32", "float64", "int64", "bool"]
# the largest difference allowed between two results of a dtype (relative and absolute):
# 16-bit floats carry one rounding per op, which later steps may carry along
TOLERANCE = {"float32": 2e-4, "complex64": 2e-4, "float16": 1e-2, "bfloat16": 4e-2}

# torch refuses where ember deliberately accepts more: Python scalars for tensor-only operands
# (maximum, atan2, ...)
LENIENT = (
    # ember has no complex32 (PyTorch's experimental ComplexHalf): complex64 stands in
    "for 'ComplexHalf'",
    "must be Tensor, not",
    "received an invalid combination of arguments",
    "missing 1 required positional",
)


# backward failures of PyTorch that ember deliberately does not share: floor_divide and
# bincount have no derivative there (ember's floor_divide's is zero, as
# div(rounding_mode="floor")'s in both), and atan2's
# backward negates a bool operand's values even when that operand needs no gradient
LENIENT_BACKWARD = (
    "derivative for aten::floor_divide",
    "derivative for aten::bincount",  # (ember's weights get their gradient: the counts' rows)
    "Negation, the `-` operator, on a bool tensor",
)


def _name(dtype) -> str:
    return str(dtype).rsplit(".", 1)[-1]


def _random_shape(rng: random.Random) -> tuple:
    rank = rng.choice([0, 1, 1, 2, 2, 2, 3, 3])
    shape = [rng.randint(1, 4) for _ in range(rank)]
    if shape and rng.random() < 0.05:
        shape[rng.randrange(rank)] = 0
    return tuple(shape)


def random_array(rng: random.Random, shape: tuple, dtype: str) -> np.ndarray:
    g = np.random.default_rng(rng.randrange(2**31))
    if dtype == "bool":
        return g.random(shape) < 0.5
    if dtype == "int64":
        return g.integers(-4, 5, size=shape).astype(np.int64)
    return g.standard_normal(shape).astype(dtype)


def _pair(arr: np.ndarray, grad: bool, dtype: str | None = None):
    fresh = Fresh(arr, dtype or str(arr.dtype))
    return fresh.make(torch, grad), fresh.make(ember, grad)


def _numpy(x) -> np.ndarray:
    """A tensor's values as NumPy (bfloat16 widened to float32, which NumPy lacks)."""
    x = x.detach().resolve_conj()
    if _name(x.dtype) == "bfloat16":
        x = x.float()
    return np.asarray(x.numpy())


def _as_list(out):
    if isinstance(out, (torch.Tensor, ember.Tensor)):
        return [out]
    return list(out)


def compare(t, e, where: str, tol: float | None = None) -> str | None:
    """The difference between a torch tensor and an ember tensor, or None (``tol``: the
    tolerance, else the dtype's)."""
    if not isinstance(e, ember.Tensor):
        return f"{where}: ember gave {type(e).__name__}, torch a tensor"
    if tuple(t.shape) != tuple(e.shape):
        return f"{where}: shape {tuple(e.shape)} != torch {tuple(t.shape)}"
    if _name(t.dtype) != _name(e.dtype):
        return f"{where}: dtype {_name(e.dtype)} != torch {_name(t.dtype)}"
    if t.requires_grad != e.requires_grad:
        return f"{where}: requires_grad {e.requires_grad} != torch {t.requires_grad}"
    a, b = _numpy(t), _numpy(e)
    if a.dtype.kind in "fc":
        # float64 results of float32 steps carry float32's last-bit differences
        tol = tol or TOLERANCE.get(_name(t.dtype), 1e-6)
        ok = np.allclose(b, a, rtol=tol, atol=tol, equal_nan=True)
    else:
        ok = np.array_equal(a, b)
    if not ok:
        return f"{where}: values differ\n ember {b!r}\n torch {a!r}"
    return None


def compare_ember(a, b, where: str, tol: float | None = None) -> str | None:
    """The difference between two ember tensors (eager and captured), or None."""
    return compare(_as_torch(a), b, where, tol)


def _as_torch(e):
    """An ember tensor's values, dtype and requires_grad as a torch tensor (for `compare`)."""
    x = e.detach()
    t = torch.tensor(np.asarray(x.float().numpy() if _name(x.dtype) == "bfloat16" else x.numpy()))
    if _name(x.dtype) == "bfloat16":
        t = t.to(torch.bfloat16)
    return t.requires_grad_(e.requires_grad) if t.dtype.is_floating_point or t.is_complex() else t


def _tolerance(pool) -> float | None:
    """The tolerance of a program that computed in 16 bits somewhere (its later values, of any
    dtype, and its gradients carry that step's rounding); None: each dtype's own."""
    if any(_name(t.dtype) in ("float16", "bfloat16") for t, _, _ in pool):
        return TOLERANCE["bfloat16"]
    return None


def check(seed: int, steps: tuple[int, int] = (3, 10), wide: bool = False) -> list[str]:
    """The divergences of program ``seed`` (NaN and overflow warnings silenced: both sides
    compute them on purpose). ``wide`` draws from every dtype of WIDE_DTYPES and the wide
    vocabulary too (a different program for the same seed)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return _check(seed, steps, wide)


def _check(seed: int, steps: tuple[int, int], wide: bool = False, record=None) -> list[str]:
    """(``record``: a dict that receives the program: its inputs' arrays and dtypes, and each
    step's call, operand positions in the pool and the results it added, for a replay.)"""
    rng = random.Random(seed)
    problems: list[str] = []
    inputs = []
    pool = []  # (torch tensor, ember tensor, description)
    for i in range(rng.randint(1, 3)):
        dtype = rng.choice(WIDE_DTYPES if wide else DTYPES)
        shape = _random_shape(rng)
        arr = _array(rng, shape, dtype) if wide else random_array(rng, shape, dtype)
        grad = dtype.startswith(("float", "bfloat", "complex"))
        t, e = _pair(arr, grad, dtype)
        inputs.append((t, e))
        pool.append((t, e, f"x{i}:{dtype}{arr.shape}"))
        if record is not None:
            record.setdefault("inputs", []).append((arr, dtype, grad))
    log = [d for _, _, d in pool]
    vocabulary = OPS + WIDE_OPS if wide else OPS
    for step in range(rng.randint(*steps)):
        spec = rng.choice(vocabulary)
        ctx = Ctx(rng, pool, wide)
        try:
            call = spec(ctx)
        except Ctx.Skip:
            continue
        where = f"seed {seed} step {step} {call.text}"
        log.append(call.text)
        try:
            tout = call.run(torch, [p[0] for p in call.args])
        except Exception as exc:  # noqa: BLE001 - the type is what is compared
            try:
                call.run(ember, [p[1] for p in call.args])
            except Exception as eexc:  # noqa: BLE001
                if not isinstance(eexc, type(exc)):
                    problems.append(
                        f"{where}: ember raised {type(eexc).__name__}({eexc}) where torch "
                        f"raised {type(exc).__name__}({str(exc)[:200]})"
                    )
            else:
                if isinstance(exc, (TypeError, RuntimeError)) and any(
                    m in str(exc) for m in LENIENT
                ):
                    continue
                problems.append(f"{where}: torch raised {type(exc).__name__}({exc}); ember did not")
            continue
        try:
            eout = call.run(ember, [p[1] for p in call.args])
        except Exception as eexc:  # noqa: BLE001
            tb = traceback.format_exc(limit=-3)
            problems.append(f"{where}: ember raised {type(eexc).__name__}({eexc})\n{tb}")
            continue
        if isinstance(tout, (bool, int, float, str)):
            if not isinstance(eout, (bool, int, float, str)) or eout != tout:
                problems.append(f"{where}: ember {eout!r} != torch {tout!r}")
            continue
        touts, eouts = _as_list(tout), _as_list(eout)
        if any(_name(t.dtype) == "complex32" for t in touts):
            continue  # (ember's complex64 stands in for it: not compared, nor used further)
        if len(touts) != len(eouts):
            problems.append(f"{where}: {len(eouts)} results != torch {len(touts)}")
            continue
        positions = [next(i for i, q in enumerate(pool) if q is a) for a in call.args]
        kept = []
        for k, (t, e) in enumerate(zip(touts, eouts)):
            diff = compare(t, e, f"{where} [{k}]", _tolerance(pool))
            if diff:
                problems.append(diff)
                continue
            if t.numel() <= 256:
                pool.append((t, e, f"s{step}.{k}"))
                kept.append(k)
        if record is not None:
            record.setdefault("steps", []).append((call, positions, kept))
        # the inputs of an in-place step may have changed: compare them again
        for t, e, d in call.args:
            diff = compare(t, e, f"{where} operand {d} after the step", _tolerance(pool))
            if diff:
                problems.append(diff)
        if problems:
            break
    if problems:
        return [p + "\n program: " + " ; ".join(log) for p in problems]
    # gradients of a weighted sum of every floating result
    tl, el = [], []
    for t, e, _ in pool:
        if t.requires_grad and t.dtype.is_floating_point:
            w = np.cos(np.arange(t.numel(), dtype=np.float64) + len(tl)).reshape(tuple(t.shape))
            tl.append((t.double() * torch.tensor(w)).sum())
            el.append((e.double() * ember.tensor(w)).sum())
    if not tl:
        return []
    try:
        sum(tl).backward()
    except Exception as texc:  # noqa: BLE001 - torch refuses: nothing to compare
        if not wide or any(m in str(texc) for m in LENIENT_BACKWARD):
            return []
        # (the wide profile modifies saved tensors in place: ember must refuse them too)
        try:
            sum(el).backward()
        except Exception as eexc:  # noqa: BLE001
            if isinstance(eexc, type(texc)):
                return []
            why = f"ember raised {type(eexc).__name__}({eexc})"
        else:
            why = "ember did not raise"
        return [
            f"seed {seed} backward: torch raised {type(texc).__name__}({texc}); {why}"
            f"\n program: " + " ; ".join(log)
        ]
    try:
        sum(el).backward()
    except Exception as exc:  # noqa: BLE001
        tb = traceback.format_exc(limit=-3)
        return [
            f"seed {seed} backward: ember raised {type(exc).__name__}({exc})\n{tb}"
            f"\n program: " + " ; ".join(log)
        ]
    for i, (t, e) in enumerate(inputs):
        if t.grad is None or e.grad is None:
            if (t.grad is None) != (e.grad is None):
                problems.append(
                    f"seed {seed} grad of x{i}: ember {e.grad is not None}, torch "
                    f"{t.grad is not None}"
                )
            continue
        diff = compare(t.grad, e.grad, f"seed {seed} grad of x{i}", _tolerance(pool))
        if diff:
            problems.append(diff)
    return [p + "\n program: " + " ; ".join(log) for p in problems]


def fuzz(seeds, wide: bool = False) -> list[str]:
    out = []
    for s in seeds:
        try:
            out.extend(check(s, wide=wide))
        except Exception as exc:  # noqa: BLE001 - a harness failure is a finding too
            out.append(f"seed {s}: harness {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    return out


if __name__ == "__main__":
    lo, hi = int(sys.argv[1]), int(sys.argv[2])
    found = fuzz(range(lo, hi), wide="wide" in sys.argv[3:])
    for f in found:
        print(f, "\n")
    print(f"{len(found)} divergences in {hi - lo} programs")
