"""``x.view_as(x)`` / ``x.view(x.shape)`` make a new view (not x itself), ``_base`` names the
viewed tensor, and a write through a view counts one version, as PyTorch."""

import numpy as np
import torch

import ember


def _facts(lib):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    v = y.view_as(y)
    facts = [v is y, v._base is y, y.view(3) is y, y.view(3)._base is y, y._base is None]
    facts += [y[:]._base is y, y[:].view(3)._base is y]  # (the root of a chain)
    v.mul_(2)
    facts += [y._version, v._version, y.tolist()]
    (y * y).sum().backward()
    facts.append(x.grad.tolist())
    for view in (lambda t: t[:], lambda t: t.view(3), lambda t: t.unsqueeze(0)):
        y = x * 1
        w = view(y)
        w.add_(w)
        facts += [y._version, w._version]
    a = lib.ones(3)
    b = a.view_as(a)
    b.add_(1)
    facts += [a.tolist(), a._version, b._version]
    return facts


def test_view_as_and_views_follow_pytorch():
    assert _facts(ember) == _facts(torch)


def test_view_as_inside_a_captured_function():
    @ember.function
    def f(x):
        y = x * 2
        v = y.view_as(y)
        v.add_(1)
        return y

    np.testing.assert_allclose(f(ember.ones(3)).numpy(), np.full(3, 3.0))
