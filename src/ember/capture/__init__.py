"""Capturing programs into graphs: the builder mode, symbolic tensors and ``ember.trace``."""

from .builder import GraphBuilder
from .symbolic import SymbolicTensor
from .trace import GraphFunction, trace

__all__ = ["GraphBuilder", "GraphFunction", "SymbolicTensor", "trace"]
