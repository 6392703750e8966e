"""einsum's pairwise contractions (ops/einsum.py `_contracted`): each pair with rows, columns
and a sum as one batched GEMM of contiguous operands, products of vectors by NumPy's own loop,
labels that nothing else reads summed out first. Random equations over two to four operands
against float64 np.einsum, for the NumPy kernel (the specification) and the fast rule (ember's
GEMM); and the workspace rule against measured memory where operands need reordering."""

import numpy as np
import pytest

import ember
from ember.ops.einsum import _einsum_fast, _einsum_kernel
from ember.tools import memory


def _random_equation(rng):
    letters = "abcdefg"
    n_ops = int(rng.integers(2, 5))
    terms = []
    for _ in range(n_ops):
        k = int(rng.integers(1, 4))
        terms.append("".join(rng.choice(list(letters), size=k, replace=False)))
    used = sorted(set("".join(terms)))
    out = "".join(ch for ch in used if rng.random() < 0.4)
    return (
        ",".join(terms) + "->" + "".join(rng.permutation(list(out)))
        if out
        else ",".join(terms) + "->"
    )


@pytest.mark.parametrize("seed", range(4))
def test_pairwise_contractions_equal_numpys_einsum(seed):
    rng = np.random.default_rng(seed)
    checked = 0
    for _ in range(60):
        equation = _random_equation(rng)
        terms = equation.split("->")[0].split(",")
        sizes = {ch: int(rng.integers(1, 7)) for ch in "abcdefg"}
        for dtype, rtol in ((np.float64, 1e-10), (np.float32, 2e-5)):
            operands = [rng.standard_normal([sizes[ch] for ch in t]).astype(dtype) for t in terms]
            want = np.einsum(equation, *[a.astype(np.float64) for a in operands])
            scale = float(np.abs(want).max()) if np.size(want) else 1.0
            for fn in (_einsum_kernel, _einsum_fast):
                got = fn(*operands, equation=equation)
                if got is None:
                    continue
                assert np.shape(got) == np.shape(want) and got.dtype == dtype, equation
                np.testing.assert_allclose(
                    got, want, rtol=rtol, atol=rtol * scale, err_msg=equation
                )
                assert not any(np.may_share_memory(got, a) for a in operands)
                checked += 1
    assert checked > 150


def test_an_attention_score_product_runs_as_a_gemm_and_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    q, k = (rng.standard_normal((2, 4, 48, 16)).astype(np.float32) for _ in range(2))
    got = ember.einsum("bhid,bhjd->bhij", ember.tensor(q), ember.tensor(k)).numpy()
    want = torch.einsum("bhid,bhjd->bhij", torch.tensor(q), torch.tensor(k)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "equation, shapes",
    [
        ("bij,bkj->bik", [(8, 64, 128), (8, 96, 128)]),  # (the right operand reordered)
        ("ij,jk,kl->il", [(64, 96), (96, 32), (32, 80)]),  # (an intermediate alive)
        ("bchw,kc->bkhw", [(4, 16, 12, 12), (24, 16)]),  # (both reordered, a permuted result)
    ],
)
def test_the_workspace_rule_counts_what_the_pairs_allocate(equation, shapes, bare_executors):
    inputs = [ember.randn(*s) for s in shapes]
    report = memory(lambda *xs: ember.einsum(equation, *xs), *inputs)
    measured = report.measure()
    assert abs(report.peak_bytes - measured) <= 0.05 * measured, (report.peak_bytes, measured)
