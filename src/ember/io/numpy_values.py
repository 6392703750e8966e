"""NumPy arrays, scalars and dtypes inside a PyTorch checkpoint, read as plain data.

Checkpoints written by training scripts often hold NumPy values beside the tensors (a best
accuracy as ``np.float64``, a class-count array, an RNG state's array). Their pickle names
``numpy._core.multiarray._reconstruct``, ``numpy.ndarray``, ``numpy.dtype`` and
``numpy._core.multiarray.scalar`` (``numpy.core...`` before NumPy 2), which PyTorch's
weights-only reader refuses unless the user allows them, and which a plain unpickler would
resolve to the real functions. Here each resolves to a stand-in that builds the value from its
bytes only: a dtype of a fixed-size number kind (bool, integers, floats, complex; byte order
kept), an array of such a dtype whose bytes must fill its shape exactly, a scalar likewise.
Object, structured, subarray, void and string dtypes, and arrays of any other subtype, are
refused (an object array's items are pickled objects). io/torch_format.py's unpickler turns a
stand-in into its value when the pickle sets its state (BUILD), and replaces it in the memo too,
since a pickle may refer back to a dtype before its state is set.
"""

from __future__ import annotations

import math

import numpy as np

from .._file_limits import canonical_bools

_KINDS = "biufc"  # bool, signed and unsigned integers, floats, complex
_MAX_DIMS = 64


class Refused(Exception):
    """A NumPy value this reader does not build (torch_values turns it into its _Refused)."""


class _NdarrayType:
    """``numpy.ndarray`` as named in a pickle: only the subtype argument of ``_reconstruct``."""


NDARRAY = _NdarrayType()


def _plain_dtype(name, byteorder: str = "=") -> np.dtype:
    if not isinstance(name, str) or len(name) > 16:
        raise Refused(f"a NumPy dtype named {name!r:.40}")
    try:
        dtype = np.dtype(name)
    except TypeError as exc:
        raise Refused(f"the NumPy dtype {name!r:.40}") from exc
    if dtype.kind not in _KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise Refused(f"a NumPy array or scalar of dtype {dtype} (only numbers are read)")
    if byteorder not in ("<", ">", "=", "|"):
        raise Refused(f"a NumPy dtype with byte order {byteorder!r:.10}")
    return dtype if byteorder in ("=", "|") else dtype.newbyteorder(byteorder)


class Builder:
    """A value whose state the pickle sets next (BUILD): ``build(state)`` gives the value (each
    subclass defines it; the unpickler recognizes stand-ins by this base class)."""


class _DTypeBuilder(Builder):
    def __init__(self, name):
        self.name = name

    def build(self, state):
        # NumPy's dtype state: (version, byte order, subarray, names, fields, element size,
        # alignment, flags); a plain number kind has no subarray, names nor fields
        if state is None:
            return _plain_dtype(self.name)
        if not isinstance(state, tuple) or len(state) < 5 or state[2:5] != (None, None, None):
            raise Refused("a NumPy dtype with fields or a subarray")
        return _plain_dtype(self.name, state[1])


class _ArrayBuilder(Builder):
    def build(self, state):
        # NumPy's array state: (version, shape, dtype, is Fortran-ordered, raw bytes)
        if not isinstance(state, tuple) or len(state) != 5:
            raise Refused("a NumPy array state of an unknown form")
        _, shape, dtype, fortran, raw = state
        dtype = as_dtype(dtype)
        if (
            not isinstance(shape, tuple)
            or len(shape) > _MAX_DIMS
            or not all(type(d) is int and d >= 0 for d in shape)
        ):
            raise Refused(f"a NumPy array of shape {shape!r:.60}")
        if not isinstance(raw, (bytes, bytearray)):
            raise Refused(f"a NumPy array whose data is a {type(raw).__name__}, not bytes")
        if len(raw) != math.prod(shape) * dtype.itemsize:
            raise Refused(
                f"a NumPy array of shape {shape} and dtype {dtype} with {len(raw)} bytes of data"
            )
        # in the machine's byte order, as NumPy's own unpickling gives (the values kept)
        flat = np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="))
        return canonical_bools(flat).reshape(shape, order="F" if fortran else "C")


def as_dtype(value) -> np.dtype:
    if isinstance(value, _DTypeBuilder):
        return value.build(None)
    if not isinstance(value, np.dtype):
        raise Refused(f"a NumPy dtype given as a {type(value).__name__}")
    return value


def _reconstruct(subtype, shape=(0,), typecode=b"b"):
    if subtype is not NDARRAY:
        raise Refused("a NumPy array of a subtype other than numpy.ndarray")
    return _ArrayBuilder()


def _dtype(name, align=False, copy=True):
    return _DTypeBuilder(name)


def _scalar(dtype, data=None):
    dtype = as_dtype(dtype)
    if not isinstance(data, (bytes, bytearray)) or len(data) != dtype.itemsize:
        raise Refused(f"a NumPy {dtype} scalar whose data is not {dtype.itemsize} bytes")
    return canonical_bools(np.frombuffer(data, dtype=dtype).astype(dtype.newbyteorder("=")))[0]


def _bytes(data=b"", encoding=None):
    """``bytes``, as protocol 2 spells an empty array's data: from text in latin-1, bytes or a
    list of small ints; never from an int (which would allocate that many)."""
    if isinstance(data, str) and encoding in ("latin1", "latin-1"):
        return data.encode("latin1")
    if isinstance(data, (bytes, bytearray, list)) and encoding is None:
        return bytes(data)
    raise Refused(f"bytes of {type(data).__name__}")


ALLOWED = {"numpy.ndarray": NDARRAY, "numpy.dtype": _dtype, "builtins.bytes": _bytes}
for _module in ("numpy.core.multiarray", "numpy._core.multiarray"):
    ALLOWED[f"{_module}._reconstruct"] = _reconstruct
    ALLOWED[f"{_module}.scalar"] = _scalar
