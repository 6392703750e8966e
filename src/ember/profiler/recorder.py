"""Recording: the `profile` context manager and `record_function` ranges.

While a `profile` is active it is the one recorder of the process (``_active``), and it hooks
the places where work runs, each without cost to the unprofiled path:

* **eager ops**: it swaps the dispatcher's base mode for `_ProfilingEagerMode`, which times
  `EagerMode.apply` around each call. Unprofiled dispatch is untouched: no flag is checked per
  op. The direct route of a plain in-place ufunc (``Tensor._ufunc_inplace``: an optimizer's
  ``p.sub_(...)`` with nothing recorded), which runs no op, is timed through
  ``_tensor_inplace._profiler`` and shows as ``sub_``, priced by the ufunc's op.
* **eager backward**: ``autograd._profiler`` makes the backward engine open a ``backward`` range
  around the pass and one range per tape node (``MulBackward0``, ...); ops run inside get the
  category ``backward``.
* **compiled graphs**: ``codegen.profiler`` makes `CompiledGraph` run an instrumented copy of its
  generated code (built once, on the first profiled call, with the hooks `_instrument` gives):
  a ``graph <name>`` range around the call and one ``kernel`` event per generated kernel call,
  a fused group being one call (compiled.py).

Events are `Event` records (events.py) on the thread that ran them, timed with
``perf_counter_ns``; a child opens after and closes before its parent, so ranges nest exactly.
Costs (FLOPs, bytes) are computed from the op's cost rule when a report asks for them, not
while the program runs.
"""

from __future__ import annotations

import functools
import os
import threading

import numpy as np

from ..autograd_node import Node
from ..ops import _registry as _reg
from ..types import TensorType
from .compiled import kernel_recorder
from .events import Event, allocated_bytes, name_thread, thread_names, types_of
from .events import now as _now

__all__ = ["Event", "profile", "record_function", "thread_names"]

_active: profile | None = None  # the recording profiler, if any (one at a time per process)


def _recording() -> profile | None:
    return _active


def _records(action) -> bool:
    """Whether a schedule's action records the step."""
    from .schedule import ProfilerAction

    return action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def _instrument(graph) -> tuple:
    """The hooks of ``graph``'s instrumented generated code (runtime/codegen.py): the clock, and
    the event that hands each kernel call to the profiler recording when it runs."""
    return _now, kernel_recorder(graph, _recording)


class _Thread(threading.local):
    def __init__(self):
        self.tid = threading.get_native_id()
        self.backward = 0  # depth of backward ranges: ops inside are backward ops
        name_thread(self.tid, threading.current_thread().name)


_thread = _Thread()


class _ProfilingEagerMode(_reg.Mode):
    """The eager mode, timed: installed as the base mode while a profiler records."""

    def __init__(self, eager, profiler: profile):
        self._eager = eager
        self._profiler = profiler

    def __getattr__(self, name):  # anything else the eager mode offers
        return getattr(self._eager, name)

    def apply(self, op, inputs, attrs):
        start = _now()
        result = self._eager.apply(op, inputs, attrs)
        end = _now()
        outs = (result,) if op.num_outputs == 1 else result
        prof = self._profiler
        in_types = tuple([TensorType(t._data.shape, t.dtype) for t in inputs])
        out_types = tuple([TensorType(t._data.shape, t.dtype) for t in outs])
        allocated = None
        if prof.profile_memory:
            allocated = allocated_bytes([t._data for t in outs], [t._data for t in inputs])
        cat = "backward" if _thread.backward else "op"
        prof._events.append(
            Event(op.name, cat, start, end, _thread.tid, op, attrs, in_types, out_types, allocated)
        )
        return result

    def constant(self, array):
        return self._eager.constant(array)


class _Range:
    """A span recorded as one event when it closes (reentrant use is not supported)."""

    __slots__ = ("name", "cat", "_start", "_backward")

    def __init__(self, name: str, cat: str, backward: bool = False):
        self.name, self.cat, self._backward = name, cat, backward

    def __enter__(self):
        if self._backward:
            _thread.backward += 1
        self._start = _now()
        return self

    def __exit__(self, *exc):
        end = _now()
        if self._backward:
            _thread.backward -= 1
        prof = _active
        if prof is not None:
            prof._events.append(Event(self.name, self.cat, self._start, end, _thread.tid))
        return False


class profile:  # noqa: N801  (PyTorch's name: torch.profiler.profile)
    """Record what runs inside ``with profile(...) as prof:``: eager ops (forward and
    backward), compiled kernels and `record_function` ranges.

    While it records, ops of every thread are recorded (each on its own thread in the trace).
    ``record_shapes``: group the table by input shapes too (each event keeps its shapes either
    way: the cost rules need them). ``profile_memory``: record the bytes of new memory each
    op's outputs hold. After the block: ``prof.events()``, ``prof.table()``,
    ``prof.key_averages()``, ``prof.export_chrome_trace(path)``.

    PyTorch's other arguments: ``activities`` (ember records the CPU; CUDA and the others
    are accepted and add nothing), ``schedule`` (`schedule.schedule`: which steps of a run,
    counted by ``prof.step()``, are recorded; each cycle's last recorded step hands the
    profile to ``on_trace_ready``, then recording starts afresh), ``on_trace_ready`` (also
    called when the block ends while recording), and ``with_stack``, ``with_flops`` (FLOPs
    are always counted), ``with_modules``, ``experimental_config``, ``acc_events``,
    ``use_cuda``, accepted without effect."""

    def __init__(self, activities=None, *, schedule=None, on_trace_ready=None,
                 record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False, with_modules: bool = False,
                 experimental_config=None, execution_trace_observer=None,
                 acc_events: bool = False, use_cuda=None, enabled: bool = True):  # fmt: skip
        self.activities = set(activities) if activities is not None else None
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        self.enabled = bool(enabled)
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self._action = None
        self._events: list[Event] = []
        self._finished = False
        self._start_ns = 0
        self._saved: tuple | None = None

    # ------------------------------------------------------------------ recording
    def __enter__(self) -> profile:
        if not self.enabled:
            return self
        if self.schedule is None:
            self._start()
        else:
            self.step_num = 0
            self._action = self.schedule(0)
            if _records(self._action):
                self._start()
        return self

    def __exit__(self, *exc) -> bool:
        if self.enabled and self._saved is not None:
            self._stop()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        return False

    def step(self) -> None:
        """One step of a run is done (``prof.step()`` at the end of each iteration): with a
        ``schedule``, start or stop recording as it says for the next step, handing a
        finished cycle to ``on_trace_ready``."""
        if not self.enabled or self.schedule is None:
            self.step_num += 1
            return
        from .schedule import ProfilerAction

        previous = self._action
        self.step_num += 1
        self._action = self.schedule(self.step_num)
        if previous is ProfilerAction.RECORD_AND_SAVE and self._saved is not None:
            self._stop()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        if _records(self._action) and self._saved is None:
            self._start()

    def _start(self) -> None:
        global _active
        if _active is not None:
            raise RuntimeError(
                "ember.profiler.profile: another profiler is already recording; profilers do "
                "not nest (use ember.profiler.record_function for sub-ranges)"
            )
        from .. import _tensor_inplace as tensor
        from .. import autograd
        from ..runtime import codegen

        self._events, self._finished = [], False
        self._start_ns = _now()
        base = _reg._base_mode[0]
        self._saved = (base, autograd._profiler, codegen.profiler, tensor._profiler)
        _reg.set_base_mode(_ProfilingEagerMode(base, self))
        autograd._profiler = codegen.profiler = tensor._profiler = self
        _active = self

    def _stop(self) -> None:
        global _active
        from .. import _tensor_inplace as tensor
        from .. import autograd
        from ..runtime import codegen

        base, autograd._profiler, codegen.profiler, tensor._profiler = self._saved
        _reg.set_base_mode(base)
        self._saved = None
        _active = None
        self._finish()

    def start(self) -> None:
        """Start recording (as entering the ``with`` block does)."""
        self.__enter__()

    def stop(self) -> None:
        """Stop recording (as leaving the ``with`` block does)."""
        self.__exit__(None, None, None)

    def range(self, name: str, cat: str = "user_annotation") -> _Range:
        """A span named ``name`` (used by the backward engine and compiled graphs)."""
        return _Range(name, cat, backward=cat == "backward")

    def backward_node(self, node: Node, grads: list) -> tuple:
        """Run a tape node's VJP inside its own range (called by autograd's engine)."""
        with _Range(node.name(), "backward", backward=True):
            return node.apply(grads)

    def run_graph(self, compiled, arrays) -> list:
        """Run a compiled graph's instrumented code inside a ``graph <name>`` range. Generating
        that code (on the first profiled call) is a ``profiler`` event of its own, so its time
        is not mistaken for the program's."""
        name = compiled.graph.name
        if compiled._profiled is None:
            with _Range(f"instrument graph {name}", "profiler"):
                compiled.profiled(_instrument)
        with _Range(f"graph {name}", "graph"):
            return compiled.profiled(_instrument)(*arrays)

    def kernel(self, info, start: int, outputs: tuple, inputs: tuple) -> None:
        """Record one kernel call of a compiled graph (called by the instrumented code)."""
        end = _now()
        in_types = types_of(inputs, info.in_dtypes)
        out_types = types_of(outputs, info.out_dtypes)
        attrs = info.resolve(in_types) if info.symbolic else info.attrs
        allocated = allocated_bytes(outputs, inputs) if self.profile_memory else None
        self._events.append(
            Event(
                info.name,
                "kernel",
                start,
                end,
                _thread.tid,
                info.op,
                attrs,
                in_types,
                out_types,
                allocated,
                info.node,
            )  # fmt: skip
        )

    def inplace_ufunc(self, ufunc, tensor, operands: list) -> None:
        """Run and record ``ufunc(tensor, *operands, out=tensor)``: the direct route of an
        in-place method (``p.sub_(g)`` in an optimizer's step; ``Tensor._ufunc_inplace``)."""
        x = tensor._data
        start = _now()
        ufunc(x, *operands, out=x)
        end = _now()
        op = _ufunc_ops().get(ufunc)
        dtype = tensor.dtype
        in_types = (TensorType(x.shape, dtype),) + tuple(
            [TensorType(np.shape(a), dtype) for a in operands]  # tensors of x's dtype or scalars
        )
        name = (op.name if op is not None else ufunc.__name__) + "_"
        cat = "backward" if _thread.backward else "op"
        allocated = 0 if self.profile_memory else None
        self._events.append(
            Event(name, cat, start, end, _thread.tid, op, {}, in_types, in_types[:1], allocated)
        )

    def _finish(self) -> None:
        """Link each event to its innermost enclosing event on the same thread."""
        self._events.sort(key=lambda e: (e.tid, e.start_ns, -e.end_ns))
        stack: list[Event] = []
        for e in self._events:
            while stack and (stack[-1].tid != e.tid or stack[-1].end_ns <= e.start_ns):
                stack.pop()
            if stack and e.end_ns <= stack[-1].end_ns:
                e.parent = stack[-1]
                stack[-1].children_ns += e.duration_ns
            stack.append(e)
        self._finished = True

    # ------------------------------------------------------------------ results
    def _results(self) -> list[Event]:
        if _active is self:
            raise RuntimeError(
                "ember.profiler.profile: results are available after the `with` block ends"
            )
        return self._events

    def events(self) -> list[Event]:
        """Every recorded event, by thread then start time (parents before their children)."""
        return list(self._results())

    def key_averages(self, group_by_input_shape: bool = False):
        """Events aggregated by name (and input shapes): a `report.EventTable`."""
        from .report import aggregate

        return aggregate(self._results(), group_by_input_shape)

    def table(self, sort_by: str = "time", row_limit: int = 20, peaks=None) -> str:
        """The aggregated table as text, sorted by ``sort_by`` (see `report.SORT_KEYS`), at
        most ``row_limit`` rows (-1: all), grouped by input shapes when ``record_shapes``.
        ``peaks``: the machine's `roofline.Peaks` (measured once per machine by default)."""
        table = self.key_averages(group_by_input_shape=self.record_shapes)
        return table.table(sort_by=sort_by, row_limit=row_limit, peaks=peaks)

    def export_chrome_trace(self, path, peaks=None) -> None:
        """Write the events as Trace Event Format JSON (chrome://tracing, ui.perfetto.dev)."""
        from .report import chrome_trace, write_json

        write_json(path, chrome_trace(self._results(), self._start_ns, os.getpid(), peaks))


class record_function:  # noqa: N801  (PyTorch's name)
    """A named range in the profile: ``with record_function("step"):`` or as a decorator
    ``@record_function("step")``. Costs one check when no profiler records."""

    def __init__(self, name: str):
        self.name = str(name)
        self._range: _Range | None = None

    def __enter__(self):
        if _active is not None:
            self._range = _Range(self.name, "user_annotation")
            self._range.__enter__()
        return self

    def __exit__(self, *exc) -> bool:
        if self._range is not None:
            self._range.__exit__(*exc)
            self._range = None
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)

        return wrapper


@functools.cache
def _ufunc_ops() -> dict:
    """NumPy ufunc -> the op whose kernel it is (their cost rules price in-place calls)."""
    return {op.kernel: op for op in _reg.REGISTRY.values() if isinstance(op.kernel, np.ufunc)}
