"""The short-time Fourier transform and its inverse, PyTorch's ``stft`` and ``istft`` (also
Tensor methods), written in ember ops: frames gathered by an index, windowed, transformed by
ops/fft.py's primitives, and for the inverse overlap-added with ``scatter_add`` and divided by
the window's overlap-added square (PyTorch's envelope). Values and gradients (to the signal and
to the window) follow from those ops."""

from __future__ import annotations

import operator
import warnings

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, DTypeError, ShapeError, user_stacklevel
from ..symbolic import SymDim, holds
from . import api as E
from ._registry import building_graph, constant, export
from .fft import fft, ifft, irfft, rfft
from .promotion import to_tensor

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _window(name, window, win_length, n_fft, dtype):
    """The window zero-padded on both sides to ``n_fft`` (PyTorch's centring), or None for
    the rectangular window of ``n_fft`` (without a window, PyTorch's is ``ones(win_length)``
    padded)."""
    if window is None:
        if win_length == n_fft:
            return None
        window = E.ones((win_length,), dtype=dtype)
    w = to_tensor(window)
    if w.ndim != 1 or w.shape[0] != win_length:
        raise ShapeError(
            f"expected a 1D window tensor of size equal to win_length={win_length}, but got "
            f"window with size {tuple(w.shape)}",
            op=name,
        )
    if not (w.dtype.is_floating_point or w.dtype.is_complex):
        w = E.cast(w, dtype)
    left = (n_fft - win_length) // 2
    if win_length < n_fft:
        w = E.pad(w, (left, n_fft - win_length - left))
    return w


def _lengths(name, n_fft, hop_length, win_length):
    n_fft = operator.index(n_fft)
    hop = n_fft // 4 if hop_length is None else operator.index(hop_length)
    win = n_fft if win_length is None else operator.index(win_length)
    if n_fft <= 0:
        raise ArgumentError(f"expected 0 < n_fft, but got n_fft={n_fft}", op=name)
    if hop <= 0:
        raise ArgumentError(f"expected hop_length > 0, but got hop_length={hop}", op=name)
    if not 0 < win <= n_fft:
        raise ArgumentError(f"expected 0 < win_length <= n_fft, but got win_length={win}", op=name)
    return n_fft, hop, win


@export(method=True)
def stft(
    input,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    pad_mode="reflect",
    normalized=False,
    onesided=None,
    return_complex=None,
):
    """PyTorch's ``stft``: the Fourier transforms of windowed frames of a 1-D signal or a batch
    of them (B, L), a (B?, n_freq, n_frames) complex result. ``return_complex`` must be given
    for real inputs, as PyTorch requires (False returns ``view_as_real`` of the result, with
    PyTorch's deprecation warning)."""
    x = to_tensor(input)
    n_fft, hop, win = _lengths("stft", n_fft, hop_length, win_length)
    if x.ndim not in (1, 2):
        raise ShapeError(f"expected a 1D or 2D tensor, got shape {tuple(x.shape)}", op="stft")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = E.cast(x, dt.get_default_dtype())
    if x.dtype not in (dt.float32, dt.float64, *dt.COMPLEX_DTYPES):
        raise DTypeError(f"expected a float32/float64 or complex input, got {x.dtype}", op="stft")
    w = _window("stft", window, win, n_fft, dt.to_real(x.dtype))
    complex_input = x.dtype.is_complex or (w is not None and w.dtype.is_complex)
    if return_complex is None:
        if not complex_input:
            raise ArgumentError(
                "stft requires the return_complex parameter be given for real inputs, and will "
                "further require that return_complex=True in a future PyTorch release.",
                op="stft",
            )
        return_complex = True
    if not return_complex:
        warnings.warn(
            "stft with return_complex=False is deprecated; ember returns view_as_real of the "
            "complex result, as PyTorch does",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    batched = x.ndim == 2
    if not batched:
        x = E.unsqueeze(x, 0)
    if center:
        if pad_mode not in _PAD_MODES:
            raise ArgumentError(
                f"pad_mode must be one of {_PAD_MODES}, got {pad_mode!r}", op="stft"
            )
        pad = n_fft // 2
        x = E.squeeze(E.pad(E.unsqueeze(x, 0), (pad, pad), mode=pad_mode), 0)
    length = x.shape[-1]
    if not (0 < n_fft and holds(lambda: n_fft <= length)):
        raise ArgumentError(
            f"expected 0 < n_fft <= {length} (the padded length), but got n_fft={n_fft}",
            op="stft",
        )
    n_frames = 1 + (length - n_fft) // hop
    if isinstance(n_frames, SymDim):  # (a symbolic length: the frames' starts made in the graph)
        starts = E.mul(E.unsqueeze(E.arange(n_frames), 1), hop)
        positions = E.add(starts, constant(np.arange(n_fft)[None, :]))
    else:
        positions = constant(np.arange(n_frames)[:, None] * hop + np.arange(n_fft)[None, :])
    frames = x[:, positions]  # (B, n_frames, n_fft)
    if w is not None:
        frames = frames * w
    if onesided is None:
        onesided = not complex_input
    if onesided and complex_input:
        raise ArgumentError("cannot have onesided output if window or input is complex", op="stft")
    norm = "ortho" if normalized else "backward"
    spectrum = rfft(frames, norm=norm) if onesided else fft(frames, norm=norm)
    out = E.transpose(spectrum, 1, 2)
    if not batched:
        out = E.squeeze(out, 0)
    return out if return_complex else E.view_as_real(out)


@export(method=True)
def istft(
    input,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    normalized=False,
    onesided=None,
    length=None,
    return_complex=False,
):
    """PyTorch's ``istft``: the signal whose `stft` is ``input`` (B?, n_freq, n_frames),
    by inverse transforms of the frames, overlap-added and divided by the window's
    overlap-added square; refused where that envelope is zero (the window fails NOLA; checked
    eagerly, not while a graph is built, where it would need the values)."""
    z = to_tensor(input)
    n_fft, hop, win = _lengths("istft", n_fft, hop_length, win_length)
    if not z.dtype.is_complex:
        raise DTypeError(
            f"expected a complex input (the stft's result), got {z.dtype}; view_as_complex "
            "turns a real (..., 2) one into it",
            op="istft",
        )
    if z.ndim not in (2, 3):
        raise ShapeError(
            f"expected a tensor with 2 or 3 dimensions of complex dtype, got shape "
            f"{tuple(z.shape)}",
            op="istft",
        )
    batched = z.ndim == 3
    if not batched:
        z = E.unsqueeze(z, 0)
    real = dt.to_real(z.dtype)
    w = _window("istft", window, win, n_fft, real)
    n_freq, n_frames = z.shape[1], z.shape[2]
    if onesided is None:
        onesided = n_freq != n_fft
    expected_freq = n_fft // 2 + 1 if onesided else n_fft
    if n_freq != expected_freq:
        raise ShapeError(
            f"expected the frequency dimension (dim 1 or 2 of the input) to be {expected_freq} "
            f"for onesided={onesided}, but got {n_freq}",
            op="istft",
        )
    if return_complex and onesided:
        raise ArgumentError("cannot have onesided output if the output is complex", op="istft")
    if not return_complex and w is not None and w.dtype.is_complex:
        raise ArgumentError("complex windows require return_complex=True", op="istft")
    norm = "ortho" if normalized else "backward"
    frames = E.transpose(z, 1, 2)  # (B, n_frames, n_freq)
    if return_complex:
        frames = ifft(frames, n=n_fft, norm=norm)
    else:
        if not onesided:
            frames = E.narrow(frames, -1, 0, n_fft // 2 + 1)
        frames = irfft(frames, n=n_fft, norm=norm)
    if w is not None:
        frames = frames * w
    total = n_fft + hop * (n_frames - 1)
    positions = np.arange(n_frames)[:, None] * hop + np.arange(n_fft)[None, :]
    index = constant(np.broadcast_to(positions.reshape(1, -1), (z.shape[0], positions.size)))
    flat = E.reshape(frames, (z.shape[0], -1))
    y = E.scatter_add(E.zeros((z.shape[0], total), dtype=flat.dtype), 1, index, flat)
    # the window's square, as PyTorch's window.pow(2): complex for a complex window (not |w|^2)
    squares = E.ones((n_fft,), dtype=real) if w is None else w * w
    envelope = E.scatter_add(
        E.zeros((total,), dtype=squares.dtype),
        0,
        constant(positions.reshape(-1)),
        E.reshape(E.broadcast_to(squares, (n_frames, n_fft)), (-1,)),
    )
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + operator.index(length)
    else:
        end = total - n_fft // 2 if center else total
    stop = min(end, total)
    y = E.narrow(y, 1, start, max(stop - start, 0))
    envelope = E.narrow(envelope, 0, start, max(stop - start, 0))
    # (PyTorch's NOLA check reads the envelope's values: eagerly only, a graph being built
    # has none, and there a zero of the envelope divides to inf or NaN)
    low = 1.0
    if envelope.numel() and not building_graph():
        low = float(E.abs(envelope).min().item())
    if low < 1e-11:
        raise ArgumentError(
            f"window overlap add min: {low:g} is below 1e-11: the window, hop_length and "
            "n_fft fail the nonzero overlap-add (NOLA) condition",
            op="istft",
        )
    y = y / envelope
    if end > total:
        y = E.pad(y, (0, end - total))
    return y if batched else E.squeeze(y, 0)
