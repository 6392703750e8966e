"""Epilogue fusion: an op declaring an `EpilogueRule` (a *producer*: a matmul, ``linear``,
``addmm``, a convolution, the max-pooling gradient's scatter) and the elementwise ops applied to
its result (a bias, an activation, a fused group) become one ``fused_epilogue`` node
(ops/fused.py). The producer's rule decides which calls and which readers it takes, and how the
fused node runs; this pass finds the pairs.

The matmul stays on BLAS (through NumPy). The compiled node (kernels/cepilogue.py) runs it in
blocks of rows, each block's epilogue right after it, and writes the epilogue's first output
over the matmul's own result: one full-size array fewer. (The gain is small here: BLAS through
NumPy takes no epilogue of its own; see kernels/cepilogue.py for the measurements.)
A convolution's epilogue is stored by its C kernel tile by tile (kernels/cconv_epilogue.py):
a per-channel bias, a clamp (an op's ``clamp`` rule: ReLU, ReLU6, hardtanh, Clip's maximum and
minimum), a residual of the result's shape and the ReLU's gradient mask; other programs are not
fused onto it. A group that two producers' results meet in (a downsampling block's two
convolutions, their biases and the sum) is split so that each takes a part
(transforms/epilogue_split.py), where both parts are then epilogues.
The max-pooling gradient (``pool_scatter``) takes ``where(mask, result, c)``, the gradient of a
ReLU before the pooling, applied by its C kernel plane by plane (kernels/cpooling.py).

Applies when the producer's result has one reader, an elementwise node (a ``fused_elementwise``
group, or a single op the C loops can run) over the result's own shape, and is not returned;
the result is a float (16, 32 or 64 bits) with static sizes, and the producer's rule accepts
the call (a ``matmul`` is 2-d on the right: a weight; the products and the convolution take
float32/float64 results only) and the reader. Runs after fusion (transforms/fuse.py), at O3.

A reader that ends in reductions (a ``fused_reduce`` node: a masked gradient and its bias
gradient) is not an epilogue as it is. Its stored elementwise result usually takes the
matmul's result's buffer anyway (a fused loop `overwrites_operand`: plan/liveness.py), but
where it cannot (another dtype, or the loop stores no value of the product's type) the
product lives beside the loop's stored outputs. Where every reduction reads a value the loop
stores anyway, the reductions can run as nodes of their own (``sum`` of the stored masked
gradient) and the rest of the loop become the epilogue, written over the matmul's result
(the sum reads the stored values once more; transforms/fuse.py measured both as fast). The
split is kept only where it lowers the planned peak (plan/memory.py), candidate by candidate
on a copy of the graph, so the one-pass loop stays wherever it costs no memory. A split changes
the plan only between the producer and its reader: a candidate is tried only where the peak
lies there alone (`_may_lower`), which rules out most of a training step's at once.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..graph.ir import Graph
from ..graph.rewrite import Pass
from ..ops._registry import native_code
from ..ops.fused import FUSED, FUSED_EPILOGUE, FUSED_REDUCE
from ..ops.program import Input, Instr, Program, Temp
from ..plan.arena import concrete
from ..plan.memory import plan_memory
from ..types import TensorType
from .epilogue_split import SideResult, independent_split
from .fusable import fusable

__all__ = ["EPILOGUE", "fuse_epilogues"]


def _producer(node) -> bool:
    if node.kind != "call" or node.op.epilogue is None or len(node.outputs) != 1:
        return False
    if not native_code(node):
        return False
    out = node.outputs[0]
    if out.dtype not in (dt.float32, dt.float64, dt.bfloat16, dt.float16) or not out.shape:
        return False
    if any(not isinstance(d, int) for v in (*node.inputs, out) for d in v.shape):
        return False
    return node.op.epilogue.accepts(node)


def _consumer(graph: Graph, producer):
    """The one elementwise reader of ``producer``'s result that can take it as its epilogue."""
    result = producer.outputs[0]
    if any(v is result for v in graph.outputs) or len(result.users) != 1:
        return None
    reader = result.users[0]
    if reader.kind != "call" or sum(v is result for v in reader.inputs) != 1:
        return None
    if reader.op is FUSED:
        if any(tuple(t[0]) != tuple(result.shape) for t in reader.attrs["out_types"]):
            return None
    elif not (fusable(reader) and tuple(reader.outputs[0].shape) == tuple(result.shape)):
        return None
    return reader if _takes(producer, *_program_of(reader)) else None


def _takes(producer, program, outputs, out_types, inputs) -> bool:
    """Whether ``producer`` can run the elementwise ``program`` (fused_elementwise attributes,
    reading the producer's result among ``inputs``) as its epilogue: its rule says."""
    slot = next(i for i, v in enumerate(inputs) if v is producer.outputs[0])
    types = [v.type for v in inputs]
    return producer.op.epilogue.takes(producer, program, outputs, out_types, types, slot)


def _program_of(node):
    """(program, outputs, out_types, inputs) of an elementwise node, as ``fused_elementwise``
    attributes (a single op becomes a one-instruction program)."""
    if node.op is FUSED:
        attrs = node.attrs
        return attrs["program"], attrs["outputs"], attrs["out_types"], list(node.inputs)
    operands = tuple(Input(i) for i in range(len(node.inputs)))
    program = Program((Instr(node.op, operands, tuple(sorted(node.attrs.items()))),))
    out = node.outputs[0]
    return program, (0,), (TensorType(out.shape, out.dtype),), list(node.inputs)


def _fuse_pair(graph: Graph, producer, reader) -> None:
    """Replace ``producer`` and its elementwise ``reader`` by one ``fused_epilogue`` node."""
    program, outputs, out_types, inputs = _program_of(reader)
    result = producer.outputs[0]
    slot = next(i for i, v in enumerate(inputs) if v is result)
    others = inputs[:slot] + inputs[slot + 1 :]
    with graph.inserting_after(reader):
        fused = graph.add_call(
            FUSED_EPILOGUE,
            list(producer.inputs) + others,
            {
                "producer": producer.op,
                "producer_attrs": tuple(sorted(producer.attrs.items())),
                "n_producer": len(producer.inputs),
                "slot": slot,
                "program": program,
                "outputs": outputs,
                "out_types": out_types,
            },
        )
    _rename(graph, reader, fused.outputs)
    graph.erase_node(reader)
    graph.erase_node(producer)


def _split_between_producers(graph: Graph, producer) -> bool:
    """Split ``producer``'s ``fused_elementwise`` reader into the part independent of its
    result and the rest (transforms/epilogue_split.py) where the rest is ``producer``'s
    epilogue and the independent part another producer's (a downsampling block's two
    convolutions and their biases before the sum); then fuse both pairs."""
    result = producer.outputs[0]
    if any(v is result for v in graph.outputs) or len(result.users) != 1:
        return False
    reader = result.users[0]
    if (
        reader.kind != "call"
        or reader.op is not FUSED
        or sum(v is result for v in reader.inputs) != 1
    ):
        return False
    inputs = list(reader.inputs)
    slot = next(i for i, v in enumerate(inputs) if v is result)
    split = independent_split(reader.attrs, inputs, slot)
    if split is None or not _takes_part(producer, split.main):
        return False
    side_inputs = split.side[3]
    partner = next(
        (
            v.node
            for v in side_inputs
            if v.node is not None
            and _producer(v.node)
            and v is v.node.outputs[0]
            and len(v.users) == 1
            and not any(v is out for out in graph.outputs)
            and _takes_part(v.node, split.side)
        ),
        None,
    )
    if partner is None:
        return False
    program, outputs, out_types, _ = split.side
    with graph.inserting_after(reader):
        side = graph.add_call(
            FUSED, side_inputs, {"program": program, "outputs": outputs, "out_types": out_types}
        )
        stored = dict(zip(map(id, split.side_results), side.outputs))
        program, outputs, out_types, main_inputs = split.main
        main = graph.add_call(
            FUSED,
            [stored[id(v)] if isinstance(v, SideResult) else v for v in main_inputs],
            {"program": program, "outputs": outputs, "out_types": out_types},
        )
    parts = {"side": side, "main": main}
    _rename(graph, reader, [parts[part].outputs[k] for part, k in split.results])
    graph.erase_node(reader)
    _fuse_pair(graph, producer, main)
    _fuse_pair(graph, partner, side)
    return True


def _takes_part(producer, part) -> bool:
    """Whether ``producer`` takes one part of a split group (its result read once there, every
    output of its result's shape) as its epilogue."""
    program, outputs, out_types, inputs = part
    result = producer.outputs[0]
    if sum(v is result for v in inputs) != 1:
        return False
    if any(tuple(t[0]) != tuple(result.shape) for t in out_types):
        return False
    return _takes(producer, program, outputs, out_types, inputs)


def _rename(graph: Graph, node, new_values) -> None:
    """Readers of ``node``'s outputs read ``new_values`` instead, which take the old names."""
    for old, new in zip(node.outputs, new_values):
        graph.replace_all_uses(old, new)
        graph._taken.discard(new.name)
        new.name, old.name = old.name, new.name  # the values keep their names for readers


def _unreduced(reader):
    """(program, outputs, out_types) of the ``fused_reduce`` node ``reader`` without its
    reductions, when each reduction reads an output of the node (a value that is stored
    anyway); None when a reduction reads a value only the loop holds."""
    program, outputs = reader.attrs["program"], reader.attrs["outputs"]
    first = next(j for j, instr in enumerate(program) if instr.op.reduction is not None)
    kept = [(j, t) for j, t in zip(outputs, reader.attrs["out_types"]) if j < first]
    stored = {j for j, _ in kept}
    reads = [operand for instr in program[first:] for operand in instr.operands]
    if any(not isinstance(operand, Temp) or operand.index not in stored for operand in reads):
        return None
    return Program(program[:first]), tuple(j for j, _ in kept), tuple(t for _, t in kept)


def _split_candidate(graph: Graph, producer) -> bool:
    """Whether ``producer``'s one reader is a ``fused_reduce`` node whose elementwise part could
    be ``producer``'s epilogue once its reductions run as nodes of their own."""
    result = producer.outputs[0]
    if any(v is result for v in graph.outputs) or len(result.users) != 1:
        return False
    reader = result.users[0]
    if reader.kind != "call" or reader.op is not FUSED_REDUCE:
        return False
    if sum(v is result for v in reader.inputs) != 1:
        return False
    split = _unreduced(reader)
    if split is None or any(tuple(t[0]) != tuple(result.shape) for t in split[2]):
        return False
    return _takes(producer, *split, list(reader.inputs))


def _split_and_fuse(graph: Graph, producer) -> None:
    """``producer``'s ``fused_reduce`` reader becomes a ``fused_elementwise`` node, its epilogue,
    and one reduction node per reduction, reading the stored values the loop reduced."""
    reader = producer.outputs[0].users[0]
    program, outputs, out_types = _unreduced(reader)
    with graph.inserting_after(reader):
        loop = graph.add_call(
            FUSED,
            list(reader.inputs),
            {"program": program, "outputs": outputs, "out_types": out_types},
        )
        stored = dict(zip(outputs, loop.outputs))
        new_values = []
        for j in reader.attrs["outputs"]:
            if j in stored:
                new_values.append(stored[j])
                continue
            instr = reader.attrs["program"][j]
            term = stored[instr.operands[0].index]
            new_values.append(graph.add_call(instr.op, [term], dict(instr.attrs)).outputs[0])
    _rename(graph, reader, new_values)
    graph.erase_node(reader)
    _fuse_pair(graph, producer, loop)


def fuse_epilogues(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    for producer in list(graph.nodes):
        if not _producer(producer):
            continue
        reader = _consumer(graph, producer)
        if reader is not None:
            _fuse_pair(graph, producer, reader)
            changed = True
        elif _split_between_producers(graph, producer):
            changed = True
    if changed:
        graph.nodes = graph.topological_order()
    graph, split = _split_where_it_pays(graph)
    return graph, changed or split


def _split_where_it_pays(graph: Graph) -> tuple[Graph, bool]:
    """Split fused reductions off a matmul's reader group where the epilogue lowers the
    planned peak (see the module docstring); one candidate at a time, each tried on a copy."""
    names = [p.outputs[0].name for p in graph.nodes if _producer(p) and _split_candidate(graph, p)]
    if not names or not concrete(graph):
        return graph, False
    plan, changed = plan_memory(graph), False
    for name in names:
        producer = _by_name(graph, name)
        if not _split_candidate(graph, producer):
            continue  # an earlier split changed its reader
        if not _may_lower(plan, graph, producer):
            continue
        trial = graph.copy()
        _split_and_fuse(trial, _by_name(trial, name))
        trial.nodes = trial.topological_order()
        trial_plan = plan_memory(trial)
        if trial_plan.peak_bytes < plan.peak_bytes:
            graph, plan, changed = trial, trial_plan, True
    return graph, changed


def _may_lower(plan, graph: Graph, producer) -> bool:
    """Whether splitting ``producer``'s reader can lower the peak of ``plan`` (``graph``'s):
    only where every position at the peak lies between the producer and its reader.

    The split changes the plan only there. It takes the producer out of the order and puts the
    epilogue and the reductions where the reader was (the order stays stable around them).
    Before the producer nothing else changes: the same nodes, the same values dying at each
    (the new nodes read only values read at the producer or the reader, not earlier), so the
    same buffers and reuses. After the reader the same values are alive in buffers of the
    same bytes: the product was read by the reader alone; the reader's results are the
    epilogue's and the reductions' (a result written into a dying operand's buffer of the same
    bytes before is a buffer of its own after, alone in it either way); a value read by the
    producer last now dies at the epilogue, still before. So the timeline is the same outside
    the window, and a peak reached there stays."""
    first = graph.nodes.index(producer)
    last = graph.nodes.index(producer.outputs[0].users[0])
    timeline = plan.timeline
    outside = max(max(timeline[:first], default=-1), max(timeline[last + 1 :], default=-1))
    return outside < plan.peak_bytes


def _by_name(graph: Graph, name: str):
    return next(n for n in graph.nodes for v in n.outputs if v.name == name)


EPILOGUE = Pass(
    "epilogue", fuse_epilogues, level=3, doc="a matmul and the elementwise ops on its result"
)
