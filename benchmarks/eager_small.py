"""The ``small`` group of benchmarks/eager_ops.py: the per-call cost of small eager ops
(reductions along a dim, pointwise updates in place, selections, views, copies, conversions)
at n = 1, 100 and 10,000 elements, each on inputs without and with ``requires_grad``
(forward only: the ``grad`` cases measure the tape's record, not a backward).

A case is ``"<op> n=<n>"`` or ``"<op> n=<n> grad"``; in-place ops have no ``grad`` case (a
leaf that requires grad refuses them; optimizers run them under no_grad, as here). Each case's
result is checked against PyTorch's on the same inputs before it is timed, so both sides do
the same work; the in-place updates are chosen to stay finite over millions of calls.
"""

from __future__ import annotations

import numpy as np

import ember

SIZES = (1, 100, 10_000)


def _shape(n: int) -> tuple:
    """A 2-d shape of n elements (square where n is a square), so dim ops have a dim 1."""
    side = int(round(n**0.5))
    return (side, n // side)


def _ops(torch):
    """name -> (function of (lib, x, y, mask, out, scalar) for ember and torch alike,
    in place?): x, y, mask of n elements, out a tensor the in-place ops update, scalar 0-d."""
    return {
        "max(dim)": (lambda lib, x, y, m, o, s: x.max(1), False),
        "argmax": (lambda lib, x, y, m, o, s: x.argmax(1), False),
        "mean(dim)": (lambda lib, x, y, m, o, s: x.mean(1), False),
        "sum(dim)": (lambda lib, x, y, m, o, s: x.sum(1), False),
        "sigmoid": (lambda lib, x, y, m, o, s: lib.sigmoid(x), False),
        "gt": (lambda lib, x, y, m, o, s: x > y, False),
        "eq scalar": (lambda lib, x, y, m, o, s: x == 0.5, False),
        "where": (lambda lib, x, y, m, o, s: lib.where(m, x, y), False),
        "masked_fill": (lambda lib, x, y, m, o, s: x.masked_fill(m, 0.0), False),
        "stack": (lambda lib, x, y, m, o, s: lib.stack([x, y]), False),
        "clone": (lambda lib, x, y, m, o, s: x.clone(), False),
        "detach": (lambda lib, x, y, m, o, s: x.detach(), False),
        "zeros_like": (lambda lib, x, y, m, o, s: lib.zeros_like(x), False),
        "ones_like": (lambda lib, x, y, m, o, s: lib.ones_like(x), False),
        "view": (lambda lib, x, y, m, o, s: x.view(-1), False),
        "reshape": (lambda lib, x, y, m, o, s: x.reshape(x.shape[1], x.shape[0]), False),
        "transpose": (lambda lib, x, y, m, o, s: x.transpose(0, 1), False),
        "t": (lambda lib, x, y, m, o, s: x.t(), False),
        "permute": (lambda lib, x, y, m, o, s: x.permute(1, 0), False),
        "unsqueeze": (lambda lib, x, y, m, o, s: x.unsqueeze(0), False),
        "expand": (lambda lib, x, y, m, o, s: x[:1].expand(3, -1), False),
        "getitem slice": (lambda lib, x, y, m, o, s: x[:, :1], False),
        "getitem int": (lambda lib, x, y, m, o, s: x[0], False),
        "item": (lambda lib, x, y, m, o, s: s.item(), False),
        "mul_": (lambda lib, x, y, m, o, s: o.mul_(y), True),
        "div_": (lambda lib, x, y, m, o, s: o.div_(y), True),
        "mul_ scalar": (lambda lib, x, y, m, o, s: o.mul_(1.0), True),
        "addcmul_": (lambda lib, x, y, m, o, s: o.addcmul_(x, y, value=1e-9), True),
        "addcdiv_": (lambda lib, x, y, m, o, s: o.addcdiv_(x, y, value=1e-9), True),
        "lerp_": (lambda lib, x, y, m, o, s: o.lerp_(y, 0.5), True),
    }


def _arrays(n: int):
    r = np.random.default_rng(n)
    shape = _shape(n)
    x = r.standard_normal(shape).astype(np.float32)
    # y: ones, so mul_/div_ by it and lerp_ to it keep values finite however often they run
    y = np.ones(shape, np.float32)
    mask = r.random(shape) < 0.5
    return x, y, mask


def _same(name, e, t) -> None:
    if isinstance(t, (int, float, bool)):
        if not np.isclose(e, t, rtol=1e-5, atol=1e-6):
            raise AssertionError(f"{name}: ember {e} != torch {t}")
        return
    if isinstance(t, tuple):
        for a, b in zip(e, t):
            _same(name, a, b)
        return
    if e.dtype.itemsize != t.dtype.itemsize or tuple(e.shape) != tuple(t.shape):
        raise AssertionError(f"{name}: ember {e.dtype} {tuple(e.shape)} vs {t.dtype} {t.shape}")
    np.testing.assert_allclose(
        e.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name
    )


def small_cases():
    """name -> (ember call, torch call), checked against each other once."""
    import torch

    cases = {}
    for name, (fn, inplace) in _ops(torch).items():
        for n in SIZES:
            for grad in (False, True) if not inplace else (False,):
                x, y, mask = _arrays(n)
                ex, ey = (ember.tensor(a, requires_grad=grad) for a in (x, y))
                tx, ty = (torch.tensor(a, requires_grad=grad) for a in (x, y))
                em, tm = ember.tensor(mask), torch.tensor(mask)
                eo, to = ember.tensor(x.copy()), torch.tensor(x.copy())
                first = x.reshape(-1)[0]
                es = ember.tensor(first, requires_grad=grad)
                ts = torch.tensor(first, requires_grad=grad)
                label = f"{name} n={n}" + (" grad" if grad else "")
                _same(label, fn(ember, ex, ey, em, eo, es), fn(torch, tx, ty, tm, to, ts))

                def e(fn=fn, a=(ember, ex, ey, em, eo, es), inplace=inplace):
                    if inplace:
                        with ember.no_grad():
                            return fn(*a)
                    return fn(*a)

                def t(fn=fn, a=(torch, tx, ty, tm, to, ts), inplace=inplace):
                    if inplace:
                        with torch.no_grad():
                            return fn(*a)
                    return fn(*a)

                cases[label] = (e, t)
    return cases
