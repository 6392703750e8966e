"""The eager mode's kept shape-rule answers (ops/_rules.py ``cached_infer``, eager.py): a
signature's answer is reused only where the rule would give it again, and every call the rule
refuses still raises."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.errors import ComplexDTypeError, DTypeError, EmberError, ShapeError
from ember.ops import _registry as reg
from ember.ops.hardtanh import HARDTANH

ADD = reg.REGISTRY["add"]
LINEAR = reg.REGISTRY["linear"]
RESHAPE = reg.REGISTRY["reshape"]


@pytest.fixture
def counted(monkeypatch):
    """``op`` with its shape rule counting its calls, its kept answers forgotten."""

    def count(op):
        calls = []
        rule = op.infer

        def infer(*types, **attrs):
            calls.append(types)
            return rule(*types, **attrs)

        monkeypatch.setattr(op, "infer", infer)
        monkeypatch.setattr(op, "infer_cache", {})
        return calls

    return count


def t(shape, dtype=np.float32, grad=False):
    x = ember.tensor(np.random.default_rng(0).standard_normal(shape).astype(dtype))
    return x.requires_grad_() if grad else x


def test_the_rule_runs_once_per_signature(counted):
    calls = counted(ADD)
    a, b = t((3, 4)), t((4,))
    first = reg.apply(ADD, a, b)
    second = reg.apply(ADD, t((3, 4)), t((4,)))
    assert len(calls) == 1
    np.testing.assert_array_equal(second.numpy(), first.numpy())
    reg.apply(ADD, t((2, 4)), b)  # another shape
    reg.apply(ADD, t((3, 4), np.float64), t((4,), np.float64))  # another dtype
    assert len(calls) == 3


def test_a_refused_call_raises_every_time(counted):
    calls = counted(ADD)
    for _ in range(2):
        with pytest.raises(DTypeError):
            reg.apply(ADD, t((3,)), t((3,), np.float64))
        with pytest.raises(ShapeError):
            reg.apply(ADD, t((3,)), t((4,)))
    assert len(calls) == 4
    for _ in range(2):
        with pytest.raises(ShapeError):
            reg.apply(LINEAR, t((2, 5)), t((3, 4)))


def test_attributes_of_equal_value_and_other_type_are_apart():
    x = t((2, 3))
    reg.apply(HARDTANH, x, lo=0, hi=6)  # an int bound is a real number
    with pytest.raises(EmberError, match="bound lo must be a real number"):
        reg.apply(HARDTANH, x, lo=False, hi=6)  # equal to 0 as a dict key, refused by the rule
    reg.apply(RESHAPE, x, shape=(3, 2))
    assert reg.apply(RESHAPE, x, shape=(6,)).shape == (6,)
    with pytest.raises(ShapeError):
        reg.apply(RESHAPE, x, shape=(4,))


def test_an_unhashable_attribute_takes_the_rule(counted):
    calls = counted(RESHAPE)
    x = t((2, 3))
    assert reg.apply(RESHAPE, x, shape=[3, 2]).shape == (3, 2)
    assert reg.apply(RESHAPE, x, shape=[3, 2]).shape == (3, 2)
    assert len(calls) == 2


def test_special_operands_are_checked_on_every_call(counted):
    # the complex and float8 rules depend on more than the dtypes (a complex operand requiring
    # grad): a call with a special operand keeps no answer, and a refused one raises each time
    calls = counted(ADD)
    z = ember.tensor(np.array([1 + 2j, 3 - 1j], np.complex64))
    for _ in range(2):
        assert reg.apply(ADD, z, z).dtype == ember.complex64
    assert len(calls) == 2 and not ADD.infer_cache
    for _ in range(2):
        with pytest.raises(ComplexDTypeError):  # an op without the complex rule
            ember.floor(z)
    f8 = ember.zeros(3).to(ember.float8_e4m3fn)
    for _ in range(2):
        with pytest.raises(EmberError):
            ember.exp(f8)


def test_meta_tensors_after_eager_calls_of_one_signature():
    a = t((3, 4))
    eager = ember.relu(a)
    m = ember.empty((3, 4), device="meta")
    out = ember.relu(m)
    assert out.device.type == "meta" and out.shape == eager.shape


def test_the_tape_keeps_the_answered_types():
    torch = pytest.importorskip("torch")
    xs = np.random.default_rng(1).standard_normal((2, 4, 3))
    grads = []
    for _ in range(2):  # the second backward runs on kept types
        x = ember.tensor(xs, requires_grad=True)
        y = ember.nn.functional.linear(x, ember.ones(5, 3, dtype=ember.float64))
        (y.relu() * 2).sum().backward()
        grads.append(x.grad.numpy())
    tx = torch.tensor(xs, requires_grad=True)
    (
        torch.nn.functional.linear(tx, torch.ones(5, 3, dtype=torch.float64)).relu() * 2
    ).sum().backward()
    for g in grads:
        np.testing.assert_allclose(g, tx.grad.numpy(), rtol=1e-12)


def test_many_signatures_start_over(counted, monkeypatch):
    from ember import eager

    monkeypatch.setattr(eager, "_MAX_SIGNATURES", 4)
    calls = counted(ADD)
    for n in range(1, 11):
        assert reg.apply(ADD, t((n,)), t((n,))).shape == (n,)
    assert len(ADD.infer_cache) <= 4
    assert len(calls) == 10
