"""``ember.onnx.export``: an ember graph (or a function or module, captured first) to ONNX.

What is written:

* **Capture.** A function or ``nn.Module`` is captured by ember's own capture (the machinery of
  ``ember.trace`` / ``ember.function``: capture/trace.py's `capture_call`) on
  ``example_inputs``, or on stand-ins of an ``input_signature`` of `TensorSpec`s whose ``None``
  dimensions become symbolic sizes, written as ONNX ``dim_param``s (``N`` for the batch).
  A ``Graph`` is written as it is; its inputs are the model's inputs.
* **Ops.** Each call node is written by its op's ``onnx`` rule (ops/_rules.py) through an
  `Emitter` (export_emit.py): no table of op names here. Fused nodes write their member ops;
  ``cond``, ``while_loop`` and ``scan`` write ``If``, ``Loop`` and ``Scan`` with their
  branches and bodies as subgraphs. An op without an ONNX form raises `OnnxError` naming the
  op and the user's line that recorded it.
* **State.** Parameters and other captured tensors become initializers. A whole training step
  (a function that runs ``loss.backward()`` and ``optimizer.step()``) is written with its
  backward pass and its updates as ordinary ops: the state it reads (parameters, gradients,
  optimizer buffers, scheduled hyperparameters) are inputs whose initializers hold today's
  values, and what it writes back are extra outputs after the function's own. The model's
  ``metadata_props`` entry ``ember.updates`` (JSON) maps each such output to the input it
  updates, so a runtime can feed one step's outputs to the next. ``ember.size_assumptions``
  (JSON) lists the size equalities a capture over symbolic sizes took for aligned sizes only
  (``2*(H//2) == H``): the sizes a runtime may feed are those that keep them.
* **Checks.** The model passes ``onnx.checker.check_model(full_check=True)``, and ONNX's
  shape inference must give every written value the dtype (and every static size) ember's
  types give it: a rule that would write something else is an error, not a wrong file.
* **Files.** Written atomically (ember/_files.py): a failure leaves no file behind. Tensors
  go to one external data file beside the model (``<name>.data``) when the model would pass
  protobuf's 2 GiB limit, or when ``external_data=True``.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import numpy as np

from .._files import write_atomic, write_atomic_together
from ..autograd import no_grad
from ..errors import OnnxError
from ..graph import scope as _scope
from ..graph.ir import Graph
from ..nn.module import Module
from ..symbolic import SymDim
from . import _size_contract as size_contract
from ._model import require_onnx
from .export_emit import onnx_dtype
from .export_writer import ModelWriter, needed_nodes, pair_type, value_info

__all__ = ["DEFAULT_OPSET", "MIN_OPSET", "export", "to_model"]

DEFAULT_OPSET = 20
MIN_OPSET = 13  # ReduceSum, Split, Squeeze and Unsqueeze take axes as inputs; Clip min and max
_LIMIT = 2**31 - 2**24  # protobuf's 2 GiB, less room for the graph itself
_EXTERNAL_MIN = 1024  # tensors smaller than this stay inside the model file


def export(
    target,
    path,
    *example_inputs,
    input_signature=None,
    opset: int | None = None,
    external_data: bool | None = None,
    input_names=None,
    output_names=None,
):
    """Write ``target`` (a function, an ``nn.Module`` or an ember ``Graph``) to ``path`` as an
    ONNX model and return the ``onnx.ModelProto`` (its large tensors as external references
    when they went to the data file). See the module docstring."""
    onnx = require_onnx()
    model, writer, checked = _build(
        target, example_inputs, input_signature, opset, input_names, output_names
    )
    path = Path(path)
    external = not checked if external_data is None else bool(external_data)
    if not external:
        write_atomic(path, model.SerializeToString())
        return model
    written = _write_external(onnx, model, path)
    if not checked:  # too large for protobuf in memory: checked from the files
        try:
            _check(onnx, model, writer, path)
        except BaseException:
            for p in written:
                os.unlink(p)
            raise
    return model


def to_model(
    target,
    *example_inputs,
    input_signature=None,
    opset: int | None = None,
    input_names=None,
    output_names=None,
):
    """The ``onnx.ModelProto`` `export` writes, checked (but for a model over protobuf's 2 GiB,
    which only its files can hold: `export` checks those), without writing it."""
    return _build(target, example_inputs, input_signature, opset, input_names, output_names)[0]


def _build(target, example_inputs, input_signature, opset, input_names, output_names):
    """(the model, its `ModelWriter`, whether it was checked in memory)."""
    onnx = require_onnx()
    opset = DEFAULT_OPSET if opset is None else int(opset)
    newest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= newest:
        raise OnnxError(
            f"opset {opset} is not one ember writes (it writes {MIN_OPSET} to {newest})",
            op="export",
        )
    plan = _capture(target, example_inputs, input_signature)
    writer = ModelWriter(onnx, opset)
    graph = plan.graph
    names, inputs = [], []
    user = iter(input_names or ())
    for value, role in zip(graph.inputs, plan.roles):
        hint = next(user, None) if role.kind == "arg" else None
        name = writer.fresh(hint or value.name)
        writer.types[name] = pair_type(value.type)
        names.append(name)
        if role.array is not None:
            writer.initializers.append((name, _as_pairs(np.asarray(role.array))))
        if role.kind == "arg" or plan.state_inputs:
            inputs.append((name, writer.types[name], role))
    for name, t, role in inputs:
        if role.kind != "arg":
            continue
        for axis, d in enumerate(t.shape):
            symbol = d.symbol() if isinstance(d, SymDim) else None
            if symbol is not None:
                writer.symbols.setdefault(symbol, (name, axis, 1))
    for name, t, role in inputs:  # (then dimensions k * symbol: TensorSpec((None, 16 * h)))
        for axis, d in enumerate(t.shape if role.kind == "arg" else ()):
            scaled = d.scaled_symbol() if isinstance(d, SymDim) else None
            if scaled is not None:
                writer.symbols.setdefault(scaled[1], (name, axis, scaled[0]))
    outs = writer.inline(graph, names, outputs=plan.outputs)
    out_names = _output_names(plan, output_names, names)
    final = []
    for out, wanted in zip(outs, out_names):
        name = writer.fresh(wanted)
        writer.nodes.append(onnx.helper.make_node("Identity", [out], [name], name=f"n_{name}"))
        writer.types[name] = writer.types[out]
        final.append(name)
    updates = {final[k]: names[i] for k, i in plan.updates.items()}
    used = {n for node in writer.nodes for n in node.input} | _outer_refs(writer.nodes)
    graph_inputs = [
        value_info(onnx, name, t) for name, t, role in inputs if role.kind == "arg" or name in used
    ]
    initializers = [
        onnx.numpy_helper.from_array(np.array(a, copy=not a.flags.c_contiguous), n)
        for n, a in writer.initializers
        if n in used
    ]
    proto = onnx.helper.make_graph(
        writer.nodes,
        graph.name if graph.name.isidentifier() else "graph",
        graph_inputs,
        [value_info(onnx, n, writer.types[n]) for n in final],
        initializer=initializers,
    )
    model = onnx.helper.make_model(
        proto,
        opset_imports=[onnx.helper.make_opsetid("", opset)],
        producer_name="ember",
        # the oldest IR version that has this opset: what the most runtimes read
        ir_version=onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)]),
    )
    props = {}
    if updates:
        props["ember.updates"] = json.dumps(updates)
    if plan.size_assumptions:
        # (the file computes its sizes as if these held: a runtime given sizes that break one
        # fails, or computes what the model never meant; ember's own function refuses them)
        props["ember.size_assumptions"] = json.dumps([str(a) for a in plan.size_assumptions])
    contract = size_contract.write(
        [(name, tuple(t.shape)) for name, t, role in inputs if role.kind == "arg"],
        plan.size_assumptions,
    )
    if contract is not None:
        props[size_contract.KEY] = contract
    if props:
        onnx.helper.set_model_props(model, props)
    small = sum(t.ByteSize() for t in model.graph.initializer) <= _LIMIT
    if small:
        _check(onnx, model, writer)
    return model, writer, small


# ---------------------------------------------------------------------------------- capture


class _Role:
    """What feeds one graph input: a user argument (``arg``) or state (``state``), with the
    array its initializer holds (None: none)."""

    def __init__(self, kind: str, array=None):
        self.kind = kind
        self.array = array


class _Plan:
    def __init__(self, graph, roles, outputs, n_user, updates, extra_names, state_inputs):
        self.graph = graph
        self.roles = roles
        self.outputs = outputs  # the graph values written as outputs, in order
        self.n_user = n_user
        self.updates = updates  # output position -> input position it updates
        self.extra_names = extra_names  # output position -> name hint (state outputs)
        self.state_inputs = state_inputs  # whether state inputs are model inputs too
        # the size equalities the capture took for aligned symbolic sizes (symbolic_assumptions)
        self.size_assumptions: tuple = ()


def _capture(target, example_inputs, input_signature) -> _Plan:
    if isinstance(target, Graph):
        roles = [_Role("arg") for _ in target.inputs]
        return _Plan(target, roles, list(target.outputs), len(target.outputs), {}, {}, False)
    from ..capture.graph_function import GraphFunction
    from ..tensor import Tensor

    if isinstance(target, GraphFunction):  # (ember.trace's result) its call as captured
        leaves = [a for a in example_inputs if isinstance(a, Tensor)]
        traced, reach = target, target.call.reach
    elif not callable(target):
        raise OnnxError(
            f"export takes a function, an nn.Module or a Graph, got {type(target).__name__}",
            op="export",
        )
    else:
        traced, leaves, reach = _trace(target, example_inputs, input_signature)
    plan = _plan_of(traced, leaves, reach)
    if traced.check_sizes is not None:
        plan.size_assumptions = traced.check_sizes.assumptions
    return plan


def _trace(target, example_inputs, input_signature):
    """``target`` captured by ember's capture on the example inputs (or stand-ins of the
    signature's): (the `GraphFunction`, the tensor arguments, the state it reaches)."""
    from ..capture.compile import CompileOptions
    from ..capture.signature import TensorSpec, parameter_names, split_args
    from ..capture.state import discover
    from ..capture.trace import capture_call

    specs = None
    if input_signature is not None:
        specs = list(input_signature)
        for s in specs:
            if not isinstance(s, TensorSpec):
                raise OnnxError(f"input_signature holds TensorSpecs, got {s!r}", op="export")
        if not example_inputs:
            example_inputs = tuple(_stand_in(s) for s in specs)
    arg_names = parameter_names(target)
    leaves, names, _ = split_args(example_inputs, {}, arg_names)
    if specs is not None and len(specs) != len(leaves):
        raise OnnxError(
            f"input_signature has {len(specs)} TensorSpecs for {len(leaves)} tensor inputs",
            op="export",
        )
    reach = discover(target, example_inputs, {}, arg_names)
    options = CompileOptions("interpreter", 0, False)
    # a module's forward is exported for inference, as torch.onnx.export does: recorded with
    # gradients off (a custom autograd Function then records its forward's ops); a function
    # may differentiate (a training step) and is recorded as it asks
    grad = no_grad() if isinstance(target, Module) else contextlib.nullcontext()
    with _scope.locations(), grad:
        traced = capture_call(
            target,
            example_inputs,
            {},
            leaves=leaves,
            names=names,
            reach=reach,
            options=options,
            specs=specs,
        )
    return traced, leaves, reach


def _plan_of(traced, leaves, reach) -> _Plan:
    """What the model holds of a captured call: its forward outputs, each input's role, and
    which state each extra output updates."""
    from ..capture.call import ArgFeed, ArgGradFeed, CotangentFeed, GradOfFeed, TensorFeed
    from ..capture.writebacks import WritebackKind
    from ..tensor import Tensor

    call = traced.call
    graph = call.graph
    # an AOT backward (the function returns values needing gradients but runs no backward
    # itself) appends the gradients after these: the model is the forward pass
    n_forward = call.n_user + sum(1 for w in call.writebacks if w.takes_output)
    outputs = list(graph.outputs[:n_forward])
    training = bool(call.writebacks)
    roles = []
    for feed in call.feeds:
        if isinstance(feed, ArgFeed):
            roles.append(_Role("arg"))
        elif isinstance(feed, CotangentFeed):
            roles.append(_Role("cotangent"))
        elif isinstance(feed, (TensorFeed, GradOfFeed, ArgGradFeed)):
            roles.append(_Role("state", feed.array(leaves)))
        else:
            roles.append(_Role("state", feed.array(leaves)))
    # which input each output-taking writeback updates (by the tensor it writes)
    by_tensor = {id(f.tensor): i for i, f in enumerate(call.feeds) if isinstance(f, TensorFeed)}
    by_grad = {id(f.owner): i for i, f in enumerate(call.feeds) if isinstance(f, GradOfFeed)}
    updates, extra_names, k = {}, {}, call.n_user
    for w in call.writebacks:
        if not w.takes_output:
            continue
        target_input = None
        if w.kind in (WritebackKind.DATA, WritebackKind.REBIND):
            target_input = by_tensor.get(id(w.tensor))
        elif w.kind in (WritebackKind.GRAD, WritebackKind.SPARSE_GRAD):
            target_input = by_grad.get(id(w.tensor))
            extra_names[k] = f"{_tensor_name(reach, w.tensor)}_grad"
        elif w.kind is WritebackKind.STATE:
            state = w.optimizer.state.get(w.tensor, {}).get(w.key)
            if isinstance(state, Tensor):
                target_input = by_tensor.get(id(state))
            extra_names[k] = f"{_tensor_name(reach, w.tensor)}_{w.key}"
        if target_input is not None:
            updates[k] = target_input
        k += 1
    needed = needed_nodes(outputs)  # (one walk for every cotangent)
    for i, role in enumerate(roles):
        if role.kind == "cotangent" and id(graph.inputs[i].node) in needed:
            raise OnnxError("the function's forward pass reads a cotangent", op="export")
    return _Plan(graph, roles, outputs, call.n_user, updates, extra_names, training)


def _as_pairs(array: np.ndarray) -> np.ndarray:
    """A complex array as the file holds it: real and imaginary parts along a last axis."""
    if np.iscomplexobj(array):
        return np.stack([array.real, array.imag], axis=-1)
    return array


def _stand_in(spec):
    from ..tensor import Tensor

    shape = tuple(2 if not isinstance(d, int) else d for d in spec.shape)
    return Tensor(np.zeros(shape, dtype=spec.dtype.np))


def _tensor_name(reach, tensor) -> str:
    for name, t in reach.named_tensors() if reach is not None else ():
        if t is tensor:
            return name
    return "state"


def _output_names(plan, output_names, input_names) -> list:
    given = list(output_names or ())
    names = []
    for k in range(len(plan.outputs)):
        if k < len(given):
            names.append(given[k])
        elif k < plan.n_user:
            names.append("output" if plan.n_user == 1 else f"output_{k}")
        elif k in plan.updates:
            names.append(f"{input_names[plan.updates[k]]}_updated")
        else:
            names.append(plan.extra_names.get(k, f"state_{k}"))
    return names


def _outer_refs(nodes) -> set:
    """Names read inside the subgraphs of ``nodes`` (outer-scope references included)."""
    refs = set()
    for node in nodes:
        for attr in node.attribute:
            graphs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
            for g in graphs:
                refs.update(n for sub in g.node for n in sub.input)
                refs.update(o.name for o in g.output)
                refs |= _outer_refs(g.node)
    return refs


# ---------------------------------------------------------------------------------- checks


def _check(onnx, model, writer, path=None) -> None:
    """The checker's verdict and ONNX's own shape inference against ember's types; ``path``:
    check the files written there instead (a model whose tensors are external)."""
    try:
        onnx.checker.check_model(model if path is None else str(path), full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        # (full_check runs shape inference, whose errors are not ValidationErrors)
        raise OnnxError(f"the written model fails onnx's checker: {error}", op="export") from None
    if path is not None:  # inference reads the tensors' types and shapes, not their data
        model = onnx.load(str(path), load_external_data=False)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    found = {}
    for info in list(inferred.graph.value_info) + list(inferred.graph.output):
        found[info.name] = info.type.tensor_type
    for name, t in writer.types.items():
        got = found.get(name)
        if got is None or not got.elem_type:
            continue
        if got.elem_type != onnx_dtype(t.dtype):
            raise OnnxError(
                f"value {name}: ONNX infers element type {got.elem_type} where ember has "
                f"{t.dtype.name} ({onnx_dtype(t.dtype)}); an op's onnx rule is wrong",
                op="export",
            )
        if got.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in got.shape.dim]
            want = list(t.shape)
            if len(dims) != len(want) or any(
                g is not None and isinstance(w, int) and g != w for g, w in zip(dims, want)
            ):
                raise OnnxError(
                    f"value {name}: ONNX infers shape {dims} where ember has {want}; an op's "
                    "onnx rule is wrong",
                    op="export",
                )


# ---------------------------------------------------------------------------------- files


def _write_external(onnx, model, path: Path) -> list:
    """The model with its large tensors in ``<path>.data``, both written atomically; the
    paths written."""
    data_name = path.name + ".data"
    chunks, offset = [], 0
    for tensor in model.graph.initializer:
        if tensor.ByteSize() < _EXTERNAL_MIN or not tensor.HasField("raw_data"):
            continue
        raw = tensor.raw_data
        pad = (-offset) % 64  # aligned, as onnx's own writer does for mapped reads
        chunks.append(b"\0" * pad)
        offset += pad
        onnx.external_data_helper.set_external_data(tensor, data_name, offset, len(raw))
        tensor.ClearField("raw_data")
        chunks.append(raw)
        offset += len(raw)
    data_path = path.with_name(data_name)
    # (a model with another export's data would be damaged: both replaced, or neither)
    write_atomic_together({data_path: b"".join(chunks), path: model.SerializeToString()})
    return [path, data_path]
