"""ember.compile's automatic dynamic shapes through ``unfold`` (a symbolic number of windows,
its gradient added back by padding), ``arange(x.size(1))`` and reflect padding: one symbolic
program for the varying sizes (no fallback to a program per shape), values and gradients as
PyTorch's eager ones."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.capture.automatic_dynamic as automatic

torch = pytest.importorskip("torch")


@pytest.fixture
def fallbacks(monkeypatch):
    """Counts the symbolic traces that failed (a program per shape from then on)."""
    seen = []
    run = automatic.AutomaticDynamic._run

    def counting(self, function, args, kwargs):
        before = self.failed
        try:
            return run(self, function, args, kwargs)
        finally:
            if self.failed and not before:
                seen.append(function)

    monkeypatch.setattr(automatic.AutomaticDynamic, "_run", counting)
    return seen


@pytest.mark.parametrize("dim,size,step", [(1, 3, 2), (1, 4, 1), (0, 2, 3), (-1, 5, 5)])
def test_unfold_over_a_symbolic_length(fallbacks, dim, size, step):
    def program(m):
        def f(x):
            return ((x.unfold(dim, size, step) * 1.5) ** 2).sum(-1)

        return f

    compiled = ember.compile(program(ember), fullgraph=True)
    for length in (11, 13, 16):
        shape = (length, 3) if dim == 0 else (2, length)
        x = np.random.RandomState(length).randn(*shape)
        tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
        want, got = program(torch)(tx), compiled(ex)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
        want.sum().backward()
        got.sum().backward()
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    assert not fallbacks


def test_arange_of_a_size_and_reflect_padding(fallbacks):
    def program(m):
        def f(x):
            framed = m.nn.functional.pad(x, (2, 2), mode="reflect")
            return framed * m.arange(framed.size(-1)) + m.arange(1, x.size(1) + 1).sum()

        return f

    compiled = ember.compile(program(ember), fullgraph=True)
    for length in (5, 7, 9):
        x = np.random.RandomState(length).randn(1, length, length).astype(np.float32)
        want = program(torch)(torch.tensor(x)).numpy()
        np.testing.assert_allclose(compiled(ember.tensor(x)).numpy(), want, rtol=1e-6)
    assert not fallbacks


def test_linspace_of_a_size(fallbacks):
    def program(m):
        def f(x):
            return x * m.linspace(-1.5, 2.0, x.size(1)) + m.linspace(0, 1, x.size(1) + 2)[1:-1]

        return f

    compiled = ember.compile(program(ember), fullgraph=True)
    for length in (5, 7, 12):
        x = np.random.RandomState(length).randn(2, length).astype(np.float32)
        want = program(torch)(torch.tensor(x)).numpy()
        np.testing.assert_array_equal(compiled(ember.tensor(x)).numpy(), want)
    assert not fallbacks
