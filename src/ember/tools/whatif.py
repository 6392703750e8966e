"""What-if over `ember.tools.memory`: `max_batch_size(model, budget_bytes, *inputs, ...)`, the
largest batch size whose planned peak fits ``budget_bytes``: doubling from 1, then bisection,
each candidate traced and planned without running at its size (a planned peak grows with the
batch: more rows in every activation and temporary, the rest fixed). Returns a `BatchFit` with
the peaks of the answer and of the next size up, so the answer is checkable. (The what-ifs of
one report, ``report.with_dtype`` and the others, are tools/memory_report.py.)
"""

from __future__ import annotations

from dataclasses import dataclass

from .memory import memory
from .memory_report import MemoryReport

__all__ = ["BatchFit", "max_batch_size"]


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
