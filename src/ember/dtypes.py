"""ember's dtypes and the type-promotion rules.

A `DType` is a small interned object wrapping a NumPy dtype (bfloat16 comes from ml_dtypes).
Promotion follows PyTorch:

* tensors of one category (bool < integer < floating < complex) promote to the wider type;
  uint8 with a signed integer widens to the next signed type; float16 with bfloat16 gives float32;
  complex with floating keeps the wider precision (complex64 with float64 is complex128; ember
  has no complex32, so half precision with complex gives complex64 where PyTorch's
  float16 gives complex32);
* operands fall in three priority groups: tensors with dimensions, 0-d tensors, Python scalars.
  A lower group only decides the result where it is of a higher category than every operand
  above it: ``float32_tensor * float64_0d`` stays float32, ``int_tensor * float64_0d`` is
  float64;
* a Python scalar is *weak*: it never widens a tensor of its own category or above
  (``float32_tensor * 2.5`` stays float32); a scalar of a higher category than every tensor
  gives that category's default (int64 for ints, the default float dtype for floats, the
  default complex dtype for ``complex``: complex64 while the default float dtype is float32,
  complex128 while it is float64).

The float8 dtypes (``float8_e4m3fn``, ``float8_e5m2`` and the ``fnuz`` variants, ml_dtypes'
types) are storage formats, as in PyTorch: floating point (``is_floating_point``), but they
promote with no other dtype (`result_type` raises, PyTorch's "Promotion for Float8 Types is
not supported"), and only the ops whose ``float8`` rule says so (casts, copies, views and
shape ops, selection, ``eq``/``ne``/``isnan``, ``abs``, ``where``) take them: `ops._registry.apply`
refuses the rest. `astype` is the one conversion of arrays to a dtype: to ``float8_e4m3fn``,
which has no infinity, it saturates out-of-range values and infinities to +-448 as PyTorch's
conversion does (ml_dtypes would give NaN). They are not in ALL_DTYPES (the sweeps, graph files
and checkpoints' element types).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .errors import DTypeError

__all__ = [
    "DType",
    "bool_",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "as_dtype",
    "result_type",
    "get_default_dtype",
    "set_default_dtype",
    "ALL_DTYPES",
    "FLOAT_DTYPES",
    "INT_DTYPES",
    "COMPLEX_DTYPES",
    "FLOAT8_DTYPES",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "astype",
    "get_default_complex_dtype",
    "to_complex",
    "to_real",
    "differentiable",
]

_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3


class DType:
    """An ember dtype. Compare with ``==`` against another DType, a NumPy dtype or a name."""

    __slots__ = ("name", "np", "category", "itemsize", "_rank", "float8", "limited", "special")

    def __init__(
        self,
        name: str,
        np_dtype,
        category: int,
        rank: int,
        float8: bool = False,
        limited: bool = False,
    ):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category
        self.itemsize = self.np.itemsize
        self._rank = rank
        self.float8 = float8  # a storage format: casts and data movement only
        # uint16/32/64: PyTorch's few kernels for them (the ops' ``limited`` rule), no
        # promotion with another integer dtype
        self.limited = limited
        # what `ops._registry.apply` checks an operand for, in one attribute read
        self.special = float8 or limited or category == _COMPLEX

    @property
    def is_floating_point(self) -> bool:
        return self.category == _FLOAT

    @property
    def is_complex(self) -> bool:
        return self.category == _COMPLEX

    @property
    def is_integer(self) -> bool:
        return self.category == _INT

    @property
    def is_bool(self) -> bool:
        return self.category == _BOOL

    @property
    def is_signed(self) -> bool:
        return not self.name.startswith("uint") and self.category != _BOOL

    def to_complex(self) -> DType:
        """The complex dtype of this real one (PyTorch's ``dtype.to_complex()``; float16 gives
        complex64, ember having no complex32); a complex dtype is itself."""
        if self.category == _COMPLEX:
            return self
        if self.category != _FLOAT or self.float8:
            raise DTypeError(f"no complex dtype for {self}", op="to_complex")
        return complex128 if self is float64 else complex64

    def to_real(self) -> DType:
        """The real dtype of a complex one's parts (``dtype.to_real()``); a real one itself."""
        if self.category == _COMPLEX:
            return float64 if self is complex128 else float32
        return self

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    # str() is the repr, as PyTorch's (print(x.dtype) shows ember.float32); code that needs
    # the bare name reads .name

    def __eq__(self, other) -> bool:
        if isinstance(other, DType):
            return self is other
        if isinstance(other, QuantizedDType):  # (torch.int8 != torch.qint8)
            return False
        try:
            return as_dtype(other) is self
        except TypeError:
            return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)

    def __reduce__(self):
        return (as_dtype, (self.name,))


bool_ = DType("bool", np.bool_, _BOOL, 0)
uint8 = DType("uint8", np.uint8, _INT, 1)
int8 = DType("int8", np.int8, _INT, 1)
# PyTorch's "shell" unsigned dtypes: creation, casts, data movement, comparisons for equality,
# bitwise and, or, xor, mul and reductions to int64; no promotion with another integer or bool
uint16 = DType("uint16", np.uint16, _INT, 2, limited=True)
uint32 = DType("uint32", np.uint32, _INT, 3, limited=True)
uint64 = DType("uint64", np.uint64, _INT, 4, limited=True)
LIMITED_DTYPES = (uint16, uint32, uint64)
int16 = DType("int16", np.int16, _INT, 2)
int32 = DType("int32", np.int32, _INT, 3)
int64 = DType("int64", np.int64, _INT, 4)
float16 = DType("float16", np.float16, _FLOAT, 1)
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16, _FLOAT, 1)
float32 = DType("float32", np.float32, _FLOAT, 2)
float64 = DType("float64", np.float64, _FLOAT, 3)
# a complex dtype's rank is its parts' float rank (complex64: float32's)
complex64 = DType("complex64", np.complex64, _COMPLEX, 2)
complex128 = DType("complex128", np.complex128, _COMPLEX, 3)
cfloat, cdouble = complex64, complex128  # PyTorch's aliases
float8_e4m3fn = DType("float8_e4m3fn", ml_dtypes.float8_e4m3fn, _FLOAT, 0, float8=True)
float8_e5m2 = DType("float8_e5m2", ml_dtypes.float8_e5m2, _FLOAT, 0, float8=True)
float8_e4m3fnuz = DType("float8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz, _FLOAT, 0, float8=True)
float8_e5m2fnuz = DType("float8_e5m2fnuz", ml_dtypes.float8_e5m2fnuz, _FLOAT, 0, float8=True)
FLOAT8_DTYPES = (float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz)


class QuantizedDType:
    """PyTorch's quantized dtypes (``torch.qint8``, ``quint8``, ``qint32``): the dtype of a
    quantized tensor (ops/qtensor.py: its array's NumPy dtype carries the parameters as
    metadata under `QUANTIZED_KEY`), special, so only the ops whose ``quantized`` rule says so
    take one. Functions that take one as a plain integer choice (``quantize_dynamic(model,
    {nn.Linear}, dtype=torch.qint8)``) read it, through `as_dtype`, as ``storage``: the
    integer dtype its values are kept in. Unequal to that dtype, as in PyTorch."""

    __slots__ = ("name", "storage")
    is_floating_point = False
    is_complex = False
    is_bool = False
    is_integer = False
    special = True
    float8 = False
    quantized = True

    def __init__(self, name: str, storage: DType):
        self.name, self.storage = name, storage

    @property
    def is_signed(self) -> bool:
        return self.storage.is_signed

    @property
    def itemsize(self) -> int:
        return self.storage.itemsize

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    def __reduce__(self):
        return (_quantized, (self.name,))


def _quantized(name: str) -> QuantizedDType:
    return QUANTIZED_DTYPES[name]


QUANTIZED_DTYPES = {
    q.name: q
    for q in (
        QuantizedDType("qint8", int8),
        QuantizedDType("quint8", uint8),
        QuantizedDType("qint32", int32),
    )
}
qint8, quint8, qint32 = (QUANTIZED_DTYPES[n] for n in ("qint8", "quint8", "qint32"))

# the real dtypes: the sweeps of every op, graph files and checkpoints' element types
ALL_DTYPES = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
FLOAT_DTYPES = (float16, bfloat16, float32, float64)
INT_DTYPES = (uint8, int8, int16, int32, int64)
# complex tensors: the ops whose `complex` rule (ops/_rules.py) accepts them take them
COMPLEX_DTYPES = (complex64, complex128)

_BY_NP = {d.np: d for d in ALL_DTYPES + COMPLEX_DTYPES + FLOAT8_DTYPES + LIMITED_DTYPES}
_BY_NAME = {d.name: d for d in ALL_DTYPES + COMPLEX_DTYPES + FLOAT8_DTYPES + LIMITED_DTYPES}
_BY_NAME.update(
    {
        "bool_": bool_,
        "float": float32,
        "double": float64,
        "half": float16,
        "long": int64,
        "int": int32,
        "short": int16,
        "byte": uint8,
        "cfloat": complex64,
        "cdouble": complex128,
    }
)
_BY_PY = {bool: bool_, int: int64, float: float32}
_COMPLEX_OF = {3: complex128}  # a float rank's complex dtype (complex64 below float64)

_default_float = float32


def get_default_dtype() -> DType:
    """The dtype of floating tensors created from Python floats (float32 unless changed)."""
    return _default_float


def get_default_complex_dtype() -> DType:
    """The dtype of complex tensors created from Python complex numbers: complex64 while the
    default float dtype is float32, complex128 while it is float64 (PyTorch's rule)."""
    return complex128 if _default_float is float64 else complex64


def to_complex(d: DType) -> DType:
    """The complex dtype holding ``d``'s values (float64 and complex128: complex128; the other
    floats and complex64: complex64; integers and bool: the default complex dtype)."""
    if d.category == _COMPLEX:
        return d
    if d.category != _FLOAT:
        return get_default_complex_dtype()
    return _COMPLEX_OF.get(d._rank, complex64)


def differentiable(d: DType) -> bool:
    """Whether values of ``d`` carry gradients: the floating and the complex dtypes."""
    return d.category >= _FLOAT


def to_real(d: DType) -> DType:
    """The dtype of a complex dtype's parts (complex64: float32); other dtypes unchanged."""
    if d is complex64:
        return float32
    if d is complex128:
        return float64
    return d


def set_default_dtype(dtype) -> None:
    global _default_float
    d = as_dtype(dtype)
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: expected a floating dtype, got {d}")
    _default_float = d


def as_dtype(value) -> DType:
    """Convert a DType, NumPy dtype, dtype name or Python type (bool, int, float) to a DType."""
    if isinstance(value, DType):
        return value
    if isinstance(value, QuantizedDType):  # (its values' storage)
        return value.storage
    if value is float:
        return _default_float
    if value is complex:
        return get_default_complex_dtype()
    if value.__hash__ is not None and value in _BY_PY:
        return _BY_PY[value]
    if isinstance(value, str):
        d = _BY_NAME.get(value)
        if d is not None:
            return d
    try:
        d = _BY_NP.get(np.dtype(value))
    except (TypeError, ValueError):  # (ValueError: a name NumPy cannot even encode, "\udc80")
        d = None
    if d is None:
        names = ", ".join(x.name for x in ALL_DTYPES + COMPLEX_DTYPES + FLOAT8_DTYPES)
        raise DTypeError(f"unsupported dtype {value!r}; ember supports {names}", op="dtype")
    return d


# the key of a quantized array's NumPy dtype metadata (ops/qtensor.py's parameters)
QUANTIZED_KEY = "ember_quantized"


def from_numpy_dtype(np_dtype) -> DType:
    """The DType of a NumPy array's dtype (fast path for arrays ember created); a quantized
    array's is its QuantizedDType."""
    d = _BY_NP.get(np_dtype)
    if d is None:
        meta = getattr(np_dtype, "metadata", None)
        if meta is not None and QUANTIZED_KEY in meta:
            return QUANTIZED_DTYPES[meta[QUANTIZED_KEY].dtype]
        return as_dtype(np_dtype)
    return d


_TORCH_TYPE_NAMES = {
    "float8_e4m3fn": "Float8_e4m3fn",
    "float8_e5m2": "Float8_e5m2",
    "float8_e4m3fnuz": "Float8_e4m3fnuz",
    "float8_e5m2fnuz": "Float8_e5m2fnuz",
}


def holds_exactly(dtype: DType, number) -> bool:
    """Whether a float dtype holds the Python number exactly (1e30 overflows float16: no)."""
    with np.errstate(over="ignore"):
        return float(dtype.np.type(number)) == number


def _refuse_float8_promotion(a: DType, b: DType):
    from .errors import DTypeError

    names = [_TORCH_TYPE_NAMES.get(d.name, d.name) for d in (a, b)]
    raise DTypeError(
        f"Promotion for Float8 Types is not supported, attempted to promote {names[0]} and "
        f"{names[1]} (cast explicitly, e.g. x.float())",
        op="result_type",
    )


def astype(array: np.ndarray, dtype: DType) -> np.ndarray:
    """``array`` converted to ``dtype`` (NumPy's casting; to float8_e4m3fn, PyTorch's
    saturation of out-of-range values and infinities to +-448, NaN kept)."""
    if dtype is float8_e4m3fn and array.dtype != dtype.np and array.dtype.kind in "fViu":
        array = np.clip(array.astype(np.float32), -448.0, 448.0)
    return array.astype(dtype.np)


def _promote_pair(a: DType, b: DType) -> DType:
    if a is b:
        return a
    if a.float8 or b.float8:
        _refuse_float8_promotion(a, b)
    if (a.limited or b.limited) and a.category <= _INT and b.category <= _INT:
        raise DTypeError(
            f"Promotion for uint16, uint32, uint64 types is not supported, attempted to "
            f"promote {a.name} and {b.name} (cast one explicitly, as in PyTorch)",
            op="result_type",
        )
    if a.category != b.category:
        high, low = (a, b) if a.category > b.category else (b, a)
        if high.category == _COMPLEX and low.category == _FLOAT:
            return to_complex(low) if low._rank > high._rank else high
        return high
    if a.category == _FLOAT:
        if a._rank == b._rank:  # float16 with bfloat16: neither holds the other
            return float32
        return a if a._rank > b._rank else b
    # integers: uint8 with a signed type needs a signed type wider than 8 bits
    if (a is uint8) != (b is uint8):
        other = b if a is uint8 else a
        return int16 if other is int8 else other
    return a if a._rank > b._rank else b


def _combine_categories(higher: DType | None, lower: DType | None) -> DType | None:
    """PyTorch's ``combine_categories``: the dtype of a higher-priority group of operands
    (``higher``) with a lower one: the lower group counts only when it is of a higher category
    (a float among integers, an integer or float among bools), and then as its own dtype
    promoted with the higher group's; a complex lower group makes a floating higher one the
    complex dtype of its precision (``float32 (3,) * complex128 0-d`` is complex64)."""
    if higher is None:
        return lower
    if lower is None or higher.category == _COMPLEX:
        return higher
    if lower.category == _COMPLEX:
        return to_complex(higher) if higher.category == _FLOAT else lower
    if higher.category == _FLOAT:
        return higher
    if higher is bool_ or lower.category == _FLOAT:
        return _promote_pair(higher, lower)
    return higher


def result_type(*operands) -> DType:
    """The dtype an elementwise op produces from tensors, dtypes and Python scalars.

    PyTorch's promotion in three priority groups: tensors with dimensions (and bare dtypes),
    then 0-d tensors, then Python scalars (bool, int, float, complex: *weak*, standing for bool,
    int64, the default float dtype and the default complex dtype). Each group promotes within
    itself; a lower group decides the result only where it is of a higher category (bool <
    integer < floating < complex) than every operand above it. So ``float32 (3,) * float64
    0-d`` is float32, ``int32 (3,) * float64 0-d`` is float64, and ``float16 (3,) * 2.5`` stays
    float16.
    """
    dim: DType | None = None
    zero: DType | None = None
    weak_category = -1
    for x in operands:
        if isinstance(x, bool):
            weak_category = max(weak_category, _BOOL)
        elif isinstance(x, int):
            weak_category = max(weak_category, _INT)
        elif isinstance(x, float):
            weak_category = max(weak_category, _FLOAT)
        elif isinstance(x, complex):
            weak_category = _COMPLEX
        elif isinstance(x, DType):
            dim = x if dim is None else _promote_pair(dim, x)
        elif not hasattr(x, "dtype") and getattr(x, "is_traced_item", False) is True:
            # a traced .item() (graph/traced_item.py) is the Python number it stands for: weak;
            # its kind (0 bool, 1 int, 2 float, 3 complex) is the category's rank
            weak_category = max(weak_category, x.kind)
        else:
            d = as_dtype(getattr(x, "dtype", x))
            shape = getattr(x, "shape", None)
            if shape is not None and len(shape) == 0:
                zero = d if zero is None else _promote_pair(zero, d)
            else:
                dim = d if dim is None else _promote_pair(dim, d)
    weak = (
        None
        if weak_category < 0
        else (bool_, int64, _default_float, get_default_complex_dtype())[weak_category]
    )
    result = _combine_categories(dim, _combine_categories(zero, weak))
    if result is None:
        raise TypeError("result_type: expected at least one operand")
    return result
