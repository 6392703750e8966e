"""The graph IR (ir.py), its printer, verifier and symbolic dimensions; see DESIGN.md."""

from .ir import Graph, GraphError, Node, Value
from .symbolic import SymDim, is_symbolic, sym

__all__ = ["Graph", "GraphError", "Node", "SymDim", "Value", "is_symbolic", "sym"]
