"""PyTorch's ``torch._foreach_*`` functions: an op applied to each tensor of a list (timm's
model EMA, user optimizers written after torch.optim's multi-tensor paths, gradient scalers).
Each is the op on every tensor in turn (PyTorch fuses the loop into one kernel launch; here each
element is the public op, so gradients, capture and dtypes follow it), with PyTorch's argument
forms:

* unary ``_foreach_exp(tensors)`` returns a list, ``_foreach_exp_(tensors)`` works in place and
  returns None;
* binary ``_foreach_add(tensors, other, *, alpha=1)``: ``other`` a number, a list of numbers
  (one per tensor), a list of tensors, or one tensor for every element; ``_foreach_pow`` also
  takes a number as its base and a list as the exponents;
* ``_foreach_addcmul`` / ``_foreach_addcdiv(self, tensor1, tensor2, value=1)`` with ``value`` a
  number or a list of them; ``_foreach_lerp(self, ends, weight)`` with a number or tensors;
* ``_foreach_norm(tensors, ord=2, dtype=None)``, ``_foreach_max``, ``_foreach_zero_``,
  ``_foreach_copy_``, ``_foreach_clone``, ``_foreach_mm``.
Lists of different lengths are refused naming both.
"""

from __future__ import annotations

from ..errors import ArgumentError
from ..ops._registry import PUBLIC, export
from ..ops.norms import vector_norm

_UNARY = (
    "abs acos asin atan ceil cos cosh erf erfc exp expm1 floor frac lgamma log log10 log1p "
    "log2 neg reciprocal round rsqrt sigmoid sign sin sinh sqrt tan tanh trunc"
).split()
_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "clamp_min", "clamp_max", "pow")


def _tensors(name: str, tensors) -> list:
    if not isinstance(tensors, (list, tuple)):
        raise ArgumentError(f"expected a list of tensors, got {type(tensors).__name__}", op=name)
    return list(tensors)


def _per_tensor(name: str, tensors: list, other) -> list:
    """``other`` for each tensor: a list's own elements (of the same length), else itself."""
    if isinstance(other, (list, tuple)):
        if len(other) != len(tensors):
            raise ArgumentError(
                f"the lists have {len(tensors)} and {len(other)} elements; they must match",
                op=name,
            )
        return list(other)
    return [other] * len(tensors)


def _method(t, name: str):
    return getattr(t, name)


def _unary(op: str):
    def out_of_place(self):
        return [PUBLIC[op](t) for t in _tensors(f"_foreach_{op}", self)]

    def in_place(self):
        for t in _tensors(f"_foreach_{op}_", self):
            _method(t, op + "_")()

    return out_of_place, in_place


def _binary(op: str):
    name = f"_foreach_{op}"
    alpha_ops = ("add", "sub")

    def out_of_place(self, other, **kwargs):
        if op == "pow" and not isinstance(self, (list, tuple)):  # (a number as the base)
            return [PUBLIC["pow"](self, e) for e in _tensors(name, other)]
        tensors = _tensors(name, self)
        if kwargs and op not in alpha_ops:
            raise ArgumentError(f"unexpected arguments {sorted(kwargs)}", op=name)
        return [
            _method(t, op)(o, **kwargs) for t, o in zip(tensors, _per_tensor(name, tensors, other))
        ]

    def in_place(self, other, **kwargs):
        tensors = _tensors(name + "_", self)
        if kwargs and op not in alpha_ops:
            raise ArgumentError(f"unexpected arguments {sorted(kwargs)}", op=name + "_")
        for t, o in zip(tensors, _per_tensor(name + "_", tensors, other)):
            _method(t, op + "_")(o, **kwargs)

    return out_of_place, in_place


for _op in _UNARY:
    _fns = _unary(_op)
    for _fn, _suffix in zip(_fns, ("", "_")):
        _fn.__name__ = _fn.__qualname__ = f"_foreach_{_op}{_suffix}"
        export(_fn)
for _op in _BINARY:
    _fns = _binary(_op)
    for _fn, _suffix in zip(_fns, ("", "_")):
        _fn.__name__ = _fn.__qualname__ = f"_foreach_{_op}{_suffix}"
        export(_fn)


def _pointwise3(op: str):
    name = f"_foreach_{op}"

    def operands(label, self, tensor1, tensor2, value):
        tensors = _tensors(label, self)
        firsts = _per_tensor(label, tensors, _tensors(label, tensor1))
        seconds = _per_tensor(label, tensors, _tensors(label, tensor2))
        return zip(tensors, firsts, seconds, _per_tensor(label, tensors, _numbers(value)))

    def out_of_place(self, tensor1, tensor2, value=1):
        quads = operands(name, self, tensor1, tensor2, value)
        return [PUBLIC[op](t, a, b, value=v) for t, a, b, v in quads]

    def in_place(self, tensor1, tensor2, value=1):
        for t, a, b, v in operands(name + "_", self, tensor1, tensor2, value):
            _method(t, op + "_")(a, b, value=v)

    return out_of_place, in_place


def _numbers(value):
    """A 1-D tensor of values (PyTorch takes one as ``value``) as a list of numbers."""
    if hasattr(value, "tolist") and getattr(value, "ndim", 0) == 1:
        return value.tolist()
    return value


for _op in ("addcmul", "addcdiv"):
    _fns = _pointwise3(_op)
    for _fn, _suffix in zip(_fns, ("", "_")):
        _fn.__name__ = _fn.__qualname__ = f"_foreach_{_op}{_suffix}"
        export(_fn)


@export
def _foreach_lerp(self, tensors1, weight):
    """``lerp(t, end, w)`` for each (end, weight) pair; weight a number or tensors."""
    tensors = _tensors("_foreach_lerp", self)
    ends = _per_tensor("_foreach_lerp", tensors, _tensors("_foreach_lerp", tensors1))
    weights = _per_tensor("_foreach_lerp", tensors, weight)
    return [PUBLIC["lerp"](t, e, w) for t, e, w in zip(tensors, ends, weights)]


@export
def _foreach_lerp_(self, tensors1, weight):
    tensors = _tensors("_foreach_lerp_", self)
    ends = _per_tensor("_foreach_lerp_", tensors, _tensors("_foreach_lerp_", tensors1))
    for t, e, w in zip(tensors, ends, _per_tensor("_foreach_lerp_", tensors, weight)):
        t.lerp_(e, w)


@export
def _foreach_norm(self, ord=2, dtype=None):  # noqa: A002 - PyTorch's keyword
    """Each tensor's vector norm (a 0-d tensor each)."""
    return [vector_norm(t, ord, dtype=dtype) for t in _tensors("_foreach_norm", self)]


@export
def _foreach_max(self):
    """Each tensor's largest value (a 0-d tensor each)."""
    return [t.max() for t in _tensors("_foreach_max", self)]


@export
def _foreach_zero_(self):
    for t in _tensors("_foreach_zero_", self):
        t.zero_()


@export
def _foreach_copy_(self, src, non_blocking: bool = False):
    tensors = _tensors("_foreach_copy_", self)
    for t, s in zip(
        tensors, _per_tensor("_foreach_copy_", tensors, _tensors("_foreach_copy_", src))
    ):
        t.copy_(s)


@export
def _foreach_clone(self):
    return [t.clone() for t in _tensors("_foreach_clone", self)]


@export
def _foreach_mm(self, mat2):
    tensors = _tensors("_foreach_mm", self)
    others = _per_tensor("_foreach_mm", tensors, _tensors("_foreach_mm", mat2))
    return [PUBLIC["mm"](a, b) for a, b in zip(tensors, others)]


@export
def _foreach_powsum(self, ord=2):  # noqa: A002 - the norm's order
    """Each tensor's ``sum(|x| ** ord)`` (a 0-d tensor each, in a tuple: PyTorch's; ``ord`` 0
    counts every element, 0 ** 0 being 1), the norms' sums before their root."""
    return tuple(
        PUBLIC["sum"](PUBLIC["pow"](PUBLIC["abs"](t), ord))
        for t in _tensors("_foreach_powsum", self)
    )
