"""What each initializer of a ``torch.export`` ONNX file was in the PyTorch program.

PyTorch's dynamo exporter (``torch.onnx.export(..., dynamo=True)``, the default from 2.9) writes
every tensor the program holds as an initializer: parameters, buffers, and also the program's
own constants (a ``masked_fill`` value, a ``pow`` exponent, an epsilon, ``arange``'s start and
step, an ``affine_grid`` base grid folded by its optimizer). Training those as parameters
changes the model (a Range whose start moves yields a longer sequence), so a trainable import
must tell them apart. The exporter records the program's signature on the values' metadata
(``pkg.torch.export.graph_signature.InputSpec.kind``: PARAMETER, BUFFER, CONSTANT_TENSOR) and
its optimizer records what a folded initializer was computed from
(``pkg.onnxscript.optimizer.folded_from``), which these rules read:

* a value marked PARAMETER is a parameter, BUFFER a buffer, CONSTANT_TENSOR a constant;
* a value folded from one other value is that value transformed (a weight transposed for
  MatMul), and keeps its role where the file still marks the source, else is a parameter;
  folded from several, it is computed from them: a parameter where one of them was a
  parameter of PyTorch's program (a weight-normed convolution's weight, from its magnitude
  and direction; GroupNorm's weight reshaped), else a buffer where one was a buffer
  (frequencies times positions), else a constant (a grid), as it is no leaf of PyTorch's
  program. A source the optimizer folded away has no marker left on a value; its role is
  read from the program's signature the exporter writes on the graph
  (``pkg.torch.export.ExportedProgram.graph_signature``: ``p_x: PARAMETER target='x'``
  lines). The folded value trains as one parameter: PyTorch trains its sources (a weight
  norm's magnitude and direction), which the file no longer holds, so the import has the
  folded value's elements where PyTorch has the sources' (TorchScript's exporter folds the
  same way);
* an unmarked value with at most one element is one of the program's scalars, a constant;
  other unmarked values (a convolution with BatchNorm fused in by the optimizer) are parameters.

A file without the markers (TorchScript's exporter, other tools) gets ``None``: its floating
initializers are all parameters, as before.

A value folded from one initializer that the file still holds (a tied weight: an embedding
gathered by the file and, transposed and folded, the language-model head's MatMul weight) is
not a parameter of its own: training the two apart would untie them. `layout_copies` finds
those that are the source itself, its transpose (any axis order) or a reshape of it, which a
trainable import computes from the source on every call, so the gradient reaches the one
parameter PyTorch trains.
"""

from __future__ import annotations

import ast
import itertools
import re

import numpy as np

KIND_KEY = "pkg.torch.export.graph_signature.InputSpec.kind"
FOLDED_KEY = "pkg.onnxscript.optimizer.folded_from"
SIGNATURE_KEY = "pkg.torch.export.ExportedProgram.graph_signature"
# one input of the signature's text: "p_w: PARAMETER target='w'" (buffers add "persistent=")
_SIGNATURE_LINE = re.compile(
    r"^[ \t]*[^\s:]+: (PARAMETER|BUFFER|CONSTANT_TENSOR) target='([^'\n]*)'", re.MULTILINE
)

PARAMETER, BUFFER, CONSTANT = "parameter", "buffer", "constant"
_KINDS = {"PARAMETER": PARAMETER, "BUFFER": BUFFER, "CONSTANT_TENSOR": CONSTANT}


def _metadata(graph) -> dict[str, dict[str, str]]:
    """{value name: its metadata_props} over the graph's inputs, outputs and value_info."""
    found: dict[str, dict[str, str]] = {}
    for info in (*graph.input, *graph.value_info, *graph.output):
        props = getattr(info, "metadata_props", ())
        if props:
            found.setdefault(info.name, {}).update({p.key: p.value for p in props})
    return found


def _sources(text: str) -> list[str]:
    """The names a folded_from entry lists (a Python list literal); none where it is not one."""
    try:
        names = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    if not isinstance(names, (list, tuple)):
        return []
    return [n for n in names if isinstance(n, str)]


def _signature_roles(graph) -> dict[str, str]:
    """{target: PARAMETER, BUFFER or CONSTANT} of the program's inputs the graph's signature
    text lists (those the optimizer folded away included); empty where it has none."""
    text = next((p.value for p in graph.metadata_props if p.key == SIGNATURE_KEY), "")
    return {target: _KINDS[kind] for kind, target in _SIGNATURE_LINE.findall(text)}


def _folded_role(sources: list[str], metadata: dict, signature: dict) -> str:
    """The role of a value folded from several ``sources``: a parameter where one was one,
    else a buffer where one was one, else a constant."""
    kinds = set()
    for name in sources:
        kind = _KINDS.get(metadata.get(name, {}).get(KIND_KEY, ""))
        kinds.add(kind or signature.get(name))
    return next((k for k in (PARAMETER, BUFFER) if k in kinds), CONSTANT)


def initializer_roles(graph, initializers: dict[str, np.ndarray]) -> dict[str, str] | None:
    """{initializer name: PARAMETER, BUFFER or CONSTANT} for a file ``torch.export`` wrote,
    else None (see the module's docstring)."""
    metadata = _metadata(graph)
    if not any(KIND_KEY in props for props in metadata.values()):
        return None
    signature = _signature_roles(graph)
    roles = {}
    for name, array in initializers.items():
        props = metadata.get(name, {})
        kind = _KINDS.get(props.get(KIND_KEY, ""))
        if kind is not None:
            roles[name] = kind
            continue
        if FOLDED_KEY in props:
            sources = _sources(props[FOLDED_KEY])
            if len(sources) == 1:
                marked = _KINDS.get(metadata.get(sources[0], {}).get(KIND_KEY, ""))
                marked = marked or signature.get(sources[0])
                roles[name] = marked or (CONSTANT if array.size <= 1 else PARAMETER)
            else:
                roles[name] = _folded_role(sources, metadata, signature)
            continue
        roles[name] = CONSTANT if array.size <= 1 else PARAMETER
    return roles


def _layout(folded: np.ndarray, source: np.ndarray):
    """("transpose", axes) or ("reshape", shape) when ``folded`` is ``source`` laid out anew
    (its values moved, none computed), else None."""
    if folded.dtype != source.dtype or folded.size != source.size:
        return None
    if folded.ndim == source.ndim and source.ndim <= 4:
        for axes in itertools.permutations(range(source.ndim)):
            moved = np.transpose(source, axes)
            if moved.shape == folded.shape and np.array_equal(moved, folded, equal_nan=True):
                return ("transpose", axes)
    if np.array_equal(source.reshape(folded.shape), folded, equal_nan=True):
        return ("reshape", folded.shape)
    return None


def layout_copies(graph, initializers: dict[str, np.ndarray]) -> dict[str, tuple]:
    """{folded initializer: (its source, ("transpose", axes) or ("reshape", shape))} for the
    folded values of a ``torch.export`` file whose one source the file still holds (see the
    module's docstring)."""
    metadata = _metadata(graph)
    found = {}
    for name, array in initializers.items():
        sources = _sources(metadata.get(name, {}).get(FOLDED_KEY, ""))
        if len(sources) != 1 or sources[0] == name or sources[0] not in initializers:
            continue
        layout = _layout(array, initializers[sources[0]])
        if layout is not None:
            found[name] = (sources[0], layout)
    return found
