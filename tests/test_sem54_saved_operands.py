"""In-place changes of the operands PyTorch's backward node saves (ops/_saved_operands.py),
and of empty views: refused at backward where PyTorch 2.13 refuses them, differentiated as
PyTorch where it does not."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

DTYPES = ["float32", "float64", "float16", "bfloat16"]

# (name, fn(lib, v, b)): v = a * 1 (a leaf), b a second leaf; fn changes v in place
CASES = [
    ("addcmul_self_value2", lambda lib, v, b: v.addcmul_(v, b, value=2)),
    ("addcmul_self", lambda lib, v, b: v.addcmul_(v, b)),
    ("addcmul_self_second", lambda lib, v, b: v.addcmul_(b, v, value=-0.5)),
    ("addcmul_others", lambda lib, v, b: v.addcmul_(b, b, value=3)),
    ("addcdiv_self_dividend", lambda lib, v, b: v.addcdiv_(v, b, value=2)),
    ("addcdiv_self_divisor", lambda lib, v, b: v.addcdiv_(b, v)),
    ("lerp_self_weight", lambda lib, v, b: v.lerp_(b, v)),
    ("lerp_scalar_weight", lambda lib, v, b: v.lerp_(b, 0.3)),
    ("lerp_tensor_weight", lambda lib, v, b: v.lerp_(b, b)),
    ("clamp_self_min", lambda lib, v, b: v.clamp_(min=v)),
    ("clamp_min_tensor", lambda lib, v, b: v.clamp_(min=b)),
    ("clamp_scalar", lambda lib, v, b: v.clamp_(min=0.1)),
    ("mul_self", lambda lib, v, b: v.mul_(v)),
    ("add_alpha", lambda lib, v, b: v.add_(b, alpha=2)),
    ("empty_view_mul_self", lambda lib, v, b: v[:0].mul_(v[:0])),
    ("empty_view_addcmul", lambda lib, v, b: v[3:].addcmul_(v[3:], b[3:], value=2)),
    ("empty_view_add", lambda lib, v, b: v[1:1].add_(1)),
]


def _run(lib, fn, dtype, b_grad=True):
    a = lib.tensor([0.5, -1.25, 2.0], dtype=getattr(lib, dtype), requires_grad=True)
    b = lib.tensor([1.5, 0.75, 1.25], dtype=getattr(lib, dtype), requires_grad=b_grad)
    v = a * 1.0
    fn(lib, v, b)
    try:
        v.float().sum().backward()
    except RuntimeError as error:
        return error
    return [None if t.grad is None else t.grad.float().tolist() for t in (a, b)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_modified_saved_operand_as_pytorch(name, fn, dtype):
    expected = _run(torch, fn, dtype)
    got = _run(ember, fn, dtype)
    if isinstance(expected, Exception):
        assert isinstance(got, ember.errors.AutogradError), f"{name}: PyTorch refuses, got {got}"
    else:
        assert not isinstance(got, Exception), f"{name}: ember refused: {got}"
        for e, g in zip(expected, got):
            assert (e is None) == (g is None)
            if e is not None:
                np.testing.assert_allclose(g, e, rtol=1e-2 if "16" in dtype else 1e-6)


def test_saved_only_where_the_other_gradient_is_wanted():
    # PyTorch's AddcmulBackward0 saves tensor1 only for tensor2's gradient: with b a constant,
    # v.addcmul_(v, b, value=2) differentiates
    for lib in (torch, ember):
        got = _run(lib, lambda lib, v, b: v.addcmul_(v, b, value=2), "float32", b_grad=False)
        assert not isinstance(got, Exception)
        np.testing.assert_allclose(got[0], [4.0, 2.5, 3.5])


def test_node_names_of_tensor_clamp_and_empty_view_writes():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    assert type(x.clamp(min=x.detach()).grad_fn).__name__ == "ClampBackward0"
    v = x * 1
    before = v._version
    v[:0].mul_(2)
    assert v._version == before + 1  # (one write, one bump, as PyTorch's, even of nothing)
