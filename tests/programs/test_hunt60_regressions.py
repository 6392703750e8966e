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


def test_pytorch_exported_mean_embedding_bag_with_an_empty_bag():
    """PyTorch's exporter writes EmbeddingBag(mode="mean") as a Loop of ReduceMean over each
    bag's rows; an empty bag's mean is 0 in the layer and in onnxruntime, which ONNX leaves
    undefined: ember's importer gave NaN (0 / 0) for it, eagerly and captured."""
    pytest.importorskip("onnx", reason="PyTorch's exporter needs the onnx package")
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the file's reference")
    import io

    torch.manual_seed(0)
    bag = torch.nn.EmbeddingBag(10, 4, mode="mean")
    ids = np.array([1, 4, 4, 9, 0, 3])
    offsets = np.array([0, 3, 3, 5, 6])  # bags 1 and 4 are empty
    buf = io.BytesIO()
    args = (torch.from_numpy(ids), torch.from_numpy(offsets))
    torch.onnx.export(bag, args, buf, opset_version=17, dynamo=False)
    with torch.no_grad():
        want = bag(torch.from_numpy(ids), torch.from_numpy(offsets)).numpy()
    assert (want[[1, 4]] == 0).all()
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    (ort_out,) = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), [ids, offsets])})
    np.testing.assert_allclose(ort_out, want, rtol=1e-6, atol=1e-7)
    for capture in (True, False):
        f = ember.onnx.load(buf.getvalue(), capture=capture)
        got = f(ember.tensor(ids), ember.tensor(offsets))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-7)


def test_log_probs_at_the_support_boundary_match_pytorch():
    """Gamma(1, r), Beta(1, b), Dirichlet with a concentration of 1 and Chi2(2) have finite
    densities at 0, which PyTorch computes with xlogy (ember's (c - 1) * log(0) gave NaN);
    Multinomial's log-factorial takes the counts' own total, as PyTorch's; LogNormal (a
    TransformedDistribution) validates its support before computing, refusing 0."""
    cases = [
        (lambda L: L.distributions.Gamma(L.tensor([1.0, 3.0]), L.tensor([2.0, 0.5])), [0.0, 0.0]),
        (lambda L: L.distributions.Chi2(L.tensor([2.0])), [0.0]),
        (lambda L: L.distributions.Exponential(L.tensor([1.5])), [0.0]),
        (lambda L: L.distributions.Beta(L.tensor([1.0, 2.0]), L.tensor([2.0, 1.0])), [0.0, 1.0]),
        (lambda L: L.distributions.Dirichlet(L.tensor([1.0, 2.0, 1.0])), [0.0, 0.4, 0.6]),
        (lambda L: L.distributions.Multinomial(6, probs=L.tensor([0.2, 0.3, 0.5])), [1.0, 2, 2]),
        (lambda L: L.distributions.Poisson(L.tensor([0.0, 2.0])), [0.0, 0.0]),
    ]
    for make, value in cases:
        want = make(torch).log_prob(torch.tensor(value)).numpy()
        got = make(ember).log_prob(ember.tensor(value)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    grads = []
    for lib in (torch, ember):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        beta = lib.distributions.Beta(a, lib.tensor([2.0, 3.0]))
        beta.log_prob(lib.tensor([0.0, 0.5])).sum().backward()
        grads.append(a.grad.numpy())
        loc, scale = lib.tensor([0.0]), lib.tensor([1.0])
        lognormal = lib.distributions.LogNormal(loc, scale, validate_args=True)
        with pytest.raises(ValueError, match="support"):
            lognormal.log_prob(lib.tensor([0.0]))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6)
    zero = ember.tensor([0.0])
    lenient = ember.distributions.LogNormal(zero, zero + 1, validate_args=False)
    assert np.isnan(lenient.log_prob(zero).numpy()).all()
