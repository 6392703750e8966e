"""The HTML viewer in a real headless Chromium (Debian ``chromium``), driven through the DevTools
protocol: the page draws every node of the GPT block's training step, a real mouse click on a
node shows its shape in the details panel, the phase toggles and the search work, a screenshot
is taken, a 5,000-node graph finishes drawing, and a graph whose every text is markup runs no
script. Skips, saying why, without Chromium or the
websocket-client package."""

from __future__ import annotations

import json

import pytest

from ember.tools import viz

from .chromium import Chromium, unavailable
from .graphs import hostile, step, synthetic


@pytest.fixture(scope="module")
def browser():
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    chromium = Chromium.start()
    yield chromium
    chromium.close()


def stats(browser) -> dict:
    return json.loads(browser.evaluate("JSON.stringify(emberViewer.stats)"))


def centre_of(browser, selector: str) -> tuple[float, float]:
    box = browser.evaluate(
        f"JSON.stringify(document.querySelector({json.dumps(selector)}).getBoundingClientRect())"
    )
    box = json.loads(box)
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def test_gpt_block_viewer_click_shows_the_shape(browser, tmp_path):
    graph, phases = step("gpt")
    browser.open(viz.html(graph, tmp_path / "gpt.html", phases))
    counts = stats(browser)
    assert counts["nodes"] == len(graph.nodes)
    assert counts["drawn"] == len(graph.nodes)  # fitted: every node on screen
    # a real click where the first fused node with one output is drawn
    node = next(
        n for n in graph.call_nodes() if n.target.startswith("fused_") and len(n.outputs) == 1
    )
    where = json.loads(
        browser.evaluate(f"JSON.stringify(emberViewer.screenPosition('{node.name}'))")
    )
    browser.click(where["x"], where["y"])
    browser.next_frame()
    assert browser.evaluate("document.querySelector('#details h2').textContent") == f"%{node.name}"
    shape = browser.evaluate("document.querySelector('#details .shape').textContent")
    assert shape == "(" + ", ".join(str(d) for d in node.outputs[0].shape) + ")"
    assert browser.evaluate("document.querySelector('#details .dtype').textContent") == "float32"
    flops = browser.evaluate("document.querySelector('#details .flops').textContent")
    assert (
        int(flops.replace(",", ""))
        == viz.node_table(graph)["nodes"][graph.nodes.index(node)]["flops"]
    )
    png = browser.screenshot(str(tmp_path / "gpt_block.png"))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_phase_toggle_and_search(browser, tmp_path):
    graph, phases = step("gpt")
    browser.open(viz.html(graph, tmp_path / "gpt.html", phases))
    browser.click(*centre_of(browser, "#search"))
    browser.call("Input.insertText", text="matmul")
    matching = sum(1 for n in graph.nodes if "matmul" in n.target or "matmul" in n.name)
    assert browser.evaluate("document.getElementById('search-count').textContent") == (
        f"{matching} found"
    )
    browser.click(*centre_of(browser, 'input[data-phase="backward"]'))
    browser.next_frame()
    shown = sum(1 for n in graph.nodes if phases[n] != "backward")
    assert stats(browser)["drawn"] == shown


def test_5000_node_graph_renders(browser, tmp_path):
    graph = synthetic(5000)
    seconds = browser.open(viz.html(graph, tmp_path / "big.html"))
    counts = stats(browser)
    assert counts["nodes"] == 5000 and counts["drawn"] == 5000
    print(
        f"5,000 nodes: first frame {counts['firstFrameMs']:.0f} ms after the script started, "
        f"{seconds:.2f} s from navigation"
    )


def test_a_hostile_graph_runs_no_script_in_the_viewer(browser, tmp_path):
    graph, payload = hostile()
    browser.open(viz.html(graph, tmp_path / "hostile.html"))
    for node in graph.nodes:
        browser.evaluate(f"emberViewer.select({json.dumps(node.name)})")
        browser.next_frame()
        details = browser.evaluate("document.getElementById('details').textContent")
        assert payload in details  # shown as text ...
        assert browser.evaluate("document.querySelectorAll('#details img').length") == 0
    # any image's error handler would have run by now
    wait = "new Promise(r => setTimeout(r, 200))"
    browser.call("Runtime.evaluate", expression=wait, awaitPromise=True)
    assert browser.evaluate("String(window.__pwned)") == "undefined"  # ... never run
    assert browser.evaluate("document.title").startswith(payload)
    assert browser.evaluate("document.querySelectorAll('script').length") == 2
