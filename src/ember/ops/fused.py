"""``fused_elementwise``, ``fused_reduce`` and ``fused_epilogue``: a group of ops run as one node.

* ``fused_elementwise`` (made by transforms/fuse.py): elementwise ops in one loop;
* ``fused_reduce`` (transforms/fuse.py): elementwise ops ending in reductions (ops declaring a
  `ReductionRule`, all over the same axes of an elementwise result) over the group's trailing
  axes, its leading axes, or a leading and a trailing block of them (kernels/creduce.py);
* ``fused_epilogue`` (transforms/epilogue.py): a *producer* (an op declaring an `EpilogueRule`:
  a matmul, a convolution) and elementwise ops on its result.

Attributes (all hashable, so CSE and the printer treat the node like any other):

* ``program``: the group's ops in order, a `Program` of `Instr` (ops/program.py);
* ``outputs``: the instructions whose results the node returns;
* ``out_types``: their `TensorType`s, all of one shape (the loop's iteration space), except
  that a ``fused_reduce`` program ends with reductions, whose outputs have the reduced shape;
  the node may return elementwise results too (a masked gradient and its bias gradient);
* an epilogue's ``producer`` (the `OpDef`), ``producer_attrs`` (its attributes as sorted pairs),
  ``n_producer`` (it reads the node's first inputs) and ``slot`` (the program input its result
  is; the node's other inputs are the program's others, in order).

Each kernel here runs the producer and the program with the ops' own NumPy kernels: it is the
reference the compiled versions (kernels/cfuse.py, and the producer's ``compile`` rule) are
tested against, so a fused graph on the interpreter computes exactly what the unfused graph
computes. The nodes have no VJP: fusion runs on graphs that are already differentiated.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError
from ..types import TensorType, as_types
from ._registry import Cost, OpDef, register
from ._rules import FusedRule, Producer
from .program import Input, Instr, Program, check_program, evaluate_program, program_types

__all__ = ["FUSED", "FUSED_EPILOGUE", "FUSED_REDUCE", "epilogue_inputs", "result_bytes"]

_PROGRAM_KEYS = ("program", "outputs", "out_types")


def _check(in_types, program, outputs, out_types, op_name: str, reduce: bool) -> tuple:
    """The output types, once the program is checked against the inputs (a graph file is
    hostile): well formed, each member an op a fused loop runs (a C expression, or for
    ``reduce`` a reduction ending the program), each op's own rule accepting its operands, and
    the stated output dtypes the ones the rules give."""
    check_program(program, len(in_types), outputs, op_name)
    types = as_types(out_types)
    if len(outputs) != len(types):
        raise EmberError(f"{len(outputs)} outputs but {len(types)} output types", op=op_name)
    first = next((j for j, i in enumerate(program) if i.op.reduction is not None), len(program))
    for j, instr in enumerate(program):
        member = instr.op.c is not None if j < first else instr.op.reduction is not None
        if not member or (j >= first and not reduce):
            raise EmberError(f"instruction {j} ({instr}) cannot run in a fused loop", op=op_name)
    if reduce and first == len(program):
        raise EmberError("the program ends in no reduction", op=op_name)
    inferred = program_types(program, list(in_types))
    for j, t in zip(outputs, types):
        if inferred[j].dtype != t.dtype:
            raise EmberError(
                f"output t{j} is {inferred[j].dtype.name}, typed {t.dtype.name}", op=op_name
            )
        # the loop runs over the stated shape, reading each operand broadcast to it: what the
        # program computes must broadcast to it, or the loop would read past an operand
        if j < first and not _broadcasts_to(inferred[j].shape, t.shape):
            raise EmberError(
                f"output t{j} has shape {tuple(inferred[j].shape)}, which does not broadcast "
                f"to its stated shape {tuple(t.shape)}",
                op=op_name,
            )
    return types


def _broadcasts_to(shape, target) -> bool:
    if len(shape) > len(target):
        return False
    return all(d == 1 or d == t for d, t in zip(reversed(shape), reversed(target)))


def _infer(*inputs, program, outputs, out_types):
    return _check(inputs, program, outputs, out_types, "fused_elementwise", reduce=False)


def _reduce_infer(*inputs, program, outputs, out_types):
    return _check(inputs, program, outputs, out_types, "fused_reduce", reduce=True)


def _kernel(*arrays, program, outputs, out_types):
    results = evaluate_program(program, outputs, arrays)
    # each elementwise output in the shape of the group: the loop's iteration space, which
    # ``out_types`` states (a group may have absorbed a broadcast_to, so the operands alone can
    # be narrower: ones(1, 1) broadcast to (2, 3), then divided by a (2, 1) array); symbolic
    # sizes there are read from the operands' broadcast. Reductions stay as made.
    full = [program[j].op.reduction is None for j in outputs]
    found = np.broadcast_shapes(
        *(a.shape for a in arrays), *(r.shape for r, f in zip(results, full) if f)
    )
    shape = found
    stated = next((t.shape for t, f in zip(as_types(out_types), full) if f), None)
    if stated is not None and len(stated) >= len(found):
        padded = (1,) * (len(stated) - len(found)) + tuple(found)
        shape = tuple(d if isinstance(d, int) else p for d, p in zip(stated, padded))
    return tuple(
        r if not f or r.shape == shape else np.array(np.broadcast_to(r, shape))
        for r, f in zip(results, full)
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
    # (and, at its peak, one instruction's own kernel temporaries: those whose workspace rule
    # reads only the node's types, marked ``types_only``: add_alpha's emulated fused
    # multiply-add holds ten results' worth, sigmoid's a few)
    own = [0]

    def step(op, args, attrs, result):
        rule = op.workspace
        if rule is not None and getattr(rule, "types_only", False):
            node = SimpleNamespace(op=op, inputs=list(args), outputs=[result], attrs=attrs)
            own[0] = max(own[0], rule(node, None))

    types = program_types(program, in_types, step)
    return sum(result_bytes(t) for j, t in enumerate(types) if j not in kept) + own[0]


def _loop_workspace(node, layouts) -> int:
    """The C loop reads C-contiguous operands: it copies the others first (kernels/cfuse.py).
    (A sum over trailing axes also mallocs one row of its terms per thread, the size of the
    reduced block, and a column loop a scratch row of running results per thread's share of
    the kept elements, where its output cannot hold them (a float32 sum's doubles, a 16-bit
    output's floats or doubles: kernels/creduce.py): C's malloc, not counted, as tracemalloc
    does not see it; other leading-axis reductions accumulate in their output.)
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


def _loop_c_step(node):
    """The C graph runner's step of ``node``: its C loop (None: no compiler, a symbolic size)."""
    from ..kernels import cfuse

    attrs = node.attrs
    in_types = [v.type for v in node.inputs]
    return cfuse.c_step(attrs["program"], attrs["outputs"], attrs["out_types"], in_types)


def _loop_sources(node) -> list:
    """The C source of ``node``'s loop and its flags, for building a graph's loops together."""
    if not _compiler():
        return []
    from ..kernels import cfuse

    attrs = node.attrs
    in_types = [v.type for v in node.inputs]
    return [cfuse.loop_request(attrs["program"], attrs["outputs"], attrs["out_types"], in_types)]


def lone_c_sources(node) -> list:
    """`_loop_sources` of an elementwise node's loop of one (`lone_c_step`)."""
    program = _lone_program(node)
    if program is None or not _compiler():
        return []
    from ..kernels import cfuse

    in_types = [v.type for v in node.inputs]
    return [cfuse.loop_request(program, (0,), [node.outputs[0].type], in_types)]


def _lone_program(node):
    """The one-instruction program of a lone elementwise node's loop, or of a lone reduction's
    (`_lone_reduction`), or None."""
    op = node.op
    if node.kind == "call" and op.reduction is not None:
        return _lone_reduction(node)
    if node.kind != "call" or op.kind != "elementwise" or op.c is None or len(node.outputs) != 1:
        return None
    values = (*node.inputs, *node.outputs)
    if not all(v.dtype in _LOOP_DTYPES for v in values):
        return None
    if not any(v.dtype in _HALF for v in node.inputs):
        from ._half import c_gives_numpy_bits

        # generated code runs a node of float32/float64 operands with NumPy's kernel unless a C
        # loop gives the same bits (ops/_half.py): the C runner's step must give generated
        # code's bits (runtime/auto.py's invariant), so a loop calling libm's exp may not
        if not c_gives_numpy_bits(op.name):
            return None
    operands = tuple(Input(i) for i in range(len(node.inputs)))
    return Program((Instr(op, operands, tuple(sorted(node.attrs.items()))),))


def _lone_reduction(node):
    """The program of a lone reduction's loop (a ``sum`` no fused group took: an imported
    model's global average pooling, its ``sum`` then a division), or None. Only a rule whose
    loop gives the kernel's bits (``pairwise``: a row in NumPy's pairwise order, leading axes
    as the kernel adds them; tests/runtime/test_graph54_lone_reduction.py), since the runner
    must give generated code's bits; float32/float64 terms, static sizes, and axes a loop runs
    (kernels/creduce.py `split_axes`). (max and min may differ in the sign of a zero among
    equal zeros, prod in its order of products.)"""
    from ..kernels.creduce import split_axes

    if not node.op.reduction.pairwise:
        return None
    x, out = node.inputs[0], node.outputs
    if len(node.inputs) != 1 or len(out) != 1 or "axes" not in node.attrs:
        return None
    if x.dtype not in (dt.float32, dt.float64) or out[0].dtype != x.dtype:
        return None
    axes, shape = tuple(node.attrs["axes"]), x.shape
    if not axes or not all(isinstance(d, int) for d in shape) or 0 in shape:
        return None
    if split_axes(shape, axes) is None:
        return None
    return Program((Instr(node.op, (Input(0),), tuple(sorted(node.attrs.items()))),))


# the dtypes a C loop reads and writes (kernels/cfuse.py)
_LOOP_DTYPES = (dt.float32, dt.float64, dt.bool_, dt.bfloat16, dt.float16)
# operands on which generated code runs an elementwise op's C loop, whatever its functions
_HALF = (dt.bfloat16, dt.float16)


def lone_c_step(node):
    """The C graph runner's step of an elementwise node with a C expression, or a reduction,
    that no fused group took (a division after a reduction): the one-instruction loop the
    fusion pass would make of it (kernels/cfuse.py), or None."""
    program = _lone_program(node)
    if program is None:
        return _sequential_step(node)
    from ..kernels import cfuse

    in_types = [v.type for v in node.inputs]
    return cfuse.c_step(program, (0,), [node.outputs[0].type], in_types)


def _sequential_step(node):
    """The step of a lone reduction whose kernel takes the terms one after another on this
    dtype (`ReductionRule.sequential`: a product, an integer maximum), or None."""
    rule = node.op.reduction if node.kind == "call" else None
    if rule is None or len(node.inputs) != 1 or len(node.outputs) != 1:
        return None
    x, out = node.inputs[0], node.outputs[0]
    if x.dtype not in rule.sequential or out.dtype != x.dtype or "axes" not in node.attrs:
        return None
    if not all(isinstance(d, int) for d in x.shape):
        return None
    from ..kernels.creduce_step import reduce_step

    axes = tuple(node.attrs["axes"])
    return reduce_step(rule.accumulate, x.dtype.np, tuple(x.shape), axes)


def _no_producer(attrs) -> None:
    return None


_LOOP = FusedRule(
    members=lambda attrs: attrs["program"],
    outputs=lambda attrs: attrs["outputs"],
    producer=_no_producer,
    keys=_PROGRAM_KEYS,
)


def _onnx_fused(e):
    """A fused node as its members: the producer (an epilogue's matmul or convolution) by its
    own rule, then each instruction of the program by its op's rule."""
    rule = e.op.fused
    attrs = e.attrs
    names, types = list(e.inputs), list(e.in_types)
    producer = rule.producer(attrs)
    if producer is not None:
        p_types = types[: producer.n_inputs]
        result_type = producer.op.infer(*p_types, **producer.attrs)
        (result,) = e.call(
            producer.op, names[: producer.n_inputs], producer.attrs, in_types=p_types
        )
        names = producer.program_inputs(names, result)
        types = producer.program_inputs(types, result_type)
    program = rule.members(attrs)
    results_types = program_types(program, types)
    results: list = []
    for instr in program:
        args = [ref.pick(names, results, lambda v, d: e.scalar(v, d)) for ref in instr.operands]
        arg_types = [
            ref.pick(types, results_types, lambda v, d: TensorType((), d)) for ref in instr.operands
        ]
        results.append(e.call(instr.op, args, dict(instr.attrs), in_types=arg_types)[0])
    return tuple(results[j] for j in rule.outputs(attrs))


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
        c_step=_loop_c_step,
        c_sources=_loop_sources,
        accepts_out=_when_compiled,
        # the C loop reads each element of its inputs before writing the same element
        overwrites_operand=True,
        workspace=_loop_workspace,
        fused=_LOOP,
        onnx=_onnx_fused,
    )
)


FUSED_REDUCE = register(
    OpDef(
        name="fused_reduce",
        kind="reduce",
        infer=_reduce_infer,
        kernel=_kernel,
        vjp=None,
        cost=_cost,
        num_outputs=-1,
        doc="fused_reduce(*inputs; program, outputs, out_types): elementwise ops ending in "
        "reductions over leading and/or trailing axes, in one loop",
        batch=None,
        compile=_compiled,
        c_step=_loop_c_step,
        c_sources=_loop_sources,
        accepts_out=_when_compiled,
        # the C loop reads each element of its inputs before writing the same element of its
        # elementwise results (every pass over the iteration space reads and writes each
        # element once; the reductions come last): the first may take a dying operand's buffer
        overwrites_operand=True,
        workspace=_loop_workspace,
        fused=_LOOP,
        onnx=_onnx_fused,
    )
)


# ------------------------------------------------------------------------------ epilogues


def _producer(attrs) -> Producer:
    return Producer(
        attrs["producer"], dict(attrs["producer_attrs"]), attrs["n_producer"], attrs["slot"]
    )


def epilogue_inputs(in_types, attrs) -> tuple:
    """(the producer's result type, the program's input types) of an epilogue node taking
    ``in_types``: the producer's result is the program's input ``slot``."""
    producer = _producer(attrs)
    product = producer.op.infer(*in_types[: producer.n_inputs], **producer.attrs)
    return product, producer.program_inputs(in_types, product)


def _epilogue_kernel(
    *arrays, producer, producer_attrs, n_producer, slot, program, outputs, out_types
):
    """The producer by its own kernel, then the elementwise program on its result."""
    first = Producer(producer, dict(producer_attrs), n_producer, slot)
    result = np.asarray(producer.kernel(*arrays[:n_producer], **first.attrs))
    inputs = first.program_inputs(arrays, result)
    return _kernel(*inputs, program=program, outputs=outputs, out_types=out_types)


def _epilogue_infer(
    *inputs, producer, producer_attrs, n_producer, slot, program, outputs, out_types
):
    if not isinstance(producer, OpDef) or producer.epilogue is None:
        raise EmberError(f"{producer!r} is no op that takes an epilogue", op="fused_epilogue")
    if not (isinstance(n_producer, int) and 0 < n_producer <= len(inputs)):
        raise EmberError(f"n_producer={n_producer!r} for {len(inputs)} inputs", op="fused_epilogue")
    if not (isinstance(slot, int) and 0 <= slot <= len(inputs) - n_producer):
        raise EmberError(f"slot={slot!r} is no input of the program", op="fused_epilogue")
    first = Producer(producer, dict(producer_attrs), n_producer, slot)
    product = producer.infer(*inputs[:n_producer], **first.attrs)
    program_inputs = first.program_inputs(inputs, product)
    return _check(program_inputs, program, outputs, out_types, "fused_epilogue", reduce=False)


def _epilogue_cost(in_types, out_types, attrs) -> Cost:
    producer = _producer(attrs)
    result, _ = epilogue_inputs(in_types, attrs)
    first = producer.op.cost(in_types[: producer.n_inputs], (result,), producer.attrs)
    rest = _cost(in_types[producer.n_inputs :], out_types, attrs)
    return Cost(first.flops + rest.flops, first.bytes + rest.bytes - result_bytes(result))


def result_bytes(t) -> int:
    return int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize


def _epilogue_workspace(node, layouts) -> int:
    """The row-block implementation's (kernels/cepilogue.py): a contiguous copy of a strided
    first operand, and a block of rows for the product when the first output cannot hold it
    (another dtype than the product's); counted alike for every producer. Without a compiler,
    the reference kernel: the whole product and the program's intermediates."""
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
    """The producer's implementation of the fused node (its `EpilogueRule`)."""
    return node.attrs["producer"].epilogue.compile(node)


def _epilogue_c_step(node):
    c_step = node.attrs["producer"].epilogue.c_step
    return None if c_step is None else c_step(node)


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
        fused=FusedRule(
            members=lambda attrs: attrs["program"],
            outputs=lambda attrs: attrs["outputs"],
            producer=_producer,
            keys=_PROGRAM_KEYS,
        ),
        onnx=_onnx_fused,
    )
)
