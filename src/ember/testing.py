"""``ember.testing``: PyTorch's ``torch.testing`` helpers for tests written against ember:
`assert_close` (closeness with PyTorch's default tolerances per dtype and its mismatch
report) and `make_tensor` (a random tensor of a shape, dtype and value range).

As in PyTorch, a mismatch raises ``AssertionError`` (what test runners report as a failure),
and misuse of the arguments ``ValueError`` / ``TypeError``."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from . import dtypes as dt
from .tensor import Tensor

__all__ = ["assert_close", "make_tensor"]

# PyTorch's default (rtol, atol) per dtype; integers and bool compare exactly
_TOLERANCES = {
    dt.float16: (1e-3, 1e-5),
    dt.bfloat16: (1.6e-2, 1e-5),
    dt.float32: (1.3e-6, 1e-5),
    dt.float64: (1e-7, 1e-7),
}


def _default_tolerances(*dtypes) -> tuple[float, float]:
    pairs = [_TOLERANCES.get(d, (0.0, 0.0)) for d in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _fail(text: str, msg, path: str):
    if callable(msg):
        text = msg(text)
    elif msg is not None:
        text = msg
    if path:
        text += f"\n\nThe failure occurred for item {path}"
    raise AssertionError(text)


def _fmt(value) -> str:
    return repr(float(value)) if isinstance(value, (float, np.floating)) else repr(value)


def _compare_values(actual, expected, rtol, atol, equal_nan, what, msg, path):
    """Compare two float64 arrays of one shape; report as PyTorch does on a mismatch."""
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - e)
        close = (a == e) | (diff <= atol + rtol * np.abs(e))
    if equal_nan:
        close |= np.isnan(a) & np.isnan(e)
    if close.all():
        return
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = diff / np.abs(e)
    if what == "Scalars":
        _fail(
            f"Scalars are not close!\n\nExpected {_fmt(expected.item())} but got "
            f"{_fmt(actual.item())}.\nAbsolute difference: {_fmt(diff.item())} (up to {atol} "
            f"allowed)\nRelative difference: {_fmt(rel.item())} (up to {rtol} allowed)",
            msg,
            path,
        )
    bad = ~close
    total, count = a.size, int(bad.sum())

    def greatest(values):
        # the largest among the mismatches (NaN where a NaN mismatched, as PyTorch reports)
        masked = np.where(bad, values, -np.inf)
        flat = int(np.nanargmax(np.where(np.isnan(masked), np.inf, masked)))
        index = np.unravel_index(flat, a.shape) if a.ndim else ()
        return masked.reshape(-1)[flat], tuple(int(i) for i in index)

    abs_value, abs_index = greatest(diff)
    rel_value, rel_index = greatest(rel)
    _fail(
        f"{what} are not close!\n\nMismatched elements: {count} / {total} "
        f"({100.0 * count / total:.1f}%)\n"
        f"Greatest absolute difference: {_fmt(abs_value)} at index {abs_index} (up to {atol} "
        f"allowed)\nGreatest relative difference: {_fmt(rel_value)} at index {rel_index} (up "
        f"to {rtol} allowed)",
        msg,
        path,
    )


def _tensor_like(x) -> bool:
    return isinstance(x, (Tensor, np.ndarray)) or hasattr(x, "__array__") and hasattr(x, "dtype")


def _as_array_and_dtype(x):
    if isinstance(x, Tensor):
        return x.detach().numpy(), x.dtype
    if hasattr(x, "detach") and hasattr(x, "numpy"):  # another library's tensor (torch)
        x = x.detach()
        if str(getattr(x, "dtype", "")) == "torch.bfloat16":
            x = x.float()
        return np.asarray(x.numpy(force=True)), dt.from_numpy_dtype(
            np.asarray(x.numpy(force=True)).dtype
        )
    array = np.asarray(x)
    return array, dt.from_numpy_dtype(array.dtype)


def _check(actual, expected, rtol, atol, equal_nan, check_dtype, msg, path):
    if isinstance(actual, (str, bytes)) or isinstance(expected, (str, bytes)):
        raise TypeError(
            f"assert_close: no comparison for {type(actual).__name__} and {type(expected).__name__}"
        )
    if _tensor_like(actual) or _tensor_like(expected):
        if not (_tensor_like(actual) and _tensor_like(expected)):
            raise TypeError(
                f"assert_close: no comparison pair handles inputs of type "
                f"{type(actual).__name__} and {type(expected).__name__}"
            )
        a, a_dtype = _as_array_and_dtype(actual)
        e, e_dtype = _as_array_and_dtype(expected)
        if a.shape != e.shape:
            _fail(
                f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.",
                msg,
                path,
            )
        if check_dtype and a_dtype is not e_dtype:
            _fail(
                f"The values for attribute 'dtype' do not match: ember.{a_dtype.name} != "
                f"ember.{e_dtype.name}.",
                msg,
                path,
            )
        r, t = _tolerances(rtol, atol, a_dtype, e_dtype)
        _compare_values(a, e, r, t, equal_nan, "Tensor-likes", msg, path)
        return
    if isinstance(actual, (bool, int, float, complex)) and isinstance(
        expected, (bool, int, float, complex)
    ):
        if check_dtype and type(actual) is not type(expected):
            _fail(
                f"The values for attribute 'type' do not match: {type(actual)} != "
                f"{type(expected)}.",
                msg,
                path,
            )
        kinds = [dt.float64 if isinstance(v, float) else dt.int64 for v in (actual, expected)]
        r, t = _tolerances(rtol, atol, *kinds)
        _compare_values(
            np.asarray(actual), np.asarray(expected), r, t, equal_nan, "Scalars", msg, path
        )
        return
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            _fail(
                f"The keys of the mappings do not match:\nMissing keys in the actual mapping: "
                f"{sorted(map(repr, set(expected) - set(actual)))}\nAdditional keys in the "
                f"actual mapping: {sorted(map(repr, set(actual) - set(expected)))}",
                msg,
                path,
            )
        for key in expected:
            _check(
                actual[key], expected[key], rtol, atol, equal_nan, check_dtype, msg,
                f"{path}[{key!r}]",
            )  # fmt: skip
        return
    if isinstance(actual, Sequence) and isinstance(expected, Sequence):
        if len(actual) != len(expected):
            _fail(
                f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                msg,
                path,
            )
        for i, (a, e) in enumerate(zip(actual, expected)):
            _check(a, e, rtol, atol, equal_nan, check_dtype, msg, f"{path}[{i}]")
        return
    if actual is None and expected is None:
        return
    raise TypeError(
        f"assert_close: no comparison pair handles inputs of type {type(actual).__name__} "
        f"and {type(expected).__name__}"
    )


def _tolerances(rtol, atol, *dtypes):
    if rtol is None:
        return _default_tolerances(*dtypes)
    return rtol, atol


def assert_close(
    actual,
    expected,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    """``torch.testing.assert_close``: raise ``AssertionError`` unless ``actual`` and
    ``expected`` are close: ``|actual - expected| <= atol + rtol * |expected|`` elementwise
    (equal infinities are close; NaNs only with ``equal_nan``). Tensors (ember's, NumPy
    arrays, or another library's such as torch's) must agree in shape and, with
    ``check_dtype``, dtype; Python numbers compare as scalars; sequences and mappings compare
    item by item. ``rtol`` and ``atol`` come together or not at all; omitted, they are
    PyTorch's per dtype (float16 1e-3 / 1e-5, bfloat16 1.6e-2 / 1e-5, float32 1.3e-6 / 1e-5,
    float64 1e-7 / 1e-7, exact otherwise; the larger of the two dtypes'). The report names
    the mismatched count and the greatest absolute and relative differences with their
    indices; ``msg`` replaces it (a string) or rewrites it (a callable). ember has one device,
    one layout and no strides to compare: those flags are accepted and have nothing to
    check."""
    if (rtol is None) != (atol is None):
        raise ValueError(
            f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
            f"{'rtol' if rtol is None else 'atol'}."
        )
    _check(actual, expected, rtol, atol, equal_nan, check_dtype, msg, "")


# ------------------------------------------------------------------------------ make_tensor

_INT_RANGES = {
    dt.uint8: (0, 10),
    dt.int8: (-9, 10),
    dt.int16: (-9, 10),
    dt.int32: (-9, 10),
    dt.int64: (-9, 10),
}


def make_tensor(
    *shape,
    dtype,
    device=None,
    low=None,
    high=None,
    requires_grad: bool = False,
    noncontiguous: bool = False,
    exclude_zero: bool = False,
    memory_format=None,
) -> Tensor:
    """``torch.testing.make_tensor``: a tensor of ``shape`` (integers, or one sequence) and
    ``dtype`` filled with values drawn uniformly from ``[low, high)`` (floats: default
    [-9, 9]; signed integers [-9, 10), uint8 [0, 10), both clamped to the dtype's range;
    bool: True or False) from ember's default generator (``ember.manual_seed`` repeats
    them). ``exclude_zero`` replaces zeros (by the smallest positive normal for floats, 1 for
    integers); ``noncontiguous`` returns a strided view of the same values. ``device`` is
    checked to be the CPU (ember has no other) and ``memory_format`` must be None."""
    from . import ops  # (the op functions, registered by the time ember is imported)

    public = ops.PUBLIC
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    dtype = dt.as_dtype(dtype)
    if device is not None and not str(device).startswith("cpu"):
        raise ValueError(f"make_tensor: ember runs on the CPU only, got device={device!r}")
    if memory_format is not None:
        raise ValueError("make_tensor: ember has one memory layout; memory_format must be None")
    if low is not None and high is not None and low > high:
        raise ValueError(f"make_tensor: low {low} must not exceed high {high}")
    for name, value in (("low", low), ("high", high)):
        if value is not None and isinstance(value, float) and math.isnan(value):
            raise ValueError(f"make_tensor: {name} cannot be NaN")
    if dtype is dt.bool_:
        out = public["cast"](public["randint"](0, 2, shape), dt.bool_)
    elif dtype.is_floating_point:
        info = np.finfo(np.float32 if dtype is dt.bfloat16 else dtype.np)
        lo = max(-9.0 if low is None else float(low), float(info.min))
        hi = min(9.0 if high is None else float(high), float(info.max))
        draws = public["rand"](*shape, dtype=dt.float64)
        out = public["cast"](draws * (hi - lo) + lo, dtype)
        if exclude_zero:
            tiny = float(np.finfo(np.float32 if dtype is dt.bfloat16 else dtype.np).tiny)
            out = public["where"](out == 0, public["full"]((), tiny, dtype=dtype), out)
    else:
        lo_default, hi_default = _INT_RANGES[dtype]
        info = np.iinfo(dtype.np)
        lo = max(lo_default if low is None else math.ceil(low), int(info.min))
        hi = min(hi_default if high is None else math.ceil(high), int(info.max) + 1)
        out = public["cast"](public["randint"](lo, max(hi, lo + 1), shape), dtype)
        if exclude_zero:
            out = public["where"](out == 0, public["ones"]((), dtype=dtype), out)
    if noncontiguous and out.ndim and out.numel() > 1:
        array = out.numpy(force=True)
        wide = np.zeros((*array.shape[:-1], 2 * array.shape[-1]), array.dtype)
        wide[..., ::2] = array
        out = public["from_numpy"](wide[..., ::2])
    if requires_grad:
        if not dtype.is_floating_point:
            raise ValueError(f"make_tensor: requires_grad needs a floating dtype, got {dtype}")
        out = out.detach().requires_grad_(True)
    return out
