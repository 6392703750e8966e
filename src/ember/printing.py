"""``ember.set_printoptions``: how a Tensor's repr prints its values (PyTorch's options).

``precision`` (digits after the point, 4), ``threshold`` (elements beyond which the printout is
summarized with ``...``, 1000), ``edgeitems`` (items kept at each end of a summarized dimension,
3), ``linewidth`` (80), ``sci_mode`` (True / False forces or forbids scientific notation; None
lets the values decide), and ``profile`` ("default", "short", "full") which sets the first four
at once. The printout is NumPy's ``array2string`` with these options, so its number formatting
follows NumPy's where PyTorch's differs in detail (padding, when scientific notation starts).
"""

from __future__ import annotations

import sys

import numpy as np

__all__ = ["array_text", "get_printoptions", "set_printoptions"]

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


def array_text(data: np.ndarray, prefix: str = "") -> str:
    """``data`` printed with the current options (the body of a Tensor's repr)."""
    precision = int(_options["precision"])
    kwargs = {}
    sci = _options["sci_mode"]
    if sci is not None and data.dtype.kind == "f":
        spec = f".{precision}e" if sci else f".{precision}f"
        kwargs["formatter"] = {"float_kind": lambda v: format(v, spec)}
    threshold = _options["threshold"]
    return np.array2string(
        data,
        separator=", ",
        prefix=prefix,
        threshold=sys.maxsize if threshold == float("inf") else int(threshold),
        edgeitems=int(_options["edgeitems"]),
        max_line_width=int(_options["linewidth"]),
        precision=precision,
        **kwargs,
    )
