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
from ..errors import DivisionByZeroError, DTypeError, KernelDTypeError
from ..types import TensorType
from . import _item_scalars as _items
from . import _onnx
from . import _onnx_complex as cx
from . import _onnx_elementwise as ox
from . import api as E
from ._created_nan import positive_created_nan
from ._node_names import rename_node
from ._registry import OpDef, TensorBase, apply, constant, export, register
from ._rules import Clamp, Complex, Identity
from ._saved_operands import refuses_backward
from ._unrecorded import direct
from ._util import broadcast_shapes, check_fill_value, elementwise_cost, require_same_dtype
from .add_alpha import ADD_ALPHA
from .elementwise import _direct_inplace
from .promotion import _is_tensor, promote, scalar_array

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

        def fn(x, y, *, alpha=1):
            if check is not None:
                check(x, y)
            if _meta.active[0]:
                _meta.refuse_mixed(name, (x, y))
            if type(alpha) in (int, float) and alpha == 1:  # the common call: nothing to scale
                return apply(op, *promote(x, y, floating=floating))
            x, y = promote(x, y, floating=floating)
            real = isinstance(alpha, _REAL_NUMBERS) and not isinstance(alpha, (bool, np.bool_))
            if real and x.dtype.is_floating_point:
                # one rounding, PyTorch's fused multiply-add (ops/add_alpha.py)
                check_fill_value(name, alpha, x.dtype)
                fused = apply(ADD_ALPHA, x, y, alpha=float(alpha if name == "add" else -alpha))
                return rename_node(fused, "AddBackward0" if name == "add" else "SubBackward0")
            return apply(op, x, _scale(name, y, alpha, x.dtype))

    fn.__name__ = fn.__qualname__ = name
    _direct_inplace(fn, kernel, floating)
    fn.__doc__ = doc or f"Elementwise {name} with broadcasting and type promotion."
    export(fn, name=name, method=method, inplace=True)
    return op


_REDUCED_FLOATS = (dt.float16, dt.bfloat16)
# an alpha PyTorch reads as a real number (NumPy's scalars too; not a bool: `_scale`)
_REAL_NUMBERS = (int, float, np.integer, np.floating)


def _opmath_number(x, y, commutes: bool):
    """Which operand of ``x op y`` is the number PyTorch's CPU mul and div apply in float32 to
    a float16/bfloat16 tensor (0 or 1), or None. Their kernels read a scalar second operand
    (a Python number, or a 0-d float32/float64 tensor the half tensor's dtype wins over) as
    its float32 value and round the float32 result once, so ``h * 1e30`` is inf (not 0 * inf
    = NaN at zeros) and ``h * 0.1`` differs from ``h * half(0.1)``. A number the half dtype
    holds exactly gives the same bits either way and takes the one-node route. A first
    operand is a number only as ``2.5 * h`` makes it (a Python number, mul's reflection,
    which PyTorch runs as ``h.mul(2.5)``)."""
    kind = type(y)
    if kind is int or kind is float:  # (checked first: mul and div are hot)
        t, number, slot = x, y, 1
    elif commutes and (type(x) is int or type(x) is float):
        t, number, slot = y, x, 0
    elif isinstance(y, TensorBase) and isinstance(x, TensorBase) and y.ndim == 0 < x.ndim:
        if x.dtype in _REDUCED_FLOATS and y.dtype in (dt.float32, dt.float64):
            return 1
        return None
    else:
        return None
    if not isinstance(t, TensorBase) or t.dtype not in _REDUCED_FLOATS:
        return None
    return None if dt.holds_exactly(t.dtype, number) else slot


def _in_float32(op, x, y, slot):
    """``x op y`` with the half tensor widened to float32 and the number a float32, rounded
    back once."""
    operands = [x, y]
    half = operands[1 - slot]
    number = operands[slot]
    operands[1 - slot] = E.cast(half, dt.float32)
    if isinstance(number, TensorBase):
        operands[slot] = number if number.dtype is dt.float32 else E.cast(number, dt.float32)
    else:
        operands[slot] = constant(np.asarray(number, np.float32))
    return E.cast(apply(op, *operands), half.dtype)


def _scale(name, y, alpha, dtype):
    """``alpha * y`` for add's and sub's ``alpha=``, by PyTorch's rules: alpha takes the result
    dtype (a float alpha with integer tensors, a bool alpha with non-bool ones are refused; a
    bool result takes any alpha as its truth value), and alpha 1 leaves y as it is. A traced
    ``.item()`` alpha multiplies by its graph value (ops/_item_scalars.py)."""
    if _items.is_item(alpha):
        if dtype.is_bool:
            return E.logical_and(y, _items.scalar(alpha, dtype, name, "alpha"))
        return y * _items.scalar(alpha, dtype, name, "alpha")
    if isinstance(alpha, complex) and not dtype.is_complex:
        raise DTypeError(
            f"for non-complex input tensors ({dtype}), argument alpha must not be a complex "
            f"number (got {alpha!r})",
            op=name,
        )
    if isinstance(alpha, bool) and not dtype.is_bool:
        raise DTypeError(f"a bool alpha is only supported for bool results, got {dtype}", op=name)
    if isinstance(alpha, float) and not (dtype.is_floating_point or dtype.is_complex):
        raise DTypeError(
            f"for {dtype} tensors, alpha must not be a floating point number (got {alpha!r})",
            op=name,
        )
    if dtype.is_bool:
        return y if alpha else E.zeros_like(y)
    check_fill_value(name, alpha, dtype)  # (PyTorch converts alpha to the result's dtype)
    if alpha == 1:
        return y
    return y * constant(scalar_array(alpha, dtype))


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


def _check_divisor(name, x, y):
    """Integer division by zero has no value: NumPy's 0 would pass silently (PyTorch raises)."""
    # (an empty result divides nothing, as in PyTorch)
    if x.dtype.kind in "iub" and np.broadcast(x, y).size and not np.all(y):
        raise DivisionByZeroError("integer division by zero", op=name)


def _floor_div_kernel(x, y):
    _check_divisor("floor_div", x, y)
    return np.floor_divide(x, y)


def _mod_kernel(x, y):
    _check_divisor("mod", x, y)
    if x.dtype.kind != "f":
        return np.mod(x, y)
    # PyTorch's formula: fmod, moved by y where the signs differ; an exact zero keeps x's
    # sign (NumPy's mod gives it y's), which 1 / result and copysign can see
    with np.errstate(invalid="ignore"):
        out = np.fmod(x, y)
        fix = (out != 0) & ((y < 0) != (out < 0))
    return np.where(fix, out + y, out).astype(out.dtype, copy=False)


def _no_bool(name, message):
    """Refuses a bool operand, a tensor or a Python bool (PyTorch's subtraction)."""

    def check(x, y):
        for v in (x, y):  # (every subtraction passes here: no generator)
            if type(v) is bool or (_is_tensor(v) and v.dtype is dt.bool_):
                raise DTypeError(message, op=name)

    return check


def _pow_backward_refusal(x, y):
    """PyTorch's pow backward computes ``exponent - 1``, which a bool exponent tensor refuses
    (only when backward runs: the forward is allowed)."""
    if _is_tensor(y) and y.dtype is dt.bool_ and _is_tensor(x):
        return (
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )
    return None


def _pow_check(x, y):
    if (
        _is_tensor(y)
        and y.dtype is dt.bool_
        and (isinstance(x, bool) or (_is_tensor(x) and x.dtype is dt.bool_))
    ):
        raise KernelDTypeError("not defined for a bool exponent tensor of a bool", op="pow")
    if (
        type(y) is int
        and y < 0
        and _is_tensor(x)
        and not (x.dtype.is_floating_point or x.dtype.is_complex)
    ):
        raise DTypeError("integers to negative integer powers are not allowed", op="pow")
    if type(y) is int and _is_tensor(x) and x.dtype.is_integer:
        # PyTorch converts the exponent to the tensor's integer type, checking its range (where
        # the other arithmetic ops wrap a Python int)
        info = np.iinfo(x.dtype.np)
        if not info.min <= y <= info.max:
            raise DTypeError(
                f"the exponent {y} cannot be converted to the base's type {x.dtype.name} "
                f"without overflow (shape {tuple(x.shape)})",
                op="pow",
            )


# PyTorch's CPU pow of a float32/float64 tensor by a scalar exponent computes these exponents
# with the arithmetic below, not std::pow (ATen's pow_tensor_scalar_optimized_kernel): x ** 3
# is x * x * x, rounded twice, and about 60 times faster than NumPy's powf per element
_SCALAR_POWERS = {
    2.0: lambda x: x * x,
    3.0: lambda x: x * x * x,
    0.5: positive_created_nan(np.sqrt),
    -0.5: lambda x: np.divide(1, np.sqrt(x), dtype=x.dtype),
    -1.0: lambda x: np.divide(1, x, dtype=x.dtype),
    -2.0: lambda x: np.divide(1, x * x, dtype=x.dtype),
}
_WIDE_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _pow_kernel(x, y):
    """np.power; a float32/float64 ``x`` to a 0-d exponent 2, 3, 0.5, -0.5, -1 or -2 (a
    Python number's constant) by PyTorch's arithmetic for it (`_SCALAR_POWERS`: sqrt at 0.5,
    so -0.0 ** 0.5 is -0.0, -inf ** 0.5 NaN, -2 ** 0.5 +NaN and -2 ** -0.5 -NaN, as PyTorch
    gives: ops/_created_nan.py); an integer to a negative integer power (a tensor exponent) is
    PyTorch's truncated result, 1 / x rounded toward zero: 1 for 1, +-1 for -1, else 0 (NumPy
    refuses)."""
    if y.ndim == 0 and x.dtype in _WIDE_FLOATS:
        special = _SCALAR_POWERS.get(float(y))
        if special is not None:
            return special(x)
    if x.dtype.kind in "iu" and (y < 0).any():
        negative = y < 0
        power = np.power(x, np.where(negative, 0, y))
        odd = np.where(np.remainder(y, 2) == 1, -1, 1).astype(x.dtype)
        inverse = np.where(x == 1, 1, np.where(x == -1, odd, 0)).astype(x.dtype)
        return np.where(negative, inverse, power)
    if x.dtype == np.bool_:  # (NumPy's bool power is int8)
        return np.power(x, y).astype(np.bool_)
    # (elsewhere PyTorch's sign for a NaN it creates depends on the element's position: its
    # vector loop's +NaN, its scalar tail's -NaN, NumPy's everywhere)
    return np.power(x, y)


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
    check=_no_bool(
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
    _floor_div_kernel,
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
    _mod_kernel,
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
    _pow_kernel,
    _pow_vjp,
    overloads=("PowBackward0", "PowBackward1", "PowBackward2"),
    backward_refusal=_pow_backward_refusal,
    check=_pow_check,
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
