"""How fast the HTML graph viewer is on large graphs, against Graphviz on the same graphs.

For synthetic graphs of N nodes (unary and binary elementwise ops over recent values, about 1.5
edges per node; tests/tools/graphs.py) and the GPT block's training step:

* ``write``: ember.tools.viz.html (Python layout and the page), seconds;
* ``load``: headless Chromium from navigation to the viewer's first frame, seconds;
* ``draw fit`` / ``draw 1x``: the median time of one canvas frame with the whole graph on screen,
  and at zoom 1 while panning (drags dispatched as real mouse events), milliseconds;
* ``dot``: Graphviz's ``dot -Tsvg`` on the same graph (the peer: a static drawing), seconds,
  with the ratio dot / (write + load); skipped above ``--dot-max`` nodes (it grows fast).

Needs Debian's chromium (and graphviz for the peer) and websocket-client:

    python benchmarks/viz_viewer.py [--sizes 1000 5000] [--dot-max 2000] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from ember.tools import viz  # noqa: E402
from tests.tools.chromium import Chromium, unavailable  # noqa: E402
from tests.tools.graphs import step, synthetic  # noqa: E402


def draw_times(browser, reps: int) -> tuple[float, float]:
    """Median ms of a frame at the fitted view, and at zoom 1 while dragging."""
    fit = []
    for _ in range(reps):
        browser.evaluate("document.getElementById('fit').click()")
        browser.next_frame()
        fit.append(browser.evaluate("emberViewer.stats.lastDrawMs"))
    browser.evaluate("emberViewer.view.scale = 1; emberViewer.select(-1)")
    browser.evaluate("document.getElementById('fit').click(); emberViewer.view.scale = 1")
    panned = []
    x, y = 500.0, 400.0
    browser.call("Input.dispatchMouseEvent", type="mousePressed", x=x, y=y, button="left")
    for k in range(reps * 4):
        y -= 25.0 if k % 2 == 0 else -5.0
        browser.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y, button="left")
        browser.next_frame()
        panned.append(browser.evaluate("emberViewer.stats.lastDrawMs"))
    browser.call("Input.dispatchMouseEvent", type="mouseReleased", x=x, y=y, button="left")
    return statistics.median(fit), statistics.median(panned)


def dot_seconds(graph, phases, limit: float) -> float | None:
    started = time.perf_counter()
    try:
        subprocess.run(
            ["dot", "-Tsvg", "-o", os.devnull],
            input=viz.dot(graph, phases=phases).encode(),
            check=True,
            timeout=limit,
        )
    except (subprocess.TimeoutExpired, FileNotFoundError):
        return None
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--dot-max", type=int, default=2000)
    parser.add_argument("--dot-timeout", type=float, default=300.0)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    reason = unavailable()
    if reason:
        sys.exit(f"viz_viewer: {reason}")
    cases = [("gpt step", *step("gpt"))] + [
        (f"synthetic {n}", synthetic(n), None) for n in args.sizes
    ]
    browser = Chromium.start()
    folder = tempfile.mkdtemp(prefix="ember-viz-bench-")
    print(
        f"{'graph':16} {'nodes':>6} {'write s':>8} {'load s':>7} {'draw fit ms':>11} "
        f"{'draw 1x ms':>10} {'dot s':>7} {'dot / (write+load)':>18}"
    )
    try:
        for label, graph, phases in cases:
            path = os.path.join(folder, "page.html")
            writes, loads = [], []
            for _ in range(args.reps):
                started = time.perf_counter()
                viz.html(graph, path, phases)
                writes.append(time.perf_counter() - started)
                loads.append(browser.open(path))
                stats = json.loads(browser.evaluate("JSON.stringify(emberViewer.stats)"))
                assert stats["drawn"] == stats["nodes"] == len(graph.nodes), stats
            fit, panned = draw_times(browser, args.reps)
            write, load = statistics.median(writes), statistics.median(loads)
            dot = None
            if len(graph.nodes) <= args.dot_max:
                dot = dot_seconds(graph, phases, args.dot_timeout)
            dot_text = "-" if dot is None else f"{dot:.2f}"
            ratio = "-" if dot is None else f"{dot / (write + load):.1f}x"
            print(
                f"{label:16} {len(graph.nodes):6d} {write:8.3f} {load:7.3f} {fit:11.1f} "
                f"{panned:10.1f} {dot_text:>7} {ratio:>18}",
                flush=True,
            )
    finally:
        browser.close()


if __name__ == "__main__":
    main()
