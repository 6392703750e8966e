"""Binary arithmetic primitives: add, sub, mul, div, floor_div, mod, pow, maximum, minimum
(ops/elementwise.py has the unary ones and the promotion helpers both share; ``where`` and
``clip`` are in ops/where.py).

Primitives here are strict: they take operands of one dtype (shapes broadcast). The public
functions promote first (``promotion.promote``), so ``float32_tensor * 2.5`` stays float32.
"""

from __future__ import annotations

import numpy as np

from .. import _meta
from .. import dtypes as dt
from ..errors import KernelDTypeError
from ..types import TensorType
from . import _onnx
from . import _onnx_complex as cx
from . import _onnx_elementwise as ox
from . import api as E
from ._node_names import rename_node
from ._registry import OpDef, TensorBase, apply, export, register
from ._rules import Clamp, Complex, Identity
from ._saved_operands import refuses_backward
from ._unrecorded import direct
from ._util import broadcast_shapes, elementwise_cost, require_same_dtype
from .binary_alpha import _in_float32, _opmath_number, alpha_function
from .binary_kernels import check_divisor as _check_divisor  # noqa: F401 (ops/pointwise.py)
from .binary_kernels import (
    floor_div_kernel,
    mod_kernel,
    no_bool,
    pow_backward_refusal,
    pow_check,
    pow_kernel,
)
from .elementwise import _direct_inplace
from .promotion import promote

_new_tuple = tuple.__new__


def _binary_infer(name, bools=True):
    def infer(x, y):
        dtype = x.dtype
        if y.dtype is not dtype:
            require_same_dtype(name, x, y)  # (raises, naming both)
        if dtype is dt.bool_ and not bools:
            raise KernelDTypeError("not defined for bool tensors (as in PyTorch)", op=name)
        xs, ys = x.shape, y.shape
        # (TensorType without its Python-level constructor: every binary op call makes one)
        return _new_tuple(
            TensorType, (tuple(xs) if xs == ys else broadcast_shapes(name, xs, ys), dtype)
        )

    return infer


# PyTorch's node of a call it has no derivative formula for (ops/_saved_operands.py)
NOT_IMPLEMENTED = "NotImplemented"


def _binary(
    name,
    kernel,
    vjp,
    *,
    save=(0, 1),
    floating=False,
    flops=1,
    method=True,
    reflected=None,
    identity=None,
    c=None,
    doc="",
    check=None,
    bools=True,
    alpha=False,
    channel_terms=None,
    onnx=None,
    complex=None,
    grad_fn=None,
    clamp=None,
    overloads=None,
    backward_refusal=None,
    opmath_scalar=None,
):
    """``opmath_scalar``: PyTorch's node name of the op when a float16/bfloat16 tensor times
    (or over) a number is computed in float32, as PyTorch's CPU kernels do (`_opmath_number`);
    ``overloads``: PyTorch's node names of the op's (tensor, number), (tensor, tensor) and
    (number, tensor) overloads, which promotion makes one call here (NOT_IMPLEMENTED: one
    PyTorch has no derivative for, whose backward raises); ``backward_refusal(x, y)``: the
    message PyTorch's backward of the call raises with, or None;
    ``identity``: the constants that leave the other operand unchanged (an `Identity`), the
    unchanged, exactly (for transforms/simplify.py); ``c``: the op as a C expression over
    ``{0}`` and ``{1}`` for fused kernels (see `_unary`); ``check(x, y)``: refuses operands
    before promotion (what PyTorch refuses that promotion would hide, a bool tensor);
    ``alpha``: the function takes PyTorch's ``alpha=`` (``x + alpha * y``, see `_scale`)."""
    op = register(
        OpDef(
            name=name,
            kind="elementwise",
            infer=_binary_infer(name, bools),
            cached_infer=True,
            kernel=kernel,
            vjp=vjp,
            cost=elementwise_cost(flops),
            save_inputs=save,
            doc=doc,
            identity=identity,
            c=c,
            channel_terms=channel_terms,
            onnx=onnx,
            complex=complex,
            grad_fn=grad_fn,
            clamp=clamp,
        )
    )

    def fn(x, y):
        if check is not None:
            check(x, y)
        if _meta.active[0]:
            _meta.refuse_mixed(name, (x, y))
        if opmath_scalar is not None:
            slot = _opmath_number(x, y, commutes=opmath_scalar == "MulBackward0")
            if slot is not None:
                return rename_node(_in_float32(op, x, y, slot), opmath_scalar)
        return apply(op, *promote(x, y, floating=floating))

    if overloads is not None:
        plain = fn

        def fn(x, y):
            out = plain(x, y)
            overload = overloads[1 if isinstance(y, TensorBase) else 0]
            if not isinstance(x, TensorBase):
                overload = overloads[2]
            if overload == NOT_IMPLEMENTED:  # (PyTorch has no formula: backward refuses)
                # (PyTorch's aten name, read off its first overload's node: Remainder...)
                aten = overloads[0].removesuffix("Backward0").lower()
                message = f"derivative for aten::{aten} is not implemented"
                return refuses_backward(rename_node(out, overload), message)
            refusal = None if backward_refusal is None else backward_refusal(x, y)
            out = rename_node(out, overload)
            return out if refusal is None else refuses_backward(out, refusal)

    if alpha:
        fn = alpha_function(name, op, check, floating)

    fn.__name__ = fn.__qualname__ = name
    _direct_inplace(fn, kernel, floating)
    fn.__doc__ = doc or f"Elementwise {name} with broadcasting and type promotion."
    export(fn, name=name, method=method, inplace=True)
    return op


def _reduce_to(g, t):
    """Sum a broadcast gradient back to the shape of the input it belongs to."""
    return g if g.shape == t.shape else E.sum_to(g, t.shape)


def _times(g, y):
    """``g * y`` in a VJP: the product op's kernel without a dispatch where nothing is
    recorded and the call is one the op took before (ops/_unrecorded.py), else ``g * y``
    (promoting, as a hook's gradient of another dtype needs)."""
    out = direct(MUL, g, y)
    return g * y if out is None else out


def _over(g, y):
    """``g / y`` in a VJP, as `_times`."""
    out = direct(DIV, g, y)
    return g / y if out is None else out


def _add_vjp(c, g):
    nx, ny = c.needs_input_grad
    return (
        _reduce_to(g, c.in_types[0]) if nx else None,
        _reduce_to(g, c.in_types[1]) if ny else None,
    )


def _sub_vjp(c, g):
    nx, ny = c.needs_input_grad
    return (
        _reduce_to(g, c.in_types[0]) if nx else None,
        _reduce_to(-g, c.in_types[1]) if ny else None,
    )


def _conj(t, complex_: bool):
    """``conj(t)``, which is ``t`` itself for real values (asked of the recorded dtype: the
    multiplication's and division's gradients skip the call, most are real)."""
    return E.conj(t) if complex_ else t


def _mul_vjp(c, g):
    x, y = c.inputs
    nx, ny = c.needs_input_grad
    complex_ = c.in_types[0].dtype.is_complex
    return (
        _reduce_to(_times(g, _conj(y, complex_)), c.in_types[0]) if nx else None,
        _reduce_to(_times(g, _conj(x, complex_)), c.in_types[1]) if ny else None,
    )


def _div_vjp(c, g):
    x, y = c.inputs
    nx, ny = c.needs_input_grad
    complex_ = c.in_types[0].dtype.is_complex
    return (
        _reduce_to(_over(g, _conj(y, complex_)), c.in_types[0]) if nx else None,
        _reduce_to(-g * _conj(x / (y * y), complex_), c.in_types[1]) if ny else None,
    )


def _pow_vjp(c, g):
    x, y = c.inputs
    nx, ny = c.needs_input_grad
    if x.dtype.is_complex:
        return _complex_pow_vjp(c, g)
    gx = gy = None
    if nx:
        # 0 where y == 0 (x ** 0 is constant 1), also at x == 0 where y * x ** -1 is 0 * inf
        gx = _reduce_to(E.where(y == 0, 0, g * y * E.pow(x, y - 1)), c.in_types[0])
    if ny:
        # d/dy x**y = x**y log x; define it as 0 where x == 0 and y >= 0 (PyTorch's convention,
        # pow_backward_exponent's: g times the selected term, so a NaN or infinite g still
        # makes NaN there, and the product rounded as PyTorch's)
        zero_base = E.logical_and(x == 0, y >= 0)
        gy = _reduce_to(g * E.where(zero_base, 0, E.pow(x, y) * E.log(x)), c.in_types[1])
    return gx, gy


def _complex_pow_vjp(c, g):
    """PyTorch's pow_backward for complex operands: ``g * conj(y * x ** (y - 1))`` (0 where
    y == 0) and ``g * conj(x ** y * log x)`` (0 where x == 0 and real(y) >= 0)."""
    x, y = c.inputs
    nx, ny = c.needs_input_grad
    gx = gy = None
    if nx:
        gx = E.where(y == 0, 0, g * E.conj(y * E.pow(x, y - 1)))
        gx = _reduce_to(gx, c.in_types[0])
    if ny:
        zero_base = E.logical_and(x == 0, E.real(y) >= 0)
        safe = E.where(zero_base, 1, x)
        gy = g * E.where(zero_base, 0, E.conj(E.pow(safe, y) * E.log(safe)))
        gy = _reduce_to(gy, c.in_types[1])
    return gx, gy


def _minmax_vjp(pick):
    """PyTorch's convention: an operand that loses (``pick`` says the other wins) gets no
    gradient, a tie splits it evenly, and where either is NaN (no order) both get all of it."""

    def vjp(c, g):
        x, y = c.inputs
        nx, ny = c.needs_input_grad
        half = E.where(x == y, g * 0.5, g)
        return (
            _reduce_to(E.where(pick(y, x), 0, half), c.in_types[0]) if nx else None,
            _reduce_to(E.where(pick(x, y), 0, half), c.in_types[1]) if ny else None,
        )

    return vjp


def _mod_vjp(c, g):
    x, y = c.inputs
    nx, ny = c.needs_input_grad
    return (
        _reduce_to(g, c.in_types[0]) if nx else None,
        _reduce_to(-g * E.floor_div(x, y), c.in_types[1]) if ny else None,
    )


# x + (-0.0) is x for every x (x + 0.0 turns -0.0 into 0.0); x - 0.0, x * 1 and x / 1 are x
def _add_channel_terms(in_types, attrs):
    """``x + b`` with ``b`` one value per channel (dimension 1 of the result, as a convolution's
    bias is added): the weight unchanged, ``b`` added to the shift
    (transforms/fold_affine_inputs.py)."""
    for operand in (0, 1):
        x, b = in_types[operand], in_types[1 - operand]
        if len(x.shape) < 2 or len(b.shape) > len(x.shape) or b.dtype != x.dtype:
            continue
        c = x.shape[1]
        padded = (1,) * (len(x.shape) - len(b.shape)) + tuple(b.shape)
        if padded != (1, c) + (1,) * (len(x.shape) - 2):
            continue

        def fold(weight, shift, inputs, groups, axis, shift_shape, b_slot=1 - operand):
            b = E.reshape(inputs[b_slot], tuple(shift_shape))
            return weight, b if shift is None else shift + b

        return operand, fold
    return None


ADD = _binary(
    "add",
    np.add,
    _add_vjp,
    save=(),
    identity=Identity(left=-0.0, right=-0.0),
    c="({0} + {1})",
    alpha=True,
    channel_terms=_add_channel_terms,
    onnx=cx.pairs(ox.onnx_logic("Add", "Or"), cx.binary("Add")),
    complex=Complex.GRADIENT,
    doc="add(input, other, *, alpha=1): input + alpha * other, with broadcasting and type "
    "promotion.",
)
_binary(
    "sub",
    np.subtract,
    _sub_vjp,
    save=(),
    identity=Identity(right=0.0),
    c="({0} - {1})",
    alpha=True,
    onnx=cx.pairs(ox.onnx_logic("Sub", None), cx.binary("Sub")),
    complex=Complex.GRADIENT,
    doc="sub(input, other, *, alpha=1): input - alpha * other, with broadcasting and type "
    "promotion (bool tensors refused, as in PyTorch).",
    check=no_bool(
        "sub",
        "subtraction with a bool tensor is not supported (as in PyTorch); "
        "use ~ or logical_not() to invert a mask, logical_xor() for two",
    ),
)
MUL = _binary(
    "mul",
    np.multiply,
    _mul_vjp,
    identity=Identity(left=1, right=1),
    c="({0} * {1})",
    onnx=cx.pairs(ox.onnx_logic("Mul", "And"), cx.binary("Mul")),
    complex=Complex.GRADIENT,
    opmath_scalar="MulBackward0",
)
DIV = _binary(
    "div",
    np.true_divide,
    _div_vjp,
    floating=True,
    method=("div", "true_divide"),
    identity=Identity(right=1),
    c="({0} / {1})",
    onnx=cx.pairs(_onnx.node("Div"), cx.binary("Div")),
    complex=Complex.GRADIENT,
    opmath_scalar="DivBackward0",
)
_binary(
    "floor_div",
    floor_div_kernel,
    lambda c, g: (
        E.zeros_like(c.inputs[0]) if c.needs_input_grad[0] else None,
        E.zeros_like(c.inputs[1]) if c.needs_input_grad[1] else None,
    ),
    method=("floor_div", "floor_divide"),
    bools=False,
    onnx=_onnx.composite(ox.onnx_floor_div),
)
_binary(
    "mod",
    mod_kernel,
    _mod_vjp,
    method=("mod", "remainder"),
    bools=False,
    onnx=_onnx.composite(ox.onnx_mod),
    # (PyTorch's remainder of a number by a tensor has no gradient formula at all)
    grad_fn="RemainderBackward0",
    overloads=("RemainderBackward0", "RemainderBackward1", NOT_IMPLEMENTED),
)
_binary(
    "pow",
    pow_kernel,
    _pow_vjp,
    overloads=("PowBackward0", "PowBackward1", "PowBackward2"),
    backward_refusal=pow_backward_refusal,
    check=pow_check,
    onnx=_onnx.composite(ox.onnx_pow),
    complex=Complex.GRADIENT,
)


# NumPy propagates a NaN from either side, and of two equal values (-0.0 and 0.0) keeps the
# second
def _bound_rule(lower: bool):
    """The ``clamp`` rule of maximum (``lower``) and minimum with one constant operand: the
    C expression gives its second operand where the two compare equal, so a constant second
    bound takes ties, a constant first one leaves them to x."""
    inf = float("inf")

    def rule(attrs, constants):
        if len(constants) != 2 or (constants[0] is None) == (constants[1] is None):
            return None
        bound = constants[1] if constants[0] is None else constants[0]
        if not isinstance(bound, (int, float)) or isinstance(bound, bool) or bound != bound:
            return None
        ties = constants[1] is not None
        bound = float(bound)
        return Clamp(bound, inf, ties, False) if lower else Clamp(-inf, bound, False, ties)

    return rule


_binary(
    "maximum",
    np.maximum,
    _minmax_vjp(lambda x, y: x > y),
    clamp=_bound_rule(lower=True),
    c="((({0} > {1}) | ({0} != {0})) ? {0} : {1})",
    onnx=ox.onnx_extreme("Max", "Or"),
    doc="Elementwise maximum, NaN propagating, with broadcasting and type promotion; y may be a "
    "Python scalar (a weak operand; torch.maximum takes tensors only).",
)
_binary(
    "minimum",
    np.minimum,
    _minmax_vjp(lambda x, y: x < y),
    doc="Elementwise minimum, NaN propagating, with broadcasting and type promotion; y may be a "
    "Python scalar (a weak operand; torch.minimum takes tensors only).",
    c="((({0} < {1}) | ({0} != {0})) ? {0} : {1})",
    onnx=ox.onnx_extreme("Min", "And"),
    clamp=_bound_rule(lower=False),
)
