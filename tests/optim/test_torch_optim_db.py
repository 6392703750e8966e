"""PyTorch's own optimizer configurations (``torch.testing._internal.common_optimizers.optim_db``:
every optimizer's argument combinations its developers test: weight decay, momentum, nesterov,
amsgrad, maximize, tensor learning rates, decoupled decay, line searches...) run on ember's
optimizers, real and complex parameters: five steps' parameters equal PyTorch's in float64."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")  # (PyTorch's testing package imports it)

pytestmark = pytest.mark.xdist_group("test_torch_module_db")  # (one import of the database)


def _configurations():
    from torch.testing._internal.common_optimizers import optim_db

    # importing PyTorch's testing package freezes torch.backends' flags (disable_global_flags),
    # which a later test's PyTorch program in this process sets (cudnn.benchmark): unfreeze
    torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True

    for info in optim_db:
        for config in info.optim_inputs_func(device="cpu"):
            for complex_params in (False, True) if info.supports_complex else (False,):
                yield info, config, complex_params


def _trajectory(lib, cls, kwargs, closure_step, complex_params):
    rng = np.random.default_rng(0)
    dtype = np.complex128 if complex_params else np.float64
    starts = [
        (rng.standard_normal(s) + (1j * rng.standard_normal(s) if complex_params else 0)).astype(
            dtype
        )
        for s in ((4, 3), (3,))
    ]
    data = rng.standard_normal((6, 4)).astype(dtype)
    params = [lib.tensor(a, requires_grad=True) for a in starts]
    optimizer = cls(params, **kwargs)
    x = lib.tensor(data)

    def closure():
        optimizer.zero_grad()
        out = x @ params[0] + params[1]
        loss = (out.abs() ** 2).mean() + out.real.sum() * 0.1
        loss.backward()
        return loss

    steps = []
    for _ in range(5):
        if closure_step:
            optimizer.step(closure)
        else:
            closure()
            optimizer.step()
        steps.append(np.concatenate([p.detach().numpy().ravel() for p in params]))
    return np.array(steps)


def test_every_pytorch_optimizer_configuration_steps_as_pytorch_steps():
    checked, failures = 0, []
    for info, config, complex_params in _configurations():
        name = info.optim_cls.__name__
        kwargs = {
            k: float(v) if isinstance(v, torch.Tensor) and v.numel() == 1 else v
            for k, v in config.kwargs.items()
        }
        args = (kwargs, info.step_requires_closure, complex_params)
        try:
            want = _trajectory(torch, info.optim_cls, *args)
        except Exception:  # (a configuration PyTorch itself refuses on this device)
            continue
        label = f"{name} [{config.desc}]{' complex' if complex_params else ''} {kwargs}"
        try:
            got = _trajectory(ember, getattr(ember.optim, name), *args)
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
        except Exception as exc:
            failures.append(f"{label}: {type(exc).__name__}: {str(exc)[:300]}")
        checked += 1
    assert checked > 100, checked
    assert not failures, "\n".join(failures)
