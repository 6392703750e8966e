"""Epilogue fusion: a matmul (``matmul`` or ``linear``) or a convolution (``conv``) and the
elementwise ops applied to its result (a bias, an activation, a fused group) become one
``fused_epilogue`` node (ops/fused.py).

The matmul stays on BLAS (through NumPy). The compiled node (runtime/cepilogue.py) runs it in
blocks of rows, each block's epilogue right after it, and writes the epilogue's first output
over the matmul's own result: one full-size array fewer. (The gain is small here: BLAS through
NumPy takes no epilogue of its own; see runtime/cepilogue.py for the measurements.)
A convolution's epilogue is stored by its C kernel tile by tile (runtime/cconv_epilogue.py):
a per-channel bias, a ReLU and the ReLU's gradient mask; other programs are not fused onto it.
The max-pooling gradient (``pool_scatter``) takes ``where(mask, result, c)``, the gradient of a
ReLU before the pooling, applied by its C kernel plane by plane (runtime/cpooling.py).

Applies when the matmul's result has one reader, an elementwise node (a ``fused_elementwise``
group, or a single op the C loops can run) over the result's own shape, and is not returned;
the result is float32 or float64 with static sizes, and the matmul is 2-d on the right (a
weight): ``linear``, or ``matmul`` of an (..., K) array by a (K, N) one. Runs after fusion
(transforms/fuse.py), at O3.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..graph.ir import Graph
from ..ops._registry import TensorType
from ..ops.fused import FUSED, FUSED_EPILOGUE
from ..runtime import cconv, cconv_epilogue
from ..runtime.cepilogue import block_kind
from .fuse import _fusable
from .rewrite import Pass

__all__ = ["EPILOGUE", "fuse_epilogues"]


def _producer(node) -> bool:
    names = ("matmul", "linear", "conv", "pool_scatter")
    if node.kind != "call" or node.op.name not in names or len(node.outputs) != 1:
        return False
    out = node.outputs[0]
    if out.dtype not in (dt.float32, dt.float64) or not out.shape:
        return False
    if any(not isinstance(d, int) for v in (*node.inputs, out) for d in v.shape):
        return False
    right = node.inputs[1]
    if node.op.name == "pool_scatter":
        return True
    if node.op.name == "conv":
        return cconv.available(out.dtype.np)
    if node.op.name == "matmul":
        return len(right.shape) == 2 and len(node.inputs[0].shape) >= 2
    return True


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
    elif not (_fusable(reader) and tuple(reader.outputs[0].shape) == tuple(result.shape)):
        return None
    if producer.op.name == "pool_scatter":
        return reader if _masks(reader, result) else None
    if producer.op.name == "conv":
        program, outputs, out_types, inputs = _program_of(reader)
        slot = next(i for i, v in enumerate(inputs) if v is result)
        types = [v.type for v in inputs]
        found = cconv_epilogue.spec(program, outputs, out_types, types, slot, result.type)
        return reader if found is not None else None
    # every other operand is read whole by each block of rows, or a block at a time
    if any(block_kind(v.type, result.shape) is None for v in reader.inputs if v is not result):
        return None
    return reader


def _masks(reader, result) -> bool:
    """Whether ``reader`` is ``where(mask, result, c)``, a bool mask of the result's shape and
    a scalar c of its dtype: the gradient of a ReLU before a max pooling, which the scatter
    applies plane by plane (runtime/cpooling.py)."""
    if reader.op.name != "where" or len(reader.inputs) != 3 or reader.inputs[1] is not result:
        return False
    mask, fill = reader.inputs[0], reader.inputs[2]
    return (
        mask.dtype is dt.bool_
        and tuple(mask.shape) == tuple(result.shape)
        and fill.shape == ()
        and fill.dtype == result.dtype == reader.outputs[0].dtype
    )


def _program_of(node):
    """(program, outputs, out_types, inputs) of an elementwise node, as ``fused_elementwise``
    attributes (a single op becomes a one-instruction program)."""
    if node.op is FUSED:
        attrs = node.attrs
        return attrs["program"], attrs["outputs"], attrs["out_types"], list(node.inputs)
    operands = tuple(("in", i) for i in range(len(node.inputs)))
    program = ((node.op.name, operands, tuple(sorted(node.attrs.items()))),)
    out = node.outputs[0]
    return program, (0,), (TensorType(out.shape, out.dtype),), list(node.inputs)


def fuse_epilogues(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    for producer in list(graph.nodes):
        if not _producer(producer):
            continue
        reader = _consumer(graph, producer)
        if reader is None:
            continue
        program, outputs, out_types, inputs = _program_of(reader)
        result = producer.outputs[0]
        slot = next(i for i, v in enumerate(inputs) if v is result)
        others = inputs[:slot] + inputs[slot + 1 :]
        with graph.inserting_after(reader):
            fused = graph.add_call(
                FUSED_EPILOGUE,
                list(producer.inputs) + others,
                {
                    "producer": producer.op.name,
                    "producer_attrs": tuple(sorted(producer.attrs.items())),
                    "n_producer": len(producer.inputs),
                    "slot": slot,
                    "program": program,
                    "outputs": outputs,
                    "out_types": out_types,
                },
            )
        for old, new in zip(reader.outputs, fused.outputs):
            graph.replace_all_uses(old, new)
            graph._taken.discard(new.name)
            new.name, old.name = old.name, new.name  # the values keep their names for readers
        graph.erase_node(reader)
        graph.erase_node(producer)
        changed = True
    if changed:
        graph.nodes = graph.topological_order()
    return graph, changed


EPILOGUE = Pass(
    "epilogue", fuse_epilogues, level=3, doc="a matmul and the elementwise ops on its result"
)
