"""Random primitives. Each draws from an `ember.Generator` passed as the ``generator``
attribute (the default generator when the user gives none), so results are reproducible.

Half-precision samples are drawn in float32 and rounded.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from .. import random_box_muller as box_muller
from .. import random_streams as streams
from ..errors import ArgumentError, DTypeError, ShapeError
from ..kernels import crandom
from ..random import resolve
from ..types import TensorType
from . import _item_scalars as _items
from . import api as E
from ._limited import refuse_limited
from ._registry import OpDef, apply, export, register
from ._util import (
    elementwise_cost,
    half_precision,
    require_float,
    same_type,
    size_arg,
    value_bytes,
)
from .promotion import promote, to_tensor


def _float_dtype(dtype):
    d = dt.get_default_dtype() if dtype is None else dt.as_dtype(dtype)
    if not d.is_floating_point:
        raise DTypeError(f"needs a floating dtype, got {d}", op="random")
    return d


def _draw_dtype(d):
    return d.np if d in (dt.float32, dt.float64) else np.float32


def _creation_infer(*, shape, dtype, generator, **_):
    return TensorType(shape, dtype)


# The kernels draw PyTorch's CPU streams (ember/random_streams.py), block by block into the
# result, so the same seed gives PyTorch's values.


def _uniform_kernel(*, shape, dtype, low, high, generator):
    out = np.empty(shape, dtype.np)
    streams.uniform_into(out, generator, low, high)
    return out


def _normal_kernel(*, shape, dtype, mean, std, generator, serial=False):
    out = np.empty(shape, dtype.np)
    if serial:  # (PyTorch's normal_distribution<double>, one value at a time, at any size)
        streams.normal_serial_into(out, generator, mean, std)
    else:
        streams.normal_into(out, generator, mean, std)
    return out


def _normal_fast(*, shape, dtype, mean, std, generator, serial=False):
    """float32 draws with the Box-Muller step in C (kernels/crandom.py, the same bits); None
    before anything is drawn where it does not apply."""
    if serial or dtype.np != np.float32 or not crandom.available():
        return None
    out = np.empty(shape, np.float32)
    streams.normal_into(out, generator, mean, std, box_muller_32=crandom.box_muller_16_float32)
    return out


def _randint_kernel(*, shape, dtype, low, high, generator):
    out = np.empty(shape, dtype.np)
    streams.integers_into(out, generator, low, high)
    return out


def _randperm_kernel(*, shape, dtype, generator):
    return streams.permutation(generator, shape[0]).astype(dtype.np, copy=False)


# The kernels' temporaries (ember/random_streams.py), per element of a block of at most
# `streams.CHUNK` drawn at once, each block's freed before the next's: the words (8 bytes
# each, as uint64) and their float64 transform, 16 bytes; 24 where each draw takes two words.


def _numel(value) -> int:
    """Elements of a value (a symbolic size counting 1, as `value_bytes`)."""
    return value_bytes(value) // value.dtype.itemsize


def _uniform_workspace(node, layouts) -> int:
    """16 bytes per element of a block; 24 for float64 results (two words a draw)."""
    out = node.outputs[0]
    return (24 if out.dtype.itemsize == 8 else 16) * min(_numel(out), streams.CHUNK)


def _normal_workspace(node, layouts) -> int:
    """The uniform draws' (float64's Box-Muller step's two half-block temporaries are
    smaller), or float32's Box-Muller step's where larger (random_box_muller.py's buffers, a
    slice of at most `ROWS` rows of 16); a 16-bit result draws whole blocks of 16 as float32
    beside those, 20 bytes an element."""
    out = node.outputs[0]
    size = _numel(out)
    if half_precision(out) and size >= 16:
        return 20 * min(-(-size // 16) * 16, streams.CHUNK)
    draws = _uniform_workspace(node, layouts)
    if out.dtype.np == np.float32 and size >= 16:
        rows = min(size // 16, streams.CHUNK // 16, box_muller.ROWS)
        return max(draws, box_muller.BYTES_PER_ROW * rows)
    return draws


def _randint_workspace(node, layouts) -> int:
    """The words, transformed in place: 8 bytes an element; 24 where a range of 2**32 or more
    takes two words a draw (int64 and floating results)."""
    out = node.outputs[0]
    span = node.attrs["high"] - node.attrs["low"]
    wide = span >= 1 << 32 and (out.dtype.is_floating_point or out.dtype.name == "int64")
    return (24 if wide else 8) * min(_numel(out), streams.CHUNK)


def _permutation_workspace(node, layouts) -> int:
    """PyTorch's swaps run over Python lists: the words' and the order's, each element a
    pointer and an int object (measured: 80 bytes per element)."""
    n = node.outputs[0].shape[0]
    return 80 * n if isinstance(n, int) else 0


_UNIFORM = register(
    OpDef(
        name="random_uniform",
        kind="random",
        infer=_creation_infer,
        kernel=_uniform_kernel,
        cost=elementwise_cost(1),
        workspace=_uniform_workspace,
        doc="uniform samples in [low, high)",
    )
)
_NORMAL = register(
    OpDef(
        name="random_normal",
        kind="random",
        infer=_creation_infer,
        kernel=_normal_kernel,
        fast=_normal_fast,
        cost=elementwise_cost(1),
        workspace=_normal_workspace,
        doc="normal samples with mean and std",
    )
)
_RANDINT = register(
    OpDef(
        name="random_randint",
        kind="random",
        infer=_creation_infer,
        kernel=_randint_kernel,
        cost=elementwise_cost(1),
        workspace=_randint_workspace,
        doc="integers uniform in [low, high)",
    )
)
_RANDPERM = register(
    OpDef(
        name="random_randperm",
        kind="random",
        infer=_creation_infer,
        kernel=_randperm_kernel,
        cost=elementwise_cost(1),
        workspace=_permutation_workspace,
        doc="a random permutation of 0..n-1",
    )
)


def _bernoulli_infer(p, *, generator):
    require_float("bernoulli", p)
    return same_type(p)


def _bernoulli_kernel(p, *, generator):
    out = np.empty(p.shape, p.dtype)
    streams.bernoulli_into(out, generator, p)
    return out


def _bernoulli_workspace(node, layouts) -> int:
    """Per element of a block: the uniform draws of the probabilities' precision (4 or 8
    bytes) beside their words and transform (16, or 24 where a double draw takes two words);
    the comparison works block by block too (measured: 20 and 32 bytes)."""
    out = node.outputs[0]
    return (32 if out.dtype.itemsize == 8 else 20) * min(_numel(out), streams.CHUNK)


_BERNOULLI = register(
    OpDef(
        name="random_bernoulli",
        kind="random",
        infer=_bernoulli_infer,
        kernel=_bernoulli_kernel,
        cost=elementwise_cost(1),
        workspace=_bernoulli_workspace,
        doc="1 with probability p (elementwise), else 0",
    )
)


def _bernoulli_scalar_kernel(*, shape, dtype, p, generator):
    out = np.empty(shape, dtype.np)
    streams.bernoulli_scalar_into(out, generator, p)
    return out


def _bernoulli_scalar_workspace(node, layouts) -> int:
    """Per element of a block: two words a draw (16 bytes) and the 64-bit draw made of them
    (8); the transform and the comparison come after the words are freed."""
    return 24 * min(_numel(node.outputs[0]), streams.CHUNK)


_BERNOULLI_SCALAR = register(
    OpDef(
        name="random_bernoulli_scalar",
        kind="random",
        infer=_creation_infer,
        kernel=_bernoulli_scalar_kernel,
        cost=elementwise_cost(1),
        workspace=_bernoulli_scalar_workspace,
        doc="1 with probability p (a number) at every element of the shape, else 0",
    )
)


def serial_normal(shape, mean: float, std: float, *, generator=None):
    """float64 normal draws of a shape as PyTorch's ``normal_distribution<double>`` makes them
    one at a time (a Box-Muller pair of double uniforms, its second value kept for the next
    draw), at any size: what its log_normal_ transforms."""
    return apply(
        _NORMAL,
        shape=tuple(shape),
        dtype=dt.float64,
        mean=float(mean),
        std=float(std),
        generator=resolve(generator),
        serial=True,
    )


def bernoulli_scalar(shape, p: float, *, dtype, generator=None):
    """Bernoulli(p) draws of a shape: PyTorch's ``empty(shape).bernoulli_(p)``."""
    return apply(
        _BERNOULLI_SCALAR,
        shape=tuple(shape),
        dtype=dt.as_dtype(dtype),
        p=float(p),
        generator=resolve(generator),
    )


def _grad_flag(t, requires_grad):
    return t.requires_grad_() if requires_grad else t


@export
def rand(*size, generator=None, dtype=None, requires_grad=False):
    """Uniform samples in [0, 1), PyTorch's draws after the same seed. A complex dtype draws
    the real and imaginary parts each uniform in [0, 1), as PyTorch (its values too)."""
    if dtype is not None and dt.as_dtype(dtype).is_complex:
        shape = size_arg("rand", size)
        pairs = rand(*shape, 2, generator=generator, dtype=dt.to_real(dt.as_dtype(dtype)))
        return _grad_flag(E.view_as_complex(pairs), requires_grad)
    return _grad_flag(
        apply(
            _UNIFORM,
            shape=size_arg("rand", size),
            dtype=_float_dtype(dtype),
            low=0.0,
            high=1.0,
            generator=resolve(generator),
        ),
        requires_grad,
    )


@export
def randn(*size, generator=None, dtype=None, requires_grad=False):
    """Standard normal samples. A complex dtype draws the real and imaginary parts each with
    variance 1/2 (PyTorch's split: ``E|z|^2 = 1``), as pairs of normals of its parts' dtype
    (PyTorch's values after the same seed, float32 within an ulp or two)."""
    if dtype is not None and dt.as_dtype(dtype).is_complex:
        complex_dtype = dt.as_dtype(dtype)
        shape = size_arg("randn", size)
        pairs = randn(*shape, 2, generator=generator, dtype=dt.to_real(complex_dtype))
        out = E.view_as_complex(pairs * math.sqrt(0.5))
        return _grad_flag(out, requires_grad)
    return _grad_flag(
        apply(
            _NORMAL,
            shape=size_arg("randn", size),
            dtype=_float_dtype(dtype),
            mean=0.0,
            std=1.0,
            generator=resolve(generator),
        ),
        requires_grad,
    )


@export
def uniform(low=0.0, high=1.0, size=(), *, generator=None, dtype=None):
    """Uniform samples in [low, high) of the given size."""
    if _items.any_item(low, high):  # (traced .item()s: unit draws scaled by their tensors)
        _refuse_complex_items("uniform", dtype, low, high)
        unit = uniform(0.0, 1.0, size, generator=generator, dtype=dtype)
        return unit * (high - low) + low
    if high < low:
        raise ArgumentError(f"uniform: high ({high}) must not be below low ({low})")
    if dtype is not None and dt.as_dtype(dtype).is_complex:  # each part in [low, high)
        shape = size_arg("uniform", (size,) if isinstance(size, int) else size)
        real = dt.to_real(dt.as_dtype(dtype))
        pairs = uniform(low, high, (*shape, 2), generator=generator, dtype=real)
        return E.view_as_complex(pairs)
    return apply(
        _UNIFORM,
        shape=size_arg("uniform", (size,) if isinstance(size, int) else size),
        dtype=_float_dtype(dtype),
        low=float(low),
        high=float(high),
        generator=resolve(generator),
    )


def _refuse_complex_items(op, dtype, *values):
    if dtype is not None and dt.as_dtype(dtype).is_complex:
        for v in values:
            _items.refuse(v, op, "bound", "a number for complex draws")


@export
def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None):
    """Normal samples. ``mean``/``std`` may be floats (then ``size`` gives the shape) or tensors
    (broadcast together; the result has their shape)."""
    gen = resolve(generator)
    plain = (int, float)
    if _items.any_item(mean, std) and all(
        isinstance(v, plain) or _items.is_item(v) for v in (mean, std)
    ):
        # traced .item()s: standard draws of ``size`` scaled by their tensors
        _refuse_complex_items("normal", dtype, mean, std)
        unit = normal(0.0, 1.0, size, generator=gen, dtype=dtype)
        return unit * std + mean
    if isinstance(mean, plain) and isinstance(std, plain):
        if std < 0:
            raise ArgumentError(f"normal: std must be non-negative, got {std}")
        shape = size_arg("normal", (size,) if isinstance(size, int) else (size or ()))
        if dtype is not None and dt.as_dtype(dtype).is_complex:
            # PyTorch's: each part has the mean and variance std**2 / 2 (E|z - mean|^2 = std^2)
            real = dt.to_real(dt.as_dtype(dtype))
            pairs = normal(mean, std * math.sqrt(0.5), (*shape, 2), generator=gen, dtype=real)
            return E.view_as_complex(pairs)
        return apply(
            _NORMAL,
            shape=shape,
            dtype=_float_dtype(dtype),
            mean=float(mean),
            std=float(std),
            generator=gen,
        )
    mean, std = promote(mean, std, floating=True)
    from ._util import broadcast_shapes

    shape = broadcast_shapes("normal", mean.shape, std.shape)
    noise = apply(_NORMAL, shape=shape, dtype=mean.dtype, mean=0.0, std=1.0, generator=gen)
    return mean + noise * std


@export
def randint(low, high=None, size=(), *, generator=None, dtype=None):
    """Integers uniform in [low, high) (``randint(high, size)`` starts at 0), int64 by default."""
    if high is None:
        low, high = 0, low
    elif isinstance(high, (tuple, list)):  # randint(high, size), as torch.randint(3, (2,))
        low, high, size = 0, low, high
    if high <= low:
        raise ArgumentError(f"high ({high}) must exceed low ({low})", op="randint")
    d = dt.int64 if dtype is None else dt.as_dtype(dtype)
    check_draw_range("randint", low, high, d)
    return apply(
        _RANDINT,
        shape=size_arg("randint", (size,) if isinstance(size, int) else size),
        dtype=d,
        low=int(low),
        high=int(high),
        generator=resolve(generator),
    )


# the C names PyTorch's range errors give its integer types
_C_NAMES = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short",
            "int32": "int", "int64": "long"}  # fmt: skip


def check_draw_range(op: str, low, high, dtype) -> None:
    """PyTorch's refusal of integer draws in ``[low, high)`` that the dtype cannot hold."""
    name = _C_NAMES.get(dtype.name)
    if name is None:
        return
    info = (0, 1) if dtype.is_bool else (int(np.iinfo(dtype.np).min), int(np.iinfo(dtype.np).max))
    if not info[0] <= low <= info[1]:
        raise ArgumentError(f"from is out of bounds for {name}", op=op)
    if not info[0] <= high - 1 <= info[1]:
        raise ArgumentError(f"to - 1 is out of bounds for {name}", op=op)


@export
def randperm(n: int, *, generator=None, dtype=None):
    """A random permutation of 0..n-1 (int64)."""
    if n < 0:
        raise ShapeError(f"n must be non-negative, got {n}", op="randperm")
    d = dt.int64 if dtype is None else dt.as_dtype(dtype)
    refuse_limited("randperm", d)
    return apply(_RANDPERM, shape=(int(n),), dtype=d, generator=resolve(generator))


@export(method=True)
def bernoulli(p, *, generator=None):
    """1 with probability ``p`` (a tensor of probabilities), else 0; same dtype as ``p``."""
    p = to_tensor(p)
    return apply(_BERNOULLI, p, generator=resolve(generator))


@export(method=True)
def rand_like(x, *, generator=None, dtype=None):
    """Uniform draws shaped like ``x``; PyTorch fills ``empty_like(x)``, which keeps a strided
    x's layout, in memory order, and so does this (`_memory_order`)."""
    order = _memory_order(x)
    if order is None:
        return rand(*x.shape, generator=generator, dtype=dtype or x.dtype)
    drawn = rand(*[x.shape[d] for d in order], generator=generator, dtype=dtype or x.dtype)
    return E.permute(drawn, [order.index(d) for d in range(len(order))])


@export(method=True)
def randn_like(x, *, generator=None, dtype=None):
    """Normal draws shaped like ``x``. For a strided x PyTorch fills ``empty_like(x)`` in
    memory order, by its serial double sampler (its vectorized one takes contiguous tensors
    only), and so does this."""
    order = _memory_order(x)
    if order is None:
        return randn(*x.shape, generator=generator, dtype=dtype or x.dtype)
    d = _float_dtype(dtype or x.dtype)
    shape = [x.shape[i] for i in order]
    drawn = E.cast(serial_normal(shape, 0.0, 1.0, generator=generator), d)
    return E.permute(drawn, [order.index(i) for i in range(len(order))])


def _memory_order(x):
    """x's dims from the slowest-varying in memory to the fastest (size-1 dims anywhere), or
    None where that is the row-major order (a contiguous x, or one of under two dims)."""
    shape = tuple(x.shape)
    if len(shape) < 2:
        return None
    strides = x.stride()
    order = sorted(range(len(shape)), key=lambda d: (-strides[d] if shape[d] > 1 else 0, d))
    moving = [d for d in order if shape[d] > 1]  # (a dim of size 1 holds one element)
    return None if moving == sorted(moving) else order


@export
def randint_like(x, low=0, high=None, *, generator=None, dtype=None):
    """Integers uniform in [low, high) shaped like ``x``, in x's dtype (``randint_like(x,
    high)`` starts at 0), as PyTorch's."""
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(x.shape), generator=generator, dtype=dtype or x.dtype)


def in_fill_order(tensor, fill):
    """``fill`` (old value -> new value, drawn in row-major order of old's shape) made to draw
    in the order PyTorch's in-place fills visit ``tensor``'s elements: its TensorIterator's,
    memory order for a permuted layout (a transposed weight, channels-last), row-major for a
    slice. ``fill`` sees old's dims in that order and its draws are permuted back."""
    order = _memory_order(tensor)
    if order is None:
        return fill
    back = [order.index(d) for d in range(len(order))]
    return lambda old: E.permute(fill(E.permute(old, order)), back)


# in-place fills (used by nn.init); they write under the in-place protocol, each element's
# draw PyTorch's for its place in the tensor's layout (`in_fill_order`)
def _uniform_(self, a=0.0, b=1.0, *, generator=None):
    return self._inplace(
        "uniform_",
        in_fill_order(
            self, lambda old: uniform(a, b, old.shape, generator=generator, dtype=old.dtype)
        ),
    )


def _normal_(self, mean=0.0, std=1.0, *, generator=None):
    """PyTorch's vectorized normals for a contiguous tensor; its serial double sampler, in
    its fill order, for a strided one (a slice, a transposed weight)."""
    if self.is_contiguous():
        return self._inplace(
            "normal_",
            lambda old: normal(mean, std, old.shape, generator=generator, dtype=old.dtype),
        )

    def serial(old):
        _float_dtype(old.dtype)
        draws = serial_normal(tuple(old.shape), mean, std, generator=generator)
        return E.cast(draws, old.dtype)

    return self._inplace("normal_", in_fill_order(self, serial))


def _bernoulli_(self, p=0.5, *, generator=None):
    """In place: Bernoulli(p) draws, p a number (PyTorch's scalar draws) or a tensor of
    probabilities broadcast to the tensor's shape."""
    if isinstance(p, (int, float)):
        return self._inplace(
            "bernoulli_",
            in_fill_order(
                self,
                lambda old: bernoulli_scalar(old.shape, p, dtype=old.dtype, generator=generator),
            ),
        )
    shape = tuple(self.shape)
    order = _memory_order(self) or list(range(len(shape)))
    back = [order.index(d) for d in range(len(order))]

    def fill(old):  # (each probability visited with its element, in the fill order)
        probabilities = E.broadcast_to(E.cast(to_tensor(p), old.dtype), shape)
        return E.permute(bernoulli(E.permute(probabilities, order), generator=generator), back)

    return self._inplace("bernoulli_", fill)


export(_uniform_, name="uniform_", method=True, toplevel=False)
export(_normal_, name="normal_", method=True, toplevel=False)
export(_bernoulli_, name="bernoulli_", method=True, toplevel=False)
