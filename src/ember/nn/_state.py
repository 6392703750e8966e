"""``Module.state_dict`` / ``load_state_dict``: PyTorch's key layout and loading semantics.

Keys are dotted paths (``features.0.weight``); each module contributes its parameters, then its
persistent buffers, then its children's entries, in registration order, as PyTorch does.

Loading validates everything first (unknown and missing keys under ``strict``, values that are
not tensors, wrong shapes) and raises one `StateDictError` listing every problem; only when
nothing is wrong does it copy, so a failed load never leaves a module half-updated.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from ..autograd import no_grad
from ..errors import ArgumentTypeError, StateDictError, user_stacklevel
from ..ops._util import fmt_shape
from ..tensor import Tensor
from .state_hooks import hooks, overrides_load


class _IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns: the keys the module expected but did not get, and the
    keys it got but does not have (PyTorch's class name, which programs print)."""

    missing_keys: list
    unexpected_keys: list

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (
            f"_IncompatibleKeys(missing_keys={self.missing_keys}, "
            f"unexpected_keys={self.unexpected_keys})"
        )

    __str__ = __repr__


IncompatibleKeys = _IncompatibleKeys


def local_state(module) -> list[tuple[str, str, Tensor]]:
    """(kind, name, tensor) of a module's own parameters and persistent buffers, in order."""
    entries = [("param", n, p) for n, p in module._parameters.items() if p is not None]
    entries += [
        ("buffer", n, b)
        for n, b in module._buffers.items()
        if b is not None and n not in module._non_persistent_buffers_set
    ]
    return entries


EXTRA_STATE_KEY = "_extra_state"


def has_extra_state(module) -> bool:
    """Whether the module's class overrides ``get_extra_state`` (Module's own is marked)."""
    return not getattr(type(module).get_extra_state, "_default_extra_state", False)


def save_local(module, destination: dict, prefix: str, keep_vars: bool) -> None:
    """A module's own entries: its parameters, persistent buffers and extra state
    (``Module._save_to_state_dict``)."""
    for _, name, value in local_state(module):
        destination[prefix + name] = value if keep_vars else value.detach()
    if has_extra_state(module):  # any picklable object, after the tensors, as in PyTorch
        destination[prefix + EXTRA_STATE_KEY] = module.get_extra_state()


def save(module, destination: dict, prefix: str, keep_vars: bool) -> dict:
    for hook in hooks(module, "_state_dict_pre_hooks"):
        hook(module, prefix, keep_vars)
    local_metadata = {"version": module._version}
    if hasattr(destination, "_metadata"):
        destination._metadata[prefix[:-1]] = local_metadata
    module._save_to_state_dict(destination, prefix, keep_vars)  # (a module may override it)
    for name, child in module._modules.items():
        if child is not None:
            destination = save(child, destination, prefix + name + ".", keep_vars)
    for hook in hooks(module, "_state_dict_hooks"):
        result = hook(module, destination, prefix, local_metadata)
        if result is not None:
            destination = result
    return destination


def _run_load_overrides(module, state_dict: dict, strict: bool) -> tuple[list, list, list]:
    """Each module's ``_load_from_state_dict`` where it is overridden or has pre-hooks, parents
    first, as PyTorch's recursion calls them: they may edit ``state_dict`` (a copy). Returns
    the keys they reported missing and unexpected, and their error messages."""
    missing: list = []
    unexpected: list = []
    errors: list = []
    metadata = getattr(state_dict, "_metadata", None)

    def visit(m, prefix):
        if overrides_load(m):
            # (each module's entry of the saved _metadata: its class's layout version)
            local = {} if metadata is None else metadata.get(prefix[:-1], {})
            m._load_from_state_dict(state_dict, prefix, local, strict, missing, unexpected, errors)
        for name, child in m._modules.items():
            if child is not None:
                visit(child, prefix + name + ".")

    visit(module, "")
    return missing, unexpected, errors


def _targets(module, prefix: str, out: OrderedDict) -> OrderedDict:
    """key -> (owning module, kind, local name, tensor) for every entry the module loads."""
    for kind, name, value in local_state(module):
        out[prefix + name] = (module, kind, name, value)
    if has_extra_state(module):
        out[prefix + EXTRA_STATE_KEY] = (module, "extra", EXTRA_STATE_KEY, None)
    for name, child in module._modules.items():
        if child is not None:
            _targets(child, prefix + name + ".", out)
    return out


def _as_array(value) -> np.ndarray | None:
    if isinstance(value, Tensor):
        return value._data
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__array__") and hasattr(value, "shape"):  # e.g. a torch tensor
        return np.asarray(value)
    return None


def load(module, state_dict, strict: bool = True, assign: bool = False) -> IncompatibleKeys:
    if not isinstance(state_dict, Mapping):
        raise ArgumentTypeError(
            f"load_state_dict expects a dict-like mapping of keys to tensors, got "
            f"{type(state_dict).__name__}"
        )
    post_hooks = [(m, h) for m in module.modules() for h in hooks(m, "_load_state_dict_post_hooks")]
    metadata = getattr(state_dict, "_metadata", None)
    state_dict = OrderedDict(state_dict)  # (the overrides and hooks below may edit it)
    if metadata is not None:
        state_dict._metadata = metadata
    more_missing, more_unexpected, errors = _run_load_overrides(module, state_dict, strict)
    targets = _targets(module, "", OrderedDict())
    missing = [k for k in targets if k not in state_dict] + more_missing
    unexpected = [k for k in state_dict if k not in targets] + more_unexpected
    # with post-hooks, PyTorch's order: load, let the hooks edit the key lists, then check
    # strictness (a hook that clears an expected missing key keeps the load from failing)
    checked_late = strict and bool(post_hooks)
    if strict and not checked_late:  # (PyTorch's wording, which programs match on)
        if missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing))
        if unexpected:
            errors.append(
                "Unexpected key(s) in state_dict: "
                + ", ".join(f'"{k}"' for k in unexpected)
                + _suggest(unexpected, missing)
            )
    arrays = {}
    for key, (_, _, _, current) in targets.items():
        if key not in state_dict:
            continue
        if current is None:  # extra state: the module's set_extra_state takes it as it is
            continue
        arr = _as_array(state_dict[key])
        if arr is None:
            errors.append(
                f'the value for "{key}" is a {type(state_dict[key]).__name__}, not a tensor'
            )
        elif tuple(arr.shape) != tuple(current.shape) and not _uninitialized(current):
            errors.append(
                f'size mismatch for "{key}": the state_dict has shape {fmt_shape(arr.shape)}, '
                f"the module's tensor has shape {fmt_shape(current.shape)}"
            )
        else:
            arrays[key] = arr
    if errors:
        name = type(module).__name__
        raise StateDictError(
            f"cannot load the state_dict into {name} (nothing was loaded):\n    "
            + "\n    ".join(errors),
            op="load_state_dict",
        )
    with no_grad():
        for key, arr in arrays.items():
            owner, kind, name, current = targets[key]
            if _uninitialized(current):  # a lazy layer's placeholder takes the state's shape
                current.materialize(arr.shape)
            _copy(owner, kind, name, current, arr, assign)
        for key, (owner, _, _, current) in targets.items():
            if current is None and key in state_dict:
                owner.set_extra_state(state_dict[key])
    result = IncompatibleKeys(missing, unexpected)
    for m, hook in post_hooks:
        if hook(m, result) is not None:
            raise RuntimeError(
                "Hooks registered with ``register_load_state_dict_post_hook`` are not expected "
                "to return new values, if incompatible_keys need to be modified, it should be "
                "done inplace."
            )
    if checked_late and (result.missing_keys or result.unexpected_keys):
        problems = []
        if result.missing_keys:
            problems.append(
                "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in result.missing_keys)
            )
        if result.unexpected_keys:
            problems.append(
                "Unexpected key(s) in state_dict: "
                + ", ".join(f'"{k}"' for k in result.unexpected_keys)
            )
        raise StateDictError(
            f"error(s) in loading the state_dict for {type(module).__name__}:\n    "
            + "\n    ".join(problems),
            op="load_state_dict",
        )
    return result


def _uninitialized(t) -> bool:
    """A lazy layer's `UninitializedParameter` / `UninitializedBuffer` (nn/lazy.py)."""
    return callable(getattr(t, "materialize", None))


def _copy(owner, kind: str, name: str, current: Tensor, arr: np.ndarray, assign: bool) -> None:
    if assign:
        from .parameter import Parameter

        value = Tensor(np.array(arr, copy=True))
        if kind == "param":
            owner._parameters[name] = Parameter(value, requires_grad=current.requires_grad)
        else:
            owner._buffers[name] = value
        return
    if current.is_meta:  # (nothing to copy into: PyTorch warns and leaves it meta)
        warnings.warn(
            f"for {name}: copying from a non-meta parameter in the checkpoint to a meta "
            "parameter in the current model, which is a no-op. (Did you mean to pass "
            "`assign=True` to assign items in the state dictionary to their corresponding key "
            "in the module instead of copying them in place?)",
            stacklevel=user_stacklevel(),
        )
        return
    # cast to the module's dtype, as torch's copy_ does; the module keeps its tensor objects
    np.copyto(current._data, arr.astype(current._data.dtype, copy=False), casting="unsafe")
    current._vc[0] += 1


def _suggest(unexpected: list, missing: list) -> str:
    """A hint for the commonest mismatch: keys saved from a wrapped model (``module.`` prefix)."""
    for prefix in ("module.", "_orig_mod.", "model."):
        if any(k.startswith(prefix) and k[len(prefix) :] in missing for k in unexpected):
            return f' (the keys carry a "{prefix}" prefix; strip it before loading)'
    return ""
