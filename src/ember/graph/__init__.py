"""The graph IR (ir.py), its printer, verifier and symbolic dimensions; see DESIGN.md."""

from ..symbolic import SymDim, is_symbolic, sym
from .ir import Graph, GraphError, Node, Value
from .load import load_graph
from .serialize import GraphFileError, save_graph

__all__ = [
    "Graph",
    "GraphError",
    "GraphFileError",
    "Node",
    "SymDim",
    "Value",
    "is_symbolic",
    "load_graph",
    "save_graph",
    "sym",
]
