"""Aliasing views and in-place writes through them, as PyTorch's autograd sees them.

A view op's output (an OpDef with ``view=True``: reshape, getitem, permute, broadcast_to, and
everything written over them: select, narrow, t, diagonal, unsqueeze...) remembers its root
base and the chain of view ops that reaches it from the base (``_view_of``), and a stamp of
the base's state when its own history was last in step with it (``_view_src``). Two things
then follow PyTorch:

* an in-place op on a view also updates the base: eagerly the data is shared already, so only
  the base's history changes (the base becomes a scatter of the view's new value into its old
  value, PyTorch's CopySlices); while a graph is built nothing is shared, so the base is
  rebound to that scatter. A write into a view whose elements overlap (an expanded view) is
  refused, as PyTorch refuses it.
* a view whose base has changed since (through the base or another view of it) is stale: its
  history (eagerly) or its graph value (while a graph is built) is replayed from the base before
  it is read.

The pieces of a multi-output op that aliases its input (split, chunk, unbind: the ``aliases``
rule) share its memory and version but have no chain: as in PyTorch, an in-place op that would
give one a history is refused (`refuse_multi_output`), and a piece is the base of its own views.

The scatter's positions are the base's flat element numbers pushed through the view chain's
own kernels (NumPy views of an ``arange``), so every view op is covered by one rule; where a
step of the chain copied instead of viewing (a reshape of non-contiguous data) the result is
not an alias and the base is left alone.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as _dt
from .errors import AutogradError, TraceError
from .ops import _registry as _reg
from .symbolic import SymDim
from .symbolic_assumptions import layout_by_example, layout_examples

# the chain of a piece of a multi-output op (split): such a view cannot be written in place
# while gradients are recorded, and is never replayed
MULTI_OUTPUT = "multi-output"


def _symbolic_mode():
    """The graph-building mode in effect, or None when eager."""
    modes = _reg._state.modes
    mode = modes[-1] if modes else None
    return mode if mode is not None and hasattr(mode, "value_of") else None


def stamp(base):
    """What identifies the base's current state: its version counter's value when eager, the
    graph value standing for it while a graph is built."""
    mode = _symbolic_mode()
    if mode is None:
        return base._vc[0]
    return mode.value_of(base)


def record(out, src, op, attrs) -> None:
    """``out`` is the result of view op ``op`` on ``src``: remember its root base and chain."""
    view_of = getattr(src, "_view_of", None)
    if view_of is None or not isinstance(view_of[1], tuple):
        # (a piece of a split, or a graph value's .data, is the base of its own views)
        base, chain = src, ()
    else:
        base, chain = view_of
    out._view_of = (base, (*chain, (op, attrs)))
    out._view_src = stamp(base)


def is_stale(view) -> bool:
    base, chain = view._view_of
    if chain is MULTI_OUTPUT:
        return False
    current = stamp(base)
    return current is not view._view_src and current != view._view_src


def replay(view):
    """The view's value recomputed from its base's current value, in the current mode."""
    base, chain = view._view_of
    if chain is None:  # a graph value's ``.data``: the base's value, without history
        return base.detach()
    current = base
    for op, attrs in chain:
        current = _reg.apply(op, current, **attrs)
    return current


def refresh(view) -> None:
    """Bring a stale view's history (eager) or graph value (capture) up to date with its base."""
    fresh = replay(view)
    if _symbolic_mode() is None:
        view.grad_fn = fresh.grad_fn
        view._output_nr = fresh._output_nr
        view._requires_grad = fresh._requires_grad
    else:
        view.value = fresh.value
    view._view_src = stamp(view._view_of[0])


def _positions(shape, chain, is_complex=False, numbers=None):
    """The flat base positions of the view's elements (an int64 array of the view's shape), or
    None where the chain copies (no alias) or the base's shape is not concrete. A complex
    base's positions go through the chain as complex numbers ``n + nj``: a chain that ends in
    one part of them (``.real``, ``.imag``: a real view of complex memory) raises, its write
    being no scatter of whole elements."""
    if numbers is None:  # (given: the base's own positions, a view of a split's input)
        if not all(isinstance(d, (int, np.integer)) for d in shape):
            # symbolic sizes: the layout at the captured call's sizes, which is the layout
            # at any sizes but 0 and 1 (those automatic dynamic shapes keep static)
            bindings = layout_examples()
            shape = _at_sizes(shape, bindings)
            if shape is None:
                return None
            chain = [(op, _at_sizes(attrs, bindings)) for op, attrs in chain]
            if any(attrs is None for _, attrs in chain):
                return None
        numbers = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    if is_complex:
        numbers = numbers * (1 + 1j)
    current = numbers
    for op, attrs in chain:
        try:
            current = (op.as_view or op.kernel)(current, **attrs)
        except ValueError:  # (``as_view`` raises where the kernel would copy)
            return None
        # (an empty view shares no memory, yet is one: its write still goes through the base)
        if np.size(current) and not np.may_share_memory(current, numbers):
            return None
    if is_complex:
        if np.asarray(current).dtype.kind != "c":
            raise AutogradError(
                "an in-place write into the real or imaginary part of a complex tensor (a view "
                "of .real, .imag or view_as_real) whose base has autograd history, or while a "
                "graph is built, is not supported by ember; build the new value out of place "
                "(ember.complex(re, im)) instead",
                op="in-place",
            )
        return np.asarray(current).real.astype(np.int64)
    return np.asarray(current)


def _at_sizes(value, bindings):
    """``value`` (a shape, a view's attributes) with its symbolic sizes evaluated at
    ``bindings``; None where a symbol has no size there."""
    if isinstance(value, SymDim):
        return value.evaluate(bindings) if bindings and value.symbols() <= bindings.keys() else None
    if isinstance(value, (tuple, list)):
        items = [_at_sizes(v, bindings) for v in value]
        if any(i is None and v is not None for i, v in zip(items, value)):
            return None
        return type(value)(items) if type(value) in (tuple, list) else tuple(items)
    if isinstance(value, slice):
        parts = [_at_sizes(v, bindings) for v in (value.start, value.stop, value.step)]
        given = (value.start, value.stop, value.step)
        if any(p is None and v is not None for p, v in zip(parts, given)):
            return None
        return slice(*parts)
    if isinstance(value, dict):
        items = {k: _at_sizes(v, bindings) for k, v in value.items()}
        if any(items[k] is None and v is not None for k, v in value.items()):
            return None
        return items
    return value


def dense(t) -> bool:
    """Whether a graph value's elements would lie in row-major order in memory, as its eager
    counterpart's would: a graph value is dense, but a view of one (a transpose, a column
    slice) has its base's layout, so ``is_contiguous()`` is False and ``contiguous()`` copies
    (a write into that copy must not reach the base). Its base's flat positions through the
    view chain, in order one apart."""
    view_of = getattr(t, "_view_of", None)
    if view_of is None or not isinstance(view_of[1], tuple):
        return True
    base, chain = view_of
    try:
        with layout_by_example():  # (dense or not: the same at every size but 0 and 1)
            positions = _positions(tuple(base.shape), chain, base.dtype.is_complex)
    except AutogradError:
        return True  # (a part of complex memory: ember's graphs hold it densely)
    if positions is None:
        return True  # (the chain copied: a new dense value)
    flat = positions.reshape(-1)
    return bool(flat.size < 2 or np.all(np.diff(flat) == 1))


def layout(t) -> tuple[tuple, int]:
    """The strides (in elements) and storage offset a graph value's eager counterpart would
    have: a view's are those of the view chain taken on its (dense) base, any other value's the
    row-major strides of its shape and offset 0. Shapes with symbolic dims give the row-major
    strides as products of them (a view of such a base raises: its layout is not known, short
    of a chain that copies, whose result is dense)."""
    shape = tuple(t.shape)
    view_of = getattr(t, "_view_of", None)
    if view_of is None and _is_piece(t):  # (a piece of a split: its graph's view nodes)
        view_of = (None, "piece")
    if view_of is not None and (isinstance(view_of[1], tuple) or view_of[1] == "piece"):
        base, chain = view_of
        try:  # (a complex base's chain taken on real numbers: its strides count elements)
            if base is None:
                positions = _graph_positions(t.value)
            elif getattr(base, "_view_of", None) is None and _is_piece(base):
                start = _graph_positions(base.value)  # (a view of a piece of a split)
                positions = None if start is None else _positions((), chain, numbers=start)
            else:
                positions = _positions(tuple(base.shape), chain)
        except (ValueError, TypeError, AutogradError):
            positions = None
        if positions is not None:
            origin = np.asarray(positions).base
            while isinstance(origin, np.ndarray) and origin.base is not None:
                origin = origin.base
            item = positions.itemsize
            start = positions.__array_interface__["data"][0]
            root = start if origin is None else origin.__array_interface__["data"][0]
            return tuple(s // item for s in positions.strides), (start - root) // item
        elif base is not None and not all(isinstance(d, (int, np.integer)) for d in base.shape):
            raise TraceError(
                "the strides and storage offset of a view of a tensor with symbolic sizes are "
                "not known while a graph is built; read them from a tensor of concrete shape, "
                "or of the view's contiguous() copy",
                op="stride",
            )
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step = step * d
    return tuple(reversed(strides)), 0


def _is_piece(t) -> bool:
    """Whether a graph value is an output of a multi-output view op (split, chunk, unbind)."""
    node = getattr(getattr(t, "value", None), "node", None)
    op = getattr(node, "op", None)
    return op is not None and op.aliases and op.num_outputs != 1  # (None: a varying count)


def _graph_positions(value):
    """A graph value's flat positions in the memory of the first value up its producers that
    no view op made (its kernels, as_view where given, taken on that value's positions), or
    None where one copies or the root's shape is symbolic."""
    chain = []
    while value.node is not None and value.node.op is not None:
        node = value.node
        if not (node.op.view or node.op.aliases) or len(node.inputs) != 1:
            break
        chain.append((node, value.index))
        value = node.inputs[0]
    shape = tuple(value.type.shape)
    if not chain or not all(isinstance(d, (int, np.integer)) for d in shape):
        return None
    numbers = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    current = numbers
    for node, index in reversed(chain):
        out = (node.op.as_view or node.op.kernel)(current, **node.attrs)
        current = out[index] if isinstance(out, (tuple, list)) else out
        # (an empty view shares no memory, yet is one: its write still goes through the base)
        if np.size(current) and not np.may_share_memory(current, numbers):
            return None
    return np.asarray(current)


def refuse_multi_output(view, result, what: str) -> None:
    """Before a piece of a multi-output op (split, chunk, unbind), or an output of a custom
    autograd Function that aliases an input, takes a value with history: PyTorch refuses that
    write, whose history its base could not follow."""
    if view._view_of[1] is MULTI_OUTPUT and result._requires_grad:
        function = getattr(view.grad_fn, "_cls", None)  # (a custom autograd Function's output)
        if function is not None:
            raise AutogradError(
                f"Output {view._output_nr} of {function.__name__} is a view and is being "
                "modified inplace. This view was created inside a custom Function (or because "
                "an input was returned as-is) and the autograd logic to handle view+inplace "
                "would override the custom backward associated with the custom Function; "
                "clone the output of the custom Function",
                op=what,
            )
        raise AutogradError(
            "this tensor is one of several views a function returned (split, chunk, unbind), "
            "which cannot be modified in place while gradients are recorded; use the "
            "out-of-place form, or clone the piece first",
            op=what,
        )


def _overlap_error(view, base_shape, what: str) -> AutogradError:
    of = f" of a tensor of shape {tuple(base_shape)}" if base_shape is not None else ""
    return AutogradError(
        f"unsupported operation: more than one element of the written-to tensor (a view of "
        f"shape {tuple(view.shape)}{of}) refers to a single memory location; clone the tensor "
        "before the in-place operation",
        op=what,
    )


def refuse_read_only(t, what: str) -> None:
    """Before an in-place write into a tensor whose array is read-only: an expanded view that
    repeats elements (PyTorch's error), or memory ember may not write (a read-only NumPy array
    shared by ``from_numpy``)."""
    arr = t._data
    if any(st == 0 and n > 1 for st, n in zip(arr.strides, arr.shape)):
        base = t._view_of[0].shape if t._view_of is not None else None
        raise _overlap_error(t, base, what)
    raise AutogradError(
        f"the tensor's memory (shape {tuple(t.shape)}) is read-only; clone it before the "
        "in-place operation",
        op=what,
    )


def prepare(view, what: str, one_value: bool = False):
    """Before an in-place op on ``view`` writes anything: refuse what PyTorch refuses (a view of
    a leaf that requires grad; a view whose elements overlap, unless the op writes ``one_value``
    everywhere, a fill, whose result then does not depend on the order), replay a stale view's
    history from its base, and return the view's flat positions in the base (None: not an
    alias)."""
    base, chain = view._view_of
    if chain is MULTI_OUTPUT:
        return None  # see refuse_multi_output
    if _reg.is_grad_enabled() and base._requires_grad and base.is_leaf:
        raise AutogradError(
            "a view of a leaf tensor that requires grad is being used in an in-place "
            "operation; wrap the update in `with ember.no_grad():` or use the out-of-place form",
            op=what,
        )
    try:
        positions = _positions(tuple(base.shape), chain, base.dtype.is_complex)
    except AutogradError:
        if base._requires_grad:
            raise
        positions = None  # (a part of a complex tensor without history: the memory is shared)
    if positions is not None and not one_value and np.unique(positions).size != positions.size:
        raise _overlap_error(view, base.shape, what)
    if is_stale(view):
        refresh(view)
    return positions


def write_through(view, what: str, positions) -> None:
    """After ``view`` took its new value in place: make its base hold it too (``positions``
    from `prepare`)."""
    base = view._view_of[0]
    # the view holds its new value now: in step with its base, not to be replayed from it
    view._view_src = stamp(base)
    if positions is None:
        if base.dtype.is_complex and not view.dtype.is_complex:
            _positions(tuple(base.shape), view._view_of[1], True)  # (raises: see there)
        return
    flat = _reg.constant(positions.reshape(-1))

    def scatter(old):
        values = view.reshape(-1).to(old.dtype)
        if not positions.size:
            # an empty view moves nothing, but the base's history still runs through the
            # view's, as PyTorch's CopySlices does (its backward checks what that saved)
            everywhere = _reg.PUBLIC["full"](old.shape, True, dtype=_dt.bool_)
            return _reg.PUBLIC["where"](everywhere, old, values.sum())
        return old.reshape(-1).scatter(0, flat, values).reshape(old.shape)

    counter = getattr(base, "_vc", None)  # (eager; a graph value has none)
    version = counter[0] if counter is not None else None
    base._inplace(what, scatter)
    # one write, one bump, as PyTorch counts (a graph value's view of an eager base, a
    # parameter clamped in part inside a captured step, has no counter of its own)
    if counter is not None and counter is getattr(view, "_vc", None):
        counter[0] = version
    view._view_src = stamp(base)
