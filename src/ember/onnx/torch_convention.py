"""PyTorch's calling convention for ``ember.onnx.export``, so a translated program's
``torch.onnx.export(model, args, f, input_names=..., output_names=..., opset_version=...,
dynamic_axes=...)`` writes the same file ember's own ``export(target, path, *inputs)`` does.

* ``args`` is a tensor or a tuple of them (a trailing dict holds keyword arguments, which ember
  does not export: refused); ``f`` a path or a binary file object (``io.BytesIO``).
* ``opset_version`` is ember's ``opset``; ``dynamic_axes`` ({input name: {axis: name} or
  [axes]}) becomes an input signature whose named dimensions are symbolic, so the file takes
  any size there (outputs' dynamic sizes follow from the graph).
* options about how PyTorch's own exporter works (``export_params``, ``do_constant_folding``,
  ``verbose``, ``keep_initializers_as_inputs``, ``dynamo``, ``training`` left at inference,
  ``operator_export_type``) change nothing in ember's file and are accepted.
"""

from __future__ import annotations

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


def export(export_fn, target, args, f, options: dict):
    """``torch.onnx.export(target, args, f, **options)`` through ember's ``export_fn``."""
    options = dict(options)
    for key in IGNORED & set(options):
        options.pop(key)
    if "opset_version" in options:
        options["opset"] = options.pop("opset_version")
    dynamic_axes = options.pop("dynamic_axes", None)
    extra = options.pop("kwargs", None)
    if extra:
        raise OnnxError("keyword arguments of the exported call are not supported", op="export")
    args = _as_args(args)
    if dynamic_axes:
        options["input_signature"] = _signature(args, options.get("input_names"), dynamic_axes)
    if hasattr(f, "write"):
        with tempfile.TemporaryDirectory(prefix="ember-onnx-") as folder:
            path = os.path.join(folder, "model.onnx")
            model = export_fn(target, path, *args, external_data=False, **options)
            with open(path, "rb") as written:
                f.write(written.read())
            return model
    return export_fn(target, f, *args, **options)
