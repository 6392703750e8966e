"""The C graph runner: a graph whose every node has a C step runs in one call into C, its
independent nodes at once on ember's thread pool, with no Python (and no GIL) between nodes.

Why. The parallel executor's Python workers (runtime/parallel.py) hand values over through
Events and take the GIL back after every kernel; on a small machine each hand-off or GIL
contention costs tens of microseconds (a halted virtual CPU wakes slowly), about what a
convolution of an inception branch takes. Here a node finishing costs an atomic decrement, and a
waiting thread spins instead of sleeping.

A *C step* is a function ``void step(const long *args)`` and its argument block: pointers to
the node's inputs and outputs, sizes, and scratch memory of its own (so steps running at once
never share any). An op offers one through its ``c_step`` rule, ``rule(node) -> CStep | None``
(kernels/cstep.py; None: not this node, and then the graph has no C program); kernels/csteps.py
holds the steps of concat, reshape, linear and matmul, the kernels' own modules the others (a
fused loop's is its compiled loop, kernels/cfuse.py). An elementwise op with a C expression,
or a reduction (a `ReductionRule`), with no rule of its own (one no fused group took) runs as
the one-instruction loop the fusion pass would make of it (ops/fused.py `lone_c_step`); a
view op with no rule of its own, or one its rule declines (permute, basic getitem, a real
broadcast), copies its view's elements (ops/_view_step.py). A step runs its kernel on the
thread that claims it, sharing the kernel's work over the pool where the pool is free (a run on
one thread; beside other steps, a nested call runs on its own thread).

The run (`ember_run_graph`): the steps are in priority order (the longest predicted path to the
graph's end first); each thread of ``ember_parallel_for`` (kernels/cpool.py) repeatedly claims
the first unclaimed step whose predecessors are done (a compare-and-swap), runs it and counts
down its successors' missing inputs, until every step is claimed. No thread ever waits for a
step that no thread has claimed, so a run cannot deadlock: with one thread (or when another
parallel loop holds the pool) it runs the whole graph in priority order, as far as the
arena's orderings allow (below).

Memory. The graph's intermediate values live in one arena the program allocates once, their
addresses written into the steps' arguments then; each run writes only its inputs' addresses
(where they are other arrays than the last run's) and its outputs', which are new arrays every
run, so results never alias an earlier run's. Values share the arena's bytes where their lives
in the graph's own order (generated code's, the one the rematerializer and the scheduler chose)
do not overlap, and the run waits where sharing needs it (runtime/cgraph_memory.py: a step
writing shared bytes runs after every step touching their earlier tenant), so a recomputed
activation is computed where the graph puts it, in the place of one the run no longer needs.
(The arena stays allocated as long as the program: `held_bytes` counts it, with the scratch the
steps keep, for memory plans: plan/program.py.)

Invariants. Inputs reach the steps C-contiguous in the node's dtype. One run of a program at a
time (its arrays and argument blocks are its own): `ParallelProgram` holds a lock around it.
"""

from __future__ import annotations

import ctypes
import time
from itertools import compress
from operator import is_not

import numpy as np

from ..errors import EmberError
from ..graph.printer import format_node
from ..kernels.cstep import STEP_CALL, data_address
from ..ops._registry import native_code
from ..ops._view_step import view_c_step
from ..ops.fused import lone_c_step
from .cgraph_memory import plan_arena
from .codegen import KERNEL_FAILURES
from .prebuild import prebuild

__all__ = ["CGraphProgram", "c_steps", "measure_nodes"]

_SOURCE = r"""
typedef void (*ember_step)(const long *args);
typedef void (*ember_task)(void *ctx, long lo, long hi);
typedef void (*ember_pool)(ember_task, void *ctx, long n, long align);

struct run {
  long n;
  const long *fns, *args;         /* per step: its function's and its argument block's address */
  const long *succ_start, *succ;  /* successors of step i: succ[succ_start[i] .. succ_start[i+1]) */
  long *missing;                  /* per step: predecessors not yet done */
  long *claimed;                  /* per step: 1 once a thread has taken it */
};

static void work(void *ctx, long lo, long hi) {
  struct run *r = ctx;
  (void)lo, (void)hi;
  long first = 0; /* every step before it is claimed */
  for (;;) {
    long pick = -1, unclaimed = 0;
    for (long i = first; i < r->n; i++) {
      if (__atomic_load_n(&r->claimed[i], __ATOMIC_ACQUIRE)) {
        if (!unclaimed) first = i + 1;
        continue;
      }
      unclaimed = 1;
      long expected = 0;
      if (__atomic_load_n(&r->missing[i], __ATOMIC_ACQUIRE) == 0 &&
          __atomic_compare_exchange_n(&r->claimed[i], &expected, 1, 0, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE)) {
        pick = i;
        break;
      }
    }
    if (pick < 0) {
      if (!unclaimed) return; /* what is left runs on the threads that claimed it */
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    ((ember_step)r->fns[pick])((const long *)r->args[pick]);
    for (long s = r->succ_start[pick]; s < r->succ_start[pick + 1]; s++)
      __atomic_sub_fetch(&r->missing[r->succ[s]], 1, __ATOMIC_ACQ_REL);
  }
}

/* one step as it runs beside another: inside a parallel loop of the pool (a second, empty
   chunk keeps the loop's lock taken), so its kernel's own parallel loops run on this thread */
struct alone { ember_step fn; const long *args; };
static void alone_task(void *ctx, long lo, long hi) {
  const struct alone *a = ctx;
  (void)hi;
  if (lo == 0) a->fn(a->args);
}
void ember_run_alone(ember_step fn, const long *args, ember_pool pool) {
  struct alone a = {fn, args};
  if (pool) pool(alone_task, &a, 2, 1);
  else fn(args);
}

void ember_run_graph(long n, const long *fns, const long *args, const long *succ_start,
                     const long *succ, long *missing, long *claimed, long threads,
                     ember_pool pool) {
  struct run r = {n, fns, args, succ_start, succ, missing, claimed};
  if (pool && threads > 1) pool(work, &r, threads, 1);
  else work(&r, 0, 1);
}

/* a run from one table (`CGraphProgram._packed`): n, fns, args, succ_start, succ, missing,
   claimed, each step's predecessor count, threads, pool; the counters are reset here (one
   argument to convert and no NumPy calls: a small graph's call notices both) */
void ember_run_packed(const long *p) {
  long n = p[0];
  long *missing = (long *)p[5], *claimed = (long *)p[6];
  const long *predecessors = (const long *)p[7];
  for (long i = 0; i < n; i++) {
    missing[i] = predecessors[i];
    claimed[i] = 0;
  }
  ember_run_graph(n, (const long *)p[1], (const long *)p[2], (const long *)p[3],
                  (const long *)p[4], missing, claimed, p[8], (ember_pool)p[9]);
}
"""

_P, _L = ctypes.c_void_p, ctypes.c_long
_RUN_ARGS = [_L] + [_P] * 6 + [_L, _P]


def _library(symbol: str = "ember_run_graph", argtypes: list = _RUN_ARGS):
    """``ember_run_graph`` (or another function of the runner's source), or None without a
    compiler."""
    from ..kernels import ccompile

    if not ccompile.compiler_available():
        return None
    try:
        return ccompile.load(_SOURCE, symbol, argtypes)
    except ccompile.CompileError:
        return None


def _run_alone():
    from ..kernels import ccompile

    return ccompile.load(_SOURCE, "ember_run_alone", [_P, _P, _P])


def c_steps(graph) -> list | None:
    """Each call node's C step (graph order), or None when one has none (or no compiler)."""
    if _library() is None:
        return None
    prebuild(graph, lone_loops=True)  # (the nodes' C kernels in one compiler run)
    steps = []
    for node in graph.nodes:
        if node.kind != "call":
            continue
        if not native_code(node):
            return None  # (complex values: the reference kernels run the graph)
        hook = node.op.c_step
        lone = node.op.c is not None or node.op.reduction is not None
        if hook is None and lone:  # a lone elementwise op or reduction: a loop of one
            hook = lone_c_step
        types = [v.type for v in (*node.inputs, *node.outputs)]
        if not all(isinstance(d, int) for t in types for d in t.shape):
            return None  # (a symbolic size is known only when the graph runs)
        try:
            step = None if hook is None else hook(node)
            if step is None and node.op.view:  # a view its own rule declines: elements copied
                step = view_c_step(node)
        except EmberError:
            raise
        except KERNEL_FAILURES as exc:  # (a graph file's attribute of a kind it does not take)
            raise EmberError(
                f"kernel failed at {format_node(node)}: {type(exc).__name__}: {exc}",
                op=node.op.name,
            ) from exc
        if step is None:
            return None
        steps.append(step)
    if any(step.contiguous_inputs for step in steps) and not _layouts_hold(graph, steps):
        return None
    return steps


def _layouts_hold(graph, steps) -> bool:
    """Whether generated code holds C-contiguous every input that a step asks to be (its
    ``contiguous_inputs``: a product whose rounding follows its operands' layouts)."""
    from ..plan.layout import Layouts

    layouts = Layouts(graph)
    calls = [n for n in graph.nodes if n.kind == "call"]
    return all(
        layouts.contiguous(node.inputs[i])
        for node, step in zip(calls, steps)
        for i in step.contiguous_inputs
    )


class CGraphProgram:
    """``graph`` run by the C runner: ``program(*arrays)`` -> output arrays. ``priority``: the
    call nodes' positions in the order threads should prefer them (default: graph order);
    ``threads``: how many threads claim steps (1: the whole graph on the calling thread)."""

    def __init__(self, graph, steps: list, priority: list | None = None, threads: int = 2):
        from ..kernels import cpool

        self.graph = graph
        self.threads = threads
        self._run = _library()
        self._pool = cpool.parallel_for()
        calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
        step_of = dict(zip(calls, steps))
        order = list(priority) if priority is not None else calls
        if sorted(order) != calls:
            raise ValueError("priority must list every call node once")
        index = {p: k for k, p in enumerate(order)}
        nodes = [graph.nodes[p] for p in order]
        self._steps = [step_of[p] for p in order]
        made_by = {id(v): index[p] for p in order for v in graph.nodes[p].outputs}
        # the intermediate values' arena, and the orderings its sharing needs (call positions)
        self._arena = plan_arena(graph, [graph.nodes[p] for p in calls], steps, threads)
        ordered = {}
        for a, b in self._arena.edges:
            ordered.setdefault(index[calls[b]], set()).add(index[calls[a]])
        successors: list[list[int]] = [[] for _ in order]
        missing = np.zeros(len(order), np.int64)
        for k, node in enumerate(nodes):
            before = {made_by[id(v)] for v in node.inputs if id(v) in made_by}
            for q in sorted(before | ordered.get(k, set())):
                successors[q].append(k)
                missing[k] += 1
        self._missing = missing
        self._succ_start = np.cumsum([0] + [len(s) for s in successors], dtype=np.int64)
        self._succ = np.array([k for s in successors for k in s] or [0], np.int64)
        self._fns = np.array([s.fn for s in self._steps], np.int64)
        self._args = np.array([data_address(s.args) for s in self._steps], np.int64)
        self._missing_now = missing.copy()  # the counters one run counts down
        self._claimed = np.zeros(len(order), np.int64)
        self._run_packed = _library("ember_run_packed", [_P])
        # argument slots by value: [(block, slot), ...]
        slots: dict = {}
        for step, node in zip(self._steps, nodes):
            for slot, role, i in step.slots:
                value = node.inputs[i] if role == "in" else node.outputs[i]
                slots.setdefault(id(value), []).append((step.args, slot))
        outputs = {id(v) for v in graph.outputs}
        # the intermediate values live in one arena of the program's own, at offsets shared by
        # values never alive at once (runtime/cgraph_memory.py), written once into the steps'
        # arguments; the graph's outputs are new arrays each run
        self._values: dict = {}
        self._fresh = []
        for node in nodes:
            for v in node.outputs:
                shape, dtype = tuple(v.type.shape), v.type.dtype.np
                if id(v) in outputs:
                    self._fresh.append((id(v), shape, dtype, slots.get(id(v), [])))
                else:
                    self._values[id(v)] = array = self._arena.arrays[id(v)]
                    _write(slots.get(id(v), []), array)
        for n in graph.nodes:
            if n.kind == "constant":
                v = n.outputs[0]
                self._values[id(v)] = array = np.asarray(graph.constants[n.name], order="C")
                _write(slots.get(id(v), []), array)
        self._inputs = [(id(v), v.type.dtype.np, slots.get(id(v), [])) for v in graph.inputs]
        # bytes the program holds between runs: its intermediate values' arrays, the steps'
        # scratch and argument blocks (the graph's constants are the graph's, not counted)
        constants = {id(n.outputs[0]) for n in graph.nodes if n.kind == "constant"}
        self.held_bytes = _distinct_nbytes(
            [self._arena.memory]
            + [a for k, a in self._values.items() if k not in constants]
            + [a for step in self._steps for a in step.keep if isinstance(a, np.ndarray)]
            + [step.args for step in self._steps]
        )
        self._last_inputs: list = [None] * len(graph.inputs)  # (kept: their ids stay theirs)
        # the run's tables never move: their addresses are taken once (``.ctypes.data`` makes
        # an object each time it is read, which a graph of small nodes would pay every call)
        tables = (self._fns, self._args, self._succ_start, self._succ)
        self._tables = tuple(data_address(a) for a in tables)
        self._counters = (data_address(self._missing_now), data_address(self._claimed))
        # the same, with the predecessor counts, the threads and the pool: ember_run_packed's
        # one argument (the counters are reset in C)
        self._packed = np.array(
            [len(self._steps), *self._tables, *self._counters, data_address(self._missing),
             threads, self._pool or 0],
            np.int64,
        )  # fmt: skip
        self._packed_at = data_address(self._packed)
        # where each output comes from: ("fresh", k), ("in", position) or ("held", array)
        fresh = {key: k for k, (key, *_) in enumerate(self._fresh)}
        inputs = {id(v): i for i, v in enumerate(graph.inputs)}
        self._sources = [
            ("fresh", fresh[id(v)])
            if id(v) in fresh
            else ("in", inputs[id(v)])
            if id(v) in inputs
            else ("held", self._values[id(v)])
            for v in graph.outputs
        ]
        # (the common case: every output made by the run, once each, in order)
        self._made_only = self._sources == [("fresh", k) for k in range(len(self._fresh))]
        # the steps that check their inputs' values, with their nodes (`CStep.failed`)
        self._checking = [(s.failed, n) for s, n in zip(self._steps, nodes) if s.failed is not None]
        self._inputs_at = {id(v): i for i, v in enumerate(graph.inputs)}
        self._fresh_at = {key: k for k, (key, *_) in enumerate(self._fresh)}

    def __call__(self, *arrays) -> list:
        last = self._last_inputs
        # only the inputs that are not the array the last run took (a parameter is the same
        # array every step; that one was contiguous and of its dtype then, and is now)
        for k in compress(range(len(last)), map(is_not, arrays, last)):
            _, dtype, slots = self._inputs[k]
            a = np.asarray(arrays[k], dtype, order="C")  # (a 0-d array stays 0-d)
            if a is not last[k]:
                _write(slots, a)
                last[k] = a
        given = last[:]  # (the outputs that are inputs are these arrays)
        made = []
        for _, shape, dtype, slots in self._fresh:
            array = np.empty(shape, dtype)
            made.append(array)
            _write(slots, array)
        self._run_packed(self._packed_at)
        if self._checking and any(flag[0] for flag, _ in self._checking):
            self._refuse(given, made)
        if self._made_only:
            return made
        return [
            made[at] if where == "fresh" else given[at] if where == "in" else at
            for where, at in self._sources
        ]

    def _refuse(self, given: list, made: list) -> None:
        """Raise the error of the first step that refused its inputs (a gather's index out of
        range): its node's own kernel run on the same inputs, so the user sees the error
        generated code raises. Steps after it ran on what it left unwritten; nothing of the
        run is returned."""
        failed = [node for flag, node in self._checking if flag[0]]
        for flag, _ in self._checking:
            flag[0] = 0
        for node in failed:
            arrays = [
                given[self._inputs_at[id(v)]]
                if id(v) in self._inputs_at
                else made[self._fresh_at[id(v)]]
                if id(v) in self._fresh_at
                else self._values[id(v)]
                for v in node.inputs
            ]
            node.op.run(*arrays, **node.attrs)  # (raises, unless another step's garbage fed it)
        raise EmberError(
            f"a C step refused its inputs ({', '.join(n.op.name for n in failed)})",
            op=failed[0].op.name,
        )


def _distinct_nbytes(arrays: list) -> int:
    seen, total = set(), 0
    for a in arrays:
        while isinstance(a.base, np.ndarray):
            a = a.base
        if id(a) not in seen:
            seen.add(id(a))
            total += a.nbytes
    return total


def _write(slots: list, array: np.ndarray) -> None:
    if slots:
        address = data_address(array)  # (a buffer export: cheaper than ``array.ctypes``)
        for block, slot in slots:
            block[slot] = address


def _example(t, rng) -> np.ndarray:
    shape, dtype = tuple(t.shape), t.dtype.np
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    return np.zeros(shape, dtype)


def measure_nodes(graph, steps: list, reps: int = 5, budget_s: float = 0.25) -> dict:
    """Each call node's time on this machine, on random inputs of its types: position ->
    (seconds as generated code runs it, seconds as its C step runs on one thread (beside
    another step: the pool busy), seconds as its C step runs with the pool free (a run on one
    thread)), medians of ``reps``. Nodes of one signature (`_signature`: a transformer's
    repeated layers) share one measurement, and the signatures are measured costliest first
    by their ops' cost rules, so the budget goes to the nodes that decide a graph's time;
    the signatures left once ``budget_s`` of measuring has passed are left out (the tables
    price them)."""
    from ..kernels import cpool
    from .timing import _median_time
    from .workers import node_callable

    rng = np.random.default_rng(0)
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    alike: dict = {}  # signature -> [(position, step), ...], the first met first
    for position, step in zip(calls, steps):
        alike.setdefault(_signature(graph.nodes[position]), []).append((position, step))
    order = sorted(alike.values(), key=lambda group: -_work(graph.nodes[group[0][0]]))
    alone, pool = _run_alone(), cpool.parallel_for()
    measured: dict = {}
    start = time.perf_counter()
    for group in order:
        position, step = group[0]
        node = graph.nodes[position]
        inputs = [_example(v.type, rng) for v in node.inputs]
        outputs = [np.empty(tuple(v.type.shape), v.type.dtype.np) for v in node.outputs]
        for slot, role, i in step.slots:
            step.args[slot] = (inputs if role == "in" else outputs)[i].ctypes.data
        call, block = STEP_CALL(step.fn), data_address(step.args)
        kernel = node_callable(node)
        # (beside another step: inside a parallel loop, as a run's threads are; with the pool
        # free: called directly, as a run on one thread calls it)
        sides = (
            lambda: kernel(*inputs),
            lambda: alone(step.fn, block, pool),
            lambda: call(block),
        )
        # (random inputs: a negative variance's square root, an overflow)
        with np.errstate(all="ignore"):
            for side in sides:
                side()  # (the first call may build or load a kernel)
            times = tuple(_median_time(side, reps) for side in sides)
        for position, _ in group:
            measured[position] = times
        if time.perf_counter() - start > budget_s:
            break
    return measured


def _signature(node) -> tuple:
    """What a node's time depends on: its op, attributes, operand types and which operands are
    graph constants (a frozen weight's step runs on its pack)."""
    operands = tuple(
        (tuple(v.type.shape), v.type.dtype.name, v.node is not None and v.node.kind == "constant")
        for v in node.inputs
    )
    results = tuple((tuple(v.type.shape), v.type.dtype.name) for v in node.outputs)
    return node.op.name, repr(sorted(node.attrs.items(), key=lambda kv: kv[0])), operands, results


def _work(node) -> float:
    """A node's work by its op's cost rule (FLOPs plus bytes moved; 0 without a rule)."""
    if node.op.cost is None:
        return 0.0
    in_types = [v.type for v in node.inputs]
    out_types = [v.type for v in node.outputs]
    cost = node.op.cost(in_types, out_types, node.attrs)
    return float(cost.flops + cost.bytes) if cost is not None else 0.0
