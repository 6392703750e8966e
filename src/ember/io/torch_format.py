"""Reading PyTorch checkpoints (``torch.save``'s zip format) without torch and without running
pickle code.

A ``.pt``/``.pth`` file written by ``torch.save`` since 1.6 is a zip archive: ``<name>/data.pkl``
(the object, pickled with protocol 2), ``<name>/data/<key>`` (each storage's raw bytes),
``<name>/byteorder`` ("little" or "big") and ``<name>/version``. `load_torch` reads it into plain
dicts, lists, tuples, numbers, strings and ember Tensors.

Safety. The pickle is read by `_RestrictedUnpickler`, a subclass of pickle's Python unpickler in
which every global a pickle names resolves through `_ALLOWED`, the names ``torch.load(...,
weights_only=True)`` accepts (rebuild functions, storage classes, dtypes, ``torch.Size``,
``collections.OrderedDict``, ``builtins.set``...), each mapped to an ember-side function of the
same meaning: torch is never imported, and the only functions a file can have called are these.
Any other global (``os.system``, ``builtins.eval``, ``subprocess.Popen``, a user's class) is
refused with a `CheckpointError` naming the file and the global, before anything is built from
it; BUILD (setting attributes) is allowed only on ``OrderedDict``s (a state_dict's
``_metadata``), items go only into dicts, lists and sets, and persistent ids only name storages.
``weights_only=False`` reads the same way: ember never runs code from a file. A record's declared
size must fit in the file before anything is allocated for it.

Values. ``torch.Size`` reads as a tuple, ``torch.device`` as its string, a dtype as ember's
dtype (a placeholder naming it, for dtypes ember does not have), ``OrderedDict``, ``set``,
``bytes``, ``complex`` as themselves.

Tensors. A tensor is a view of its storage at ``storage_offset`` with ``size`` and ``stride``,
checked to lie inside the storage; views whose elements do not overlap share the storage's memory
(as torch's do), overlapping ones (``expand``) are copied. The dtypes are ember's: float32/64/16,
bfloat16, int8/16/32/64, uint8, bool, complex64/128 and the four float8 formats; a tensor of any
other (quantized, uint16...) is refused with its dtype named. Parameters come back as tensors
that require grad. A sparse COO tensor reads as ember's (its indices checked against its size,
as torch's weights-only reader checks them); other sparse layouts (CSR...) are refused, named;
layouts read as ember's ``strided`` / ``sparse_coo`` or a placeholder naming them.

Damage (a broken zip, a record missing or of the wrong size, a CRC mismatch, a pickle that does
not parse, a view beyond its storage) raises a `CheckpointError` naming the file. The legacy
(pre-1.6, non-zip) format is io/torch_legacy.py's, through the same unpickler.
"""

from __future__ import annotations

import _compat_pickle
import contextvars
import io
import pickle  # its opcode machinery only: _RestrictedUnpickler allows no other global
import sys
import zipfile
from collections import Counter, OrderedDict

import numpy as np

from .. import dtypes as dt
from ..errors import CheckpointError, EmberError
from ..tensor import Tensor

ZIP_MAGIC = b"PK\x03\x04"
_EXPAND_LIMIT = 1 << 26  # elements an overlapping (expanded) view may be copied into


class _Refused(Exception):
    """Something a weights-only reader does not build; a CheckpointError naming the file."""


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
    "QUInt8Storage": (None, "quint8"),
    "QInt8Storage": (None, "qint8"),
    "QInt32Storage": (None, "qint32"),
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


def _rebuild_parameter(data, requires_grad, backward_hooks):
    if not isinstance(data, Tensor):
        raise _Damaged(f"a parameter's data is a {type(data).__name__}, not a tensor")
    return _with_grad(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    return _rebuild_parameter(data, requires_grad, backward_hooks)  # Python attributes dropped


def _rebuild_from_type_v2(func, new_type, args, state):
    """A tensor with Python attributes: rebuilt as a plain tensor (the attributes dropped)."""
    if func not in _REBUILDERS or new_type not in (_TENSOR, _PARAMETER):
        raise _Refused(f"rebuilding a {new_type!r:.60} with {func!r:.60}")
    if not isinstance(args, tuple):
        raise _Refused("rebuild arguments are not a tuple")
    return func(*args)


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
_REBUILDERS = (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter)


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


def _rebuild_qtensor(*args):
    raise _Unsupported(
        "a quantized tensor (torch.qint8 / quint8 / qint32), which ember does not have "
        "(dequantize it before saving, or use ember.quantization)"
    )


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


_ALLOWED: dict[str, object] = {
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
    _ALLOWED[f"torch.{_name}"] = _StorageType(_name, _dtype, _torch_name)
for _name, _dtype in _EMBER_DTYPES.items():
    _ALLOWED[f"torch.{_name}"] = _dtype  # a dtype in the object (not a tensor's) reads as ember's
for _name in _OTHER_DTYPES:
    _ALLOWED[f"torch.{_name}"] = _TorchDType(_name, None)
for _alias, _name in _ALIASES.items():
    _ALLOWED[f"torch.{_alias}"] = _ALLOWED[f"torch.{_name}"]


# ----------------------------------------------------------------------------- the unpickler
class _RestrictedUnpickler(pickle._Unpickler):
    """pickle's Python unpickler with every global resolved through `_ALLOWED`, BUILD limited to
    OrderedDicts and persistent ids limited to storages (read from the archive)."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, data: bytes, load_storage):
        super().__init__(io.BytesIO(data), encoding="utf-8")
        self._load_storage = load_storage
        self._storages: dict[str, _Storage] = {}

    def find_class(self, module: str, name: str):
        if not isinstance(module, str) or not isinstance(name, str):
            raise _Refused("a global whose name is not text")
        if self.proto < 3:  # protocol 2 spells Python 3's modules the Python 2 way
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
        full = f"{module}.{name}"
        if full not in _ALLOWED:
            raise _Refused(f"the global {full}")
        return _ALLOWED[full]

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or len(pid) != 5:
            raise _Refused(f"a persistent id {pid!r:.80} that is not a storage")
        kind, storage_type, key, _location, numel = pid
        if isinstance(kind, bytes):
            kind = kind.decode("ascii", "replace")
        if kind != "storage" or not isinstance(storage_type, _StorageType):
            raise _Refused(f"a persistent id of kind {kind!r:.40} that is not a storage")
        if not isinstance(key, str) or type(numel) is not int or numel < 0:
            raise _Refused(f"a storage record named {key!r:.40} of {numel!r:.40} elements")
        dtype = _dtype_of(storage_type, "a storage's type")
        cached = self._storages.get(key)
        if cached is not None:
            if cached.array.dtype != dtype.np or cached.array.size != numel:
                raise _Damaged(f"storage {key} is named twice with different types or sizes")
            return cached
        storage = _Storage(self._load_storage(key, dtype, numel), key)
        self._storages[key] = storage
        return storage

    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        if type(inst) is not OrderedDict:
            raise _Refused(f"setting the state of a {type(inst).__name__} (BUILD)")
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise _Refused("an OrderedDict state that is not a dict of names")
        inst.__dict__.update(state)

    dispatch[pickle.BUILD[0]] = load_build

    # Items go only into plain containers, as in torch's weights-only reader: never into a
    # tensor (whose __setitem__ would write the file's values into it) or anything else.
    def load_setitem(self):
        self._check_target(_DICTS, "SETITEM", -3)
        pickle._Unpickler.load_setitem(self)

    def load_setitems(self):
        self._check_target(_DICTS, "SETITEMS", None)
        pickle._Unpickler.load_setitems(self)

    def load_append(self):
        self._check_target((list,), "APPEND", -2)
        pickle._Unpickler.load_append(self)

    def load_appends(self):
        self._check_target((list,), "APPENDS", None)
        pickle._Unpickler.load_appends(self)

    def _check_target(self, types: tuple, opcode: str, where: int | None) -> None:
        # ``where``: the target's place on the stack; None: just below the last MARK
        stack = self.stack if where is not None else self.metastack[-1] if self.metastack else []
        if not stack or len(stack) < (-where if where is not None else 1):
            return  # the base class raises its own error for a too-short stack
        target = stack[where if where is not None else -1]
        if type(target) not in types:
            raise _Refused(f"{opcode} into a {type(target).__name__}")

    def load_additems(self):
        self._check_target((set,), "ADDITEMS", None)
        pickle._Unpickler.load_additems(self)

    dispatch[pickle.ADDITEMS[0]] = load_additems
    dispatch[pickle.SETITEM[0]] = load_setitem
    dispatch[pickle.SETITEMS[0]] = load_setitems
    dispatch[pickle.APPEND[0]] = load_append
    dispatch[pickle.APPENDS[0]] = load_appends


_DICTS = (dict, OrderedDict, Counter)


# ----------------------------------------------------------------------------- the archive
def is_torch_file(head: bytes) -> bool:
    return head.startswith(ZIP_MAGIC) or head.startswith(b"PK\x05\x06")


def refuse_legacy(path: str) -> None:
    """A file that starts like a pickle but not like PyTorch's legacy format (io/torch_legacy.py
    reads that): never read."""
    raise CheckpointError(
        f"{path} looks like a pickle file that is not a PyTorch checkpoint (neither the zip "
        "format nor the legacy one); ember never unpickles anything else",
        op="load",
    )


def load_torch(path, map_location=None, weights_only: bool | None = None, *, name=None):
    """The object in the torch zip checkpoint at ``path`` (see the module's docstring);
    ``map_location`` is accepted and ignored (ember's tensors are on the CPU) and
    ``weights_only=False`` reads as restrictively as True. ``path`` may also be a seekable
    binary file object holding the archive (from its start), named ``name`` in errors."""
    source = path
    if name is not None:
        path = name
    try:
        with zipfile.ZipFile(source) as archive:
            return _load_archive(archive, path)
    except _Refused as exc:
        raise CheckpointError(
            f"{path}: refused {exc.args[0]}; ember reads only tensors, storages, dtypes "
            "and plain containers from a PyTorch checkpoint and never runs code from it",
            op="load",
        ) from None
    except _Damaged as exc:
        raise CheckpointError(
            f"{path}: damaged PyTorch checkpoint: {exc.args[0]}", op="load"
        ) from None
    except _Unsupported as exc:
        raise CheckpointError(f"{path}: cannot read {exc.args[0]}", op="load") from None
    except EmberError:
        raise
    except zipfile.BadZipFile as exc:
        raise CheckpointError(
            f"{path}: damaged PyTorch checkpoint (not a readable zip archive: {exc})", op="load"
        ) from None
    except Exception as exc:  # noqa: BLE001 - a damaged pickle raises any of many types
        raise CheckpointError(
            f"{path}: damaged PyTorch checkpoint ({type(exc).__name__}: {str(exc)[:200]})",
            op="load",
        ) from None


def _check_extent(info: zipfile.ZipInfo, file_size: int, path: str) -> None:
    """A record's declared sizes must be possible in this file, so nothing is allocated for data
    that is not there (a stored record's bytes are in the file; a deflated one expands at most
    ~1032 times)."""
    stored = info.compress_type == zipfile.ZIP_STORED
    if (
        info.header_offset + info.compress_size > file_size
        or (stored and info.compress_size != info.file_size)
        or (not stored and info.file_size > 1100 * max(info.compress_size, 1))
    ):
        raise CheckpointError(
            f"{path}: damaged PyTorch checkpoint: record {info.filename} claims {info.file_size} "
            f"bytes ({info.compress_size} in the file), which the file cannot hold",
            op="load",
        )


def _load_archive(archive: zipfile.ZipFile, path: str):
    records = {info.filename: info for info in archive.infolist()}
    file_size = archive.fp.seek(0, 2)
    pickles = [n for n in records if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        found = "no" if not pickles else f"{len(pickles)}"
        raise CheckpointError(
            f"{path} is a zip archive with {found} <name>/data.pkl records, not a PyTorch "
            "checkpoint",
            op="load",
        )
    prefix = pickles[0][: -len("data.pkl")]
    byteorder = "little"
    if f"{prefix}byteorder" in records:
        byteorder = archive.read(f"{prefix}byteorder").decode("ascii", "replace").strip()
        if byteorder not in ("little", "big"):
            raise CheckpointError(f"{path}: byteorder record says {byteorder!r:.40}", op="load")

    def load_storage(key: str, dtype: dt.DType, numel: int) -> np.ndarray:
        name = f"{prefix}data/{key}"
        info = records.get(name)
        if info is None:
            raise CheckpointError(
                f"{path}: damaged PyTorch checkpoint: the record {name} of a storage is missing",
                op="load",
            )
        nbytes = numel * dtype.itemsize
        _check_extent(info, file_size, path)
        if info.file_size != nbytes:
            raise CheckpointError(
                f"{path}: damaged PyTorch checkpoint: record {name} holds {info.file_size} "
                f"bytes, but its storage has {numel} {dtype.name} elements ({nbytes} bytes)",
                op="load",
            )
        array = np.empty(numel, dtype.np)
        view = memoryview(array.view(np.uint8))
        with archive.open(info) as f:  # checks the record's CRC-32 when read to its end
            done = 0
            while done < nbytes:
                n = f.readinto(view[done:])
                if not n:
                    raise CheckpointError(f"{path}: record {name} is truncated", op="load")
                done += n
            f.read(1)  # reach the end: the CRC check
        if byteorder != sys.byteorder and dtype.itemsize > 1:
            array.byteswap(inplace=True)
        return array

    _check_extent(records[pickles[0]], file_size, path)
    data = archive.read(pickles[0])
    return _RestrictedUnpickler(data, load_storage).load()


def sniff(path: str) -> bytes:
    """The first bytes of ``path`` ('' when it cannot be read: the caller reports that)."""
    try:
        with open(path, "rb") as f:
            return f.read(4)
    except OSError:
        return b""
