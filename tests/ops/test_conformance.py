"""One conformance test parametrized over the whole op registry (see harness.py)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.ops import REGISTRY

from .harness import (
    TORCH_MISSING,
    Sample,
    cotangents,
    diff_indices,
    ember_forward,
    ember_gradients,
    finite_differences,
    recording,
    torch,
    torch_run,
)

# the last test of this file checks what its other tests reached: under pytest-xdist (the
# suite's default) they all run in one worker, in file order (--dist loadgroup)
pytestmark = pytest.mark.xdist_group("test_conformance")

_HERE = Path(__file__).parent
SAMPLES: list[Sample] = []
for _info in sorted(pkgutil.iter_modules([str(_HERE)]), key=lambda m: m.name):
    if _info.name.startswith("samples_"):
        SAMPLES += importlib.import_module(f"{__package__}.{_info.name}").SAMPLES

_FORWARD_SEEN: set[str] = set()
_VJP_SEEN: set[str] = set()


def _float32(arrays):
    return [
        a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == np.float64 else a
        for a in arrays
    ]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.name)
def test_rule_agrees_with_kernel(sample):
    with recording() as rec:
        ember_forward(sample, sample.inputs)
        if sample.float32:
            ember_forward(sample, _float32(sample.inputs))
    _FORWARD_SEEN.update(rec.forward)


@pytest.mark.parametrize("sample", [s for s in SAMPLES if s.grad], ids=lambda s: s.name)
def test_gradient_matches_finite_differences(sample):
    with recording() as rec:
        outs, cots, grads = ember_gradients(sample, sample.inputs)
    _VJP_SEEN.update(rec.vjp)
    _FORWARD_SEEN.update(rec.forward)
    if not sample.fd:
        return  # ties or kinks: the VJP is compared with PyTorch's convention instead
    expected = finite_differences(sample, sample.inputs, cots, eps=sample.fd_eps)
    for k, (g, e) in enumerate(zip(grads, expected)):
        np.testing.assert_allclose(
            g, e, rtol=1e-4, atol=1e-5, err_msg=f"{sample.name}: gradient of input {k}"
        )


@pytest.mark.parametrize(
    "sample", [s for s in SAMPLES if s.torch_fn is not None], ids=lambda s: s.name
)
def test_matches_pytorch(sample):
    if torch is None:
        pytest.skip(TORCH_MISSING)
    if sample.grad:
        outs, cots, grads = ember_gradients(sample, sample.inputs)
    else:
        _, outs = ember_forward(sample, sample.inputs)
        cots, grads = cotangents(outs), None
    t_outs, t_grads = torch_run(sample, sample.inputs, cots)
    assert len(outs) == len(t_outs), f"{sample.name}: output count differs from PyTorch"
    for k, (o, t) in enumerate(zip(outs, t_outs)):
        assert o.shape == tuple(t.shape), f"{sample.name}: output {k} shape"
        np.testing.assert_allclose(
            o.detach().numpy(),
            t,
            rtol=sample.rtol,
            atol=sample.atol,
            err_msg=f"{sample.name}: output {k} vs PyTorch",
        )
    if grads is not None and t_grads is not None:
        for k, (g, t) in enumerate(zip(grads, t_grads)):
            np.testing.assert_allclose(
                g,
                t,
                rtol=sample.rtol,
                atol=sample.atol,
                err_msg=f"{sample.name}: gradient {k} vs PyTorch",
            )


def _captured(sample):
    """(eager function, tensors, positions of the array inputs) for ``sample``: the function
    takes its array inputs as tensors; its other inputs (Python values) are baked in, as a
    trace bakes them."""
    positions = [i for i, a in enumerate(sample.inputs) if isinstance(a, np.ndarray)]

    def call(*tensors):
        args = list(sample.inputs)
        for i, t in zip(positions, tensors):
            args[i] = t
        out = sample.fn(*args, **sample.kwargs)
        return tuple(out) if isinstance(out, (tuple, list)) else out

    return call, [ember.tensor(sample.inputs[i]) for i in positions], positions


_DRAWS = ("random", "dropout", "rand", "bernoulli", "normal", "uniform")
# results whose shape depends on the input's values (a boolean mask's count, nonzero, one_hot
# without num_classes): a static graph cannot hold them, so capture refuses with TraceError
# (indexing by a mask that is a NumPy constant of the function, getitem/mask and
# index_put/setitem-mask, traces: the graph holds the constant, so its count is host data known
# while tracing, and the result's shape is fixed)
_VALUE_SHAPED = (
    "getitem/bool-tensor",
    "masked_select",
    "nonzero",
    "one_hot",
    "unique",
)


@pytest.mark.parametrize(
    "sample", [s for s in SAMPLES if not s.name.startswith(_DRAWS)], ids=lambda s: s.name
)
def test_traced_and_scripted_agree_with_eager(sample):
    """Every sample, captured by ``ember.trace`` and by ``ember.trace(ember.script(...))``,
    computes what it computes eagerly; with graph autodiff (``ember.grad`` traced), its
    gradients equal the eager tape's."""
    call, tensors, positions = _captured(sample)
    eager = call(*tensors)
    eager = eager if isinstance(eager, tuple) else (eager,)
    for how, fn in (("traced", call), ("scripted", ember.script(call))):
        if sample.name.startswith(_VALUE_SHAPED):
            with pytest.raises(ember.TraceError, match="a graph does not have while it is built"):
                ember.trace(fn, *tensors)
            continue
        got = ember.trace(fn, *tensors)(*tensors)
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(eager), f"{sample.name}: {how} output count"
        for k, (g, e) in enumerate(zip(got, eager)):
            np.testing.assert_allclose(
                g.detach().numpy(),
                e.detach().numpy(),
                rtol=1e-6,
                atol=1e-7,
                err_msg=f"{sample.name}: {how} {k}",
            )
    if not sample.grad or sample.name.startswith(_VALUE_SHAPED):
        return
    differentiated = set(diff_indices(sample, sample.inputs))
    diff = [k for k, i in enumerate(positions) if i in differentiated]
    if not diff:
        return
    cots = cotangents(eager)

    def objective(*ts):
        out = call(*ts)
        out = out if isinstance(out, tuple) else (out,)
        total = 0.0
        for o, c in zip(out, cots):
            if c is not None:
                total = total + (o * ember.tensor(c, dtype=o.dtype)).sum()
        return total

    graph_grads = ember.trace(ember.grad(objective, argnums=tuple(diff)), *tensors)(*tensors)
    _, _, tape_grads = ember_gradients(sample, sample.inputs, cots)
    for k, (g, e) in enumerate(zip(graph_grads, tape_grads)):
        np.testing.assert_allclose(
            g.numpy(), e, rtol=1e-6, atol=1e-7, err_msg=f"{sample.name}: graph gradient {k}"
        )


def test_every_op_is_covered():
    """Runs last in this module: every registered op ran forward, every VJP was checked."""
    if not _FORWARD_SEEN:
        pytest.skip("run together with the parametrized conformance tests")
    missing = sorted(set(REGISTRY) - _FORWARD_SEEN)
    assert not missing, f"ops with no conformance sample: {missing}"
    with_vjp = {name for name, op in REGISTRY.items() if op.vjp is not None}
    unchecked = sorted(with_vjp - _VJP_SEEN)
    assert not unchecked, f"ops whose VJP no sample checks by finite differences: {unchecked}"


def _runner_graphs(sample):
    """The graphs of ``sample`` the default executor may hand to the C graph runner: its traced
    forward and, where it has gradients, its traced gradient (``ember.grad`` of the outputs
    against fixed cotangents), with their input arrays."""
    call, tensors, positions = _captured(sample)
    arrays = [t.numpy() for t in tensors]
    yield "forward", ember.trace(call, *tensors).graph, arrays
    if not sample.grad:
        return
    differentiated = set(diff_indices(sample, sample.inputs))
    diff = tuple(k for k, i in enumerate(positions) if i in differentiated)
    if not diff:
        return
    eager = call(*tensors)
    cots = cotangents(eager if isinstance(eager, tuple) else (eager,))

    def objective(*ts):
        out = call(*ts)
        total = 0.0
        for o, c in zip(out if isinstance(out, tuple) else (out,), cots):
            if c is not None:
                total = total + (o * ember.tensor(c, dtype=o.dtype)).sum()
        return total

    yield "gradient", ember.trace(ember.grad(objective, argnums=diff), *tensors).graph, arrays


@pytest.mark.parametrize(
    "sample",
    [s for s in SAMPLES if not s.name.startswith(_DRAWS + _VALUE_SHAPED)],
    ids=lambda s: s.name,
)
def test_the_c_graph_runner_computes_what_generated_code_computes(sample):
    """Wherever a sample's graph has a C program (every node a C step), the C graph runner on
    one and two threads gives generated code's results: the default executor may choose it for
    any graph (where it measures faster), so a step that is wrong for some shape is a wrong
    answer on some machine or load (broadcast_to's copy step once read past its input)."""
    from ember.runtime import cgraph
    from ember.runtime.codegen import compile_graph

    for what, graph, arrays in _runner_graphs(sample):
        steps = cgraph.c_steps(graph)
        if steps is None:
            continue
        want = compile_graph(graph)(*[np.array(a, copy=True) for a in arrays])
        for threads in (1, 2):
            program = cgraph.CGraphProgram(graph, steps, None, threads)
            got = program(*[np.array(a, copy=True) for a in arrays])
            assert len(got) == len(want)
            for k, (g, w) in enumerate(zip(got, want)):
                w = np.asarray(w)
                assert g.shape == w.shape and g.dtype == w.dtype, f"{what} output {k}"
                finite = np.abs(w[np.isfinite(w)]) if w.dtype.kind == "f" else np.abs(w)
                scale = float(finite.max()) if finite.size else 0.0
                np.testing.assert_allclose(
                    g, w, rtol=1e-5, atol=1e-5 * scale, err_msg=f"{sample.name}: {what} {k}"
                )
