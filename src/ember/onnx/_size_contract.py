"""The sizes an ember-written ONNX file was computed for, written by the exporter and checked
by the importer on every call of ember's own exports.

A graph ember exports over symbolic sizes computes its shapes as polynomials of the inputs'
dimensions (``N``, ``2*N``, ``H//2``), and may rest on size equalities its capture took for
aligned sizes only (symbolic_assumptions.py: a U-Net's ``2*(H//2) == H``). ONNX's ``dim_param``
is a bare name: a runtime neither relates ``2*N`` to ``N`` nor knows the assumptions, so sizes
breaking them run into a kernel's error or, where they happen to broadcast, a wrong result.
The model's ``metadata_props`` entry ``ember.symbolic_sizes`` (JSON) keeps the contract
exactly: every graph input's dimensions (ints, or `SymDim.to_json` records) and the
assumptions (kind, left, right, ratio). `SizeContract` reads it back, binds each symbol to a
dimension that is the symbol or a multiple of it, and refuses a call whose sizes disagree with
a derived dimension or break an assumption, with a `ShapeError` naming the input, the axis and
the sizes, as capture/size_checks.py does for ember's own captured functions.

A damaged or crafted entry raises `OnnxError` when the file is loaded (files are hostile):
symbols are names, powers and coefficients bounded, the records checked by SymDim.from_json.
"""

from __future__ import annotations

import json
from fractions import Fraction

from ..errors import EmberError, OnnxError, ShapeError
from ..symbolic import SymDim
from ..symbolic_assumptions import Assumption, first_broken

KEY = "ember.symbolic_sizes"
_KINDS = ("equal", "divides")
_MAX_TEXT = 1 << 20  # characters of the entry read at most


def _dim_json(d):
    return {"sym": d.to_json()} if isinstance(d, SymDim) else int(d)


def write(inputs: list[tuple[str, tuple]], assumptions) -> str | None:
    """The entry for graph inputs [(name, shape)] and the capture's assumptions; None where no
    dimension is symbolic (nothing to check)."""
    if not any(isinstance(d, SymDim) for _, shape in inputs for d in shape):
        return None
    record = {
        "inputs": {name: [_dim_json(d) for d in shape] for name, shape in inputs},
        "assumptions": [
            {
                "kind": a.kind,
                "left": _dim_json(a.left),
                "right": _dim_json(a.right),
                "ratio": [a.ratio.numerator, a.ratio.denominator],
            }
            for a in assumptions
        ],
    }
    return json.dumps(record, separators=(",", ":"))


def _read_size(record, where: str):
    if isinstance(record, bool):
        raise OnnxError(f"{where}: a size is {record!r}, not an int or a symbolic size")
    if isinstance(record, int):
        return record
    if isinstance(record, dict) and set(record) == {"sym"}:
        inner = record["sym"]
        try:
            if not isinstance(inner, dict):
                raise ValueError("a symbolic size is a record")
            made = SymDim.from_json(inner)  # (which checks every field's type and range)
        except (EmberError, TypeError, ValueError, KeyError, AttributeError, RecursionError):
            raise OnnxError(f"{where}: a bad symbolic size {str(record)[:80]}") from None
        names = made.symbols() if isinstance(made, SymDim) else set()
        if not all(isinstance(n, str) and n.isidentifier() for n in names):
            raise OnnxError(f"{where}: a symbolic size's name is not an identifier")
        return made
    raise OnnxError(f"{where}: a size is {str(record)[:80]}, not an int or a symbolic size")


class SizeContract:
    """Where each symbol is read ({symbol: (input position, axis, k)}: the dimension is k times
    the symbol), the derived dimensions to compare, and the assumptions."""

    def __init__(self, dims: list[list], assumptions: list[Assumption], names: list[str]):
        self.names = names
        self.dims = dims
        self.assumptions = tuple(assumptions)
        self.sources: dict[str, tuple[int, int, int]] = {}
        for position, shape in enumerate(dims):
            for axis, d in enumerate(shape or ()):
                symbol = d.symbol() if isinstance(d, SymDim) else None
                if symbol is not None:
                    self.sources.setdefault(symbol, (position, axis, 1))
        for position, shape in enumerate(dims):
            for axis, d in enumerate(shape or ()):
                scaled = d.scaled_symbol() if isinstance(d, SymDim) else None
                if scaled is not None:
                    self.sources.setdefault(scaled[1], (position, axis, scaled[0]))
        self._read_at = {(p, a) for p, a, _ in self.sources.values()}

    @classmethod
    def read(cls, proto, input_names: list[str], where: str) -> SizeContract | None:
        """The contract of an ember-written model, or None (no entry: another writer)."""
        text = next((p.value for p in proto.metadata_props if p.key == KEY), None)
        if text is None:
            return None
        label = f"{where}: metadata {KEY}"
        if not isinstance(text, str) or len(text) > _MAX_TEXT:
            raise OnnxError(f"{label} is not a JSON text of at most {_MAX_TEXT} characters")
        try:
            record = json.loads(text)
        except (ValueError, RecursionError):
            raise OnnxError(f"{label} is not valid JSON") from None
        if not isinstance(record, dict) or not isinstance(record.get("inputs"), dict):
            raise OnnxError(f"{label} has no 'inputs' record")
        inputs, listed = record["inputs"], record.get("assumptions", [])
        if not isinstance(listed, list):
            raise OnnxError(f"{label}: 'assumptions' is not a list")
        dims = []
        for name in input_names:
            shape = inputs.get(name)
            if shape is not None and not isinstance(shape, list):
                raise OnnxError(f"{label}: input {name!r}'s sizes are not a list")
            dims.append(None if shape is None else [_read_size(d, label) for d in shape])
        assumptions = [_read_assumption(a, label) for a in listed]
        contract = cls(dims, assumptions, list(input_names))
        for a in assumptions:
            unbound = a.symbols() - set(contract.sources)
            if unbound:
                raise OnnxError(f"{label}: an assumption reads sizes no input has: {unbound}")
        return contract

    def check(self, values: list, where: str) -> None:
        """Refuse inputs (positionally; tensors or arrays) whose sizes break the contract."""
        shapes = [getattr(v, "shape", None) for v in values]
        if any(isinstance(d, SymDim) for shape in shapes for d in shape or ()):
            return  # (a capture over symbolic sizes: its own function checks the call's sizes)
        bindings = {}
        for symbol, (position, axis, k) in self.sources.items():
            shape = shapes[position] if position < len(shapes) else None
            if shape is None or axis >= len(shape):
                return  # (the usual input checks name a missing input or a wrong rank)
            size = int(shape[axis])
            if size % k:
                self._refuse(where, position, axis, self.dims[position][axis], shapes)
            bindings[symbol] = size // k
        for position, dims in enumerate(self.dims):
            shape = shapes[position] if position < len(shapes) else None
            if dims is None or shape is None or len(shape) != len(dims):
                continue
            for axis, (d, size) in enumerate(zip(dims, shape)):
                if (position, axis) in self._read_at or not isinstance(d, SymDim):
                    continue
                # (one symbol named on two inputs is one size by convention, as ONNX's
                # dim_params are; a runtime does not refuse them apart, nor does ember)
                if d.symbol() is not None or not d.symbols() <= bindings.keys():
                    continue
                if d.evaluate(bindings) != int(size):
                    self._refuse(where, position, axis, d, shapes, bindings)
        broken = first_broken(self.assumptions, bindings)
        if broken is not None:
            sizes = ", ".join(f"{n}={bindings[n]}" for n in sorted(broken.symbols()))
            raise ShapeError(
                f"{where}: the model was exported over symbolic sizes assuming "
                f"{broken.describe(bindings)}, which these sizes ({sizes}) break; feed sizes "
                "for which it holds (an image size its strides divide)",
                op="onnx",
            )

    def _refuse(self, where, position, axis, d, shapes, bindings=None):
        read = ", ".join(
            f"{s} from {self.names[p]!r} axis {a}"
            for s, (p, a, _) in sorted(self.sources.items())
            if s in d.symbols()
        )
        value = "" if bindings is None else f" = {d.evaluate(bindings)}"
        raise ShapeError(
            f"{where}: input {self.names[position]!r} has shape {tuple(shapes[position])}: "
            f"its axis {axis} must be {d}{value} (the model was exported with that size; {read})",
            op="onnx",
        )


def _read_assumption(record, label: str) -> Assumption:
    if not isinstance(record, dict) or record.get("kind") not in _KINDS:
        raise OnnxError(f"{label}: an assumption is not a record of kind {_KINDS}")
    ratio = record.get("ratio", [1, 1])
    if (
        not isinstance(ratio, list)
        or len(ratio) != 2
        or not all(isinstance(r, int) and not isinstance(r, bool) for r in ratio)
        or ratio[1] == 0
        or max(abs(r) for r in ratio) > 1 << 62
    ):
        raise OnnxError(f"{label}: an assumption's ratio is not two ints [p, q], q != 0")
    return Assumption(
        record["kind"],
        _read_size(record.get("left"), label),
        _read_size(record.get("right"), label),
        Fraction(*ratio),
    )
