"""Capturing programs into graphs: the builder mode, symbolic tensors and ``ember.trace``."""

from ..graph.builder import GraphBuilder
from ..graph.symbolic_tensor import SymbolicTensor
from .trace import GraphFunction, trace

__all__ = ["GraphBuilder", "GraphFunction", "SymbolicTensor", "trace"]
