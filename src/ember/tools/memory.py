"""Memory analysis: ``ember.tools.memory(fn_or_module, *inputs, optimizer=...)``.

What is analysed (built by tools/memory_build.py, then compiled, never run at its own size):

* a **module with an optimizer**: its training step, ``zero_grad``, forward, a loss on the
  output (``loss_fn(out, *targets)``, the mean of squares by default), ``backward``, the
  optimizer's ``step``; the steady-state step, with gradients and optimizer state existing (a
  copy of the model and optimizer takes one eager step on the first two samples first, so the
  caller's objects are never touched);
* a **module without one**: its forward pass under ``no_grad`` (inference), or with
  ``backward=True`` forward and backward (gradients written to ``.grad``);
* a **function** (or an ``ember.function``): the program it compiles to for ``inputs``;
* a **built-in model name** (``"mlp"``, ``"cnn"``, ``"gpt"``, ``"resnet"``): the reference
  training step of `ember.models.example_step`.

The numbers are the memory planner's (plan/memory.py) for the program as it runs after the
optimization passes: the same definition of peak as ``ember.plan.measure_peak`` (the arrays
fed to the call plus the most bytes NumPy allocates at once during it), checked against it in
the tests. The result is a `MemoryReport` (tools/memory_report.py: the parts, the per-layer
rows and the what-if helpers ``with_batch_size``, ``with_dtype``, ``with_checkpointing``); the
largest batch that fits a budget is `max_batch_size` (tools/whatif.py).
"""

from __future__ import annotations

from .memory_build import Spec, analyse
from .memory_report import MemoryReport

__all__ = ["MemoryReport", "memory"]


def memory(
    fn_or_module,
    *inputs,
    optimizer=None,
    loss_fn=None,
    targets=(),
    backward: bool = False,
    batch_size: int | None = None,
    dtype=None,
    memory_budget: int | None = None,
) -> MemoryReport:
    """The memory of ``fn_or_module(*inputs)`` (see the module docstring): a module (a
    training step with ``optimizer``; the loss is ``loss_fn(out, *targets)``, the mean of
    squares when None), a function, an ``ember.function`` or a built-in model name.
    ``batch_size`` resizes the batch dimension of the inputs and targets, ``dtype`` converts
    a module, its optimizer state and floating inputs (pure low precision),
    ``memory_budget`` turns on activation checkpointing to fit that many bytes."""
    spec = Spec(
        target=fn_or_module,
        inputs=tuple(inputs),
        optimizer=optimizer,
        loss_fn=loss_fn,
        targets=tuple(targets) if isinstance(targets, (tuple, list)) else (targets,),
        backward=backward,
        batch_size=batch_size,
        dtype=dtype,
        memory_budget=memory_budget,
    )
    return analyse(spec)
