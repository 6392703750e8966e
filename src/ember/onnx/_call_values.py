"""What an imported model's inputs are declared to be, and the values a call passes and
returns: each input's declared dtype and shape (``ValueInfo``) checked against the argument,
naming the input and the mismatch; arguments bound to the graph's input names; the outputs
turned back into tensors; and the facts (dtype, shape) of a call that the latest signatures are
kept by.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import OnnxError
from ..ops import _registry as _reg
from ..symbolic import SymDim
from ..tensor import Tensor
from ._convert import EMPTY, is_static, is_tensor, supported_dtype
from ._model import require_onnx

if TYPE_CHECKING:  # (a type only: importer.py imports this module)
    from .importer import GraphRunner

# ----------------------------------------------------------------------------------------------
# what a model's inputs are declared to be


def _declared(info):
    """(numpy dtype or None, shape as a list of int / str / None, or None) of a ValueInfo."""
    onnx = require_onnx()
    kind = info.type.WhichOneof("value")
    if kind != "tensor_type":
        return None, None
    tt = info.type.tensor_type
    dtype = None
    if tt.elem_type:
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
        except (KeyError, ValueError, TypeError):
            dtype = None
    if not tt.HasField("shape"):
        return dtype, None
    shape = []
    for d in tt.shape.dim:
        which = d.WhichOneof("value")
        shape.append(int(d.dim_value) if which == "dim_value" else (d.dim_param or None))
    return dtype, shape


def _check_input(name: str, declared, value, where: str):
    dtype, shape = declared
    if dtype is None and shape is None:
        return
    got_dtype = value.dtype.np if is_tensor(value) else getattr(value, "dtype", None)
    if dtype is not None and got_dtype is not None and np.dtype(got_dtype) != dtype:
        raise OnnxError(
            f"{where}: input {name!r} must be {dtype.name}, got {np.dtype(got_dtype).name}"
        )
    if shape is not None and hasattr(value, "shape"):
        # (a size symbolic while a graph is captured has no value to compare: it is checked
        # when the captured program runs, against the call's own sizes)
        got = tuple(d if isinstance(d, SymDim) else int(d) for d in value.shape)
        ok = len(got) == len(shape) and all(
            not isinstance(want, int) or isinstance(have, SymDim) or want == have
            for want, have in zip(shape, got)
        )
        if not ok:
            shown = tuple(d if isinstance(d, int) else (d or "?") for d in shape)
            raise OnnxError(f"{where}: input {name!r} must have shape {shown}, got {got}")


def _as_value(value, name: str, where: str):
    """A call argument as a runner value: ember tensors stay, arrays and numbers become eager
    tensors where ember has their dtype (else NumPy arrays), lists stay sequences."""
    if value is None or value is EMPTY:
        return EMPTY
    if is_tensor(value):
        return value
    if isinstance(value, list):
        return [_as_value(v, name, where) for v in value]
    array = np.asarray(value)
    if array.dtype == object and not all(isinstance(v, (str, bytes)) for v in array.flat):
        # (an object array of str / bytes is an ONNX string tensor)
        raise OnnxError(f"{where}: input {name!r} is not a tensor ({type(value).__name__})")
    if supported_dtype(array.dtype):
        return _reg.eager_constant(np.require(array, requirements="C"))
    return array


def _bind(runner: GraphRunner, args, kwargs, where: str) -> tuple[list, dict]:
    """(the values of the graph's inputs, {name: value} of the initializers given by name)."""
    names = runner.input_names
    overrides = {}
    for key in [k for k in kwargs if k in runner.overridable]:
        value = _as_value(kwargs.pop(key), key, where)
        _check_input(key, runner.declared[key], value, where)
        overrides[key] = value
    if len(args) > len(names):
        raise OnnxError(
            f"{where}: {len(args)} inputs given, the model takes {len(names)} ({', '.join(names)})"
        )
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names:
            raise OnnxError(f"{where}: the model has no input {key!r} (inputs: {', '.join(names)})")
        if key in bound:
            raise OnnxError(f"{where}: input {key!r} given twice")
        bound[key] = value
    values = []
    for name in names:
        if name not in bound:
            raise OnnxError(f"{where}: input {name!r} is missing")
        value = _as_value(bound[name], name, where)
        if not isinstance(value, list) and value is not EMPTY:
            _check_input(name, runner.declared[name], value, where)
        values.append(value)
    return values, overrides


def _to_output(value, where: str):
    """A model output as the caller sees it: an eager tensor (a NumPy array for dtypes ember
    lacks, a list for a sequence, None for an empty optional)."""
    if value is EMPTY:
        return None
    if isinstance(value, list):
        return [_to_output(v, where) for v in value]
    if is_static(value):
        # (the caller's own writable copy where the import's is read-only)
        value = np.require(value, requirements=["C", "W"])
        if supported_dtype(value.dtype):
            return _reg.eager_constant(value)
        return value
    return value


def _facts_of(args, values: list) -> list | None:
    """(type, array shape, array dtype) of each argument in ``args``, what `_bind`'s checks of
    it read, where each bound to an eager tensor in ``values`` (an eager tensor, or a NumPy
    array of a dtype ember has, which `_as_value` wraps); else None."""
    if len(args) != len(values):
        return None
    facts = []
    for arg, v in zip(args, values):
        data = getattr(v, "_data", None) if is_tensor(v) else None
        if type(data) is not np.ndarray:
            return None
        if type(arg) is np.ndarray:
            if arg.dtype != data.dtype:
                return None
        elif arg is not v:
            return None
        facts.append((type(arg), data.shape, data.dtype))
    return facts


_CHECKED = 4  # the latest calls' argument facts an OnnxFunction keeps (a few signatures)


def _is_eager(value) -> bool:
    """Whether `_to_output` returns ``value`` as it is (an eager tensor, the common output)."""
    return type(value) is Tensor


def _same_facts(value, facts: tuple) -> bool:
    kind = type(value)
    if kind is not facts[0]:
        return False
    data = value if kind is np.ndarray else getattr(value, "_data", None)
    return type(data) is np.ndarray and data.shape == facts[1] and data.dtype == facts[2]


def _fed(value):
    """An argument of a call that passed `_same_facts` as `_bind` binds it: an eager tensor
    as it is, a NumPy array wrapped as `_as_value` wraps it."""
    if type(value) is np.ndarray:
        # (np.require's checks, done here: they cost microseconds a small model notices)
        if not value.flags.c_contiguous:
            value = np.ascontiguousarray(value)
        return _reg.eager_constant(value)
    return value
