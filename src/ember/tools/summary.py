"""``ember.summary(model, input_shape)``: a torchinfo-like table of a model's layers.

The model is captured once on an input of ``input_shape`` (zeros; nothing runs, only shapes
are computed), without gradients and without optimization passes. Forward hooks on every
module record the types of its outputs; the FLOP counter (tools/flops.py) attributes the
graph's nodes to modules through their scopes (graph/scope.py). One row per module, in call
order, indented by depth:

* **output shape** of its (last) call, and its **activations**: the bytes of its outputs, over
  every call of it;
* **params**: the parameters the module holds itself (its submodules' are on their rows; the
  total is under the table);
* **MACs**: multiply-adds of its matrix products and convolutions, its submodules' included
  (half the FLOPs of the families PyTorch's flop counter counts).

Totals: parameters (and trainable ones), their bytes, the MACs of the whole forward pass, and
the activations of the leaf modules (what a training step keeps alive, as torchinfo's
"forward pass size"). The table is drawn with rich.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from .flops import MAC_FAMILIES, count_graphs

__all__ = ["LayerRow", "ModelSummary", "summary"]


@dataclass
class LayerRow:
    """One module of the summary (see the module docstring for what each field holds)."""

    name: str  # the scope path, e.g. "GPTBlock.qkv"
    type: str
    depth: int
    output_shapes: list[tuple] = field(default_factory=list)
    params: int = 0
    trainable: int = 0
    macs: int = 0
    activation_bytes: int = 0
    is_leaf: bool = True


@dataclass
class ModelSummary:
    """What `summary` found: ``rows`` (one `LayerRow` per module called) and the totals."""

    rows: list[LayerRow]
    input_shape: tuple
    total_params: int
    trainable_params: int
    param_bytes: int
    total_macs: int
    activation_bytes: int

    def table(self):
        """The summary as a ``rich.table.Table``."""
        from rich.table import Table

        table = Table(title=f"input {_shape_text(self.input_shape)}", title_justify="left")
        table.add_column("Layer (type)")
        table.add_column("Output shape")
        table.add_column("Params", justify="right")
        table.add_column("MACs", justify="right")
        table.add_column("Activations", justify="right")
        for row in self.rows:
            label = row.name.rsplit(".", 1)[-1] if row.depth else row.name
            shape = _shape_text(row.output_shapes[-1]) if row.output_shapes else "--"
            if len(row.output_shapes) > 1 and len(set(row.output_shapes)) > 1:
                shape += f" (+{len(row.output_shapes) - 1})"
            table.add_row(
                "  " * row.depth + f"{label} ({row.type})",
                shape,
                f"{row.params:,}" if row.params or row.is_leaf else "--",
                _si(row.macs),
                _bytes(row.activation_bytes),
            )
        return table

    def totals_text(self) -> str:
        return "\n".join(
            [
                f"Total params: {self.total_params:,} ({_bytes(self.param_bytes)})",
                f"Trainable params: {self.trainable_params:,}",
                f"Non-trainable params: {self.total_params - self.trainable_params:,}",
                f"Total MACs: {_si(self.total_macs)}",
                f"Activations (leaf outputs): {_bytes(self.activation_bytes)}",
            ]
        )

    def __str__(self) -> str:
        from rich.console import Console

        out = io.StringIO()
        console = Console(  # (markup off: layer names may come from files)
            file=out, width=120, color_system=None, force_terminal=False, markup=False
        )
        console.print(self.table())
        console.print(self.totals_text())
        return out.getvalue().rstrip("\n")


def _shape_text(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _si(n: int) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return str(n)


def _bytes(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _tensors(out) -> list:
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _tensors(item)]
    if isinstance(out, dict):
        return [t for item in out.values() for t in _tensors(item)]
    return [out] if hasattr(out, "shape") and hasattr(out, "dtype") else []


def summary(model, input_shape=None, *, input_data=None, dtype=None, verbose: bool = True):
    """Print (with ``verbose``) and return a `ModelSummary` of ``model`` called on zeros of
    ``input_shape`` (a shape, or a list of shapes for several inputs) of ``dtype`` (the default
    dtype when None), or on the tensors ``input_data``."""
    from ..autograd import no_grad
    from ..capture.trace import trace
    from ..nn import Module
    from ..ops.creation import zeros

    if not isinstance(model, Module):
        raise TypeError(f"summary: expected an ember.nn.Module, got {type(model).__name__}")
    if (input_shape is None) == (input_data is None):
        raise ValueError("summary: give exactly one of input_shape and input_data")
    if input_data is None:
        several = bool(input_shape) and isinstance(input_shape[0], (tuple, list))
        shapes = [tuple(s) for s in input_shape] if several else [tuple(input_shape)]
        inputs = [zeros(*s, dtype=dtype) if dtype is not None else zeros(*s) for s in shapes]
    else:
        inputs = list(input_data) if isinstance(input_data, (tuple, list)) else [input_data]

    root = type(model).__name__
    modules = list(model.named_modules())
    rows: dict[int, LayerRow] = {}  # id(module) -> row, in call order
    called: list[int] = []

    def pre_hook(module, args):
        if id(module) not in called:  # call order, a parent before its children
            called.append(id(module))

    def hook(module, args, output):
        row = rows[id(module)]
        for t in _tensors(output):
            row.output_shapes.append(tuple(t.shape))
            row.activation_bytes += _numel(t.shape) * t.dtype.itemsize

    handles = []
    for qualified, module in modules:
        own = list(module.parameters(recurse=False))
        rows[id(module)] = LayerRow(
            name=f"{root}.{qualified}" if qualified else root,
            type=type(module).__name__,
            depth=qualified.count(".") + 1 if qualified else 0,
            params=sum(_numel(p.shape) for p in own),
            trainable=sum(_numel(p.shape) for p in own if p.requires_grad),
            is_leaf=next(iter(module.children()), None) is None,
        )
        handles.append(module.register_forward_pre_hook(pre_hook))
        handles.append(module.register_forward_hook(hook))
    try:
        with no_grad():
            traced = trace(model, *inputs, opt_level=0, executor="interpreter")
    finally:
        for handle in handles:
            handle.remove()

    products = count_graphs({"forward": traced.graph}).only(*MAC_FAMILIES)
    by_module = products.by_module
    for row in rows.values():
        counts = by_module.get(row.name)
        row.macs = counts.forward // 2 if counts is not None else 0
    # rows in call order; modules never called (unused branches) are left out
    ordered = [rows[i] for i in called]
    params = {id(p): p for p in model.parameters()}.values()
    summary_ = ModelSummary(
        rows=ordered,
        input_shape=tuple(inputs[0].shape),
        total_params=sum(_numel(p.shape) for p in params),
        trainable_params=sum(_numel(p.shape) for p in params if p.requires_grad),
        param_bytes=sum(_numel(p.shape) * p.dtype.itemsize for p in params),
        total_macs=products.forward // 2,
        activation_bytes=sum(r.activation_bytes for r in ordered if r.is_leaf),
    )
    if verbose:
        print(summary_)
    return summary_


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
