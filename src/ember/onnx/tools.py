"""ONNX models for ember's tools: ``ember inspect model.onnx`` and ``ember viz model.onnx``
see the ember graph the model imports as (captured at its declared input shapes; dynamic sizes
at 1, or, where 1 is too small for the model (an image's height and width under a few
convolutions and poolings), at the first of 32 and 224 that fits). A model whose shapes depend
on its data has no one graph: the tools say so, naming the node."""

from __future__ import annotations

import os

from ..errors import EmberError, OnnxError, TraceError


def is_onnx_path(path) -> bool:
    return os.fspath(path).lower().endswith(".onnx")


def imported_graph(path, batch_size: int | None = None):
    """(the ember graph ``path`` imports as, a note on the sizes it was captured at)."""
    from ._convert import NeedsData
    from .importer import load

    function = load(path)
    size = 1 if batch_size is None else int(batch_size)
    if size < 1:
        raise OnnxError(f"--batch-size must be at least 1, got {size}")
    dynamic = sorted(
        {
            str(d) if d else "?"
            for name in function.input_names
            for d in function.runner.declared[name][1] or ()
            if not isinstance(d, int)
        }
    )
    sizes = [size] if batch_size is not None or not dynamic else [1, 32, 224]
    for attempt, size in enumerate(sizes):
        try:
            function.compile(*function.example_inputs(size))
            break
        except (NeedsData, TraceError) as err:
            raise OnnxError(
                f"{path}: the model computes shapes or control flow from its data, so it has "
                f"no single graph to show (it runs eagerly when called): "
                f"{str(err).splitlines()[0]}"
            ) from err
        except EmberError:
            if attempt == len(sizes) - 1:
                raise
    note = None
    if dynamic:
        note = f"dynamic sizes {', '.join(dynamic)} captured as {size}" + (
            " (--batch-size sets them)" if batch_size is None else ""
        )
    elif batch_size is not None:
        raise OnnxError(f"--batch-size: {path} has no dynamic sizes to set (its sizes are fixed)")
    return function.graph, note
