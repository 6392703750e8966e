"""PyTorch's calling convention for ``ember.onnx.export``, so a translated program's
``torch.onnx.export(model, args, f, input_names=..., output_names=..., opset_version=...,
dynamic_axes=...)`` writes the same file ember's own ``export(target, path, *inputs)`` does.

* ``args`` is a tensor or a tuple of them (a trailing dict holds keyword arguments, which ember
  does not export: refused); ``f`` a path or a binary file object (``io.BytesIO``).
* ``opset_version`` is ember's ``opset``; ``dynamic_axes`` ({input name: {axis: name} or
  [axes]}) becomes an input signature whose named dimensions are symbolic, so the file takes
  any size there (outputs' dynamic sizes follow from the graph).
* ``dynamic_shapes`` (``torch.onnx.export(..., dynamo=True)``'s, PyTorch's default since 2.9):
  per positional argument (a tuple or list in order, or a dict by the forward's parameter
  names) None, ``{axis: Dim, a name, Dim.AUTO/DYNAMIC/STATIC or None}`` or one such entry per
  axis; a `Dim` (``ember.export.Dim`` or any object named by ``__name__``) or a name shared
  by several axes is one size they share, AUTO and DYNAMIC give an axis a size of its own.
* ``model`` may be an ``ember.export.ExportedProgram``: its module at its own signature.
* without ``f`` the call returns an `OnnxProgram` (``.model_proto``, ``.save(path)``), as
  PyTorch's dynamo exporter returns its ONNXProgram.
* options about how PyTorch's own exporter works (``export_params``, ``do_constant_folding``,
  ``verbose``, ``keep_initializers_as_inputs``, ``dynamo``, ``training`` left at inference,
  ``operator_export_type``) change nothing in ember's file and are accepted.
"""

from __future__ import annotations

import inspect
import os
import tempfile

from ..errors import OnnxError

# accepted and without effect on what ember writes (see the module docstring)
IGNORED = frozenset(
    {
        "export_params",
        "do_constant_folding",
        "verbose",
        "keep_initializers_as_inputs",
        "dynamo",
        "training",
        "operator_export_type",
        "report",
        "optimize",
        "verify",
        "custom_opsets",
        "export_modules_as_functions",
        "autograd_inlining",
        "fallback",
        "profile",
        "dump_exported_program",
        "artifacts_dir",
        "strict",
    }
)


def is_destination(value) -> bool:
    return isinstance(value, (str, bytes, os.PathLike)) or hasattr(value, "write")


def _as_args(args) -> tuple:
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    if args and isinstance(args[-1], dict):
        if args[-1]:
            raise OnnxError(
                "keyword arguments of the exported call (a dict ending args) are not "
                "supported; bind them with a wrapper function or module",
                op="export",
            )
        args = args[:-1]
    return args


def _signature(args, input_names, dynamic_axes):
    from ..capture.signature import TensorSpec
    from ..tensor import Tensor

    # keys that name no input name outputs, whose sizes follow from the graph
    names = list(input_names or ())
    specs = []
    for i, a in enumerate(args):
        if not isinstance(a, Tensor):
            raise OnnxError(
                f"dynamic_axes needs tensor inputs; argument {i} is a {type(a).__name__}",
                op="export",
            )
        axes = dynamic_axes.get(names[i], ()) if i < len(names) else ()
        if isinstance(axes, dict):
            axes = {int(k) % a.ndim: str(v) for k, v in axes.items()}
        else:
            axes = {int(k) % a.ndim: f"{names[i]}_dynamic_axes_{int(k) % a.ndim}" for k in axes}
        shape = tuple(axes.get(d, size) for d, size in enumerate(a.shape))
        specs.append(TensorSpec(shape, a.dtype))
    return specs


def _special(d) -> str | None:
    """'AUTO', 'DYNAMIC' or 'STATIC' for Dim's markers (ember's or PyTorch's), else None."""
    name = getattr(d, "name", None) if not isinstance(d, str) else None
    if isinstance(name, str) and name.upper() in ("AUTO", "DYNAMIC", "STATIC"):
        return name.upper()
    text = repr(d)
    for marker in ("AUTO", "DYNAMIC", "STATIC"):
        if text.endswith(f".{marker}") or text == marker:
            return marker
    return None


def _forward_names(target, count: int) -> list:
    try:
        params = inspect.signature(getattr(target, "forward", target)).parameters.values()
    except (TypeError, ValueError):
        params = ()
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [names[i] if i < len(names) else f"arg{i}" for i in range(count)]


def _shapes_signature(target, args, dynamic_shapes, input_names) -> list:
    """TensorSpecs from ``dynamic_shapes`` (see the module docstring)."""
    from ..capture.signature import TensorSpec
    from ..tensor import Tensor

    names = _forward_names(target, len(args))
    if isinstance(dynamic_shapes, dict):
        unknown = sorted(set(dynamic_shapes) - set(names) - set(input_names or ()))
        if unknown:
            raise OnnxError(
                f"dynamic_shapes names {unknown}, which are not arguments of the forward "
                f"({', '.join(names)})",
                op="export",
            )
        given = list(input_names or ()) + [None] * len(args)
        per_arg = [dynamic_shapes.get(n, dynamic_shapes.get(given[i])) for i, n in enumerate(names)]
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(args):
            raise OnnxError(
                f"dynamic_shapes has {len(dynamic_shapes)} entries for {len(args)} arguments",
                op="export",
            )
        per_arg = list(dynamic_shapes)
    else:
        raise OnnxError(
            f"dynamic_shapes must be a tuple, list or dict, got {type(dynamic_shapes).__name__}",
            op="export",
        )
    specs = []
    for i, (a, entry) in enumerate(zip(args, per_arg)):
        if not isinstance(a, Tensor):
            raise OnnxError(
                f"dynamic_shapes needs tensor inputs; argument {names[i]} is a {type(a).__name__}",
                op="export",
            )
        if entry is None:
            axes = {}
        elif isinstance(entry, dict):
            axes = dict(entry)
        elif isinstance(entry, (tuple, list)) and len(entry) == a.ndim:
            axes = dict(enumerate(entry))
        else:
            raise OnnxError(
                f"dynamic_shapes for {names[i]} must be None, a dict of axes or one entry per "
                f"axis ({a.ndim}), got {entry!r}",
                op="export",
            )
        shape = list(a.shape)
        for axis, d in axes.items():
            if not isinstance(axis, int) or not -a.ndim <= axis < a.ndim:
                raise OnnxError(f"dynamic_shapes for {names[i]}: no axis {axis!r}", op="export")
            marker = _special(d) if d is not None else "STATIC"
            if marker == "STATIC":
                continue
            if marker is not None:
                name = f"{names[i]}_{axis % a.ndim}"
            elif _is_derived(d):  # (2 * dim: the root's symbol, scaled)
                name = _derived_size(d, f"dynamic_shapes for {names[i]}[{axis}]")
            else:
                name = d if isinstance(d, str) else getattr(d, "__name__", None)
                if not isinstance(name, str) or not name.isidentifier():
                    raise OnnxError(
                        f"dynamic_shapes for {names[i]}[{axis}] must be a Dim, a name, "
                        f"Dim.AUTO, Dim.DYNAMIC, Dim.STATIC or None, got {d!r}",
                        op="export",
                    )
            shape[axis % a.ndim] = name
        specs.append(TensorSpec(tuple(shape), a.dtype))
    return specs


def _is_derived(d) -> bool:
    return callable(getattr(d, "fn", None)) and hasattr(d, "root")


def _derived_size(d, where: str):
    """A derived Dim (``2 * n``, ``n + 1``: ember's or PyTorch's) as the SymDim it computes
    from its root's symbol, so the file relates the two sizes rather than naming each apart."""
    from ..symbolic import SymDim, sym

    root = getattr(d.root, "__name__", None)
    if not isinstance(root, str) or not root.isidentifier():
        raise OnnxError(f"{where}: a derived Dim's root has no name ({d.root!r})", op="export")
    try:
        size = d.fn(sym(root))
    except Exception as err:  # (a user's function: any failure is theirs to read)
        raise OnnxError(
            f"{where}: the derived Dim {d!r} failed on a size: {err}", op="export"
        ) from err
    if not isinstance(size, SymDim):
        raise OnnxError(f"{where}: the derived Dim {d!r} gives {size!r}, not a size", op="export")
    return size


class OnnxProgram:
    """What ``export(model, args)`` without a destination returns, as PyTorch's dynamo
    exporter returns its ONNXProgram: ``model_proto`` and ``save(destination)``."""

    def __init__(self, model_proto):
        self.model_proto = model_proto

    def save(self, destination, *, include_initializers: bool = True, **_ignored) -> None:
        from .._files import write_atomic

        if not include_initializers:
            raise OnnxError("save(include_initializers=False) is not supported", op="export")
        data = self.model_proto.SerializeToString()
        if hasattr(destination, "write"):
            destination.write(data)
        else:
            write_atomic(destination, data)

    def __repr__(self) -> str:
        return f"OnnxProgram({self.model_proto.graph.name!r})"


def _exported_program(target, args, options: dict):
    """(module, args) for an ``ember.export.ExportedProgram`` target, its signature and input
    names put into ``options``; else (target, args) unchanged."""
    signature = getattr(target, "input_signature", None)
    if signature is None or not hasattr(target, "range_constraints"):
        return target, args
    options.setdefault("input_signature", list(signature))
    options.setdefault("input_names", list(target.input_names))
    if not args and target.example_inputs is not None:
        args = tuple(target.example_inputs[0])
    return target.exported_module, args


def export(export_fn, target, args, f, options: dict):
    """``torch.onnx.export(target, args, f, **options)`` through ember's ``export_fn``."""
    options = dict(options)
    for key in IGNORED & set(options):
        options.pop(key)
    if "opset_version" in options:
        options["opset"] = options.pop("opset_version")
    dynamic_axes = options.pop("dynamic_axes", None)
    dynamic_shapes = options.pop("dynamic_shapes", None)
    extra = options.pop("kwargs", None)
    if extra:
        raise OnnxError("keyword arguments of the exported call are not supported", op="export")
    args = _as_args(args)
    target, args = _exported_program(target, args, options)
    if dynamic_axes and dynamic_shapes:
        raise OnnxError("give dynamic_axes or dynamic_shapes, not both", op="export")
    if dynamic_axes:
        options["input_signature"] = _signature(args, options.get("input_names"), dynamic_axes)
    if dynamic_shapes:
        options["input_signature"] = _shapes_signature(
            target, args, dynamic_shapes, options.get("input_names")
        )
    if f is None:
        with tempfile.TemporaryDirectory(prefix="ember-onnx-") as folder:
            path = os.path.join(folder, "model.onnx")
            return OnnxProgram(export_fn(target, path, *args, external_data=False, **options))
    if hasattr(f, "write"):
        with tempfile.TemporaryDirectory(prefix="ember-onnx-") as folder:
            path = os.path.join(folder, "model.onnx")
            model = export_fn(target, path, *args, external_data=False, **options)
            with open(path, "rb") as written:
                f.write(written.read())
            return model
    return export_fn(target, f, *args, **options)
