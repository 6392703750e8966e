"""Kernels a backward that records nothing (create_graph=False) runs without the dispatcher,
where a dispatch would only run the kernel and wrap its result (`_registry.plain_eager_no_grad`,
on eager arrays): the matrix products of the products' VJPs (ops/linalg.py's matmul and
linear), and the engine's sums of gradients reaching one value along several paths
(autograd.py).

``g @ b.T`` then costs one kernel call on ``b``'s transposed view rather than a dispatched
transpose and a dispatched product. The view is the one the transpose op makes (NumPy's, the
same strides) and the kernel is the product op's own, so the result has the same bits; what
the dispatch would check (one dtype, matching inner dimensions, matrices) is checked here, and
anything else (a hook's gradient of another dtype or shape, batches, meta arrays) takes the
dispatcher, which raises its errors.

`direct` runs any op so (the sums to a broadcast operand's shape, a reduction's gradient
spread back, the products of the elementwise VJPs): its kernel on the operands' arrays where
the op's shape rule accepted this very signature before (its kept answer, ``cached_infer``), so
every check a dispatch makes would pass, with the result laid out and, for a view, sharing its
source's version counter, as a dispatch leaves it (the eager mode's marking, installed as
``_registry.view_marker``).
"""

from __future__ import annotations

import numpy as np

from .. import _meta
from .. import dtypes as dt
from . import _registry as _reg
from ._memory_format import lay_out_results
from ._registry import eager_constant, plain_eager_no_grad

__all__ = ["apply_direct", "direct", "direct_product", "direct_sum"]

# the dtypes whose products the primitive takes as they are (float8 is refused by its rule)
_DIRECT = frozenset(
    d.np for d in (dt.float16, dt.bfloat16, dt.float32, dt.float64, dt.complex64, dt.complex128)
)
_ndarray = np.ndarray


def direct_product(run, x, y, tx: bool = False, ty: bool = False):
    """``run(x', y')`` as an eager tensor, ``x'`` being ``x`` or its transpose (``tx``) and
    ``y'`` likewise, for two matrices of one dtype where no dispatch is needed; else None."""
    a = getattr(x, "_data", None)
    b = getattr(y, "_data", None)
    if type(a) is not _ndarray or type(b) is not _ndarray:
        return None
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.dtype not in _DIRECT:
        return None
    if tx:
        a = a.T
    if ty:
        b = b.T
    if a.shape[1] != b.shape[0] or not plain_eager_no_grad():
        return None
    result = run(a, b)
    return eager_constant(result if type(result) is _ndarray else np.asarray(result))


def direct_sum(add, x, y):
    """``x + y`` by the add op's kernel ``add`` for two arrays of one shape and dtype (nothing
    to broadcast or promote) where no dispatch is needed; else None."""
    a = x._data
    b = y._data
    if (
        type(a) is not _ndarray
        or type(b) is not _ndarray
        or a.shape != b.shape
        or a.dtype != b.dtype
        or not plain_eager_no_grad()
    ):
        return None
    result = add(a, b)
    return eager_constant(result if type(result) is _ndarray else np.asarray(result))


def direct(op, *tensors, **attrs):
    """``op``'s result on eager ``tensors`` by its own kernel, without a dispatch, where the
    dispatch would do nothing more (see the module docstring); else None, and the caller
    dispatches (the same call, or the public function it stands for)."""
    cache = op.infer_cache
    if cache is None or op.num_outputs != 1 or _meta.active[0]:
        return None
    state = _reg._state  # (`plain_eager_no_grad`, inlined: every VJP step asks)
    base = _reg._base_mode[0]
    if (
        state.grad_enabled
        or state.modes
        or state.autocast is not None
        or _reg.conformance is not None
        or base is not _reg._plain_eager[0]
    ):
        return None
    n = len(tensors)
    # (the eager mode's signature of the call, eager.py: one to three operands spelled out)
    if n == 1:
        a = getattr(tensors[0], "_data", None)
        if type(a) is not _ndarray:
            return None
        arrays = (a,)
        key = (a.shape, a.dtype)
    elif n == 2:
        a = getattr(tensors[0], "_data", None)
        b = getattr(tensors[1], "_data", None)
        if type(a) is not _ndarray or type(b) is not _ndarray:
            return None
        arrays = (a, b)
        key = (a.shape, a.dtype, b.shape, b.dtype)
    elif n == 3:
        a = getattr(tensors[0], "_data", None)
        b = getattr(tensors[1], "_data", None)
        c = getattr(tensors[2], "_data", None)
        if type(a) is not _ndarray or type(b) is not _ndarray or type(c) is not _ndarray:
            return None
        arrays = (a, b, c)
        key = (a.shape, a.dtype, b.shape, b.dtype, c.shape, c.dtype)
    else:
        return None
    if attrs:
        key = (key, tuple(attrs.items()), tuple(map(type, attrs.values())))
    try:
        hit = cache.get(key)
    except TypeError:  # (an unhashable attribute)
        return None
    if hit is None:
        return None
    try:
        result = hit[2](*arrays, **attrs)  # (op.run, or its kernel: eager.py keeps which)
    except Exception:  # (the dispatch runs it again and raises the op's error)
        return None
    out = base.constant(result if type(result) is _ndarray else np.asarray(result))
    layout = op.layout
    if layout is not None and 3 < out._data.ndim < 6:
        lay_out_results(layout, tensors, (out,))
    if op.view or op.aliases:
        _reg.view_marker[0](op, attrs, tensors, (out,), (hit[1],))
    return out


def apply_direct(op, *tensors, **attrs):
    """``apply(op, *tensors, **attrs)``, by `direct` where it takes the call: a VJP's backward
    op (gelu's, softmax's), recorded when the backward records (create_graph=True)."""
    out = direct(op, *tensors, **attrs)
    return _reg.apply(op, *tensors, **attrs) if out is None else out
