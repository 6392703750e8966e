"""ember.nn.utils.prune against torch.nn.utils.prune: masks of every method (iterated pruning
in a PruningContainer, structured and global), the parameters and buffers it leaves, gradients
through the mask, `remove`, and a captured training step of a pruned model."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
import torch.nn.utils.prune as torch_prune  # noqa: E402

import ember.nn.utils.prune as ember_prune  # noqa: E402


def _pruned(lib, P):
    rng = np.random.default_rng(0)
    nn = lib.nn
    net = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 4), nn.Conv1d(4, 6, 3))
    for p in net.parameters():
        with lib.no_grad():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    P.l1_unstructured(net[0], "weight", amount=0.3)
    P.ln_structured(net[0], "weight", amount=1, n=2, dim=0)
    P.l1_unstructured(net[0], "weight", amount=2)
    P.ln_structured(net[3], "weight", amount=0.5, n=1, dim=1)
    P.l1_unstructured(net[2], "bias", amount=1)
    P.custom_from_mask(net[2], "weight", lib.tensor(rng.random((4, 5)) > 0.3))
    layers = [(net[2], "weight"), (net[3], "weight")]
    P.global_unstructured(layers, pruning_method=P.L1Unstructured, amount=0.4)
    return net, lib.tensor(rng.standard_normal((2, 6)).astype(np.float32))


def _facts(lib, P):
    net, x = _pruned(lib, P)
    out = net[2](net[1](net[0](x)))
    out.sum().backward()
    hooks = list(net[0]._forward_pre_hooks.values())
    facts = [
        out.detach().numpy(),
        net[0].weight_orig.grad.numpy(),
        net[0].weight_mask.numpy(),
        net[2].weight_mask.numpy(),
        net[2].bias_mask.numpy(),
        net[3].weight_mask.numpy(),
        sorted(n for n, _ in net.named_parameters()),
        sorted(n for n, _ in net.named_buffers()),
        P.is_pruned(net),
        len(hooks[0]),
    ]
    P.remove(net[0], "weight")
    facts += [
        net[0].weight.detach().numpy(),
        sorted(n for n, _ in net[0].named_parameters()),
        P.is_pruned(net[0]),
    ]
    return facts


def test_prune_matches_torch():
    want, got = _facts(torch, torch_prune), _facts(ember, ember_prune)
    for i, (w, g) in enumerate(zip(want, got)):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7, err_msg=str(i))
        else:
            assert g == w, i


def test_captured_step_of_a_pruned_model_equals_eager():
    results = []
    for capture in (False, True):
        net, x = _pruned(ember, ember_prune)
        opt = ember.optim.SGD(net.parameters(), lr=0.1)

        def step(x, net=net, opt=opt):
            loss = net[2](net[1](net[0](x))).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        f = ember.function(step) if capture else step
        losses = [f(x).item() for _ in range(3)]
        results.append(
            (losses, net[0].weight.detach().numpy(), net[0].weight_orig.detach().numpy())
        )
    (l0, w0, o0), (l1, w1, o1) = results
    np.testing.assert_allclose(l1, l0, rtol=1e-6)
    np.testing.assert_allclose(w1, w0, rtol=1e-6)
    np.testing.assert_allclose(o1, o0, rtol=1e-6)


def test_prune_arguments_are_checked():
    lin = ember.nn.Linear(3, 2)
    with pytest.raises(ValueError, match="amount=1.5"):
        ember_prune.l1_unstructured(lin, "weight", amount=1.5)
    with pytest.raises(ValueError, match="multidimensional"):
        ember_prune.ln_structured(lin, "bias", amount=1, n=2, dim=0)
    with pytest.raises(ValueError, match="has to be pruned"):
        ember_prune.remove(lin, "weight")
    assert [n for n, _ in lin.named_parameters()] == ["weight", "bias"]  # left as it was
