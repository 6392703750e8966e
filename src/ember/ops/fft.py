"""Discrete Fourier transforms: torch.fft's functions (``ember.fft``, the namespace in
ember/fft.py) over three primitives whose kernels are scipy.fft's (float32 stays float32, as in
PyTorch: a float32 input gives complex64):

* ``fft_c2c(x; axes, norm, inverse)``: complex to complex, forward or inverse, over ``axes``;
* ``fft_r2c(x; axes, norm)``: real to complex, the last axis one-sided (``n // 2 + 1``);
* ``fft_c2r(x; axes, norm, last_size)``: a one-sided Hermitian spectrum to real values,
  ``last_size`` along the last axis.

``norm`` is PyTorch's: "backward" (the forward transform unscaled, the inverse by 1/n),
"ortho" (both by 1/sqrt(n)) or "forward" (the forward by 1/n). The public functions pad with
zeros or trim each transformed dimension to its ``n`` / ``s`` first (an ordinary pad or slice),
so the primitives see exact sizes and their VJPs are transforms again, PyTorch's: the adjoint of
a complex transform is the other direction with the norm swapped; of ``r2c`` the zero-padded
gradient's inverse transform, its real part; of ``c2r`` the ``r2c`` of the gradient with the
entries a Hermitian spectrum counts twice doubled."""

from __future__ import annotations

import operator

import numpy as np
import scipy.fft as _sfft

from .. import dtypes as dt
from ..errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from ..symbolic import SymDim
from ..types import TensorType
from . import api as E
from ._onnx_complex import fft_rule
from ._registry import Cost, OpDef, apply, constant, register
from ._rules import Complex
from ._util import normalize_axis, numel
from .promotion import to_tensor

_NORMS = ("backward", "ortho", "forward")
_SWAP = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _fft_cost(in_types, out_types, attrs) -> Cost:
    n = max(numel(out_types[0].shape), numel(in_types[0].shape), 1)
    flops = int(5 * n * max(1.0, np.log2(n)))
    nbytes = sum(numel(t.shape) * t.dtype.itemsize for t in (*in_types, *out_types))
    return Cost(flops, nbytes)


def _c2c_infer(x, *, axes, norm, inverse):
    if not x.dtype.is_complex:
        raise DTypeError(f"expected a complex tensor, got {x.dtype}", op="fft_c2c")
    return TensorType(tuple(x.shape), x.dtype)


def _c2c_kernel(x, *, axes, norm, inverse):
    fn = _sfft.ifftn if inverse else _sfft.fftn
    return np.asarray(fn(x, axes=axes, norm=norm), dtype=x.dtype)


_C2C = register(
    OpDef(
        name="fft_c2c",
        onnx=fft_rule("c2c"),
        kind="linalg",
        infer=_c2c_infer,
        kernel=_c2c_kernel,
        vjp=lambda c, g: (
            apply(
                _C2C,
                g,
                axes=c.attrs["axes"],
                norm=_SWAP[c.attrs["norm"]],
                inverse=not c.attrs["inverse"],
            ),
        ),
        cost=_fft_cost,
        save_inputs=(),
        batch=None,
        complex=Complex.GRADIENT,
        doc="fft_c2c(x; axes, norm, inverse): the complex DFT (or its inverse) over axes",
    )
)


def _r2c_infer(x, *, axes, norm):
    if x.dtype not in (dt.float32, dt.float64):
        raise DTypeError(f"expected a float32 or float64 tensor, got {x.dtype}", op="fft_r2c")
    shape = list(x.shape)
    shape[axes[-1]] = shape[axes[-1]] // 2 + 1
    return TensorType(tuple(shape), dt.to_complex(x.dtype))


def _r2c_kernel(x, *, axes, norm):
    return np.asarray(_sfft.rfftn(x, axes=axes, norm=norm), dtype=dt.to_complex(_dtype(x)).np)


def _dtype(array):
    return dt.from_numpy_dtype(array.dtype)


def _resize(x, axis: int, size: int):
    """``x`` zero-padded or trimmed to ``size`` along ``axis`` (ember ops)."""
    have = x.shape[axis]
    if have == size:
        return x
    if have > size:
        return E.narrow(x, axis, 0, size)
    pairs = []  # (pad's pairs run from the last dimension)
    for i in range(x.ndim - 1, axis - 1, -1):
        pairs += [0, size - have if i == axis else 0]
    return E.pad(x, tuple(pairs))


def _r2c_vjp(c, g):
    axes = c.attrs["axes"]
    last = axes[-1]
    full = _resize(g, last, c.in_types[0].shape[last])
    spectrum = apply(_C2C, full, axes=axes, norm=_SWAP[c.attrs["norm"]], inverse=True)
    return (E.real(spectrum),)


_R2C = register(
    OpDef(
        name="fft_r2c",
        onnx=fft_rule("r2c"),
        kind="linalg",
        infer=_r2c_infer,
        kernel=_r2c_kernel,
        vjp=_r2c_vjp,
        cost=_fft_cost,
        save_inputs=(),
        batch=None,
        complex=Complex.GRADIENT,
        doc="fft_r2c(x; axes, norm): the DFT of real values, one-sided along the last axis",
    )
)


def _c2r_infer(x, *, axes, norm, last_size):
    if not x.dtype.is_complex:
        raise DTypeError(f"expected a complex tensor, got {x.dtype}", op="fft_c2r")
    if x.shape[axes[-1]] != last_size // 2 + 1:
        raise ShapeError(
            f"a one-sided spectrum of {last_size} values has {last_size // 2 + 1} entries "
            f"along dimension {axes[-1]}, got shape {tuple(x.shape)}",
            op="fft_c2r",
        )
    shape = list(x.shape)
    shape[axes[-1]] = last_size
    return TensorType(tuple(shape), dt.to_real(x.dtype))


def _c2r_kernel(x, *, axes, norm, last_size):
    sizes = [x.shape[a] for a in axes[:-1]] + [last_size]
    out = _sfft.irfftn(x, s=sizes, axes=axes, norm=norm)
    return np.asarray(out, dtype=dt.to_real(_dtype(x)).np)


def _c2r_vjp(c, g):
    axes, n = c.attrs["axes"], c.attrs["last_size"]
    grad = apply(_R2C, g, axes=axes, norm=_SWAP[c.attrs["norm"]])
    onesided = n // 2 + 1
    doubled = n - onesided  # entries 1 .. n - onesided stand for two of the full spectrum
    if doubled > 0:
        weights = np.ones(onesided, dtype=dt.to_real(g.dtype).np)
        weights[1 : 1 + doubled] = 2
        shape = [1] * len(c.in_types[0].shape)
        shape[axes[-1]] = onesided
        grad = grad * constant(weights.reshape(shape))
    return (grad,)


_C2R = register(
    OpDef(
        name="fft_c2r",
        onnx=fft_rule("c2r"),
        kind="linalg",
        infer=_c2r_infer,
        kernel=_c2r_kernel,
        vjp=_c2r_vjp,
        cost=_fft_cost,
        save_inputs=(),
        batch=None,
        complex=Complex.GRADIENT,
        doc="fft_c2r(x; axes, norm, last_size): real values from a one-sided Hermitian "
        "spectrum (last_size along the last axis)",
    )
)


# ------------------------------------------------------------------------------ arguments


def _norm(name, norm):
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ArgumentError(
            f"invalid normalization mode: {norm!r}; expected one of {_NORMS}", op=name
        )
    return norm


def _floating(name, x, complex_ok=True):
    """``x`` as float32/float64 or complex (integers and bools: the default float dtype, as
    PyTorch promotes them)."""
    d = x.dtype
    if d.is_complex:
        if not complex_ok:
            raise DTypeError(f"expects a real input tensor, but got {d}", op=name)
        return x
    if d in (dt.float32, dt.float64):
        return x
    if d.is_floating_point:  # (half precision: PyTorch's CPU FFTs refuse it too)
        raise DTypeError(f"unsupported dtype {d}: ember's FFTs take float32 and float64", op=name)
    return E.cast(x, dt.get_default_dtype())


def _dims_and_sizes(name, x, s, dim, default_all: bool):
    """PyTorch's ``s`` / ``dim`` rules: the transformed dimensions and their sizes."""
    ndim = x.ndim
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = tuple(normalize_axis(name, d, ndim) for d in dims)
        if len(set(dims)) != len(dims):
            raise ArgumentError(f"dims must be unique, got {dims}", op=name)
        if s is not None:
            s = tuple(s)
            if len(s) != len(dims):
                raise ArgumentError(
                    f"when given, dim and s must have the same length, got {dims} and {s}",
                    op=name,
                )
    elif s is not None:
        s = tuple(s)
        if len(s) > ndim:
            raise ShapeError(f"got s of length {len(s)} for a {ndim}-d input", op=name)
        dims = tuple(range(ndim - len(s), ndim))
    else:
        dims = tuple(range(ndim)) if default_all else ()
    if not dims:
        raise ArgumentError("expects at least one dimension to transform", op=name)
    sizes = tuple(x.shape[d] for d in dims) if s is None else s
    sizes = tuple(x.shape[d] if n == -1 else _size(n) for n, d in zip(sizes, dims))
    for n in sizes:
        if n < 1:
            raise ArgumentError(f"invalid number of data points ({n}) specified", op=name)
    return dims, sizes


def _size(n):
    """A transform length: a whole number, or a symbolic size (``n=x.shape[-1]``)."""
    return n if isinstance(n, SymDim) else operator.index(n)


def _one(n):
    return None if n is None else (n,)


def _c2c(name, input, s, dim, norm, inverse, default_all=True):
    x = _floating(name, to_tensor(input))
    dims, sizes = _dims_and_sizes(name, x, s, dim, default_all)
    norm = _norm(name, norm)
    if not x.dtype.is_complex:
        x = E.cast(x, dt.to_complex(x.dtype))
    for d, n in zip(dims, sizes):
        x = _resize(x, d, n)
    return apply(_C2C, x, axes=dims, norm=norm, inverse=inverse)


def _r2c(name, input, s, dim, norm, default_all=True):
    x = _floating(name, to_tensor(input), complex_ok=False)
    dims, sizes = _dims_and_sizes(name, x, s, dim, default_all)
    norm = _norm(name, norm)
    for d, n in zip(dims, sizes):
        x = _resize(x, d, n)
    return apply(_R2C, x, axes=dims, norm=norm)


def _c2r(name, input, s, dim, norm, default_all=True, last_from_input=True):
    x = _floating(name, to_tensor(input))
    if not x.dtype.is_complex:
        x = E.cast(x, dt.to_complex(x.dtype))
    dims, sizes = _dims_and_sizes(name, x, s, dim, default_all)
    if s is None:  # the last dimension's output size from the one-sided input, 2 * (m - 1)
        sizes = (*sizes[:-1], 2 * (x.shape[dims[-1]] - 1))
        if sizes[-1] < 1:
            raise ArgumentError(f"invalid number of data points ({sizes[-1]}) specified", op=name)
    norm = _norm(name, norm)
    for d, n in zip(dims[:-1], sizes[:-1]):
        x = _resize(x, d, n)
    x = _resize(x, dims[-1], sizes[-1] // 2 + 1)
    return apply(_C2R, x, axes=dims, norm=norm, last_size=sizes[-1])


# --------------------------------------------------------------------- torch.fft's names


def fft(input, n=None, dim=-1, norm=None):
    """The 1-D discrete Fourier transform along ``dim`` (``n``: zero-padded or trimmed to n)."""
    return _c2c("fft", input, _one(n), (dim,), norm, False)


def ifft(input, n=None, dim=-1, norm=None):
    """The 1-D inverse discrete Fourier transform."""
    return _c2c("ifft", input, _one(n), (dim,), norm, True)


def fft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-D discrete Fourier transform (the last two dimensions by default)."""
    return _c2c("fft2", input, s, dim, norm, False)


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-D inverse discrete Fourier transform."""
    return _c2c("ifft2", input, s, dim, norm, True)


def fftn(input, s=None, dim=None, norm=None):
    """The N-D discrete Fourier transform (every dimension, or the last ``len(s)``)."""
    return _c2c("fftn", input, s, dim, norm, False)


def ifftn(input, s=None, dim=None, norm=None):
    """The N-D inverse discrete Fourier transform."""
    return _c2c("ifftn", input, s, dim, norm, True)


def rfft(input, n=None, dim=-1, norm=None):
    """The 1-D transform of real values: the ``n // 2 + 1`` non-negative frequencies."""
    return _r2c("rfft", input, _one(n), (dim,), norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    """`rfftn` over two dimensions."""
    return _r2c("rfft2", input, s, dim, norm)


def rfftn(input, s=None, dim=None, norm=None):
    """The N-D transform of real values, one-sided along the last transformed dimension."""
    return _r2c("rfftn", input, s, dim, norm)


def irfft(input, n=None, dim=-1, norm=None):
    """The inverse of `rfft`: ``n`` real values (``2 * (m - 1)`` by default) from a one-sided
    spectrum; the imaginary parts a real signal's spectrum cannot have are ignored."""
    return _c2r("irfft", input, _one(n), (dim,), norm)


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    """`irfftn` over two dimensions."""
    return _c2r("irfft2", input, s, dim, norm)


def irfftn(input, s=None, dim=None, norm=None):
    """The inverse of `rfftn`."""
    return _c2r("irfftn", input, s, dim, norm)


def hfft(input, n=None, dim=-1, norm=None):
    """The transform of a Hermitian-symmetric signal given by its one-sided half: ``n`` real
    values (``2 * (m - 1)`` by default); ``irfft`` of the conjugate with the norm swapped."""
    norm = _SWAP[_norm("hfft", norm)]
    return _c2r("hfft", E.conj(to_tensor(input)), _one(n), (dim,), norm)


def ihfft(input, n=None, dim=-1, norm=None):
    """The inverse of `hfft`: the conjugate of ``rfft`` with the norm swapped."""
    norm = _SWAP[_norm("ihfft", norm)]
    return E.conj(_r2c("ihfft", input, _one(n), (dim,), norm))


def hfft2(input, s=None, dim=(-2, -1), norm=None):
    """`hfftn` over two dimensions."""
    return hfftn(input, s, dim, norm)


def hfftn(input, s=None, dim=None, norm=None):
    """The N-D transform of a Hermitian-symmetric signal given by its one-sided half along the
    last transformed dimension: ``irfftn`` of the conjugate with the norm swapped."""
    norm = _SWAP[_norm("hfftn", norm)]
    return _c2r("hfftn", E.conj(to_tensor(input)), s, dim, norm)


def ihfft2(input, s=None, dim=(-2, -1), norm=None):
    """`ihfftn` over two dimensions."""
    return ihfftn(input, s, dim, norm)


def ihfftn(input, s=None, dim=None, norm=None):
    """The inverse of `hfftn`: the conjugate of ``rfftn`` with the norm swapped."""
    norm = _SWAP[_norm("ihfftn", norm)]
    return E.conj(_r2c("ihfftn", input, s, dim, norm))


def fftfreq(n, d=1.0, *, dtype=None, **kwargs):
    """The sample frequencies of an ``n``-point transform with sample spacing ``d``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``."""
    return _frequencies("fftfreq", np.fft.fftfreq, n, d, dtype, kwargs)


def rfftfreq(n, d=1.0, *, dtype=None, **kwargs):
    """The non-negative sample frequencies of `rfft`: ``[0, 1, ..., n // 2] / (d * n)``."""
    return _frequencies("rfftfreq", np.fft.rfftfreq, n, d, dtype, kwargs)


def _frequencies(name, fn, n, d, dtype, kwargs):
    requires_grad = bool(kwargs.pop("requires_grad", False))
    for key in ("device", "layout", "pin_memory"):
        kwargs.pop(key, None)
    if kwargs:
        raise ArgumentTypeError(f"{name}(): unexpected arguments {sorted(kwargs)}")
    dtype = dt.get_default_dtype() if dtype is None else dt.as_dtype(dtype)
    if not dtype.is_floating_point:
        raise DTypeError(f"expects a floating dtype, got {dtype}", op=name)
    n = operator.index(n)
    if n < 0:
        raise ArgumentError(f"n must be non-negative, got {n}", op=name)
    values = fn(n, d=float(d)) if n else np.zeros(0)
    out = E.tensor(values.astype(dtype.np))
    return out.requires_grad_(True) if requires_grad else out


def _shift(name, input, dim, sign):
    x = to_tensor(input)
    dims = tuple(range(x.ndim)) if dim is None else (dim,) if isinstance(dim, int) else dim
    dims = tuple(normalize_axis(name, d, x.ndim) for d in dims)
    if not dims:
        return x
    shifts = tuple((x.shape[d] // 2) if sign > 0 else -(x.shape[d] // 2) for d in dims)
    return E.roll(x, shifts, dims)


def fftshift(input, dim=None):
    """The zero frequency moved to the centre: a roll by ``n // 2`` along ``dim`` (all)."""
    return _shift("fftshift", input, dim, 1)


def ifftshift(input, dim=None):
    """The inverse of `fftshift`: a roll by ``-(n // 2)``."""
    return _shift("ifftshift", input, dim, -1)


FUNCTIONS = {
    f.__name__: f
    for f in (
        fft,
        ifft,
        fft2,
        ifft2,
        fftn,
        ifftn,
        rfft,
        rfft2,
        rfftn,
        irfft,
        irfft2,
        irfftn,
        hfft,
        ihfft,
        fftfreq,
        rfftfreq,
        fftshift,
        ifftshift,
    )
}
