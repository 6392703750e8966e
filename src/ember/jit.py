"""``ember.jit``: PyTorch's ``torch.jit`` names, for programs and libraries that use them, on
ember's capture.

``script`` is `ember.script` (a function's or module's tensor-dependent ``if``/``while``/``for``
become graph control flow; the result still runs as Python). ``trace`` captures with
`ember.function` (a function) or `ember.compile` (a module) and runs the example inputs once,
so a program that cannot be captured fails here as ``torch.jit.trace`` does; unlike a
TorchScript trace, the capture is redone for inputs of other shapes instead of replaying the
example's. ``is_scripting`` is False (ember never compiles Python into another language);
``is_tracing`` says whether a graph is being captured. The decorators that steer TorchScript's
compiler (``ignore``, ``unused``, ``export``, ``interface``) return what they decorate, and
``fork``/``wait`` run the call at once. ``freeze`` and ``optimize_for_inference`` return the
eval-mode module captured by `ember.compile`. ``save`` writes a traced module or function as an ONNX
model (ember's portable graph format: `ember.onnx.export`, parameters as initializers, the
batch dimension symbolic where the program allows), which ``load`` reads back as a module
(`ember.onnx.load` with ``trainable=True``) and onnxruntime runs; a TorchScript archive written
by PyTorch is refused, naming the way across (``torch.onnx.export``, then ``load``). Both need
the ``onnx`` package (``pip install 'ember[onnx]'``).
"""

from __future__ import annotations

import builtins
import os
from typing import Final  # noqa: F401  (torch.jit.Final)

from ._file_limits import PROTOBUF_MAX_BYTES, open_regular, read_stream
from ._jit_classes import (
    Attribute,
    Error,
    RecursiveScriptModule,
    ScriptFunction,
    ScriptModule,
    TopLevelTracedModule,
    TracedModule,
    TracerWarning,
    enable_onednn_fusion,
    isinstance,  # noqa: A004  (torch.jit.isinstance)
    mark,
    onednn_fusion_enabled,
    script_if_tracing,
    script_method,
    set_fusion_strategy,
    strict_fusion,
)
from ._missing import module_getattr
from .capture.compiled import compile as _compile
from .capture.function import function as _function
from .capture.script import script as _script
from .ops import _registry

__all__ = [
    "Attribute",
    "Error",
    "Final",
    "Future",
    "RecursiveScriptModule",
    "ScriptFunction",
    "ScriptModule",
    "TopLevelTracedModule",
    "TracedModule",
    "TracerWarning",
    "annotate",
    "export",
    "fork",
    "freeze",
    "ignore",
    "enable_onednn_fusion",
    "interface",
    "is_scripting",
    "is_tracing",
    "isinstance",
    "load",
    "onednn_fusion_enabled",
    "optimize_for_inference",
    "save",
    "script",
    "script_if_tracing",
    "script_method",
    "set_fusion_strategy",
    "strict_fusion",
    "trace",
    "unused",
    "wait",
]


def script(obj=None, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """``torch.jit.script``: `ember.script` on a function or module (usable as a decorator).
    A scripted module can be written by `save` (or its own ``save`` method, as a
    ScriptModule's) once it has run: its first call's input types are what the ONNX model is
    exported for (``example_inputs``, a list of argument tuples, gives them at once)."""
    if obj is None:
        return script
    scripted = mark(_script(obj), "script")
    if _is_module(scripted):
        _remember_inputs(scripted)
        if example_inputs:
            first = example_inputs[0]
            first = first if builtins.isinstance(first, tuple) else (first,)
            object.__setattr__(scripted, "_jit_example", (_types(first), False))
    return scripted


def _is_module(obj) -> bool:
    from . import nn

    return builtins.isinstance(obj, nn.Module)


def _remember_inputs(module) -> None:
    """Keep the types of ``module``'s first call (what `save` exports it for), and give it
    ScriptModule's ``save(f)``."""

    def record(mod, args, kwargs):
        if getattr(mod, "_jit_example", None) is None:
            object.__setattr__(mod, "_jit_example", (_types(args), bool(kwargs)))
        handle.remove()

    handle = module.register_forward_pre_hook(record, with_kwargs=True)
    object.__setattr__(module, "save", lambda f, _extra_files=None: save(module, f, _extra_files))


def trace(func, example_inputs=None, *args, example_kwarg_inputs=None, **kwargs):
    """``torch.jit.trace``: ``func`` (a function or module) captured, run once on
    ``example_inputs`` (a tensor or a tuple of them) so capture errors show now."""
    traced = mark(_compile(func) if _is_module(func) else _function(func), "trace")
    if example_inputs is not None or example_kwarg_inputs is not None:
        positional = (
            example_inputs if builtins.isinstance(example_inputs, tuple) else (example_inputs,)
        )
        if example_inputs is None:
            positional = ()
        traced(*positional, **(example_kwarg_inputs or {}))
        # what `save` exports the trace for: the example's types, not its tensors (a module
        # attribute holding tensors would be state to a later capture)
        object.__setattr__(traced, "_jit_example", (_types(positional), bool(example_kwarg_inputs)))
    return traced


def freeze(mod, preserved_attrs=None, optimize_numerics: bool = True):
    """``torch.jit.freeze``: the module in eval mode (a scripted, traced or plain one),
    captured with `ember.compile`, whose passes fold what does not change. As PyTorch's, a
    module in training mode is refused. Unlike a frozen TorchScript module, the result still
    lists its parameters and every attribute is preserved (``preserved_attrs`` is accepted);
    its parameters are read at each call, so it computes what the module computes."""
    from . import nn
    from .errors import ArgumentError

    if not builtins.isinstance(mod, nn.Module):
        raise ArgumentError(
            f"Freezing expects a module (torch.jit.script or torch.jit.trace of an "
            f"nn.Module), got {type(mod).__name__}",
            op="jit.freeze",
        )
    target = getattr(mod, "_orig_mod", None) or mod
    if target.training:
        raise ArgumentError(
            "Freezing is currently only implemented for modules in eval mode. Please call "
            ".eval() on your module before freezing.",
            op="jit.freeze",
        )
    if preserved_attrs is not None:
        missing = [a for a in preserved_attrs if not hasattr(mod, a)]
        if missing:
            raise ArgumentError(
                f"preserved_attrs {missing} are not attributes of the module", op="jit.freeze"
            )
    return mod if target is not mod else mark(_compile(mod), "script")


def optimize_for_inference(mod, other_methods=None):
    """``torch.jit.optimize_for_inference``: `freeze` on a module, put in eval mode first
    when it is in training mode (as PyTorch's does)."""
    from . import nn

    if builtins.isinstance(mod, nn.Module):
        (getattr(mod, "_orig_mod", None) or mod).eval()
    return freeze(mod)


def _types(values) -> tuple | None:
    """``(shape, dtype)`` of each example input, or None if one is not a tensor."""
    if not all(builtins.isinstance(v, _registry.TensorBase) for v in values):
        return None
    return tuple((tuple(v.shape), v.dtype) for v in values)


def save(m, f, _extra_files=None) -> None:
    """``torch.jit.save``: write ``m``, the result of `trace` on example tensors, to ``f`` (a
    path or a binary file object) as an ONNX model that `load` (and onnxruntime) reads. The
    first dimension of each input is exported symbolic (any batch size) where the program
    allows it, else the example's sizes are kept."""
    from .errors import EmberError

    example = getattr(m, "_jit_example", None)
    if example is None:
        raise EmberError(
            "jit.save writes a module as an ONNX model for the input types it has seen: trace "
            "it with ember.jit.trace(model, example_inputs), or call the scripted module once "
            "on an example input (or pass example_inputs to ember.jit.script) before saving; "
            "or write it with ember.onnx.export(model, path, *example_inputs)",
            op="jit.save",
        )
    types, keywords = example
    if types is None or keywords:
        raise EmberError(
            "jit.save exports traces made on positional tensor inputs only; use "
            "ember.onnx.export for other signatures",
            op="jit.save",
        )
    if _extra_files:
        raise EmberError("_extra_files are not stored by ember", op="jit.save")
    from . import onnx
    from .capture.signature import TensorSpec

    target = getattr(m, "_orig_mod", None) or getattr(m, "fn", None) or m
    batched = [TensorSpec((None, *shape[1:]) if shape else (), dtype) for shape, dtype in types]
    fixed = [TensorSpec(shape, dtype) for shape, dtype in types]
    path, stream = (None, f) if hasattr(f, "write") else (f, None)
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        out = path if stream is None else os.path.join(scratch, "model.onnx")
        try:
            onnx.export(target, out, input_signature=batched)
        except EmberError:  # (a size the program computes from the batch's: keep the example's)
            onnx.export(target, out, input_signature=fixed)
        if stream is not None:
            with open(out, "rb") as written:
                stream.write(written.read())


def load(f, map_location=None, _extra_files=None):
    """``torch.jit.load``: read what `save` wrote (or any ONNX model) as a module whose
    weights are Parameters (`ember.onnx.load` with ``trainable=True``). ``f``: a path or a
    binary file object. A TorchScript archive (PyTorch's zip) is refused: ember does not run
    TorchScript; export the model with ``torch.onnx.export`` and load that file."""
    from .errors import EmberError

    if map_location is not None and str(map_location).split(":")[0] != "cpu":
        raise EmberError(f"ember runs on the CPU, got map_location={map_location!r}", op="jit.load")
    if hasattr(f, "read"):
        name = getattr(f, "name", "<stream>")
        data = read_stream(f, PROTOBUF_MAX_BYTES, str(name), op="jit.load")
        source, head = data, data[:4]
    else:  # the path itself to the importer: its errors name the file, external data is found
        source = name = os.fspath(f)
        try:
            with open_regular(f) as stream:
                head = stream.read(4)
        except OSError as exc:
            raise EmberError(f"cannot read {name}: {exc}", op="jit.load") from exc
    if head == b"PK\x03\x04":
        raise EmberError(
            f"{name} is a TorchScript archive written by PyTorch, which ember does not "
            "run; export the model with torch.onnx.export and load that file with "
            "ember.jit.load or ember.onnx.load",
            op="jit.load",
        )
    from . import onnx

    return mark(onnx.load(source, trainable=True), "load")


def is_scripting() -> bool:
    """False: ember runs Python (``torch.jit.is_scripting`` is True only inside TorchScript)."""
    return False


def is_tracing() -> bool:
    """Whether ops are being captured into a graph right now."""
    return _registry.building_graph()


def ignore(drop=False, **kwargs):
    """``@torch.jit.ignore`` / ``@torch.jit.ignore(drop=True)``: the function, unchanged."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    """``@torch.jit.unused``: the function, unchanged."""
    return fn


def export(fn):
    """``@torch.jit.export``: the method, unchanged."""
    return fn


def interface(obj):
    """``@torch.jit.interface``: the class, unchanged."""
    return obj


def annotate(the_type, the_value):
    """``torch.jit.annotate``: the value (the type is for TorchScript's compiler)."""
    return the_value


class Future:
    """The result of `fork`: already computed; `wait` (or ``value()``) returns it."""

    def __init__(self, value):
        self._value = value

    def wait(self):
        return self._value

    def value(self):
        return self._value

    def done(self) -> bool:
        return True


def fork(func, *args, **kwargs) -> Future:
    """``torch.jit.fork``: runs ``func(*args, **kwargs)`` now (ember's ops use every core
    already) and returns its `Future`."""
    return Future(func(*args, **kwargs))


def wait(future: Future):
    """``torch.jit.wait``: the forked call's result."""
    return future.wait()


__getattr__ = module_getattr(__name__, globals())
