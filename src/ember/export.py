"""``ember.export``: PyTorch's ``torch.export`` on ember's capture.

``export(mod, args, kwargs=None, dynamic_shapes=None)`` captures a module's (or a function's)
forward into an `ExportedProgram`: a snapshot of the module (a deep copy, in the training or
eval mode it had: later changes to the original do not reach it; a module holding something
that does not copy is used itself), the tensor signature it was
exported for, and the captured graph (``ep.graph``, ember's ops, forward only: ember's graphs
hold primitive ops, so ``run_decompositions`` has nothing left to decompose). ``ep.module()``
is an ``nn.Module`` that runs it through `ember.function`, checking each call's shapes and
dtypes against the signature (a static size must match; a dynamic one may take any size in
its `Dim`'s range). A program that cannot run on a symbolic size (one it turns into a Python
number) fails at export, as torch.export's constraint check does.

``dynamic_shapes`` is PyTorch's: per positional argument (a tuple or list in their order, or a
dict by the forward's parameter names) None, or ``{axis: Dim}`` or a sequence of a `Dim` or
None per axis; ``Dim.AUTO`` and ``Dim.DYNAMIC`` make an axis symbolic, ``Dim.STATIC`` keeps the
example's size. One `Dim` object (or name) used by several inputs is one size they share.

``save(ep, f)`` writes the program as an ONNX model (ember's portable format: the weights as
initializers, each dynamic axis a named dimension), which ``load(f)`` reads back as an
`ExportedProgram` (its module's weights are Parameters). Both need the ``onnx`` package.
"""

from __future__ import annotations

import copy
import inspect
import os
import tempfile
from dataclasses import dataclass, field

from . import dtypes as dt
from ._file_limits import PROTOBUF_MAX_BYTES, open_regular, read_stream
from ._files import write_atomic
from ._missing import module_getattr
from .errors import ArgumentError, EmberError, ShapeError
from .ops import _registry

__all__ = ["Dim", "ExportGraphSignature", "ExportedProgram", "dims", "export", "load", "save"]


class _Special:
    """`Dim.AUTO`, `Dim.DYNAMIC` and `Dim.STATIC`."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"Dim.{self.name}"


class Dim:
    """A named dynamic size, ``Dim("batch", min=1, max=1024)``: each input axis given this object
    (or another `Dim` of its name) takes the same size, within ``[min, max]`` (inclusive)."""

    AUTO = _Special("AUTO")
    DYNAMIC = _Special("DYNAMIC")
    STATIC = _Special("STATIC")

    def __init__(self, name: str, *, min: int | None = None, max: int | None = None):  # noqa: A002
        if not isinstance(name, str) or not name.isidentifier():
            raise ArgumentError(f"a Dim's name must be an identifier, got {name!r}", op="Dim")
        low = 0 if min is None else int(min)
        high = None if max is None else int(max)
        if low < 0 or (high is not None and high < low):
            raise ArgumentError(f"Dim {name}: invalid range [{min}, {max}]", op="Dim")
        self.__name__ = name
        self.min, self.max = low, high

    def __repr__(self) -> str:
        return f"Dim({self.__name__!r}, min={self.min}, max={self.max})"

    # PyTorch's derived dims: ``2 * d``, ``d + 1`` (an input whose size follows another's)
    def __mul__(self, k: int):
        return _derived(self, k, lambda x: x * k, f"{k}*{self.__name__}", "*")

    __rmul__ = __mul__

    def __add__(self, k: int):
        return _derived(self, k, lambda x: x + k, f"{self.__name__} + {k}", "+")

    __radd__ = __add__

    def __sub__(self, k: int):
        return _derived(self, k, lambda x: x - k, f"{self.__name__} - {k}", "-")


class _DerivedDim:
    """``root`` transformed by ``fn`` (PyTorch's _DerivedDim: ``root`` and ``fn`` are the
    names the ONNX exporter reads, ember's or PyTorch's alike)."""

    def __init__(self, root: Dim, fn, name: str):
        self.root, self.fn, self.__name__ = root, fn, name

    def __repr__(self) -> str:
        return self.__name__


def _derived(root, k, fn, name: str, op: str):
    if isinstance(root, _DerivedDim) or isinstance(k, bool) or not isinstance(k, int):
        return NotImplemented
    if op == "*" and k < 1:
        raise ArgumentError(f"Dim {root.__name__}: a derived dim scales by k >= 1, got {k}")
    return _DerivedDim(root, fn, name)


def dims(*names: str, min: int | None = None, max: int | None = None) -> tuple:  # noqa: A002
    """One `Dim` per name, sharing the range."""
    return tuple(Dim(n, min=min, max=max) for n in names)


@dataclass
class ExportGraphSignature:
    """Where the captured graph's inputs come from: the user's arguments (by the forward's
    parameter names), then the module's parameters and buffers (by their state-dict names)."""

    user_inputs: list = field(default_factory=list)
    parameters: list = field(default_factory=list)
    buffers: list = field(default_factory=list)
    user_outputs: list = field(default_factory=list)


class ExportedProgram:
    """What `export` returns (see the module docstring)."""

    def __init__(self, module, specs: list, names: list, example_inputs, ranges: dict):
        from .capture.function import function

        self._module = module
        self._specs = specs
        self._names = names
        self._ranges = ranges
        self.example_inputs = example_inputs
        self._function = function(module, input_signature=specs, name=_name(module))
        self._graph = None

    # -------------------------------------------------------------------------- the program
    def module(self):
        """An ``nn.Module`` running the exported program (it holds the snapshot's parameters
        and buffers: ``parameters()``, ``state_dict()`` and training work on it)."""
        return _ExportedModule(self)

    graph_module = property(module)

    @property
    def exported_module(self):
        """The module (or function) the program captured: the snapshot taken at export."""
        return self._module

    @property
    def input_signature(self) -> list:
        """The `TensorSpec` of each argument (a dynamic size named by its Dim)."""
        return list(self._specs)

    @property
    def input_names(self) -> list:
        return list(self._names)

    @property
    def graph(self):
        """The forward's captured graph at the signature (ember's ops; inputs: the user's
        arguments, then the parameters and buffers it reads)."""
        if self._graph is None:
            from .grad_mode import no_grad

            with no_grad():
                program = self._function.compile(*self._examples())
            self._graph = program.graph
        return self._graph

    @property
    def state_dict(self) -> dict:
        return dict(self._module.state_dict()) if hasattr(self._module, "state_dict") else {}

    @property
    def graph_signature(self) -> ExportGraphSignature:
        module = self._module
        params = [n for n, _ in module.named_parameters()] if hasattr(module, "buffers") else []
        buffers = [n for n, _ in module.named_buffers()] if hasattr(module, "buffers") else []
        outputs = [f"output_{i}" for i in range(len(self.graph.outputs))]
        return ExportGraphSignature(list(self._names), params, buffers, outputs)

    @property
    def range_constraints(self) -> dict:
        """``{size name: (min, max)}`` of the dynamic sizes (max None: unbounded)."""
        return dict(self._ranges)

    def run_decompositions(self, decomp_table=None, *args, **kwargs) -> ExportedProgram:
        """The program itself: ember's graphs hold primitive ops only."""
        return self

    def validate(self) -> None:
        self.graph.verify()

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Unable to call ExportedProgram directly. You should use "
            "`exported_program.module()` instead."
        )

    def __str__(self) -> str:
        return f"ExportedProgram:\n{self.graph}\nRange constraints: {self._ranges}"

    __repr__ = __str__

    # -------------------------------------------------------------------------- helpers
    def _examples(self) -> list:
        """The export's own example arguments, else (a loaded program) zeros of the
        signature's types, each dynamic size its range's least (at least 1)."""
        if self.example_inputs is not None:
            args, kwargs = self.example_inputs
            return _bind(self._module, args, kwargs)
        zeros = _registry.PUBLIC["zeros"]
        out = []
        for spec in self._specs:
            shape = [d if isinstance(d, int) else max(1, self._ranges[d][0]) for d in spec.shape]
            out.append(zeros(*shape, dtype=spec.dtype))
        return out

    def _check(self, tensors: list) -> None:
        if len(tensors) != len(self._specs):
            raise ArgumentError(
                f"the exported program takes {len(self._specs)} tensor arguments "
                f"({', '.join(self._names)}), got {len(tensors)}",
                op="export",
            )
        sizes: dict = {}
        for name, spec, t in zip(self._names, self._specs, tensors):
            if not isinstance(t, _registry.TensorBase):
                raise ArgumentError(f"argument {name} must be a tensor", op="export")
            if len(t.shape) != len(spec.shape):
                raise ShapeError(
                    f"argument {name} has {len(t.shape)} dimensions, the exported program "
                    f"takes {len(spec.shape)} ({spec})",
                    op="export",
                )
            for axis, (want, got) in enumerate(zip(spec.shape, t.shape)):
                if isinstance(want, int):
                    if got != want:
                        raise ShapeError(
                            f"expected input at {name}.shape[{axis}] to be equal to {want}, "
                            f"but got {got}",
                            op="export",
                        )
                    continue
                low, high = self._ranges.get(want, (0, None))
                if got < low or (high is not None and got > high):
                    raise ShapeError(
                        f"expected input at {name}.shape[{axis}] ({want}) to be in "
                        f"[{low}, {'inf' if high is None else high}], but got {got}",
                        op="export",
                    )
                if sizes.setdefault(want, got) != got:
                    raise ShapeError(
                        f"the dynamic size {want} is {sizes[want]} in one input and {got} at "
                        f"{name}.shape[{axis}]",
                        op="export",
                    )


def _name(module) -> str:
    return type(module).__name__ if not inspect.isfunction(module) else module.__name__


def _make_module_class():
    from . import nn

    class ExportedModule(nn.Module):
        """``ExportedProgram.module()``: the snapshot's forward, run by `ember.function`."""

        def __init__(self, program: ExportedProgram):
            super().__init__()
            self._program = program
            if isinstance(program._module, nn.Module):
                self.exported = program._module  # (its parameters and buffers are ours)

        def forward(self, *args, **kwargs):
            program = self._program
            values = _bind(program._module, args, kwargs)
            program._check(values)
            return program._function(*values)

    return ExportedModule


_module_class: list = []


def _ExportedModule(program):  # noqa: N802 (a class made at first use: nn imports late)
    if not _module_class:
        _module_class.append(_make_module_class())
    return _module_class[0](program)


def _forward(mod):
    return getattr(mod, "forward", mod)


def _bind(mod, args, kwargs) -> list:
    """The call's arguments in the forward's positional order (keywords bound by name)."""
    if not kwargs:
        return list(args)
    try:
        bound = inspect.signature(_forward(mod)).bind(*args, **kwargs)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"the arguments do not fit the forward: {exc}", op="export") from exc
    return list(bound.args)


def _arg_names(mod, count: int) -> list:
    try:
        params = list(inspect.signature(_forward(mod)).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [names[i] if i < len(names) else f"arg{i}" for i in range(count)]


def _axis_specs(name: str, value, ndim: int) -> dict:
    """``{axis: Dim or special}`` from one argument's entry of ``dynamic_shapes``."""
    if value is None:
        return {}
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        if len(value) != ndim:
            raise ArgumentError(
                f"dynamic_shapes for {name} lists {len(value)} axes, the input has {ndim}",
                op="export",
            )
        items = enumerate(value)
    else:
        raise ArgumentError(
            f"dynamic_shapes for {name} must be None, a dict or a sequence, got "
            f"{type(value).__name__}",
            op="export",
        )
    out = {}
    for axis, d in items:
        if not isinstance(axis, int) or not -ndim <= axis < ndim:
            raise ArgumentError(f"dynamic_shapes for {name}: no axis {axis!r}", op="export")
        if d is not None and not isinstance(d, (Dim, _Special, _DerivedDim)):
            raise ArgumentError(
                f"dynamic_shapes for {name}[{axis}] must be a Dim, 2*Dim, Dim.AUTO, Dim.DYNAMIC, "
                f"Dim.STATIC or None, got {d!r}",
                op="export",
            )
        if d is not None:
            out[axis % ndim] = d
    return out


def export(
    mod,
    args=(),
    kwargs=None,
    *,
    dynamic_shapes=None,
    strict: bool = False,
    preserve_module_call_signature=(),
) -> ExportedProgram:
    """``torch.export.export``: ``mod``'s forward captured for ``args`` (and ``kwargs``), see
    the module docstring."""
    if not callable(mod):
        raise ArgumentError(
            f"Expected `mod` to be an instance of `torch.nn.Module`, got {type(mod).__name__}",
            op="export",
        )
    if not isinstance(args, tuple):
        raise ArgumentError(
            f"Expected `args` to be a tuple, got {type(args).__name__}", op="export"
        )
    values = _bind(mod, args, kwargs or {})
    names = _arg_names(mod, len(values))
    for name, v in zip(names, values):
        if not isinstance(v, _registry.TensorBase):
            raise EmberError(
                f"export takes tensor arguments; {name} is a {type(v).__name__} (bake it into "
                "the module, or pass it as a tensor)",
                op="export",
            )
    if dynamic_shapes is None:
        per_arg = [None] * len(values)
    elif isinstance(dynamic_shapes, dict):
        unknown = sorted(set(dynamic_shapes) - set(names))
        if unknown:
            raise ArgumentError(
                f"dynamic_shapes names {unknown}, which are not arguments ({', '.join(names)})",
                op="export",
            )
        per_arg = [dynamic_shapes.get(n) for n in names]
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(values):
            raise ArgumentError(
                f"dynamic_shapes has {len(dynamic_shapes)} entries for {len(values)} arguments",
                op="export",
            )
        per_arg = list(dynamic_shapes)
    else:
        raise ArgumentError("dynamic_shapes must be a dict, tuple or list", op="export")
    axes_of = [_axis_specs(name, entry, v.ndim) for name, v, entry in zip(names, values, per_arg)]
    example = (tuple(args), dict(kwargs or {}))
    try:
        snapshot = copy.deepcopy(mod)
    except Exception:  # noqa: BLE001 (an attribute that does not copy: the module itself)
        snapshot = mod
    auto = any(d is Dim.AUTO for axes in axes_of for d in axes.values())
    try:
        return _captured(snapshot, names, values, axes_of, example, auto_dynamic=True)
    except ShapeError:
        if not auto:
            raise
    # Dim.AUTO: a size the program ties to a constant (broadcast against a fixed one) is static
    return _captured(snapshot, names, values, axes_of, example, auto_dynamic=False)


def _captured(module, names, values, axes_of, example, *, auto_dynamic: bool):
    """The `ExportedProgram` of ``module`` at the signature ``axes_of`` describes, captured
    now (a program that cannot run on its symbolic sizes fails here)."""
    from .capture.signature import TensorSpec
    from .grad_mode import no_grad
    from .symbolic import sym

    specs, ranges, by_name, derived_examples = [], {}, {}, []
    for name, v, axes in zip(names, values, axes_of):
        shape = []
        for axis, size in enumerate(v.shape):
            d = axes.get(axis)
            if d is None or d is Dim.STATIC or (d is Dim.AUTO and not auto_dynamic):
                shape.append(int(size))
                continue
            if isinstance(d, _DerivedDim):  # (its size follows the root's: a SymDim of it)
                derived = d.fn(sym(d.root.__name__))
                shape.append(derived)
                derived_examples.append((name, axis, size, derived))
                continue
            if isinstance(d, Dim):
                symbol = d.__name__
                known = by_name.setdefault(symbol, d)
                if (known.min, known.max) != (d.min, d.max):
                    raise ArgumentError(f"two Dims named {symbol} differ in range", op="export")
                low, high = d.min, d.max
            else:  # (AUTO, DYNAMIC: a size of this axis's own)
                symbol, low, high = f"{name}_{axis}", 0, None
            if size < low or (high is not None and size > high):
                raise ShapeError(
                    f"the example's {name}.shape[{axis}] = {size} is outside {symbol}'s "
                    f"range [{low}, {high}]",
                    op="export",
                )
            ranges[symbol] = (low, high)
            shape.append(symbol)
        specs.append(TensorSpec(tuple(shape), v.dtype))
    bindings = {}
    for v, spec in zip(values, specs):
        for size, d in zip(v.shape, spec.shape):
            if isinstance(d, str):
                bindings.setdefault(d, int(size))
    for name, axis, size, derived in derived_examples:
        if derived.symbols() <= bindings.keys() and derived.evaluate(bindings) != int(size):
            raise ShapeError(
                f"the example's {name}.shape[{axis}] = {size} is not {derived} = "
                f"{derived.evaluate(bindings)}",
                op="export",
            )
    program = ExportedProgram(module, specs, names, example, ranges)
    with no_grad():
        program._function(*values)
    return program


def save(ep: ExportedProgram, f, *, extra_files=None, opset_version=None, **kwargs) -> None:
    """``torch.export.save``: ``ep`` as an ONNX model in ``f`` (a path or a binary stream)."""
    from . import onnx

    if not isinstance(ep, ExportedProgram):
        raise ArgumentError(f"save takes an ExportedProgram, got {type(ep).__name__}", op="save")
    if extra_files:
        raise EmberError("extra_files are not stored by ember", op="export.save")
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "program.onnx")
        onnx.export(
            ep._module, path, input_signature=ep._specs, input_names=ep._names,
            external_data=False,
        )  # fmt: skip
        with open(path, "rb") as written:
            data = written.read()
    if hasattr(f, "write"):
        f.write(data)
    else:
        write_atomic(os.fspath(f), data)


def load(f, *, extra_files=None, expected_opset_version=None) -> ExportedProgram:
    """``torch.export.load``: the program `save` wrote (or any ONNX model of tensor inputs)."""
    from . import onnx
    from .capture.signature import TensorSpec

    if hasattr(f, "read"):
        where = getattr(f, "name", "<stream>")
        data = read_stream(f, PROTOBUF_MAX_BYTES, str(where), op="export.load")
        source, head = data, data[:4]
    else:  # the path itself to the importer: its errors name the file, external data is found
        source = where = os.fspath(f)
        try:
            with open_regular(where) as stream:
                head = stream.read(4)
        except OSError as exc:
            raise EmberError(f"cannot read {where}: {exc}", op="export.load") from exc
    if head == b"PK\x03\x04":
        raise EmberError(
            f"{where} is a .pt2 archive written by PyTorch, which ember does not read; export "
            "the model with torch.onnx.export and load that file with ember.onnx.load",
            op="export.load",
        )
    module = onnx.load(source, trainable=True)
    specs, ranges = [], {}
    for name in module.input_names:
        dtype, shape = module._runner.declared[name]
        if dtype is None or shape is None:
            raise EmberError(
                f"{where}: input {name!r} declares no tensor type and shape, which an "
                "exported program needs (load it with ember.onnx.load instead)",
                op="export.load",
            )
        dims_ = []
        for d in shape:
            if isinstance(d, int):
                dims_.append(d)
            else:
                symbol = d if isinstance(d, str) and d.isidentifier() else f"{name}_{len(dims_)}"
                ranges[symbol] = (0, None)
                dims_.append(symbol)
        specs.append(TensorSpec(tuple(dims_), dt.as_dtype(dtype)))
    names = list(module.input_names)
    return ExportedProgram(module, specs, names, None, ranges)


__getattr__ = module_getattr(__name__, globals())
