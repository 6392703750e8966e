"""The process-wide switches a test may flip (ember's, NumPy's, PyTorch's, the environment and
the working folder), read and put back, for tests/conftest.py's check that each test leaves
them as it found them.

A test that sets one and does not restore it changes what every later test in its worker
sees: grad mode off makes later gradients None, a default dtype of float64 changes every
tolerance, deterministic algorithms left on reroute PyTorch's kernels, an ``EMBER_*`` variable
changes which kernels run. Such a leak shows only as another test's failure, in some orders
and selections and not others. Each switch here is a few attribute reads, so the check runs
around every test.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import numpy as np

import ember
from ember import amp, devices, flags, grad_mode, printing, saved_hooks
from ember import backends as ember_backends
from ember.kernels import cpool
from ember.ops import _autocast, _registry, _torch_flops

# name -> (read, write): ``write(read())`` puts the switch back
Switch = tuple[Callable[[], object], Callable[[object], None]]


def _registry_state(field: str) -> Switch:
    def write(value):
        setattr(_registry._state, field, list(value) if field == "modes" else value)

    def read():
        value = getattr(_registry._state, field)
        return tuple(value) if field == "modes" else value

    return read, write


def _module_value(module, name: str) -> Switch:
    return (lambda: getattr(module, name)), (lambda value: setattr(module, name, value))


def _list_value(values: list) -> Switch:
    return (lambda: tuple(values)), (lambda value: values.__setitem__(slice(None), value))


# set by pytest itself (the test and phase running), and by PyTorch's compiler stack as it
# first runs (its cache folder, an address it passes to its own code)
_NOT_SWITCHES = frozenset({"PYTEST_CURRENT_TEST"})
_SET_BY_PYTORCH = ("TORCHINDUCTOR_", "_TORCHINDUCTOR_")


def _environment() -> dict:
    return {
        k: v
        for k, v in os.environ.items()
        if k not in _NOT_SWITCHES and not k.startswith(_SET_BY_PYTORCH)
    }


def _environment_write(saved: dict) -> None:
    for name in set(_environment()) - set(saved):
        del os.environ[name]
    os.environ.update(saved)


def _backend_flags() -> dict:
    """ember.backends' plain settings (cudnn.deterministic, opt_einsum.strategy...)."""
    found = {}
    for name in ("cudnn", "mkldnn", "opt_einsum"):
        module = getattr(ember_backends, name)
        for key, value in vars(module).items():
            if not key.startswith("_") and isinstance(value, (bool, int, float, str)):
                found[f"{name}.{key}"] = value
    return found


def _backend_flags_write(saved: dict) -> None:
    for key, value in saved.items():
        name, attribute = key.split(".")
        setattr(getattr(ember_backends, name), attribute, value)


EMBER_SWITCHES: dict[str, Switch] = {
    "ember grad mode": _registry_state("grad_enabled"),
    "ember autocast region": _registry_state("autocast"),
    # (a region left open also leaves its nesting count up, and the weight-cast cache is
    # cleared only when the count returns to 0: later regions would reuse casts whose saved
    # values an earlier backward freed)
    "ember autocast nesting": (
        lambda: _autocast.local.nesting,
        lambda v: (setattr(_autocast.local, "nesting", v), v or _autocast.clear_cache()),
    ),
    "ember mode stack (a trace or function left open)": _registry_state("modes"),
    "ember base mode (a profiler left recording)": _list_value(_registry._base_mode),
    "ember conformance recording": _module_value(_registry, "conformance"),
    "ember inference mode": _list_value(grad_mode._inference),
    "ember anomaly mode": (
        lambda: (grad_mode._anomaly.enabled, grad_mode._anomaly.check_nan),
        lambda v: (
            setattr(grad_mode._anomaly, "enabled", v[0]),
            setattr(grad_mode._anomaly, "check_nan", v[1]),
        ),
    ),
    "ember default dtype": (ember.get_default_dtype, ember.set_default_dtype),
    "ember default device": _module_value(devices, "_default"),
    "ember deterministic algorithms": (
        lambda: (flags._deterministic, flags._warn_only),
        lambda v: flags.use_deterministic_algorithms(v[0], warn_only=v[1]),
    ),
    "ember float32 matmul precision": (
        flags.get_float32_matmul_precision,
        flags.set_float32_matmul_precision,
    ),
    "ember inter-op threads": (flags.get_num_interop_threads, flags.set_num_interop_threads),
    "ember warn_always": (flags.is_warn_always_enabled, flags.set_warn_always),
    "ember threads (set_num_threads)": (cpool.get_num_threads, cpool.set_num_threads),
    "ember autocast cache": (amp.is_autocast_cache_enabled, amp.set_autocast_cache_enabled),
    "ember printoptions": (
        lambda: dict(printing._options),
        lambda v: (printing._options.clear(), printing._options.update(v)),
    ),
    "ember saved-tensor hooks": _list_value(saved_hooks.hooks),
    "ember FlopCounterMode watchers (a counter left entered)": (
        lambda: _torch_flops._Regions.watchers,
        lambda v: setattr(_torch_flops._Regions, "watchers", v),
    ),
    "ember.backends flags": (_backend_flags, _backend_flags_write),
}

PROCESS_SWITCHES: dict[str, Switch] = {
    "environment variables": (_environment, _environment_write),
    "working folder": (os.getcwd, os.chdir),
    "NumPy error handling (np.seterr)": (np.geterr, lambda v: np.seterr(**v)),
    "NumPy printoptions": (np.get_printoptions, lambda v: np.set_printoptions(**v)),
}


def _cannot_close(value) -> None:
    """A context left entered (an inference region) is not closed from outside it: reported
    only."""


def _pop_torch_function_modes(torch):
    """Leave the TorchFunctionModes entered since (``torch.set_default_device("cpu")`` enters
    one for good: PyTorch's way back is None)."""

    def write(depth):
        while torch._C._len_torch_function_stack() > depth:
            torch._C._pop_torch_function_stack()

    return write


def _pop_torch_dispatch_modes(torch):
    """Leave the TorchDispatchModes entered since (FlopCounterMode, a fake-tensor mode)."""

    def write(depth):
        while torch._C._len_torch_dispatch_stack() > depth:
            torch._C._pop_torch_dispatch_stack()

    return write


def _torch_switches(torch) -> dict[str, Switch]:
    """PyTorch's, read only once a test has imported it (the reference most tests compare
    against: a leaked switch there changes the expected values)."""
    printing_options = torch._tensor_str.PRINT_OPTS
    return {
        "torch grad mode": (torch.is_grad_enabled, torch.set_grad_enabled),
        "torch inference mode (a region left open)": (
            torch.is_inference_mode_enabled,
            _cannot_close,
        ),
        "torch default dtype": (torch.get_default_dtype, torch.set_default_dtype),
        "torch deterministic algorithms": (
            lambda: (
                torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled(),
            ),
            lambda v: torch.use_deterministic_algorithms(v[0], warn_only=v[1]),
        ),
        "torch autocast (cpu)": (
            lambda: (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")),
            lambda v: (
                torch.set_autocast_enabled("cpu", v[0]),
                torch.set_autocast_dtype("cpu", v[1]),
            ),
        ),
        # (the no-argument form is CUDA's: nn.TransformerEncoder and MultiheadAttention ask it
        # before their fused inference paths, also on the CPU)
        "torch autocast (the legacy no-argument form)": (
            torch.is_autocast_enabled,
            torch.set_autocast_enabled,
        ),
        # (left True by an export that did not unwind, TransformerEncoder skips its nested
        # path as if under torch.compile)
        "torch compiling flag (torch.compiler.is_compiling)": (
            lambda: torch.compiler._is_compiling_flag,
            lambda v: setattr(torch.compiler, "_is_compiling_flag", v),
        ),
        "torch dispatch modes (a TorchDispatchMode left entered)": (
            torch._C._len_torch_dispatch_stack,
            _pop_torch_dispatch_modes(torch),
        ),
        "torch anomaly mode": (torch.is_anomaly_enabled, torch.set_anomaly_enabled),
        "torch threads": (torch.get_num_threads, torch.set_num_threads),
        "torch float32 matmul precision": (
            torch.get_float32_matmul_precision,
            torch.set_float32_matmul_precision,
        ),
        "torch nn.MultiheadAttention fast path": (
            torch.backends.mha.get_fastpath_enabled,
            torch.backends.mha.set_fastpath_enabled,
        ),
        "torch printoptions": (
            lambda: dict(vars(printing_options)),
            lambda v: vars(printing_options).update(v),
        ),
        "torch function modes (a mode left entered)": (
            torch._C._len_torch_function_stack,
            _pop_torch_function_modes(torch),
        ),
    }


_TABLES: dict[bool, dict[str, Switch]] = {}


def _switches() -> dict[str, Switch]:
    """The switches to read: PyTorch's too once it is imported (each table made once)."""
    torch = sys.modules.get("torch")
    table = _TABLES.get(torch is not None)
    if table is None:
        table = {**EMBER_SWITCHES, **PROCESS_SWITCHES}
        if torch is not None:
            table.update(_torch_switches(torch))
        _TABLES[torch is not None] = table
    return table


def snapshot() -> dict[str, object]:
    """Every switch's value now."""
    return {name: read() for name, (read, _) in _switches().items()}


def changed_since(before: dict[str, object]) -> list[str]:
    """The switches whose value differs from ``before``, each put back as it was; one line per
    switch saying what it was and what the test left."""
    lines = []
    for name, (read, write) in _switches().items():
        if name not in before:
            continue  # (PyTorch imported during the test: its switches start from there)
        now = read()
        if now != before[name]:
            lines.append(f"{name}: was {_shown(name, before[name], now)}")
            write(before[name])
    return lines


def _shown(name: str, was, now) -> str:
    if isinstance(was, dict) and isinstance(now, dict):
        keys = sorted(k for k in was.keys() | now.keys() if was.get(k) != now.get(k))
        return ", ".join(f"{k}={was.get(k)!r}, left {k}={now.get(k)!r}" for k in keys)
    return f"{was!r}, left {now!r}"
