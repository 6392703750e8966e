"""``ember.onnx``: graphs in and out of the ONNX format.

* ``ember.onnx.load(path)`` reads a model (``.onnx`` file, bytes or a ``ModelProto``) and
  returns an `OnnxFunction`: call it on tensors or arrays; it runs as an ``ember.function``
  (captured into a graph, ember's passes, ember's executors; ``print(f.graph)``), or eagerly
  where the model computes shapes from data. ``load(path, trainable=True)`` returns an
  `OnnxModule` whose floating-point initializers are Parameters, to fine-tune with
  ``ember.optim``.
* ``ember.onnx.backend``: ONNX's ``Backend`` interface (``prepare``, ``run_model``), which
  ONNX's conformance suite drives.
* ``ember.onnx.export(fn_or_module_or_graph, path, *example_inputs)``: a graph to a file.

The ``onnx`` package (``pip install 'ember[onnx]'``) is imported on first use, never when
``ember`` is imported: everything here works without it except what reads or writes ONNX.
"""

from __future__ import annotations

import importlib

from ._model import MAX_LOOP_ITERATIONS

__all__ = ["load", "export", "backend", "OnnxFunction", "OnnxModule"]


def load(
    model,
    *,
    trainable: bool = False,
    capture: bool = True,
    opt_level=None,
    max_loop_iterations: int | None = MAX_LOOP_ITERATIONS,
):
    """Read an ONNX model (a path, bytes or an ``onnx.ModelProto``) as an ember callable.

    ``trainable=False`` gives an `OnnxFunction` (initializers are constants); ``True`` an
    `OnnxModule` (``nn.Module``) whose floating-point initializers are Parameters.
    ``capture=False`` runs the model eagerly, op by op, instead of capturing it into a graph.
    ``max_loop_iterations`` bounds a Loop whose condition decides when it ends: past that many
    iterations with the condition still true it raises `OnnxError` (or, in a captured graph,
    `CheckFailedError`) naming the node rather than run on forever; ``None`` lets it run (a
    KeyboardInterrupt still stops it). A Loop that only counts to its trip count is not bounded.
    Damaged files, unknown operators and unsupported opsets raise `OnnxError` naming them."""
    from .importer import load as _load

    return _load(
        model,
        trainable=trainable,
        capture=capture,
        opt_level=opt_level,
        max_loop_iterations=max_loop_iterations,
    )


def export(target, path=None, *example_inputs, input_signature=None, opset=None, **kwargs):
    """Write ``target`` (a function, an ``nn.Module`` or an ember ``Graph``) to ``path`` as an
    ONNX model; see ``ember.onnx.exporter.export``. PyTorch's convention, ``export(model, args,
    f, opset_version=..., dynamic_axes=..., ...)``, is accepted too (onnx/torch_convention.py)."""
    from . import torch_convention
    from .exporter import export as _export

    if path is None or not torch_convention.is_destination(path) and not example_inputs:
        # export(model, args) or export(model, args, dynamo=True): PyTorch's ONNXProgram
        if not torch_convention.is_destination(kwargs.get("f")):
            args = kwargs.pop("args", path if path is not None else ())
            kwargs.pop("f", None)
            options = dict(kwargs, input_signature=input_signature, opset=opset)
            return torch_convention.export(_export, target, args, None, options)
    if "args" in kwargs or "f" in kwargs:  # PyTorch's keywords
        args = kwargs.pop("args", path if path is not None else ())
        f = kwargs.pop("f", example_inputs[0] if example_inputs else None)
        return torch_convention.export(_export, target, args, f, kwargs)
    if (
        not torch_convention.is_destination(path)
        and example_inputs
        and torch_convention.is_destination(example_inputs[0])
        and len(example_inputs) == 1
    ):  # export(model, args, f): the inputs before the file
        return torch_convention.export(_export, target, path, example_inputs[0], kwargs)
    if hasattr(path, "write") or (
        torch_convention.IGNORED & set(kwargs) or {"opset_version", "dynamic_axes"} & set(kwargs)
    ):  # (a binary file object as ``path`` is written as PyTorch's ``f`` is)
        options = dict(kwargs, input_signature=input_signature, opset=opset)
        return torch_convention.export(_export, target, example_inputs, path, options)
    return _export(
        target, path, *example_inputs, input_signature=input_signature, opset=opset, **kwargs
    )


def __getattr__(name):
    if name == "backend":
        return importlib.import_module(".backend", __name__)
    if name in ("OnnxFunction", "OnnxModule"):
        from . import importer

        return getattr(importer, name)
    raise AttributeError(f"module 'ember.onnx' has no attribute {name!r}")
