"""Sparse (COO) x dense matrix products: ember against scipy.sparse's CSR product and PyTorch's
``torch.sparse.mm``, interleaved in one process (medians of many rounds, each in a fresh random
order), float32.

A (n x n) at ``--density`` (default 1%: 4096 x 4096, about 168k nonzeros, coalesced) times a
dense (n x 64) matrix:

* forward: ``ember.sparse.mm(A, X)`` eagerly and captured in ``ember.function``;
  ``A_csr @ X`` with scipy (the CSR matrix built once, outside the timing: the peer's best
  case); ``torch.sparse.mm`` on the COO tensor and ``A_csr @ X`` with torch's CSR layout.
* forward + backward: ``(mm(A, X) * G).sum().backward()`` with gradients to X only (a GCN's
  fixed adjacency) and to both A's values and X, in ember and PyTorch.

The goal is ember's forward within 1.5x of scipy's. ember and PyTorch run on ``--threads``
threads (default 1, as scipy's product is single-threaded).

``python benchmarks/sparse.py [--n 4096] [--cols 64] [--density 0.01] [--rounds 30]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

import ember
from ember.kernels.cpool import cpu_model  # noqa: E402


def problem(n: int, cols: int, density: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    flat = rng.choice(n * n, int(n * n * density), replace=False)
    flat.sort()
    indices = np.stack([flat // n, flat % n]).astype(np.int64)
    values = rng.standard_normal(flat.size).astype(np.float32)
    x = rng.standard_normal((n, cols)).astype(np.float32)
    g = rng.standard_normal((n, cols)).astype(np.float32)
    return indices, values, x, g


def cases(indices, values, x, g, n, torch):
    a = ember.sparse_coo_tensor(indices, values, (n, n)).coalesce()
    ex, eg = ember.tensor(x), ember.tensor(g)
    csr = sp.csr_matrix((values, (indices[0], indices[1])), shape=(n, n))
    captured = ember.function(lambda m: ember.sparse.mm(a, m))
    out = {
        "ember eager": lambda: ember.sparse.mm(a, ex),
        "ember function": lambda: captured(ex),
        "scipy csr @ dense": lambda: csr @ x,
    }

    def ember_backward(values_grad: bool):
        av = ember.sparse_coo_tensor(indices, values, (n, n)).coalesce()
        av.requires_grad_(values_grad)
        xg = ember.tensor(x, requires_grad=True)

        def run():
            xg.grad = None
            av.grad = None
            (ember.sparse.mm(av, xg) * eg).sum().backward()

        return run

    out["ember fwd+bwd (X)"] = ember_backward(False)
    out["ember fwd+bwd (A, X)"] = ember_backward(True)
    if torch is None:
        return out
    ta = torch.sparse_coo_tensor(torch.tensor(indices), torch.tensor(values), (n, n)).coalesce()
    tcsr = ta.to_sparse_csr()
    tx, tg = torch.tensor(x), torch.tensor(g)
    out["torch.sparse.mm (coo)"] = lambda: torch.sparse.mm(ta, tx)
    out["torch csr @ dense"] = lambda: tcsr @ tx

    def torch_backward(values_grad: bool):
        av = ta.detach().requires_grad_(values_grad)
        xg = tx.detach().requires_grad_(True)

        def run():
            xg.grad = None
            av.grad = None
            (torch.sparse.mm(av, xg) * tg).sum().backward()

        return run

    out["torch fwd+bwd (X)"] = torch_backward(False)
    out["torch fwd+bwd (A, X)"] = torch_backward(True)
    return out


def check(indices, values, x, n, torch) -> None:
    """The three libraries compute one product (before anything is timed)."""
    a = ember.sparse_coo_tensor(indices, values, (n, n))
    want = sp.csr_matrix((values, (indices[0], indices[1])), shape=(n, n)) @ x
    np.testing.assert_allclose(
        ember.sparse.mm(a, ember.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-4
    )
    if torch is not None:
        t = torch.sparse_coo_tensor(torch.tensor(indices), torch.tensor(values), (n, n))
        got = torch.sparse.mm(t, torch.tensor(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=64)
    parser.add_argument("--density", type=float, default=0.01)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    ember.set_num_threads(args.threads)
    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
    indices, values, x, g = problem(args.n, args.cols, args.density)
    check(indices, values, x, args.n, torch)
    table = cases(indices, values, x, g, args.n, torch)
    for fn in table.values():  # warm up: caches, compiled graphs
        fn()
        fn()
    times = {name: [] for name in table}
    order = list(table)
    shuffle = np.random.default_rng(1)
    for _ in range(args.rounds):
        shuffle.shuffle(order)  # (no case always runs after the same one: caches, turbo)
        for name in order:
            fn = table[name]
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    med = {name: float(np.median(t)) for name, t in times.items()}
    print(
        f"CPU: {cpu_model()}; float32; A {args.n}x{args.n} at {args.density:.1%} "
        f"({indices.shape[1]} nonzeros) times X {args.n}x{args.cols}; medians of "
        f"{args.rounds} interleaved rounds; ember and torch threads {args.threads}"
    )
    base = med["scipy csr @ dense"]
    for name, t in med.items():
        print(f"  {name:<24} {t * 1e3:8.3f} ms   {t / base:5.2f}x scipy")
    if torch is not None:
        for which in ("(X)", "(A, X)"):
            ratio = med[f"ember fwd+bwd {which}"] / med[f"torch fwd+bwd {which}"]
            print(f"  fwd+bwd {which}: ember / torch = {ratio:.2f}x")


if __name__ == "__main__":
    main()
