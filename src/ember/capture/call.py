"""What one trace recorded: the `CapturedCall`, and the typed `Feed` of each graph input.

A trace (capture/trace.py) records the joint graph of a call and, per graph input, where a
later call takes that input's array from:

* `ArgFeed`: a tensor argument of the call;
* `ArgGradFeed`: that argument's ``.grad`` (a recorded backward accumulates onto it);
* `TensorFeed`: an eager tensor the function read (a parameter, a buffer, a closed-over
  tensor), captured as an extra input and fed with its data at each call;
* `HyperFeed`: an optimizer's hyper-parameter (optim/optimizer.py `HyperParameter`), fed with
  the param group's value at each call, so a scheduler's changes reach the compiled step;
* `GradOfFeed`: the gradient a captured tensor has at call time (backward accumulates onto
  whatever ``.grad`` is then);
* `CotangentFeed`: a cotangent of the AOT backward graph (capture/aot.py), fed by eager
  autograd's backward pass, not by the call.

Code asks a feed what it needs (its array, the eager tensor behind it, its part of a memory
plan) instead of comparing kind names. The `CapturedCall` also holds the result's structure,
how many graph outputs are the function's result, and the `Writeback`s (capture/writebacks.py) that
the remaining outputs feed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..plan.program import ProgramParts
from ..runtime.codegen import planned_in_place
from .state import Reachable, state_parts
from .writebacks import Writeback, WritebackKind

__all__ = [
    "ArgFeed",
    "ArgGradFeed",
    "CapturedCall",
    "CotangentFeed",
    "Feed",
    "GradOfFeed",
    "HyperFeed",
    "TensorFeed",
]


class Feed:
    """Where a graph input's array comes from at a call (see the module docstring)."""

    def array(self, leaves: list):
        """The array a call with tensor arguments ``leaves`` feeds (None: not fed by it)."""
        raise NotImplementedError

    def eager_tensor(self, leaves: list):
        """The eager tensor whose data is fed (for AOT autograd: it may require grad, and its
        version is checked), or None."""
        return None

    def memory_part(self, known: dict) -> str | None:
        """The part of a memory plan (plan/memory.py) the input counts in, None for the
        planner's default; ``known``: the parts of the state (`state.state_parts`)."""
        return None


@dataclass(frozen=True)
class ArgFeed(Feed):
    index: int  # among the call's tensor arguments

    def array(self, leaves):
        return leaves[self.index]._data

    def eager_tensor(self, leaves):
        return leaves[self.index]


@dataclass(frozen=True)
class ArgGradFeed(Feed):
    index: int

    def array(self, leaves):
        return leaves[self.index].grad._data

    def memory_part(self, known):
        return "gradients"


@dataclass(frozen=True, eq=False)  # (tensors compare by identity)
class TensorFeed(Feed):
    tensor: object

    def array(self, leaves):
        return self.tensor._data

    def eager_tensor(self, leaves):
        return self.tensor

    def memory_part(self, known):
        return known.get(id(self.tensor), "parameters" if self.tensor.requires_grad else "inputs")


@dataclass(frozen=True, eq=False)
class HyperFeed(TensorFeed):
    """A `TensorFeed` of a `HyperParameter`: it feeds the param group's value of the call."""

    def array(self, leaves):
        return self.tensor.current()

    def memory_part(self, known):
        return "optimizer state"


@dataclass(frozen=True, eq=False)
class GradOfFeed(Feed):
    owner: object  # the tensor whose .grad is fed

    def array(self, leaves):
        return self.owner.grad._data

    def memory_part(self, known):
        return "gradients"


@dataclass(frozen=True)
class CotangentFeed(Feed):
    index: int  # among the AOT backward's cotangents

    def array(self, leaves):
        return None  # fed by the backward pass (capture/aot.py), not by the call


@dataclass
class CapturedCall:
    """One traced call, before any optimization: its joint ``graph`` (as traced), a `Feed`
    per graph input, the structure of the function's result (``out_spec``, graph/tree.py;
    None when it returned None), ``n_user`` graph outputs that are that result, then one per
    output-taking writeback (then, with an AOT backward, the gradients). ``backward_start``:
    the node position where a recorded ``loss.backward()`` began (AOT partitioning splits
    there); ``reads_grads``: whether the trace read a ``.grad`` or ran backward (if not, the
    graph does not depend on which tensors have gradients); ``reach``: the state it found."""

    graph: object
    feeds: list[Feed]
    out_spec: tuple | None
    n_user: int
    writebacks: list[Writeback]
    backward_start: int | None = None
    reads_grads: bool = True
    reach: Reachable | None = None
    # (module, flag): the training flags the trace changed, which each run sets again
    modes: list = field(default_factory=list)
    # per result: whether the function returned a detach of its value (``t.detach()``,
    # ``t.data``), which the graph may hold as the value itself
    detached: tuple = ()
    # per result: the eager tensor the function returned (a captured tensor, a parameter, an
    # eager detach of one: ``m.weight.detach()`` outside a graph value), else None
    eager_results: tuple = ()
    # the values a recorded backward() ran from (the losses), in ``graph``: the forward pass is
    # their ancestors, which transforms/checkpoint.py recomputes from when no result is a loss
    backward_roots: tuple = ()

    def inplace(self) -> dict:
        """Output position -> input position for the 'data' writebacks of captured tensors:
        the generated code may compute those updates straight into the tensors' memory."""
        inputs = {id(f.tensor): i for i, f in enumerate(self.feeds) if isinstance(f, TensorFeed)}
        pairs, k = {}, self.n_user
        for w in self.writebacks:
            if not w.takes_output:
                continue
            if w.kind is WritebackKind.DATA and id(w.tensor) in inputs:
                pairs[k] = inputs[id(w.tensor)]
            k += 1
        return pairs

    def memory_parts(self) -> ProgramParts:
        """How the graph's inputs and outputs count in a memory plan, and the in-place updates
        the code generator chooses for a graph with them."""
        known = state_parts(self.reach)
        input_parts = {}
        for i, feed in enumerate(self.feeds):
            part = feed.memory_part(known)
            if part is not None:
                input_parts[i] = part
        taking = [w for w in self.writebacks if w.takes_output]
        output_parts = {self.n_user + k: w.memory_part(known) for k, w in enumerate(taking)}
        inplace = self.inplace()
        return ProgramParts(
            input_parts, output_parts, self.n_user, lambda graph: planned_in_place(graph, inplace)
        )
