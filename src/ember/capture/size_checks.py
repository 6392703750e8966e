"""A captured graph over symbolic sizes checks, on every call, the size equalities it was built on.

Tracing with ``None`` dimensions (``input_signature=[TensorSpec((None, 3, None, None))]``,
``dynamic=True``) takes two sizes to be equal, or a division to be exact, when that holds for
aligned sizes (symbolic.py; the decisions are recorded by symbolic_assumptions.py while the call
is captured). `SizeCheck` binds each symbol to the argument dimension it names and refuses a
call whose sizes break one of them, naming the sizes, the assumption and the argument's shape,
before any kernel meets operands that disagree.
"""

from __future__ import annotations

from ..errors import ShapeError
from ..symbolic import SymDim
from ..symbolic_assumptions import first_broken
from .call import ArgFeed


class SizeCheck:
    """The assumptions of one captured call and where each of their symbols is read."""

    def __init__(self, graph, feeds, assumptions: tuple):
        self.assumptions = assumptions
        self.graph_name = graph.name
        self.sources: dict[str, tuple[int, int]] = {}
        for value, feed in zip(graph.inputs, feeds):
            if not isinstance(feed, ArgFeed):
                continue
            for axis, d in enumerate(value.type.shape):
                name = d.symbol() if isinstance(d, SymDim) else None
                if name is not None:
                    self.sources.setdefault(name, (feed.index, axis))

    def __call__(self, leaves: list) -> None:
        bindings = {}
        for name, (index, axis) in self.sources.items():
            shape = leaves[index].shape
            if axis < len(shape):
                bindings[name] = int(shape[axis])
        broken = first_broken(self.assumptions, bindings)
        if broken is None:
            return
        sizes = ", ".join(f"{n}={bindings[n]}" for n in sorted(broken.symbols()))
        index, _ = self.sources[sorted(broken.symbols())[0]]
        raise ShapeError(
            f"the graph was captured over symbolic sizes assuming "
            f"{broken.describe(bindings)}, which these sizes ({sizes}; argument {index} has "
            f"shape {tuple(leaves[index].shape)}) break; the model needs sizes for which that "
            "holds (an image size its strides divide), or call it eagerly",
            op=self.graph_name,
        )
