"""`TracedItem`: what ``t.item()`` of a traced tensor returns while a graph is being captured.

Eagerly, ``loss.item()`` is a Python number. A graph has no value while it is built, so a
capture cannot give one; but the most common use of ``.item()`` in a training step needs none
either: the number is returned (``return loss.item()``, ``return {"loss": loss.item(), ...}``),
or summed and scaled first (``total += loss.item() * n``). A `TracedItem` stands for the
number in those uses:

* returned among the traced function's results (graph/tree.py's ``flatten(items=True)``), its
  tensor becomes a graph output and each call returns that output's ``.item()``: the Python
  number an eager call returns (a float for a floating tensor, an int, a bool, a complex);
* arithmetic with Python numbers and other items (``+ - * / // % **``, unary ``- + abs``)
  follows Python's rules: it is recorded in float64 / int64 / complex128, the precision of a
  Python float, int or complex, so the returned number is the one eager Python computes;
* with a tensor (``x * loss.item()``), it acts as the Python number does: a weak scalar in
  the promotion (``result_type(x, 0.0)``), without gradient; so as an op's scalar operand
  (``x.mul(s.item())``, ``x.masked_fill(m, v.item())``, ``x.clamp(max=c.item())``,
  ``full(shape, n.item())``, ``x.fill_(v.item())``: `TracedItem.tensor_for`), and in the data
  of ``ember.tensor([a.item(), n])`` / ``ember.tensor(p.tolist())`` (its graph values stacked,
  in the dtype PyTorch infers from the Python numbers).

Every other use needs the value in Python (``if loss.item() > 10``, ``float(...)``, an index,
``f"{...:.3f}"``, ``math.log(...)``) and raises `TraceError` at the user's line, as the
tensor's own ``bool()`` does. An integer or bool item of a value known at trace time (host
data: an argument ``ember.function`` keys its graphs on, a constant) gives its number there.

``t.tolist()`` of a tensor whose values are not host data is a `TracedList`, likewise: returned,
each call gives the nested list; its rows and elements are lists and items.

An item the function kept elsewhere while tracing (appended to a list, set on ``self``) would
hold no number on later calls, since the graph runs without Python: capture/trace.py refuses
the trace, naming the line of the ``.item()``, and the item, once the trace has ended, refuses
any use.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import weakref

from ..errors import EmberError, ShapeError, TraceError, user_location
from ..symbolic import SymDim

__all__ = ["TracedItem", "TracedList", "close_items", "escaped_items", "sizes_as_items"]

_KINDS = {bool: 0, int: 1, float: 2, complex: 3}  # Python's numeric tower: bool < int < ...


class _Traced:
    """What a traced item and a traced list share: the graph value they are read from
    (``tensor``), the user's line that made them, and their end with the trace."""

    __slots__ = ("tensor", "location", "closed", "__weakref__")
    _CALL = ""  # ".item()" or ".tolist()"
    _GIVES = ""  # what the graph does not give it once the trace has ended

    def _check_open(self) -> None:
        if self.closed:
            raise EmberError(
                f"this is the {self._CALL} of a tensor traced at {self.location}: it was kept "
                "outside the traced function's results, and the graph, which runs without "
                f"Python, gives it no {self._GIVES}; return it from the function instead",
                op=self._CALL.strip(".()"),
            )

    def __repr__(self) -> str:
        state = ", kept outside the results of its trace" if self.closed else ""
        return f"<{self._CALL} of a traced tensor{state}, from {self.location}>"

    __str__ = __repr__
    __hash__ = object.__hash__  # (its __eq__ needs its value; it may be a dict's value)


class TracedItem(_Traced):
    """The Python number ``source.item()`` stands for in a graph being built."""

    __slots__ = ("kind", "source")
    _CALL, _GIVES = ".item()", "number"

    def __init__(self, source, tensor=None, kind: int | None = None, location=None):
        # the SymbolicTensor whose value this is (``t`` of ``t.item()``; an arithmetic result):
        # its host data, its errors
        self.source = source
        if tensor is None:
            shape = tuple(source.shape)
            if all(isinstance(d, int) for d in shape) and math.prod(shape) != 1:
                raise ShapeError(  # (eager's error, a RuntimeError too)
                    "only one-element tensors can be converted to a Python scalar, "
                    f"got shape {shape}",
                    op="item",
                )
            tensor = _snapshot(source).reshape(())
            kind = tensor.dtype.category  # (bool 0, int 1, float 2, complex 3: dtypes.py's)
        self.tensor = tensor  # 0-d, no gradient: the graph value the number is read from
        self.kind = kind  # 0 bool, 1 int, 2 float, 3 complex (the number's Python type)
        self.location = user_location() if location is None else location
        self.closed = False
        _register(source.builder, self)

    # -------- the value in Python: refused (host data excepted)
    def _refuse(self, what: str):
        self._check_open()
        if self.kind <= 1:  # an integer or bool of host data reads its number
            return self.source.host_value(what).item()
        self.source._refuse(what)

    def __bool__(self):
        return bool(self._refuse("bool() of the .item()"))

    def __int__(self):
        return int(self._refuse("int() of the .item()"))

    def __index__(self):
        value = self._refuse("using the .item() as an index")
        return operator.index(value)

    def __float__(self):
        self._check_open()
        if self.kind <= 1:
            return float(self._refuse("float() of the .item()"))
        raise TraceError(
            f"float() of the .item() of a traced tensor (from {self.location}) needs its number, "
            "which a graph does not have while it is built: a function that takes a Python "
            "number here (an eps, a margin, a scale factor, a norm's order) bakes it into the "
            "graph; pass a number computed outside the traced function, or a tensor where the "
            "function takes one"
        )

    def __complex__(self):
        return complex(self._refuse("complex() of the .item()"))

    def __format__(self, spec: str):
        return format(self._refuse("formatting the .item()"), spec)

    def __round__(self, ndigits=None):
        return round(self._refuse("round() of the .item()"), ndigits)

    def __array__(self, *args, **kwargs):
        self.source._refuse("converting the .item() to a NumPy array")

    def _compare(self, other, op, symbol: str):
        if _is_tensor(other):  # (``x > loss.item()``: a tensor of bools, as eagerly)
            self._check_open()
            return _with_tensor(self, other, op, False)
        return op(self._refuse(f"comparing the .item() ({symbol})"), _plain(other, symbol))

    def __eq__(self, other):
        return self._compare(other, operator.eq, "==")

    def __ne__(self, other):
        return self._compare(other, operator.ne, "!=")

    def __lt__(self, other):
        return self._compare(other, operator.lt, "<")

    def __le__(self, other):
        return self._compare(other, operator.le, "<=")

    def __gt__(self, other):
        return self._compare(other, operator.gt, ">")

    def __ge__(self, other):
        return self._compare(other, operator.ge, ">=")

    __hash__ = _Traced.__hash__  # (defining __eq__ would otherwise unset it)

    def tensor_for(self, dtype=None):
        """The number as an op's scalar operand (``x.clamp(max=m.item())``, ``x.mul(s.item())``):
        its graph value in ``dtype``, the dtype the op's promotion gave the weak scalar (by
        default the one a Python number of its kind becomes: the default float dtype...)."""
        from ..dtypes import result_type

        self._check_open()
        target = result_type(self) if dtype is None else dtype
        return self.tensor if self.tensor.dtype == target else self.tensor.to(target)

    # -------- arithmetic: recorded in the graph with Python's types
    def _binary(self, other, op, symbol: str, reflected: bool = False):
        self._check_open()
        if isinstance(other, TracedItem):
            other._check_open()
            kind = max(self.kind, other.kind)
            theirs = other.tensor
        elif type(other) in _KINDS:
            kind = max(self.kind, _KINDS[type(other)])
            theirs = other
        elif _is_tensor(other):
            return _with_tensor(self, other, op, reflected)
        else:
            return NotImplemented
        kind = max(kind, 1)  # (arithmetic on bools gives ints: True + True == 2)
        if symbol == "/":
            kind = max(kind, 2)
        elif symbol == "**" and kind == 1:
            # int ** int is an int for a non-negative exponent, a float for a negative one: a
            # traced exponent's sign, which the graph does not have, would choose the type
            exponent = theirs if not reflected else self
            if type(exponent) not in (int, bool):
                self.source._refuse("raising an int to the power of an int .item()")
            if exponent < 0:
                kind = 2
        elif symbol in ("//", "%") and kind == 3:
            raise TypeError(f"unsupported operand type(s) for {symbol}: 'complex'")
        mine = _as(self.tensor, kind)
        theirs = _as(theirs, kind) if isinstance(other, TracedItem) else theirs
        result = _as(op(theirs, mine) if reflected else op(mine, theirs), kind)
        return TracedItem(result, result, kind, self.location)

    def __add__(self, other):
        return self._binary(other, operator.add, "+")

    def __radd__(self, other):
        return self._binary(other, operator.add, "+", True)

    def __sub__(self, other):
        return self._binary(other, operator.sub, "-")

    def __rsub__(self, other):
        return self._binary(other, operator.sub, "-", True)

    def __mul__(self, other):
        return self._binary(other, operator.mul, "*")

    def __rmul__(self, other):
        return self._binary(other, operator.mul, "*", True)

    def __truediv__(self, other):
        return self._binary(other, operator.truediv, "/")

    def __rtruediv__(self, other):
        return self._binary(other, operator.truediv, "/", True)

    def __floordiv__(self, other):
        return self._binary(other, operator.floordiv, "//")

    def __rfloordiv__(self, other):
        return self._binary(other, operator.floordiv, "//", True)

    def __mod__(self, other):
        return self._binary(other, operator.mod, "%")

    def __rmod__(self, other):
        return self._binary(other, operator.mod, "%", True)

    def __pow__(self, other):
        return self._binary(other, operator.pow, "**")

    def __rpow__(self, other):
        return self._binary(other, operator.pow, "**", True)

    def _unary(self, op):
        self._check_open()
        kind = max(self.kind, 1)
        result = op(_as(self.tensor, kind))
        return TracedItem(result, result, kind, self.location)

    def __neg__(self):
        return self._unary(operator.neg)

    def __pos__(self):
        return self._unary(operator.pos)

    def __abs__(self):
        item = self._unary(abs)
        if self.kind == 3:  # abs of a complex is a float
            item.tensor = item.source = _as(item.tensor, 2)
            item.kind = 2
        return item

    # (ops take it as the number it stands for: ops/_registry.py is_traced)
    is_traced_item = True


class TracedList(_Traced):
    """The nested list ``source.tolist()`` stands for in a graph being built (a tensor of at
    least one dimension whose values are not host data): returned among the traced function's
    results, each call gives the list an eager call gives (graph/tree.py's ``LIST`` leaf).
    ``len``, indexing and iteration give its rows (a `TracedList`) or its elements (a
    `TracedItem`); any other use needs the values and raises `TraceError`."""

    __slots__ = ()
    _CALL, _GIVES = ".tolist()", "values"

    def __init__(self, source, location=None):
        self.tensor = _snapshot(source)
        self.location = user_location() if location is None else location
        self.closed = False
        _register(source.builder, self)

    def _refuse(self, what: str):
        self._check_open()
        self.tensor._refuse(what)

    def __len__(self) -> int:
        self._check_open()
        return len(self.tensor)

    def __getitem__(self, index):
        self._check_open()
        if not isinstance(index, (int, slice)):
            self._refuse("indexing the .tolist() with something other than an int or a slice")
        row = self.tensor[index]
        if isinstance(index, slice) or row.dim() > 0:
            return TracedList(row, self.location)
        return TracedItem(row, location=self.location)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __bool__(self):
        return len(self) > 0

    def __eq__(self, other):
        self._refuse("comparing the .tolist()")

    __hash__ = _Traced.__hash__

    def __contains__(self, value):
        self._refuse("searching the .tolist()")

    def __format__(self, spec: str):
        self._refuse("formatting the .tolist()")

    def __array__(self, *args, **kwargs):
        self._refuse("converting the .tolist() to a NumPy array")

    # (ember.tensor(...) of a list holding it stacks its tensor: ops/creation.py)
    is_traced_list = True


def _snapshot(source):
    """``source``'s values as they are now, without history. Not ``detach()``: its alias reads
    the later in-place writes into ``source``, so a list indexed after ``y.fill_(7)`` gave the
    new values where eager ``.tolist()`` had copied the old ones."""
    from ..ops.copies import stop_gradient

    with source.builder:
        return stop_gradient(source)


def _register(builder, traced) -> None:
    """Keep a weak reference to ``traced`` (an item or a list) on the builder tracing it."""
    refs = getattr(builder, "traced_items", None)
    if refs is None:
        refs = builder.traced_items = []
    refs.append(weakref.ref(traced))


def _as(tensor, kind: int):
    """``tensor`` in the dtype of a Python number of ``kind`` (int64, float64, complex128)."""
    from .. import dtypes

    target = (dtypes.bool_, dtypes.int64, dtypes.float64, dtypes.complex128)[kind]
    return tensor if tensor.dtype == target else tensor.to(target)


def _is_tensor(obj) -> bool:
    from ..ops._registry import TensorBase

    return isinstance(obj, TensorBase)


def _plain(other, symbol: str):
    """A comparison's other operand as a Python value (an item's number is refused too)."""
    if isinstance(other, TracedItem):
        return other._refuse(f"comparing the .item() ({symbol})")
    return other


def _with_tensor(item: TracedItem, tensor, op, reflected: bool):
    """``number <op> tensor`` (``reflected``: ``tensor <op> number``) as eager Python computes it
    with the item's number: a weak scalar in the promotion (a float32 tensor times a float
    stays float32)."""
    from ..dtypes import result_type

    number = item.tensor_for(result_type(tensor, item))
    return op(tensor, number) if reflected else op(number, tensor)


def escaped_items(builder, results) -> list:
    """The items made while ``builder`` traced that are still alive but not in ``results``
    (the traced function's result: a nest of tuples, lists and dicts), as the function kept
    them elsewhere (a list, an attribute)."""
    refs = getattr(builder, "traced_items", None)
    if not refs:
        return []
    returned: set[int] = set()

    def walk(obj):
        if isinstance(obj, (TracedItem, TracedList)):
            returned.add(id(obj))
        elif isinstance(obj, (tuple, list)):
            for o in obj:
                walk(o)
        elif isinstance(obj, dict):
            for o in obj.values():
                walk(o)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # (its fields)
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name))

    walk(results)
    alive = [item for ref in refs if (item := ref()) is not None and id(item) not in returned]
    if alive:  # (an item in a reference cycle that nothing else holds is garbage, not kept)
        import gc

        del alive
        gc.collect()
        alive = [item for ref in refs if (item := ref()) is not None and id(item) not in returned]
    return alive


def close_items(builder) -> None:
    """End the items of a trace: any later use raises, naming where the item came from."""
    for ref in getattr(builder, "traced_items", None) or ():
        item = ref()
        if item is not None:
            item.closed = True
    builder.traced_items = []


def sizes_as_items(results):
    """``results`` (a traced function's: a nest of tuples, lists and dicts) with each symbolic
    size in it (``x.shape[1]``, ``a.size(0) + b.size(0)``, a whole ``x.shape``) an item of the
    graph value holding it: each call returns its own number, as eagerly, where the trace's
    SymDim would be returned to the caller as it is."""
    if isinstance(results, SymDim):
        from ..ops.promotion import to_tensor

        return TracedItem(to_tensor(results))
    if isinstance(results, (tuple, list)):
        # (a tuple's own items: a subclass may iterate as something else, a RaggedTensor
        # over its rows)
        own = list((tuple.__iter__ if isinstance(results, tuple) else list.__iter__)(results))
        items = [sizes_as_items(r) for r in own]
        if all(a is b for a, b in zip(items, own)):
            return results
        kind = type(results)
        return kind(*items) if hasattr(kind, "_fields") else kind(items)
    if type(results) is dict:
        found = {k: sizes_as_items(v) for k, v in results.items()}
        return results if all(found[k] is v for k, v in results.items()) else found
    return results
