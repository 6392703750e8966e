"""``fused_elementwise`` and ``fused_reduce``: a group of elementwise ops run as one node (made by
transforms/fuse.py), the second ending in reductions over the group's trailing axes, its
leading axes, or a leading and a trailing block of them (kernels/creduce.py).

Attributes (all hashable, so CSE and the printer treat the node like any other):

* ``program``: the group's ops in order, each ``(op name, operands, attrs)``; an operand is
  ``("in", i)`` (the node's i-th input), ``("t", j)`` (the j-th instruction's result) or
  ``("k", value, dtype name)`` (a 0-d constant written into the kernel);
* ``outputs``: the instructions whose results the node returns;
* ``out_types``: their `TensorType`s, all of one shape (the loop's iteration space), except
  that in ``fused_reduce`` the program ends with reductions (``sum``, ``max``, ``min``, all
  over the same axes of an elementwise result), whose outputs have the reduced shape; the
  node may return elementwise results too (a masked gradient and its bias gradient).

The kernel here runs the program with each op's own NumPy kernel: it is the reference the
compiled C version (kernels/cfuse.py, chosen by the code generator) is tested against, so a
fused graph on the interpreter computes exactly what the unfused graph computes. The node has
no VJP: fusion runs on graphs that are already differentiated (forward and backward alike).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError
from ..types import TensorType
from ._registry import REGISTRY, Cost, OpDef, register

__all__ = [
    "FUSED",
    "FUSED_EPILOGUE",
    "FUSED_OPS",
    "FUSED_REDUCE",
    "REDUCTIONS",
    "epilogue_inputs",
    "evaluate_program",
    "program_types",
    "walk_program",
]

# reductions a fused loop can end with: an accumulator per row of the loop
REDUCTIONS = ("sum", "max", "min")


def walk_program(program, inputs, step, constant) -> list:
    """Each instruction's result, in order: ``step(op, args, attrs)`` runs one instruction on
    its operands (a program input, an earlier result, or ``constant(value, dtype_name)``)."""
    results: list = []
    for name, operands, attrs in program:
        args = [
            inputs[ref[1]]
            if ref[0] == "in"
            else results[ref[1]]
            if ref[0] == "t"
            else constant(ref[1], ref[2])
            for ref in operands
        ]
        results.append(step(REGISTRY[name], args, dict(attrs)))
    return results


def evaluate_program(program, outputs, arrays) -> tuple:
    """Run ``program`` on ``arrays`` with the ops' reference kernels."""
    results = walk_program(
        program,
        arrays,
        lambda op, args, attrs: np.asarray(op.kernel(*args, **attrs)),
        lambda value, dtype: np.asarray(value, dtype=dt.as_dtype(dtype).np),
    )
    return tuple(results[j] for j in outputs)


def program_types(program, in_types, step=None) -> list:
    """Each instruction's abstract type (`TensorType`), from the ops' shape rules (no data).
    ``step(op, arg_types, attrs, result_type)``, when given, sees every instruction."""

    def infer(op, args, attrs):
        result = op.infer(*args, **attrs)
        if step is not None:
            step(op, args, attrs, result)
        return result

    return walk_program(
        program, in_types, infer, lambda value, dtype: TensorType((), dt.as_dtype(dtype))
    )


def _types(out_types) -> tuple:
    """The output types as `TensorType`s (a loaded graph file gives plain pairs)."""
    return tuple(TensorType(tuple(shape), dt.as_dtype(dtype)) for shape, dtype in out_types)


def _infer(*inputs, program, outputs, out_types):
    if len(outputs) != len(out_types):
        raise EmberError(
            f"{len(outputs)} outputs but {len(out_types)} output types", op="fused_elementwise"
        )
    return _types(out_types)


def _kernel(*arrays, program, outputs, out_types):
    results = evaluate_program(program, outputs, arrays)
    # each output in the shape of the group, the inputs' broadcast (an output computed from
    # smaller operands alone would otherwise keep their shape); taken from the arrays, so
    # symbolic sizes in ``out_types`` need no binding
    shape = np.broadcast_shapes(*(a.shape for a in arrays), *(r.shape for r in results))
    return tuple(r if r.shape == shape else np.array(np.broadcast_to(r, shape)) for r in results)


def _reduce_kernel(*arrays, program, outputs, out_types):
    results = evaluate_program(program, outputs, arrays)
    # the elementwise outputs in the group's shape, as in ``_kernel``; the reductions as made
    full = [r for j, r in zip(outputs, results) if program[j][0] not in REDUCTIONS]
    shape = np.broadcast_shapes(*(a.shape for a in arrays), *(r.shape for r in full))
    return tuple(
        r
        if program[j][0] in REDUCTIONS or r.shape == shape
        else np.array(np.broadcast_to(r, shape))
        for j, r in zip(outputs, results)
    )


def _cost(in_types, out_types, attrs) -> Cost:
    n = max((int(np.prod(t.shape, dtype=np.int64)) for t in (*in_types, *out_types)), default=0)
    moved = sum(int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize for t in in_types)
    moved += sum(int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize for t in out_types)
    return Cost(n * len(attrs["program"]), moved)  # the point of fusing: one pass over memory


def _compiler() -> bool:
    from ..kernels.ccompile import compiler_available

    return compiler_available()


def _program_workspace(program, outputs, in_types) -> int:
    """What the reference kernel (`evaluate_program`, run when no C compiler is available)
    holds beyond its outputs: every intermediate of the program, alive until it returns."""
    kept = set(outputs)
    types = program_types(program, in_types)
    return sum(result_bytes(t) for j, t in enumerate(types) if j not in kept)


def _loop_workspace(node, layouts) -> int:
    """The C loop reads C-contiguous operands: it copies the others first (kernels/cfuse.py).
    (A sum over trailing axes also mallocs one row of its terms per thread, the size of the
    reduced block: not counted. Leading-axis sums accumulate in their output: no scratch.)
    Without a compiler, the reference kernel's intermediates."""
    if not _compiler():
        types = [v.type for v in node.inputs]
        return _program_workspace(node.attrs["program"], node.attrs["outputs"], types)
    return sum(result_bytes(v.type) for v in node.inputs if not layouts.contiguous(v))


def _when_compiled(node, compiled: bool) -> bool:
    """The C implementations write into given ``out=`` arrays; the NumPy kernels do not."""
    return compiled


def _compiled(node):
    """The code generator's implementation of ``node``: one C loop (None: no compiler)."""
    from ..kernels import cfuse

    return cfuse.build(node)


FUSED = register(
    OpDef(
        name="fused_elementwise",
        kind="elementwise",
        infer=_infer,
        kernel=_kernel,
        vjp=None,
        cost=_cost,
        num_outputs=-1,
        doc="fused_elementwise(*inputs; program, outputs, out_types): elementwise ops in one loop",
        batch=None,
        compile=_compiled,
        accepts_out=_when_compiled,
        # the C loop reads each element of its inputs before writing the same element
        overwrites_operand=True,
        workspace=_loop_workspace,
    )
)


FUSED_REDUCE = register(
    OpDef(
        name="fused_reduce",
        kind="reduce",
        infer=_infer,
        kernel=_reduce_kernel,
        vjp=None,
        cost=_cost,
        num_outputs=-1,
        doc="fused_reduce(*inputs; program, outputs, out_types): elementwise ops ending in "
        "reductions over leading and/or trailing axes, in one loop",
        batch=None,
        compile=_compiled,
        accepts_out=_when_compiled,
        workspace=_loop_workspace,
    )
)


# ------------------------------------------------------------------------------ epilogues


def _epilogue_kernel(
    *arrays, producer, producer_attrs, n_producer, slot, program, outputs, out_types
):
    """The producer (a matmul) by its own kernel, then the elementwise program on its result."""
    result = REGISTRY[producer].kernel(*arrays[:n_producer], **dict(producer_attrs))
    inputs = list(arrays[n_producer:])
    inputs.insert(slot, np.asarray(result))
    return _kernel(*inputs, program=program, outputs=outputs, out_types=out_types)


def _epilogue_infer(
    *inputs, producer, producer_attrs, n_producer, slot, program, outputs, out_types
):
    return _infer(*inputs, program=program, outputs=outputs, out_types=out_types)


def epilogue_inputs(in_types, attrs) -> tuple:
    """(the producer's result type, the program's input types) of an epilogue node taking
    ``in_types``: the producer's result is the program's input ``slot``."""
    producer = REGISTRY[attrs["producer"]]
    product = producer.infer(*in_types[: attrs["n_producer"]], **dict(attrs["producer_attrs"]))
    program_inputs = list(in_types[attrs["n_producer"] :])
    program_inputs.insert(attrs["slot"], product)
    return product, program_inputs


def _epilogue_cost(in_types, out_types, attrs) -> Cost:
    producer = REGISTRY[attrs["producer"]]
    own = in_types[: attrs["n_producer"]]
    result, _ = epilogue_inputs(in_types, attrs)
    first = producer.cost(own, (result,), dict(attrs["producer_attrs"]))
    rest = _cost(in_types[attrs["n_producer"] :], out_types, attrs)
    return Cost(first.flops + rest.flops, first.bytes + rest.bytes - result_bytes(result))


def result_bytes(t) -> int:
    return int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize


def _epilogue_workspace(node, layouts) -> int:
    """kernels/cepilogue.py: a contiguous copy of a strided left operand, and a block of rows
    for the product when the first output cannot hold it (another dtype than the product's).
    Without a compiler, the reference kernel: the whole product and the program's
    intermediates."""
    a = node.inputs[0]
    extra = 0 if layouts.contiguous(a) else result_bytes(a.type)
    product, program_inputs = epilogue_inputs([v.type for v in node.inputs], node.attrs)
    if not _compiler():
        intermediates = _program_workspace(
            node.attrs["program"], node.attrs["outputs"], program_inputs
        )
        return result_bytes(product) + intermediates
    if node.outputs[0].dtype != product.dtype:
        from ..kernels.cepilogue import BLOCK_BYTES

        extra += min(result_bytes(product), BLOCK_BYTES)
    return extra


def _compiled_epilogue(node):
    from ..kernels import cepilogue

    return cepilogue.build(node)


def _epilogue_c_step(node):
    from ..kernels import cepilogue

    return cepilogue.c_step(node)


FUSED_EPILOGUE = register(
    OpDef(
        name="fused_epilogue",
        kind="linalg",
        infer=_epilogue_infer,
        kernel=_epilogue_kernel,
        vjp=None,
        cost=_epilogue_cost,
        num_outputs=-1,
        doc="fused_epilogue(*producer inputs, *inputs; producer, producer_attrs, n_producer, "
        "slot, program, outputs, out_types): a matmul and the elementwise ops on its result",
        batch=None,
        compile=_compiled_epilogue,
        accepts_out=_when_compiled,
        c_step=_epilogue_c_step,
        workspace=_epilogue_workspace,
    )
)


# the fused ops, by name: what the tools (profiler, drawings) treat as a group of the program's ops
FUSED_OPS = frozenset(op.name for op in (FUSED, FUSED_REDUCE, FUSED_EPILOGUE))
