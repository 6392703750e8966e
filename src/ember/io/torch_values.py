"""What a PyTorch checkpoint's pickle may name, and what each becomes in ember: the storage
classes, the dtypes (ember's, or a placeholder naming one ember lacks), the rebuild functions of
tensors, parameters and sparse COO tensors (views checked to lie inside their storage, sparse
indices inside their size), layouts and the few plain-data callables (``_codecs.encode``,
``bytearray``...), and NumPy's numbers (io/numpy_values.py). `ALLOWED` maps each global name a
pickle may use to its ember-side object: io/torch_format.py's restricted unpickler resolves
every global through it and nothing else.
Problems are raised as `_Refused` (something a weights-only reader does not build), `_Damaged`
(an inconsistent file) or `_Unsupported` (a tensor ember cannot hold); the readers turn them into
`CheckpointError`s naming the file.
"""

from __future__ import annotations

import contextvars
from collections import Counter, OrderedDict

import numpy as np

from .. import _meta
from .. import dtypes as dt
from ..errors import EmberError, ShapeError
from ..tensor import Tensor
from . import numpy_values

_EXPAND_LIMIT = 1 << 26  # elements an overlapping (expanded) view may be copied into


# something a weights-only reader does not build; a CheckpointError naming the file (defined
# with the NumPy values, which raise it too)
_Refused = numpy_values.Refused


class _Damaged(Exception):
    """An inconsistent file (a view beyond its storage...); a CheckpointError naming the file."""


class _Unsupported(Exception):
    """A tensor ember cannot hold (its dtype); a CheckpointError naming the file."""


# ----------------------------------------------------------------------------- storages
class _StorageType:
    """A storage class named in the pickle (``torch.FloatStorage``...): its dtype or None."""

    def __init__(self, name: str, dtype: dt.DType | None, torch_dtype: str):
        self.name, self.dtype, self.torch_dtype = name, dtype, torch_dtype

    def __call__(self, *args):  # REDUCE on a storage class: nothing legitimate does that
        raise _Refused(f"calling storage class torch.{self.name}")


class _Storage:
    """A storage's bytes as a flat array of its dtype (uint8 for an untyped storage)."""

    __slots__ = ("array", "key")

    def __init__(self, array: np.ndarray, key: str):
        self.array, self.key = array, key


_STORAGES = {
    "FloatStorage": (dt.float32, "float32"),
    "DoubleStorage": (dt.float64, "float64"),
    "HalfStorage": (dt.float16, "float16"),
    "BFloat16Storage": (dt.bfloat16, "bfloat16"),
    "LongStorage": (dt.int64, "int64"),
    "IntStorage": (dt.int32, "int32"),
    "ShortStorage": (dt.int16, "int16"),
    "CharStorage": (dt.int8, "int8"),
    "ByteStorage": (dt.uint8, "uint8"),
    "BoolStorage": (dt.bool_, "bool"),
    "ComplexFloatStorage": (dt.complex64, "complex64"),
    "ComplexDoubleStorage": (dt.complex128, "complex128"),
    # (a quantized tensor's integers: `_rebuild_qtensor` gives them their parameters)
    "QUInt8Storage": (dt.uint8, "quint8"),
    "QInt8Storage": (dt.int8, "qint8"),
    "QInt32Storage": (dt.int32, "qint32"),
    "QUInt4x2Storage": (None, "quint4x2"),
    "QUInt2x4Storage": (None, "quint2x4"),
}


# ----------------------------------------------------------------------------- dtypes
class _TorchDType:
    """A ``torch.<dtype>`` ember does not have, as pickled: it reads as this placeholder (a
    tensor of it is refused)."""

    def __init__(self, name: str, dtype: dt.DType | None):
        self.name, self.dtype = name, dtype

    def __reduce__(self):  # never pickled back; keeps copies of loaded objects working
        return (_TorchDType, (self.name, self.dtype))

    def __repr__(self) -> str:
        return f"torch.{self.name}"


_EMBER_DTYPES = {
    "float32": dt.float32,
    "float64": dt.float64,
    "float16": dt.float16,
    "bfloat16": dt.bfloat16,
    "int64": dt.int64,
    "int32": dt.int32,
    "int16": dt.int16,
    "int8": dt.int8,
    "uint8": dt.uint8,
    "bool": dt.bool_,
    "complex64": dt.complex64,
    "complex128": dt.complex128,
    "float8_e4m3fn": dt.float8_e4m3fn,
    "float8_e5m2": dt.float8_e5m2,
    "float8_e4m3fnuz": dt.float8_e4m3fnuz,
    "float8_e5m2fnuz": dt.float8_e5m2fnuz,
}
_OTHER_DTYPES = [
    "complex32",
    "uint16",
    "uint32",
    "uint64",
    "quint8",
    "qint8",
    "qint32",
    "quint4x2",
    "quint2x4",
    *[f"uint{b}" for b in range(1, 8)],
    *[f"int{b}" for b in range(1, 8)],
]
# torch.float is torch.float32 and so on: pickles name the canonical dtype, aliases too
_ALIASES = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "long": "int64",
    "int": "int32",
    "short": "int16",
    "cfloat": "complex64",
    "cdouble": "complex128",
}


def _dtype_of(value, what: str) -> dt.DType:
    if isinstance(value, dt.DType):
        return value
    if isinstance(value, _StorageType):
        dtype, name = value.dtype, value.torch_dtype
    elif isinstance(value, _TorchDType):
        dtype, name = value.dtype, value.name
    else:
        raise _Refused(f"{what} is a {type(value).__name__}, not a torch dtype")
    if dtype is None:
        raise _Unsupported(
            f"a tensor of dtype torch.{name}, which ember does not have (ember reads "
            f"{', '.join(_EMBER_DTYPES)})"
        )
    return dtype


# ----------------------------------------------------------------------------- rebuilding
def _ints(value, what: str) -> tuple:
    if not isinstance(value, (tuple, list)) or not all(
        type(v) is int and 0 <= v < 2**62 for v in value
    ):
        raise _Damaged(f"tensor {what} {value!r:.80} is not a tuple of non-negative ints")
    return tuple(value)


def _view(storage, storage_offset, size, stride, dtype: dt.DType | None = None) -> Tensor:
    if not isinstance(storage, _Storage):
        raise _Damaged(f"a tensor's storage is a {type(storage).__name__}, not a storage")
    if type(storage_offset) is not int or storage_offset < 0:
        raise _Damaged(f"storage offset {storage_offset!r:.80} is not a non-negative int")
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if len(size) != len(stride):
        raise _Damaged(f"a tensor has size {size} but stride {stride}")
    flat = storage.array
    if dtype is not None and dtype.np != flat.dtype:  # v3: an untyped storage, typed here
        if flat.nbytes % dtype.itemsize:
            raise _Damaged(
                f"storage {storage.key} holds {flat.nbytes} bytes, not a whole number of "
                f"{dtype.name} elements"
            )
        flat = flat.view(dtype.np)
    numel = int(np.prod(size, dtype=object))
    if numel:
        last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= flat.size:
            raise _Damaged(
                f"a tensor of size {list(size)}, stride {list(stride)} at offset "
                f"{storage_offset} reaches element {last} of storage {storage.key}, which has "
                f"{flat.size} (the storage is too small for the view)"
            )
    else:
        storage_offset = min(storage_offset, flat.size)
    item = flat.itemsize
    # (as_strided goes through the array interface, which loses ml_dtypes' dtypes: float8_e5m2
    # reads back as "<f1". Strided over raw items of the same size, then seen as the dtype.)
    bits = flat.view(np.dtype((np.void, item)))
    view = np.lib.stride_tricks.as_strided(
        bits[storage_offset:], shape=size, strides=[s * item for s in stride], writeable=True
    ).view(flat.dtype)
    if numel and _overlaps(size, stride):
        if numel > max(_EXPAND_LIMIT, flat.size):
            raise _Damaged(
                f"a tensor expands storage {storage.key} ({flat.size} elements) to {numel}"
            )
        view = np.array(view)
    return Tensor(view)


def _overlaps(size: tuple, stride: tuple) -> bool:
    """Whether two indices of the view can reach one element (sufficient test: each stride at
    least the extent of the dimensions with smaller strides)."""
    extent = 1
    for s, n in sorted((s, n) for n, s in zip(size, stride) if n > 1):
        if s < extent:
            return True
        extent = s * n
    return False


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _view(storage, storage_offset, size, stride)


def _rebuild_tensor_v2(
    storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None
):
    t = _view(storage, storage_offset, size, stride)
    return _with_grad(t, requires_grad)


def _rebuild_tensor_v3(
    storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None
):
    t = _view(storage, storage_offset, size, stride, _dtype_of(dtype, "a v3 tensor's dtype"))
    return _with_grad(t, requires_grad)


def _rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad):
    """A meta tensor, which PyTorch saves with no storage: a meta stand-in of its size."""
    dtype = _dtype_of(dtype, "a meta tensor's dtype")
    size = _ints(size, "size")
    if len(_ints(stride, "stride")) != len(size):
        raise _Damaged(f"a meta tensor has size {size} but stride {stride!r:.80}")
    try:
        stand_in = _meta.stand_in(size, dtype.np)
    except ShapeError as exc:  # (a size no storage could have)
        raise _Damaged(f"a meta tensor: {exc.detail}") from None
    return _with_grad(Tensor(stand_in), requires_grad)


def _rebuild_parameter(data, requires_grad, backward_hooks):
    if not isinstance(data, Tensor):
        raise _Damaged(f"a parameter's data is a {type(data).__name__}, not a tensor")
    return _with_grad(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    return _with_attributes(_rebuild_parameter(data, requires_grad, backward_hooks), state)


def _rebuild_from_type_v2(func, new_type, args, state):
    """A tensor with Python attributes: rebuilt as a plain tensor, with its attributes."""
    if func not in _REBUILDERS or new_type not in (_TENSOR, _PARAMETER):
        raise _Refused(f"rebuilding a {new_type!r:.60} with {func!r:.60}")
    if not isinstance(args, tuple):
        raise _Refused("rebuild arguments are not a tuple")
    return _with_attributes(func(*args), state)


def _with_attributes(t: Tensor, state) -> Tensor:
    """``t`` with the Python attributes PyTorch pickled with it (``param.no_decay = True``):
    ``state`` is the tensor's ``__dict__``, or ``(__dict__, slots)``. Plain data only reaches
    here (the unpickler builds nothing else); a name that is an attribute of ember's tensors
    (``grad``, ``data``, ``shape``...) or a private one is not set."""
    if isinstance(state, tuple) and len(state) == 2:
        state = state[0]
    if not isinstance(state, dict):
        return t
    for name, value in state.items():
        if isinstance(name, str) and name.isidentifier() and not name.startswith("_"):
            if not hasattr(type(t), name):
                setattr(t, name, value)
    return t


def _with_grad(t: Tensor, requires_grad) -> Tensor:
    if requires_grad is True and t.dtype.is_floating_point:
        t.requires_grad_(True)
    return t


class _TensorClass:
    """``torch.Tensor`` / ``torch.nn.Parameter`` as a name (a _rebuild_from_type_v2 argument)."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args):
        raise _Refused(f"constructing {self.name}")

    def __repr__(self) -> str:
        return self.name


_TENSOR, _PARAMETER = _TensorClass("torch.Tensor"), _TensorClass("torch.nn.Parameter")
_REBUILDERS = (
    _rebuild_tensor,
    _rebuild_tensor_v2,
    _rebuild_tensor_v3,
    _rebuild_parameter,
    _rebuild_meta_tensor_no_storage,
)


class _TorchName:
    """A torch object ember has no counterpart of (a layout such as ``sparse_csr``, a
    quantization scheme), as pickled: it reads as this placeholder naming it."""

    def __init__(self, name: str):
        self.name = name

    def __reduce__(self):
        return (_TorchName, (self.name,))

    def __repr__(self) -> str:
        return f"torch.{self.name}"


def _get_layout(name):
    """``torch.serialization._get_layout``: a layout by its name (``"torch.sparse_coo"``), as
    ember's layout object where ember has it."""
    from ..ops._factory_kwargs import sparse_coo, strided

    if not isinstance(name, str) or not name.startswith("torch.") or len(name) > 40:
        raise _Refused(f"the layout {name!r:.60}")
    return {"torch.strided": strided, "torch.sparse_coo": sparse_coo}.get(
        name, _TorchName(name[len("torch.") :])
    )


# True while a reader unpickles with placeholder storages (io/torch_legacy.py's first pass,
# before the data is read): values are not there to be checked yet
placeholder_pass: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "placeholder_pass", default=False
)


def _rebuild_sparse_tensor(layout, data):
    """A sparse tensor: COO as ember's (its invariants checked, as torch's weights-only reader
    checks them: indices within the size, a coalesced one's sorted and unique); other layouts
    refused, named."""
    from ..ops._factory_kwargs import sparse_coo
    from ..ops.sparse_tensor import sparse_coo_tensor

    if layout is not sparse_coo:
        raise _Unsupported(
            f"a sparse tensor of layout {layout!r:.40}, which ember does not have (ember reads "
            "sparse_coo; convert with .to_sparse_coo() before saving)"
        )
    if not isinstance(data, tuple) or len(data) not in (3, 4):
        raise _Damaged(f"a sparse tensor's data is {type(data).__name__}, not 3 or 4 items")
    indices, values, size = data[:3]
    if not isinstance(indices, Tensor) or not isinstance(values, Tensor):
        raise _Damaged("a sparse tensor's indices or values are not tensors")
    coalesced = data[3] if len(data) == 4 else None
    if coalesced not in (True, False, None):
        raise _Damaged(f"a sparse tensor's coalesced flag is {coalesced!r:.40}")
    if placeholder_pass.get():
        return None
    try:
        return sparse_coo_tensor(
            indices, values, _size(size), check_invariants=True, is_coalesced=coalesced
        )
    except EmberError as exc:
        raise _Damaged(f"an inconsistent sparse tensor: {str(exc).splitlines()[0]}") from None


def _rebuild_qtensor(
    storage, storage_offset, size, stride, quantizer_params, requires_grad, backward_hooks
):
    """A quantized tensor (ops/qtensor.py): its integers viewed from the storage, given the
    per-tensor or per-channel parameters PyTorch pickled with them (each checked as
    ``_make_per_*_quantized_tensor`` checks its arguments)."""
    from ..ops import qtensor

    ints = _view(storage, storage_offset, size, stride)
    if ints.dtype not in (dt.uint8, dt.int8, dt.int32):
        raise _Damaged(f"a quantized tensor's storage holds {ints.dtype.name}, not integers")
    params = quantizer_params if isinstance(quantizer_params, tuple) else ()
    scheme = getattr(params[0], "name", None) if params else None
    try:
        if scheme == "per_tensor_affine" and len(params) == 3:
            _, scale, zero_point = params
            if type(scale) is not float or type(zero_point) is not int:
                raise _Damaged(f"quantizer parameters {params!r:.80} are not a float and an int")
            return qtensor._make_per_tensor_quantized_tensor(ints, scale, zero_point)
        if scheme == "per_channel_affine" and len(params) == 4:
            _, scales, zero_points, axis = params
            if not (isinstance(scales, Tensor) and isinstance(zero_points, Tensor)) or (
                type(axis) is not int or not 0 <= axis < max(ints.ndim, 1)
            ):
                raise _Damaged(f"per-channel quantizer parameters {params!r:.80} are malformed")
            return qtensor._make_per_channel_quantized_tensor(ints, scales, zero_points, axis)
    except EmberError as exc:
        raise _Damaged(f"a quantized tensor's parameters: {str(exc).splitlines()[0]}") from None
    raise _Unsupported(f"a quantized tensor of scheme {scheme or params!r:.60}")


def _size(dims=()):
    return tuple(_ints(dims, "size"))


def _device(*args):
    return str(args[0]) if args else "cpu"  # ember's tensors are on the CPU


def _encode(text, encoding="latin1"):
    """``_codecs.encode``, which protocol 2 uses for bytes: only str to latin-1 bytes."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _Refused(f"_codecs.encode with {type(text).__name__} and {encoding!r:.40}")
    return text.encode("latin1")


def _bytearray(data=b"", encoding=None):
    if isinstance(data, str) and encoding in ("latin1", "latin-1"):
        return bytearray(data.encode("latin1"))
    if isinstance(data, (bytes, bytearray, list)) and encoding is None:
        return bytearray(data)
    raise _Refused(f"bytearray of {type(data).__name__}")  # an int would allocate that many


ALLOWED: dict[str, object] = {
    "collections.OrderedDict": OrderedDict,
    "collections.Counter": Counter,
    "builtins.set": set,
    "builtins.frozenset": frozenset,
    "builtins.complex": complex,
    "builtins.bytearray": _bytearray,
    "_codecs.encode": _encode,
    "torch.Size": _size,
    "torch.device": _device,
    "torch.Tensor": _TENSOR,
    "torch.nn.parameter.Parameter": _PARAMETER,
    "torch._utils._rebuild_tensor": _rebuild_tensor,
    "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
    "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
    "torch._utils._rebuild_parameter": _rebuild_parameter,
    "torch._utils._rebuild_meta_tensor_no_storage": _rebuild_meta_tensor_no_storage,
    "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
    "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
    "torch._utils._rebuild_sparse_tensor": _rebuild_sparse_tensor,
    "torch._utils._rebuild_qtensor": _rebuild_qtensor,
    "torch.serialization._get_layout": _get_layout,
    "torch.per_tensor_affine": _TorchName("per_tensor_affine"),
    "torch.per_channel_affine": _TorchName("per_channel_affine"),
    "torch.per_channel_affine_float_qparams": _TorchName("per_channel_affine_float_qparams"),
    "torch.storage.UntypedStorage": _StorageType("UntypedStorage", dt.uint8, "uint8"),
    "torch.UntypedStorage": _StorageType("UntypedStorage", dt.uint8, "uint8"),
}
for _name, (_dtype, _torch_name) in _STORAGES.items():
    ALLOWED[f"torch.{_name}"] = _StorageType(_name, _dtype, _torch_name)
for _name, _dtype in _EMBER_DTYPES.items():
    ALLOWED[f"torch.{_name}"] = _dtype  # a dtype in the object (not a tensor's) reads as ember's
for _name in _OTHER_DTYPES:
    ALLOWED[f"torch.{_name}"] = _TorchDType(_name, None)
for _alias, _name in _ALIASES.items():
    ALLOWED[f"torch.{_alias}"] = ALLOWED[f"torch.{_name}"]
ALLOWED.update(numpy_values.ALLOWED)  # NumPy arrays, scalars and dtypes, built from bytes
