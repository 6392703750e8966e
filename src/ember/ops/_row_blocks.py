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
from ..kernels.cepilogue import block_kind
from ._registry import REGISTRY
from ._rules import EpilogueRule
from .program import Input, Instr, Program

__all__ = ["gemm", "relu_only", "row_block_rule", "rows_of"]


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


def row_block_rule(rows, accepts=lambda node: True, c_step=None) -> EpilogueRule:
    """The `EpilogueRule` of a producer computing its result's rows with ``rows`` (see the
    module docstring); ``accepts`` (for float32/float64 results: the blocks' epilogue loops
    are compiled for those) and ``c_step`` as the rule's."""

    def accepts_wide(node) -> bool:
        return node.outputs[0].dtype in (dt.float32, dt.float64) and accepts(node)

    return EpilogueRule(
        accepts=accepts_wide, takes=_takes_blocks, compile=_compile(rows), c_step=c_step
    )
