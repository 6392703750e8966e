"""``ember.set_printoptions``: how a Tensor's repr prints its values (PyTorch's options), and
the repr itself.

``precision`` (digits after the point, 4), ``threshold`` (elements beyond which the printout is
summarized with ``...``, 1000), ``edgeitems`` (items kept at each end of a summarized dimension,
3), ``linewidth`` (80), ``sci_mode`` (True / False forces or forbids scientific notation; None
lets the values decide), and ``profile`` ("default", "short", "full") which sets the first four
at once.

The printout follows PyTorch's rules, so a program prints what it printed under PyTorch: one
format for all elements of a tensor, chosen from its nonzero finite values (integers print as
``2.``, fixed point with ``precision`` digits, scientific notation when the largest is more than
1000 times the smallest, above 1e8 or below 1e-4), right-aligned to the widest element, as many
elements a line as ``linewidth`` allows, suffixes (``size=``, ``dtype=``, ``grad_fn=``) wrapped
onto a new line when they would pass it. tests/test_printing.py compares with torch's repr.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["get_printoptions", "set_printoptions", "tensor_text"]

_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": float("inf"), "edgeitems": 3, "linewidth": 80},
}
_options = dict(_PROFILES["default"], sci_mode=None)


def set_printoptions(
    precision: int | None = None,
    threshold: float | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """Set the options of the module docstring; options left None keep their value (a
    ``profile`` first resets the four it covers), except ``sci_mode``, which None resets to
    automatic as in PyTorch."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(
                f"set_printoptions: profile is one of {sorted(_PROFILES)}, got {profile!r}"
            )
        _options.update(_PROFILES[profile])
    for name, value in (
        ("precision", precision),
        ("threshold", threshold),
        ("edgeitems", edgeitems),
        ("linewidth", linewidth),
    ):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"set_printoptions: {name} must be a number >= 0, got {value!r}")
            _options[name] = value
    _options["sci_mode"] = None if sci_mode is None else bool(sci_mode)


def get_printoptions() -> dict:
    """The current options (a copy)."""
    return dict(_options)


class _Formatter:
    """One element format for a whole tensor, chosen from ``values`` (all of it, or the part a
    summarized printout shows)."""

    def __init__(self, values: np.ndarray):
        self.floating = values.dtype.kind == "f"
        self.int_mode, self.sci_mode, self.width = True, False, 1
        precision = int(_options["precision"])
        self.precision = precision
        flat = values.reshape(-1)
        if not self.floating:
            self.width = max([1] + [len(str(v)) for v in flat.tolist()])
            return
        shown = flat[np.isfinite(flat) & (flat != 0)]
        if shown.size == 0:
            return
        magnitudes = np.abs(shown.astype(np.float64))
        smallest, largest = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(np.all(shown == np.ceil(shown)))
        forced = _options["sci_mode"]
        self.sci_mode = (
            bool(largest / smallest > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4)
            if forced is None
            else forced
        )
        items = shown.tolist()
        if self.sci_mode:
            self.width = max(len(f"{v:.{precision}e}") for v in items)
        elif self.int_mode:
            self.width = max(len(f"{v:.0f}") + 1 for v in items)  # (+1: the point)
        else:
            self.width = max(len(f"{v:.{precision}f}") for v in items)

    def format(self, value) -> str:
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:{self.width}.{self.precision}e}"
        elif self.int_mode:
            text = f"{value:.0f}" + ("" if math.isinf(value) or math.isnan(value) else ".")
        else:
            text = f"{value:.{self.precision}f}"
        return text.rjust(self.width)


class _ComplexFormatter:
    """PyTorch's complex format: the real parts' format (right-aligned), then the imaginary
    parts' format without its padding, signed, and ``j``."""

    def __init__(self, values: np.ndarray):
        self.real = _Formatter(np.ascontiguousarray(values.real))
        self.imag = _Formatter(np.ascontiguousarray(values.imag))
        self.width = self.real.width + self.imag.width + 1

    def format(self, value) -> str:
        value = complex(value)
        imag = (self.imag.format(value.imag) + "j").lstrip()
        return self.real.format(value.real) + ("" if imag[0] in "+-" else "+") + imag


def _formatter(values: np.ndarray):
    return _ComplexFormatter(values) if values.dtype.kind == "c" else _Formatter(values)


def _summarized(data: np.ndarray, edge: int) -> np.ndarray:
    """The elements a summarized printout shows (PyTorch's selection, its edgeitems=0 case
    included)."""
    if data.ndim == 0:
        return data
    if data.ndim == 1:
        return np.concatenate([data[:edge], data[-edge:]]) if len(data) > 2 * edge else data
    if not edge:
        return data[(slice(0, 0),) * data.ndim]
    rows = range(len(data)) if len(data) <= 2 * edge else [*range(edge), *range(-edge, 0)]
    return np.stack([_summarized(data[i], edge) for i in rows])


def _vector(data: np.ndarray, indent: int, summarize: bool, f) -> str:
    edge = int(_options["edgeitems"])
    per_line = max(1, math.floor((int(_options["linewidth"]) - indent) / (f.width + 2)))
    if summarize and not edge:
        items = ["..."]
    elif summarize and len(data) > 2 * edge:
        items = [f.format(v) for v in data[:edge].tolist()] + [" ..."]
        items += [f.format(v) for v in data[-edge:].tolist()]
    else:
        items = [f.format(v) for v in data.tolist()]
    lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(data: np.ndarray, indent: int, summarize: bool, f) -> str:
    if data.ndim == 0:
        return f.format(data.item())
    if data.ndim == 1:
        return _vector(data, indent, summarize, f)
    edge = int(_options["edgeitems"])
    if summarize and len(data) > 2 * edge:
        head = [_nested(data[i], indent + 1, summarize, f) for i in range(edge)]
        tail = [
            _nested(data[i], indent + 1, summarize, f) for i in range(len(data) - edge, len(data))
        ]
        parts = head + ["..."] + tail
    else:
        parts = [_nested(row, indent + 1, summarize, f) for row in data]
    return "[" + ("," + "\n" * (data.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def tensor_text(
    data: np.ndarray, suffixes: list[str], *, shown_dtype: str | None, prefix: str = "tensor("
) -> str:
    """PyTorch's repr of a tensor holding ``data`` (16-bit and 8-bit floats given as float32):
    ``prefix``, the values, ``size=`` for an empty tensor that is not 1-d, ``dtype=``
    ``shown_dtype`` where given (the caller decides, by PyTorch's rule: the dtype is shown where
    it is not the default float, int64 or bool, and for every empty tensor that is not of the
    default float dtype), then ``suffixes`` (grad_fn=..., requires_grad=True)."""
    indent = len(prefix)
    head = []
    if data.size == 0:
        body = "[]"
        if data.ndim != 1:
            head.append(f"size={tuple(data.shape)}")
    else:
        edge = int(_options["edgeitems"])
        if not edge:
            head.append(f"size={tuple(data.shape)}")
        summarize = data.size > _options["threshold"]
        formatter = _formatter(_summarized(data, edge) if summarize else data)
        body = _nested(data, indent, summarize, formatter)
    if shown_dtype is not None:
        head.append(f"dtype={shown_dtype}")
    text = prefix + body
    parts = [text]
    line = len(text) - text.rfind("\n") + 1
    linewidth = int(_options["linewidth"])
    for suffix in head + list(suffixes):
        if line + len(suffix) + 2 > linewidth:
            parts.append(",\n" + " " * indent + suffix)
            line = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            line += len(suffix) + 2
    return "".join(parts) + ")"
