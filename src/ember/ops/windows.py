"""PyTorch's window functions (``torch.hann_window`` ...): hann, hamming, blackman, bartlett
and kaiser, with ``periodic=True`` by default (the window of length N + 1 without its last
value, for spectral analysis), ``dtype`` (a floating dtype, the default float dtype unless given)
and ``requires_grad``. Values are computed in float64 from ember's arange, cos and i0 and
rounded once to the dtype.
"""

from __future__ import annotations

import math

from .. import dtypes as dt
from ..errors import ArgumentError, ArgumentTypeError, DTypeError
from . import api as E
from ._registry import export


def _window(name, window_length, periodic, dtype, requires_grad, body):
    if not isinstance(window_length, int) or isinstance(window_length, bool):
        raise ArgumentTypeError(f"{name}: window_length must be an int, got {window_length!r}")
    if window_length < 0:
        raise ArgumentError(f"{name} requires non-negative window_length, got {window_length}")
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if not d.is_floating_point:
        raise DTypeError(f"{name} expects floating point dtypes, got {d}", op=name)
    if window_length <= 1:
        out = E.ones((window_length,), dtype=d)
    else:
        length = window_length + 1 if periodic else window_length
        values = body(E.arange(length, dtype=dt.float64), length)
        out = (values[:-1] if periodic else values).to(d)
    return out.requires_grad_() if requires_grad else out


def _cosine_sum(*coefficients):
    """sum_k (-1)^k a_k cos(2 pi k n / (N - 1)), the generalized cosine window."""

    def body(n, length):
        phase = n * (2.0 * math.pi / (length - 1))
        out = E.full_like(n, coefficients[0])
        for k, a in enumerate(coefficients[1:], start=1):
            out = out + ((-1) ** k * a) * E.cos(phase * float(k))
        return out

    return body


@export
def hann_window(window_length: int, periodic: bool = True, *, dtype=None, requires_grad=False):
    """The Hann window ``0.5 - 0.5 cos(2 pi n / (N - 1))``."""
    return _window("hann_window", window_length, periodic, dtype, requires_grad,
                   _cosine_sum(0.5, 0.5))  # fmt: skip


@export
def hamming_window(
    window_length: int,
    periodic: bool = True,
    alpha: float = 0.54,
    beta: float = 0.46,
    *,
    dtype=None,
    requires_grad=False,
):
    """The Hamming window ``alpha - beta cos(2 pi n / (N - 1))``."""
    return _window("hamming_window", window_length, periodic, dtype, requires_grad,
                   _cosine_sum(alpha, beta))  # fmt: skip


@export
def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, requires_grad=False):
    """The Blackman window ``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``."""
    return _window("blackman_window", window_length, periodic, dtype, requires_grad,
                   _cosine_sum(0.42, 0.5, 0.08))  # fmt: skip


def _bartlett(n, length):
    return 1.0 - E.abs(n * (2.0 / (length - 1)) - 1.0)


@export
def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, requires_grad=False):
    """The Bartlett (triangular) window ``1 - |2 n / (N - 1) - 1|``."""
    return _window("bartlett_window", window_length, periodic, dtype, requires_grad, _bartlett)


@export
def kaiser_window(
    window_length: int,
    periodic: bool = True,
    beta: float = 12.0,
    *,
    dtype=None,
    requires_grad=False,
):
    """The Kaiser window ``I0(beta sqrt(1 - ((n - a) / a)^2)) / I0(beta)``, ``a = (N - 1) / 2``
    (I0 the modified Bessel function of order 0)."""

    def body(n, length):
        a = (length - 1) / 2.0
        ratio = (n - a) / a
        inside = E.clamp(1.0 - ratio * ratio, min=0.0)  # (rounding can leave -eps at the ends)
        return E.i0(E.sqrt(inside) * float(beta)) / E.i0(E.tensor(float(beta), dtype=dt.float64))

    return _window("kaiser_window", window_length, periodic, dtype, requires_grad, body)
