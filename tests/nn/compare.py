"""Run an ember module and a PyTorch module with the same weights on the same inputs and compare
outputs, input gradients and parameter gradients.

The ember module receives the torch module's state_dict through a plain dict copy (the interface
under test), both in the requested dtype; the objective is ``sum(output * cotangent)`` over every
floating output with fixed random cotangents, so every output element contributes a gradient.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")

TORCH_DTYPES = {np.float32: torch.float32, np.float64: torch.float64}
EMBER_DTYPES = {np.float32: ember.float32, np.float64: ember.float64}


def copy_weights(e_module, t_module) -> None:
    """Load the torch module's state into the ember module with a plain dict copy."""
    state = {k: ember.tensor(v.detach().numpy()) for k, v in t_module.state_dict().items()}
    result = e_module.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []


def flat_outputs(out) -> list:
    """Tensors of a (possibly nested tuple) module output, in order, skipping None."""
    if out is None:
        return []
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in flat_outputs(item)]
    return [out]


def tolerances(dtype) -> dict:
    return {"rtol": 1e-9, "atol": 1e-10} if dtype is np.float64 else {"rtol": 1e-5, "atol": 1e-6}


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype, what: str, tol=None) -> None:
    tol = tol or tolerances(dtype)
    # float32: "within 1e-5 relative" judged against the tensor's scale, so a near-zero entry
    # computed by a different (equally valid) summation order does not fail on its own
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    np.testing.assert_allclose(
        actual, expected, rtol=tol["rtol"], atol=tol["atol"] * max(1.0, scale), err_msg=what
    )


def compare_module(
    e_module,
    t_module,
    inputs: list,
    dtype=np.float64,
    grad_inputs: bool = True,
    train: bool = False,
    call=None,
    tol: dict | None = None,
    load: bool = True,
) -> list:
    """Forward/backward both modules; returns the ember outputs. ``inputs`` are NumPy arrays
    (float arrays are cast to ``dtype`` and, with ``grad_inputs``, differentiated) or other
    values passed to both unchanged. ``call(module, *inputs)`` overrides ``module(*inputs)``;
    ``tol`` ({"rtol", "atol"}) overrides the dtype's tolerances; ``load=False`` keeps the
    ember module's own state (to check that state evolves like torch's)."""
    t_module = t_module.to(TORCH_DTYPES[dtype])
    e_module = e_module.to(EMBER_DTYPES[dtype])
    if load:
        copy_weights(e_module, t_module)
    t_module.train(train)
    e_module.train(train)
    call = call or (lambda m, *xs: m(*xs))

    def prepare(make):
        result = []
        for x in inputs:
            if isinstance(x, np.ndarray) and x.dtype.kind == "f":
                result.append(make(x.astype(dtype), grad_inputs))
            elif isinstance(x, np.ndarray):
                result.append(make(x, False))
            else:
                result.append(x)
        return result

    e_in = prepare(lambda a, g: ember.tensor(a, requires_grad=g))
    t_in = prepare(lambda a, g: torch.tensor(a, requires_grad=g))
    e_outs = flat_outputs(call(e_module, *e_in))
    t_outs = flat_outputs(call(t_module, *t_in))
    assert len(e_outs) == len(t_outs), "output count differs from PyTorch"
    rng = np.random.default_rng(7)
    e_obj, t_obj = 0.0, 0.0
    for k, (e, t) in enumerate(zip(e_outs, t_outs)):
        assert tuple(e.shape) == tuple(t.shape), f"output {k}: shape {e.shape} vs {t.shape}"
        # no dtype leaks: a float32 module computes float32 outputs, like torch
        assert str(e.dtype) == str(t.dtype).replace("torch.", "ember."), f"output {k}: dtype"
        assert_close(e.detach().numpy(), t.detach().numpy(), dtype, f"output {k}", tol)
        if e.dtype.is_floating_point and e.requires_grad:
            c = rng.standard_normal(e.shape).astype(dtype)
            e_obj = e_obj + (e * ember.tensor(c)).sum()
            t_obj = t_obj + (t * torch.tensor(c)).sum()
    if isinstance(e_obj, float):
        return e_outs
    e_obj.backward()
    t_obj.backward()
    for k, (e, t) in enumerate(zip(e_in, t_in)):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            assert e.grad is not None, f"input {k} got no gradient"
            assert e.grad.dtype == e.dtype, f"gradient of input {k}: dtype {e.grad.dtype}"
            assert_close(e.grad.numpy(), t.grad.numpy(), dtype, f"gradient of input {k}", tol)
    t_params = dict(t_module.named_parameters())
    e_params = dict(e_module.named_parameters())
    assert list(e_params) == list(t_params), "parameter names differ from PyTorch"
    for name, tp in t_params.items():
        ep = e_params[name]
        if tp.grad is None:
            assert ep.grad is None or not np.any(ep.grad.numpy()), f"{name}: unexpected gradient"
            continue
        assert ep.grad is not None, f"parameter {name} got no gradient"
        assert ep.grad.dtype == ep.dtype, f"gradient of {name}: dtype {ep.grad.dtype}"
        assert_close(ep.grad.numpy(), tp.grad.numpy(), dtype, f"gradient of {name}", tol)
    return e_outs


def same_state_layout(e_module, t_module) -> None:
    """state_dict keys (in order), shapes and dtypes identical to PyTorch's."""
    e_state, t_state = e_module.state_dict(), t_module.state_dict()
    assert list(e_state) == list(t_state)
    for key, t_value in t_state.items():
        assert tuple(e_state[key].shape) == tuple(t_value.shape), key
        assert str(e_state[key].dtype) == str(t_value.dtype).replace("torch.", "ember."), key
