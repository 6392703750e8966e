"""Complex values in ONNX files: ONNX's operators take no complex element type, and its DFT
and STFT give a complex tensor as a real one with a last axis of 2 (real, imaginary parts).
The exporter writes every complex value that way (a *pair* tensor: complex64 (3, 4) is float32
(3, 4, 2); graph inputs, outputs and constants too), and only rules built here, marked
``complex_pairs``, are handed complex operands (any other op refuses them by name).

`pairs(real_rule, pair_rule)` is such a rule: ``real_rule`` where every operand and result is
real, ``pair_rule(e)`` otherwise. The helpers split and join pairs and lift real operands
(`lift`); the transforms are DFT nodes (opset 17; from opset 20 its axis is an input), one per
transformed axis, scaled for PyTorch's ``norm``. Written through the emitter, never importing
``onnx``.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt

__all__ = ["complex_product", "fft_rule", "lift", "pairs", "part", "join"]


def pairs(real_rule, pair_rule):
    """The onnx rule of an op that takes complex values: ``pair_rule`` when any operand or
    result is complex (each complex name a pair tensor), ``real_rule`` (None: the op is only
    complex) otherwise."""

    def rule(e):
        if any(t.dtype.is_complex for t in (*e.in_types, *e.out_types)):
            return pair_rule(e)
        if real_rule is None:
            e.unsupported("on real values")
        return real_rule(e)

    rule.complex_pairs = True  # (read by the exporter: this rule reads and writes pairs)
    rule.__name__ = getattr(pair_rule, "__name__", "onnx_pairs")
    return rule


def part(e, x: str, which: int) -> str:
    """The real (0) or imaginary (1) part of the pair ``x``: its last axis dropped."""
    return e.node("Gather", [x, e.scalar(which, dt.int64)], axis=-1)


def join(e, real: str, imag: str) -> str:
    """The pair of two real tensors of one shape."""
    axis = e.ints([-1])
    return e.node(
        "Concat", [e.node("Unsqueeze", [real, axis]), e.node("Unsqueeze", [imag, axis])], axis=-1
    )


def lift(e, x: str, t) -> str:
    """Operand ``x`` of ember type ``t`` as a pair: itself when complex, else with a zero
    imaginary part (a Pad: no 0 * x, which would turn infinities into NaN)."""
    if t.dtype.is_complex:
        return x
    rank = len(t.shape) + 1
    pads = [0] * rank + [0] * (rank - 1) + [1]
    return e.node("Pad", [e.node("Unsqueeze", [x, e.ints([-1])]), e.ints(pads)])


def real_dtype(t):
    return dt.to_real(t.dtype) if t.dtype.is_complex else t.dtype


def complex_product(e, a: str, b: str, conjugate_b: bool = False) -> str:
    """The product of two pairs, (ac - bd) + (ad + bc)i (b conjugated: (ac + bd) + (bc - ad)i)."""
    ar, ai, br, bi = part(e, a, 0), part(e, a, 1), part(e, b, 0), part(e, b, 1)
    if conjugate_b:
        real = e.node("Add", [e.node("Mul", [ar, br]), e.node("Mul", [ai, bi])])
        imag = e.node("Sub", [e.node("Mul", [ai, br]), e.node("Mul", [ar, bi])])
    else:
        real = e.node("Sub", [e.node("Mul", [ar, br]), e.node("Mul", [ai, bi])])
        imag = e.node("Add", [e.node("Mul", [ar, bi]), e.node("Mul", [ai, br])])
    return join(e, real, imag)


# ------------------------------------------------------------------------------ transforms


def _dft(e, x: str, axis: int, inverse: bool, onesided: bool = False) -> str:
    """One DFT of the pair (or real (..., 1)) signal ``x`` along its ``axis``."""
    if e.opset < 17:
        e.unsupported("before opset 17 (DFT)")
    flags = {"inverse": int(inverse), "onesided": int(onesided)}
    if e.opset >= 20:
        return e.node("DFT", [x, "", e.scalar(axis, dt.int64)], **flags)
    return e.node("DFT", [x], axis=axis, **flags)


def _scale(e, x: str, sizes, power: float, dtype) -> str:
    """``x`` times ``(product of sizes) ** power``."""
    n = 1
    for s in sizes:
        n = n * s
    if isinstance(n, int):
        factor = e.scalar(float(n) ** power, dtype)
    else:
        factor = e.node("Pow", [e.cast(e.dim(n), dtype), e.scalar(power, dtype)])
    return e.node("Mul", [x, factor])


# (the power of n each norm scales by: forward transforms, then ONNX's inverse, which divides
# by n already)
_FORWARD = {"backward": 0.0, "ortho": -0.5, "forward": -1.0}
_INVERSE = {"backward": 0.0, "ortho": 0.5, "forward": 1.0}


def _normed(e, x, sizes, norm, inverse, dtype):
    power = (_INVERSE if inverse else _FORWARD)[norm]
    return x if power == 0.0 else _scale(e, x, sizes, power, dtype)


def _c2c(e):
    a, x = e.attrs, e.inputs[0]
    shape, dtype = e.in_types[0].shape, real_dtype(e.in_types[0])
    for axis in a["axes"]:
        x = _dft(e, x, axis, a["inverse"])
    return _normed(e, x, [shape[i] for i in a["axes"]], a["norm"], a["inverse"], dtype)


def _r2c(e):
    a, x = e.attrs, e.inputs[0]
    shape, dtype = e.in_types[0].shape, e.in_types[0].dtype
    *rest, last = a["axes"]
    y = _dft(e, e.node("Unsqueeze", [x, e.ints([-1])]), last, False, onesided=True)
    for axis in rest:
        y = _dft(e, y, axis, False)
    return _normed(e, y, [shape[i] for i in a["axes"]], a["norm"], False, dtype)


def _c2r(e):
    """The inverse over the other axes, then the last axis's full Hermitian spectrum rebuilt
    (entry n - k is the conjugate of entry k) and inverted; its real part. (The imaginary parts
    of the zero and Nyquist entries fall into the dropped imaginary part, as in PyTorch.)"""
    a, x = e.attrs, e.inputs[0]
    shape, dtype = e.in_types[0].shape, dt.to_real(e.in_types[0].dtype)
    *rest, last = a["axes"]
    n = a["last_size"]
    for axis in rest:
        x = _dft(e, x, axis, True)
    mirrored = n - (n // 2 + 1)  # entries 1 .. mirrored appear again, conjugated, reversed
    if mirrored:
        start = e.ints([mirrored]) if isinstance(mirrored, int) else e.dim(mirrored)
        tail = e.node("Slice", [x, start, e.ints([0]), e.ints([last]), e.ints([-1])])
        tail = e.node("Mul", [tail, e.constant(np.asarray([1.0, -1.0], dtype.np))])
        x = e.node("Concat", [x, tail], axis=last)
    y = part(e, _dft(e, x, last, True), 0)
    sizes = [shape[i] for i in rest] + [n]
    return _normed(e, y, sizes, a["norm"], True, dtype)


def fft_rule(kind: str):
    """The onnx rule of ``fft_c2c``, ``fft_r2c`` or ``fft_c2r``."""
    return pairs(None, {"c2c": _c2c, "r2c": _r2c, "c2r": _c2r}[kind])


# ------------------------------------------------------------------------------ elementwise


def binary(op_type: str):
    """Add, Sub, Mul or Div with a complex operand: a real operand of Mul or Div scales both
    parts (its last axis added); otherwise the operands are lifted to pairs, and complex
    products and quotients take the complex formulas."""

    def rule(e):
        (a, b), (ta, tb) = e.inputs, e.in_types
        if op_type in ("Mul", "Div") and not tb.dtype.is_complex:
            return e.node(op_type, [a, e.node("Unsqueeze", [b, e.ints([-1])])])
        if op_type == "Mul" and not ta.dtype.is_complex:
            return e.node(op_type, [e.node("Unsqueeze", [a, e.ints([-1])]), b])
        a, b = lift(e, a, ta), lift(e, b, tb)
        if op_type in ("Add", "Sub"):
            return e.node(op_type, [a, b])
        if op_type == "Mul":
            return complex_product(e, a, b)
        # a / b = a * conj(b) / |b|^2
        br, bi = part(e, b, 0), part(e, b, 1)
        norm = e.node("Add", [e.node("Mul", [br, br]), e.node("Mul", [bi, bi])])
        top = complex_product(e, a, b, conjugate_b=True)
        return e.node("Div", [top, e.node("Unsqueeze", [norm, e.ints([-1])])])

    rule.__name__ = f"onnx_complex_{op_type}"
    return rule


def magnitude(e):
    """|z| = hypot(re, im), scaled by the larger part so that squares do not overflow."""
    x = e.inputs[0]
    dtype = real_dtype(e.in_types[0])
    re, im = e.node("Abs", [part(e, x, 0)]), e.node("Abs", [part(e, x, 1)])
    big, small = e.node("Max", [re, im]), e.node("Min", [re, im])
    safe = e.node("Where", [e.node("Equal", [big, e.scalar(0, dtype)]), e.scalar(1, dtype), big])
    ratio = e.node("Div", [small, safe])
    root = e.node("Sqrt", [e.node("Add", [e.scalar(1, dtype), e.node("Mul", [ratio, ratio])])])
    return e.node("Mul", [big, root])


def cast(e):
    """A cast from, to or between complex dtypes: pairs cast part-wise; to a real dtype the
    real part (the cast ember allows only where asked to drop the imaginary part)."""
    x, source, target = e.inputs[0], e.in_types[0], e.attrs["dtype"]
    if source.dtype.is_complex and not target.is_complex:
        return e.cast(part(e, x, 0), target)
    if not source.dtype.is_complex:
        x = lift(
            e, e.cast(x, dt.to_real(target)), e.out_types[0]._replace(dtype=dt.to_real(target))
        )
        return x
    return e.cast(x, dt.to_real(target))


def exp(e):
    """e^(a + bi) = e^a (cos b + i sin b)."""
    x = e.inputs[0]
    grow = e.node("Exp", [part(e, x, 0)])
    turn = part(e, x, 1)
    return join(
        e,
        e.node("Mul", [grow, e.node("Cos", [turn])]),
        e.node("Mul", [grow, e.node("Sin", [turn])]),
    )


def angle(e):
    """atan2(imag, real) from Atan of their ratio, moved by pi where the real part is negative;
    0 where both are (as PyTorch's)."""
    x = e.inputs[0]
    dtype = real_dtype(e.in_types[0])
    re, im = part(e, x, 0), part(e, x, 1)
    zero, pi = e.scalar(0, dtype), e.scalar(np.pi, dtype)
    turn = e.node("Where", [e.node("Less", [im, zero]), e.node("Neg", [pi]), pi])
    turn = e.node("Where", [e.node("Less", [re, zero]), turn, zero])
    out = e.node("Add", [e.node("Atan", [e.node("Div", [im, re])]), turn])
    both = e.node("And", [e.node("Equal", [re, zero]), e.node("Equal", [im, zero])])
    return e.node("Where", [both, zero, out])


def reduce_sum(e):
    """A sum of pairs: over the same axes, counted from the front (the parts' axis stays)."""
    from ._onnx import reduce

    x, n = e.inputs[0], len(e.in_types[0].shape)
    if e.in_types[0].dtype is not e.out_types[0].dtype:
        x = e.cast(x, real_dtype(e.out_types[0]))
    return reduce(e, "ReduceSum", x, [a % n for a in e.attrs["axes"]], e.attrs["keepdims"])


def where(e):
    """where(cond, a, b) of complex values: the condition along the parts' axis too, a real
    branch lifted to a pair."""
    (cond, a, b), (_, ta, tb) = e.inputs, e.in_types
    cond = e.node("Unsqueeze", [cond, e.ints([-1])])
    return e.node("Where", [cond, lift(e, a, ta), lift(e, b, tb)])
