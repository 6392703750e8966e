"""Random small programs, differentiated: ``ember.function`` against eager ember, values and
gradients, and which gradients exist (None for an input no gradient reaches, as PyTorch), and
whether the result requires grad at all (a detached result does not). Each program chains 1-6
steps drawn from unary ops, views, reductions kept to shape, detaches and binary ops with the
inputs; found: a gradient equal to the cotangent (``t + 1``) lost in the AOT partition, zeros
instead of None for unused inputs, a detached result requiring grad, and generated code writing
a gradient into a read-only broadcast view."""

import random

import numpy as np
import pytest

import ember

UNARY = [
    lambda t: t + 1.0,
    lambda t: t * 2.0,
    lambda t: 1.0 - t,
    lambda t: t.sin(),
    lambda t: t.exp() * 0.1,
    lambda t: t.relu(),
    lambda t: t.tanh(),
    lambda t: t.detach(),
    lambda t: t.abs(),
    lambda t: -t,
    lambda t: t.sigmoid(),
    lambda t: t * t,
    lambda t: t.clamp(-0.5, 0.5),
    lambda t: t / 2.0,
    lambda t: t.transpose(0, 1),
    lambda t: t.reshape(-1).reshape(t.shape),
    lambda t: t[::-1],
    lambda t: t.sum(0, keepdim=True).expand_as(t),
    lambda t: t.mean(1, keepdim=True) + t,
    lambda t: t.softmax(-1),
    lambda t: t.cumsum(0),
    lambda t: ember.where(t > 0, t, 0.5 * t),
    lambda t: t.flip(1),
    lambda t: t.max(dim=1, keepdim=True).values + 0 * t,
    lambda t: t.t() @ t,
    lambda t: t.clone(),
    lambda t: t.pow(2),
    lambda t: t.log_softmax(0),
    lambda t: (t * 0).detach() + t,
]
BINARY = [
    lambda a, b: a + b,
    lambda a, b: a * b,
    lambda a, b: a - b,
    lambda a, b: ember.maximum(a, b),
    lambda a, b: a @ b.t(),
    lambda a, b: ember.cat([a, b], 0)[: a.shape[0]],
    lambda a, b: ember.stack([a, b]).sum(0),
    lambda a, b: ember.where(a > b, a, b),
]
REDUCE = [
    lambda t: t.sum(),
    lambda t: (t * t).mean(),
    lambda t: t.abs().max(),
    lambda t: t.logsumexp(dim=(0, 1)),
]


def _program(seed):
    rng = random.Random(seed)
    steps = [
        ("b", rng.randrange(len(BINARY)), rng.randrange(3))
        if rng.random() < 0.3
        else ("u", rng.randrange(len(UNARY)))
        for _ in range(rng.randint(1, 6))
    ]
    two_outputs, reduce = rng.random() < 0.3, REDUCE[rng.randrange(len(REDUCE))]

    def fn(x, y, w):
        inputs, t = (x, y, w), x
        for step in steps:
            t = UNARY[step[1]](t) if step[0] == "u" else BINARY[step[1]](t, inputs[step[2]])
        return (reduce(t), t) if two_outputs else reduce(t)

    return fn, steps, rng.choice([3, 4])


def _run(fn, arrays):
    x, y, w = (ember.tensor(a, requires_grad=True) for a in arrays)
    out = fn(x, y, w)
    loss = out[0] + out[1].sum() if isinstance(out, tuple) else out
    if not loss.requires_grad:
        return ("no grad",)
    loss.backward()
    grads = [None if v.grad is None else v.grad.numpy() for v in (x, y, w)]
    return (loss.detach().numpy(), *grads)


@pytest.mark.parametrize("chunk", range(4))
def test_random_programs_differentiate_as_eager(chunk):
    for seed in range(chunk * 12, chunk * 12 + 12):
        fn, steps, n = _program(seed)
        arrays = np.random.default_rng(seed).standard_normal((3, n, n))
        want, got = _run(fn, arrays), _run(ember.function(fn), arrays)
        assert len(want) == len(got), (seed, steps)
        for k, (a, b) in enumerate(zip(want, got)):
            assert (a is None) == (b is None), (seed, steps, k)
            if a is not None and not isinstance(a, str):
                np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-9, err_msg=f"{seed} {steps}")
