"""The sink of a leaf's gradients in the eager tape: `AccumulateGrad`, as PyTorch's node of that
name (a leaf's hooks, then the sum into ``.grad``: in place where nobody else's memory is
touched, sparse gradients side by side, then its post-accumulate-grad hooks). `_sequence`
numbers the tape's nodes and sinks in creation order, the order ``autograd.py``'s engine runs
them in reverse."""

from __future__ import annotations

import itertools

import numpy as np

from . import autograd_node_hooks as _node_hooks
from .grad_mode import set_grad_enabled
from .ops import _memory_format
from .ops import api as _reg_api
from .ops.sparse_tensor import SparseTensor
from .tensor import GRAD_SLOT, Tensor

_sequence = itertools.count()


def _run_hooks(hooks, g):
    if hooks:
        for hook in list(hooks.values()):
            out = hook(g)
            if out is not None:
                _node_hooks.check_hook_value(hook, g, out)
                g = out
    return g


class AccumulateGrad:
    """The sink of a leaf tensor's gradients: runs the leaf's hooks, adds into ``.grad``, then runs
    its post-accumulate-grad hooks."""

    __slots__ = ("variable", "_seq", "_extras", "__weakref__")
    _edges = next_functions = ()

    def __init__(self, variable: Tensor):
        self.variable = variable
        self._seq = next(_sequence)
        self._extras = None  # its own hooks (PyTorch's AccumulateGrad.register_hook)

    # a program may hook the sink itself, as PyTorch's ``p.expand_as(p).grad_fn
    # .next_functions[0][0].register_hook(...)`` idiom does: pre-hooks see ``(gradient,)``
    # before the leaf's own hooks, hooks ``((), (gradient,))`` after the sum into .grad
    register_hook = _node_hooks.register_hook
    register_prehook = _node_hooks.register_prehook
    metadata = _node_hooks.metadata

    def name(self) -> str:
        return "AccumulateGrad"

    def __repr__(self) -> str:
        return "<AccumulateGrad>"

    def accumulate(self, g: Tensor, create_graph: bool, claimed: set) -> None:
        t = self.variable
        extras = self._extras
        if extras is not None:
            (g,) = _node_hooks.run_prehooks(extras, [g])
        hooks = t._hooks
        if hooks:
            g = _run_hooks(hooks, g)
        if type(g) is SparseTensor:  # F.embedding(sparse=True)'s gradient
            t.grad = _add_sparse(t.grad, g, create_graph)
        else:
            self._add_dense(t, g, create_graph, claimed)
        if t._post_hooks:
            for hook in list(t._post_hooks.values()):
                hook(t)
        if extras is not None:
            _node_hooks.run_hooks(extras, (), [g])

    @staticmethod
    def _add_dense(t: Tensor, g: Tensor, create_graph: bool, claimed: set) -> None:
        if not create_graph:
            arr = g._data
            # a gradient array may also be held by another leaf or be a read-only view
            if arr.base is not None or id(arr) in claimed or not arr.flags.writeable:
                arr = arr.copy()
            if t.grad is None and type(arr) is np.ndarray and type(t._data) is np.ndarray:
                arr = _in_layout_of(t._data, arr)
            claimed.add(id(arr))
            g = Tensor._wrap(arr)
        current = t.grad
        if current is None:
            data = t._data
            if not create_graph and arr.dtype == data.dtype and arr.shape == data.shape:
                # a fresh array of t's dtype and shape passes the setter's checks
                # (tensor._check_assigned_grad): stored without them
                GRAD_SLOT.__set__(t, g)
            else:
                t.grad = g
        elif not create_graph and type(current) is not SparseTensor and _adds_in_place(current, g):
            # PyTorch's AccumulateGrad: a .grad nobody else holds is added into in place
            # (gradient accumulation over micro-batches writes into warm memory, allocates none)
            np.add(current._data, g._data, out=current._data)
            current._vc[0] += 1
        else:
            with set_grad_enabled(create_graph):
                t.grad = current + g


def _in_layout_of(leaf: np.ndarray, arr: np.ndarray) -> np.ndarray:
    """A leaf's first gradient laid out as the leaf (PyTorch's AccumulateGrad layout
    contract, for the layouts ember makes): row-major for a row-major leaf, channels-last
    for a channels-last one."""
    if leaf.flags.c_contiguous:
        return arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
    fmt = _memory_format.preserved(leaf)
    if fmt is None or _memory_format.is_in(arr, fmt):
        return arr
    return _memory_format.laid_out(arr, fmt)


def _add_sparse(current, g: SparseTensor, create_graph: bool):
    """A leaf's ``.grad`` after a sparse gradient ``g`` arrives, as PyTorch's AccumulateGrad:
    ``g`` itself (detached) where there was none, the two sparse gradients' entries side by side
    (uncoalesced), or a dense sum where the ``.grad`` is dense."""
    if not create_graph:
        g = g.detach()
    if current is None:
        return g
    if type(current) is SparseTensor:
        with set_grad_enabled(create_graph):
            return SparseTensor(
                _reg_api.cat([current._idx, g._idx], 1),
                _reg_api.cat([current._vals, g._vals.to(current.dtype)], 0),
                current._size,
                False,
            )
    with set_grad_enabled(create_graph):
        return current + g.to_dense()


def _adds_in_place(current: Tensor, g: Tensor) -> bool:
    """Whether a leaf's ``.grad`` (``current``) takes ``g`` in place, as PyTorch's
    AccumulateGrad does outside grad mode whoever else holds the ``.grad`` (a reference the
    user kept sees the sum): its memory is writable, of g's shape and dtype, and it has no
    graph (a ``.grad`` with a history is a value some graph computed)."""
    a, b = current._data, g._data
    return (
        type(a) is np.ndarray
        and type(b) is np.ndarray
        and current.grad_fn is None
        and not current._requires_grad
        and a.shape == b.shape
        and a.dtype == b.dtype
        and a.flags.writeable
        and not np.may_share_memory(a, b)
    )
