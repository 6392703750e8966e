"""Epilogue rules of products computed a block of rows at a time (ops/linalg.py: matmul,
linear): the product's elementwise reader (a bias, an activation, a fused group) runs on each
block of rows right after BLAS computes it, written over the block (kernels/cepilogue.py).

A producer gives `row_block_rule` its block computation, ``rows(arrays, **attrs) ->
block(start, stop, out)`` (``arrays``: the producer's inputs, ``attrs`` its attributes;
``out``: rows ``start:stop`` of its result seen as (M, N)). Every other operand of the reader
must be read whole by each block (a bias row, a scalar) or a block of rows at a time
(`cepilogue.block_kind`).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..kernels.cepilogue import BLOCK_BYTES, block_kind
from ..kernels.cstep import data_address
from ._registry import REGISTRY
from ._rules import EpilogueRule
from .program import Input, Instr, Program

__all__ = ["chained_c_step", "gemm", "relu_only", "row_block_rule", "rows_of"]


def _takes_blocks(node, program, outputs, out_types, in_types, slot) -> bool:
    shape = node.outputs[0].shape
    return all(block_kind(t, shape) is not None for i, t in enumerate(in_types) if i != slot)


def rows_of(a) -> np.ndarray:
    """``a`` as a (rows, K) matrix: its leading dimensions are the product's rows."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def gemm():
    """ember's GEMM (kernels/cgemm.py), imported on first use (it looks for the compiler)."""
    from ..kernels.cgemm import gemm

    return gemm


def _compile(rows):
    def compile_(node):
        from ..kernels import cepilogue

        attrs = node.attrs
        producer_attrs = dict(attrs["producer_attrs"])
        types = (v.type for v in node.inputs[: attrs["n_producer"]])
        result = attrs["producer"].infer(*types, **producer_attrs)
        return cepilogue.build(node, result, lambda arrays: rows(arrays, **producer_attrs))

    return compile_


def _memory_base(value):
    """The value whose memory ``value`` may be a view of (through view ops and ops whose
    kernel returns views), or ``value`` itself."""
    while value.node.kind == "call" and (value.node.op.view or value.node.op.aliases):
        value = value.node.inputs[0]
    return value


def operands_may_share(node, i: int = 0, j: int = 1) -> bool:
    """Whether the node's inputs ``i`` and ``j`` may be views of one array where generated code
    runs it (``x @ x.T``: NumPy computes such a product with its own routine, which a C step
    does not repeat)."""
    return _memory_base(node.inputs[i]) is _memory_base(node.inputs[j])


def frozen_operand(node, i: int = 1):
    """The array of the node's input ``i`` where it is a frozen graph constant, which a C step
    may pack once (kernels/cconv_constant.py `frozen_array`); else None."""
    from ..kernels.cconv_constant import frozen_array

    return frozen_array(node, i)


def relu_only(node) -> bool:
    """Whether the fused node's epilogue is a ReLU of the product alone, which the C graph
    runner's product step applies (kernels/csteps.py)."""
    attrs = node.attrs
    relu = Program((Instr(REGISTRY["relu"], (Input(0),)),))
    return (
        attrs["slot"] == 0
        and len(node.inputs) == attrs["n_producer"]
        and attrs["outputs"] == (0,)
        and attrs["program"] == relu
    )


def as_blocks(step, result):
    """``step`` (a product's C step, computing all of ``result`` at once) where it computes
    what generated code computes a block of rows at a time (kernels/cepilogue.py), else None:
    ember's own GEMM sums each result alike either way, a kernel that reads its operands by
    their layouts (the step's ``contiguous_inputs``: NumPy's BLAS calls, `skinny`, the
    BLAS's) only where the result is one block."""
    if step is None or not step.contiguous_inputs:
        return step
    row = (result.shape[-1] if result.shape else 1) * result.dtype.np.itemsize
    return (
        step
        if math.prod(result.shape) * result.dtype.np.itemsize <= max(BLOCK_BYTES, row)
        else None
    )


def chained_c_step(node, product_step):
    """The C graph runner's step of a fused node whose epilogue is any C loop: the product's
    own step (``product_step(result_type)``: slots ``"in"`` the node's producer inputs,
    ``"out"`` 0 the product), then the program's loop (kernels/cfuse.py) over it, as one step
    (kernels/csteps.py `sequence_step`). The product is written where the node's first output
    goes when that has its type, and the loop writes over it in place, as the compiled node
    does (kernels/cepilogue.py); else into scratch memory of the step's own. None where
    either step does not apply."""
    from ..kernels import cfuse, csteps

    attrs = node.attrs
    n, slot = attrs["n_producer"], attrs["slot"]
    producer = attrs["producer"]
    result = producer.infer(*(v.type for v in node.inputs[:n]), **dict(attrs["producer_attrs"]))
    product = product_step(result)
    in_types = [v.type for v in node.inputs[n:]]
    in_types.insert(slot, result)
    loop = cfuse.c_step(attrs["program"], attrs["outputs"], attrs["out_types"], in_types)
    if product is None or loop is None:
        return None
    if as_blocks(product, result) is None:
        return None
    scratch = None
    if node.outputs[0].type != result:
        scratch = np.empty(tuple(result.shape), result.dtype.np)
    where = ("out", 0) if scratch is None else (data_address(scratch),)

    def product_slot(s, role, i):
        return (s, *where) if role == "out" else (s, role, i)

    def loop_slot(s, role, j):
        if role == "out":
            return (s, role, j)
        if j == slot:
            return (s, *where)
        return (s, "in", n + j - (j > slot))

    slots = [
        [product_slot(*entry) for entry in product.slots],
        [loop_slot(*entry) for entry in loop.slots],
    ]
    step = csteps.sequence_step([product, loop], slots)
    if step is not None:  # (the product's inputs are the node's first ones)
        step.contiguous_inputs = product.contiguous_inputs
    if step is not None and scratch is not None:
        step.keep = (*step.keep, scratch)
    return step


def row_block_rule(rows, accepts=lambda node: True, c_step=None) -> EpilogueRule:
    """The `EpilogueRule` of a producer computing its result's rows with ``rows`` (see the
    module docstring); ``accepts`` (for float32/float64 results: the blocks' epilogue loops
    are compiled for those) and ``c_step`` as the rule's."""

    def accepts_wide(node) -> bool:
        return node.outputs[0].dtype in (dt.float32, dt.float64) and accepts(node)

    return EpilogueRule(
        accepts=accepts_wide, takes=_takes_blocks, compile=_compile(rows), c_step=c_step
    )
