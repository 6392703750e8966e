"""Python code generation: a graph becomes one straight-line Python function.

Each call node becomes one line calling the op (`OpDef.run`: its C implementation where it has
one, else its NumPy kernel; or the node's compiled loop), each value a local variable, and
``del`` lines free values right after their last use (as torch.fx's generated code does). There
is no per-node dispatch: no mode lookup, no rule, no tensor wrapping. Attributes that are Python
literals are written into the code; others (dtypes, generators) are read from a table.

    compiled = compile_graph(graph)
    compiled.source          # the generated code, readable
    compiled(*arrays)        # -> list of output arrays

Buffer reuse. An elementwise node whose kernel is one NumPy ufunc (or a fused elementwise C
loop), and one of whose operands dies at that node with the output's exact type, is written
``ufunc(a, b, out=a) if _sole(a) else ufunc(a, b)``: the dying operand's memory takes the
result instead of a fresh allocation. ``_sole`` checks at run time that nothing else can see
that memory: the array owns it (no view of another), and its reference count says that only
this local variable holds it (a view made of it, or another name for it, would hold a
reference too). NumPy elides temporaries in ``a + b`` by the same reference-count test. An
output nothing reads (a split's unused part) is deleted right after its node.

Planned execution (``compile_graph(graph, arena=True)``, ``executor="arena"``): nodes whose
kernels take ``out=`` write into slots of one arena allocated with the program, at the offsets
plan/arena.py assigns; calls of such a program are serialized (the slots are shared).

Names. A graph may come from a file (graph/load.py), and nothing read from a file may become
code: every name written into the source goes through `_identifier` (value names, symbol names,
the graph's name, op names), which keeps a name made of ASCII letters, digits and underscores
and spells any other as the hex of its UTF-8 bytes under another prefix, so distinct names stay
distinct and none can end the line it sits in. An attribute key that is not a plain identifier
is passed through a ``**`` table, never written; attribute values are written only when their
type is exactly a Python literal's (a subclass may print anything), else read from a table.
"""

from __future__ import annotations

import itertools
import keyword
import linecache
import math
import re
import sys
import weakref

import numpy as np

from ..errors import EmberError, OutOfMemoryError
from ..graph.interpreter import last_uses
from ..kernels.ccompile import compiler_available
from ..ops._registry import native_code
from ..plan.liveness import reusable_output
from ..size import Size
from ..symbolic import SymDim, symbol_sources
from .prebuild import prebuild

_LITERALS = (int, float, str, bool, type(None))
_ids = itertools.count()
_PLAIN = re.compile(r"[A-Za-z0-9_]+")
# prefixes of the globals the code refers to (kernels, constants, attributes, slots): a graph's
# name starting with one must not become the function's name, which would shadow them
_GLOBAL_PREFIXES = ("k_", "c_", "a_", "s_", "v_", "n_", "xk_", "xv_", "xn_", "_")


def _identifier(prefix: str, name: str) -> str:
    """A Python identifier for ``name`` that no name can turn into code: ``prefix + name``
    when ``name`` is ASCII letters, digits and underscores, else ``x`` and ``prefix`` and the
    hex of its UTF-8 bytes (one to one, so two names never meet)."""
    name = str(name)
    if _PLAIN.fullmatch(name):
        return prefix + name
    return "x" + prefix + name.encode("utf-8", "surrogatepass").hex()


def _function_name(name) -> str:
    plain = isinstance(name, str) and _PLAIN.fullmatch(name) and name.isidentifier()
    if not plain or keyword.iskeyword(name) or name.startswith(_GLOBAL_PREFIXES):
        return "graph"
    return name


def _is_literal(value, depth: int = 0) -> bool:
    if type(value) in (tuple, list):
        return depth < 50 and all(_is_literal(v, depth + 1) for v in value)
    if isinstance(value, SymDim):
        return True  # written as an expression over the symbols bound at the top
    # exactly a literal's type: a subclass (an IntEnum, NumPy's float64) prints as no literal.
    # (NaN and the infinities have no literal: their repr, ``nan`` or ``inf``, is no Python
    # name; such a value is passed in like any other object)
    return type(value) in _LITERALS and (type(value) is not float or math.isfinite(value))


def _literal(value) -> str:
    if isinstance(value, SymDim):
        return _symbol_expression(value)
    if type(value) in (tuple, Size):  # a shape read from a tensor is an ember.Size
        inner = ", ".join(_literal(v) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})"
    if type(value) is list:
        return f"[{', '.join(_literal(v) for v in value)}]"
    return repr(value)


def _symbol(name: str) -> str:
    return _identifier("n_", name)


def _symbol_expression(d: SymDim) -> str:
    return d.fold(
        _symbol,
        lambda c: f"({int(c)})",
        lambda a, b: f"({a} + {b})",
        lambda a, b: f"{a}*{b}",
        lambda a, k: f"({a} // {int(k)})",
    )


def _local(value) -> str:
    return _identifier("v_", value.name)


# the recording ember.profiler.profile, set by it: calls then run an instrumented copy of the code
# (``profiler.run_graph``, which instruments it with its own hooks)
profiler = None


# what a kernel raises when its operands or attributes are not what it takes: wider than the
# eager mode's set (eager.py: ValueError, TypeError, IndexError, FloatingPointError), as a graph
# file's attributes reach fast paths the eager calls never give them (a dict lookup by a
# hostile key, int(nan), a float past int64)
KERNEL_FAILURES = (ValueError, TypeError, IndexError, KeyError, AttributeError, ArithmeticError)


def _reporting_kernel_failures(fn, name: str):
    """``fn``, the generated code, raising a kernel's own failure as the interpreter and the
    eager mode report one: an `EmberError` (an `OutOfMemoryError` for NumPy's MemoryError),
    not the raw exception of a fast path given what it does not take (a graph file's
    attribute of another kind: a string eps, a tuple axis)."""

    def run(*arrays):
        try:
            return fn(*arrays)
        except EmberError:
            raise
        except MemoryError as exc:  # (NumPy's: not a RuntimeError, which PyTorch's is)
            raise OutOfMemoryError(f"out of memory in graph {name}: {exc}") from exc
        except KERNEL_FAILURES as exc:
            raise EmberError(
                f"kernel failed in graph {name}: {type(exc).__name__}: {exc}", op="run"
            ) from exc

    run.__wrapped__ = fn
    return run


class CompiledGraph:
    def __init__(
        self, graph, source: str, fn, in_place: dict | None = None, arena=None, inplace=None
    ):
        self.graph = graph
        self.source = source
        self._fn = _reporting_kernel_failures(fn, graph.name)
        # {id(node): {output index: input value}} computed into inputs (the memory plan reads it)
        self.in_place = in_place or {}
        self.arena = arena  # planned execution: the placement (plan/arena.py) its slots follow
        self._arena_memory = None
        self._arena_lock = None
        # compile_graph's ``inplace`` as asked: the arena and profiled variants are compiled alike
        self.inplace_request = inplace
        self._profiled = None  # the instrumented code, made on the first profiled call

    @property
    def arena_bytes(self) -> int:
        """Bytes of the arena this program holds between calls (0 without one)."""
        return 0 if self._arena_memory is None else self._arena_memory.nbytes

    def __call__(self, *arrays):
        if profiler is not None:
            return profiler.run_graph(self, arrays)
        if self._arena_lock is not None:  # the arena's slots serve one call at a time
            with self._arena_lock:
                return self._fn(*arrays)
        return self._fn(*arrays)

    def profiled(self, instrument):
        """The code with each kernel call timed for ember.profiler, ``instrument`` giving the
        hooks (see `compile_graph`); generated once, without an arena: a profiled call
        allocates as plain generated code does."""
        if self._profiled is None:
            code = compile_graph(self.graph, self.inplace_request, instrument=instrument)
            self._profiled = code._fn
        return self._profiled


def _in_place_nodes(graph, inplace: dict, compiled: dict) -> dict:
    """The call nodes that may write their result straight into an input's memory: for each
    ``output position -> input position`` in ``inplace`` (the caller will store that output
    into that input's buffer anyway, e.g. a parameter update), when

    * the output is made by a one-ufunc kernel, or by a ``compiled`` implementation (an
      elementwise C loop taking ``out=``: ``compiled`` maps id(node) to it), with the input
      among its operands and the same shape and dtype (so writing into the input computes
      exactly what the kernel would: each element is read before it is written),
    * no later node reads the input, and no view of it (reshape, permute, ...) is still live
      there or returned (a write would change what they show),
    * the output is returned once and is not the input itself.

    Returns {id(node): {output index: input value}}. This is the "preallocated output" the
    generated code writes into: the update costs no new array and no copy back.
    """
    positions = {id(n): i for i, n in enumerate(graph.nodes)}
    last_read: dict[int, int] = {}
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            last_read[id(v)] = i
    outputs = [id(v) for v in graph.outputs]
    chosen: dict = {}
    for out_position, in_position in inplace.items():
        value, target = graph.outputs[out_position], graph.inputs[in_position]
        node = value.node
        if node.kind != "call":  # (an input or a constant written back: nothing to compute)
            continue
        ufunc = isinstance(node.op.kernel, np.ufunc) and not node.attrs
        if (
            node.kind != "call"
            or not (ufunc or id(node) in compiled)
            or target not in node.inputs
            or value.type != target.type
            or outputs.count(id(value)) != 1
            or id(target) in outputs
            or value.index in chosen.get(id(node), {})
            or any(t is target for t in chosen.get(id(node), {}).values())
        ):
            continue
        at = positions[id(node)]
        if last_read.get(id(target), -1) > at:
            continue
        aliases, stack = [], [target]
        while stack:  # values that may share the input's memory
            v = stack.pop()
            for user in v.users:
                if user.op is not None and user.op.view:
                    aliases.extend(user.outputs)
                    stack.extend(user.outputs)
        if any(last_read.get(id(a), -1) >= at or id(a) in outputs for a in aliases):
            continue
        chosen.setdefault(id(node), {})[value.index] = target
    return chosen


def planned_in_place(graph, inplace: dict) -> dict:
    """The in-place updates `compile_graph(graph, inplace)` chooses (`_in_place_nodes`), known
    without building any kernel: a node whose op has a ``compile`` hook counts as compiled where
    a C compiler is available (without one the NumPy kernels run, and only one-ufunc nodes
    update in place). The memory planner reads it for graphs it does not compile."""
    if not inplace:
        return {}
    have_cc = compiler_available()
    compiled = {
        id(n): True
        for n in graph.nodes
        if have_cc and n.kind == "call" and n.op.compile is not None and native_code(n)
    }
    return _in_place_nodes(graph, inplace, compiled)


def _sole(array) -> bool:
    """Whether ``array`` may be overwritten: it owns its memory and only the caller's local
    variable refers to it (3 references: that variable, this parameter, getrefcount's own).
    A kernel's result may be a contiguous view of a new array of the same size (a batched
    matmul's product reshaped): it qualifies when nothing but the view holds that array."""
    if type(array) is not np.ndarray or sys.getrefcount(array) > 3:
        return False
    if not array.flags.writeable:  # (a view of a broadcast, or of a constant)
        return False
    base = array.base
    if base is None:
        return True
    # references to base: array.base, this local, getrefcount's own
    return (
        type(base) is np.ndarray
        and base.base is None
        and sys.getrefcount(base) <= 3
        and array.nbytes == base.nbytes
        and array.flags.c_contiguous
    )


def _reusable_operand(node, dying: tuple, graph, fused: bool = False):
    """(the result, the operand) of a one-ufunc node (``fused``: of a compiled fused loop)
    where the operand's buffer may take that result (see the module docstring), or None."""
    index = reusable_output(node, fused)
    if index is None:
        return None
    out = node.outputs[index]
    for v in node.inputs:
        if id(v) in dying and v.type == out.type and v.node.kind == "call":
            return index, v
    return None


def compile_graph(
    graph, inplace: dict | None = None, arena: bool = False, instrument=None
) -> CompiledGraph:
    """Generate and compile the Python of ``graph``. ``inplace`` (output position -> input
    position) names outputs the caller writes back into input buffers; where it is safe the
    code computes them in place (see `_in_place_nodes`) and returns the input's own array.
    ``arena``: planned execution, kernels taking ``out=`` write into slots of one arena
    allocated with the program (plan/arena.py). ``instrument``: time each kernel call, a
    function of the graph returning ``(now, event)``: the code calls ``_t = now()`` before
    each kernel and ``event(position, _t, outputs, inputs)`` after it (ember.profiler passes
    its recorder's, profiler/recorder.py; this layer knows no profiler)."""
    # an op may compile a node into a faster implementation with its attributes built in
    # (ops/fused.py: a C loop); it takes the inputs only, and ``out=`` per output
    compiled = {}
    prebuild(graph)  # (the nodes' C kernels in one compiler run)
    for node in graph.nodes:
        hook = node.op.compile if node.kind == "call" and native_code(node) else None
        if hook is not None and (impl := hook(node)) is not None:
            compiled[id(node)] = impl
    in_place = _in_place_nodes(graph, inplace, compiled) if inplace else {}
    slots, memory, placement = {}, None, None
    if arena:
        from ..plan.arena import arena_slots

        memory, slots, placement = arena_slots(graph, in_place, compiled)
    writer = _Writer(graph, compiled, in_place, slots, profile=instrument is not None)
    source, namespace = writer.source(), writer.namespace()
    filename = f"<ember graph {graph.name} #{next(_ids)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    if instrument is not None:
        now, event = instrument(graph)
        namespace.update(_now=now, _event=event)
    exec(compile(source, filename, "exec"), namespace)
    fn = namespace[writer.function_name]
    compiled_graph = CompiledGraph(graph, source, fn, in_place, placement, inplace)
    # the source stays readable for tracebacks while the program lives, not after: a process
    # that traces many shapes would otherwise keep every program's text
    weakref.finalize(compiled_graph, linecache.cache.pop, filename, None)
    compiled_graph._arena_memory = memory
    if memory is not None:
        import threading

        compiled_graph._arena_lock = threading.Lock()
    return compiled_graph


class _Writer:
    """The lines of one generated function (see the module docstring): ``compiled`` maps
    id(node) to its compiled implementation, ``in_place`` the nodes computed into an input's
    buffer, ``slots`` the values written into the arena; ``names`` collects the objects the
    code refers to (kernels, constants, attributes that are no literals)."""

    def __init__(self, graph, compiled: dict, in_place: dict, slots: dict, profile: bool):
        self.graph, self.compiled, self.in_place, self.slots = graph, compiled, in_place, slots
        self.profile = profile
        self.names: dict[str, object] = {}  # global name -> object the code refers to
        self.keys: dict[int, list] = {}  # id(object) -> its names, in the order made
        self.frees = last_uses(graph)
        self.returned = {id(v) for v in graph.outputs}
        self.function_name = _function_name(graph.name)

    def ref(self, obj, prefix: str) -> str:
        """The global name of ``obj``: its first name starting with ``prefix``, or a new one."""
        for key in self.keys.get(id(obj), ()):  # (``names`` holds obj: the id stays its)
            if key.startswith(prefix):
                return key
        key = f"{prefix}{len(self.names)}"
        self.names[key] = obj
        self.keys.setdefault(id(obj), []).append(key)
        return key

    def namespace(self) -> dict:
        array = lambda r: r if type(r) is np.ndarray else np.asarray(r)  # noqa: E731
        return dict(self.names, _array=array, _sole=_sole)

    def source(self) -> str:
        graph = self.graph
        params = ", ".join(_local(v) for v in graph.inputs)
        lines = [f"def {self.function_name}({params}):"]
        for symbol, (position, axis) in symbol_sources(graph).items():
            # a symbolic size (the batch N) used in attributes: this call's size, from its input
            source = _local(graph.inputs[position])
            lines.append(f"    {_symbol(symbol)} = {source}.shape[{int(axis)}]")
        for position, node in enumerate(graph.nodes):
            if node.kind == "constant":
                constant = self.ref(graph.constants[node.name], "c_")
                lines.append(f"    {_local(node.outputs[0])} = {constant}")
            elif node.kind == "call":
                lines += self.call_lines(position, node)
            dead = [v for v in node.inputs if id(v) in self.frees.get(position, ())]
            # outputs nothing reads (a split's unused part): dropped at once, not held to the end
            dead += [v for v in node.outputs if not v.users and id(v) not in self.returned]
            if dead:
                lines.append(f"    del {', '.join(dict.fromkeys(_local(v) for v in dead))}")
        lines.append(f"    return [{', '.join(_local(v) for v in graph.outputs)}]")
        return "\n".join(lines) + "\n"

    def call_lines(self, position: int, node) -> list[str]:
        """The lines of one call node: the call, into a buffer where one is given or reusable,
        and the profiler's timing around it."""
        compiled = id(node) in self.compiled
        prefix = _identifier("k_", node.op.name) + "_"
        if compiled:
            kernel = self.ref(self.compiled[id(node)], prefix)
            args = [_local(v) for v in node.inputs]
        else:
            kernel = self.ref(node.op.run, prefix)
            args = [_local(v) for v in node.inputs]
            unusual = {}  # keys that are no plain identifiers: passed as **table, never written
            for key, value in node.attrs.items():
                if not (isinstance(key, str) and _PLAIN.fullmatch(key) and key.isidentifier()):
                    unusual[key] = value
                elif keyword.iskeyword(key):
                    unusual[key] = value
                else:
                    text = _literal(value) if _is_literal(value) else self.ref(value, "a_")
                    args.append(f"{key}={text}")
            if unusual:
                args.append(f"**{self.ref(unusual, 'a_')}")
        reuse = None
        slot = [
            self.ref(self.slots[id(v)], "s_") if id(v) in self.slots else None for v in node.outputs
        ]
        if compiled and (id(node) in self.in_place or any(slot)):
            targets = self.in_place.get(id(node), {})
            outs = [
                _local(targets[i]) if i in targets else (slot[i] or "None")
                for i in range(len(node.outputs))
            ]
            args.append(f"out=({', '.join(outs)},)")
        elif id(node) in self.in_place:
            args.append(f"out={_local(self.in_place[id(node)][0])}")
        elif slot[0] is not None:  # planned execution: into the arena
            args.append(f"out={slot[0]}")
        else:
            fused = node.op.overwrites_operand and compiled
            reuse = _reusable_operand(node, self.frees.get(position, ()), self.graph, fused=fused)
        call = f"{kernel}({', '.join(args)})"
        if reuse is not None:
            index, target = reuse[0], _local(reuse[1])
            if compiled:  # (C loops take and return a tuple: the operand's buffer at ``index``)
                outs = ["None"] * len(node.outputs)
                outs[index] = target
                into = f"out=({', '.join(outs)},)"
            else:
                into = f"out={target}"
            reused = f"{kernel}({', '.join(args + [into])})"
            names = ", ".join(_local(v) for v in node.outputs) + ("," if compiled else "")
            line = f"    {names} = {reused} if _sole({target}) else {call}"
        elif node.op.num_outputs == 1 and node.outputs[0].type.shape:
            line = f"    {_local(node.outputs[0])} = {call}"
        elif node.op.num_outputs == 1:  # NumPy gives scalars, not 0-d arrays: wrap them
            line = f"    {_local(node.outputs[0])} = _array({call})"
        else:
            line = f"    {', '.join(_local(v) for v in node.outputs)}, = {call}"
        if not self.profile:
            return [line]
        outs, ins = (", ".join(_local(v) for v in vs) for vs in (node.outputs, node.inputs))
        event = f"    _event({position}, _t, ({outs},), ({ins}{',' if ins else ''}))"
        return ["    _t = _now()", line, event]
