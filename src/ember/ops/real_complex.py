"""PyTorch's complex-number API: the primitives that take complex tensors apart and put them
together (``real``, ``imag``, ``conj``, ``complex``, ``view_as_real``, ``view_as_complex``,
``angle``), and the public functions, which answer for real and complex tensors alike.

For a real tensor they answer as PyTorch does: ``conj``, ``conj_physical``, ``resolve_conj``
and ``resolve_neg`` return the tensor itself; ``is_conj`` and ``is_neg`` are False; ``real`` is
the tensor and ``imag`` raises PyTorch's error; ``angle`` is pi where the value is negative, 0
elsewhere and NaN at NaN, with a zero gradient. Code written for complex and real tensors alike
(``x.conj()`` before a product, ``x.real`` in a loss) runs unchanged.

For a complex tensor: ``real`` and ``imag`` (and ``view_as_real``) are views sharing its memory,
as PyTorch's: writes through them without autograd history reach the tensor; a write through
one into a tensor with history, or while a graph is built, is refused (ember's view machinery
scatters whole elements, _views.py). ``conj`` copies (PyTorch's is a lazy conjugate bit:
``is_conj`` is therefore always False here, and ``resolve_conj`` returns the tensor itself);
``view_as_complex`` copies too (a new tensor, not an alias of its input). Gradients follow
PyTorch's convention: the conjugate Wirtinger derivative of a real loss.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentTypeError, DTypeError, ShapeError
from ..types import TensorType
from . import api as E
from ._onnx_complex import angle as angle_of_pairs
from ._onnx_complex import join as _join
from ._onnx_complex import pairs as _pairs
from ._onnx_complex import part as _part
from ._registry import OpDef, apply, export, register
from ._rules import Complex
from ._util import broadcast_shapes, elementwise_cost, memory_cost
from .promotion import to_tensor

_G = Complex.GRADIENT


def _require_complex(name, x):
    if not x.dtype.is_complex:
        raise DTypeError(f"expected a complex tensor, got {x.dtype}", op=name)


def _part_infer(name):
    def infer(x):
        _require_complex(name, x)
        return TensorType(tuple(x.shape), dt.to_real(x.dtype))

    return infer


def _onnx_conj(e):
    dtype = dt.to_real(e.in_types[0].dtype)
    return e.node("Mul", [e.inputs[0], e.constant(np.asarray([1.0, -1.0], dtype.np))])


def _real_vjp(c, g):
    return (E.cast(g, c.in_types[0].dtype),)


def _imag_vjp(c, g):
    return (E.complex(E.zeros_like(g), g),)


_REAL = register(
    OpDef(
        name="real",
        onnx=_pairs(None, lambda e: _part(e, e.inputs[0], 0)),
        kind="elementwise",
        infer=_part_infer("real"),
        kernel=np.real,  # (a view of the complex array's memory)
        vjp=_real_vjp,
        cost=memory_cost,
        save_inputs=(),
        view=True,
        complex=_G,
        doc="real(z): the real parts of a complex tensor, a view of its memory",
    )
)
_IMAG = register(
    OpDef(
        name="imag",
        onnx=_pairs(None, lambda e: _part(e, e.inputs[0], 1)),
        kind="elementwise",
        infer=_part_infer("imag"),
        kernel=np.imag,
        vjp=_imag_vjp,
        cost=memory_cost,
        save_inputs=(),
        view=True,
        complex=_G,
        doc="imag(z): the imaginary parts of a complex tensor, a view of its memory",
    )
)
_CONJ = register(
    OpDef(
        name="conj",
        onnx=_pairs(None, _onnx_conj),
        kind="elementwise",
        infer=lambda x: (_require_complex("conj", x), TensorType(tuple(x.shape), x.dtype))[1],
        kernel=np.conjugate,
        vjp=lambda c, g: (apply(_CONJ, g),),
        cost=elementwise_cost(1),
        save_inputs=(),
        complex=_G,
        doc="conj(z): the complex conjugate (a copy; PyTorch's is a lazy view)",
    )
)


def _onnx_real_angle(e):
    """A real number's angle: pi below zero, else 0 (NaN kept), as PyTorch's."""
    x, dtype = e.inputs[0], e.in_types[0].dtype
    out = e.node(
        "Where",
        [e.node("Less", [x, e.scalar(0, dtype)]), e.scalar(np.pi, dtype), e.scalar(0, dtype)],
    )
    return e.node("Where", [e.node("IsNaN", [x]), x, out])


def _onnx_complex_of(e):
    (re, im), shape = e.inputs, e.out_types[0].shape
    re, im = (e.node("Expand", [x, e.shape(shape)]) for x in (re, im))  # (they broadcast)
    return _join(e, re, im)


def _complex_infer(re, im):
    if re.dtype is not im.dtype or re.dtype not in (dt.float32, dt.float64):
        raise DTypeError(
            f"expected both inputs to be float32 or float64, of one dtype; got {re.dtype} and "
            f"{im.dtype}",
            op="complex",
        )
    return TensorType(broadcast_shapes("complex", re.shape, im.shape), dt.to_complex(re.dtype))


def _complex_kernel(re, im):
    re, im = np.broadcast_arrays(re, im)
    out = np.empty(re.shape, dtype=np.result_type(re.dtype, np.complex64))
    out.real = re
    out.imag = im
    return out


def _complex_vjp(c, g):
    n_re, n_im = c.needs_input_grad
    return (
        E.sum_to(apply(_REAL, g), c.in_types[0].shape) if n_re else None,
        E.sum_to(apply(_IMAG, g), c.in_types[1].shape) if n_im else None,
    )


_COMPLEX = register(
    OpDef(
        name="complex",
        onnx=_pairs(None, _onnx_complex_of),
        kind="elementwise",
        infer=_complex_infer,
        kernel=_complex_kernel,
        vjp=_complex_vjp,
        cost=elementwise_cost(1),
        save_inputs=(),
        doc="complex(real, imag): the complex tensor real + imag * 1j (broadcast)",
    )
)


def _as_real_infer(x):
    _require_complex("view_as_real", x)
    return TensorType((*tuple(x.shape), 2), dt.to_real(x.dtype))


def _as_real_kernel(x):
    """The (..., 2) float view of a complex array: its real parts, and a last axis stepping
    half an element to the imaginary ones."""
    parts = np.real(x)
    return np.lib.stride_tricks.as_strided(
        parts, (*x.shape, 2), (*parts.strides, x.itemsize // 2), writeable=parts.flags.writeable
    )


_VIEW_AS_REAL = register(
    OpDef(
        name="view_as_real",
        onnx=_pairs(None, lambda e: e.node("Identity", e.inputs)),  # (pairs already)
        kind="shape",
        infer=_as_real_infer,
        kernel=_as_real_kernel,
        vjp=lambda c, g: (apply(_VIEW_AS_COMPLEX, g),),
        cost=memory_cost,
        save_inputs=(),
        view=True,
        complex=_G,
        batch=None,
        doc="view_as_real(z): a complex tensor as floats, a last dimension of 2 (real, imag)",
    )
)


def _as_complex_infer(x):
    if x.dtype not in (dt.float32, dt.float64):
        raise DTypeError(
            f"is only supported for float32 and float64 tensors, got {x.dtype}",
            op="view_as_complex",
        )
    if not x.shape or x.shape[-1] != 2:
        raise ShapeError(
            f"the last dimension must have size 2 (real, imag), got shape {tuple(x.shape)}",
            op="view_as_complex",
        )
    return TensorType(tuple(x.shape)[:-1], dt.to_complex(x.dtype))


_VIEW_AS_COMPLEX = register(
    OpDef(
        name="view_as_complex",
        onnx=_pairs(None, lambda e: e.node("Identity", e.inputs)),
        kind="shape",
        infer=_as_complex_infer,
        kernel=lambda x: _complex_kernel(x[..., 0], x[..., 1]),
        vjp=lambda c, g: (apply(_VIEW_AS_REAL, g),),
        cost=memory_cost,
        save_inputs=(),
        batch=None,
        doc="view_as_complex(x): a (..., 2) float tensor as complex numbers (a copy in ember)",
    )
)


def _angle_vjp(c, g):
    z = c.inputs[0]
    # d angle = (-y dx + x dy) / |z|^2: the gradient g * i z / |z|^2, 0 at 0 (PyTorch's)
    zero = z == 0
    squared = E.where(zero, 1, E.real(z) * E.real(z) + E.imag(z) * E.imag(z))
    rotated = E.complex(-E.imag(z), E.real(z))
    return (E.where(zero, 0, rotated * (g / squared)),)


_ANGLE = register(
    OpDef(
        name="angle",
        onnx=_pairs(_onnx_real_angle, angle_of_pairs),
        kind="elementwise",
        infer=_part_infer("angle"),
        kernel=np.angle,
        vjp=_angle_vjp,
        cost=elementwise_cost(4),
        complex=_G,
        doc="angle(z): the argument of each complex value, in (-pi, pi]",
    )
)


# ------------------------------------------------------------------------------ public


def _itself(name: str):
    def same(input):
        """The tensor itself: ember's conjugation is never lazy (nothing to resolve)."""
        return to_tensor(input)

    same.__name__ = same.__qualname__ = name
    return export(same, name=name, method=True)


resolve_conj = _itself("resolve_conj")
resolve_neg = _itself("resolve_neg")


@export(method=True)
def conj(input):
    """The complex conjugate (a copy: ember's conjugation is never lazy); a real tensor is its
    own conjugate (the tensor itself, as PyTorch's)."""
    x = to_tensor(input)
    return apply(_CONJ, x) if x.dtype.is_complex else x


@export
def adjoint(input):
    """``torch.adjoint``: the conjugate transpose of the last two dimensions (``input.mH``)."""
    x = to_tensor(input)
    return x.mH


@export(method=True)
def conj_physical(input):
    """`conj`: the conjugate, computed now (as ember's conj always is)."""
    return conj(input)


@export
def real(input):
    """The real parts of a complex tensor (a view of its memory); a real tensor itself."""
    x = to_tensor(input)
    return apply(_REAL, x) if x.dtype.is_complex else x


@export
def imag(input):
    """The imaginary parts of a complex tensor (a view); PyTorch's error for a real one."""
    x = to_tensor(input)
    if not x.dtype.is_complex:
        raise DTypeError("imag is not implemented for tensors with non-complex dtypes.", op="imag")
    return apply(_IMAG, x)


@export(name="complex")
def complex_(real, imag, *, out=None):
    """``real + imag * 1j``: float32 parts make complex64, float64 parts complex128 (both of
    one dtype, as PyTorch requires; shapes broadcast)."""
    if out is not None:
        raise ArgumentTypeError("complex(): out= is not supported by ember")
    return apply(_COMPLEX, to_tensor(real), to_tensor(imag))


@export
def polar(abs, angle, *, out=None):  # noqa: A002  (PyTorch's argument names)
    """``abs * (cos(angle) + sin(angle) * 1j)``, differentiable in both (float32 or float64,
    of one dtype)."""
    if out is not None:
        raise ArgumentTypeError("polar(): out= is not supported by ember")
    r, theta = to_tensor(abs), to_tensor(angle)
    _complex_infer(r, theta)  # (PyTorch's dtype rule, before the arithmetic)
    return complex_(r * E.cos(theta), r * E.sin(theta))


@export
def view_as_real(input):
    """A complex tensor as a float tensor with a last dimension of 2 (real, imag): a view of
    its memory, as PyTorch's."""
    return apply(_VIEW_AS_REAL, to_tensor(input))


@export
def view_as_complex(input):
    """A float32/float64 tensor whose last dimension is 2 (real, imag) as a complex tensor.
    ember copies (PyTorch's shares the memory: writes to one do not reach the other here)."""
    return apply(_VIEW_AS_COMPLEX, to_tensor(input))


@export(method=True)
def is_conj(input) -> bool:
    """False: ember carries no lazy conjugation (its conj computes the values)."""
    to_tensor(input)
    return False


@export(method=True)
def is_neg(input) -> bool:
    """False: ember carries no lazy negation."""
    to_tensor(input)
    return False


@export(method=True)
def is_complex(input) -> bool:
    """Whether the tensor's dtype is complex64 or complex128."""
    return to_tensor(input).dtype.is_complex


@export(method=True)
def isreal(input):
    """Where the value is real (a complex value: its imaginary part is 0; a real tensor: True
    everywhere), a bool tensor."""
    x = to_tensor(input)
    if x.dtype.is_complex:
        return apply(_IMAG, x) == 0
    return E.ones(x.shape, dtype=dt.bool_)


@export(method=True, inplace=True)
def sgn(input):
    """``z / |z|`` (0 at 0) for a complex tensor; for a real one PyTorch's sgn is sign (its
    gradient 0)."""
    x = to_tensor(input)
    if not x.dtype.is_complex:
        return E.sign(x)
    modulus = E.abs(x)
    zero = modulus == 0
    return E.where(zero, 0, x / E.where(zero, 1, modulus))


@export(method=True)
def angle(input):
    """The argument of each value. Complex: in (-pi, pi], a real result, with PyTorch's
    gradient (0 at 0). Real: pi where it is negative, 0 where it is zero or positive (-0.0
    included), NaN at NaN; integers give the default float dtype; the gradient is zero
    everywhere, NaN included, as PyTorch's."""
    x = to_tensor(input)
    if x.dtype.is_complex:
        return apply(_ANGLE, x)
    if not x.dtype.is_floating_point:
        x = E.cast(x, dt.get_default_dtype())
    # (constants of x's dtype: Python scalars alone would make a default-dtype result)
    zero_or_nan = E.where(x != x, E.full_like(x, math.nan), E.zeros_like(x))
    out = E.where(x < 0, E.full_like(x, math.pi), zero_or_nan)
    if x.requires_grad:  # (PyTorch's has a gradient, zero: a term of zeros attaches it)
        out = out + E.where(E.isfinite(x), x, 0.0) * 0.0
    return out
