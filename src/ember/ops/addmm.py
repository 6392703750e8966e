"""PyTorch's ``addmm`` (``beta * input + alpha * (mat1 @ mat2)``) as one primitive: its kernel
scales the fresh product and adds the input into it in place, half precision computed in float32
and rounded once, as PyTorch; its epilogue rule computes the product's rows as ``linear``'s does
(ops/_row_blocks.py). The products themselves are in ops/linalg.py."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..types import TensorType
from . import _item_scalars as _items
from . import _torch_flops
from . import api as E
from ._autocast import Autocast, autocasts
from ._matmul_kernels import matmul_fast, matmul_kernel, product_workspace
from ._registry import Cost, OpDef, apply, export, register
from ._row_blocks import as_blocks, gemm, operands_may_share, relu_only, row_block_rule, rows_of
from ._rules import Complex
from ._util import (
    broadcast_shapes,
    fmt_shape,
    half_precision,
    io_bytes,
    numel,
    require_same_dtype,
    value_bytes,
)
from .linalg import matmul
from .promotion import promote
from .sparse_math import addmm as sparse_addmm
from .sparse_tensor import SparseTensor


def _addmm_infer(input, mat1, mat2, *, beta, alpha):
    dtype = require_same_dtype("addmm", input, mat1, mat2)
    if dtype is dt.bool_:
        raise DTypeError("addmm is not defined for bool tensors", op="addmm")
    if mat1.ndim != 2 or mat2.ndim != 2 or mat1.shape[1] != mat2.shape[0]:
        raise ShapeError(
            f"mat1 of shape {fmt_shape(mat1.shape)} and mat2 of shape {fmt_shape(mat2.shape)} "
            "cannot be multiplied: both must be matrices, mat1's columns as many as mat2's rows",
            op="addmm",
        )
    shape = (mat1.shape[0], mat2.shape[1])
    if input.ndim > 2 or broadcast_shapes("addmm", tuple(input.shape), shape) != shape:
        raise ShapeError(
            f"input of shape {fmt_shape(input.shape)} does not broadcast to the product's "
            f"shape {fmt_shape(shape)}",
            op="addmm",
        )
    return TensorType(shape, dtype)


def _addmm(input, mat1, mat2, beta, alpha, product) -> np.ndarray:
    if half_precision(mat1):  # as PyTorch: computed in float32, rounded once
        wide = [a.astype(np.float32) for a in (input, mat1, mat2)]
        return _addmm(*wide, beta, alpha, product).astype(mat1.dtype)
    out = product(mat1, mat2)  # a fresh array: scaled and added to in place
    if alpha != 1:
        out *= out.dtype.type(alpha)
    if beta != 0:  # (beta 0 ignores input, its NaN and infinities too, as PyTorch does)
        out += input if beta == 1 else input * input.dtype.type(beta)
    return out


def _addmm_kernel(input, mat1, mat2, *, beta, alpha):
    return _addmm(input, mat1, mat2, beta, alpha, matmul_kernel)


def _half_bias(input, mat1, mat2, beta, alpha) -> bool:
    """Whether a half-precision addmm is a product plus a bias per column, which
    `matmul_fast` adds in the product's store (kernels/chgemm.py); takes arrays or types."""
    return (
        beta == 1
        and alpha == 1
        and mat1.dtype in (dt.float16.np, dt.bfloat16.np, dt.float16, dt.bfloat16)
        and input.dtype == mat1.dtype
        and tuple(input.shape) in ((mat2.shape[-1],), (1, mat2.shape[-1]))
        and len(mat1.shape) == 2
    )


def _addmm_fast(input, mat1, mat2, *, beta, alpha):
    if _half_bias(input, mat1, mat2, beta, alpha):
        return matmul_fast(mat1, mat2, None, input)
    return _addmm(input, mat1, mat2, beta, alpha, matmul_fast)


def _addmm_vjp(c, g):
    _, mat1, mat2 = c.inputs
    beta, alpha = c.attrs["beta"], c.attrs["alpha"]
    if c.in_types[1].dtype.is_complex:  # (conjugate Wirtinger: the factors conjugated)
        mat1, mat2 = E.conj(mat1), E.conj(mat2)
        beta, alpha = complex(beta).conjugate(), complex(alpha).conjugate()
    need_input, need_1, need_2 = c.needs_input_grad
    scaled = g if alpha == 1 else g * alpha
    return (
        E.sum_to(g if beta == 1 else g * beta, c.in_types[0].shape) if need_input else None,
        matmul(scaled, E.transpose(mat2, 0, 1)) if need_1 else None,
        matmul(E.transpose(mat1, 0, 1), scaled) if need_2 else None,
    )


def _addmm_cost(in_types, out_types, attrs) -> Cost:
    # torch.utils.flop_counter's: 2*M*N*K, the scaling and the addition not counted
    return Cost(2 * numel(out_types[0].shape) * in_types[1].shape[1], io_bytes(in_types, out_types))


def _addmm_workspace(node, layouts) -> int:
    """`_addmm`'s temporaries beyond its result: ``input * beta`` (the input's size) unless
    beta is 0 or 1, after the product's own (`product_workspace`). In half precision, but for a
    bias the product's store adds, every operand's float32 copy beside the float32 product and
    then the scaled input's float32 copy (`_addmm` computes there and rounds once), or the
    rounded result: ``max(4i + 2a + 2b + 2o, 2i + 2a + 2b + 3o) - o`` in the 16-bit sizes."""
    input, mat1, mat2 = node.inputs
    out = node.outputs[0]
    beta, alpha = node.attrs["beta"], node.attrs["alpha"]
    if half_precision(out):
        if _half_bias(input.type, mat1.type, mat2.type, beta, alpha):
            return product_workspace(mat1, mat2, out)
        i, a, b, o = (value_bytes(v) for v in (input, mat1, mat2, out))
        scaled = 2 * i if beta not in (0, 1) else 0
        wide = 2 * i + 2 * a + 2 * b
        return max(wide + 2 * o + scaled, wide + 3 * o) - o
    scaled = value_bytes(input) if beta not in (0, 1) else 0
    return max(product_workspace(mat1, mat2, out), scaled)


def _addmm_step(types, out, attrs, relu: bool = False, same_operand: bool = False):
    """The C graph runner's product-and-bias step (kernels/csteps.py) where it computes addmm:
    beta and alpha 1 and an input of one value per column; its operand slots moved to addmm's
    order (input, mat1, mat2)."""
    from ..kernels import csteps

    input, mat1, mat2 = types
    if attrs["beta"] != 1 or attrs["alpha"] != 1 or tuple(input.shape) != (out.shape[-1],):
        return None
    step = csteps.linear_step(
        mat1, mat2, input, out, transposed=False, relu=relu, same_operand=same_operand
    )
    if step is not None:
        order = (1, 2, 0)  # linear_step's x, w and bias are addmm's mat1, mat2 and input
        step.slots = [(at, kind, order[i] if kind == "in" else i) for at, kind, i in step.slots]
        step.contiguous_inputs = tuple(order[i] for i in step.contiguous_inputs)
    return step


def _addmm_rows(arrays, *, beta, alpha):
    input, mat1, mat2 = arrays
    m1, product = rows_of(mat1), gemm()
    by_rows = input.ndim == 2 and input.shape[0] != 1  # (n, p) or (n, 1): a block's own rows

    def block(start, stop, out):
        product(m1[start:stop], mat2, out=out)
        if alpha != 1:
            out *= out.dtype.type(alpha)
        if beta != 0:
            rows = input[start:stop] if by_rows else input
            out += rows if beta == 1 else rows * rows.dtype.type(beta)

    return block


def _addmm_epilogue_c_step(node):
    if not relu_only(node):
        return None
    types = [v.type for v in node.inputs]
    attrs = dict(node.attrs["producer_attrs"])
    same = operands_may_share(node, 1, 2)
    step = _addmm_step(types, node.outputs[0].type, attrs, relu=True, same_operand=same)
    return as_blocks(step, node.outputs[0].type)


def _onnx_addmm(e):
    c, a, b = e.inputs
    alpha, beta = float(e.attrs["alpha"]), float(e.attrs["beta"])
    dtype = e.out_types[0].dtype
    if dtype.is_floating_point and beta != 0:
        return e.node("Gemm", [a, b, c], alpha=alpha, beta=beta)
    out = e.node("MatMul", [a, b])
    if alpha != 1:
        out = e.node("Mul", [out, e.scalar(alpha, dtype)])
    if beta == 0:  # the input is not read (NaN in it stays out), as in the kernel
        return out
    if beta != 1:
        c = e.node("Mul", [c, e.scalar(beta, dtype)])
    return e.node("Add", [out, c])


_ADDMM = register(
    OpDef(
        name="addmm",
        autocast=Autocast.LOWER,
        onnx=_onnx_addmm,
        kind="linalg",
        infer=_addmm_infer,
        kernel=_addmm_kernel,
        fast=_addmm_fast,
        vjp=_addmm_vjp,
        cost=_addmm_cost,
        torch_flops=_torch_flops.addmm,
        save_inputs=(1, 2),
        c_step=lambda node: _addmm_step(
            [v.type for v in node.inputs],
            node.outputs[0].type,
            node.attrs,
            same_operand=operands_may_share(node, 1, 2),
        ),
        epilogue=row_block_rule(_addmm_rows, c_step=_addmm_epilogue_c_step),
        workspace=_addmm_workspace,
        complex=Complex.GRADIENT,
        doc="addmm(input, mat1, mat2; beta, alpha): beta * input + alpha * (mat1 @ mat2), "
        "input broadcasting to the product's shape (PyTorch's addmm)",
    )
)


def _addmm_items(input, mat1, mat2, beta, alpha):
    """addmm with a traced ``.item()`` beta or alpha (ops/_item_scalars.py): the product
    scaled by alpha's tensor, plus input scaled by beta's, input ignored where beta is 0."""
    product = apply(_ADDMM, input, mat1, mat2, beta=0, alpha=1)  # (its shapes checked)
    return _items.add_scaled("addmm", input, product, beta, alpha, input.dtype)


@export(method=True, inplace=True)
@autocasts(Autocast.LOWER)
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """PyTorch's addmm: ``beta * input + alpha * (mat1 @ mat2)`` for matrices mat1 (n, m) and
    mat2 (m, p) and an input that broadcasts to (n, p). With ``beta=0`` the input is ignored
    (NaN and infinities in it are not propagated). For integer tensors a float beta or alpha is
    truncated toward zero, as PyTorch's. A sparse ``mat1`` multiplies through
    ``ember.sparse.addmm``."""
    if isinstance(mat1, SparseTensor):
        return sparse_addmm(input, mat1, mat2, beta=beta, alpha=alpha)
    input, mat1, mat2 = promote(input, mat1, mat2)
    if _items.any_item(beta, alpha):
        return _addmm_items(input, mat1, mat2, beta, alpha)
    if input.dtype.is_complex:
        beta, alpha = (v if isinstance(v, complex) else float(v) for v in (beta, alpha))
    elif isinstance(beta, complex) or isinstance(alpha, complex):
        raise DTypeError(
            f"complex beta={beta!r} or alpha={alpha!r} for {input.dtype} tensors", op="addmm"
        )
    elif input.dtype.is_floating_point:
        beta, alpha = float(beta), float(alpha)
    else:  # (PyTorch truncates a float beta or alpha of an integer result toward zero)
        beta, alpha = (int(v) if isinstance(v, float) else v for v in (beta, alpha))
    return apply(_ADDMM, input, mat1, mat2, beta=beta, alpha=alpha)


# (PyTorch's addmm_ is a product into its input, not an elementwise kernel: it does not
# refuse operands overlapping the input, ops/_overlap.py)
addmm.overlap_ok = True
