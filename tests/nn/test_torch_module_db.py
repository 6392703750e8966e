"""PyTorch's own module samples (``torch.testing._internal.common_modules.module_db``: about
110 nn modules, each with constructor arguments and forward inputs chosen by PyTorch's
developers: unbatched inputs, odd sizes, every mode) run through ember's modules of the same
names with PyTorch's weights copied in: outputs, parameter gradients and input gradients must
equal PyTorch's in float64.

`EXPECTED` lists what still differs, each with its reason; an entry that starts passing fails
the test too, so the list stays true."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")  # (PyTorch's testing package imports it)

pytestmark = pytest.mark.xdist_group("test_torch_module_db")

SAMPLES_PER_MODE = 6

EXPECTED = {
    "nn.FractionalMaxPool3d": "an unbatched input with _random_samples of batch 2: PyTorch "
    "reads the first, ember refuses the shape",
}


@pytest.fixture(scope="module")
def module_db():
    from torch.testing._internal.common_modules import module_db

    # importing PyTorch's testing package freezes torch.backends' flags (disable_global_flags),
    # which a later test's PyTorch program in this process sets (cudnn.benchmark): unfreeze
    torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True

    return module_db


class _Unportable(Exception):
    """A sample argument with no plain-data counterpart (a PyTorch module instance)."""


def _ember(value):
    if isinstance(value, torch.nn.Module):
        raise _Unportable(type(value).__name__)
    name = getattr(value, "__name__", "")
    if callable(value) and getattr(torch.nn.functional, name, None) is value:
        return getattr(ember.nn.functional, name)  # (activation=F.gelu)
    if isinstance(value, torch.Tensor):
        t = ember.tensor(value.detach().numpy().copy())
        return t.requires_grad_(True) if value.requires_grad else t
    if isinstance(value, torch.dtype):
        return getattr(ember, str(value).split(".")[-1])
    if isinstance(value, (list, tuple)):
        return type(value)(_ember(v) for v in value)
    if isinstance(value, dict):
        return {k: _ember(v) for k, v in value.items()}
    return value


def _arrays(value):
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _arrays(v)]
    if value is None:
        return []
    if hasattr(value, "detach"):
        return [value.detach().numpy()]
    return [np.asarray(value)]


def _equal(got, want, what):
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9, equal_nan=True, err_msg=what)


def _check_sample(info, cls, sample, training, seed):
    args, kwargs = sample.constructor_input.args, sample.constructor_input.kwargs
    torch.manual_seed(0)
    theirs = info.module_cls(*args, **kwargs).to(torch.float64).train(training)
    ours = cls(*_ember(list(args)), **_ember(dict(kwargs))).to(ember.float64).train(training)
    inputs = sample.forward_input
    if inputs is None:
        return
    fa, fk = inputs.args, inputs.kwargs
    efa, efk = _ember(list(fa)), _ember(dict(fk))
    if info.is_lazy:  # (parameters exist after the first call)
        theirs(*[a.detach() if hasattr(a, "detach") else a for a in fa], **fk)
        ours(*_ember([a.detach() if hasattr(a, "detach") else a for a in fa]), **efk)
    state = theirs.state_dict()
    ours.load_state_dict({k: ember.tensor(v.numpy().copy()) for k, v in state.items()})
    want = theirs(*fa, **fk)
    got = ours(*efa, **efk)
    random = training and any(w in info.name for w in ("Dropout", "RReLU"))
    wants, gots = _arrays(want), _arrays(got)
    assert len(wants) == len(gots), "number of outputs"
    if random:
        return
    for i, (w, g) in enumerate(zip(wants, gots)):
        _equal(g, w, f"output {i}")
    outs_t = [o for o in (want if isinstance(want, (tuple, list)) else [want])]
    outs_t = [o for o in outs_t if isinstance(o, torch.Tensor) and o.requires_grad]
    outs_e = [o for o in (got if isinstance(got, (tuple, list)) else [got])]
    outs_e = [o for o in outs_e if hasattr(o, "requires_grad") and o.requires_grad]
    if not outs_t:
        return
    assert len(outs_t) == len(outs_e), "outputs that require grad"
    rng = np.random.default_rng(seed)
    grads = [rng.standard_normal(tuple(o.shape)) for o in outs_t]
    sum((o * torch.tensor(g)).sum() for o, g in zip(outs_t, grads)).backward()
    sum((o * ember.tensor(g)).sum() for o, g in zip(outs_e, grads)).backward()
    ours_params = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        q = ours_params[name]
        assert (p.grad is None) == (q.grad is None), f"gradient of {name}"
        if p.grad is not None:
            _equal(q.grad.numpy(), p.grad.numpy(), f"gradient of {name}")
    for i, (a, b) in enumerate(zip(fa, efa)):
        if isinstance(a, torch.Tensor) and a.requires_grad and a.is_leaf and a.grad is not None:
            _equal(b.grad.numpy(), a.grad.numpy(), f"gradient of input {i}")


def _check_module(info):
    cls = ember
    for part in info.name.split("."):
        cls = getattr(cls, part)
    checked = 0
    for training in (True, False):
        samples = info.module_inputs_func(
            info, device="cpu", dtype=torch.float64, requires_grad=True, training=training
        )
        for seed, sample in enumerate(samples[:SAMPLES_PER_MODE]):
            try:
                torch.manual_seed(0)
                info.module_cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
            except Exception:  # (a sample PyTorch itself refuses: its error inputs)
                continue
            try:
                _check_sample(info, cls, sample, training, seed)
            except _Unportable:
                continue
            except Exception as exc:
                raise AssertionError(
                    f"{info.name} ({'train' if training else 'eval'}, sample "
                    f"{sample.desc!r}): {type(exc).__name__}: {exc}"
                ) from exc
            checked += 1
    return checked


def test_every_pytorch_module_sample_runs_as_pytorch_runs_it(module_db):
    unexpected, fixed, checked = [], [], 0
    for info in module_db:
        try:
            checked += _check_module(info)
        except AssertionError as exc:
            if info.name not in EXPECTED:
                unexpected.append(str(exc)[:400])
            continue
        if info.name in EXPECTED:
            fixed.append(info.name)
    assert checked > 300, checked  # (the database was read: about 110 modules' samples)
    assert not unexpected, "\n".join(unexpected)
    assert not fixed, f"now equal to PyTorch: remove from EXPECTED: {fixed}"
