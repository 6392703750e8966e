"""The typed rules an `OpDef` may declare, and who reads each.

An op states facts about itself as fields of its `OpDef` (ops/_registry.py), set where the op is
defined; the layers above read those fields and never compare op names. A field left at its
default means the op has no such fact. The fields:

Execution
* ``fast(*arrays, **attrs)``: a faster implementation of ``kernel`` (C, from kernels/), or None
  where it does not apply. `OpDef.run` tries it first; eager execution and generated code call
  ``run``, the interpreter only ``kernel``.
* ``compile(node) -> fn | None``: an implementation of one graph node with its attributes built
  in, ``fn(*arrays, out=None) -> tuple`` (runtime/codegen.py; a fused loop's C kernel).
* ``c_step(node) -> CStep | None``: the node as a step of the C graph runner (kernels/cstep.py,
  runtime/cgraph.py).
* ``accepts_out(node, compiled: bool) -> bool``: generated code may pass ``out=`` arrays (an
  arena's slots, plan/arena.py) to the kernel, or to the compiled implementation when
  ``compiled``. A one-ufunc kernel takes ``out=`` without saying so.
* ``overwrites_operand``: the compiled implementation reads each element of its operands before
  writing the same element of its result, so the result may take a dying operand's buffer
  (plan/liveness.py, runtime/codegen.py). One-ufunc kernels do so without saying so.

Fusion (transforms/fuse.py, transforms/epilogue.py, kernels/cfuse.py)
* ``c``: the op's C expression for fused elementwise loops, a format string over its operands
  ``{0}``, ``{1}``, ... with ``{T}`` the result's C type and ``{f}`` the ``f`` suffix of float
  math functions in float32 (elementwise ops only).
* ``reduction``: a `ReductionRule`: a fused loop may end in this reduction.
* ``epilogue``: an `EpilogueRule`: the op's result may take an elementwise epilogue.
* ``fused``: a `FusedRule`: the op is a fused group of other ops (what the tools show of it).

Memory and cost (plan/, tools/)
* ``as_view(x, **attrs)``: for a ``view`` op whose kernel copies where the strides allow no view
  (reshape), the kernel asked for a view only: it raises instead of copying (plan/layout.py
  works out strides on a stand-in array whose memory must never be read).
* ``workspace(node, layouts) -> int``: bytes the kernel allocates beyond its outputs.
* ``aliases``: the kernel returns input 0 or views of it without being a ``view`` op for
  autograd (split, stop_gradient): the memory plan shares their memory.
* ``flop_family``: the row the FLOP counter reports the op under, when not its kind.

Transforms
* ``batch``: how a call splits along a batch axis (ops/_batching.py; micro-batching); None: it
  does not; left unset, its kind's default.
* ``identity``: an `Identity`: constant operands the op passes the other operand through for.
* ``noop(x, **attrs) -> bool``: the op returns its input unchanged for these attributes.
* ``compose(inner_attrs, outer_attrs, in_type) -> attrs | None``: ``op(op(x, a), b)`` is
  ``op(x, compose(a, b))`` (or None where not exact).
* ``broadcast``: the op only broadcasts its input (an elementwise reader may read the input).
* ``unroll(graph, node, max_trips, folder) -> int | None``: a loop op unrolls itself
  (transforms/unroll.py drives it; control/ defines it).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Identity"]


class Identity(NamedTuple):
    """``op(c, x) == x`` for ``c == left``, ``op(x, c) == x`` for ``c == right`` (None: no such
    constant on that side). transforms/simplify.py compares constants bit for bit on floats, so
    ``x + 0.0``, which turns -0.0 into 0.0, is kept while ``x + (-0.0)`` goes."""

    left: float | None = None
    right: float | None = None
