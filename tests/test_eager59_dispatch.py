"""The eager mode keeps, per signature, what runs a call (eager.py; `OpDef.runner_for`): the
op's NumPy kernel where its fast rule's gate surely declines the operands (small float32), so
such calls skip the gate, and `OpDef.run` (the fast rule tried) wherever the rule may apply."""

from __future__ import annotations

import numpy as np

import ember
from ember.ops._registry import REGISTRY, OpDef

ADD = REGISTRY["add"]


def test_small_operands_run_the_kernel_and_others_run_the_fast_rule():
    assert ADD.gate is not None
    classes, size = ADD.gate
    small = np.ones((4, 4), np.float32)
    assert ADD.runner_for([small, small]) is ADD.kernel
    assert ADD.runner_for([small, np.float32(2)]) is ADD.kernel
    # a half-precision operand, a large one, or operands broadcasting to a large result: the
    # fast rule may take them
    half = np.ones((4, 4), ember.float16.np)
    assert ADD.runner_for([half, half]) is ADD.run
    big = np.ones(size, np.float32)
    assert ADD.runner_for([big, big]) is ADD.run
    side = int(np.sqrt(size)) + 1
    column, row = np.ones((side, 1), np.float32), np.ones((1, side), np.float32)
    assert ADD.runner_for([column, row]) is ADD.run
    # an op without a gate: always `run`
    matmul = REGISTRY["matmul"]
    assert matmul.gate is None and matmul.runner_for([small, small]) is matmul.run


def test_the_kept_runner_gives_run_s_results():
    rng = np.random.default_rng(0)
    for shape in [(3, 5), (), (1, 7), (1 << 18,)]:
        for dtype in (np.float32, np.float64, ember.float16.np):
            a = rng.standard_normal(shape).astype(dtype)
            b = rng.standard_normal(shape).astype(dtype)
            x, y = ember.tensor(a), ember.tensor(b)
            for _ in range(2):  # (the second call from the kept signature)
                got = (x + y).numpy()
                np.testing.assert_array_equal(got, ADD.run(a, b))
                np.testing.assert_array_equal((x * y).numpy(), REGISTRY["mul"].run(a, b))


def test_attaching_a_fast_rule_forgets_the_kept_signatures():
    calls = []

    def kernel(x):
        return x + 1

    def fast(x):
        calls.append(x.shape)
        return None  # (declines: the kernel runs)

    op = OpDef(name="eager59_probe", kind="elementwise", infer=lambda x: x, kernel=kernel,
               cached_infer=True)  # fmt: skip
    from ember.ops._registry import apply

    t = ember.ones(3)
    apply(op, t)
    assert len(op.infer_cache) == 1
    fast.declines_unless = ((), 2)  # (declines below 2 elements of any dtype)
    op.attach_fast(fast)
    assert not op.infer_cache
    np.testing.assert_array_equal(apply(op, t).numpy(), np.full(3, 2, np.float32))
    assert calls == [(3,)]
    apply(op, ember.ones(1))  # (surely declined: the fast rule is not called)
    assert calls == [(3,)]


def test_fill_of_a_number_matches_torch_and_the_general_route():
    import pytest
    import torch

    for name in ("float32", "float64", "float16", "bfloat16", "int64", "int8", "uint8", "bool"):
        for value in (0, 1, -1, 2.7, True, -3.5, 1e5):
            t = torch.zeros(5, dtype=getattr(torch, name))
            e = ember.zeros(5, dtype=getattr(ember, name))
            whole = ember.zeros(5, dtype=getattr(ember, name))
            try:
                t.fill_(value)
            except RuntimeError:
                with pytest.raises(RuntimeError):
                    e.fill_(value)
                continue
            version = e._version
            assert e.fill_(value) is e and e._version == version + 1
            whole[:].fill_(value)  # (a view: the general route)
            want = t.float().numpy()
            np.testing.assert_array_equal(e.float().numpy(), want, err_msg=f"{name} {value}")
            np.testing.assert_array_equal(whole.float().numpy(), want)
    # a leaf that requires grad: refused while recording, written under no_grad, as PyTorch
    w = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        w.zero_()
    with ember.no_grad():
        w.zero_()
    np.testing.assert_array_equal(w.detach().numpy(), np.zeros(3, np.float32))
    # a non-leaf overwritten by a number: its old value gets no gradient, as PyTorch's
    grads = []
    for lib in (torch, ember):
        x = lib.ones(3, requires_grad=True)
        h = x * 2
        h.fill_(4.0)
        (h * x).sum().backward()
        grads.append(x.grad.numpy().copy())
    np.testing.assert_array_equal(grads[1], grads[0])
