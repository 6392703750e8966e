"""Reading PyTorch checkpoints (``torch.save``'s zip format) without torch and without running
pickle code.

A ``.pt``/``.pth`` file written by ``torch.save`` since 1.6 is a zip archive: ``<name>/data.pkl``
(the object, pickled with protocol 2), ``<name>/data/<key>`` (each storage's raw bytes),
``<name>/byteorder`` ("little" or "big") and ``<name>/version``. `load_torch` reads it into plain
dicts, lists, tuples, numbers, strings and ember Tensors.

Safety. The pickle is read by `_RestrictedUnpickler`, a subclass of pickle's Python unpickler in
which every global a pickle names resolves through `ALLOWED` (io/torch_values.py), the names
``torch.load(..., weights_only=True)`` accepts (rebuild functions, storage classes, dtypes,
``torch.Size``,
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
import io
import pickle  # its opcode machinery only: _RestrictedUnpickler allows no other global
import sys
import zipfile
from collections import Counter, OrderedDict

import numpy as np

from .. import dtypes as dt
from .._file_limits import canonical_bools, open_regular
from ..errors import CheckpointError, CheckpointRefusedError, EmberError
from . import numpy_values, safe_globals
from ._pickle_allowance import Allowance, AllowanceExceeded
from .torch_values import (  # noqa: F401  (the legacy reader's names too)
    ALLOWED,
    _Damaged,
    _dtype_of,
    _Refused,
    _Storage,
    _StorageType,
    _Unsupported,
    placeholder_pass,
)

ZIP_MAGIC = b"PK\x03\x04"


# ----------------------------------------------------------------------------- the unpickler
def _counted(load):
    """An opcode's handler that then charges the value it leaves on the stack."""

    def counted(self):
        load(self)
        self._allowance.charge(self.stack[-1])

    return counted


class _RestrictedUnpickler(pickle._Unpickler):
    """pickle's Python unpickler with every global resolved through `ALLOWED`, BUILD limited to
    OrderedDicts and NumPy values' stand-ins (io/numpy_values.py), persistent ids limited
    to storages (read from the archive), and what the calls build bounded by what the file
    brought (io/_pickle_allowance.py)."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, data: bytes, load_storage):
        super().__init__(io.BytesIO(data), encoding="utf-8")
        self._load_storage = load_storage
        self._storages: dict[str, _Storage] = {}
        self._allowance = Allowance(len(data))

    def find_class(self, module: str, name: str):
        if not isinstance(module, str) or not isinstance(name, str):
            raise _Refused("a global whose name is not text")
        if self.proto < 3:  # protocol 2 spells Python 3's modules the Python 2 way
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
        full = f"{module}.{name}"
        if full not in ALLOWED:
            registered = safe_globals.lookup(full)  # (the program's own allowlist)
            if registered is None:
                raise _Refused(f"the global {full}")
            return registered
        return ALLOWED[full]

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
        self._allowance.earn(storage.array)
        return storage

    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        if isinstance(inst, numpy_values.Builder):  # a NumPy value: built from its state
            value = inst.build(state)
            self.stack[-1] = value
            for key, memoized in self.memo.items():  # (referred back to before its state)
                if memoized is inst:
                    self.memo[key] = value
            return
        if safe_globals.is_registered_instance(inst):
            safe_globals.set_state(inst, state)
            return
        if type(inst) is not OrderedDict:
            raise _Refused(f"setting the state of a {type(inst).__name__} (BUILD)")
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise _Refused("an OrderedDict state that is not a dict of names")
        inst.__dict__.update(state)

    dispatch[pickle.BUILD[0]] = _counted(load_build)

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

    # Every opcode that calls something (or sets a state, which builds a NumPy value) has its
    # result counted against the allowance: memo references make calls cheap to repeat.
    for _code in (pickle.REDUCE, pickle.NEWOBJ, pickle.NEWOBJ_EX, pickle.INST, pickle.OBJ):
        dispatch[_code[0]] = _counted(dispatch[_code[0]])
    del _code
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


def refusal(path, what: str) -> str:
    """The error for a checkpoint that holds ``what`` (a global ember does not rebuild)."""
    message = (
        f"{path}: refused {what}; ember reads only tensors, storages, dtypes, NumPy numbers "
        "and plain containers from a PyTorch checkpoint and never runs code from it, whatever "
        "weights_only says; a class or function of your own that you trust can be allowed "
        "with ember.serialization.add_safe_globals([...]) (PyTorch's weights-only rule)"
    )
    if ".nn." in what or what.endswith(("Module", "Optimizer")):
        message += (
            " (the file holds a whole pickled object, torch.save(model): save "
            "model.state_dict() in PyTorch instead and load it with "
            "model.load_state_dict(ember.load(path)); PyTorch 2.6+ itself loads such a file "
            "only with weights_only=False)"
        )
    return message


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
        raise CheckpointRefusedError(refusal(path, exc.args[0]), op="load") from None
    except _Damaged as exc:
        raise CheckpointError(
            f"{path}: damaged PyTorch checkpoint: {exc.args[0]}", op="load"
        ) from None
    except _Unsupported as exc:
        raise CheckpointError(f"{path}: cannot read {exc.args[0]}", op="load") from None
    except AllowanceExceeded as exc:
        raise CheckpointError(f"{path}: hostile PyTorch checkpoint: {exc}", op="load") from None
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
        return canonical_bools(array)

    _check_extent(records[pickles[0]], file_size, path)
    data = archive.read(pickles[0])
    return _RestrictedUnpickler(data, load_storage).load()


def sniff(path: str) -> bytes:
    """The first bytes of ``path`` ('' when it cannot be read: the caller reports that)."""
    try:
        with open_regular(path) as f:
            return f.read(4)
    except OSError:
        return b""
