"""The C graph runner's step interface (runtime/cgraph.py runs the steps).

A *C step* is a function ``void step(const long *args)`` and its argument block: pointers to a
node's inputs and outputs, sizes, and scratch memory of its own, so steps running at once never
share any. Kernels build steps for the nodes they compute (kernels/csteps.py, kernels/cconv.py,
kernels/cpooling.py, ...); an op offers them through its ``c_step`` rule.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "BIAS_RELU",
    "STEP_CALL",
    "CStep",
    "data_address",
    "function_address",
    "layout_operands",
]


@dataclass
class CStep:
    """A node's C step: ``fn`` (the address of ``void step(const long *args)``), its argument
    block ``args`` (int64), the ``slots`` of ``args`` that take the node's arrays at each run
    (``(slot, "in" or "out", index)``), and what must live as long as the step (``keep``:
    scratch memory, tables, the library the function lives in). ``contiguous_inputs``: the
    node's inputs that generated code must hold C-contiguous for the step to compute what it
    computes (the runner's arrays always are; a product handed to NumPy rounds by its
    operands' layouts: kernels/cnumpy_product.py); runtime/cgraph.py checks them.
    ``failed``: for a step that checks its inputs' values (a gather's indices), an int64 array
    of one element that the step sets nonzero, writing nothing, where the op's kernel would
    raise; the runner then raises the kernel's own error (C has no exceptions).
    ``overwrites_operand``: the step computes right even where an output of an input's type is
    that input's own memory (a fused loop's elementwise index-by-index writes, as generated code
    hands it ``out=`` a dying operand): the runner then places such an output over an operand
    nothing reads afterwards (runtime/cgraph_memory.py). ``same_bytes``: the output is the
    first input's bytes in their order (a reshape's copy): the runner may hold both in one
    buffer, and the step, finding its output at its input's address, copies nothing."""

    fn: int
    args: np.ndarray
    slots: list
    keep: tuple = field(default=())
    contiguous_inputs: tuple = field(default=())
    failed: np.ndarray | None = field(default=None)
    overwrites_operand: bool = field(default=False)
    same_bytes: bool = field(default=False)


def layout_operands(x) -> tuple:
    """The operands of a product by a matrix whose layouts its kernels read, ``x`` being the
    left operand's type: both where x is a matrix; the matrix only where x has batch
    dimensions, which every kernel folds into rows of a C-contiguous x, copying a strided one
    first (ops/_matmul_kernels.py `_matmul`, ops/_row_blocks.py `rows_of`: a batch-first
    sequence seen time-first, as a batch_first LSTM's input projection reads it), as the
    runner's own copy of the view gives it."""
    return (0, 1) if len(x.shape) == 2 else (1,)


# the product steps' epilogue (kernels/csteps.py, cnumpy_product.py, cprepack.py): + bias per
# column when given, then ReLU when asked (NaN and -0.0 stay, as np.maximum leaves them), as the
# eager kernels' ``out += bias`` and ReLU compute it
BIAS_RELU = r"""
#define EMBER_BIAS_RELU(T, out, bias, m, n, relu)                                   \
  if ((bias) || (relu))                                                               \
    for (long i_ = 0; i_ < (m); i_++)                                                 \
      for (long j_ = 0; j_ < (n); j_++) {                                             \
        T v_ = (bias) ? (out)[i_ * (n) + j_] + (bias)[j_] : (out)[i_ * (n) + j_];     \
        (out)[i_ * (n) + j_] = (relu) && v_ < 0 ? 0 : v_;                             \
      }
"""

# a step's function as ctypes calls it (from its address: ``STEP_CALL(step.fn)``)
STEP_CALL = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def function_address(fn) -> int:
    """The address of a ctypes function (what a step's ``fn`` holds)."""
    return ctypes.cast(fn, ctypes.c_void_p).value


_BYTE = ctypes.c_char
_ndarray = np.ndarray
# An ndarray's data pointer is the first field after the object header in NumPy's
# `PyArrayObject_fields` (numpy/ndarraytypes.h, the same in NumPy 1.x and 2.x): read there, an
# address costs one small ctypes object, about half of a buffer export's, and read-only,
# strided and empty arrays need no `ndarray.ctypes` either. `_reads_data_field` checks the
# layout against `ndarray.ctypes` once, on arrays of each kind, before it is trusted.
_DATA_FIELD = object.__basicsize__
_pointer_at = ctypes.c_void_p.from_address


def _exported_address(a) -> int:
    """``a.ctypes.data``, by a buffer export where the array gives a writable contiguous one."""
    try:
        return ctypes.addressof(_BYTE.from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


def _field_address(a) -> int:
    return _pointer_at(id(a) + _DATA_FIELD).value or 0


def _reads_data_field() -> bool:
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    frozen = base[1:].copy()
    frozen.flags.writeable = False
    probes = (base, base[1:, 2:], base[:, ::2], base.T, frozen, np.empty(0), np.float64(0) * base)
    return all(_field_address(p) == p.ctypes.data for p in probes)


_FIELD_READ = _reads_data_field()


def data_address(a: np.ndarray) -> int:
    """The address of an array's first element, as ``a.ctypes.data`` gives it, without building
    the ``ctypes`` helper object (a small kernel's call pays this per operand): read off the
    array's data field (`_reads_data_field`), else a buffer export, else ``a.ctypes.data``."""
    if type(a) is _ndarray and _FIELD_READ:
        return _pointer_at(id(a) + _DATA_FIELD).value or 0
    return _exported_address(a)
