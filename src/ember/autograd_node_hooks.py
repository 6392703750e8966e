"""The hooks and metadata of one tape node, PyTorch's ``Node.register_hook``,
``Node.register_prehook`` and ``Node.metadata``.

A pre-hook ``hook(grad_outputs)`` sees the gradients of the node's outputs (a tuple, None where
none arrived) before its VJP runs and may return replacements; a hook ``hook(grad_inputs,
grad_outputs)`` sees what the VJP computed for each input too, and may return replacements of
``grad_inputs``. They run after the tensor hooks of the node's outputs, in registration order.
A node without any keeps ``_extras`` None, so the engine pays one attribute read per node.
"""

from __future__ import annotations

from .errors import AutogradError


class _Handle:
    def __init__(self, table: dict, key):
        self._table, self._key = table, key

    def remove(self) -> None:
        self._table.pop(self._key, None)


def _extras(node) -> dict:
    if node._extras is None:
        node._extras = {"pre": {}, "post": {}, "metadata": {}}
    return node._extras


def register_prehook(node, hook) -> _Handle:
    """``hook(grad_outputs) -> grad_outputs or None``, run before the node's VJP."""
    table = _extras(node)["pre"]
    key = object()
    table[key] = hook
    return _Handle(table, key)


def register_hook(node, hook) -> _Handle:
    """``hook(grad_inputs, grad_outputs) -> grad_inputs or None``, run after the node's VJP."""
    table = _extras(node)["post"]
    key = object()
    table[key] = hook
    return _Handle(table, key)


def register_output_hook(node, output_nr: int, hook):
    """A tensor hook of the node's output ``output_nr`` (Tensor.register_hook of a non-leaf):
    (its key, the table holding it), for the tensor's handle to remove it by."""
    if node._pre_hooks is None:
        node._pre_hooks = {}
    table = node._pre_hooks.setdefault(output_nr, {})
    key = object()
    table[key] = hook
    return key, table


@property
def metadata(node) -> dict:
    """A dict the program may keep anything in, as PyTorch's ``Node.metadata``."""
    return _extras(node)["metadata"]


@property
def next_functions(node) -> tuple:
    """For each input, ``(the node that made it, its output number)``; ``(None, 0)`` for an
    input that needs no gradient, as PyTorch's (the engine reads ``_edges``, None there)."""
    return tuple([edge if edge is not None else (None, 0) for edge in node._edges])


def _type_name(t) -> str:
    legacy = getattr(t, "type", None)  # (PyTorch's legacy name, torch.FloatTensor)
    return legacy() if callable(legacy) else str(t.dtype)


def check_hook_value(hook, old, new, name: str | None = None) -> None:
    """PyTorch's check of a gradient a hook returned in place of ``old``: the same dtype,
    then the same size (the engine casts what a custom Function's backward returns, never
    what a hook returns). ``name``: the hook's name in the message (its ``__name__``)."""
    if old is None or new is None or not hasattr(new, "dtype") or not hasattr(old, "dtype"):
        return
    name = name or getattr(hook, "__name__", type(hook).__name__)
    if new.dtype != old.dtype:
        raise AutogradError(
            f"hook '{name}' has changed the type of value (was {_type_name(old)} got "
            f"{_type_name(new)})",
            op="backward",
        )
    if tuple(new.shape) != tuple(old.shape):
        raise AutogradError(f"hook '{name}' has changed the size of value", op="backward")


def _replaced(hook, result, old, what: str):
    if result is None:
        return old
    result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    if len(result) != len(old):
        name = getattr(hook, "__name__", type(hook).__name__)
        raise AutogradError(
            f"hook '{name}' has returned an incorrect number of values (got {len(result)}, "
            f"but expected {len(old)}): a node's {what} returns one gradient per gradient it "
            "was given",
            op="backward",
        )
    for before, after in zip(old, result):
        check_hook_value(hook, before, after)
    return result


def run_prehooks(extras: dict, grads: list) -> list:
    for hook in list(extras["pre"].values()):
        grads = list(_replaced(hook, hook(tuple(grads)), tuple(grads), "pre-hook"))
    return grads


def run_hooks(extras: dict, in_grads, grads) -> tuple:
    for hook in list(extras["post"].values()):
        in_grads = _replaced(hook, hook(tuple(in_grads), tuple(grads)), tuple(in_grads), "hook")
    return in_grads
