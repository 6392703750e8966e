"""``ember inspect`` of a graph file whose graph name or node scopes hold rich's markup: the page
is printed with rich, which read ``[/bold]`` in a name as a closing tag and raised a raw
``rich.errors.MarkupError`` (and silently dropped ``[link=...]``/``[bold]``, so the page showed
another name than the file's). The consoles of the tools print text as given now
(``markup=False``): every hostile name appears on the page exactly as stored, and no escape
sequence (an OSC 8 hyperlink, a colour) is written."""

from __future__ import annotations

import pytest

import ember
from ember.graph import Graph
from ember.ops import REGISTRY
from ember.tools.inspect import inspect_graph_file
from ember.types import TensorType

NAMES = [
    "x[/bold]y",
    "G[bold red]RED[/bold red]",
    "[link=j:a]c[/link]",
    "a[/]b[",
    "\\[escaped\\]",
]


@pytest.mark.parametrize("name", NAMES)
def test_a_hostile_name_is_printed_as_stored(tmp_path, name):
    graph = Graph(name)
    x = graph.add_input(TensorType((2, 3), ember.float32), "x")
    y = graph.add_call(REGISTRY["relu"], [x])
    y.scope = f"layer{name}"
    graph.set_outputs([y.outputs[0]])
    path = tmp_path / "g.graph"
    graph.save(path)
    page = inspect_graph_file(str(path))
    assert f"memory of {name}" in page
    assert f"layer{name}".split(":")[0] in page  # (the layer table cuts a scope at a colon)
    assert "\x1b" not in page
