"""Matrix products: the ``matmul`` primitive (batched, broadcasting batch dimensions, BLAS
through NumPy) and the composites on it: mm, bmm, mv, dot, outer, and ``F.linear``.

The primitive takes operands of at least 2 dimensions and one dtype; the public `matmul` adds
PyTorch's 1-D rules (a 1-D left operand is a row, a 1-D right operand a column, and the added
dimension is removed again) with reshapes, so the primitive's shape rule and VJP stay simple.

Speed matters here (matmul dominates MLP training): the kernel never upcasts (float32 stays
float32), passes transposed views to BLAS as they are (no copies), copies only layouts BLAS
cannot read, and folds a batched left operand times a 2-D right operand into one large GEMM.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..kernels.blas_layout import blas_ready
from ..kernels.cepilogue import block_kind
from ..types import TensorType
from . import _batching
from . import api as E
from ._registry import REGISTRY, Cost, OpDef, TensorBase, apply, export, register
from ._rules import EpilogueRule
from ._util import (
    broadcast_shapes,
    fmt_shape,
    half_precision,
    io_bytes,
    numel,
    require_same_dtype,
    value_bytes,
)
from .elementwise import promote, to_tensor
from .program import Input, Instr, Program

# ----------------------------------------------------------------------------------- kernel

_HALF = (dt.float16.np, dt.bfloat16.np)


def _ember_product(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    from ..kernels.cgemm import gemm

    return gemm(a, b, out)


def _numpy_product(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return np.matmul(a, b, out=out)


def _matmul(a, b, out, product) -> np.ndarray:
    """``a @ b`` through ``product`` (NumPy's, or ember's GEMM), never upcasting float32,
    reading layouts BLAS takes in place and folding a batched left operand times a 2-D right
    operand into one large product; ``out`` (the result's shape and dtype: an arena slot, see
    plan/arena.py) receives the result where given."""
    if a.dtype in _HALF:  # NumPy has no fast half-precision GEMM: compute in float32, round once
        result = _matmul(a.astype(np.float32), b.astype(np.float32), None, product)
        result = result.astype(a.dtype)
        if out is None:
            return result
        out[...] = result
        return out
    a, b = blas_ready(a), blas_ready(b)
    if b.ndim == 2 and a.ndim > 2 and a.flags.c_contiguous:
        # (..., M, K) @ (K, N) as one (prod(...) * M, K) GEMM instead of a loop of small ones
        flat = None if out is None else out.reshape(-1, b.shape[-1])
        result = product(a.reshape(-1, a.shape[-1]), b, flat)
        return result.reshape(a.shape[:-1] + (b.shape[-1],)) if out is None else out
    return product(a, b, out)


def matmul_kernel(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The ``matmul`` reference kernel: NumPy's product (its BLAS)."""
    return _matmul(a, b, out, _numpy_product)


def matmul_fast(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The ``matmul`` kernel on ember's GEMM (kernels/cgemm.py: large products split over
    ember's thread pool, no BLAS threads left spinning), equal to the reference to rounding."""
    return _matmul(a, b, out, _ember_product)


def _matmul_accepts_out(node, compiled: bool) -> bool:
    """The kernel writes into ``out=`` (plan/arena.py) for float operands of one dtype."""
    return (
        not compiled
        and all(v.type.dtype.np in (np.float32, np.float64) for v in node.inputs)
        and len({v.type.dtype for v in node.inputs + node.outputs}) == 1
    )


def _matmul_workspace(node, layouts) -> int:
    """`matmul_kernel`'s temporaries beyond its result: none in float32/float64 (BLAS reads
    the operands in place); in half precision the float32 copies of both operands beside the
    float32 product, then the product beside the rounded result (the copies are gone by then):
    ``max(2a + 2b + 2out, 3out) - out`` in the half-precision sizes. `linear` runs the same
    kernel on ``x`` and ``weight.T`` (its bias is added in place)."""
    a, b, out = node.inputs[0], node.inputs[1], node.outputs[0]
    if not half_precision(out):
        return 0
    a_bytes, b_bytes, out_bytes = value_bytes(a), value_bytes(b), value_bytes(out)
    return max(2 * a_bytes + 2 * b_bytes + out_bytes, 2 * out_bytes)


# ------------------------------------------------------------------------------- primitive


def _mismatch(a_shape, b_shape, why: str) -> ShapeError:
    return ShapeError(
        f"cannot multiply shapes {fmt_shape(a_shape)} and {fmt_shape(b_shape)}: {why}",
        op="matmul",
    )


def _matmul_infer(a, b):
    if a.ndim < 2 or b.ndim < 2:
        raise _mismatch(a.shape, b.shape, "the primitive takes operands of at least 2 dimensions")
    dtype = require_same_dtype("matmul", a, b)
    if dtype is dt.bool_:
        raise DTypeError("matmul is not defined for bool tensors; cast them first", op="matmul")
    if a.shape[-1] != b.shape[-2]:
        raise _mismatch(
            a.shape,
            b.shape,
            f"the inner dimensions differ ({a.shape[-1]} vs {b.shape[-2]}); the last dimension "
            "of the first must equal the second-to-last of the second",
        )
    try:
        batch = broadcast_shapes("matmul", tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    except ShapeError:
        raise _mismatch(
            a.shape,
            b.shape,
            f"the batch dimensions {fmt_shape(a.shape[:-2])} and {fmt_shape(b.shape[:-2])} "
            "do not broadcast",
        ) from None
    return TensorType(tuple(batch) + (a.shape[-2], b.shape[-1]), dtype)


def _column_major(t) -> bool:
    """Whether an eager 2-D operand is a transposed view (e.g. ``weight.T``). Its gradient is
    then computed transposed as well, so it reaches the weight contiguous instead of through a
    transposing copy (graph values carry no layout and take the plain path)."""
    data = getattr(t, "_data", None)
    return (
        data is not None
        and data.ndim == 2
        and data.flags.f_contiguous
        and not data.flags.c_contiguous
    )


def _matmul_vjp(c, g):
    a, b = c.inputs
    need_a, need_b = c.needs_input_grad
    ga = gb = None
    if need_a:
        if _column_major(a) and b.ndim == 2:
            ga = E.transpose(matmul(b, E.transpose(g, 0, 1)), 0, 1)
        else:
            ga = E.sum_to(matmul(g, E.transpose(b, -2, -1)), c.in_types[0].shape)
    if need_b and b.ndim == 2:
        if a.ndim > 2:  # summing over the batch is one GEMM of the folded operands
            a, g = E.reshape(a, (-1, a.shape[-1])), E.reshape(g, (-1, g.shape[-1]))
        if _column_major(b):
            gb = E.transpose(matmul(E.transpose(g, 0, 1), a), 0, 1)
        else:
            gb = matmul(E.transpose(a, 0, 1), g)
    elif need_b:
        gb = E.sum_to(matmul(E.transpose(a, -2, -1), g), c.in_types[1].shape)
    return ga, gb


def _matmul_cost(in_types, out_types, attrs) -> Cost:
    # 2*M*N*K per matrix (one multiply and one add per term), as torch.utils.flop_counter counts
    k = in_types[0].shape[-1]
    return Cost(2 * numel(out_types[0].shape) * k, io_bytes(in_types, out_types))


def _matmul_c_step(node):
    """The C graph runner's step of a product by a matrix (b 2-d; a's leading dimensions are
    rows)."""
    from ..kernels import csteps

    a, b = (v.type for v in node.inputs)
    if len(b.shape) != 2:
        return None
    return csteps.linear_step(a, b, None, node.outputs[0].type, transposed=False)


# ------------------------------------------------------------------------------- epilogues
# A product's elementwise reader (a bias, an activation, a fused group) runs on each block of
# rows right after BLAS computes it, written over the block (kernels/cepilogue.py); each
# producer gives the block computation. Every other operand of the reader must be read whole
# by each block (a bias row, a scalar) or a block of rows at a time.


def _takes_blocks(node, program, outputs, out_types, in_types, slot) -> bool:
    shape = node.outputs[0].shape
    return all(block_kind(t, shape) is not None for i, t in enumerate(in_types) if i != slot)


def _rows_of(a) -> np.ndarray:
    """``a`` as a (rows, K) matrix: its leading dimensions are the product's rows."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def _gemm():
    from ..kernels.cgemm import gemm

    return gemm


def _blocks(producer_rows):
    """The ``compile`` rule of a fused epilogue whose producer computes a block of its rows with
    ``producer_rows(arrays) -> block(start, stop, out)`` (`cepilogue.build`)."""

    def compile_(node):
        from ..kernels import cepilogue

        attrs = node.attrs
        types = (v.type for v in node.inputs[: attrs["n_producer"]])
        result = attrs["producer"].infer(*types, **dict(attrs["producer_attrs"]))
        return cepilogue.build(node, result, producer_rows)

    return compile_


def _relu_epilogue(node) -> bool:
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


def _matmul_rows(arrays):
    a, b = arrays
    a2, gemm = _rows_of(a), _gemm()
    return lambda start, stop, out: gemm(a2[start:stop], b, out=out)


def _matmul_epilogue_c_step(node):
    from ..kernels import csteps

    a, b = (v.type for v in node.inputs[:2])
    if not _relu_epilogue(node) or len(b.shape) != 2:
        return None
    return csteps.linear_step(a, b, None, node.outputs[0].type, transposed=False, relu=True)


_MATMUL_EPILOGUE = EpilogueRule(
    # a product by a matrix (a weight): a's leading dimensions are the rows
    accepts=lambda node: len(node.inputs[1].shape) == 2 and len(node.inputs[0].shape) >= 2,
    takes=_takes_blocks,
    compile=_blocks(_matmul_rows),
    c_step=_matmul_epilogue_c_step,
)


_MATMUL = register(
    OpDef(
        name="matmul",
        kind="linalg",
        infer=_matmul_infer,
        kernel=matmul_kernel,
        fast=matmul_fast,
        vjp=_matmul_vjp,
        cost=_matmul_cost,
        batch=_batching.matmul_rule,
        c_step=_matmul_c_step,
        epilogue=_MATMUL_EPILOGUE,
        accepts_out=_matmul_accepts_out,
        workspace=_matmul_workspace,
        save_inputs=(0, 1),
        doc="matmul(a, b): matrix product over the last two dimensions of operands with at least "
        "2 dimensions each, broadcasting the batch dimensions",
    )
)


# --------------------------------------------------------------------------------- publics


@export(method=True)
def matmul(a, b):
    """Matrix product with PyTorch's rules: 1-D x 1-D is a dot product; a 1-D operand is a row
    (left) or a column (right) whose added dimension is removed from the result; higher
    dimensions are batches and broadcast."""
    a, b = promote(a, b)
    if a.ndim >= 2 and b.ndim >= 2:
        return apply(_MATMUL, a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise _mismatch(a.shape, b.shape, "both operands need at least 1 dimension")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        raise _mismatch(a.shape, b.shape, f"the inner dimensions differ ({k_a} vs {k_b})")
    if a.ndim == 1 and b.ndim == 1:
        out = apply(_MATMUL, E.reshape(a, (1, k_a)), E.reshape(b, (k_b, 1)))
        return E.reshape(out, ())
    if a.ndim == 1:
        out = apply(_MATMUL, E.reshape(a, (1, k_a)), b)
        return E.reshape(out, tuple(out.shape[:-2]) + (out.shape[-1],))
    out = apply(_MATMUL, a, E.reshape(b, (k_b, 1)))
    return E.reshape(out, tuple(out.shape[:-1]))


def _require_ndim(op: str, ndims: tuple, *tensors) -> None:
    if tuple(t.ndim for t in tensors) != ndims:
        shapes = " and ".join(fmt_shape(t.shape) for t in tensors)
        raise ShapeError(
            f"expects operands of {' and '.join(str(n) for n in ndims)} dimensions, "
            f"got shapes {shapes}",
            op=op,
        )


@export(method=True)
def mm(a, b):
    """Product of two matrices (2-D only; use matmul for batches and broadcasting)."""
    a, b = to_tensor(a), to_tensor(b)
    _require_ndim("mm", (2, 2), a, b)
    return matmul(a, b)


@export(method=True)
def bmm(a, b):
    """Batched product of (B, M, K) and (B, K, N) tensors (no broadcasting, as in PyTorch)."""
    a, b = to_tensor(a), to_tensor(b)
    _require_ndim("bmm", (3, 3), a, b)
    if a.shape[0] != b.shape[0]:
        raise ShapeError(
            f"batch sizes differ: shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)}", op="bmm"
        )
    return matmul(a, b)


@export(method=True)
def mv(a, v):
    """Matrix-vector product of a (M, K) matrix and a (K,) vector."""
    a, v = to_tensor(a), to_tensor(v)
    _require_ndim("mv", (2, 1), a, v)
    return matmul(a, v)


@export(method=True)
def dot(a, b):
    """Inner product of two 1-D tensors of one size (a 0-d result)."""
    a, b = to_tensor(a), to_tensor(b)
    _require_ndim("dot", (1, 1), a, b)
    return matmul(a, b)


@export(method=True)
def outer(a, b):
    """Outer product of two 1-D tensors: out[i, j] = a[i] * b[j]."""
    a, b = to_tensor(a), to_tensor(b)
    _require_ndim("outer", (1, 1), a, b)
    return E.reshape(a, (-1, 1)) * E.reshape(b, (1, -1))


export(outer, name="ger", method=True)


# ------------------------------------------------------------------------------------ linear
# F.linear is a primitive rather than the composite ``x @ weight.T + bias``: one kernel adds the
# bias into the fresh product (no temporary), and the weight's gradient comes out as one GEMM in
# the weight's own layout (g^T x), so nothing is transposed or copied on its way to .grad. On
# the MLP training step (batch 128, 784-512-512-10) that is about 10% of the whole step.


def _linear_infer(x, weight, bias=None):
    operands = (x, weight) if bias is None else (x, weight, bias)
    dtype = require_same_dtype("linear", *operands)
    if dtype is dt.bool_:
        raise DTypeError("linear is not defined for bool tensors", op="linear")
    if weight.ndim != 2 or x.ndim == 0 or x.shape[-1] != weight.shape[1]:
        raise ShapeError(
            f"input of shape {fmt_shape(x.shape)} does not fit a weight of shape "
            f"{fmt_shape(weight.shape)}: the weight is (out_features, in_features) and the "
            "input's last dimension must be in_features",
            op="linear",
        )
    if bias is not None and tuple(bias.shape) not in ((weight.shape[0],), (1,), ()):
        raise ShapeError(
            f"bias of shape {fmt_shape(bias.shape)} does not fit a weight of shape "
            f"{fmt_shape(weight.shape)}; it must be ({weight.shape[0]},)",
            op="linear",
        )
    return TensorType(tuple(x.shape[:-1]) + (weight.shape[0],), dtype)


def _linear(x, weight, bias, matmul_impl) -> np.ndarray:
    out = matmul_impl(x, weight.T)  # BLAS reads the transposed weight in place
    if bias is not None:
        out += bias  # out is fresh: add in place, no temporary
    return out


def _linear_kernel(x, weight, bias=None):
    return _linear(x, weight, bias, matmul_kernel)


def _linear_fast(x, weight, bias=None):
    return _linear(x, weight, bias, matmul_fast)


def _linear_vjp(c, g):
    x, weight = c.inputs[:2]
    need = c.needs_input_grad
    out_features, in_features = c.in_types[1].shape
    gx = matmul(g, weight) if need[0] else None
    gw = None
    if need[1]:
        g2, x2 = E.reshape(g, (-1, out_features)), E.reshape(x, (-1, in_features))
        gw = matmul(E.transpose(g2, 0, 1), x2)
    grads = (gx, gw)
    if len(need) == 3:
        gb = None
        if need[2]:  # one reduction over every leading dimension, then fit the bias's shape
            gb = E.sum(g, tuple(range(g.ndim - 1))) if g.ndim > 1 else g
            gb = E.sum_to(gb, c.in_types[2].shape)
        grads += (gb,)
    return grads


def _linear_cost(in_types, out_types, attrs) -> Cost:
    # like torch.utils.flop_counter's addmm: 2*M*N*K, the bias add not counted
    k = in_types[1].shape[1]
    return Cost(2 * numel(out_types[0].shape) * k, io_bytes(in_types, out_types))


def _linear_c_step(node):
    from ..kernels import csteps

    x, w, *bias = (v.type for v in node.inputs)
    return csteps.linear_step(x, w, *(bias or [None]), node.outputs[0].type, transposed=True)


def _linear_rows(arrays):
    x, weight = arrays[:2]
    bias = arrays[2] if len(arrays) == 3 else None
    x2, gemm = _rows_of(x), _gemm()
    weight = weight.T  # (K, N): BLAS reads the transpose in place

    def block(start, stop, out):
        gemm(x2[start:stop], weight, out=out)
        if bias is not None:
            out += bias

    return block


def _linear_epilogue_c_step(node):
    from ..kernels import csteps

    x, w, *bias = (v.type for v in node.inputs)
    if not _relu_epilogue(node):
        return None
    out = node.outputs[0].type
    return csteps.linear_step(x, w, *(bias or [None]), out, transposed=True, relu=True)


_LINEAR = register(
    OpDef(
        name="linear",
        kind="linalg",
        infer=_linear_infer,
        kernel=_linear_kernel,
        fast=_linear_fast,
        vjp=_linear_vjp,
        cost=_linear_cost,
        save_inputs=(0, 1),
        # workspace: the matmul kernel's, on x and weight.T
        batch=_batching.linear_rule,
        c_step=_linear_c_step,
        epilogue=EpilogueRule(
            accepts=lambda node: True,
            takes=_takes_blocks,
            compile=_blocks(_linear_rows),
            c_step=_linear_epilogue_c_step,
        ),
        workspace=_matmul_workspace,
        doc="linear(x, weight[, bias]): x @ weight.T (+ bias), weight of shape (out, in); "
        "PyTorch's F.linear / addmm",
    )
)


@export(functional=True, toplevel=False)
def linear(x, weight, bias=None):
    """PyTorch's F.linear: ``x @ weight.T + bias`` with weight of shape (out, in)."""
    operands = (x, weight) if bias is None else (x, weight, bias)
    if not all(isinstance(t, TensorBase) and t.dtype is x.dtype for t in operands):
        operands = promote(*operands)
    x, weight = operands[0], operands[1]
    if weight.ndim == 1:  # a single output feature, which PyTorch drops from the shape
        out = matmul(x, weight)
        return out if bias is None else out + operands[2]
    return apply(_LINEAR, *operands)


@export(functional=True, toplevel=False)
def bilinear(x1, x2, weight, bias=None):
    """PyTorch's F.bilinear: ``out[..., o] = x1[..., i] weight[o, i, j] x2[..., j] + bias[o]``."""
    x1, x2, weight = promote(x1, x2, weight)
    if (
        weight.ndim != 3
        or x1.ndim == 0
        or x1.shape[-1] != weight.shape[1]
        or x2.ndim == 0
        or x2.shape[-1] != weight.shape[2]
        or tuple(x1.shape[:-1]) != tuple(x2.shape[:-1])
    ):
        raise ShapeError(
            f"inputs of shapes {fmt_shape(x1.shape)} and {fmt_shape(x2.shape)} do not fit a "
            f"weight of shape {fmt_shape(weight.shape)} (out, in1, in2); the inputs must share "
            "their leading dimensions",
            op="bilinear",
        )
    out = E.einsum("...i,oij,...j->...o", x1, weight, x2)
    return out if bias is None else out + bias
