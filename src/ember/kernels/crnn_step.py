"""The C graph runner's step of a whole-layer LSTM, GRU or Elman RNN node (runtime/cgraph.py):
kernels/crnn.py's ``ember_rnn_layer`` called from C, so a recurrent model runs whole in the
runner rather than leaving every node to generated Python for want of one step.

The step does what `crnn.lstm_forward` / `gru_forward` / `elman_forward` do around the loop:
it packs W_hh (where the weight is a frozen graph constant, once, when the step is made; else
at every run, into the step's own panels), points the loop at the run's arrays, runs every time
step in one call, and copies the last step's h (and c) into h_n (and c_n). Its results are
therefore the fast rule's. It runs only where crnn.py's packed product does (ember's own
micro-kernel: kernels/cgemm.py's `own_kernel`); elsewhere None, and generated code runs the
node.
"""

from __future__ import annotations

import ctypes

import numpy as np

from . import crnn
from .cstep import CStep, data_address, function_address

__all__ = ["rnn_layer_c_step"]

_SOURCE = r"""
#include <string.h>
typedef void (*layer_fn)(const long *dims, void *const *ptrs, void *pool);
typedef void (*pack_fn)(const void *b, long k, long H, long G, long U, long sp, long sj,
                        void *bp);
/* a: 0 the layer loop, 1 its dims, 2 its pointer block (this step's own), 3 the pool (or 0),
   4 the pack function (0: packed when the step was made), 5 the panels, 6 H, 7 G, 8 U,
   9 the byte offset of the last step's h in y (and of its c in cs), 10 the bytes of one h,
   then the node's arrays: 11 xg, 12 h0, 13 c0, 14 b_hh, 15 w_hh, 16 y, 17 h_n, 18 c_n, 19 cs,
   20 acts (0 where the cell has none) */
void rnn_layer_step(const long *a) {
  void **p = (void **)a[2];
  /* W_hh (G*H x H, row-major) read as its transpose b (H x G*H): b[q, j] at q + j * H */
  if (a[4]) ((pack_fn)a[4])((const void *)a[15], a[6], a[6], a[7], a[8], 1, a[6], (void *)a[5]);
  p[0] = (void *)a[11], p[1] = (void *)a[12], p[2] = (void *)a[13], p[3] = (void *)a[14];
  p[9] = (void *)a[16], p[10] = (void *)a[19], p[11] = (void *)a[20];
  ((layer_fn)a[0])((const long *)a[1], p, (void *)a[3]);
  memcpy((void *)a[17], (const char *)a[16] + a[9], a[10]);
  if (a[18]) memcpy((void *)a[18], (const char *)a[19] + a[9], a[10]);
}
"""

# the step's argument slots of the node's arrays
_XG, _H0, _C0, _BIAS, _W, _Y, _HN, _CN, _CS, _ACTS = range(11, 21)


def _step_function():
    from . import ccompile

    try:
        return ccompile.load(_SOURCE, "rnn_layer_step", [ctypes.c_void_p])
    except ccompile.CompileError:
        return None


def rnn_layer_c_step(node, cell: str, weight: int, frozen: np.ndarray | None):
    """The step of a ``lstm_layer`` (cell "lstm"), ``gru_layer`` ("gru") or ``rnn_layer``
    ("tanh", "relu") node whose recurrent weight is input ``weight`` (``frozen``: its array
    where it is a frozen graph constant), or None."""
    xg = node.inputs[0].type
    dtype = np.dtype(xg.dtype.np)
    steps, rows, width = xg.shape
    gates = {"lstm": 4, "gru": 3}.get(cell, 1)
    hidden = width // gates
    w_type = node.inputs[weight].type
    same = all(np.dtype(v.type.dtype.np) == dtype for v in (*node.inputs, *node.outputs))
    if not same or 0 in (steps, rows, hidden) or crnn._loop(dtype) is None:
        return None
    packed = crnn._packed_functions(dtype)
    if packed is None:
        return None  # (the BLAS runs the products: one call per step, from Python)
    step = _step_function()
    if step is None:
        return None
    w = frozen if frozen is not None else np.zeros(w_type.shape, dtype)
    product = crnn._Product(w.T, rows, hidden, gates, steps, {})
    if not product.packed:  # (one time step: crnn's product reads W_hh unpacked, from Python)
        return None
    codes = {"lstm": crnn._LSTM, "gru": crnn._GRU, "tanh": crnn._TANH, "relu": crnn._RELU}
    reverse = bool(node.attrs["reverse"])
    dims = np.array(
        [codes[cell], 0, steps, rows, hidden, reverse, product.parts, product.ldr, 0, steps,
         product.units],
        np.int64,
    )  # fmt: skip
    zero = np.zeros(4 * hidden, dtype)  # (what the loop reads for gradients not given)
    ptrs = np.zeros(len(crnn._POINTERS), np.uintp)
    ptrs[crnn._POINTERS.index("bp")] = data_address(product.bp)
    ptrs[crnn._POINTERS.index("rec")] = data_address(product.rec)
    ptrs[crnn._POINTERS.index("panels")] = product.panels
    ptrs[crnn._POINTERS.index("zero")] = data_address(zero)
    last = 0 if reverse else steps - 1
    one_h = rows * hidden * dtype.itemsize
    args = np.zeros(21, np.int64)
    args[:11] = [
        function_address(crnn._loop(dtype)), data_address(dims), data_address(ptrs),
        product.pool or 0, 0 if frozen is not None else function_address(packed[0]),
        data_address(product.bp), hidden, gates, product.units, last * one_h, one_h,
    ]  # fmt: skip
    outputs = {"lstm": (_Y, _HN, _CN, _CS, _ACTS), "gru": (_Y, _HN, _ACTS)}
    slots = [(_XG, "in", 0), (_H0, "in", 1)]
    if cell == "lstm":
        slots += [(_C0, "in", 2), (_W, "in", 3)]
    elif cell == "gru":
        slots += [(_W, "in", 2), (_BIAS, "in", 3)]
    else:
        slots += [(_W, "in", 2)]
    slots += [(slot, "out", i) for i, slot in enumerate(outputs.get(cell, (_Y, _HN)))]
    keep = (step, crnn._loop(dtype), packed, product, dims, zero, ptrs, w)
    return CStep(function_address(step), args, slots, keep)
