"""`SymbolicTensor`: what ember ops return while a graph is being captured.

It stands for a graph `Value`: it has a shape and a dtype (read from the value's type) and every
op method and operator of the eager Tensor, but no data. Anything that needs the data in Python
(``bool(x)``, ``int(x)``, indexing a list with ``x``, ``len`` of a symbolic size) raises
`TraceError` at the user's line: a capture must never silently bake in one branch of
data-dependent control flow. ``x.item()`` gives a `TracedItem` (graph/traced_item.py), which may
be returned (each call then gives the Python number) and raises at any use that needs the
number. The one exception is host data read from the captured function's own
tensor arguments (`host_value`: the lengths of packed sequences, an integer argument's
``.tolist()``): ``ember.function`` then keys its graphs on that argument's value.

To the user's code it is an ``ember.Tensor``: its ``__class__`` is that class where a module
outside ember asks (``isinstance(mask, torch.Tensor)`` in a captured forward), while ember's own
modules, which tell graph values from eager tensors by their class, see this one.

In-place methods are functionalized: ``x.add_(y)`` computes ``x + y`` as a new graph value and
rebinds ``x`` to it, so later uses read the updated value. (Aliasing views are not followed: an
in-place write through a view of a symbolic tensor does not update its base.)
"""

from __future__ import annotations

import math
import sys

import numpy as np

from ..errors import NeedsArgumentValue, TraceError
from ..ops._registry import TensorBase
from ..size import Size
from ..symbolic import has_symbols

_HINT = (
    "; use ember.where for a data-dependent choice of values, ember.script(fn) to convert the "
    "function's if/while/for into graph control flow, ember.cond / ember.while_loop / "
    "ember.fori_loop / ember.scan for data-dependent control flow, or compute this outside the "
    "traced function"
)


class SymbolicTensor(TensorBase):
    __slots__ = (
        "value",
        "builder",
        "grad",
        "_requires_grad",
        "_view_of",
        "_view_src",
        "__weakref__",
    )

    def __init__(self, value, builder):
        self.value = value
        self.builder = builder
        self.grad = None  # set by a recorded backward() when this is a leaf input
        self._requires_grad = False
        self._view_of = None  # (root base, view ops from it): see ember/_views.py
        self._view_src = None

    # -------- what it is to the user's code: an ember Tensor
    @property
    def __class__(self):
        """``ember.Tensor`` where the user's code asks (``isinstance(mask, torch.Tensor)`` in a
        captured forward is True, as eagerly), this class where ember's own code does (which
        tells graph values from eager tensors by it). ``type(x)`` is always this class."""
        module = sys._getframe(1).f_globals.get("__name__", "")
        if module == "ember" or module.startswith("ember."):
            return SymbolicTensor
        from ..tensor import Tensor

        return Tensor

    # -------- metadata (from the value's type; never data)
    @property
    def shape(self) -> Size:
        return Size(self.value.type.shape)

    @property
    def dtype(self):
        return self.value.type.dtype

    @property
    def ndim(self) -> int:
        return len(self.value.type.shape)

    def dim(self) -> int:
        return self.ndim

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self):
        n = 1
        for d in self.shape:
            n = d * n
        return n

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    @property
    def grad_fn(self):
        return None  # a graph value has no tape; backward() differentiates the graph itself

    @property
    def is_leaf(self) -> bool:
        return self.value.node.kind == "input"

    def requires_grad_(self, flag: bool = True) -> SymbolicTensor:
        """As eagerly: a value without gradient history (one that did not require grad) that
        starts requiring grad is a leaf, whose ``.grad`` a recorded backward sets
        (``x = x.clone().requires_grad_(); loss.backward(); x.grad``)."""
        if flag and not self._requires_grad and self.builder is not None:
            inputs = self.builder.grad_inputs
            if not any(t is self for t in inputs):
                inputs.append(self)
        self._requires_grad = bool(flag)
        return self

    def retain_grad(self) -> None:
        """As eagerly: a recorded backward (without ``inputs=``) also sets the ``.grad`` of this
        value with history, accumulating over backward calls; a no-op on a leaf."""
        if self.is_leaf or self.builder is None:
            return
        if not self._requires_grad:
            from ..errors import AutogradError

            raise AutogradError(
                "can't retain_grad on Tensor that has requires_grad=False", op="retain_grad"
            )
        retained = self.builder.retained
        if not any(t is self for t in retained):
            retained.append(self)

    @property
    def retains_grad(self) -> bool:
        return self.builder is not None and any(t is self for t in self.builder.retained)

    def register_hook(self, hook):
        """Call ``hook(grad)`` on this value's gradient while a recorded backward computes it
        (its ops are recorded: a returned tensor replaces the gradient in the graph; Python
        side effects happen once, while tracing). Returns a handle whose ``remove()``
        unregisters it."""
        from ..errors import AutogradError

        if not self._requires_grad:
            raise AutogradError(
                "cannot register a hook on a tensor that does not require grad", op="register_hook"
            )
        hooks = self.builder.value_hooks.setdefault(id(self.value), {})
        key = object()
        hooks[key] = hook
        return _HookHandle(hooks, key)

    def detach(self) -> SymbolicTensor:
        """The value without history, aliasing this tensor as PyTorch's detach shares its
        memory: an in-place op on it updates this tensor (with gradients off), and it reads
        this tensor's later updates."""
        from ..ops.copies import stop_gradient

        with self.builder:
            alias = stop_gradient(self)
        alias._view_of = (self, None)
        alias._view_src = self.value
        return alias

    @property
    def data(self) -> SymbolicTensor:
        """The value without history, aliasing this tensor (as `detach`)."""
        return self.detach()

    def detach_(self) -> SymbolicTensor:
        self._requires_grad = False
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Record this value's backward pass into the graph being built (see GraphBuilder)."""
        self.builder.backward(self, gradient, inputs)

    # -------- the functionalized in-place protocol (see the module docstring)
    def _inplace(self, name: str, fn, *args, **kwargs) -> SymbolicTensor:
        from .. import _views
        from ..ops._registry import current_mode, is_grad_enabled
        from ..ops._util import fit_inplace_result

        if self._view_of is not None and self._view_of[1] is None:  # ``.data``: see there
            from ..grad_mode import no_grad

            base = self._view_of[0]
            with no_grad():
                base._inplace(name, fn, *args, **kwargs)
            self.value = base.detach().value
            self._view_src = base.value
            return self
        # views are followed within the graph that made them (see GraphBuilder.apply)
        through_view = self._view_of is not None and self.builder is current_mode()
        positions = _views.prepare(self, name) if through_view else None
        before = SymbolicTensor(self.value, self.builder)
        result = fn(before, *args, **kwargs)
        result = fit_inplace_result(name, result, self)
        if self._requires_grad and not self.is_leaf and not is_grad_enabled():
            result = _keep_history(self, result)
        elif self._requires_grad and is_grad_enabled() and not result.requires_grad:
            # overwritten by values that do not depend on it (fill_, zero_, copy_ of a
            # constant): it stays in the graph, passing a zero gradient to its old value, as
            # eagerly (tensor.py) and in PyTorch
            from ..dtypes import bool_
            from ..ops._registry import PUBLIC

            everywhere = PUBLIC["ones_like"](before, dtype=bool_)
            result = PUBLIC["where"](everywhere, result, before)
        if is_grad_enabled() and result.requires_grad:
            # an operand that requires grad gives it to the updated tensor (zeros_like(x)
            # .add_(x)), as an eager in-place op does
            self._requires_grad = True
        self.value = result.value
        if through_view:
            _views.write_through(self, name, positions)
        return self

    # -------- uses of the data: refused with the user's line
    def _refuse(self, what: str):
        raise TraceError(
            f"{what} of a traced tensor (%{self.value.name}: {self.value.type.dtype} of shape "
            f"{tuple(self.shape)}) needs its value, which a graph does not have while it is "
            f"built: Python control flow on it would bake one branch into the graph{_HINT}"
        )

    def __bool__(self):
        self._refuse("bool()")

    def __int__(self):
        self._refuse("int()")

    def __float__(self):
        self._refuse("float()")

    def __index__(self):
        self._refuse("using as an index")

    def item(self):
        """A `TracedItem` standing for the Python number: it may be returned from the traced
        function (each call then returns the number) or combined with numbers first; a use
        that needs the number in Python raises `TraceError` (graph/traced_item.py)."""
        from .traced_item import TracedItem

        return TracedItem(self)

    def tolist(self):
        """Host data's list (an integer argument's values: lengths, split sizes, which the
        capture specializes on); else a `TracedList` (graph/traced_item.py) standing for the
        list, which may be returned (each call then gives the list)."""
        from .traced_item import TracedItem, TracedList

        if self.dtype.is_integer:  # (lengths, split sizes: host data a capture specializes on)
            try:
                return self.host_value(".tolist()").tolist()
            except NeedsArgumentValue:
                raise
            except TraceError:
                pass
        return TracedList(self) if self.dim() > 0 else TracedItem(self)

    def host_value(self, what: str):
        """The NumPy value of this tensor where the graph being built is specialized on it (a
        function argument whose value the capture keys its graphs on); for another argument
        of the function, `NeedsArgumentValue` (``ember.function`` then specializes on it and
        traces again); for any other value, the `TraceError` of a use of the data. For host
        data (sequence lengths, sizes), never for values the graph should compute. A constant
        the function made from Python values (``ember.tensor([c.shape[-1] for c in crops])``),
        and pure calls on such constants (their ``cumsum``), are known at trace time: their
        reference kernels compute them, as the fold pass would."""
        known = self.builder.host_values.get(id(self.value))
        if known is not None:
            return known
        computed = _computed_from_constants(self.value)
        if computed is not None:
            return computed
        argument = self.builder.argument_values.get(id(self.value))
        if argument is not None:
            raise NeedsArgumentValue(
                f"{what} of the argument %{self.value.name} ({self.value.type.dtype} of shape "
                f"{tuple(self.shape)}) reads its value as host data: ember.function keys its "
                "graphs on such an argument's value (one trace per distinct value); ember.trace "
                "cannot, so compute this outside the traced function or pass a Python list",
                value=self.value,
                argument=argument,
            )
        self._refuse(what)

    def numpy(self, *, force: bool = False):
        self._refuse(".numpy()")

    def __array__(self, *args, **kwargs):
        self._refuse("converting to a NumPy array")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        first = self.shape[0]
        if not isinstance(first, int):
            self._refuse(f"len() (the size {first} is symbolic)")
        return first

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        from .printer import format_type

        return f"SymbolicTensor(%{self.value.name}: {format_type(self.value.type)})"


class _HookHandle:
    def __init__(self, table: dict, key):
        self._table, self._key = table, key

    def remove(self) -> None:
        self._table.pop(self._key, None)


# at most this many elements computed at trace time for a host value (host data is small)
_MAX_HOST_ELEMENTS = 1 << 16


def _keep_history(old: SymbolicTensor, new: SymbolicTensor) -> SymbolicTensor:
    """``new``'s value with ``old``'s history: an in-place write under no_grad to a value that
    requires grad changes its value only, as PyTorch's (F.embedding's max_norm renormalizing a
    non-leaf weight); the gradient reaching the new value flows on to the old one, unchanged
    (a custom autograd Function: the graph records it as one node whose VJP passes g on)."""
    from ..grad_mode import enable_grad

    if not _KEEP_HISTORY:
        from ..autograd_function import Function

        class KeepHistory(Function):
            @staticmethod
            def forward(ctx, before, after):
                return after.clone()

            @staticmethod
            def backward(ctx, g):
                return g, None

        _KEEP_HISTORY.append(KeepHistory)
    with enable_grad():
        return _KEEP_HISTORY[0].apply(SymbolicTensor(old.value, old.builder), new.detach())


_KEEP_HISTORY: list = []  # (the Function, made on first use)


def _computed_from_constants(value):
    """The array ``value`` holds when the graph computes it from constants alone by pure calls
    (computed now with their reference kernels), else None."""
    node = value.node
    if node.kind == "constant":
        return node.graph.constants[node.name]
    if node.kind != "call" or node.op.kind in ("control", "random") or node.op.effect is not None:
        return None  # (only pure calls, as graph/rewrite.py's is_pure)
    if has_symbols(node.attrs) or any(
        has_symbols(v.shape) or math.prod(v.shape) > _MAX_HOST_ELEMENTS for v in node.outputs
    ):
        return None
    arrays = []
    for v in node.inputs:
        array = _computed_from_constants(v)
        if array is None:
            return None
        arrays.append(array)
    result = node.op.kernel(*arrays, **node.attrs)
    if len(node.outputs) > 1:
        result = result[node.outputs.index(value)]
    return np.asarray(result)
