"""Reading environment switches on hot paths: `setting(name)` is ``os.environ.get(name, "")``
at a dictionary lookup's cost.

``os.environ.get`` encodes the name and decodes the value on every call (about a microsecond);
an eager product asks two or three switches (``EMBER_GEMM``, ``EMBER_PREPACK``) per call. On
POSIX ``os.environ`` keeps its bytes in ``os.environ._data``, which every assignment through
``os.environ`` (``monkeypatch.setenv`` included) updates, so a lookup there with the name's
bytes made once sees the same value. Elsewhere (or where that mapping is missing) this is
``os.environ.get``.
"""

from __future__ import annotations

import os

_data = getattr(os.environ, "_data", None)
_encode = getattr(os.environ, "encodekey", None)
_decode = getattr(os.environ, "decodevalue", None)
_POSIX_BYTES = (
    os.name == "posix" and isinstance(_data, dict) and _encode is not None and _decode is not None
)
_keys: dict[str, bytes] = {}
_values: dict[bytes, str] = {}  # (a value's text by its bytes: decoded once)


def setting(name: str) -> str:
    """``os.environ.get(name, "")``."""
    if not _POSIX_BYTES:
        return os.environ.get(name, "")
    key = _keys.get(name)
    if key is None:
        key = _keys[name] = _encode(name)
    raw = _data.get(key)
    if raw is None:
        return ""
    text = _values.get(raw)
    if text is None:
        if len(_values) >= 256:  # (bounded: values seen, not values held)
            _values.clear()
        text = _values[raw] = _decode(raw)
    return text
