"""Matrix products: the ``matmul`` primitive (batched, broadcasting batch dimensions, BLAS
through NumPy) and ``linear`` (``F.linear``); their composites (mm, bmm, mv, dot, outer,
F.bilinear) are in ops/products.py. Both take an elementwise epilogue computed on blocks of
rows (ops/_row_blocks.py).

The primitive takes operands of at least 2 dimensions and one dtype; the public `matmul` adds
PyTorch's 1-D rules (a 1-D left operand is a row, a 1-D right operand a column, and the added
dimension is removed again) with reshapes, so the primitive's shape rule and VJP stay simple.

Speed matters here (matmul dominates MLP training): the kernel never upcasts (float32 stays
float32), passes transposed views to BLAS as they are (no copies), copies only layouts BLAS
cannot read, and folds a batched left operand times a 2-D right operand into one large GEMM.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, KernelDTypeError, ShapeError
from ..types import TensorType
from . import _batching, _torch_flops
from . import api as E
from ._autocast import Autocast, autocasts
from ._matmul_kernels import (
    batch_copies,
    half_gemm_runs,
    half_plus_bias,
    matmul_fast,
    matmul_kernel,
    packed_linear,
    product_workspace,
    small_linear,
)
from ._node_names import rename_node
from ._registry import REGISTRY, Cost, OpDef, TensorBase, apply, export, register
from ._row_blocks import (
    as_blocks,
    chained_c_step,
    frozen_operand,
    gemm,
    operands_may_share,
    relu_only,
    row_block_rule,
    rows_of,
)
from ._rules import ChannelWeights, Complex
from ._unrecorded import direct, direct_product
from ._util import (
    broadcast_shapes,
    fmt_shape,
    half_precision,
    io_bytes,
    numel,
    require_same_dtype,
    value_bytes,
)
from .promotion import to_tensor
from .sparse_tensor import SparseTensor
from .sparse_tensor import matmul as sparse_matmul

# ----------------------------------------------------------------------------------- kernel
# (ops/_matmul_kernels.py: NumPy's product and ember's GEMM behind one layout-aware wrapper)


def _matmul_accepts_out(node, compiled: bool) -> bool:
    """The kernel writes into ``out=`` (plan/arena.py) for float operands of one dtype."""
    return (
        not compiled
        and all(v.type.dtype.np in (np.float32, np.float64) for v in node.inputs)
        and len({v.type.dtype for v in node.inputs + node.outputs}) == 1
    )


def _matmul_workspace(node, layouts) -> int:
    """`matmul_kernel`'s temporaries (`product_workspace`); `linear` runs the same kernel on
    ``x`` and ``weight.T`` (its bias is added in place); beside them, the contiguous copy of
    a strided batched first operand times a matrix (ops/_matmul_kernels.py folds it into one
    product), in float32 where the operands are half precision."""
    a, b = node.inputs[0], node.inputs[1]
    workspace = product_workspace(a, b, node.outputs[0])
    if a.type.ndim > 2 and b.type.ndim == 2 and not layouts.contiguous(a):
        copy = 2 if half_precision(a) and not half_gemm_runs(a) else 1  # (float32, or 16 bits in C)
        workspace += value_bytes(a) * copy
    # (a batch of matrices not one stride apart, which ember's GEMM copies together)
    return workspace + batch_copies(a, b, node.outputs[0], layouts.strides_of)


# ------------------------------------------------------------------------------- primitive


def _mismatch(a_shape, b_shape, why: str) -> ShapeError:
    return ShapeError(
        f"cannot multiply shapes {fmt_shape(a_shape)} and {fmt_shape(b_shape)}: {why}",
        op="matmul",
    )


def _matmul_infer(a, b):
    # (each ``.shape`` of an eager tensor is a new Size: read once, as plain tuples; the rule
    # runs before every eager product)
    sa, sb = tuple(a.shape), tuple(b.shape)
    if len(sa) < 2 or len(sb) < 2:
        raise _mismatch(sa, sb, "the primitive takes operands of at least 2 dimensions")
    dtype = require_same_dtype("matmul", a, b)
    if dtype is dt.bool_:
        raise KernelDTypeError(
            "matmul is not defined for bool tensors; cast them first", op="matmul"
        )
    if sa[-1] != sb[-2]:
        raise _mismatch(
            sa,
            sb,
            f"the inner dimensions differ ({sa[-1]} vs {sb[-2]}); the last dimension "
            "of the first must equal the second-to-last of the second",
        )
    if len(sa) == 2 and len(sb) == 2:
        return TensorType((sa[0], sb[1]), dtype)
    try:
        batch = broadcast_shapes("matmul", sa[:-2], sb[:-2])
    except ShapeError:
        raise _mismatch(
            sa,
            sb,
            f"the batch dimensions {fmt_shape(sa[:-2])} and {fmt_shape(sb[:-2])} do not broadcast",
        ) from None
    return TensorType(tuple(batch) + (sa[-2], sb[-1]), dtype)


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


def _vjp_product(x, y, tx: bool = False, ty: bool = False):
    """``matmul`` of matrices ``x`` (transposed where ``tx``) and ``y`` (``ty``) in a VJP:
    without dispatches where the backward records nothing (ops/_unrecorded.py)."""
    out = direct_product(MATMUL.run, x, y, tx, ty)
    if out is not None:
        return out
    return matmul(E.transpose(x, 0, 1) if tx else x, E.transpose(y, 0, 1) if ty else y)


def _rows(t, width: int, rows: int | None = None):
    """``t``'s leading dimensions folded into ``rows`` rows of ``width`` (-1: as many as
    there are), undispatched where nothing is recorded (ops/_unrecorded.py)."""
    data = getattr(t, "_data", None)
    if type(data) is np.ndarray and (rows is not None or width):
        shape = (data.size // width if rows is None else rows, width)
        out = direct(REGISTRY["reshape"], t, shape=shape)
        if out is not None:
            return out
    return E.reshape(t, (-1 if rows is None else rows, width))


def _swap_last(t):
    """``t`` with its last two dimensions swapped (a view), as `_rows`."""
    n = len(getattr(t, "_data", t).shape)
    out = direct(REGISTRY["permute"], t, dims=(*range(n - 2), n - 1, n - 2)) if n > 1 else None
    return E.transpose(t, -2, -1) if out is None else out


def _batched(x, y):
    """``matmul(x, y)`` of operands of two dimensions or more, as `_rows`."""
    out = direct(MATMUL, x, y)
    return matmul(x, y) if out is None else out


def _matmul_vjp(c, g):
    a, b = c.inputs
    if a.dtype.is_complex:  # (the real path's products of the conjugates)
        a, b = E.conj(a), E.conj(b)
    need_a, need_b = c.needs_input_grad
    ga = gb = None
    if need_a:
        if _column_major(a) and b.ndim == 2:
            ga = E.transpose(_vjp_product(b, g, ty=True), 0, 1)
        elif g.ndim == 2 and b.ndim == 2:  # (a is a matrix too: nothing to sum)
            ga = _vjp_product(g, b, ty=True)
        else:
            ga = E.sum_to(_batched(g, _swap_last(b)), c.in_types[0].shape)
    if need_b and b.ndim == 2:
        if a.ndim > 2:  # summing over the batch is one GEMM of the folded operands
            # (the rows counted: -1 is ambiguous where a has no columns)
            rows = numel(tuple(a.shape[:-1]))
            a, g = _rows(a, a.shape[-1], rows), _rows(g, g.shape[-1], rows)
        if _column_major(b):
            gb = E.transpose(_vjp_product(g, a, tx=True), 0, 1)
        else:
            gb = _vjp_product(a, g, tx=True)
    elif need_b:
        gb = E.sum_to(_batched(_swap_last(a), g), c.in_types[1].shape)
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
    same, frozen = operands_may_share(node), frozen_operand(node)
    return csteps.linear_step(
        a, b, None, node.outputs[0].type, transposed=False, same_operand=same, frozen=frozen
    )


def _matmul_rows(arrays, **attrs):
    a, b = arrays
    a2, product = rows_of(a), gemm()
    return lambda start, stop, out: product(a2[start:stop], b, out=out)


def _matmul_epilogue_c_step(node):
    from ..kernels import csteps

    a, b = (v.type for v in node.inputs[:2])
    if len(b.shape) != 2:
        return None
    same, frozen = operands_may_share(node), frozen_operand(node)
    if relu_only(node):
        out = node.outputs[0].type
        step = csteps.linear_step(
            a, b, None, out, transposed=False, relu=True, same_operand=same, frozen=frozen
        )
        return as_blocks(step, out)
    return chained_c_step(
        node,
        lambda out: csteps.linear_step(
            a, b, None, out, transposed=False, same_operand=same, frozen=frozen
        ),
    )


# an elementwise reader runs on blocks of rows (ops/_row_blocks.py), for a product by a matrix
# (a weight): a's leading dimensions are the rows
_MATMUL_EPILOGUE = row_block_rule(
    _matmul_rows,
    accepts=lambda node: len(node.inputs[1].shape) == 2 and len(node.inputs[0].shape) >= 2,
    c_step=_matmul_epilogue_c_step,
)


def _onnx_matmul(e):
    if e.in_types[0].dtype is dt.bool_:
        e.unsupported("on bool tensors")
    return e.node("MatMul", e.inputs)


MATMUL = register(
    OpDef(
        name="matmul",
        grad_fn=lambda attrs, in_types: (
            "MmBackward0"
            if len(in_types[0].shape) == len(in_types[1].shape) == 2
            # (PyTorch folds batched operands into one product, viewed back: UnsafeView)
            else "UnsafeViewBackward0"
        ),
        complex=Complex.GRADIENT,
        autocast=Autocast.LOWER,
        onnx=_onnx_matmul,
        kind="linalg",
        infer=_matmul_infer,
        cached_infer=True,
        kernel=matmul_kernel,
        fast=matmul_fast,
        vjp=_matmul_vjp,
        cost=_matmul_cost,
        torch_flops=_torch_flops.matmul,
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
@autocasts(Autocast.LOWER)
def matmul(a, b):
    """Matrix product with PyTorch's rules: 1-D x 1-D is a dot product; a 1-D operand is a row
    (left) or a column (right) whose added dimension is removed from the result; higher
    dimensions are batches and broadcast. A sparse ``a`` (2-D) multiplies a dense matrix or
    vector through ``ember.sparse.mm``; a sparse ``b`` is multiplied as ``(b.T @ a.T).T``."""
    if isinstance(a, SparseTensor):
        return sparse_matmul(a, b)
    if isinstance(b, SparseTensor):  # (b.T @ a.T).T
        return b.__rmatmul__(a)
    # no promotion: PyTorch multiplies operands of one dtype only (float32 @ float64 raises),
    # which the primitive's rule checks
    a, b = to_tensor(a), to_tensor(b)
    if a.ndim >= 2 and b.ndim >= 2:
        return apply(MATMUL, a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise _mismatch(a.shape, b.shape, "both operands need at least 1 dimension")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        raise _mismatch(a.shape, b.shape, f"the inner dimensions differ ({k_a} vs {k_b})")
    if (b.ndim == 1 or a.ndim == 1 and b.ndim > 2) and _torch_flops.REGIONS.watchers:
        # (PyTorch runs these as mv or dot, which its FlopCounterMode does not count)
        with _torch_flops.counted_as(None):
            return _vector_matmul(a, b, k_a, k_b)
    return _vector_matmul(a, b, k_a, k_b)


def _vector_matmul(a, b, k_a, k_b):
    """`matmul` with a 1-D operand: its row or column as a matrix, the dimension removed."""
    if a.ndim == 1 and b.ndim == 1:
        out = apply(MATMUL, E.reshape(a, (1, k_a)), E.reshape(b, (k_b, 1)))
        return rename_node(E.reshape(out, ()), "DotBackward0")
    if a.ndim == 1:
        out = apply(MATMUL, E.reshape(a, (1, k_a)), b)
        out = E.reshape(out, tuple(out.shape[:-2]) + (out.shape[-1],))
        return rename_node(out, "SqueezeBackward4" if b.ndim == 2 else "UnsafeViewBackward0")
    out = apply(MATMUL, a, E.reshape(b, (k_b, 1)))
    out = E.reshape(out, tuple(out.shape[:-1]))
    return rename_node(out, "MvBackward0" if a.ndim == 2 else "UnsafeViewBackward0")


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
    sx, sw = tuple(x.shape), tuple(weight.shape)  # (read once: see _matmul_infer)
    if len(sw) != 2 or not sx or sx[-1] != sw[1]:
        raise ShapeError(
            f"input of shape {fmt_shape(sx)} does not fit a weight of shape "
            f"{fmt_shape(sw)}: the weight is (out_features, in_features) and the "
            "input's last dimension must be in_features",
            op="linear",
        )
    if bias is not None and tuple(bias.shape) not in ((sw[0],), (1,), ()):
        raise ShapeError(
            f"bias of shape {fmt_shape(bias.shape)} does not fit a weight of shape "
            f"{fmt_shape(sw)}; it must be ({sw[0]},)",
            op="linear",
        )
    return TensorType(sx[:-1] + (sw[0],), dtype)


def _linear(x, weight, bias, matmul_impl) -> np.ndarray:
    if bias is not None and half_precision(x):  # PyTorch's: one rounding, bias included
        return half_plus_bias(x, weight.T, bias, None)
    out = matmul_impl(x, weight.T)  # BLAS reads the transposed weight in place
    if bias is not None:
        out += bias  # out is fresh: add in place, no temporary
    return out


def _linear_kernel(x, weight, bias=None):
    return _linear(x, weight, bias, matmul_kernel)


def _linear_fast(x, weight, bias=None):
    out = small_linear(x, weight, bias)  # (a layer at batch one: NumPy's product, directly)
    if out is not None:
        return out
    if x.dtype in (dt.float16.np, dt.bfloat16.np) and x.dtype == weight.dtype:
        # half precision: the bias added in the product's store (kernels/chgemm.py)
        return matmul_fast(x, weight.T, None, bias)
    out = packed_linear(x, weight, bias)  # (a weight's pack: matmul's route, fewer layers)
    return _linear(x, weight, bias, matmul_fast) if out is None else out


def _linear_vjp(c, g):
    x, weight = c.inputs[:2]
    if c.in_types[0].dtype.is_complex:  # (the real path's products of the conjugates)
        x, weight = E.conj(x), E.conj(weight)
    need = c.needs_input_grad
    out_features, in_features = c.in_types[1].shape
    gx = None
    if need[0]:
        # (a sequence's rows, (B, T, out) @ (out, in): the product op by its kernel, undispatched
        # where nothing is recorded, as the 2-D call's; a 1-D call is matmul's vector product)
        gx = _vjp_product(g, weight) if g.ndim == 2 else None
        gx = gx if gx is not None else _batched(g, weight) if g.ndim > 2 else matmul(g, weight)
    gw = None
    if need[1]:
        # (rows of a 2-D call as they are: a reshape is a recorded op even to its own shape)
        g2 = g if g.ndim == 2 else _rows(g, out_features)
        x2 = x if x.ndim == 2 else _rows(x, in_features)
        gw = _vjp_product(g2, x2, tx=True)
    grads = (gx, gw)
    if len(need) == 3:
        gb = None
        if need[2]:  # one reduction over every leading dimension, then fit the bias's shape
            if g.ndim > 1 and len(c.in_types[2].shape) == 1:
                # (nothing recorded, a signature the sum took before: its kernel, undispatched)
                gb = direct(REGISTRY["sum"], g, axes=tuple(range(g.ndim - 1)), keepdims=False)
            if gb is None:
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
    out, same, frozen = node.outputs[0].type, operands_may_share(node), frozen_operand(node)
    return csteps.linear_step(
        x, w, *(bias or [None]), out, transposed=True, same_operand=same, frozen=frozen
    )


def _linear_rows(arrays, **attrs):
    x, weight = arrays[:2]
    bias = arrays[2] if len(arrays) == 3 else None
    x2, product = rows_of(x), gemm()
    weight = weight.T  # (K, N): BLAS reads the transpose in place

    def block(start, stop, out):
        product(x2[start:stop], weight, out=out)
        if bias is not None:
            out += bias

    return block


def _linear_epilogue_c_step(node):
    from ..kernels import csteps

    if not relu_only(node):
        x, w, *bias = (v.type for v in node.inputs[: node.attrs["n_producer"]])
        bias = bias[0] if bias else None
        return chained_c_step(
            node,
            lambda out: csteps.linear_step(
                x,
                w,
                bias,
                out,
                transposed=True,
                same_operand=operands_may_share(node),
                frozen=frozen_operand(node),
            ),
        )
    x, w, *bias = (v.type for v in node.inputs)
    out, same, frozen = node.outputs[0].type, operands_may_share(node), frozen_operand(node)
    step = csteps.linear_step(
        x, w, *(bias or [None]), out, transposed=True, relu=True, same_operand=same, frozen=frozen
    )
    return as_blocks(step, out)


def _linear_channel_fold(in_types, attrs):
    """On a matrix (N, in) the result's dimension 1 runs over the weight's rows; the shift goes
    into the bias operand (which a bias-free call gains)."""
    if len(in_types[0].shape) != 2:
        return None
    return ChannelWeights(weight=1, bias=2)


def _linear_node_name(attrs, in_types) -> str:
    # PyTorch's linear is addmm (with a bias) or mm of the input as a matrix, viewed back to
    # its batch dimensions when it has several
    bias = len(in_types) == 3
    if len(in_types[0].shape) == 2:
        return "AddmmBackward0" if bias else "MmBackward0"
    return "ViewBackward0" if bias else "UnsafeViewBackward0"


def _onnx_linear(e):
    x, w, *bias = e.inputs
    if len(e.in_types[0].shape) == 2 and e.in_types[0].dtype.is_floating_point:
        return e.node("Gemm", [x, w, *bias], transB=1)  # (the weight read transposed)
    out = e.node("MatMul", [x, e.node("Transpose", [w], perm=[1, 0])])
    return e.node("Add", [out, bias[0]]) if bias else out


_LINEAR = register(
    OpDef(
        name="linear",
        grad_fn=_linear_node_name,
        autocast=Autocast.LOWER,
        onnx=_onnx_linear,
        kind="linalg",
        infer=_linear_infer,
        cached_infer=True,
        kernel=_linear_kernel,
        fast=_linear_fast,
        vjp=_linear_vjp,
        cost=_linear_cost,
        torch_flops=_torch_flops.linear,
        save_inputs=(0, 1),
        # workspace: the matmul kernel's, on x and weight.T
        batch=_batching.linear_rule,
        c_step=_linear_c_step,
        channel_fold=_linear_channel_fold,
        epilogue=row_block_rule(_linear_rows, c_step=_linear_epilogue_c_step),
        workspace=_matmul_workspace,
        complex=Complex.GRADIENT,  # (NumPy's product; the fast rule declines complex)
        doc="linear(x, weight[, bias]): x @ weight.T (+ bias), weight of shape (out, in); "
        "PyTorch's F.linear / addmm",
    )
)


@export(functional=True, toplevel=False)
@autocasts(Autocast.LOWER)
def linear(x, weight, bias=None):
    """PyTorch's F.linear: ``x @ weight.T + bias`` with weight of shape (out, in)."""
    operands = (x, weight) if bias is None else (x, weight, bias)
    for t in operands:  # (every linear layer's call passes here: no generator)
        if not isinstance(t, TensorBase):
            operands = tuple(to_tensor(t) for t in operands)
            break
    # no promotion: PyTorch's linear takes operands of one dtype (the rule checks)
    x, weight = operands[0], operands[1]
    if weight.ndim == 1:  # a single output feature, which PyTorch drops from the shape
        out = matmul(x, weight)
        return out if bias is None else out + operands[2]
    return apply(_LINEAR, *operands)
