"""grid_sample_backward as ONNX nodes (ops/grid_sample.py's ``onnx`` rule), so an exported
training step through a spatial transformer runs in onnxruntime.

The taps come from ops/_grid_taps.py, the rules the NumPy kernels and the second derivative
share, run here over a third array namespace: `OnnxOps`, whose arrays (`OnnxArray`) emit an
ONNX node for each operation, so the coordinates, the padding modes' moves and the weights are
the same float operations in the same order. The kernel's structure (ops/_grid_sample_kernels.py)
follows: every combination of the axes' taps gives a flat pixel index and a weight per point;
the input's gradient is one ScatterElements with reduction ``add`` (opset 16) of every
combination's weighted gradient (in another order than the kernel's sequential sums: equal
within float rounding), the grid's gradient sums, per axis, the gathered values times the
weight derivatives, times the output gradient over the channels, times the coordinate's
derivative. Computed in float32 (float64 for float64), each result rounded once, as the kernels.
The input's spatial sizes must be known numbers (they are constants of the tap rules); batch,
channels and the grid's points may be symbolic.
"""

from __future__ import annotations

import itertools
import math

from .. import dtypes as dt
from ._grid_taps import axis_taps


class OnnxArray:
    """A value of the ONNX graph being written, with NumPy's operators emitting nodes."""

    __array_priority__ = 1000  # (a NumPy scalar on the left defers to these operators)

    def __init__(self, e, name: str, dtype):
        self.e, self.name, self.dtype = e, name, dtype

    # ---- operands
    def _operand(self, other) -> str:
        if isinstance(other, OnnxArray):
            return other.name
        return self.e.scalar(float(other) if self.dtype is not dt.bool_ else bool(other),
                             self.dtype)  # fmt: skip

    def _binary(self, op: str, other, reverse=False, result=None):
        a, b = self.name, self._operand(other)
        names = [b, a] if reverse else [a, b]
        return OnnxArray(self.e, self.e.node(op, names), result or self.dtype)

    # ---- arithmetic
    def __add__(self, other):
        return self._binary("Add", other)

    def __radd__(self, other):
        return self._binary("Add", other, reverse=True)

    def __sub__(self, other):
        return self._binary("Sub", other)

    def __rsub__(self, other):
        return self._binary("Sub", other, reverse=True)

    def __mul__(self, other):
        return self._binary("Mul", other)

    def __rmul__(self, other):
        return self._binary("Mul", other, reverse=True)

    def __truediv__(self, other):
        return self._binary("Div", other)

    def __rtruediv__(self, other):
        return self._binary("Div", other, reverse=True)

    def __neg__(self):
        return OnnxArray(self.e, self.e.node("Neg", [self.name]), self.dtype)

    # ---- comparisons and logic (bool results)
    def __gt__(self, other):
        return self._binary("Greater", other, result=dt.bool_)

    def __lt__(self, other):
        return self._binary("Less", other, result=dt.bool_)

    def __ge__(self, other):
        return self._binary("GreaterOrEqual", other, result=dt.bool_)

    def __le__(self, other):
        return self._binary("LessOrEqual", other, result=dt.bool_)

    def __and__(self, other):
        return self._binary("And", other)

    def __ne__(self, other):  # (the tap rules compare bools only)
        return self._binary("Xor", other)

    __hash__ = None


class OnnxOps:
    """The array operations the tap rules use (ops/_grid_taps.py's NumpyOps), as ONNX nodes."""

    @staticmethod
    def _unary(op: str, x: OnnxArray) -> OnnxArray:
        return OnnxArray(x.e, x.e.node(op, [x.name]), x.dtype)

    @staticmethod
    def where(cond, a, b):
        like = a if isinstance(a, OnnxArray) else b
        names = [v.name if isinstance(v, OnnxArray) else like._operand(v) for v in (a, b)]
        return OnnxArray(cond.e, cond.e.node("Where", [cond.name, *names]), like.dtype)

    @staticmethod
    def floor(x):
        return OnnxOps._unary("Floor", x)

    @staticmethod
    def abs(x):
        return OnnxOps._unary("Abs", x)

    @staticmethod
    def rint(x):  # (ONNX's Round rounds half to even, as NumPy's rint)
        return OnnxOps._unary("Round", x)

    @staticmethod
    def trunc(x):  # (ONNX has no Trunc: the sign times the floor of the magnitude)
        return OnnxOps._unary("Sign", x) * OnnxOps._unary("Floor", OnnxOps._unary("Abs", x))

    @staticmethod
    def fill(like, value):
        e = like.e
        shape = e.node("Shape", [like.name])
        return OnnxArray(e, e.node("Expand", [e.scalar(value, like.dtype), shape]), like.dtype)


def grid_sample_backward(e):
    """The ONNX nodes of ``grid_sample_backward(x, grid, g)``: (dx, dgrid)."""
    if e.opset < 16:
        e.unsupported("before opset 16 (ScatterElements' reduction add)")
    x_type = e.in_types[0]
    spatial = tuple(x_type.shape[2:])
    if not all(isinstance(s, int) for s in spatial):
        e.unsupported(f"for an input of symbolic spatial size {x_type.shape}")
    a = e.attrs
    mode, padding, align = a["mode"], a["padding_mode"], a["align_corners"]
    want_dx, want_dgrid = a["output_mask"]
    data = x_type.dtype
    ct = dt.float64 if data is dt.float64 else dt.float32
    x, grid, g = (v if data is ct else e.cast(v, ct) for v in e.inputs)
    dims = len(spatial)
    planes = e.node("Reshape", [x, e.ints([0, 0, -1])])  # (N, C, L)
    grads = e.node("Reshape", [g, e.ints([0, 0, -1])])  # (N, C, P)
    points = e.node("Reshape", [grid, e.ints([0, -1, dims])])  # (N, P, dims)
    taps = []
    for axis in range(dims):  # (the last value of a point is the first spatial axis's)
        u = e.node("Gather", [points, e.ints([dims - 1 - axis])], axis=2)
        u = OnnxArray(e, e.node("Squeeze", [u, e.ints([2])]), ct)
        taps.append(axis_taps(OnnxOps, u, spatial[axis], mode, padding, align))
    combos = list(itertools.product(*[range(len(t.pos)) for t in taps]))
    strides = [math.prod(spatial[i + 1 :]) for i in range(dims)]

    def valid_of(combo):
        valid = taps[0].valid[combo[0]]
        for axis in range(1, dims):
            valid = valid & taps[axis].valid[combo[axis]]
        return valid

    def index_of(combo, valid):
        """The flat pixel index (N, 1, P) as int64, 0 where the tap is outside."""
        index = None
        for axis, k in enumerate(combo):
            p = e.node(
                "Cast", [OnnxOps.where(valid, taps[axis].pos[k], 0.0).name], to=e.dtype(dt.int64)
            )
            term = p if strides[axis] == 1 else e.node("Mul", [p, e.ints([strides[axis]])])
            index = term if index is None else e.node("Add", [index, term])
        return e.node("Unsqueeze", [index, e.ints([1])])

    def weight_of(combo, derivative_axis=None):
        if taps[0].w is None:
            return None
        w = None
        for axis, k in enumerate(combo):
            f = taps[axis].dw[k] if axis == derivative_axis else taps[axis].w[k]
            w = f if w is None else w * f
        return e.node("Unsqueeze", [w.name, e.ints([1])])  # (N, 1, P)

    zero = e.scalar(0.0, ct)
    per_channel = e.node("Shape", [grads])  # (N, C, P)
    found = []
    for combo in combos:
        valid = valid_of(combo)
        found.append(
            (combo, e.node("Unsqueeze", [valid.name, e.ints([1])]), index_of(combo, valid))
        )
    if want_dx:
        indices, updates = [], []
        for combo, valid, index in found:
            w = weight_of(combo)
            term = grads if w is None else e.node("Mul", [w, grads])
            updates.append(e.node("Where", [valid, term, zero]))
            indices.append(e.node("Expand", [index, per_channel]))
        empty = e.node("Expand", [zero, e.node("Shape", [planes])])
        dx = e.node(
            "ScatterElements",
            [empty, _concat(e, indices), _concat(e, updates)],
            axis=2,
            reduction="add",
        )
        dx = e.node("Reshape", [dx, e.node("Shape", [x])])
    else:
        dx = e.node("Expand", [zero, e.node("Shape", [x])])
    if want_dgrid and mode != "nearest":
        columns = []
        for axis in reversed(range(dims)):
            total = None
            for combo, valid, index in found:
                values = e.node(
                    "GatherElements", [planes, e.node("Expand", [index, per_channel])], axis=2
                )
                values = e.node("Where", [valid, values, zero])
                term = e.node("Mul", [weight_of(combo, axis), values])
                total = term if total is None else e.node("Add", [total, term])
            acc = e.node("ReduceSum", [e.node("Mul", [grads, total]), e.ints([1])], keepdims=0)
            mult = taps[axis].mult
            acc = e.node(
                "Mul", [acc, mult.name if isinstance(mult, OnnxArray) else e.scalar(mult, ct)]
            )
            columns.append(e.node("Unsqueeze", [acc, e.ints([2])]))
        dgrid = columns[0] if dims == 1 else e.node("Concat", columns, axis=2)
        dgrid = e.node("Reshape", [dgrid, e.node("Shape", [grid])])
    else:
        dgrid = e.node("Expand", [zero, e.node("Shape", [grid])])
    if data is not ct:
        dx, dgrid = e.cast(dx, data), e.cast(dgrid, data)
    return dx, dgrid


def _concat(e, names):
    return names[0] if len(names) == 1 else e.node("Concat", names, axis=2)
