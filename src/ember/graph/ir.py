"""The graph IR: `Graph`, `Node`, `Value`.

A `Graph` is a list of nodes in a valid execution order (every input defined before use), its
input values, its output values and the constant arrays it holds. Three node kinds:

* ``input``: a graph input (a placeholder, a captured parameter); one output value;
* ``constant``: an array held in ``graph.constants`` under the node's name; one output value;
* ``call``: a primitive from the op registry applied to input values with attributes.

Every `Value` carries its `TensorType` (shape and dtype; a dimension may be a `SymDim`) and the
nodes that use it (``users``). Values quack like tensors for shape rules (``.shape``, ``.dtype``,
``.ndim``), so ``op.infer(*values, **attrs)`` types a call node without computing anything.
New nodes go at the insertion point, the end by default, or where ``graph.inserting_before(n)``
/ ``inserting_after(n)`` put it. ``print(graph)`` shows one line per node (printer.py);
``graph.verify()`` checks it (verify.py).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools

import numpy as np

from .. import dtypes as dt
from ..errors import ShapeError
from ..ops._registry import OpDef
from ..symbolic_assumptions import recording
from ..types import TensorType
from ._base import GraphBase, GraphError

__all__ = ["Graph", "Node", "Value", "GraphError"]


class Value:
    """One tensor flowing through a graph: produced by ``node`` (its output ``index``)."""

    __slots__ = ("name", "type", "node", "index", "users")

    def __init__(self, name: str, type: TensorType, node: Node, index: int):
        self.name = name
        self.type = type
        self.node = node
        self.index = index
        self.users: list[Node] = []

    @property
    def shape(self) -> tuple:
        return self.type.shape

    @property
    def dtype(self) -> dt.DType:
        return self.type.dtype

    @property
    def ndim(self) -> int:
        return len(self.type.shape)

    def __repr__(self) -> str:
        return f"%{self.name}"


class Node:
    """One step of a graph: an input, a constant, or a call of a registered op."""

    __slots__ = (
        "kind",
        "op",
        "inputs",
        "attrs",
        "outputs",
        "graph",
        "scope",
        "location",
        "region",
    )

    def __init__(self, graph: Graph, kind: str, op: OpDef | None, inputs, attrs: dict):
        self.graph = graph
        self.kind = kind
        self.op = op
        self.inputs: list[Value] = list(inputs)
        self.attrs = dict(attrs)
        self.outputs: list[Value] = []
        self.scope: str | None = None  # the module / composite it was recorded in (scope.py)
        # the user's file:line that recorded it, kept while `scope.locating` is on (the ONNX
        # exporter's refusals name it); None otherwise
        self.location: str | None = None
        # the activation-checkpoint region it was recorded in (scope.checkpoint_region; the
        # outermost one), or None: transforms/checkpoint.py recomputes it for the backward
        self.region: int | None = None

    @property
    def name(self) -> str:
        return self.outputs[0].name if self.outputs else "?"

    @property
    def target(self) -> str:
        """What the node does: the op name, or ``input`` / ``constant``."""
        return self.op.name if self.kind == "call" else self.kind

    def replace_input(self, old: Value, new: Value) -> None:
        for i, v in enumerate(self.inputs):
            if v is old:
                self.inputs[i] = new
                old.users.remove(self)
                new.users.append(self)

    def __repr__(self) -> str:
        return f"<Node {self.name} = {self.target}>"


class Graph(GraphBase):
    """A computation graph of registry ops. See the module docstring."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self.nodes: list[Node] = []
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.constants: dict[str, np.ndarray] = {}
        self._taken: set[str] = set()
        self._suffix: dict[str, int] = {}  # base name -> the next suffix to try (see _fresh)
        self._counter = itertools.count()
        self._insert_at: int | None = None  # None: append at the end
        self._erasing: set[int] | None = None  # ids of nodes erased in an erasing() block
        self._builder = None  # the GraphBuilder of ``with graph:`` blocks (capture/static.py)
        # the size equalities ops took for aligned symbolic sizes while ``with graph:`` blocks
        # built it (symbolic_assumptions.py), which a Session checks against each run's feeds
        self.size_assumptions: list = []
        self._recordings: list = []  # (the open blocks' recording contexts, innermost last)

    # ------------------------------------------------------------------------------ naming
    def _fresh(self, hint: str | None) -> str:
        if hint:
            base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "v"
            # start where the last name from this base stopped: a hint used n times (every
            # constant is "const") would otherwise cost n tries for the n-th name
            name, k = base, self._suffix.get(base, 1)
            while name in self._taken:
                name, k = f"{base}_{k}", k + 1
            self._suffix[base] = k
        else:
            name = str(next(self._counter))
            while name in self._taken:
                name = str(next(self._counter))
        self._taken.add(name)
        return name

    # ------------------------------------------------------------------------------ building
    def _insert(self, node: Node) -> None:
        if self._insert_at is None:
            self.nodes.append(node)
        else:
            self.nodes.insert(self._insert_at, node)
            self._insert_at += 1

    def _add(self, kind, op, inputs, attrs, out_types, names=None) -> Node:
        node = Node(self, kind, op, inputs, attrs)
        for v in node.inputs:
            if v.node.graph is not self:
                raise GraphError(f"{node.target}: input {v!r} belongs to another graph")
            v.users.append(node)
        for i, t in enumerate(out_types):
            hint = names[i] if names else None
            node.outputs.append(
                Value(self._fresh(hint), TensorType(tuple(t.shape), t.dtype), node, i)
            )
        self._insert(node)
        return node

    def add_input(self, type: TensorType, name: str | None = None) -> Value:
        """A new graph input of ``type``, appended to ``graph.inputs``."""
        node = self._add("input", None, (), {}, (type,), [name or "input"])
        self.inputs.append(node.outputs[0])
        return node.outputs[0]

    def add_constant(self, array, name: str | None = None, *, frozen: bool = False) -> Value:
        """A constant holding ``array`` (kept by the graph under the value's name).
        ``frozen``: the caller made ``array`` and nothing else writes it (a folded result), so
        it is kept read-only, and kernels may keep work derived from a read-only constant
        for the program's life (a convolution's packed weight, kernels/cconv_constant.py).
        Any other constant may be memory its caller still writes (``from_numpy`` in a
        trace), and is read afresh at every call."""
        array = np.asarray(array)
        if frozen and array.flags.writeable:
            array = array.view()
            array.setflags(write=False)
        type = TensorType(array.shape, dt.from_numpy_dtype(array.dtype))
        node = self._add("constant", None, (), {}, (type,), [name or "const"])
        self.constants[node.outputs[0].name] = array
        return node.outputs[0]

    def add_call(
        self, op: OpDef, inputs, attrs: dict | None = None, out_types=None, names=None
    ) -> Node:
        """A call of ``op`` on ``inputs``; its output types come from the op's rule unless given.
        ``names``: a name hint per output (made unique); numbered names when None."""
        attrs = attrs or {}
        if out_types is None:
            try:
                inferred = op.infer(*inputs, **attrs)
            except ShapeError as err:
                if err.op is not None or type(err) is not ShapeError:
                    raise
                # symbolic sizes' arithmetic (symbolic.py) knows no op: name the one whose
                # shape rule asked for it
                raise ShapeError(err.detail, op=op.name, location=err.location) from None
            out_types = (inferred,) if op.num_outputs == 1 else tuple(inferred)
        return self._add("call", op, inputs, attrs, out_types, names)

    def set_outputs(self, values) -> None:
        values = list(values)
        for v in values:
            if v.node.graph is not self:
                raise GraphError(f"output {v!r} belongs to another graph")
        self.outputs = values

    @contextlib.contextmanager
    def inserting_before(self, node: Node):
        """New nodes go just before ``node`` inside the block."""
        previous = self._insert_at
        self._insert_at = self.nodes.index(node)
        try:
            yield
        finally:
            self._insert_at = previous

    @contextlib.contextmanager
    def inserting_after(self, node: Node):
        """New nodes go just after ``node`` inside the block."""
        previous = self._insert_at
        self._insert_at = self.nodes.index(node) + 1
        try:
            yield
        finally:
            self._insert_at = previous

    # ------------------------------------------------------------------------------ editing
    def replace_all_uses(self, old: Value, new: Value) -> None:
        for user in list(old.users):
            user.replace_input(old, new)
        if old in self.outputs:  # (values compare by identity: a C-speed scan)
            self.outputs = [new if v is old else v for v in self.outputs]

    def erase_node(self, node: Node) -> None:
        for v in node.outputs:
            if v.users or v in self.outputs:  # (values compare by identity)
                raise GraphError(f"cannot erase {node!r}: its value {v!r} is still used")
        for v in node.inputs:
            v.users.remove(node)
        if self._erasing is not None:
            self._erasing.add(id(node))
        else:
            self.nodes.remove(node)
        if node.kind == "input":
            self.inputs = [v for v in self.inputs if v.node is not node]
        if node.kind == "constant":
            self.constants.pop(node.name, None)

    @contextlib.contextmanager
    def erasing(self):
        """A block in which `erase_node` unlinks nodes at once but takes them out of
        ``nodes`` together at the end, in one pass: a pass that erases many nodes of a long
        graph (dead code, a fused chain) would otherwise pay a list search per node. Inside
        the block ``nodes`` still lists the erased nodes."""
        if self._erasing is not None:  # nested: the outer block compacts
            yield
            return
        self._erasing = set()
        try:
            yield
        finally:
            erased, self._erasing = self._erasing, None
            if erased:
                self.nodes = [n for n in self.nodes if id(n) not in erased]

    # ------------------------------------------------------------------------------ define-then-run
    def __enter__(self) -> Graph:
        """``with graph:``: every ember op in the block records a node into this graph
        (placeholders, Variables and Sessions: capture/static.py). Entering again continues
        building the same graph, with the same captured tensors."""
        from .builder import GraphBuilder

        if self._builder is None:
            self._builder = GraphBuilder(self)
        self._builder.__enter__()
        block = recording()
        self._recordings.append((block, block.__enter__()))
        return self

    def __exit__(self, *exc) -> bool:
        block, found = self._recordings.pop()
        block.__exit__(None, None, None)
        known = set(self.size_assumptions)
        self.size_assumptions.extend(a for a in found if a not in known)
        return self._builder.__exit__(*exc)

    # ------------------------------------------------------------------------------ reading
    def call_nodes(self):
        return (n for n in self.nodes if n.kind == "call")

    def topological_order(self) -> list[Node]:
        """The nodes in an order where every value is defined before it is used (Kahn's
        algorithm, stable with respect to the stored order). Raises GraphError on a cycle."""
        position = {id(n): i for i, n in enumerate(self.nodes)}
        waiting = {id(n): len({id(v.node) for v in n.inputs}) for n in self.nodes}
        ready = [i for i, n in enumerate(self.nodes) if waiting[id(n)] == 0]  # a heap of positions
        heapq.heapify(ready)
        order = []
        while ready:
            node = self.nodes[heapq.heappop(ready)]
            order.append(node)
            for user in {id(u): u for v in node.outputs for u in v.users}.values():
                if id(user) in waiting:
                    waiting[id(user)] -= 1
                    if waiting[id(user)] == 0:
                        heapq.heappush(ready, position[id(user)])
        if len(order) != len(self.nodes):
            placed = {id(n) for n in order}
            stuck = [n for n in self.nodes if id(n) not in placed]
            raise GraphError(
                "the graph has a cycle through " + ", ".join(repr(n) for n in stuck[:5])
            )
        return order

    def copy(self) -> Graph:
        """An independent copy: new nodes and values with the same names, types and order;
        constant arrays and subgraph attributes (cond branches, loop bodies) are shared, since
        nothing rewrites them in place."""
        new = Graph(self.name)
        new.constants = dict(self.constants)
        new._taken = set(self._taken)
        new._suffix = dict(self._suffix)
        mapping: dict[int, Value] = {}
        for node in self.nodes:
            copy = Node(new, node.kind, node.op, [mapping[id(v)] for v in node.inputs], node.attrs)
            copy.scope = node.scope
            copy.region = node.region
            copy.location = node.location
            for v in copy.inputs:
                v.users.append(copy)
            for v in node.outputs:
                mapping[id(v)] = Value(v.name, v.type, copy, v.index)
                copy.outputs.append(mapping[id(v)])
            new.nodes.append(copy)
        new.inputs = [mapping[id(v)] for v in self.inputs]
        new.outputs = [mapping[id(v)] for v in self.outputs]
        return new

    def verify(self) -> Graph:
        from .verify import verify

        verify(self)
        return self

    def save(self, path) -> None:
        """Write this graph to ``path`` losslessly (serialize.py); read it with ember.load_graph."""
        from .serialize import save_graph

        save_graph(self, path)

    def to_dot(self, phases: dict | None = None) -> str:
        """Graphviz DOT text of this graph (dot.py): fused groups and control-flow bodies as
        clusters, types on edges, ``phases`` (node -> forward / backward / optimizer) styled."""
        from .dot import to_dot

        return to_dot(self, phases)

    def __str__(self) -> str:
        from .printer import format_graph

        return format_graph(self)

    def __repr__(self) -> str:
        calls = sum(1 for _ in self.call_nodes())
        return f"<Graph {self.name}: {len(self.inputs)} inputs, {calls} ops>"
