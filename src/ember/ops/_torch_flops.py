"""The ``torch_flops`` rules: the aten operator PyTorch's ``FlopCounterMode`` reports a call of
an op under, or None where PyTorch counts nothing (ember.utils.flop_counter reads them, with
the op's ``cost`` rule for the number).

PyTorch counts only its products (mm, addmm, bmm, baddbmm, convolution and its backward, and
attention kernels it has a formula for) and names each by the aten operator the program
reached: ``linear`` is ``aten.addmm`` with a bias and ``aten.mm`` without, ``matmul`` folds a
batched left operand by a matrix into ``aten.mm`` and runs two batched operands as
``aten.bmm``, while a product with a vector (``mv``, ``dot``) is not counted; ``einsum``
contracts by ``aten.bmm``; a transposed convolution is ``aten.convolution`` and both gradients
of one are ``aten.convolution_backward``. Each rule is ``(inputs, attrs, backward) -> name``,
``inputs`` the
call's eager tensors (their shapes, dtypes and layouts), ``backward`` telling whether the call
runs in a backward pass.

A public function that PyTorch runs as one operator of its own reaches ember's products
through composites; it names what they count as with `counted_as` (None: uncounted, as
``mv`` and the CPU flash attention kernel are; ``"aten.baddbmm"``), which costs nothing
unless a counter watches (``REGIONS.watchers``). The nodes such a call records are not
counted in backward either where it is uncounted (PyTorch's backward of it is its own
operator too).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref


class _Regions(threading.local):
    """The names the calls being run on this thread count their products as (innermost
    last), kept only while a counter watches (``watchers``: process-wide)."""

    watchers = 0  # (a class attribute: one count for every thread)

    def __init__(self):
        self.names: list[str | None] = []


REGIONS = _Regions()


# the tape nodes recorded inside an uncounted call while a counter watched: their VJPs'
# products are not counted either, by this counter or a later one
UNCOUNTED_NODES: weakref.WeakSet = weakref.WeakSet()


@contextlib.contextmanager
def counted_as(name: str | None):
    """Inside the block, products count as ``name`` (None: not at all)."""
    REGIONS.names.append(name)
    try:
        yield
    finally:
        REGIONS.names.pop()


def counts_as(name: str | None):
    """Decorator of a public function PyTorch runs as one operator of its own: its products
    count as ``name`` (None: not at all) while a counter watches."""

    def wrap(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            if not REGIONS.watchers:
                return fn(*args, **kwargs)
            with counted_as(name):
                return fn(*args, **kwargs)

        return call

    return wrap


def matmul(inputs, attrs, backward: bool) -> str:
    """The primitive's operands are matrices (the public matmul reshapes vectors, and counts
    the calls PyTorch runs as ``mv`` or ``dot`` as uncounted)."""
    a, b = inputs[0], inputs[1]
    if a.ndim >= 3 and b.ndim >= 3:
        return "aten.bmm"
    if a.ndim == b.ndim == 2:
        return "aten.mm"
    return "aten.mm" if _folds(a, b) else "aten.bmm"


def _folds(a, b) -> bool:
    """PyTorch's ``should_fold``: a batch times a matrix runs as one ``mm`` where the right
    operand requires grad, or the batch is the left operand and its leading dimensions
    collapse into rows without a copy; else as ``bmm`` on the matrix expanded."""
    if b.requires_grad:
        return True
    if a.ndim == 2:
        return False
    if 0 in tuple(a.shape):
        return True
    shape, strides = tuple(a.shape), a.stride()
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(a.ndim - 2))


def linear(inputs, attrs, backward: bool) -> str:
    """PyTorch's linear takes addmm for a bias with a matrix or a contiguous input (viewed as
    a matrix), else a matmul by the transposed weight (folded or not) and an addition."""
    x, weight = inputs[0], inputs[1]
    if len(inputs) > 2 and (
        x.ndim == 2 or x.is_contiguous() and (x.ndim == 3 or inputs[2].ndim == 1)
    ):
        return "aten.addmm"
    if x.ndim <= 2:
        return "aten.mm"
    return "aten.mm" if _folds(x, weight) else "aten.bmm"


def addmm(inputs, attrs, backward: bool) -> str:
    return "aten.addmm"


def einsum(inputs, attrs, backward: bool) -> str | None:
    return "aten.bmm" if len(inputs) > 1 else None


def convolution(inputs, attrs, backward: bool) -> str:
    return "aten.convolution"


def convolution_backward(inputs, attrs, backward: bool) -> str:
    return "aten.convolution_backward"


def transposed_or_backward(inputs, attrs, backward: bool) -> str:
    """conv_input_grad: a transposed convolution's forward, or a convolution's gradient."""
    return "aten.convolution_backward" if backward else "aten.convolution"


def attention(inputs, attrs, backward: bool) -> str | None:
    """The fused inference attention: PyTorch's CPU flash kernel for 4-d operands (no formula,
    uncounted), its math path's two batched products otherwise."""
    return None if inputs[0].ndim == 4 else "aten.bmm"
