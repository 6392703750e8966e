"""The scalar arguments of the binary arithmetic functions: PyTorch's ``alpha=`` of add and
sub (the public function, `alpha_function`, and its direct in-place route, `alpha_inplace`),
and the numbers PyTorch's CPU mul and div apply in float32 to a half-precision tensor
(`_opmath_number`, `_in_float32`). ops/binary.py defines the ops and their public functions
with them.

``add(x, y, alpha=a)`` on floating tensors is one op, ops/add_alpha.py's fused multiply-add
(one rounding, as PyTorch's kernel); its eager kernel is one direct C call
(kernels/cadd_alpha.py) on the operands eager calls pass, and an optimizer's
``p.add_(g, alpha=-lr)`` without gradients writes into ``p`` in that same call."""

from __future__ import annotations

import numpy as np

from .. import _meta
from .. import dtypes as dt
from ..errors import DTypeError
from ..kernels import cadd_alpha
from . import _item_scalars as _items
from . import api as E
from ._node_names import rename_node
from ._registry import TensorBase, _state, apply, constant
from ._util import check_fill_value
from .add_alpha import ADD_ALPHA
from .promotion import promote, scalar_array

__all__ = ["alpha_function", "alpha_inplace"]


def alpha_function(name: str, op, check, floating: bool):
    """The public ``add``/``sub`` (``name``, of primitive ``op``): ``x + alpha * y`` (``sub``:
    ``x - alpha * y``) by PyTorch's rules. alpha 1 is the op itself; a real alpha with floating
    tensors is `ADD_ALPHA`, one rounding; any other is ``op(x, alpha * y)`` (`_scale`)."""
    negate = name == "sub"
    node_name = "SubBackward0" if negate else "AddBackward0"

    def fn(x, y, *, alpha=1):
        if check is not None:
            check(x, y)
        if _meta.active[0]:
            _meta.refuse_mixed(name, (x, y))
        kind = type(alpha)
        plain = kind is int or kind is float
        if plain and alpha == 1:  # the common call: nothing to scale
            return apply(op, *promote(x, y, floating=floating))
        x, y = promote(x, y, floating=floating)
        dtype = x.dtype
        if dtype.is_floating_point and (
            plain or (isinstance(alpha, _REAL_NUMBERS) and not isinstance(alpha, _BOOLS))
        ):
            # one rounding, PyTorch's fused multiply-add (ops/add_alpha.py)
            check_fill_value(name, alpha, dtype)
            fused = apply(ADD_ALPHA, x, y, alpha=-float(alpha) if negate else float(alpha))
            return rename_node(fused, node_name)
        return apply(op, x, _scale(name, y, alpha, dtype))

    # (Tensor._inplace's direct route for add_/sub_)
    fn.direct_inplace = lambda t, args, kwargs: alpha_inplace(name, t, args, kwargs)
    return fn


_BOOLS = (bool, np.bool_)
_KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def alpha_inplace(name: str, t, args: tuple, kwargs: dict) -> bool:
    """``t.add_(y, alpha=a)`` (``sub_``) written straight into ``t``'s memory by the direct
    kernel, where that is all the general in-place route (Tensor._inplace) would do: eager, no
    gradient recorded, a float32/float64 tensor, ``y`` a tensor of its dtype and shape (or one
    value), both C-contiguous, a real ``a``. The caller has refused partial overlaps and
    checked that no graph is built nor profiler records. Returns False to take the general
    route (which also says why a call is refused)."""
    if len(args) != 1 or len(kwargs) != 1:
        return False
    alpha = kwargs.get("alpha")
    kind = type(alpha)
    if kind is not float and kind is not int:
        return False
    y = args[0]
    if not isinstance(y, TensorBase):
        return False
    a, b = t._data, y._data
    if type(a) is not np.ndarray or a.dtype not in _KERNEL_DTYPES or b.dtype != a.dtype:
        return False
    if _state.grad_enabled and (t._requires_grad or y._requires_grad):
        return False
    if not a.flags.writeable:
        return False  # (read-only: the general route says why)
    if b.shape != a.shape and not (b.size == 1 and b.ndim <= a.ndim):
        return False  # (broadcasting y, or into a larger result: the general route)
    check_fill_value(name, alpha, t.dtype)
    value = -float(alpha) if name == "sub" else float(alpha)
    return cadd_alpha.add_alpha(a, b, value, out=a) is not None


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
