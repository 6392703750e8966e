"""Errors for names PyTorch has and ember does not.

A program ported from PyTorch that reaches for ``ember.jit.script`` or ``x.pin_memory()`` should
learn that ember lacks the name and what to use instead, not read a bare AttributeError. The
namespaces that install `module_getattr` (``ember``, ``ember.nn``, ``ember.nn.functional``,
``ember.optim``) and the tensor classes (`tensor_getattr`) raise `NotInEmberError` (an
AttributeError) for the names listed in `TORCH_ONLY`, with the alternative where ember has one.
Any other missing name gets Python's usual message plus the closest existing names.

The table is deliberately short: the names ported programs actually reach for, not PyTorch's
whole namespace. A name ember gains stops being reported the moment it exists (lookup finds it
before ``__getattr__`` runs), so an entry can never shadow a real attribute.
"""

from __future__ import annotations

import difflib

from .errors import NotInEmberError

__all__ = ["TORCH_ONLY", "module_getattr", "tensor_getattr"]

_NONE = None  # ember has no counterpart
_NO_GPU = "ember runs on the CPU only"
_SPARSE_COO = (
    "ember's sparse tensors are COO: ember.sparse_coo_tensor(indices, values, size) or "
    "x.to_sparse(), which mm, matmul, addmm and ember.sparse take"
)

# namespace -> {name PyTorch has there: ember's alternative, or None}
TORCH_ONLY: dict[str, dict[str, str | None]] = {
    "ember.jit": {
        "CompilationUnit": "ember.jit.script on Python functions (ember compiles no "
        "TorchScript source)",
    },
    "ember": {
        "fx": "ember.trace (captures an ember.Graph; print(graph) shows it)",
        "hub": _NONE,
        "xpu": _NO_GPU,
        "mps": _NO_GPU,
        "Storage": _NONE,
        "sparse_csc_tensor": _SPARSE_COO,
        "sparse_bsr_tensor": _SPARSE_COO,
        "sparse_bsc_tensor": _SPARSE_COO,
        "sparse_compressed_tensor": _SPARSE_COO,
        "nested": _NONE,
        "masked": _NONE,
        "package": _NONE,
    },
    "ember.nn": {
        "quantized": _NONE,
        "qat": _NONE,
        "intrinsic": _NONE,
    },
    "ember.nn.functional": {},
    "ember.optim": {},
    "Tensor": {
        "record_stream": _NO_GPU,
        "chalf": "x.cfloat() (complex64): ember has no complex32, PyTorch's half-precision "
        "complex dtype, whose CPU kernels are few (dtypes.py)",
        "to_sparse_csc": _SPARSE_COO,
    },
}


def _missing(namespace: str, torch_label: str, name: str) -> NotInEmberError | None:
    """The error for a PyTorch name ember lacks, or None when PyTorch has no such name."""
    table = TORCH_ONLY.get(namespace, {})
    if name not in table:
        return None
    alternative = table[name]
    text = f"ember has no {name!r}: PyTorch's {torch_label}{name} has no ember counterpart"
    if alternative:
        text = f"ember has no {name!r} (PyTorch's {torch_label}{name}); instead: {alternative}"
    return NotInEmberError(text, name=name, op=f"{namespace}.{name}")


def _suggest(name: str, names) -> str:
    close = difflib.get_close_matches(name, [n for n in names if not n.startswith("_")], n=3)
    return f". Did you mean: {', '.join(repr(c) for c in close)}?" if close else ""


def module_getattr(module_name: str, namespace: dict):
    """A module-level ``__getattr__`` for ``module_name`` (whose globals are ``namespace``)."""

    def __getattr__(name: str):
        if not name.startswith("_"):
            error = _missing(module_name, "torch" + module_name[len("ember") :] + ".", name)
            if error is not None:
                raise error
        message = f"module {module_name!r} has no attribute {name!r}"
        if not name.startswith("_"):
            message += _suggest(name, namespace)
        raise AttributeError(message, name=name)

    return __getattr__


class _TensorAttributeError(AttributeError):
    """A tensor attribute that exists neither in ember nor in PyTorch; the close matches are
    found only when the message is read (``hasattr`` probes stay cheap)."""

    def __str__(self) -> str:
        cls, name = self.args
        return f"{cls.__name__!r} object has no attribute {name!r}{_suggest(name, dir(cls))}"


def tensor_getattr(self, name: str):
    """``Tensor.__getattr__``: runs only when normal lookup fails."""
    if name.startswith("_"):  # private and dunder probes (NumPy's __array_interface__, ...)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
    error = _missing("Tensor", "Tensor.", name)
    if error is not None:
        error.obj = self
        raise error
    raise _TensorAttributeError(type(self), name)
