"""The registry conformance harness.

Each ``samples_*.py`` module in this folder defines ``SAMPLES``: a list of `Sample`s, each a
small call of ember's public API on NumPy inputs, optionally with the same call in PyTorch.
``test_conformance.py`` runs every sample and checks, for every primitive that ran:

* its shape/dtype rule agrees with its kernel (float64 and float32 inputs), via
  ``ops._registry.conformance``;
* gradients equal central finite differences in float64 (for samples with ``grad=True``);
* forward values and gradients equal PyTorch's (when torch is importable and ``torch_fn`` given);

and that every registered op ran forward, and every op with a VJP had its VJP checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import ember
from ember.ops import _registry

try:
    import torch
except ImportError:  # the peer comparisons skip with this reason
    torch = None

TORCH_MISSING = "PyTorch is not installed (pip install torch==2.13.0 --index-url ...cpu)"


@dataclass
class Sample:
    name: str
    fn: Callable
    inputs: tuple
    torch_fn: Callable | None = None
    grad: bool = True
    nondiff: tuple = ()  # float inputs that are not differentiated (e.g. targets)
    rtol: float = 1e-5
    atol: float = 1e-6
    kwargs: dict = field(default_factory=dict)
    float32: bool = True  # also run forward on float32 inputs (dtype preservation)
    fd: bool = True  # check the gradient by finite differences (off at kinks/ties)
    fd_eps: float = 1e-6
    torch_grad: bool = True  # compare gradients with PyTorch (off where torch has none)

    def __repr__(self) -> str:
        return self.name


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def away_from(values: np.ndarray, points=(0.0,), margin: float = 0.05) -> np.ndarray:
    """Nudge values off the kinks of non-smooth functions so finite differences are valid."""
    values = values.copy()
    for p in points:
        close = np.abs(values - p) < margin
        values[close] = p + np.where(values[close] >= p, margin, -margin) * 2
    return values


def _as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def diff_indices(sample: Sample, arrays) -> list[int]:
    return [
        i
        for i, a in enumerate(arrays)
        if isinstance(a, np.ndarray) and a.dtype.kind == "f" and i not in sample.nondiff
    ]


def _ember_inputs(arrays, diff, requires_grad=True):
    return [
        ember.tensor(a, requires_grad=requires_grad and i in diff)
        if isinstance(a, np.ndarray)
        else a
        for i, a in enumerate(arrays)
    ]


def ember_forward(sample: Sample, arrays, requires_grad=False):
    diff = diff_indices(sample, arrays)
    tensors = _ember_inputs(arrays, diff, requires_grad)
    return tensors, _as_tuple(sample.fn(*tensors, **sample.kwargs))


def cotangents(outs, seed=1):
    r = rng(seed)
    return [r.standard_normal(o.shape) if o.dtype.is_floating_point else None for o in outs]


def scalar_objective(outs, cots):
    total = 0.0
    for o, c in zip(outs, cots):
        if c is not None:
            total = total + (o * ember.tensor(c, dtype=o.dtype)).sum()
    return total


def ember_gradients(sample: Sample, arrays, cots=None):
    tensors, outs = ember_forward(sample, arrays, requires_grad=True)
    cots = cotangents(outs) if cots is None else cots
    objective = scalar_objective(outs, cots)
    diff = diff_indices(sample, arrays)
    wrt = [tensors[i] for i in diff]
    grads = ember.autograd.grad(objective, wrt, allow_unused=True)
    return (
        outs,
        cots,
        [np.zeros_like(arrays[i]) if g is None else g.numpy() for i, g in zip(diff, grads)],
    )


def finite_differences(sample: Sample, arrays, cots, eps=1e-6):
    diff = diff_indices(sample, arrays)

    def objective(values):
        with ember.no_grad():
            _, outs = ember_forward(sample, values)
            return sum(
                float((o.detach().numpy().astype(np.float64) * c).sum())
                for o, c in zip(outs, cots)
                if c is not None
            )

    result = []
    for i in diff:
        grad = np.zeros_like(arrays[i], dtype=np.float64)
        flat = grad.reshape(-1)
        for j in range(arrays[i].size):
            plus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
            minus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
            plus[i].reshape(-1)[j] += eps
            minus[i].reshape(-1)[j] -= eps
            flat[j] = (objective(plus) - objective(minus)) / (2 * eps)
        result.append(grad)
    return result


def torch_run(sample: Sample, arrays, cots):
    diff = diff_indices(sample, arrays)
    tensors = [
        torch.tensor(a, requires_grad=i in diff and sample.grad and sample.torch_grad)
        if isinstance(a, np.ndarray)
        else a
        for i, a in enumerate(arrays)
    ]
    outs = _as_tuple(sample.torch_fn(*tensors, **sample.kwargs))
    grads = None
    if sample.grad and sample.torch_grad and diff:
        objective = sum(
            (o * torch.tensor(c, dtype=o.dtype)).sum() for o, c in zip(outs, cots) if c is not None
        )
        wrt = [tensors[i] for i in diff]
        grads = torch.autograd.grad(objective, wrt, allow_unused=True)
        grads = [np.zeros_like(arrays[i]) if g is None else g.numpy() for i, g in zip(diff, grads)]
    return [o.detach().numpy() for o in outs], grads


class recording:
    """Install the registry's conformance recorder for a block."""

    def __enter__(self):
        self.previous = _registry.conformance
        _registry.conformance = self.record = _registry.Conformance()
        return self.record

    def __exit__(self, *exc):
        _registry.conformance = self.previous
        return False
