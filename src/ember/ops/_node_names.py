"""PyTorch's names of backward nodes, as the Python classes of ember's tape nodes.

PyTorch programs read a result's history by class: ``type(y.grad_fn).__name__`` is
``"MulBackward0"``, ``print(y.grad_fn)`` shows ``<MulBackward0 object at ...>``. An op names
its nodes with its ``grad_fn`` rule (ops/_rules.py): a name, or ``(attrs, in_types) -> name``
where PyTorch's node depends on the call (``linear`` of a matrix with a bias is
``AddmmBackward0``); left unset, its own name in CamelCase with ``Backward0``. A composite public
function whose result PyTorch makes with one node of its own (``mean``: ``MeanBackward0``)
renames its result's fresh node with `rename_node`.

The classes are made here, one per (base class, name), as empty subclasses of the tape's node
class (autograd.py), which sets itself as `NODE_BASE` when imported: ops stays below autograd.
"""

from __future__ import annotations

import functools

NODE_BASE: type | None = None  # autograd_node.Node, set by autograd_node.py
_CLASSES: dict = {}


def camel_name(op) -> str:
    """The name PyTorch's convention gives an op's node: ``layer_norm`` -> ``LayerNormBackward0``
    (a control op, a compiled function or ``cond``, is a Python-level function in PyTorch, whose
    nodes carry no number)."""
    base = "".join(part.capitalize() for part in op.name.split("_"))
    return base + ("Backward" if op.kind == "control" else "Backward0")


def node_class(base: type, name: str) -> type:
    """The subclass of ``base`` named ``name`` (made once): the class of nodes of that name."""
    key = (base, name)
    cls = _CLASSES.get(key)
    if cls is None:
        # no new slots: a node's class may be reassigned among these (rename_node)
        namespace = {"__slots__": (), "__module__": base.__module__, "__qualname__": name}
        cls = _CLASSES[key] = type(name, (base,), namespace)
    return cls


def op_node_name(op, attrs, in_types) -> str:
    """The name of the node recording a call of ``op`` (its ``grad_fn`` rule, else its own)."""
    rule = op.grad_fn
    if rule is None:
        return camel_name(op)
    return rule if isinstance(rule, str) else rule(attrs, in_types)


def pool_node_name(pattern: str, in_types) -> str:
    """A pooling node's name for its number of spatial dimensions (``pattern`` holds ``{}``);
    PyTorch pools a 1-d signal as a 2-d one and squeezes the result (SqueezeBackward1)."""
    spatial = len(in_types[0].shape) - 2
    return "SqueezeBackward1" if spatial == 1 else pattern.format(spatial)


def nll_node_name(attrs, in_types) -> str:
    """PyTorch's node of nll_loss (and cross_entropy's class-index form): NllLoss2DBackward0
    for a 4-d input, also for 3-d and 5-d+ ones reduced (reshaped to 4-d; unreduced, the view
    back is the last node), NllLossBackward0 for (N, C) and (C,) inputs."""
    ndim = len(in_types[0].shape)
    if ndim <= 2:
        return "NllLossBackward0"
    if ndim == 4 or attrs["reduction"] != "none":
        return "NllLoss2DBackward0"
    return "ViewBackward0"


def rename_node(result, name: str, *sources):
    """Give ``result``'s node PyTorch's ``name`` where a composite made it for this call (not
    where ``result`` is one of its ``sources`` returned as is, whose node is someone else's);
    returns ``result``. Symbolic tensors (graph building) have no tape node: left alone."""
    fn = getattr(result, "grad_fn", None)
    if fn is None or NODE_BASE is None or not isinstance(fn, NODE_BASE):
        return result
    if any(result is s for s in sources):
        return result
    fn.__class__ = node_class(NODE_BASE, name)
    return result


def renames(name):
    """Decorator of a composite public function whose result PyTorch makes with one node of its
    own: ``name``, or ``name(*args, **kwargs)`` giving it (None: leave the result's node) for
    the call. Every tensor of a tuple result is renamed (PyTorch's var_mean names both
    outputs' node; integer indices have no node to rename); an argument returned as it is
    keeps its node."""

    def decorate(fn):
        @functools.wraps(fn)
        def renamed(*args, **kwargs):
            result = fn(*args, **kwargs)
            node = name(*args, **kwargs) if callable(name) else name
            if node is None:
                return result
            sources = [a for a in (*args, *kwargs.values()) if hasattr(a, "grad_fn")]
            for r in result if isinstance(result, tuple) else (result,):
                rename_node(r, node, *sources)
            return result

        return renamed

    return decorate
