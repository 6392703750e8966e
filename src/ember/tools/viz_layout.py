"""A layered (Sugiyama-style) layout of a DAG, in pure Python, for the HTML viewer.

`layered_layout(widths, edges)` places boxes top to bottom:

1. **Layers** by longest path from the sources (a node sits one layer below its deepest input),
   then pulled down towards its users where it has slack (so a constant or an input sits just
   above the op that reads it, not at the top of a 200-layer drawing).
2. **Order** within a layer by barycentric sweeps: down (each node at the mean position of its
   inputs), then up (of its users), a few times; the mean is over *all* neighbours whatever their
   layer, so no dummy nodes are needed for long edges (a backward pass reads forward values
   hundreds of layers up; dummies for those would multiply the work).
3. **Coordinates**: each node wants the mean x of its inputs; a left-to-right pass keeps the
   layer's order and a minimum gap, then the layer is shifted so it is centred on what its nodes
   wanted.

Linear in nodes plus edges per sweep: 5,000 nodes lay out in well under a second.
"""

from __future__ import annotations

__all__ = ["layered_layout", "LAYER_GAP", "NODE_GAP", "NODE_HEIGHT"]

LAYER_GAP = 70  # vertical distance between layer tops
NODE_GAP = 24  # horizontal space between neighbouring boxes
NODE_HEIGHT = 36
SWEEPS = 4


def _layers(n: int, preds: list[list[int]], succs: list[list[int]]) -> list[int]:
    """Longest-path layers (nodes are given in a topological order), then sinking nodes with
    slack to just above their first user."""
    layer = [0] * n
    for i in range(n):
        if preds[i]:
            layer[i] = 1 + max(layer[p] for p in preds[i])
    for i in reversed(range(n)):
        if succs[i]:
            layer[i] = max(layer[i], min(layer[s] for s in succs[i]) - 1)
    return layer


def _mean(values: list[float], default: float) -> float:
    return sum(values) / len(values) if values else default


def layered_layout(
    widths: list[float], edges: list[tuple[int, int]]
) -> tuple[list[float], list[float]]:
    """(x centres, y tops) for boxes of ``widths`` joined by ``edges`` (source, target), where
    every edge goes from a lower to a higher index (a topological order)."""
    n = len(widths)
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        if not a < b:
            raise ValueError(f"layered_layout: edge {a} -> {b} is not in topological order")
        preds[b].append(a)
        succs[a].append(b)
    layer = _layers(n, preds, succs)
    rows: list[list[int]] = [[] for _ in range(max(layer, default=-1) + 1)]
    for i in range(n):
        rows[layer[i]].append(i)

    position = [0.0] * n  # rank within the layer, normalised to [0, 1]

    def renumber(row: list[int]) -> None:
        scale = 1.0 / max(len(row) - 1, 1)
        for k, i in enumerate(row):
            position[i] = k * scale

    for row in rows:
        renumber(row)
    for _ in range(SWEEPS):
        for neighbours, order in ((preds, rows), (succs, rows[::-1])):
            for row in order:
                key = {i: _mean([position[j] for j in neighbours[i]], position[i]) for i in row}
                row.sort(key=key.__getitem__)
                renumber(row)

    xs = [0.0] * n
    ys = [0.0] * n
    for depth, row in enumerate(rows):
        wanted = [_mean([xs[p] for p in preds[i]], 0.0) for i in row]
        placed, right = [], None
        for i, want in zip(row, wanted):
            left_edge = want - widths[i] / 2
            if right is not None:
                left_edge = max(left_edge, right + NODE_GAP)
            placed.append(left_edge + widths[i] / 2)
            right = left_edge + widths[i]
        shift = _mean(wanted, 0.0) - _mean(placed, 0.0)
        for i, x in zip(row, placed):
            xs[i] = x + shift
            ys[i] = depth * LAYER_GAP
    return xs, ys
