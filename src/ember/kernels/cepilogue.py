"""The compiled ``fused_epilogue`` node (transforms/epilogue.py) of a producer whose result is
computed a block of rows at a time (a product on BLAS, ``matmul``, ``linear``: their epilogue
rules, ops/_row_blocks.py, call `build` with the producer's own block computation), each
block's elementwise epilogue run as a C loop (kernels/cfuse.py) right after it, writing its
first output over the block in place (no second full-size array).

Blocks. The matmul's result is seen as (M, N): M the product of its leading dimensions. A
block is `BLOCK_BYTES` of rows (at least one row). Blocks small enough to stay in L2 made BLAS
slower than the cache saved (a 1024x1024x1024 linear + GELU ran slower fused than unfused that
way), so blocks are large and most layers are one block: the gain is the pass over the result
and the array saved.

An epilogue input is either constant over the rows (a bias (N,), a scalar), read whole by
every block, or has the result's leading dimensions, and is read a block of rows at a time;
transforms/epilogue.py fuses nothing else.
The C loop is compiled once for a symbolic number of rows, so every block (the last one is
shorter) runs the same kernel.

The result equals the reference (ops/fused.py: the producer's kernel, then the program's NumPy
kernels) to the matmul's own rounding: BLAS may order a block's sums differently from the whole
product's (ember's own GEMM does not); the C graph runner's step for such a node computes the
whole product, so where the kernel is not ember's own it applies to one block only
(ops/_row_blocks.py `as_blocks`).
"""

from __future__ import annotations

import math

import numpy as np

from ..symbolic import sym
from ..types import TensorType

__all__ = ["BLOCK_BYTES", "block_kind", "build"]

BLOCK_BYTES = 1 << 23  # rows of the result per block (see the module docstring)


def block_kind(t, shape) -> str | None:
    """How an epilogue input of type ``t`` is read against a result of ``shape``: "whole"
    (constant over its rows), "rows" (a block of rows at a time), or None (neither)."""
    padded = (1,) * (len(shape) - len(t.shape)) + tuple(t.shape)
    if len(padded) != len(shape):
        return None
    lead = padded[:-1]
    if all(d == 1 for d in lead):
        return "whole"
    if lead == tuple(shape[:-1]):
        return "rows"
    return None


def build(node, result, producer_rows):
    """``(*arrays, out=None) -> tuple of arrays`` for a ``fused_epilogue`` node, or None (no
    compiler, or inputs a block cannot slice). ``result``: the producer's result type (its
    rows are those of the result seen as (M, N)); ``producer_rows(producer_arrays)`` returns the
    producer's block computation for one call, ``block(start, stop, out)``, writing rows
    ``start:stop`` of the (M, N) result into ``out``."""
    from .cfuse import build_program

    attrs = node.attrs
    n, slot = attrs["n_producer"], attrs["slot"]
    shape = tuple(result.shape)
    types = [v.type for v in node.inputs[n:]]
    types.insert(slot, result)
    kinds = [block_kind(t, shape) for t in types]
    if None in kinds:
        return None
    rows = sym("rows")
    width = shape[-1]

    def block_type(t, kind):
        if kind == "rows":
            return TensorType((rows, t.shape[-1]), t.dtype)
        return TensorType(tuple(t.shape)[-1:] if t.shape else (), t.dtype)

    in_types = [block_type(t, k) for t, k in zip(types, kinds)]
    out_types = [TensorType((rows, width), v.type.dtype) for v in node.outputs]
    run = build_program(attrs["program"], attrs["outputs"], out_types, in_types)
    if run is None:
        return None
    total = math.prod(shape[:-1])
    step = max(1, BLOCK_BYTES // max(1, width * result.dtype.itemsize))
    np_dtype = result.dtype.np
    out_dtypes = [v.type.dtype.np for v in node.outputs]

    def call(*arrays, out=None):
        compute = producer_rows(arrays[:n])
        given = list(out) if out is not None else [None] * len(out_dtypes)
        # outputs the caller wants written into its own arrays (a parameter updated in place)
        results = [
            t
            if t is not None and t.shape == shape and t.dtype == d and t.flags.c_contiguous
            else None
            for t, d in zip(given, out_dtypes)
        ]
        # the first output is written over the matmul's own result: in a new array, or in a
        # given one (an arena slot) that no operand shares memory with
        over_product = out_dtypes[0] == np_dtype and (
            results[0] is None or not any(np.may_share_memory(results[0], x) for x in arrays)
        )
        if over_product:
            if results[0] is None:
                results[0] = np.empty(shape, np_dtype)
            product = results[0].reshape(total, width)
        else:  # the product needs a block of scratch only
            product = np.empty((min(step, total), width), np_dtype)
        results = [np.empty(shape, d) if r is None else r for r, d in zip(results, out_dtypes)]
        outs = [r.reshape(total, width) for r in results]
        flat = [
            _as_block_operand(x, kind, total)
            for x, kind in zip(_with_slot(list(arrays[n:]), slot, None), kinds)
        ]
        for start in range(0, total, step):
            stop = min(total, start + step)
            block = product[start:stop] if over_product else product[: stop - start]
            compute(start, stop, block)
            inputs = [
                block if x is None else (x[start:stop] if kind == "rows" else x)
                for x, kind in zip(flat, kinds)
            ]
            run(*inputs, out=tuple(o[start:stop] for o in outs))
        return tuple(results)

    return call


def _as_block_operand(x, kind: str, total: int):
    """``x`` as the kernel reads it: (M, last) to slice rows from, or its last axis whole."""
    if x is None:  # the matmul's block goes here
        return None
    if kind == "rows":
        return x.reshape(total, x.shape[-1])
    return x.reshape(x.shape[-1:]) if x.ndim else x


def _with_slot(items: list, slot: int, value) -> list:
    items = list(items)
    items.insert(slot, value)
    return items
