"""The remaining ONNX operators: bitwise (BitShift, BitwiseAnd/Or/Xor/Not, BitCast), Det, the
random operators (RandomUniform/Normal and their Like forms, Bernoulli, Multinomial) and the
string operators (StringConcat, StringSplit, StringNormalizer, RegexFullMatch).

Bitwise ops on ember's integer types use ember's bitwise ops (so they capture); uint16/32/64
are computed in NumPy from the data (see elementwise.py's `numpy_op`). BitCast reinterprets
bytes in NumPy (ember has no dtype view), and the string ops work on NumPy object arrays: both
need the data, so a captured model with them runs eagerly.

A random operator with a ``seed`` attribute draws from its own `ember.Generator` seeded from it
once per loaded model, so two loads of a model draw the same sequence (each call draws anew,
as onnxruntime's kernels do); without a seed it draws from ember's default generator.
"""

from __future__ import annotations

import re
import unicodedata
import weakref

import numpy as np

from ...random import Generator
from .._convert import converter, ember_dtype, supported_dtype
from ._common import E, dtype_np, np_dtype
from .elementwise import lacks_dtype, numpy_op

# ---------------------------------------------------------------------------------------------
# bitwise


def _np_shift(left: bool):
    def shift(x, y):
        bits = x.dtype.itemsize * 8
        inside = (y >= 0) & (y < bits)
        amount = np.where(inside, y, 0).astype(x.dtype)
        out = np.left_shift(x, amount) if left else np.right_shift(x, amount)
        fill = np.zeros((), x.dtype)
        if not left and x.dtype.kind == "i":
            fill = np.where(x < 0, np.array(-1, x.dtype), fill)
        return np.where(inside, out, fill).astype(x.dtype)

    return shift


@converter("BitShift", 11)
def _bitshift(ctx, x, y):
    direction = ctx.attr("direction")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.error(f"direction must be LEFT or RIGHT, got {direction!r}")
    left = direction == "LEFT"
    if lacks_dtype(x, y):
        return numpy_op(ctx, _np_shift(left), x, y, like=0)
    fn = E.bitwise_left_shift if left else E.bitwise_right_shift
    return fn(ctx.tensor(x), ctx.tensor(y))


def _bitwise(fn, np_fn):
    def convert(ctx, *xs):
        if lacks_dtype(*xs):
            return numpy_op(ctx, np_fn, *xs, like=0)
        return fn(*(ctx.tensor(x) for x in xs))

    return convert


converter("BitwiseAnd", 18)(_bitwise(E.bitwise_and, np.bitwise_and))
converter("BitwiseOr", 18)(_bitwise(E.bitwise_or, np.bitwise_or))
converter("BitwiseXor", 18)(_bitwise(E.bitwise_xor, np.bitwise_xor))
converter("BitwiseNot", 18)(_bitwise(E.bitwise_not, np.invert))


@converter("BitCast", 26)
def _bitcast(ctx, x):
    target = np_dtype(ctx.attr("to"), ctx.label)
    array = ctx.static(x, "BitCast's input")
    if target.kind in "OSU" or array.dtype.kind in "OSU":
        raise ctx.error("BitCast from or to strings is not defined")
    if target.itemsize != array.dtype.itemsize:
        raise ctx.error(
            f"BitCast needs types of one width: {array.dtype.name} ({array.dtype.itemsize * 8} "
            f"bits) to {target.name} ({target.itemsize * 8} bits)"
        )
    return np.ascontiguousarray(array).view(target).reshape(array.shape)


# ---------------------------------------------------------------------------------------------
# linear algebra


@converter("Det", 11)
def _det(ctx, x):
    x = ctx.tensor(x)
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
        raise ctx.error(f"Det needs square matrices [..., M, M], got shape {tuple(x.shape)}")
    return E.det(x)


# ---------------------------------------------------------------------------------------------
# random

_GENERATORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _generator(ctx):
    """The node's own generator when it has a seed (made once per loaded graph), else None."""
    if not ctx.has_attr("seed"):
        return None
    per_graph = _GENERATORS.setdefault(ctx.runner, {})
    key = id(ctx.node)
    if key not in per_graph:
        # the seed is a float attribute: its bits make the integer seed (1.0 and 1.5 differ)
        seed = int(np.asarray(float(ctx.attr("seed")), np.float64).view(np.uint64))
        per_graph[key] = Generator(seed % (2**63))
    return per_graph[key]


def _float_type(ctx, code, default):
    dtype = np_dtype(code, ctx.label) if code else np.dtype(default)
    if dtype.kind != "f" and dtype.name != "bfloat16":
        raise ctx.error(f"the random values' dtype must be a float type, got {dtype.name}")
    return ember_dtype(dtype, ctx.label)


def _like_dtype(ctx, x):
    return dtype_np(x) if not ctx.has_attr("dtype") else np_dtype(ctx.attr("dtype"), ctx.label)


@converter("RandomUniform", 1, random=True)
def _random_uniform(ctx):
    dtype = _float_type(ctx, ctx.attr("dtype", 1), np.float32)
    shape = tuple(int(d) for d in ctx.attr("shape"))
    low, high = float(ctx.attr("low", 0.0)), float(ctx.attr("high", 1.0))
    return E.uniform(low, high, shape, generator=_generator(ctx), dtype=dtype)


@converter("RandomNormal", 1, random=True)
def _random_normal(ctx):
    dtype = _float_type(ctx, ctx.attr("dtype", 1), np.float32)
    shape = tuple(int(d) for d in ctx.attr("shape"))
    mean, scale = float(ctx.attr("mean", 0.0)), float(ctx.attr("scale", 1.0))
    return E.normal(mean, scale, shape, generator=_generator(ctx), dtype=dtype)


@converter("RandomUniformLike", 1, random=True)
def _random_uniform_like(ctx, x):
    dtype = _float_type(ctx, 0, _like_dtype(ctx, x))
    low, high = float(ctx.attr("low", 0.0)), float(ctx.attr("high", 1.0))
    shape = tuple(int(d) for d in x.shape)
    return E.uniform(low, high, shape, generator=_generator(ctx), dtype=dtype)


@converter("RandomNormalLike", 1, random=True)
def _random_normal_like(ctx, x):
    dtype = _float_type(ctx, 0, _like_dtype(ctx, x))
    mean, scale = float(ctx.attr("mean", 0.0)), float(ctx.attr("scale", 1.0))
    shape = tuple(int(d) for d in x.shape)
    return E.normal(mean, scale, shape, generator=_generator(ctx), dtype=dtype)


@converter("Bernoulli", 15, random=True)
def _bernoulli(ctx, p):
    p = ctx.tensor(p)
    out = E.bernoulli(p, generator=_generator(ctx))
    target = np_dtype(ctx.attr("dtype"), ctx.label) if ctx.has_attr("dtype") else dtype_np(p)
    if not supported_dtype(target):  # (uint16/32/64: the 0/1 draws in NumPy's type)
        return ctx.static(out, "the draws").astype(target)
    return E.cast(out, ember_dtype(target, ctx.label))


@converter("Multinomial", 7, random=True)
def _multinomial(ctx, x):
    x = ctx.tensor(x)
    if len(x.shape) != 2:
        raise ctx.error(f"Multinomial's input must be [batch_size, class_size], got {x.shape}")
    # the input holds unnormalized log-probabilities
    weights = E.softmax(E.cast(x, ember_dtype(np.float64, ctx.label)), -1)
    draws = E.multinomial(weights, int(ctx.attr("sample_size", 1)), True, generator=_generator(ctx))
    return E.cast(draws, ember_dtype(np_dtype(ctx.attr("dtype", 6), ctx.label), ctx.label))


# ---------------------------------------------------------------------------------------------
# strings (NumPy object arrays)


def _strings(ctx, value, what="the input") -> np.ndarray:
    array = ctx.static(value, what)
    if array.dtype.kind not in "OSU":
        raise ctx.error(f"{what} must be a string tensor, got {array.dtype.name}")
    return array.astype(object)


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


@converter("StringConcat", 20)
def _string_concat(ctx, x, y):
    a, b = np.broadcast_arrays(_strings(ctx, x, "X"), _strings(ctx, y, "Y"))
    out = np.empty(a.shape, dtype=object)
    for index in np.ndindex(a.shape):
        out[index] = _text(a[index]) + _text(b[index])
    return out


@converter("RegexFullMatch", 20)
def _regex_full_match(ctx, x):
    pattern = _text(ctx.attr("pattern", ""))
    try:
        compiled = re.compile(pattern)
    except re.error as err:
        raise ctx.error(f"invalid pattern {pattern!r}: {err}") from None
    array = _strings(ctx, x, "X")
    out = np.zeros(array.shape, dtype=bool)
    for index in np.ndindex(array.shape):
        out[index] = compiled.fullmatch(_text(array[index])) is not None
    return out


@converter("StringSplit", 20)
def _string_split(ctx, x):
    array = _strings(ctx, x, "X")
    delimiter = ctx.attr("delimiter", None)
    delimiter = None if delimiter is None or _text(delimiter) == "" else _text(delimiter)
    maxsplit = ctx.attr("maxsplit", None)
    maxsplit = -1 if maxsplit is None else int(maxsplit)
    parts = np.empty(array.shape, dtype=object)
    counts = np.zeros(array.shape, dtype=np.int64)
    for index in np.ndindex(array.shape):
        text = _text(array[index])
        # without a delimiter: split on runs of whitespace, leading/trailing ignored (str.split)
        pieces = text.split(delimiter, maxsplit)
        parts[index], counts[index] = pieces, len(pieces)
    width = int(counts.max(initial=0))
    out = np.full(array.shape + (width,), "", dtype=object)
    for index in np.ndindex(array.shape):
        for k, piece in enumerate(parts[index]):
            out[index + (k,)] = piece
    return out, counts


@converter("StringNormalizer", 10)
def _string_normalizer(ctx, x):
    array = _strings(ctx, x, "X")
    if array.ndim not in (1, 2) or (array.ndim == 2 and array.shape[0] != 1):
        raise ctx.error(f"StringNormalizer takes [C] or [1, C] strings, got {array.shape}")
    action = _text(ctx.attr("case_change_action", "NONE"))
    if action not in ("NONE", "LOWER", "UPPER"):
        raise ctx.error(f"case_change_action must be NONE, LOWER or UPPER, got {action!r}")
    sensitive = bool(ctx.attr("is_case_sensitive", 0))
    stopwords = [_text(w) for w in ctx.attr("stopwords", [])]
    if sensitive:
        stops = set(stopwords)
    else:
        stops = {w.casefold() for w in stopwords}
    words = []
    for value in array.reshape(-1):
        word = _text(value)
        if (word if sensitive else word.casefold()) in stops:
            continue
        word = unicodedata.normalize("NFC", word)
        if action == "LOWER":
            word = word.lower()
        elif action == "UPPER":
            word = word.upper()
        words.append(word)
    if not words:  # ONNX: everything removed leaves one empty string
        words = [""]
    out = np.array(words, dtype=object)
    return out.reshape(1, -1) if array.ndim == 2 else out
