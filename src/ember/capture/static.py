"""Define-then-run graphs, TensorFlow 1 style: `placeholder`, `Variable` and `Session`.

    with ember.Graph() as g:
        x = ember.placeholder((None, 784), name="x")
        y = ember.placeholder((None,), ember.int64, name="y")
        W = ember.Variable(ember.randn(784, 10) * 0.01, name="W")
        loss = ember.nn.functional.cross_entropy(x @ W, y)
        train = ember.optim.SGD([W], lr=0.1).minimize(loss)
    with ember.Session(g) as sess:
        value, _ = sess.run([loss, train], feed_dict={x: images, y: labels})

Inside ``with graph:`` every op records a node (the graph's `GraphBuilder`). A placeholder is a
graph input fed at each run; a ``None`` size becomes symbolic (dimension 0 is ``N``, the batch,
shared by all placeholders; others get their own names). Eager tensors the graph reads
(Variables, module parameters, optimizer buffers) are captured: fed with their data at each run.
Build modules before the block or under `init_scope`: inside it, their initialization would be
recorded instead of run.

`Session.run` owns execution. It prunes the graph to the nodes its fetches need, compiles that
subgraph once per set of fetched values (generated Python, runtime/codegen.py), checks and feeds
the placeholders, and returns NumPy arrays. Every fetched value is computed from the state at
the start of the run; the updates of fetched training ops (optim/train_op.py) are written into
the tensors' memory after it (or computed straight into it, where no fetched value can see the
difference); their learning rates and other runtime hyper-parameters are read from the
optimizer's param groups at each run, so a scheduler's changes apply. All checks (feeds,
graphs) happen before anything runs, so a bad call changes no state.
"""

from __future__ import annotations

import contextlib

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, EmberError, ShapeError
from ..graph.builder import GraphBuilder
from ..graph.ir import Graph
from ..graph.printer import format_type
from ..graph.symbolic_tensor import SymbolicTensor
from ..graph.tree import flatten, unflatten
from ..kernels import cprepack
from ..ops import _registry as _reg
from ..ops._data import to_array
from ..optim.optimizer import HyperParameter
from ..optim.train_op import Operation
from ..runtime.codegen import compile_graph
from ..symbolic import SymDim
from ..symbolic_assumptions import first_broken
from ..tensor import Tensor
from ..transforms.partition import _copy_into
from ..types import TensorType
from .signature import TensorSpec
from .writebacks import Writeback, WritebackKind, apply_writebacks

__all__ = [
    "Operation",
    "Session",
    "SessionError",
    "Variable",
    "get_default_graph",
    "init_scope",
    "placeholder",
]


class SessionError(EmberError, ValueError):
    """A Session misused: a missing feed, a fetch or feed from another graph, a closed session."""


def get_default_graph() -> Graph | None:
    """The graph the innermost ``with graph:`` block is building (None outside one)."""
    mode = _reg._state.modes[-1] if _reg._state.modes else None
    if isinstance(mode, GraphBuilder) and mode.graph._builder is mode:
        return mode.graph
    return None


@contextlib.contextmanager
def init_scope():
    """Run ops eagerly inside a ``with graph:`` block: for building modules (their parameters'
    initialization must run now, not at every Session run) or computing initial values."""
    _reg.push_mode(_reg._base_mode[0])  # the eager mode on top hides the builder
    try:
        yield
    finally:
        _reg.pop_mode()


# ---------------------------------------------------------------------------------- placeholders
def _placeholders(graph: Graph) -> dict:
    """The graph's placeholders: id of the input Value -> (the SymbolicTensor returned to the
    user, the input Value; the tensor's own value moves if it is updated in place)."""
    return graph.__dict__.setdefault("_placeholders", {})


def placeholder(shape, dtype=None, name: str | None = None) -> SymbolicTensor:
    """A graph input fed by ``Session.run(..., feed_dict={ph: value})``. ``None`` in ``shape``
    takes any size (see the module docstring); a string names the symbolic size."""
    from ..dtypes import float32

    graph = get_default_graph()
    if graph is None:
        raise SessionError(
            "ember.placeholder must be called inside `with ember.Graph() as g:`", op="placeholder"
        )
    registry = _placeholders(graph)
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in name or "placeholder")
    taken = {value.name for _, value in registry.values()}
    if not base.isidentifier() or base in taken:  # symbol names below must be unique
        base = f"placeholder{len(registry)}" if not base.isidentifier() else f"{base}_{len(taken)}"
    spec = TensorSpec(tuple(shape), dtype if dtype is not None else float32)
    ph = graph._builder.input(TensorType(spec.symbolic_shape(base), spec.dtype), base)
    registry[id(ph.value)] = (ph, ph.value)
    return ph


# ---------------------------------------------------------------------------------- Variables
class Variable(Tensor):
    """Persistent state of a define-then-run graph: an eager tensor (a copy of ``value``) that
    graphs capture and training ops update in place. It works as an ordinary tensor outside
    graphs too. ``value`` may be computed by graph ops (``ember.randn(3, 4)`` inside the block):
    it is evaluated once, now, and may not depend on a placeholder."""

    __slots__ = ("name", "graph", "trainable")

    def __init__(self, value, name: str | None = None, trainable: bool = True, dtype=None):
        graph = get_default_graph()
        if isinstance(value, SymbolicTensor):
            array = _evaluate(value)
            if dtype is not None:
                array = to_array(array, dtype)
        else:
            array = np.array(to_array(value, dtype), copy=True)  # the Variable owns its memory
        super().__init__(array)
        self.name = name or "Variable"
        self.graph = graph
        self.trainable = trainable
        if trainable and dt.differentiable(self.dtype):
            self.requires_grad_(True)
        if graph is not None:  # the graph input it is fed through carries its name
            graph._builder.capture_names[id(self)] = self.name

    def __repr__(self) -> str:
        return f"Variable {self.name!r} containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        # a copy (copy.deepcopy, pickle) is a fresh Variable of no graph: a graph is not data
        return (_rebuild_variable, (self._data, self.name, self.trainable))


def _rebuild_variable(data: np.ndarray, name: str, trainable: bool) -> Variable:
    return Variable(data, name, trainable)


class _Plan:
    """The pruned, compiled subgraph computing ``targets`` (Values of ``graph``), and where
    each of its inputs comes from: a placeholder's feed or a captured tensor's data. The last
    targets are the new values of the ``updated`` tensors: where that is safe the generated
    code computes them straight into the tensors' memory (runtime/codegen.py)."""

    def __init__(self, graph: Graph, targets: list, updated: list = ()):
        needed, stack = set(), list(targets)
        while stack:
            node = stack.pop().node
            if id(node) not in needed:
                needed.add(id(node))
                stack.extend(node.inputs)
        sub = Graph(f"{graph.name}_run" if graph.name.isidentifier() else "run")
        mapping: dict = {}
        inputs = [v for v in graph.inputs if id(v.node) in needed]
        for v in inputs:
            mapping[id(v)] = sub.add_input(v.type, v.name)
        nodes = [n for n in graph.nodes if id(n) in needed and n.kind != "input"]
        _copy_into(sub, nodes, mapping, graph)
        sub.set_outputs([mapping[id(v)] for v in targets])
        builder = graph._builder
        captured = {id(builder.input_value(t)): t for t in builder.captured}
        placeholders = _placeholders(graph)
        # per input: ("feed", input Value) | ("tensor", t) | ("grad_of", t) | ("hyper", t)
        self.sources = []
        for v in inputs:
            if id(v) in placeholders:
                self.sources.append(("feed", v))
            elif id(v) in captured:
                t = captured[id(v)]
                owner = builder.grad_of.get(id(t))  # a .grad that backward accumulated onto
                if owner is not None:
                    self.sources.append(("grad_of", owner))
                elif isinstance(t, HyperParameter):  # the param group's value at each run
                    self.sources.append(("hyper", t))
                else:
                    self.sources.append(("tensor", t))
            else:
                raise SessionError(f"graph input %{v.name} is neither a placeholder nor captured")
        self.graph = sub
        position = {id(s): i for i, (kind, s) in enumerate(self.sources) if kind == "tensor"}
        first = len(targets) - len(updated)
        inplace = {first + j: position[id(t)] for j, t in enumerate(updated) if id(t) in position}
        self.compiled = compile_graph(sub, inplace)

    def placeholders(self) -> list:
        return [s for kind, s in self.sources if kind == "feed"]

    def arrays(self, feeds: dict) -> list:
        """The input arrays, placeholders from ``feeds`` (id of input Value -> array)."""
        missing = [v for v in self.placeholders() if id(v) not in feeds]
        if missing:
            names = ", ".join(f"{v.name!r} ({format_type(v.type)})" for v in missing)
            raise SessionError(
                f"the fetches need placeholder {names}, which feed_dict does not give; pass "
                f"feed_dict={{{missing[0].name}: array, ...}}",
                op="Session.run",
            )
        out = []
        for kind, source in self.sources:
            if kind == "feed":
                out.append(feeds[id(source)])
            elif kind == "tensor":
                out.append(source._data)
            elif kind == "hyper":
                out.append(source.current())
            else:
                out.append(source.grad._data)
        return out


def _evaluate(value: SymbolicTensor) -> np.ndarray:
    """A graph value computed now from the captured tensors (a Variable's initial value)."""
    graph = value.builder.graph
    if graph._builder is not value.builder:
        raise SessionError("a Variable's initial value must come from a `with ember.Graph()` block")
    plan = _Plan(graph, [value.value])
    if plan.placeholders():
        raise SessionError(
            f"a Variable's initial value cannot depend on placeholder "
            f"{plan.placeholders()[0].name!r}: it is computed once, when it is created",
            op="Variable",
        )
    return np.array(plan.compiled(*plan.arrays({}))[0], copy=True)


# ---------------------------------------------------------------------------------- Session
class Session:
    """Runs a define-then-run graph: ``Session(graph).run(fetches, feed_dict)``; see the module
    docstring. Usable as a context manager; ``close()`` ends it."""

    def __init__(self, graph: Graph | None = None):
        graph = graph if graph is not None else get_default_graph()
        if not isinstance(graph, Graph):
            raise SessionError(
                "Session needs the graph to run: ember.Session(g), or create it inside `with g:`",
                op="Session",
            )
        if graph._builder is None:
            graph._builder = GraphBuilder(graph)  # an empty graph: nothing captured yet
        self.graph = graph
        self._plans: dict = {}
        self._closed = False

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def close(self) -> None:
        """End the session: later runs raise. Compiled subgraphs are dropped."""
        self._closed = True
        self._plans.clear()

    # ------------------------------------------------------------------------------ checks
    def _other_graph(self, what: str, owner: Graph) -> SessionError:
        return SessionError(
            f"{what} belongs to another graph ({owner!r}), not to this session's graph "
            f"({self.graph!r}); build it inside `with g:` of the graph you run",
            op="Session.run",
        )

    def _fetch_value(self, leaf):
        if isinstance(leaf, SymbolicTensor):
            if leaf.builder.graph is not self.graph:
                raise self._other_graph(f"fetch %{leaf.value.name}", leaf.builder.graph)
            return leaf.value
        if isinstance(leaf, Operation):
            if leaf.graph is not self.graph:
                raise self._other_graph(f"training op {leaf.name!r}", leaf.graph)
            return None
        if isinstance(leaf, Tensor):
            graph = getattr(leaf, "graph", None)
            if graph is not None and graph is not self.graph:
                raise self._other_graph(f"Variable {leaf.name!r}", graph)
            return None
        raise SessionError(
            f"cannot fetch a {type(leaf).__name__}: fetches are graph tensors, training ops, "
            "Variables, or lists, tuples and dicts of them",
            op="Session.run",
        )

    def _feeds(self, feed_dict: dict) -> dict:
        """Checked feeds: id of the placeholder's input Value -> array of its dtype."""
        registry = _placeholders(self.graph)
        by_name = {value.name: ph for ph, value in registry.values()}
        feeds, bound = {}, {}  # bound: symbolic size -> (size, the placeholder that set it)
        for key, value in feed_dict.items():
            if isinstance(key, str):
                if key not in by_name:
                    known = ", ".join(sorted(by_name)) or "none"
                    raise SessionError(
                        f"feed_dict names placeholder {key!r}, which this graph does not have "
                        f"(it has: {known})",
                        op="Session.run",
                    )
                key = by_name[key]
            if not isinstance(key, SymbolicTensor):
                raise SessionError(
                    f"feed_dict keys are placeholders or their names, got {type(key).__name__}",
                    op="Session.run",
                )
            if key.builder.graph is not self.graph:
                raise self._other_graph(f"fed placeholder %{key.value.name}", key.builder.graph)
            value_of = next((v for ph, v in registry.values() if ph is key), None)
            if value_of is None:
                raise SessionError(
                    f"%{key.value.name} is computed by the graph, not a placeholder; only "
                    "placeholders can be fed",
                    op="Session.run",
                )
            feeds[id(value_of)] = _check_feed(value_of, value, bound)
        _check_sizes(bound, self.graph.size_assumptions)
        return feeds

    # ------------------------------------------------------------------------------ running
    def pruned(self, fetches) -> Graph:
        """The subgraph a run of ``fetches`` executes (only the nodes they need)."""
        targets, *_, updates = self._targets(fetches)
        return self._plan(targets, updates).graph

    def _targets(self, fetches):
        # any object is a leaf: graph tensors, Variables, training ops (checked one by one)
        leaves, _, spec = flatten(fetches, is_leaf=lambda _: True)
        values = [self._fetch_value(leaf) for leaf in leaves]
        ops = list({id(op): op for op in leaves if isinstance(op, Operation)}.values())
        variants = [(op, op.updates()) for op in ops]
        updates = [u for _, variant in variants for u in variant]
        seen: set = set()
        for t, _ in updates:
            if id(t) in seen:
                raise SessionError(
                    f"two fetched training ops update the same tensor of shape {tuple(t.shape)}; "
                    "run them in separate calls",
                    op="Session.run",
                )
            seen.add(id(t))
        targets = [v for v in values if v is not None] + [v for _, v in updates]
        return targets, leaves, spec, values, variants, updates

    def _plan(self, targets: list, updates: list) -> _Plan:
        key = (tuple(id(v) for v in targets), tuple(id(t) for t, _ in updates))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _Plan(self.graph, targets, [t for t, _ in updates])
        return plan

    def run(self, fetches, feed_dict: dict | None = None):
        """Compute ``fetches`` (a graph tensor, a training op, a Variable, or a nest of lists,
        tuples and dicts of them) with the placeholders fed from ``feed_dict``. Returns NumPy
        arrays in the same structure (None for a training op); see the module docstring."""
        if self._closed:
            raise SessionError("this Session is closed", op="Session.run")
        targets, leaves, spec, values, variants, updates = self._targets(fetches)
        feeds = self._feeds(feed_dict or {})
        # Variables are read before the run's updates, like every other fetch
        reads = {id(t): np.array(t._data, copy=True) for t in leaves if isinstance(t, Tensor)}
        results: list = []
        fed: set = set()
        if targets:
            plan = self._plan(targets, updates)
            arrays = plan.arrays(feeds)
            fed = {id(a) for a in arrays}
            # (variables updated in place: no packed weights, kernels/cprepack.py)
            with cprepack.paused() if updates else contextlib.nullcontext():
                results = plan.compiled(*arrays)
        outs = iter(
            r if r.base is None and id(r) not in fed else np.array(r, copy=True)
            for r in results[: len(targets) - len(updates)]
        )
        fetched = []
        for leaf, value in zip(leaves, values):
            if value is not None:
                fetched.append(next(outs))
            else:
                fetched.append(reads.get(id(leaf)) if isinstance(leaf, Tensor) else None)
        if updates:
            plan_ = [Writeback(WritebackKind.DATA, t) for t, _ in updates]
            apply_writebacks(plan_, results[len(targets) - len(updates) :], [], fed)
        for op, variant in variants:
            op._after_run(variant)
        return unflatten(spec, fetched)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._plans)} compiled subgraphs"
        return f"<ember.Session of {self.graph!r} ({state})>"


def _check_feed(placeholder, value, bound: dict) -> np.ndarray:
    """``value`` as an array for ``placeholder`` (its input Value); ShapeError / DTypeError
    naming it."""
    expected, name = placeholder.type, placeholder.name
    if isinstance(value, SymbolicTensor):
        raise SessionError(
            f"placeholder {name!r} is fed a graph tensor; feed arrays (fetch the tensor first)",
            op="Session.run",
        )
    if isinstance(value, (Tensor, np.ndarray, np.generic)):
        array = value._data if isinstance(value, Tensor) else np.asarray(value)
        if array.dtype != expected.dtype.np:
            raise DTypeError(
                f"placeholder {name!r} expects {expected.dtype}, got an array of dtype "
                f"{array.dtype}; convert it first (array.astype(...))",
                op="Session.run",
            )
    else:  # Python numbers and lists are converted, as long as no kind is lost (float -> int)
        array = np.asarray(value)
        if not np.can_cast(array.dtype, expected.dtype.np, casting="same_kind"):
            raise DTypeError(
                f"placeholder {name!r} expects {expected.dtype}, got Python data of kind "
                f"{array.dtype}",
                op="Session.run",
            )
        array = array.astype(expected.dtype.np)
    if array.ndim != len(expected.shape) or any(
        not isinstance(want, SymDim) and want != got
        for want, got in zip(expected.shape, array.shape)
    ):
        raise ShapeError(
            f"placeholder {name!r} expects {format_type(expected)}, got shape {tuple(array.shape)}",
            op="Session.run",
        )
    for want, got in zip(expected.shape, array.shape):
        if isinstance(want, SymDim):
            size, source = bound.setdefault(want, (got, name))
            if size != got:
                raise ShapeError(
                    f"placeholder {name!r} expects {format_type(expected)}, got shape "
                    f"{tuple(array.shape)}, but {want} is {size} in placeholder {source!r}",
                    op="Session.run",
                )
    return array


def _check_sizes(bound: dict, assumptions) -> None:
    """Refuse feeds whose sizes disagree with a placeholder size derived from others (``2*n``
    beside ``n``) or break a size equality the graph was built on (a U-Net's ``2*(H//2) ==
    H``, symbolic_assumptions.py)."""
    bindings = {want.symbol(): size for want, (size, _) in bound.items() if want.symbol()}
    for want, (size, name) in bound.items():
        if want.symbol() is None and want.symbols() <= bindings.keys():
            if want.evaluate(bindings) != size:
                raise ShapeError(
                    f"placeholder {name!r} is fed size {size} where the graph has {want} = "
                    f"{want.evaluate(bindings)} (from the other placeholders' sizes)",
                    op="Session.run",
                )
    broken = first_broken(assumptions, bindings)
    if broken is not None:
        sizes = ", ".join(f"{n}={bindings[n]}" for n in sorted(broken.symbols()))
        raise ShapeError(
            f"the graph was built over symbolic sizes assuming {broken.describe(bindings)}, "
            f"which these feeds ({sizes}) break; feed sizes for which it holds (an image size "
            "its strides divide)",
            op="Session.run",
        )
