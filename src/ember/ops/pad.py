"""``pad`` (constant, reflect, replicate, circular) and its adjoint ``pad_backward``.

Non-constant modes read each output element from a source index of the input (``_source_index``);
the backward scatters the cotangent back through the same indices, so ``pad_backward``'s own VJP
is ``pad`` again and higher-order gradients work.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, DTypeError, ShapeError
from ..symbolic import SymDim, holds
from ..types import TensorType
from . import _attr_rules as R
from . import _item_scalars as _items
from . import _onnx_complex as cx
from . import api as E
from ._autocast import Autocast, autocasts
from ._limited import refuse_limited
from ._registry import OpDef, apply, export, register
from ._rules import Complex, Layout
from ._util import check_fill_value, fmt_shape, memory_cost
from .promotion import to_tensor

# --------------------------------------------------------------------------------------- pad

_NP_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}
# attribute rules (ops/_attr_rules.py): a mode of another name read as reflect's indices
_PAD_ATTRS = {"mode": R.Choice(*_NP_MODES), "pads": R.Pairs()}


def _pad_infer(x, *, pads, mode, value):
    if len(pads) != x.ndim:
        raise ShapeError(f"pads {pads} must have one (before, after) pair per dimension", op="pad")
    for d, (lo, hi) in enumerate(pads):
        if lo < 0 or hi < 0:
            raise ShapeError(f"negative padding {(lo, hi)} on dimension {d}", op="pad")
        if mode == "reflect" and (lo or hi) and not holds(lambda: max(lo, hi) < x.shape[d]):
            raise ShapeError(
                f"reflect padding {(lo, hi)} must be smaller than dimension {d} "
                f"of shape {fmt_shape(x.shape)}",
                op="pad",
            )
        if mode in ("replicate", "circular") and x.shape[d] == 0 and (lo or hi):
            raise ShapeError(f"cannot {mode}-pad an empty dimension {d}", op="pad")
    return TensorType(tuple(s + lo + hi for s, (lo, hi) in zip(x.shape, pads)), x.dtype)


def _pad_kernel(x, *, pads, mode, value):
    if mode == "constant":
        return _constant_pad(x, pads, np.asarray(value, x.dtype))
    if mode == "circular" and any(lo > n or hi > n for (lo, hi), n in zip(pads, x.shape)):
        # (wrapping around more than once: the positions each output position copies, axis
        # by axis)
        out = x
        for axis, ((lo, hi), n) in enumerate(zip(pads, x.shape)):
            if lo or hi:
                out = np.take(out, _copied_positions(n, lo, hi, mode), axis=axis)
        return x.copy() if out is x else out
    return _copied_pad(x, pads, mode)


def _copied_pad(x, pads, mode):
    """A reflect, replicate or circular padding as block copies (np.pad's result): the input
    into the middle, then axis by axis from the last each border, the last axis's from the
    input itself, each earlier one's from the part of the output already written (whole rows,
    later axes' borders included, as np.pad's corners). (A position-by-position ``take``
    along the last axis ran at a fifth of a copy's speed; a border of the last axis read from
    the output would be copied twice, NumPy buffering a source that may overlap its target.)"""
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pads))
    out = np.empty(shape, x.dtype)
    middle = tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, pads))
    out[middle] = x
    first = True
    for axis in reversed(range(x.ndim)):
        (lo, hi), n = pads[axis], x.shape[axis]
        if not (lo or hi):
            continue
        # positions read: the input's own, or the output's (shifted by lo)
        at = 0 if first else lo
        for side, width in (("lo", lo), ("hi", hi)):
            if not width:
                continue
            target = slice(0, lo) if side == "lo" else slice(lo + n, lo + n + hi)
            if mode == "reflect":  # mirrored about the first (last) position, itself excluded
                stop = at + n - 2 - hi  # (-1: down to the axis's start, which slice() says None)
                taken = (
                    slice(at + lo, at, -1)
                    if side == "lo"
                    else slice(at + n - 2, stop if stop >= 0 else None, -1)
                )
            elif mode == "replicate":
                taken = slice(at, at + 1) if side == "lo" else slice(at + n - 1, at + n)
            else:  # circular: the far end's positions
                taken = slice(at + n - lo, at + n) if side == "lo" else slice(at, at + hi)
            # earlier axes: their middle (their borders come later); later axes: the whole
            # padded extent, or from the input, unpadded ones
            lead = middle[:axis]
            if first:
                out[(*lead, target, *middle[axis + 1 :])] = x[(*(slice(None),) * axis, taken)]
            else:
                out[(*lead, target)] = out[(*lead, taken)]
        first = False
    return out


@functools.lru_cache(maxsize=256)
def _copied_positions(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    index = _source_index(n, lo, hi, mode)
    index.flags.writeable = False
    return index


def _constant_pad(x, pads, fill):
    """``np.pad(x, pads, constant_values=fill)``: the input copied into the middle, each
    border filled once (np.pad's generality cost ten times a small padding's copy)."""
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pads))
    out = np.empty(shape, x.dtype)
    out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, pads))] = x
    for axis, (lo, hi) in enumerate(pads):
        before = (slice(None),) * axis
        if lo:
            out[before + (slice(0, lo),)] = fill
        if hi:
            out[before + (slice(shape[axis] - hi, None),)] = fill
    return out


def _source_index(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    """For each position of a padded axis, the input position it copies (-1: the constant)."""
    idx = np.arange(-lo, n + hi)
    if mode == "constant":
        return np.where((idx >= 0) & (idx < n), idx, -1)
    if mode == "replicate":
        return np.clip(idx, 0, n - 1)
    if mode == "circular":
        return idx % n
    period = 2 * (n - 1) if n > 1 else 1  # reflect without repeating the edge
    idx = np.abs(idx) % period
    return np.where(idx >= n, period - idx, idx)


def _pad_fast(x, *, pads, mode, value):
    """kernels/cpad.py's row copies (a copy: the kernel's bits) for the non-constant modes;
    None otherwise."""
    from ..kernels import cpad

    return cpad.pad(x, pads, mode, _source_index)


def _pad_backward_fast(g, *, pads, mode, in_shape):
    """kernels/cpad.py's adjoint (the kernel's sums in its order: its bits) for the
    non-constant modes on float32/float64; None otherwise."""
    from ..kernels import cpad

    return cpad.pad_backward(g, pads, mode, in_shape, _source_index)


def _pad_backward_infer(g, *, pads, mode, in_shape):
    """The padding must be one the forward takes and the cotangent of its result's shape: the
    C adjoint sizes its loops from ``pads`` and ``in_shape`` (a graph file's ``in_shape`` off
    by one from its cotangent corrupted the heap)."""
    padded = _pad_infer(TensorType(tuple(in_shape), g.dtype), pads=pads, mode=mode, value=0)
    for d, (want, got) in enumerate(zip(padded.shape, g.shape)):
        if isinstance(want, int) and isinstance(got, int) and want != got:
            raise ShapeError(
                f"a cotangent of shape {fmt_shape(g.shape)} for padding {pads} of an input "
                f"of shape {fmt_shape(in_shape)} (dimension {d}: {got}, not {want})",
                op="pad_backward",
            )
    if len(g.shape) != len(padded.shape):
        raise ShapeError(
            f"a cotangent of {len(g.shape)} dimensions for an input of {len(in_shape)}",
            op="pad_backward",
        )
    return TensorType(tuple(in_shape), g.dtype)


# pad positions on one axis up to which each is added back with one slice addition (a few,
# for convolutions' padding); beyond, one np.add.at over the padded positions
_SLICE_ADDS = 64


def _pad_backward_kernel(g, *, pads, mode, in_shape):
    """Adjoint of pad: each input position receives the sum of the padded positions copying it.
    Axis by axis: the interior (the input's own positions, copied once) is a slice of the
    cotangent; each padded position's slice is added to the position it copies (np.add.at over
    the whole axis, as this kernel once did, ran some 20x slower on a convolution's padding)."""
    out = g
    for axis, ((lo, hi), n) in enumerate(zip(pads, in_shape)):
        if lo == 0 and hi == 0:
            continue
        src = _source_index(n, lo, hi, mode)

        def at(i, _axis=axis, _ndim=out.ndim):
            return (slice(None),) * _axis + (i,) + (slice(None),) * (_ndim - _axis - 1)

        acc = np.array(out[at(slice(lo, lo + n))], dtype=g.dtype)  # (a copy: written below)
        padded = [j for j in (*range(lo), *range(lo + n, lo + n + hi)) if src[j] >= 0]
        if len(padded) <= _SLICE_ADDS:
            for j in padded:
                acc[at(int(src[j]))] += out[at(j)]
        else:
            np.add.at(acc, at(src[padded]), np.take(out, padded, axis=axis))
        out = acc
    return out


_ONNX_PAD_MODES = {
    "constant": "constant",
    "reflect": "reflect",
    "replicate": "edge",
    "circular": "wrap",
}


def _onnx_pad(e):
    pads, mode = e.attrs["pads"], e.attrs["mode"]
    if mode == "circular" and e.opset < 19:
        e.unsupported("in circular mode before opset 19")
    dtype = e.in_types[0].dtype
    if dtype.is_complex:  # (pairs: their parts' axis is not padded; a fill of 0 + 0j only)
        if mode == "constant" and e.attrs["value"] != 0:
            e.unsupported("of complex values with a nonzero fill")
        pads, dtype = (*pads, (0, 0)), dt.to_real(dtype)
    amounts = e.ints([b for b, _ in pads] + [a for _, a in pads])
    inputs = [e.inputs[0], amounts]
    if mode == "constant":
        inputs.append(e.scalar(e.attrs["value"], dtype))
    return e.node("Pad", inputs, mode=_ONNX_PAD_MODES[mode])


def _pad_node_name(attrs, in_types) -> str:
    """PyTorch's node of F.pad: ConstantPadNd, or the reflection / replication pad of as many
    dimensions as the padding reaches (circular padding is made of cats there)."""
    mode, pairs = attrs["mode"], attrs["pads"]
    reached = next((len(pairs) - d for d, p in enumerate(pairs) if p != (0, 0)), 1)
    names = {"constant": "ConstantPadNdBackward0", "circular": "CatBackward0"}
    if mode in names:
        return names[mode]
    return f"{'Reflection' if mode == 'reflect' else 'Replication'}Pad{reached}DBackward0"


_PAD = register(
    OpDef(
        name="pad",
        attrs=_PAD_ATTRS,
        layout=Layout((0,)),  # (channels-last in, out: PyTorch's)
        grad_fn=_pad_node_name,
        complex=Complex.GRADIENT,
        onnx=cx.pairs(_onnx_pad, _onnx_pad),
        kind="shape",
        infer=_pad_infer,
        kernel=_pad_kernel,
        fast=_pad_fast,
        cost=memory_cost,
        vjp=lambda c, g: (
            apply(
                _PAD_BACKWARD,
                g,
                pads=c.attrs["pads"],
                mode=c.attrs["mode"],
                in_shape=tuple(c.in_types[0].shape),
            ),
        ),
        save_inputs=(),
        doc="pad(x, pads, mode, value): pads is ((before, after),) per dimension; "
        "mode constant | reflect | replicate | circular",
    )
)


def _onnx_pad_backward(e):
    if e.attrs["mode"] != "constant":
        e.unsupported(f"in {e.attrs['mode']} mode (its copies' gradients summed back)")
    pads, dtype = e.attrs["pads"], e.in_types[0].dtype
    if dtype.is_complex:  # (pairs: their parts' axis kept)
        pads, dtype = (*pads, (0, 0)), dt.to_real(dtype)
    # the adjoint of constant padding crops what it added (and pads back what it cropped)
    amounts = e.ints([-b for b, _ in pads] + [-a for _, a in pads])
    return e.node("Pad", [e.inputs[0], amounts, e.scalar(0, dtype)])


_PAD_BACKWARD = register(
    OpDef(
        name="pad_backward",
        attrs=_PAD_ATTRS,
        layout=Layout((0,)),  # (channels-last in, out: PyTorch's)
        complex=Complex.GRADIENT,
        onnx=cx.pairs(_onnx_pad_backward, _onnx_pad_backward),
        kind="shape",
        infer=_pad_backward_infer,
        kernel=_pad_backward_kernel,
        fast=_pad_backward_fast,
        cost=memory_cost,
        save_inputs=(),
        vjp=lambda c, g: (apply(_PAD, g, pads=c.attrs["pads"], mode=c.attrs["mode"], value=0.0),),
        doc="pad_backward(g, pads, mode, in_shape): the adjoint of pad (sums copies back)",
    )
)


def _amount(n):
    """A padding amount: an int, or a symbolic size (``(w - T % w) % w`` under symbolic T)."""
    return n if isinstance(n, SymDim) else int(n)


def _pad_symbolic(x, pairs, mode, value):
    """Constant padding by amounts some of which are symbolic sizes (padding a sequence of
    symbolic length to a multiple of a window): blocks of ``value`` concatenated on each side,
    whose sizes the graph computes per call. Such an amount is taken as not negative."""
    if mode != "constant" or not isinstance(value, (bool, int, float)):
        raise ShapeError(
            f"pad: the padding {pairs} holds symbolic sizes, which only mode='constant' with a "
            f"number as its value takes (got mode={mode!r}); give that dimension a fixed size",
            op="pad",
        )
    for d, (lo, hi) in enumerate(pairs):
        pieces = []
        for amount in (lo, hi):
            if isinstance(amount, int) and amount < 0:
                raise ShapeError(
                    f"pad: a negative amount {amount} beside symbolic ones {pairs}", op="pad"
                )
            shape = (*x.shape[:d], amount, *x.shape[d + 1 :])
            pieces.append(None if amount == 0 else E.full(shape, value, dtype=x.dtype))
        if pieces != [None, None]:
            x = E.cat([p for p in (pieces[0], x, pieces[1]) if p is not None], d)
    return x


def _pad_autocast(x, pad, mode="constant", value=0.0):
    """PyTorch's fp32 list holds reflection_pad1d/2d and replication_pad1d/2d/3d (padding the
    last len(pad) // 2 dimensions); constant, circular and 3-d reflection pads pass through."""
    n = len(pad) // 2
    if (mode == "reflect" and n in (1, 2)) or (mode == "replicate" and n in (1, 2, 3)):
        return Autocast.FP32
    return None


@export(functional=True)
@autocasts(_pad_autocast)
def pad(x, pad, mode="constant", value=0.0):
    """PyTorch's F.pad: ``pad`` lists (before, after) sizes starting from the *last* dimension,
    e.g. (left, right, top, bottom) for the last two. Modes: constant, reflect, replicate,
    circular. A negative size removes that many elements from that side first (then the
    other side pads what is left), as in PyTorch."""
    x = to_tensor(x)
    if mode not in _NP_MODES:
        raise ArgumentError(f"pad: unknown mode {mode!r}; expected one of {sorted(_NP_MODES)}")
    if mode in ("reflect", "replicate"):  # (PyTorch pads uint16-64 by a value or circularly)
        refuse_limited(f"{'reflection' if mode == 'reflect' else 'replication'}_pad", x)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ShapeError(
            f"pad {tuple(pad)} must hold (before, after) pairs for at most {x.ndim} dimensions",
            op="pad",
        )
    pairs = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        pairs[x.ndim - 1 - i] = (_amount(pad[2 * i]), _amount(pad[2 * i + 1]))
    if any(isinstance(n, SymDim) for pair in pairs for n in pair):
        return _pad_symbolic(x, pairs, mode, value)
    for d, (lo, hi) in enumerate(pairs):
        if lo >= 0 and hi >= 0:
            continue
        size = x.shape[d] + lo + hi
        if size < 0:
            raise ShapeError(
                f"padding {(lo, hi)} leaves dimension {d} of shape {fmt_shape(x.shape)} "
                f"with {size} elements",
                op="pad",
            )
        start = max(-lo, 0)
        kept = x.shape[d] - start - max(-hi, 0)
        if mode == "replicate" and kept <= 0 < size:
            # (nothing left to replicate once cropped: PyTorch's output position j copies
            # input position clamp(j - lo), every one the edge the crop went past)
            n = x.shape[d]
            at = np.clip(np.arange(-lo, n + hi), 0, n - 1)
            x = E.index_select(x, d, E.tensor(at.astype(np.int64)))
            pairs[d] = (0, 0)
            continue
        x = E.narrow(x, d, start, kept)
        pairs[d] = (max(lo, 0), max(hi, 0))
    if _items.is_item(value):
        # a traced .item() (ops/_item_scalars.py): padded with 0, then the item selected where
        # a padded ones-mask says the padding lies (the mask folds to a constant)
        padded = apply(_PAD, x, pads=tuple(pairs), mode=mode, value=0.0)
        if mode != "constant":
            return padded
        fill = _items.scalar(value, x.dtype, "pad", "value", truncate=True)
        empty = E.zeros(tuple(x.shape), dtype=dt.bool_)
        mask = apply(_PAD, empty, pads=tuple(pairs), mode=mode, value=1.0)
        return E.where(mask, fill, padded)
    if isinstance(value, complex) and not value.imag:
        value = value.real
    if isinstance(value, complex) and not x.dtype.is_complex:
        raise DTypeError(
            f"value {value} cannot be converted to {x.dtype} without overflow", op="pad"
        )
    check_fill_value("pad", value, x.dtype)  # (1e5 into float16: refused, as PyTorch)
    # (a complex fill for a complex tensor stays complex, as PyTorch's)
    value = complex(value) if isinstance(value, complex) else float(value)
    return apply(_PAD, x, pads=tuple(pairs), mode=mode, value=value)
