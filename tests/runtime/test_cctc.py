"""kernels/cctc.py: the CTC loss's recursions in C against ops/ctc.py's batched NumPy kernels
(the specification) over random batches (input lengths from 0 to T, empty targets, repeated
labels, impossible alignments, -inf log-probabilities, either blank, padded and concatenated
targets, zero_infinity), on one thread and two: the losses bit for bit (NumPy's logaddexp
with the same C library calls), the gradient within an ulp or two of each term (the C
library's exp and log where NumPy's array functions have their own)."""

from __future__ import annotations

import numpy as np
import pytest

from ember.kernels import ccompile, cpool
from ember.ops.ctc import CTC_LOSS, CTC_LOSS_BACKWARD

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _case(rng, dtype):
    steps, n, classes, labels = (int(v) for v in rng.integers((1, 1, 2, 0), (14, 6, 7, 7)))
    lp = np.log(rng.dirichlet(np.ones(classes), (steps, n))).astype(dtype)
    if rng.random() < 0.3:
        lp[0, 0, int(rng.integers(0, classes))] = -np.inf
    blank = int(rng.integers(0, classes))
    targets = rng.integers(0, classes, (n, labels))
    targets[targets == blank] = (blank + 1) % classes
    if rng.random() < 0.4:
        targets[:, 1:] = targets[:, :-1]  # (repeats: no skipping between them)
    input_lengths = rng.integers(0, steps + 1, n)
    target_lengths = rng.integers(0, labels + 1, n)
    return lp, targets, input_lengths, target_lengths, blank


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("seed", range(40))
def test_the_recursions_equal_the_numpy_kernels(seed, threads):
    rng = np.random.default_rng(seed)
    dtype = np.float64 if seed % 2 else np.float32
    lp, targets, input_lengths, target_lengths, blank = _case(rng, dtype)
    concatenated = seed % 3 == 0
    if concatenated:
        targets = np.concatenate([row[:k] for row, k in zip(targets, target_lengths)])
    grad = rng.standard_normal(lp.shape[1]).astype(dtype)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        for zero_inf in (False, True):
            attrs = dict(blank=blank, concatenated=concatenated, zero_inf=zero_inf)
            args = (lp, targets, input_lengths, target_lengths)
            want, got = CTC_LOSS.kernel(*args, **attrs), CTC_LOSS.fast(*args, **attrs)
            assert got is not None and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
            want = CTC_LOSS_BACKWARD.kernel(grad, *args, **attrs)
            got = CTC_LOSS_BACKWARD.fast(grad, *args, **attrs)
            assert got is not None and got.dtype == want.dtype and got.shape == want.shape
            tol = 1e-12 if dtype == np.float64 else 1e-6
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    finally:
        cpool.set_num_threads(before)


@needs_cc
def test_a_large_batch_on_the_pool():
    rng = np.random.default_rng(7)
    lp = np.log(rng.dirichlet(np.ones(20), (50, 16)))
    targets = rng.integers(1, 20, (16, 30))
    lengths = (np.full(16, 50), np.full(16, 30))
    attrs = dict(blank=0, concatenated=False, zero_inf=False)
    np.testing.assert_array_equal(
        CTC_LOSS.fast(lp, targets, *lengths, **attrs),
        CTC_LOSS.kernel(lp, targets, *lengths, **attrs),
    )
