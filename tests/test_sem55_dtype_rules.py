"""Dtype rules PyTorch 2.13 enforces that ember let through: the normalization kernels'
mixed-dtype rule (batch_norm, instance_norm, layer_norm, group_norm: parameters and running
statistics of the input's dtype, or float32 ones for a half-precision input), and hooks that
change a gradient's dtype or size (refused for every hook kind; a custom Function's backward
is cast)."""

from __future__ import annotations

import itertools

import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = ["float32", "float64", "bfloat16", "float16"]


def _norm(m, kind, x_dtype, stat_dtype, param_dtype, training):
    F = TF if m is torch else EF
    x = m.tensor([[[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]] * 2).to(getattr(m, x_dtype))
    c = x.shape[1]
    rm = m.zeros(c, dtype=getattr(m, stat_dtype))
    rv = m.ones(c, dtype=getattr(m, stat_dtype))
    w = m.full((c,), 1.5, dtype=getattr(m, param_dtype))
    b = m.full((c,), 0.25, dtype=getattr(m, param_dtype))
    if kind == "batch_norm":
        return F.batch_norm(x, rm, rv, w, b, training=training)
    if kind == "instance_norm":
        return F.instance_norm(x, rm, rv, w, b, use_input_stats=training)
    if kind == "group_norm":
        return F.group_norm(x, 1, w, rv.to(getattr(m, stat_dtype)) * 0 + b.to(w.dtype))
    ln_w = m.full((3,), 1.5, dtype=getattr(m, param_dtype))
    return F.layer_norm(x, (3,), ln_w, m.zeros(3, dtype=getattr(m, stat_dtype)))


def _outcome(m, *args):
    try:
        y = _norm(m, *args)
    except RuntimeError as e:
        return "refused", str(e).split("\n")[0]
    return "ok", (str(y.dtype).rsplit(".", 1)[-1], y.float().reshape(-1).tolist())


@pytest.mark.parametrize("kind", ["batch_norm", "instance_norm", "layer_norm", "group_norm"])
def test_normalization_dtype_rule_follows_torch(kind):
    trainings = [False, True] if kind in ("batch_norm", "instance_norm") else [True]
    for x_d, s_d, p_d, training in itertools.product(DTYPES, DTYPES[:3], DTYPES[:3], trainings):
        args = (kind, x_d, s_d, p_d, training)
        want, t = _outcome(torch, *args)
        got, e = _outcome(ember, *args)
        assert got == want, (args, t, e)
        if want == "refused":
            assert t in e, args
        else:
            assert e[0] == t[0], args
            assert e[1] == pytest.approx(t[1], rel=2e-2, abs=2e-2), args


def _hook_cases(m):
    def tensor_hook():
        leaf = m.ones(3, requires_grad=True)
        leaf.register_hook(lambda g: g.double())
        (leaf * 2).sum().backward()

    def non_leaf_hook_size():
        leaf = m.ones(3, requires_grad=True)
        y = leaf * 2
        y.register_hook(lambda g: g[:2])
        (y * 3).sum().backward()

    def node_prehook():
        leaf = m.ones(3, requires_grad=True)
        z = leaf * 2 * 3
        z.grad_fn.register_prehook(lambda go: (go[0].half(),))
        z.sum().backward()

    def node_hook():
        leaf = m.ones(3, requires_grad=True)
        z = (leaf * 2) * leaf
        z.grad_fn.register_hook(lambda gi, go: (gi[0].double(), gi[1]))
        z.sum().backward()

    def module_hook():
        lin = m.nn.Linear(3, 2)
        lin.register_full_backward_hook(lambda mod, gi, go: (gi[0].double(),))
        lin(m.ones(1, 3, requires_grad=True)).sum().backward()

    def module_pre_hook():
        lin = m.nn.Linear(3, 2)
        lin.register_full_backward_pre_hook(lambda mod, go: (go[0].double(),))
        lin(m.ones(1, 3, requires_grad=True)).sum().backward()

    def autograd_grad():
        leaf = m.ones(3, requires_grad=True)
        y = leaf * 2
        y.register_hook(lambda g: g.double())
        m.autograd.grad((y * 3).sum(), leaf)

    return {k: v for k, v in locals().items() if k != "m"}


@pytest.mark.parametrize("name", list(_hook_cases(torch)))
def test_hook_changing_gradient_dtype_or_size_refused_as_torch(name):
    with pytest.raises(RuntimeError) as t:
        _hook_cases(torch)[name]()
    with pytest.raises(RuntimeError) as e:
        _hook_cases(ember)[name]()
    assert str(t.value).split("\n")[0] in str(e.value)


def test_function_backward_gradient_is_cast_not_refused():
    grads = []
    for m in (torch, ember):

        class Twice(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g.double() * 2

        leaf = m.ones(3, requires_grad=True)
        Twice.apply(leaf * 1).sum().backward()
        grads.append((str(leaf.grad.dtype).rsplit(".", 1)[-1], leaf.grad.tolist()))
    assert grads[0] == grads[1]
