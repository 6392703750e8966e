"""``ember.nn.utils.stateless``: a module called with some of its parameters and buffers
replaced for one call (`call_with_tensors`, which ``ember.func.functional_call`` is), and
PyTorch's deprecated spelling of it, ``torch.nn.utils.stateless.functional_call`` (its
FutureWarning included). Tied tensors follow the replacement (``tie_weights=True``), and the
module's own tensors are restored afterwards even when the call raises."""

from __future__ import annotations

import warnings

from ...errors import EmberError, user_stacklevel

__all__ = ["functional_call"]


def call_with_tensors(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                      tie_weights: bool = True, strict: bool = False, op: str):  # fmt: skip
    """``module(*args, **kwargs)`` with the named parameters and buffers replaced by the given
    tensors for the call (a dict, or a tuple of dicts); errors name ``op``."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        dicts = (dicts,)
    given: dict = {}
    for d in dicts:
        for name, value in d.items():
            if name in given:
                raise EmberError(f"{name!r} is given twice", op=op)
            given[name] = value
    slots = _tensor_slots(module)
    unknown = sorted(set(given) - set(slots))
    if unknown:
        raise EmberError(
            f"{module.__class__.__name__} has no parameter or buffer {unknown}",
            op=op,
        )
    replace = dict(given)
    if tie_weights:  # every place that holds the same tensor takes the new one
        for name, value in given.items():
            original = slots[name][2]
            for other, (_, _, held) in slots.items():
                if held is original and other not in given:
                    replace[other] = value
    if strict:  # (a name tied to a given one is given, as PyTorch's tie_weights counts it)
        missing = sorted(set(slots) - set(replace))
        if missing:
            raise EmberError(f"strict: no tensor given for {missing}", op=op)
    saved = []
    try:
        for name, value in replace.items():
            table, key, original = slots[name]
            saved.append((table, key, original))
            table[key] = value
        args = () if args is None else args if isinstance(args, tuple) else (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for table, key, original in reversed(saved):
            table[key] = original


def _tensor_slots(module) -> dict:
    """Every parameter and buffer of ``module`` by full name (tied ones under each name): the
    table holding it, its key there, and the tensor."""
    slots = {}
    for prefix, sub in module.named_modules(remove_duplicate=False):
        for table in (sub._parameters, sub._buffers):
            for key, value in table.items():
                if value is not None:
                    slots[f"{prefix}.{key}" if prefix else key] = (table, key, value)
    return slots


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):  # fmt: skip
    """``torch.nn.utils.stateless.functional_call`` (deprecated since PyTorch 2.0, as here):
    `ember.func.functional_call`."""
    warnings.warn(
        "`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be "
        "removed in a future version of PyTorch. Please use `torch.func.functional_call` "
        "instead which is a drop-in replacement.",
        FutureWarning,
        stacklevel=user_stacklevel(),
    )
    return call_with_tensors(
        module,
        parameters_and_buffers,
        args,
        kwargs,
        tie_weights=tie_weights,
        strict=strict,
        op="nn.utils.stateless.functional_call",
    )
