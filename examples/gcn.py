"""A graph convolutional network (Kipf & Welling, 2017) on a generated community graph, with a
sparse COO adjacency.

The graph is a stochastic block model: ``nodes`` nodes in ``communities`` equal communities,
an edge between two nodes of one community with probability ``p_in`` and of two communities
with ``p_out`` (by default 5 neighbours within and 2 outside on average). Each node's features
are its community's mean (a random direction) plus noise larger than the signal, so a
per-node classifier is weak and the neighbourhood, which is mostly the node's own community,
carries the label. The adjacency with self loops is
normalised symmetrically, D^-1/2 (A + I) D^-1/2, and held as an ``ember.sparse_coo_tensor``;
a layer is ``A_hat @ (H @ W)`` with ``ember.sparse.mm``. Two layers, ReLU and dropout between,
trained with Adam on a tenth of the labels; accuracy is measured on the nodes not trained on,
and compared with the same network without the edges (identity adjacency).

The step runs eagerly and captured with ``ember.function`` (the adjacency a constant of the
graph); both are timed per epoch.

Run: python examples/gcn.py [--nodes 3000] [--epochs 100] [--threads N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ember
from ember import nn


def sbm_graph(nodes: int, communities: int, p_in: float, p_out: float, rng):
    """(labels, undirected edges (2, m) without self loops or repeats) of a stochastic block
    model: the pairs of each two blocks drawn with their probability."""
    labels = np.repeat(np.arange(communities), -(-nodes // communities))[:nodes]
    rng.shuffle(labels)
    members = [np.flatnonzero(labels == c) for c in range(communities)]
    found = []
    for a in range(communities):
        for b in range(a, communities):
            pairs = len(members[a]) * len(members[b])
            count = rng.binomial(pairs, p_in if a == b else p_out)
            u = rng.choice(members[a], count)
            v = rng.choice(members[b], count)
            found.append(np.stack([u, v]))
    edges = np.concatenate(found, axis=1)
    edges = edges[:, edges[0] != edges[1]]
    edges = np.sort(edges, axis=0)  # (low, high): each undirected edge once
    edges = np.unique(edges, axis=1)
    return labels, edges


def normalized_adjacency(edges: np.ndarray, nodes: int) -> ember.sparse.SparseTensor:
    """D^-1/2 (A + I) D^-1/2 of the undirected ``edges``, a coalesced sparse tensor."""
    loops = np.arange(nodes)
    rows = np.concatenate([edges[0], edges[1], loops])
    cols = np.concatenate([edges[1], edges[0], loops])
    degree = np.bincount(rows, minlength=nodes).astype(np.float64)
    scale = 1.0 / np.sqrt(degree)
    values = (scale[rows] * scale[cols]).astype(np.float32)
    return ember.sparse_coo_tensor(np.stack([rows, cols]), values, (nodes, nodes)).coalesce()


def community_features(labels, features: int, signal: float, rng) -> np.ndarray:
    means = rng.standard_normal((labels.max() + 1, features))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    noise = rng.standard_normal((labels.size, features))
    return (signal * means[labels] + noise).astype(np.float32)


class GCN(nn.Module):
    def __init__(self, adjacency, features: int, hidden: int, classes: int, dropout: float):
        super().__init__()
        self.adjacency = adjacency
        self.first = nn.Linear(features, hidden)
        self.second = nn.Linear(hidden, classes)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        h = ember.sparse.mm(self.adjacency, self.first(self.dropout(x))).relu()
        return ember.sparse.mm(self.adjacency, self.second(self.dropout(h)))


def make_problem(nodes=3000, communities=5, degree_in=5.0, degree_out=2.0, features=32,
                 signal=0.6, train_fraction=0.1, seed=0):  # fmt: skip
    """The graph, features, labels and train/test split as tensors."""
    rng = np.random.default_rng(seed)
    size = nodes / communities
    labels, edges = sbm_graph(
        nodes, communities, degree_in / size, degree_out / (nodes - size), rng
    )
    x = community_features(labels, features, signal, rng)
    order = rng.permutation(nodes)
    train = np.sort(order[: int(train_fraction * nodes)])
    test = np.sort(order[int(train_fraction * nodes) :])
    return {
        "adjacency": normalized_adjacency(edges, nodes),
        "edges": edges.shape[1],
        "x": ember.tensor(x),
        "labels": labels,
        "train": ember.tensor(train),
        "test": test,
        "train_labels": ember.tensor(labels[train]),
        "classes": communities,
    }


def identity_adjacency(nodes: int) -> ember.sparse.SparseTensor:
    """The graph left out: each node its own only neighbour (the baseline)."""
    loops = np.arange(nodes)
    ones = np.ones(nodes, np.float32)
    return ember.sparse_coo_tensor(np.stack([loops, loops]), ones, (nodes, nodes)).coalesce()


def train(problem, *, epochs=100, capture=False, hidden=16, lr=0.01, seed=0):
    """Train a fresh GCN; (test accuracy, median epoch seconds, final loss)."""
    ember.manual_seed(seed)
    x = problem["x"]
    model = GCN(problem["adjacency"], x.shape[1], hidden, problem["classes"], 0.5)
    opt = ember.optim.Adam(model.parameters(), lr=lr, weight_decay=5e-4)
    train_nodes, train_labels = problem["train"], problem["train_labels"]

    def step():
        opt.zero_grad()
        out = model(x)
        loss = nn.functional.cross_entropy(out[train_nodes], train_labels)
        loss.backward()
        opt.step()
        return loss

    run = ember.function(step) if capture else step
    times, loss = [], None
    model.train()
    for _ in range(epochs):
        start = time.perf_counter()
        loss = run()
        times.append(time.perf_counter() - start)
    model.eval()
    with ember.no_grad():
        predicted = model(x).numpy().argmax(1)
    test = problem["test"]
    accuracy = float((predicted[test] == problem["labels"][test]).mean())
    return accuracy, float(np.median(times)), float(loss.item())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=3000)
    parser.add_argument("--communities", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--threads", type=int, default=None, help="ember's threads")
    args = parser.parse_args()
    if args.threads is not None:
        ember.set_num_threads(args.threads)
    problem = make_problem(args.nodes, args.communities)
    a = problem["adjacency"]
    print(
        f"stochastic block model: {args.nodes} nodes, {args.communities} communities, "
        f"{problem['edges']} edges; normalized adjacency nnz {a.nnz} "
        f"({a.nnz / args.nodes**2:.2%} dense); {ember.get_num_threads()} threads"
    )
    for capture in (False, True):
        accuracy, epoch, loss = train(problem, epochs=args.epochs, capture=capture)
        how = "ember.function" if capture else "eager"
        print(
            f"{how:>15}: test accuracy {accuracy:.3f} ({len(problem['test'])} nodes), "
            f"final loss {loss:.3f}, median epoch {epoch * 1e3:.2f} ms"
        )
    alone = dict(problem, adjacency=identity_adjacency(args.nodes))
    accuracy, _, _ = train(alone, epochs=args.epochs)
    print(f"{'without edges':>15}: test accuracy {accuracy:.3f} (the features alone)")


if __name__ == "__main__":
    main()
