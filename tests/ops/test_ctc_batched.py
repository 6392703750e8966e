"""ctc_loss's batched recursions (ops/ctc.py: every sequence at once, each read up to its own
input length) against PyTorch's over random batches: input and target lengths that differ per
sequence (zero included), repeated labels, impossible alignments with and without
zero_infinity, padded and concatenated targets; the loss and the logits' gradient."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("seed", range(6))
def test_batched_ctc_matches_torch(seed):
    rng = np.random.default_rng(seed)
    steps, n, classes = int(rng.integers(1, 12)), int(rng.integers(1, 6)), int(rng.integers(2, 6))
    logits = rng.standard_normal((steps, n, classes))
    input_lengths = rng.integers(0, steps + 1, n)
    target_lengths = rng.integers(0, 6, n)
    labels = rng.integers(1, classes, (n, 6))
    if rng.random() < 0.5:
        labels[:, 1] = labels[:, 0]  # (repeats: a blank must separate them)
    concatenated = bool(rng.random() < 0.5)
    targets = (
        np.concatenate([labels[i, : target_lengths[i]] for i in range(n)])
        if concatenated
        else labels
    )
    for zero_infinity in (False, True):
        for reduction in ("none", "mean"):
            results = []
            for lib in (torch, ember):
                x = lib.tensor(logits, requires_grad=True)
                loss = lib.nn.functional.ctc_loss(
                    x.log_softmax(2),
                    lib.tensor(targets),
                    lib.tensor(input_lengths),
                    lib.tensor(target_lengths),
                    reduction=reduction,
                    zero_infinity=zero_infinity,
                )
                finite = lib.where(lib.isinf(loss), lib.zeros_like(loss), loss)
                finite.sum().backward()
                results.append((loss.detach().numpy(), x.grad.numpy()))
            (want, want_grad), (got, got_grad) = results
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(got_grad, want_grad, rtol=1e-7, atol=1e-9)
