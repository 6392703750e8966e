"""ONNX models for ember's tools: ``ember inspect model.onnx`` and ``ember viz model.onnx``
see the ember graph the model imports as (captured at its declared input shapes)."""

from __future__ import annotations

import os

from ..errors import OnnxError


def is_onnx_path(path) -> bool:
    return os.fspath(path).lower().endswith(".onnx")


def imported_graph(path, batch_size: int | None = None):
    """(the ember graph ``path`` imports as, a note on the sizes it was captured at)."""
    from .importer import load

    function = load(path)
    size = 1 if batch_size is None else int(batch_size)
    if size < 1:
        raise OnnxError(f"--batch-size must be at least 1, got {size}")
    examples = function.example_inputs(size)
    dynamic = sorted(
        {
            str(d) if d else "?"
            for name in function.input_names
            for d in function.runner.declared[name][1] or ()
            if not isinstance(d, int)
        }
    )
    function.compile(*examples)
    note = None
    if dynamic:
        note = f"dynamic sizes {', '.join(dynamic)} captured as {size}" + (
            " (--batch-size sets them)" if batch_size is None else ""
        )
    elif batch_size is not None:
        raise OnnxError(f"--batch-size: {path} has no dynamic sizes to set (its sizes are fixed)")
    return function.graph, note
