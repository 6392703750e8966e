"""``ember.signal.windows``: PyTorch's ``torch.signal.windows`` (SciPy's window functions):
``bartlett``, ``blackman``, ``cosine``, ``exponential``, ``gaussian``, ``general_cosine``,
``general_hamming``, ``hamming``, ``hann``, ``kaiser``, ``nuttall``.

Each takes the length ``M`` and keywords only: ``sym`` (True: the symmetric window for filter
design; False: the periodic one, for spectral analysis), ``dtype`` (float32 or float64, the
default float dtype unless given), ``layout`` (strided only), ``device`` and ``requires_grad``.
They are PyTorch's formulas written in ember ops in the requested dtype (a ``linspace`` of the
sample positions, then the window's expression), so the values round as PyTorch's do and, with
``requires_grad=True``, the result is computed from a leaf that requires grad, as there.
Unlike ``ember.hann_window`` and the other ``*_window`` functions, the default is symmetric.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .. import dtypes as dt
from ..devices import check_device
from ..ops import api as E
from ..ops._factory_kwargs import strided

__all__ = [
    "bartlett",
    "blackman",
    "cosine",
    "exponential",
    "gaussian",
    "general_cosine",
    "general_hamming",
    "hamming",
    "hann",
    "kaiser",
    "nuttall",
]


def _checks(name: str, M, dtype, layout, device=None):
    """PyTorch's ``_window_function_checks`` (and the device: the CPU); returns the dtype."""
    if device is not None:
        check_device(device, f"signal.windows.{name}(device)")
    d = dt.get_default_dtype() if dtype is None else dt.as_dtype(dtype)
    if not isinstance(M, int) or isinstance(M, bool):
        raise TypeError(f"{name}: M must be an int, got {type(M).__name__}")
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not None and layout is not strided:
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if d not in (dt.float32, dt.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {d}")
    return d


def _constant(M: int, d, requires_grad: bool, value: float):
    out = E.full((M,), value, dtype=d)
    return out.requires_grad_() if requires_grad else out


def _positions(start, end, M, d, requires_grad):
    return E.linspace(start, end, M, dtype=d, requires_grad=requires_grad)


def bartlett(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
             requires_grad: bool = False):  # fmt: skip
    """The Bartlett (triangular) window ``1 - |2n / (M - 1) - 1|``."""
    d = _checks("bartlett", M, dtype, layout, device)
    if M <= 1:
        return _constant(M, d, requires_grad, 1.0)
    constant = 2 / (M if not sym else M - 1)
    k = _positions(-1.0, -1.0 + (M - 1) * constant, M, d, requires_grad)
    return 1 - E.abs(k)


def cosine(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
           requires_grad: bool = False):  # fmt: skip
    """The cosine (sine) window ``sin(pi (n + 0.5) / M)``."""
    d = _checks("cosine", M, dtype, layout, device)
    if M == 0:
        return _constant(0, d, requires_grad, 0.0)
    constant = math.pi / (M + 1 if not sym and M > 1 else M)
    k = _positions(0.5 * constant, (0.5 + (M - 1)) * constant, M, d, requires_grad)
    return E.sin(k)


def exponential(M: int, *, center: float | None = None, tau: float = 1.0, sym: bool = True,
                dtype=None, layout=strided, device=None, requires_grad: bool = False):  # fmt: skip
    """The exponential (Poisson) window ``exp(-|n - center| / tau)``."""
    d = _checks("exponential", M, dtype, layout, device)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 0:
        return _constant(0, d, requires_grad, 0.0)
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / tau
    k = _positions(-center * constant, (-center + (M - 1)) * constant, M, d, requires_grad)
    return E.exp(-E.abs(k))


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype=None, layout=strided,
             device=None, requires_grad: bool = False):  # fmt: skip
    """The Gaussian window ``exp(-(n - (M - 1) / 2)^2 / (2 std^2))``."""
    d = _checks("gaussian", M, dtype, layout, device)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return _constant(0, d, requires_grad, 0.0)
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / (std * math.sqrt(2))
    k = _positions(start * constant, (start + (M - 1)) * constant, M, d, requires_grad)
    return E.exp(-(k**2))


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype=None, layout=strided,
           device=None, requires_grad: bool = False):  # fmt: skip
    """The Kaiser window ``I0(beta sqrt(1 - (2n / (M - 1) - 1)^2)) / I0(beta)``."""
    d = _checks("kaiser", M, dtype, layout, device)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M <= 1:
        return _constant(M, d, requires_grad, 1.0)
    b = E.tensor(float(beta), dtype=d)  # (in the dtype, as PyTorch's, to avoid NaNs at the end)
    start = -b
    constant = 2.0 * b / (M if not sym else M - 1)
    end = E.minimum(b, start + (M - 1) * constant)
    k = _positions(float(start), float(end), M, d, requires_grad)
    return E.i0(E.sqrt(b * b - k**2)) / E.i0(b)


def general_cosine(M: int, *, a: Iterable, sym: bool = True, dtype=None, layout=strided,
                   device=None, requires_grad: bool = False):  # fmt: skip
    """The generalized cosine window ``sum_i (-1)^i a_i cos(2 pi i n / (M - 1))``."""
    d = _checks("general_cosine", M, dtype, layout, device)
    if M <= 1:
        return _constant(M, d, requires_grad, 1.0)
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    a = list(a)
    if not a:
        raise ValueError("Coefficients cannot be empty")
    constant = 2 * math.pi / (M if not sym else M - 1)
    k = _positions(0.0, (M - 1) * constant, M, d, requires_grad)
    a_i = E.tensor([(-1) ** i * w for i, w in enumerate(a)], dtype=d)
    if requires_grad:
        a_i.requires_grad_()
    i = E.arange(len(a), dtype=d)
    return (E.unsqueeze(a_i, -1) * E.cos(E.unsqueeze(i, -1) * k)).sum(0)


def general_hamming(M: int, *, alpha: float = 0.54, sym: bool = True, dtype=None,
                    layout=strided, device=None, requires_grad: bool = False):  # fmt: skip
    """The generalized Hamming window ``alpha - (1 - alpha) cos(2 pi n / (M - 1))``."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)  # fmt: skip


def hamming(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
            requires_grad: bool = False):  # fmt: skip
    """The Hamming window: `general_hamming` with alpha 0.54."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)  # fmt: skip


def hann(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
         requires_grad: bool = False):  # fmt: skip
    """The Hann window: `general_hamming` with alpha 0.5."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)  # fmt: skip


def blackman(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
             requires_grad: bool = False):  # fmt: skip
    """The Blackman window: `general_cosine` with a = (0.42, 0.5, 0.08)."""
    _checks("blackman", M, dtype, layout, device)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)  # fmt: skip


def nuttall(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
            requires_grad: bool = False):  # fmt: skip
    """The minimum 4-term Blackman-Harris window of Nuttall."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)  # fmt: skip
