"""Regressions found by hunt60's programs, each pinned against PyTorch's behaviour."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_grad_mode_decorators_wrap_generators(lib):
    """@no_grad()/@enable_grad()/@inference_mode() on a generator function run its body in the
    mode at each resumption and leave the caller's mode alone between them (ember ran the body
    in the caller's mode: the decorator only wrapped the generator object's creation)."""
    w = lib.ones(2, requires_grad=True)

    @lib.no_grad()
    def frozen(n):
        for i in range(n):
            yield (w * i).requires_grad, lib.is_grad_enabled()

    got = []
    for item in frozen(2):
        got.append(item + (lib.is_grad_enabled(),))
    assert got == [(False, False, True), (False, False, True)]

    @lib.enable_grad()
    def tracked():
        received = yield (w * 2).requires_grad
        yield received, lib.is_grad_enabled()

    with lib.no_grad():
        gen = tracked()
        assert next(gen) is True
        assert gen.send("x") == ("x", True)
        assert not lib.is_grad_enabled()

    @lib.inference_mode()
    def infer():
        try:
            yield lib.is_inference_mode_enabled()
        except KeyError:
            yield "thrown", lib.is_inference_mode_enabled()

    gen = infer()
    assert next(gen) is True and not lib.is_inference_mode_enabled()
    assert gen.throw(KeyError()) == ("thrown", True)

    @lib.no_grad()
    def returns():
        yield 1
        return 5

    gen = returns()
    next(gen)
    with pytest.raises(StopIteration) as stop:
        next(gen)
    assert stop.value.value == 5


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_bare_grad_mode_decorators_and_set_grad_enabled_decorator(lib):
    """``@no_grad`` and ``@enable_grad`` without parentheses, and ``@set_grad_enabled(False)``
    (which, as a call, switches at once, and as a decorator switches back) work as PyTorch's
    (ember refused the first with a TypeError and the second as not callable)."""
    w = lib.ones(2, requires_grad=True)

    @lib.no_grad
    def f():
        return w * 2

    @lib.set_grad_enabled(False)
    def g():
        return w * 3

    assert lib.is_grad_enabled()
    assert not f().requires_grad and not g().requires_grad
    assert lib.is_grad_enabled()
    with lib.no_grad():

        @lib.enable_grad
        def h():
            return w * 4

        assert h().requires_grad and not lib.is_grad_enabled()
    lib.set_grad_enabled(False)
    try:
        assert not lib.is_grad_enabled()
    finally:
        lib.set_grad_enabled(True)
    with pytest.warns(FutureWarning, match="Decorating classes is deprecated"):
        made = lib.no_grad()(type("C", (), {"__init__": lambda self: setattr(self, "y", w * 2)}))
    assert not made().y.requires_grad
    np.testing.assert_array_equal(g().detach().numpy(), [3.0, 3.0])
