"""How the importer turns one ONNX node into ember ops: the converter table and a node's context.

A converter is a function ``fn(ctx, *inputs)`` registered for an ONNX operator (domain,
op_type) from an opset version on, with `converter`. It receives the node's inputs as
*values* and returns the node's output value (or a tuple of them). A value is one of

* a NumPy array: **static**, known while the model is imported or traced (initializers,
  Constant nodes, a tensor's shape, anything computed only from those);
* an ember `Tensor`: **dynamic** (a graph input, or computed from one); while a graph is being
  captured it is symbolic and its data is unknown;
* a Python list of values (ONNX sequences), `EMPTY` (an optional without a value) or None
  (an input the node leaves out).

Converters are written once, in ember ops, for both kinds: ``ctx.tensor(v)`` gives an ember
tensor for any value, ``ctx.static(v, what)`` the NumPy value of an input the op needs to know
(a shape, axes, pads); for a symbolic tensor that raises `NeedsData`, and the model then runs
eagerly. A node whose inputs are all static is *folded*: its converter runs on eager tensors
while the importer holds the results as NumPy arrays (constant folding, which is also how a
model's shape arithmetic, Shape -> Gather -> Concat -> Reshape, becomes plain numbers).

The table is keyed by ONNX operator names, which are the format's vocabulary: ember's own ops
are reached through their public functions, never by name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import dtypes as _dtypes
from ..errors import OnnxError
from ..ops import _registry as _reg
from ..ops._registry import TensorBase
from ..symbolic import SymDim
from ..tensor import Tensor


class NeedsData(OnnxError):
    """A converter needs the value of a tensor that is symbolic while a graph is captured (a
    data-dependent shape): the model runs eagerly instead."""


class _Empty:
    """An ONNX optional without a value."""

    def __repr__(self):
        return "EMPTY"


EMPTY = _Empty()

REQUIRED = object()


@dataclass(frozen=True)
class Converter:
    domain: str
    op_type: str
    since: int
    fn: Callable
    random: bool = False  # never folded: each run draws anew
    fold: bool = True  # may run on static inputs while importing
    # positions of inputs that are state, not weights (BatchNormalization's running
    # statistics): a trainable import makes such initializers buffers, not Parameters
    state_inputs: tuple = ()
    # positions of inputs the converter reads as numbers that set the output's shape (Resize's
    # scales, Range's bounds): no gradient reaches them, so a trainable import keeps such
    # initializers constants, not Parameters
    static_inputs: tuple = ()


CONVERTERS: dict[tuple[str, str], list[Converter]] = {}


def converter(
    op_type: str,
    since: int = 1,
    *,
    domain: str = "",
    random: bool = False,
    fold=True,
    state_inputs: tuple = (),
    static_inputs: tuple = (),
):
    """Register ``fn(ctx, *inputs)`` for ``op_type`` from opset ``since`` on (several
    registrations of one op: the newest whose ``since`` the model's opset reaches is used)."""

    def wrap(fn):
        names = (op_type,) if isinstance(op_type, str) else tuple(op_type)
        for name in names:
            entry = Converter(
                domain, name, since, fn, random, fold, tuple(state_inputs), tuple(static_inputs)
            )
            versions = CONVERTERS.setdefault((domain, name), [])
            versions.append(entry)
            versions.sort(key=lambda c: c.since)
        return fn

    return wrap


def find_converter(domain: str, op_type: str, opset: int) -> Converter | None:
    versions = CONVERTERS.get((domain, op_type))
    if not versions:
        return None
    chosen = None
    for entry in versions:
        if entry.since <= opset:
            chosen = entry
    return chosen


# ----------------------------------------------------------------------------------------------
# values


def is_static(value) -> bool:
    return isinstance(value, np.ndarray)


def static_value(value) -> bool:
    """Whether a value is known without running the model: absent, an empty optional, a NumPy
    array, or a sequence of such (a node whose inputs all are is folded)."""
    if value is None or value is EMPTY or is_static(value):
        return True
    if isinstance(value, list):
        return all(static_value(v) for v in value)
    return False


def is_tensor(value) -> bool:
    return isinstance(value, TensorBase)


def is_symbolic(value) -> bool:
    """A tensor recorded into a graph being built: its data is not known yet."""
    return isinstance(value, TensorBase) and not isinstance(value, Tensor)


def ember_dtype(np_dtype, where: str):
    """ember's dtype for a NumPy dtype, or an `OnnxError` naming the one ember lacks."""
    try:
        return _dtypes.from_numpy_dtype(np.dtype(np_dtype))
    except Exception:
        raise OnnxError(f"{where}: ember has no {np.dtype(np_dtype).name} tensors") from None


def supported_dtype(np_dtype) -> bool:
    """Whether ember's tensors compute values of this element type. The float8 formats are
    not (ember's float8 tensors only move and convert values, with PyTorch's saturation, not
    ONNX's), nor uint16/32/64 (PyTorch's few kernels for them): the converters compute them
    in NumPy, with ONNX's rules."""
    try:
        dtype = _dtypes.from_numpy_dtype(np.dtype(np_dtype))
    except Exception:
        return False
    return not (dtype.float8 or dtype.limited)


def to_tensor(value, where: str, dtype=None) -> Tensor:
    if isinstance(value, TensorBase):
        return value if dtype is None or value.dtype == dtype else value.to(dtype)
    if isinstance(value, np.ndarray):
        array = value
        if dtype is not None:
            array = array.astype(dtype.np if hasattr(dtype, "np") else dtype)
        ember_dtype(array.dtype, where)
        return _reg.constant(np.require(array, requirements="C"))
    if isinstance(value, (bool, int, float, np.generic)):
        return to_tensor(np.asarray(value), where, dtype)
    if value is None or value is EMPTY:
        raise OnnxError(f"{where}: a required input is missing")
    raise OnnxError(f"{where}: expected a tensor, got {type(value).__name__}")


def to_static(value, where: str, what: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, TensorBase):
        if is_symbolic(value):
            raise NeedsData(
                f"{where}: {what} is computed from the data (a symbolic tensor while the graph "
                "is captured)"
            )
        return value.numpy(force=True)
    if isinstance(value, (bool, int, float, np.generic)):
        return np.asarray(value)
    if value is None or value is EMPTY:
        raise OnnxError(f"{where}: {what} is missing")
    raise OnnxError(f"{where}: {what} must be a tensor, got {type(value).__name__}")


def check_size(shape, dtype, where: str, what: str = "a value") -> None:
    from ._model import memory_bytes

    count = span = 1
    for d in shape:
        if isinstance(d, SymDim):  # (a size known only when a captured model runs)
            continue
        d = int(d)
        if d < 0:
            raise OnnxError(f"{where}: {what} would have a negative dimension {tuple(shape)}")
        count *= d
        span *= max(d, 1)
    itemsize = np.dtype(dtype.np if hasattr(dtype, "np") else dtype).itemsize
    if span * itemsize >= 2**63:  # (NumPy refuses such a shape even when a 0 empties it)
        raise OnnxError(
            f"{where}: {what} of shape {tuple(int(d) for d in shape)} has dimensions whose "
            "product no array can index"
        )
    if count * itemsize > memory_bytes():
        raise OnnxError(
            f"{where}: {what} of shape {tuple(int(d) for d in shape)} would need "
            f"{count * itemsize} bytes, more than this machine's memory"
        )


@contextlib.contextmanager
def eager_island():
    """Run ops eagerly even while a graph is being captured (static folding)."""
    base = _reg._base_mode[0]
    _reg.push_mode(base)
    try:
        yield
    finally:
        popped = _reg.pop_mode()
        assert popped is base


# ----------------------------------------------------------------------------------------------
# a node's context


class NodeContext:
    """What a converter knows of its node: attributes, opset, output count, and the helpers
    that turn values into tensors or static arrays with errors naming the node."""

    def __init__(self, node, label: str, attrs: dict, opset: int, runner, env):
        self.node = node
        self.op_type = node.op_type
        self.label = label  # "model.onnx: node 3 'conv1' (Conv)"
        self.attrs = attrs
        self.opset = opset
        self.num_outputs = len(node.output)
        self.runner = runner  # the GraphRunner holding the node (subgraphs, opsets)
        self.env = env  # the values visible to subgraphs

    # attributes
    def attr(self, name: str, default=REQUIRED):
        if name in self.attrs:
            return self.attrs[name]
        if default is REQUIRED:
            raise OnnxError(f"{self.label}: attribute {name!r} is required")
        return default

    def has_attr(self, name: str) -> bool:
        return name in self.attrs

    # values
    def tensor(self, value, dtype=None) -> Tensor:
        return to_tensor(value, self.label, dtype)

    def static(self, value, what: str = "this input") -> np.ndarray:
        return to_static(value, self.label, what)

    def ints(self, value, what: str) -> list[int]:
        return [int(v) for v in np.asarray(self.static(value, what)).reshape(-1)]

    def check_size(self, shape, dtype, what: str = "its output") -> None:
        """Refuse a value of ``shape`` that would need more than this machine's memory (a
        shape read from a file, before anything that large is allocated)."""
        check_size(shape, dtype, self.label, what)

    def error(self, message: str) -> OnnxError:
        return OnnxError(f"{self.label}: {message}")

    def output_used(self, index: int) -> bool:
        return index < self.num_outputs and bool(self.node.output[index])

    # subgraphs (If, Loop, Scan, SequenceMap)
    def subgraph(self, name: str):
        """The `GraphRunner` for graph attribute ``name``; call ``ctx.run(sub, inputs)``."""
        return self.runner.subgraph(self.node, name, self.attrs)

    def run(self, sub, inputs: list) -> list:
        return sub.run(inputs, outer=self.env)
