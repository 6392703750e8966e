"""What-if helpers over `ember.tools.memory`: the largest batch that fits a budget, and an
estimate of mixed precision.

* `max_batch_size(model, budget_bytes, *inputs, ...)`: the largest batch size whose planned
  peak fits ``budget_bytes``: doubling from 1, then bisection, each candidate traced and
  planned without running at its size (a planned peak grows with the batch: more rows in
  every activation and temporary, the rest fixed). Returns a `BatchFit` with the peaks of the
  answer and of the next size up, so the answer is checkable.
* `amp_estimate(report, dtype)`: PyTorch-style automatic mixed precision, which ember does not
  run (it has no autocast), estimated from a float32 report: parameters, gradients,
  optimizer state and the batch stay float32; activations and temporaries take the low
  precision (autocast runs matrix products and convolutions in it; the elementwise ops that
  read their results follow; softmax, norms and losses stay float32 in PyTorch, so this is a
  lower bound on those parts); plus the low-precision copies of the weights that autocast
  caches for the forward and backward pass. Pure low precision (``model.half()``) is planned
  for real: ``report.with_dtype(ember.float16)``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import dtypes as dt
from .memory import FIELDS, LayerMemory, MemoryReport

__all__ = ["BatchFit", "amp_estimate", "max_batch_size"]


@dataclass
class BatchFit:
    """`max_batch_size`'s answer: ``batch_size`` fits ``budget_bytes`` with a planned peak of
    ``peak_bytes``; ``batch_size + 1`` plans ``next_peak_bytes`` (over the budget, unless the
    search stopped at ``limit``). ``report``: the memory report at ``batch_size``."""

    batch_size: int
    budget_bytes: int
    peak_bytes: int
    next_peak_bytes: int
    report: MemoryReport
    tried: dict  # batch size -> planned peak, every size planned

    def __str__(self) -> str:
        mib = 2**20
        return (
            f"largest batch size within {self.budget_bytes / mib:.2f} MiB: {self.batch_size} "
            f"(planned peak {self.peak_bytes / mib:.3f} MiB; batch {self.batch_size + 1}: "
            f"{self.next_peak_bytes / mib:.3f} MiB)"
        )


def max_batch_size(model, budget_bytes: int, *inputs, limit: int = 1 << 16, **options) -> BatchFit:
    """The largest batch size (up to ``limit``) whose planned peak fits ``budget_bytes``.

    ``model``: a built-in model name, or a module / function with example ``inputs`` (their
    first dimension is the batch; ``options`` as for `ember.tools.memory`, e.g.
    ``optimizer=``, ``loss_fn=``, ``targets=``), or a callable taking a batch size and
    returning a `MemoryReport` (your own step builder). Raises ValueError when batch 1 does
    not fit (the message gives its peak)."""
    from ..capture.function import Function
    from ..nn import Module
    from .memory import memory

    budget = int(budget_bytes)
    if isinstance(model, (str, Module, Function)) or inputs:

        def plan(batch: int) -> MemoryReport:
            return memory(model, *inputs, batch_size=batch, **options)
    elif callable(model):
        plan = model
    else:
        raise TypeError(f"max_batch_size: cannot plan a {type(model).__name__}")
    reports: dict[int, MemoryReport] = {}

    def peak(batch: int) -> int:
        if batch not in reports:
            report = plan(batch)
            if not isinstance(report, MemoryReport):
                raise TypeError(
                    f"max_batch_size: the step builder returned a {type(report).__name__}, "
                    "not an ember.tools.MemoryReport"
                )
            reports[batch] = report
        return reports[batch].peak_bytes

    if peak(1) > budget:
        mib = 2**20
        raise ValueError(
            f"max_batch_size: even batch size 1 plans a peak of {peak(1) / mib:.2f} MiB, over "
            f"the budget of {budget / mib:.2f} MiB; raise the budget, or lower the rest "
            "(report.with_checkpointing, report.with_dtype)"
        )
    low, high = _bracket(peak, budget, limit)
    while high - low > 1:  # invariant: low fits; high does not fit or is past limit
        mid = (low + high) // 2
        if peak(mid) <= budget:
            low = mid
        else:
            high = mid
    return BatchFit(
        low,
        budget,
        peak(low),
        peak(low + 1),
        reports[low],
        {b: r.peak_bytes for b, r in sorted(reports.items())},
    )


def _bracket(peak, budget: int, limit: int) -> tuple[int, int]:
    """(a size that fits, a larger one that does not or is ``limit + 1``), found around the
    straight-line guess through the peaks at 1 and 2 (a step's peak is affine in the batch
    but for kernels whose workspace changes with it), widening by doubling steps: when the
    guess is right, four plans in all."""
    if limit < 2 or peak(2) > budget:
        return 1, 2
    slope = max(peak(2) - peak(1), 1)
    guess = min(max(2, 1 + (budget - peak(1)) // slope), limit)
    step = 1
    if peak(guess) <= budget:
        low = guess
        while low + step <= limit and peak(low + step) <= budget:
            low, step = low + step, step * 2
        return low, min(low + step, limit + 1)
    high = guess
    while high - step > 2 and peak(high - step) > budget:
        high, step = high - step, step * 2
    return max(high - step, 2), high


def amp_estimate(report: MemoryReport, dtype) -> MemoryReport:
    """The estimate of mixed precision in ``dtype`` of a float32 ``report`` (see the module
    docstring). Per-layer rows are scaled the same way."""
    dtype = dt.as_dtype(dtype)
    if not dtype.is_floating_point or dtype.itemsize >= 4:
        raise ValueError(f"amp_estimate: a 16-bit floating dtype, got {dtype}")
    if report.dtype not in (None, "float32"):
        raise ValueError(f"amp_estimate: starts from a float32 report, got {report.dtype}")
    ratio = dtype.itemsize / 4
    low = {"saved activations", "temporaries"}
    copies = int(report.parameters * ratio)  # autocast's weight cache
    at_peak = {part: int(b * ratio) if part in low else b for part, b in report.at_peak.items()}
    if report.at_peak.get("saved activations", 0) or report.gradients == 0:
        at_peak["temporaries"] += copies  # the peak is inside forward/backward: cache alive
    parts = {
        name: int(getattr(report, name) * ratio) if part in low else getattr(report, name)
        for part, name in FIELDS.items()
    }
    parts["temporaries"] += copies
    layers = {
        name: replace(
            row,
            activations=int(row.activations * ratio),
            temporaries=int(row.temporaries * ratio + row.parameters * ratio),
        )
        for name, row in report.by_layer.items()
        if isinstance(row, LayerMemory)
    }
    return replace(
        report,
        description=f"{report.description}, mixed precision {dtype} (estimate)",
        peak_bytes=sum(at_peak.values()),
        at_peak=at_peak,
        by_layer=layers,
        dtype=f"amp {dtype}",
        **parts,
    )
