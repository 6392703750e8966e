"""What the graph's readers and the IR share without importing each other: `GraphBase`, the
base class of `Graph` (ir.py) that the printer, the verifier, the drawing and the file writer
recognise nested graphs by (cond branches, loop bodies), and `GraphError`."""

from __future__ import annotations

from ..errors import EmberError

__all__ = ["GraphBase", "GraphError"]


class GraphBase:
    """Base class of `Graph`: lets modules that `Graph`'s methods call (printer, verify, dot,
    serialize) tell a graph-valued attribute without importing ir.py."""

    __slots__ = ()


class GraphError(EmberError):
    """A malformed graph or a misuse of the graph API."""
