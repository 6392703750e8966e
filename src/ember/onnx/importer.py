"""``ember.onnx.load``: an ONNX model as an ember callable.

`GraphRunner` holds one ONNX graph (the model's, or an If/Loop/Scan body), checked and with
every node's converter resolved when the model is loaded, so an unknown operator or opset is
reported at ``load`` naming the node. ``run`` walks the nodes in order over an environment of
values (see onnx/_convert.py for what a value is), folding the nodes whose inputs are all
static.

`OnnxFunction` (``load(path)``) runs that walk inside an ``ember.function``: the model is
captured into an ember graph per input shape (the shapes make ``Shape`` static, so the model's
shape arithmetic folds away), then ember's passes and executors run it. A model whose shapes
depend on its data (NonZero feeding a Reshape, a Loop whose trip count decides a shape) cannot
be captured: the first call finds out, and from then on the model runs eagerly, op by op
(``f.eager_reason`` says why). `OnnxModule` (``load(path, trainable=True)``) is an
``nn.Module`` whose floating-point initializers are Parameters.
"""

from __future__ import annotations

import re
from collections import ChainMap

import numpy as np

from ..capture.function import function as _ember_function
from ..errors import EmberError, OnnxError, TraceError
from ..nn.module import Module
from ..nn.parameter import Parameter
from ..ops import _registry as _reg
from . import ops as _ops  # noqa: F401  (registers the converters)
from ._call_values import (
    _CHECKED,
    _bind,
    _declared,
    _facts_of,
    _fed,
    _is_eager,
    _same_facts,
    _to_output,
)
from ._convert import (
    EMPTY,
    NeedsData,
    NodeContext,
    check_size,
    eager_island,
    find_converter,
    is_static,
    is_symbolic,
    is_tensor,
    static_value,
    supported_dtype,
    to_tensor,
)
from ._export_roles import BUFFER, CONSTANT, PARAMETER, initializer_roles, layout_copies
from ._gradient_free import gradient_free
from ._model import (
    MAX_LOOP_ITERATIONS,
    ModelSource,
    attribute_value,
    check_names,
    node_label,
    read_model,
    require_onnx,
    sort_nodes,
    sparse_to_array,
    tensor_to_array,
)
from ._size_contract import SizeContract
from ._static_budget import StaticBudget


def load(
    model,
    *,
    trainable: bool = False,
    capture: bool = True,
    opt_level=None,
    max_loop_iterations: int | None = MAX_LOOP_ITERATIONS,
):
    source = read_model(model)
    source.max_loop_iterations = _loop_bound(max_loop_iterations)
    if trainable:
        return OnnxModule(source)
    return OnnxFunction(source, capture=capture, opt_level=opt_level)


def _loop_bound(value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise OnnxError(
            f"ember.onnx.load: max_loop_iterations must be a positive int or None, got {value!r}"
        )
    return int(value)


# ----------------------------------------------------------------------------------------------
# one graph


class GraphRunner:
    """One ONNX graph, checked, with its nodes' converters and attributes resolved."""

    def __init__(
        self, graph, model: ModelSource, where: str, outer_names: set, outer_weight_bytes: int = 0
    ):
        self.model = model
        self.where = where
        sort_nodes(graph)
        check_names(graph, outer_names, where)
        self.initializers: dict[str, np.ndarray] = {}
        for init in graph.initializer:
            self.initializers[init.name] = tensor_to_array(init, where)
        for sparse in graph.sparse_initializer:
            self.initializers[sparse.values.name] = sparse_to_array(sparse, where)
        # what the static values of a run may add up to grows with the weights it can read
        self.weight_bytes = outer_weight_bytes + sum(
            a.nbytes for a in self.initializers.values() if isinstance(a, np.ndarray)
        )
        # IR < 4: an initializer may also be an input, whose value the caller may override
        self.input_names = [vi.name for vi in graph.input if vi.name not in self.initializers]
        self.input_infos = [vi for vi in graph.input if vi.name not in self.initializers]
        # those a caller may override by name (an input with an initializer: its default)
        self.overridable = {vi.name: vi for vi in graph.input if vi.name in self.initializers}
        # what each input declares (dtype, shape), read once: every call checks against it
        self.declared = {vi.name: _declared(vi) for vi in graph.input}
        self.output_names = [vi.name for vi in graph.output]
        self.output_infos = list(graph.output)
        visible = set(outer_names) | set(self.initializers) | {vi.name for vi in graph.input}
        for node in graph.node:
            visible.update(o for o in node.output if o)
        self.steps = []
        self._subgraphs: dict[tuple[int, str], GraphRunner] = {}
        for index, node in enumerate(graph.node):
            label = f"{where}: {node_label(node, index)}"
            domain = "" if node.domain in ("", "ai.onnx") else node.domain
            opset = model.opsets.get(domain)
            if opset is None:
                raise OnnxError(
                    f"{label}: operator domain {node.domain!r} is not among the model's "
                    f"opset imports {sorted(model.opsets)}"
                )
            conv = find_converter(domain, node.op_type, opset)
            if conv is None:
                known = find_converter(domain, node.op_type, 10**6)
                if known is None:
                    name = f"{node.domain}.{node.op_type}" if node.domain else node.op_type
                    raise OnnxError(f"{label}: ember has no implementation of ONNX operator {name}")
                raise OnnxError(
                    f"{label}: ember implements {node.op_type} from opset {known.since}, "
                    f"the model imports opset {opset}"
                )
            _check_arity(node, label, domain, opset)
            attrs = {}
            for attribute in node.attribute:
                if attribute.name in attrs:  # which one holds would be a guess (ONNX refuses)
                    raise OnnxError(f"{label}: attribute {attribute.name!r} appears twice")
                attrs[attribute.name] = attribute_value(attribute, label)
            for name, value in attrs.items():
                graphs = value if isinstance(value, list) else [value]
                for position, g in enumerate(graphs):
                    if type(g).__name__ == "GraphProto":
                        key = (id(node), name if len(graphs) == 1 else f"{name}[{position}]")
                        self._subgraphs[key] = GraphRunner(
                            g, model, f"{label}/{key[1]}", visible, self.weight_bytes
                        )
            self.steps.append((node, label, attrs, opset, conv))

    def subgraph(self, node, name: str, attrs: dict) -> GraphRunner:
        runner = self._subgraphs.get((id(node), name))
        if runner is None:
            raise OnnxError(f"{self.where}: {node.op_type} has no graph attribute {name!r}")
        return runner

    def run(
        self,
        inputs: list,
        *,
        outer: dict | None = None,
        params: dict | None = None,
        pinned: dict | None = None,
    ):
        """The graph's outputs for ``inputs``; ``params`` replace initializers by name,
        ``pinned`` replace the values nodes compute (those nodes are not run)."""
        # a subgraph sees its enclosing graphs' values without copying them (a Loop body runs
        # once per iteration)
        env = ChainMap({}, outer) if outer else {}
        env.update(self.initializers)
        if params:
            env.update(params)
        pinned = pinned or {}
        env.update(pinned)
        if len(inputs) > len(self.input_names):
            raise OnnxError(
                f"{self.where}: {len(inputs)} inputs given, the graph takes "
                f"{len(self.input_names)} ({', '.join(self.input_names)})"
            )
        for name, value in zip(self.input_names, inputs):
            env[name] = value
        budget = StaticBudget(self.initializers, self.weight_bytes)
        for step in self.steps:
            if pinned and all(name in pinned for name in step[0].output if name):
                continue
            self._run_step(step, env, budget)
        return [env[name] for name in self.output_names]

    def _run_step(self, step, env, budget: StaticBudget | None = None) -> None:
        """Run one node over ``env``, writing its outputs there."""
        node, label, attrs, opset, conv = step
        args = [env[name] if name else None for name in node.input]
        ctx = NodeContext(node, label, attrs, opset, self, env)
        try:
            if conv.fold and not conv.random and all(static_value(a) for a in args):
                with eager_island():
                    out = conv.fn(ctx, *args)
                    out = _as_static(out, ctx)
            else:
                out = conv.fn(ctx, *args)
        except (NeedsData, OnnxError):
            raise
        except TraceError as err:  # an op that needs a value the captured graph lacks
            raise NeedsData(f"{label}: {str(err).splitlines()[0]}") from err
        except EmberError as err:
            raise OnnxError(f"{label}: {err.detail}") from err
        except (
            ValueError,
            TypeError,
            IndexError,
            KeyError,
            AttributeError,
            ZeroDivisionError,
            OverflowError,
        ) as err:
            raise OnnxError(f"{label}: {type(err).__name__}: {err}") from err
        except MemoryError as err:
            raise OnnxError(f"{label}: needs more memory than there is") from err
        outs = out if isinstance(out, tuple) else (out,)
        for value in outs:
            if is_symbolic(value):  # (known before anything is allocated: a captured model)
                check_size(value.shape, value.dtype, label)
        if budget is not None:  # (the arrays a run keeps: not a Loop body's per iteration)
            budget.charge(outs, label)
        if len(outs) < sum(1 for o in node.output if o):
            raise OnnxError(f"{label}: produced {len(outs)} outputs, the node names more")
        for name, value in zip(node.output, outs):
            if name:
                env[name] = value

    def replay(self, env, overrides: dict, until) -> dict:
        """Run again, over ``env`` with the values in ``overrides`` put in place of some, the
        nodes before node ``until`` that read them (directly or through each other); returns
        ``overrides`` grown by their outputs (ONNX's Gradient operator differentiates this)."""
        scope = ChainMap(overrides, env)
        for step in self.steps:
            node = step[0]
            if node is until:
                break
            if any(name in overrides for name in node.input if name):
                self._run_step(step, scope)
        return overrides


def _check_arity(node, label: str, domain: str, opset: int) -> None:
    """The node's inputs and outputs against its operator's schema (where ONNX has one): how
    many, and no required input left out, so converters only ever see what the spec allows."""
    onnx = require_onnx()
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, domain)
    except onnx.defs.SchemaError:
        return  # an operator onnx does not define here (a converter of ember's own)
    given = len(node.input)
    if not schema.min_input <= given <= schema.max_input:
        raise OnnxError(
            f"{label}: {given} inputs, {node.op_type} takes {schema.min_input} to "
            f"{schema.max_input}"
        )
    if len(node.output) > schema.max_output or len(node.output) < schema.min_output:
        raise OnnxError(
            f"{label}: {len(node.output)} outputs, {node.op_type} has {schema.min_output} to "
            f"{schema.max_output}"
        )
    single = onnx.defs.OpSchema.FormalParameterOption.Single
    for position, (name, formal) in enumerate(zip(node.input, schema.inputs)):
        if not name and formal.option == single:
            raise OnnxError(f"{label}: input {position} ({formal.name}) is required")
    # each attribute of the kind the schema gives it, as ONNX's checker requires: converters
    # read attributes by name, and a Constant's "value" holding a graph became an object array
    # handed to the caller, a LeakyRelu's alpha given as text was read as a number
    for attribute in node.attribute:
        formal = schema.attributes.get(attribute.name)
        if formal is None or attribute.type == onnx.AttributeProto.UNDEFINED:
            continue
        if int(attribute.type) != int(formal.type):
            given = onnx.AttributeProto.AttributeType.Name(attribute.type)
            wanted = onnx.AttributeProto.AttributeType.Name(int(formal.type))
            raise OnnxError(
                f"{label}: attribute {attribute.name!r} is {given}, {node.op_type} takes {wanted}"
            )


def _as_static(out, ctx):
    if isinstance(out, tuple):
        return tuple(_as_static(o, ctx) for o in out)
    if isinstance(out, list):
        return [_as_static(o, ctx) for o in out]
    if is_tensor(out):
        out = np.array(out.numpy(force=True), copy=True)
    elif isinstance(out, (bool, int, float, np.generic)):
        out = np.asarray(out)
    if isinstance(out, np.ndarray):
        # the import's own copy, never written: a captured graph keeps it as a frozen constant
        # (kernels may keep work derived from it: kernels/cconv_constant.py)
        out.setflags(write=False)
    return out


# ----------------------------------------------------------------------------------------------
# the callables load returns


class OnnxFunction:
    """An imported ONNX model: call it with tensors or arrays (positionally in the model's input
    order, or by input name); returns one tensor, or a tuple for several outputs.

    ``f.graph`` is the ember graph it was captured into (captured on demand from the declared
    input shapes where those are fixed), ``f.input_names`` / ``f.output_names`` the model's
    names, ``f.eager_reason`` why it runs eagerly (None while it is captured)."""

    def __init__(self, source: ModelSource, *, capture: bool = True, opt_level=None):
        self.source = source
        self.runner = GraphRunner(source.proto.graph, source, source.name, set())
        self.input_names = list(self.runner.input_names)
        self.output_names = list(self.runner.output_names)
        self.eager_reason = None if capture else "capture=False"
        kwargs = {} if opt_level is None else {"opt_level": opt_level}
        name = re.sub(r"\W", "_", source.proto.graph.name or "onnx_model")
        self._function = _ember_function(self._captured, name=name, **kwargs) if capture else None
        # the sizes an ember-written file was exported for, checked on every call
        self._sizes = SizeContract.read(source.proto, self.input_names, source.name)
        # (the argument facts (`_facts_of`), whether some are NumPy arrays) of the latest
        # captured calls `_bind` checked, the most recent first (replaced, never changed in
        # place: calls from other threads read it)
        self._checked: list = []

    # the function ember.function captures: tensors in, tensors out
    def _captured(self, *tensors, **overrides):
        outs = self.runner.run(list(tensors), params=overrides)
        results = []
        for value in outs:
            results.append(self._graph_output(value))
        return tuple(results)

    def _graph_output(self, value):
        if isinstance(value, list):
            return [self._graph_output(v) for v in value]
        if value is EMPTY:
            raise NeedsData(f"{self.source.name}: an output is an empty optional")
        if is_static(value):
            if not supported_dtype(value.dtype):
                raise NeedsData(f"{self.source.name}: an output is {value.dtype.name}")
            return to_tensor(value, self.source.name)
        return value

    def __call__(self, *args, **kwargs):
        outs = None
        checked = None
        if not kwargs and self.eager_reason is None:
            for facts, arrays in self._checked:
                if len(args) == len(facts) and all(map(_same_facts, args, facts)):
                    checked = arrays
                    break
        if checked is not None:
            # arguments of the types, shapes and dtypes of a call that passed `_bind`'s checks:
            # they bind as that call's did (no initializer overrides), so skip its checks
            # (ember.function's guard still checks what its program depends on)
            values, overrides = args, None
            if checked:  # (some are NumPy arrays)
                values = list(map(_fed, args))
        else:
            values, overrides = _bind(self.runner, args, dict(kwargs), self.source.name)
        if self._sizes is not None:
            self._sizes.check(values, self.source.name)
        capturable = self._function is not None and self.eager_reason is None
        if capturable and (
            overrides is None or all(is_tensor(v) for v in (*values, *overrides.values()))
        ):
            try:
                outs = (
                    self._function(*values, **overrides) if overrides else self._function(*values)
                )
            except (NeedsData, TraceError) as err:
                self.eager_reason = str(err).split("\n")[0]
            else:
                facts = None if checked is not None or overrides else _facts_of(args, values)
                if facts is not None:  # (the latest first)
                    arrays = any(f[0] is np.ndarray for f in facts)
                    others = [c for c in self._checked if c[0] != facts]
                    self._checked = [(facts, arrays), *others[: _CHECKED - 1]]
        if outs is None:
            outs = self.runner.run(list(values), params=overrides or {})
        if not all(map(_is_eager, outs)):  # (eager tensors are returned as they are)
            outs = tuple(_to_output(v, self.source.name) for v in outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run_eager(self, *args, **kwargs):
        """Run the model op by op, without capturing it (the reference the captured path is
        tested against)."""
        values, overrides = _bind(self.runner, args, dict(kwargs), self.source.name)
        if self._sizes is not None:
            self._sizes.check(values, self.source.name)
        outs = self.runner.run(values, params=overrides)
        results = tuple(_to_output(v, self.source.name) for v in outs)
        return results[0] if len(results) == 1 else results

    @property
    def graph(self):
        """The ember graph of the latest capture (made from the declared input shapes, dynamic
        sizes counted as 1, if the model was not called yet)."""
        if self._function is None:
            raise OnnxError(f"{self.source.name}: loaded with capture=False: no graph")
        if not self._function.stats.traces:
            self.compile(*self.example_inputs())
        return self._function.graph

    def example_inputs(self, size: int = 1) -> list:
        """Zeros of each input's declared dtype and shape, its dynamic sizes (``dim_param``s or
        unknown dimensions) set to ``size``."""
        examples = []
        for name in self.input_names:
            dtype, shape = self.runner.declared[name]
            if dtype is None or shape is None:
                raise OnnxError(
                    f"{self.source.name}: input {name!r} declares no tensor type and shape; "
                    "call the model (or f.compile(*inputs)) with real inputs"
                )
            examples.append(np.zeros([d if isinstance(d, int) else size for d in shape], dtype))
        return examples

    def compile(self, *args, **kwargs):
        """Capture (without running) the model for these inputs; returns ember's
        GraphFunction."""
        values, overrides = _bind(self.runner, args, dict(kwargs), self.source.name)
        return self._function.compile(*values, **overrides)

    def __repr__(self):
        return (
            f"OnnxFunction({self.source.name!r}, inputs={self.input_names}, "
            f"outputs={self.output_names})"
        )


def _state_inputs(runner: GraphRunner) -> set:
    """Names the graph (or a subgraph) reads where an operator's converter declares state
    (`Converter.state_inputs`: BatchNormalization's running mean and variance), not weights
    to train."""
    names = set()
    for node, _label, _attrs, _opset, conv in runner.steps:
        names.update(node.input[i] for i in conv.state_inputs if i < len(node.input))
    for sub in runner._subgraphs.values():
        names |= _state_inputs(sub)
    return names - {""}


def _static_only(runner: GraphRunner) -> set:
    """Names the graph (and its subgraphs) reads only where an operator's converter takes
    numbers that set a shape (`Converter.static_inputs`: Resize's scales, Range's bounds)."""
    static, other = set(), set()

    def walk(r: GraphRunner) -> None:
        for node, _label, _attrs, _opset, conv in r.steps:
            for i, name in enumerate(node.input):
                (static if i in conv.static_inputs else other).add(name)
        for sub in r._subgraphs.values():
            walk(sub)

    walk(runner)
    return static - other - {""}


def _identity_roots(runner: GraphRunner, names: set) -> dict:
    """Each of ``names`` that Identity nodes copy from an initializer, with that initializer.
    PyTorch's exporter writes one initializer for equal tensors and Identity nodes for the
    others: a fresh BatchNorm's running mean and variance become Identity copies of its bias
    and weight."""
    made_by = {}
    for node, *_ in runner.steps:
        if node.op_type == "Identity" and node.domain in ("", "ai.onnx") and node.input:
            made_by[node.output[0]] = node.input[0]
    roots = {}
    for name in names:
        source, seen = name, set()
        while source in made_by and source not in seen:
            seen.add(source)
            source = made_by[source]
        if source != name and source in runner.initializers:
            roots[name] = source
    return roots


def _readers(runner: GraphRunner) -> dict:
    """Each value's readers in the graph, as (node, input position) pairs."""
    readers: dict = {}
    for node, *_ in runner.steps:
        for position, name in enumerate(node.input):
            readers.setdefault(name, []).append((node, position))
    return readers


def _state_copies(runner: GraphRunner, statistics: set) -> tuple[set, dict]:
    """(initializers that only statistics read, {statistic: its initializer}) for the
    statistics that Identity nodes copy from an initializer something else trains: those get
    buffers of their own, so training the weight leaves the statistic as it was (as PyTorch,
    whose buffers the exporter merged with an equal weight)."""
    roots = _identity_roots(runner, statistics)
    readers = _readers(runner)
    copies = {}
    state_only = set()
    for root in set(roots.values()):
        stack, only_state = [root], True
        while stack:
            name = stack.pop()
            for node, _ in readers.get(name, ()):
                if node.op_type == "Identity" and node.domain in ("", "ai.onnx"):
                    if node.output[0] not in statistics:
                        stack.append(node.output[0])
                    continue
                only_state = False
        if only_state:
            state_only.add(root)
    for name, root in roots.items():
        if root not in state_only:
            copies[name] = root
    return state_only, copies


class OnnxModule(Module):
    """An imported ONNX model as an ``nn.Module``: its floating-point initializers are
    Parameters (``named_parameters()`` uses the initializers' names, with characters a
    Module attribute cannot hold replaced by ``_``), except BatchNormalization's running
    statistics, which are buffers (a model's BatchNormalization nodes say whether they
    normalize with them or with the batch's), and, in a file ``torch.export`` wrote, what its
    signature says are buffers or the program's constants (onnx/_export_roles.py), in another
    file those no gradient reaches by the values' types (buffers: onnx/_gradient_free.py); those
    read only as numbers that set a shape (Resize's scales, Range's bounds) and the others
    stay constants. ``forward`` runs the
    model eagerly; wrap a training step in ``ember.function`` to capture it."""

    def __init__(self, source: ModelSource):
        super().__init__()
        runner = GraphRunner(source.proto.graph, source, source.name, set())
        object.__setattr__(self, "_runner", runner)
        object.__setattr__(self, "_source", source)
        object.__setattr__(self, "_param_names", {})
        sizes = SizeContract.read(source.proto, runner.input_names, source.name)
        object.__setattr__(self, "_sizes", sizes)
        used = set()
        statistics = _state_inputs(runner)
        state_only, copies = _state_copies(runner, statistics)
        statistics |= state_only
        object.__setattr__(self, "_state_copies", {})
        roles = initializer_roles(source.proto.graph, runner.initializers)
        if roles is None:  # (no signature: the types tell what no gradient reaches)
            graph = source.proto.graph
            statistics |= gradient_free(graph, runner.initializers, source.opsets)
        roles = roles or {}
        shape_numbers = _static_only(runner)
        # folded copies of a weight the file also holds (a tied weight, transposed): computed
        # from it on each call (onnx/_export_roles.py)
        copies_of = layout_copies(source.proto.graph, runner.initializers) if roles else {}
        object.__setattr__(self, "_layout_copies", {})
        for name, array in runner.initializers.items():
            if array.dtype.kind != "f" or not supported_dtype(array.dtype):
                continue
            if roles.get(name) == CONSTANT or name in shape_numbers:
                continue
            source_name = copies_of.get(name, (None,))[0]
            if roles.get(source_name) == PARAMETER and source_name not in shape_numbers:
                self._layout_copies[name] = copies_of[name]
                continue
            attr = re.sub(r"\W", "_", name) or "param"
            if attr[0].isdigit():
                attr = "p_" + attr
            while attr in used or hasattr(self, attr):  # ("half", "to": Module's own names)
                attr += "_"
            used.add(attr)
            self._param_names[name] = attr
            value = _reg.eager_constant(array.copy())
            if name in statistics or roles.get(name) == BUFFER:
                self.register_buffer(attr, value)
            else:
                self.register_parameter(attr, Parameter(value))
        for name, root in sorted(copies.items()):
            attr = re.sub(r"\W", "_", name) or "state"
            if attr[0].isdigit():
                attr = "s_" + attr
            while attr in used or hasattr(self, attr):
                attr += "_"
            used.add(attr)
            self._state_copies[name] = attr
            self.register_buffer(attr, _reg.eager_constant(runner.initializers[root].copy()))
        self.input_names = list(runner.input_names)
        self.output_names = list(runner.output_names)

    def forward(self, *args, **kwargs):
        runner = self._runner
        values, overrides = _bind(runner, args, dict(kwargs), self._source.name)
        if self._sizes is not None:
            self._sizes.check(values, self._source.name)
        params = {name: getattr(self, attr) for name, attr in self._param_names.items()}
        for name, (source, (how, arg)) in self._layout_copies.items():
            weight = params[source]
            params[name] = weight.permute(*arg) if how == "transpose" else weight.reshape(arg)
        params.update(overrides)
        pinned = {name: getattr(self, attr) for name, attr in self._state_copies.items()}
        outs = runner.run(values, params=params, pinned=pinned)
        results = tuple(_to_output(v, self._source.name) for v in outs)
        return results[0] if len(results) == 1 else results
