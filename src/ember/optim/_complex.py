"""Complex parameters, as PyTorch's optimizers take them: each update runs on the real form of
the parameter, its gradient and its state (``view_as_real``: real and imaginary parts as a last
axis of 2), so every rule treats the two parts as two real parameters (Adam's second moment
is the parts' squares, not ``|g|**2``), and the state stays complex (``exp_avg`` is complex,
as in PyTorch's state dicts). The update runs on real copies, written back into the complex
tensors with ``copy_`` afterwards: an in-place write through a real view is not something a
captured step can record (ember.function), a copy is."""

from __future__ import annotations

from ..ops import api as E
from ..ops._registry import TensorBase


def update_as_real(optimizer, group: dict, params: list) -> None:
    """``optimizer._update_group(group, params)`` with its complex parameters updated as real
    pairs, on copies written back (see the module docstring)."""
    reals, complex_params = [], []
    for p in params:
        if not p.dtype.is_complex:
            reals.append(p)
            continue
        real = E.view_as_real(p.detach()).clone()
        real.grad = E.view_as_real(p.grad.detach())
        state = optimizer.state.pop(p, {})
        optimizer.state[real] = {k: _real(v) for k, v in state.items()}
        reals.append(real)
        complex_params.append((p, real, state))
    try:
        optimizer._update_group(group, reals)
    finally:
        for p, real, state in complex_params:
            p.copy_(E.view_as_complex(real))
            for key, value in optimizer.state.pop(real, {}).items():
                if key not in state:  # created by this step on the real form
                    state[key] = _complex(value, real)
                elif isinstance(state[key], TensorBase) and state[key].dtype.is_complex:
                    state[key].copy_(E.view_as_complex(value))
            optimizer.state[p] = state


def _real(value):
    if isinstance(value, TensorBase) and value.dtype.is_complex:
        return E.view_as_real(value).clone()
    return value


def _complex(value, real):
    if isinstance(value, TensorBase) and tuple(value.shape) == tuple(real.shape) and value.ndim:
        return E.view_as_complex(value.contiguous())
    return value
