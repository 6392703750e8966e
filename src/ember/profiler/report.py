"""Reports of a profile: the aggregated table and the Chrome trace.

`aggregate` groups events by name (and input shapes) into `EventTable` rows: calls, total and
self time, FLOPs and bytes by the cost rules, achieved GFLOP/s and GB/s (over the total time),
memory allocated, and the roofline class against this machine's peaks. `chrome_trace` writes
the events as Trace Event Format "X" (complete) events, ``ts``/``dur`` in microseconds, with
metadata events naming the process and threads; Perfetto and chrome://tracing open the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .._files import write_atomic
from .events import Event, thread_names
from .roofline import Peaks, bound, machine_peaks

__all__ = ["SORT_KEYS", "EventTable", "Row", "aggregate", "chrome_trace", "write_json"]


@dataclass
class Row:
    """Events of one name (and input shapes): their sums."""

    name: str
    category: str
    input_shapes: list | None = None
    calls: int = 0
    total_ns: int = 0
    self_ns: int = 0
    flops: int = 0
    bytes: int = 0
    allocated: int | None = None
    events: list = field(default_factory=list, repr=False)

    @property
    def avg_ns(self) -> float:
        return self.total_ns / self.calls if self.calls else 0.0

    @property
    def gflops_per_s(self) -> float:
        return self.flops / self.total_ns if self.total_ns else 0.0  # FLOP/ns is GFLOP/s

    @property
    def gb_per_s(self) -> float:
        return self.bytes / self.total_ns if self.total_ns else 0.0


# sort key name -> (row attribute, descending); PyTorch's names are accepted as aliases
SORT_KEYS = {
    "time": ("total_ns", True),
    "self_time": ("self_ns", True),
    "avg_time": ("avg_ns", True),
    "calls": ("calls", True),
    "flops": ("flops", True),
    "bytes": ("bytes", True),
    "memory": ("allocated", True),
    "gflops": ("gflops_per_s", True),
    "gbps": ("gb_per_s", True),
    "name": ("name", False),
}
_ALIASES = {
    "cpu_time_total": "time",
    "self_cpu_time_total": "self_time",
    "cpu_time": "avg_time",
    "count": "calls",
    "flop": "flops",
    "cpu_memory_usage": "memory",
}


class EventTable(list):
    """The aggregated rows of a profile (a list of `Row`), printable with `table`."""

    def sorted(self, sort_by: str = "time") -> list[Row]:
        key = _ALIASES.get(sort_by, sort_by)
        if key not in SORT_KEYS:
            choices = ", ".join(list(SORT_KEYS) + list(_ALIASES))
            raise ValueError(f"table: unknown sort_by {sort_by!r}; choose one of {choices}")
        attribute, descending = SORT_KEYS[key]
        if attribute == "name":
            return sorted(self, key=lambda r: r.name)
        return sorted(self, key=lambda r: getattr(r, attribute) or 0, reverse=descending)

    def table(self, sort_by: str = "time", row_limit: int = 20, peaks: Peaks | None = None) -> str:
        rows = self.sorted(sort_by)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        peaks = peaks or machine_peaks()
        shapes = any(r.input_shapes is not None for r in self)
        memory = any(r.allocated is not None for r in self)
        total = sum(r.self_ns for r in self) or 1
        head = ["Name", "Calls", "Total ms", "Self ms", "Self %", "Avg us", "FLOPs", "GFLOP/s",
                "Bytes", "GB/s", "Bound"]  # fmt: skip
        if memory:
            head.append("Alloc")
        if shapes:
            head.append("Input shapes")
        body = []
        for r in rows:
            line = [
                r.name,
                str(r.calls),
                f"{r.total_ns / 1e6:.3f}",
                f"{r.self_ns / 1e6:.3f}",
                f"{100 * r.self_ns / total:.1f}",
                f"{r.avg_ns / 1e3:.1f}",
                _si(r.flops) if r.flops else "-",
                f"{r.gflops_per_s:.2f}" if r.flops else "-",
                _si(r.bytes) if r.bytes else "-",
                f"{r.gb_per_s:.2f}" if r.bytes else "-",
                bound(r.flops, r.bytes, peaks) or "-",
            ]
            if memory:
                line.append("-" if r.allocated is None else _si(r.allocated))
            if shapes:
                line.append("" if r.input_shapes is None else str(r.input_shapes))
            body.append(line)
        widths = [max(len(x) for x in column) for column in zip(head, *body)]
        widths[0] = min(widths[0], 60)

        def fmt(cells):
            first = cells[0] if len(cells[0]) <= widths[0] else cells[0][: widths[0] - 3] + "..."
            rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]
            if shapes:  # the shapes column last, left-aligned and unpadded
                rest[-1] = cells[-1]
            return "  ".join([first.ljust(widths[0])] + rest).rstrip()

        rule = "-" * len(fmt(head))
        footer = (f"peaks: {peaks.gflops:.1f} GFLOP/s (float32 matmul), {peaks.gbps:.1f} GB/s "
                  f"(stream); ridge {peaks.ridge:.1f} FLOP/byte")  # fmt: skip
        return "\n".join([rule, fmt(head), rule, *map(fmt, body), rule, footer]) + "\n"

    def __str__(self) -> str:
        return self.table()


def _si(n: float) -> str:
    """``n`` with a decimal prefix: 950, 12.3K, 4.56M, 1.02G."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= factor:
            return f"{n / factor:.3g}{prefix}"
    return f"{n:.0f}"


def aggregate(events: list[Event], group_by_input_shape: bool = False) -> EventTable:
    rows: dict = {}
    for e in events:
        shapes = e.input_shapes if group_by_input_shape else None
        key = (e.name, e.cat if e.op is None else "", repr(shapes))
        row = rows.get(key)
        if row is None:
            row = rows[key] = Row(e.name, e.cat, shapes)
        row.calls += 1
        row.total_ns += e.duration_ns
        row.self_ns += e.self_ns
        cost = e.cost
        row.flops += cost.flops
        row.bytes += cost.bytes
        if e.allocated is not None:
            row.allocated = (row.allocated or 0) + e.allocated
        row.events.append(e)
    return EventTable(rows.values())


def _args(e: Event, peaks: Peaks) -> dict:
    if e.op is None:
        return {}
    cost, ns = e.cost, max(e.duration_ns, 1)
    args = {
        "input_shapes": e.input_shapes,
        "input_dtypes": [str(t.dtype) for t in e.in_types],
        "flops": cost.flops,
        "bytes": cost.bytes,
        "gflops_per_s": round(cost.flops / ns, 3),
        "gb_per_s": round(cost.bytes / ns, 3),
        "bound": bound(cost.flops, cost.bytes, peaks),
    }
    if e.allocated is not None:
        args["allocated_bytes"] = e.allocated
    if e.node is not None:
        args["node"] = "%" + e.node
    return args


def chrome_trace(events: list[Event], start_ns: int, pid: int, peaks: Peaks | None) -> dict:
    """The Trace Event Format object of ``events`` (times relative to ``start_ns``)."""
    peaks = peaks or machine_peaks()
    base = min([start_ns] + [e.start_ns for e in events])
    trace = [
        {
            "name": "process_name",
            "ph": "M",
            "ts": 0,
            "pid": pid,
            "tid": 0,
            "args": {"name": f"ember (pid {pid})"},
        },  # fmt: skip
    ]
    names = thread_names()
    for tid in sorted({e.tid for e in events}):
        trace.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": pid, "tid": tid,
                      "args": {"name": names.get(tid, f"thread {tid}")}})  # fmt: skip
    for e in events:
        trace.append(
            {
                "name": e.name,
                "cat": e.cat,
                "ph": "X",
                "ts": round((e.start_ns - base) / 1e3, 3),
                "dur": round(e.duration_ns / 1e3, 3),
                "pid": pid,
                "tid": e.tid,
                "args": _args(e, peaks),
            }
        )
    return {"traceEvents": trace, "displayTimeUnit": "ms"}


def write_json(path, obj) -> None:
    """Write ``obj`` as JSON to ``path`` whole (through a temporary file in its folder)."""
    write_atomic(path, json.dumps(obj))
