"""Whole PyTorch programs run twice: on PyTorch, and on ember as ``torch`` (the same source,
given the library as an argument), eagerly and with the steps the program marks wrapped in
``ember.function``. Weights come from PyTorch's construction (``ctx.init`` records its
state_dict and loads it into ember's model), data from NumPy; every value the program returns
(losses, outputs, gradients, state_dicts, plain Python values) is compared.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")


class Ctx:
    """What a program asks of its runner: shared initial weights, tensors from NumPy, and which
    functions to capture (only on ember, only in the captured run)."""

    def __init__(self, lib, store: dict, capture: bool = False):
        self.lib, self.store, self.capture = lib, store, capture
        self.is_torch = lib is torch

    def init(self, model, key: str = "model"):
        if self.is_torch:
            self.store[key] = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
        else:
            result = model.load_state_dict({k: ember.tensor(v) for k, v in self.store[key].items()})
            assert not result.missing_keys and not result.unexpected_keys, result
        return model

    def t(self, array, **kwargs):
        return self.lib.tensor(np.asarray(array), **kwargs)

    def fn(self, f):
        return ember.function(f) if self.capture and not self.is_torch else f


def to_numpy(value):
    if isinstance(value, (torch.Tensor, ember.Tensor)):
        return value.detach().numpy()
    if isinstance(value, (list, tuple)):
        return [to_numpy(v) for v in value]
    if isinstance(value, dict):
        return {k: to_numpy(v) for k, v in value.items()}
    if isinstance(value, (torch.dtype, ember.dtype)):
        return str(value).split(".")[-1]
    return value


def _compare(expected, actual, path: str, rtol: float, atol: float, errors: list) -> None:
    if isinstance(expected, dict):
        if set(expected) != set(actual):
            errors.append(f"{path}: keys {sorted(expected)} != {sorted(actual)}")
            return
        for k in expected:
            _compare(expected[k], actual[k], f"{path}.{k}", rtol, atol, errors)
    elif isinstance(expected, list):
        if not isinstance(actual, list) or len(expected) != len(actual):
            errors.append(f"{path}: {len(expected)} items != {actual!r:.80}")
            return
        for i, (e, a) in enumerate(zip(expected, actual)):
            _compare(e, a, f"{path}[{i}]", rtol, atol, errors)
    elif isinstance(expected, np.ndarray):
        if not isinstance(actual, np.ndarray):
            errors.append(f"{path}: an array expected, got {type(actual).__name__}")
        elif expected.shape != actual.shape or expected.dtype != actual.dtype:
            errors.append(
                f"{path}: {expected.dtype}{expected.shape} != {actual.dtype}{actual.shape}"
            )
        elif expected.dtype.kind in "fc":
            if not np.allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True):
                diff = np.nanmax(np.abs(actual.astype(float) - expected.astype(float)))
                errors.append(f"{path}: max difference {diff:.3g}")
        elif not np.array_equal(expected, actual):
            errors.append(f"{path}: {expected.ravel()[:8]} != {actual.ravel()[:8]}")
    elif isinstance(expected, float):
        if not isinstance(actual, float) or not np.isclose(
            actual, expected, rtol=rtol, atol=atol, equal_nan=True
        ):
            errors.append(f"{path}: {expected!r} != {actual!r}")
    elif expected != actual or type(expected) is not type(actual):
        errors.append(f"{path}: {expected!r} != {actual!r}")


def check_program(program, capture: bool = False, rtol: float = 1e-4, atol: float = 1e-5):
    """Run ``program(lib, ctx)`` on PyTorch, then on ember (``capture``: ctx.fn captures), and
    assert that everything it returns agrees."""
    store: dict = {}
    torch.manual_seed(0)
    expected = to_numpy(program(torch, Ctx(torch, store)))
    ember.manual_seed(0)
    actual = to_numpy(program(ember, Ctx(ember, store, capture)))
    errors: list = []
    _compare(expected, actual, "result", rtol, atol, errors)
    assert not errors, "\n".join(errors[:20])
