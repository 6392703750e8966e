"""The eager backward engine (the tape) and grad-mode switches.

Eager execution records one `Node` per op call whose inputs need gradients (see ``eager.py``).
A node keeps the op, its attributes, the tensors its VJP reads (and their versions, to detect
in-place overwrites) and ``_edges``: for each input, the node that produced it (or the
`AccumulateGrad` of a leaf). ``backward`` walks that DAG in reverse creation order, summing the
gradients that reach a value along several paths before its producer runs (multi-path
accumulation), and calls each op's VJP. VJPs are written in ember ops, so running them with
grad mode on (``create_graph=True``) records a graph of the backward pass: higher-order gradients.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import sys

import numpy as np

from . import _meta
from . import autograd_graph as graph
from . import autograd_node_hooks as _node_hooks
from .autograd_accumulate import AccumulateGrad, _run_hooks
from .autograd_graph import saved_tensors_hooks
from .autograd_node import Node, _edge
from .errors import AutogradError, ShapeError
from .grad_mode import (
    _anomaly,
    check_gradients,
    detect_anomaly,
    enable_grad,
    is_anomaly_enabled,
    is_grad_enabled,
    no_grad,
    set_detect_anomaly,
    set_grad_enabled,
)
from .ops import _autocast
from .ops._registry import TensorBase
from .ops._unrecorded import direct_sum
from .ops.binary import ADD
from .tensor import Tensor

__all__ = [
    "graph",
    "backward",
    "detect_anomaly",
    "is_anomaly_enabled",
    "set_detect_anomaly",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "Node",
    "AccumulateGrad",
    "saved_tensors_hooks",
]

# the recording ember.profiler.profile, set by it: backward then runs inside named ranges
_profiler = None
_NULL = contextlib.nullcontext()


# ------------------------------------------------------------------------------------ engine


def _as_tuple(x):
    if x is None:
        return ()
    if isinstance(x, TensorBase):  # (a symbolic tensor too)
        return (x,)
    return tuple(x)


_ONES: dict = {}  # NumPy dtype -> a 0-d one, copied as a scalar output's implicit gradient


def _root_grads(outputs, grad_outputs, create_graph):
    roots = []
    for i, (out, g) in enumerate(itertools.zip_longest(outputs, grad_outputs)):
        if not isinstance(out, Tensor):
            raise TypeError(f"backward: expected tensors, got {type(out).__name__}")
        if not out._requires_grad:
            raise AutogradError(
                f"element {i} of the outputs does not require grad and has no grad_fn; "
                "did you compute it under no_grad, or from tensors without requires_grad=True?",
                op="backward",
            )
        if g is None:
            if out._data.dtype.kind == "c":
                raise AutogradError(
                    f"grad can be implicitly created only for real scalar outputs, but got "
                    f"{out.dtype}; pass gradient= or take a real loss (abs, .real)",
                    op="backward",
                )
            if out._data.size != 1:
                raise AutogradError(
                    f"grad can be created implicitly only for scalar outputs, but output {i} "
                    f"has shape {tuple(out.shape)}; pass gradient= (a tensor of that shape)",
                    op="backward",
                )
            data = out._data
            if type(data) is np.ndarray and data.ndim == 0:  # (a loss: a copy of a kept one)
                one = _ONES.get(data.dtype)
                if one is None:
                    one = _ONES[data.dtype] = np.ones((), data.dtype)
                g = Tensor._wrap(one.copy())
            else:
                ones = np.ones if not _meta.is_meta(data) else _meta.stand_in  # (no data)
                g = Tensor._wrap(ones(data.shape, data.dtype))
        elif not isinstance(g, Tensor):
            g = Tensor(np.asarray(g, dtype=out._data.dtype))
        # (the arrays' shapes: no Size made)
        if tuple(g._data.shape) != tuple(out._data.shape):
            raise ShapeError(
                f"gradient of shape {tuple(g.shape)} given for an output of shape "
                f"{tuple(out.shape)}",
                op="backward",
            )
        node = out.grad_fn if out.grad_fn is not None else _edge(out)[0]
        roots.append((node, out._output_nr, g))
    return roots


def _collect(roots):
    """Dependency counts of every node reachable from the roots."""
    deps: dict = {}
    seen = set()
    stack = [node for node, _, _ in roots]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for edge in node._edges:
            if edge is None:
                continue
            child = edge[0]
            deps[child] = deps.get(child, 0) + 1
            if child not in seen:
                stack.append(child)
    return deps, seen


def _needed(seen, targets):
    """Nodes from which some target node is reachable (only these must run for autograd.grad)."""
    needed = set(targets)
    changed = True
    order = sorted(seen, key=lambda n: n._seq)  # children are created before parents
    while changed:
        changed = False
        for node in order:
            if node in needed:
                continue
            if any(e is not None and e[0] in needed for e in node._edges):
                needed.add(node)
                changed = True
    return needed


def _run(roots, retain_graph, create_graph, capture=None):
    """Execute the backward pass. ``capture`` maps (node, output_nr) to a slot index; when given,
    gradients arriving there are returned instead of accumulated into leaves. Autocast is off
    meanwhile: each VJP computes in the dtypes its forward recorded (ops/_autocast.py)."""
    return _autocast.run_suspended(_run_backward, roots, retain_graph, create_graph, capture)


def _slots(node) -> int:
    """How many gradients ``node`` receives: one per output (one for a leaf's sink)."""
    return 1 if type(node) is AccumulateGrad else len(node.out_types)


def _run_backward(roots, retain_graph, create_graph, capture):
    deps, seen = _collect(roots)
    # node -> its outputs' gradients so far, a list (None where none arrived yet); a node is in
    # it once some gradient reached it
    buffers: dict = {}
    for node, nr, g in roots:
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * max(_slots(node), nr + 1)
        buf[nr] = g if buf[nr] is None else _sum(buf[nr], g)

    needed = _needed(seen, {key[0] for key in capture}) if capture is not None else None
    captured: dict = {}
    claimed: set = set()
    # (a node's sequence number is unique: the heap never compares nodes)
    ready = [(-node._seq, node) for node in {n for n, _, _ in roots} if deps.get(node, 0) == 0]
    heapq.heapify(ready)
    heappop, heappush = heapq.heappop, heapq.heappush
    pop_grads = buffers.pop
    prof = _profiler
    with set_grad_enabled(create_graph), prof.range("backward", "backward") if prof else _NULL:
        while ready:
            node = heappop(ready)[1]
            grads = pop_grads(node, None)
            if capture is not None and grads is not None:
                for nr, g in enumerate(grads):
                    slot = capture.get((node, nr)) if g is not None else None
                    if slot is not None:
                        captured[slot] = g
            if type(node) is AccumulateGrad:
                if capture is None and grads is not None and grads[0] is not None:
                    node.accumulate(grads[0], create_graph, claimed)
                continue
            if needed is not None and node not in needed:
                _release_ready(node, deps, ready, retain_graph)
                continue
            if grads is not None:
                if node._pre_hooks:
                    for nr, hooks in node._pre_hooks.items():
                        if nr < len(grads) and grads[nr] is not None:
                            grads[nr] = _run_hooks(hooks, grads[nr])
                if node._retained:  # after the hooks, as in PyTorch
                    _keep_retained(node._retained, grads)
                n_out = len(node.out_types)
                if len(grads) != n_out:  # (a root's output number past the node's outputs)
                    grads = [grads[i] if i < len(grads) else None for i in range(n_out)]
                extras = node._extras
                if extras is not None:
                    grads = _node_hooks.run_prehooks(extras, grads)
                in_grads = node.apply(grads) if prof is None else prof.backward_node(node, grads)
                if extras is not None:
                    in_grads = _node_hooks.run_hooks(extras, in_grads, grads)
            else:
                in_grads = (None,) * len(node._edges)
            if _anomaly.enabled and _anomaly.check_nan:
                check_gradients(node, in_grads)
            if not retain_graph:
                node.release()
            for edge, g in zip(node._edges, in_grads):
                if edge is None:
                    continue
                child, nr = edge
                if g is not None:
                    buf = buffers.get(child)
                    if buf is None:
                        n = 1 if type(child) is AccumulateGrad else len(child.out_types)
                        buf = buffers[child] = [None] * (n if nr < n else nr + 1)
                        buf[nr] = g
                    else:
                        old = buf[nr]
                        buf[nr] = g if old is None else _sum(old, g)
                left = deps[child] - 1
                deps[child] = left
                if left == 0:
                    heappush(ready, (-child._seq, child))
    return captured


def _sum(old, g):
    """Two gradients of one value, summed: by the add kernel directly where both are plain
    eager tensors of one shape and dtype and nothing is recorded (the dispatched ``old + g``
    runs that kernel too), else ``old + g`` (a subclass's __torch_function__ sees it)."""
    if type(old) is Tensor and type(g) is Tensor:
        out = direct_sum(_ADD_RUN, old, g)
        if out is not None:
            return out
    return old + g


_ADD_RUN = ADD.run


def _keep_retained(retained, grads):
    for nr, ref in retained.items():
        t = ref()
        if t is not None and nr < len(grads) and grads[nr] is not None:
            g = grads[nr].detach()
            t.grad = g if t.grad is None else t.grad + g


def _release_ready(node, deps, ready, retain_graph):
    if not retain_graph:
        node.release()
    for edge in node._edges:
        if edge is None:
            continue
        child = edge[0]
        deps[child] -= 1
        if deps[child] == 0:
            heapq.heappush(ready, (-child._seq, child))


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(tensors)/d(leaf) into every leaf's ``.grad`` (or only ``inputs``' if given)."""
    outputs = _as_tuple(tensors)
    grad_outputs = _as_tuple(grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    roots = _root_grads(outputs, grad_outputs, create_graph)
    if inputs is None:
        _run(roots, retain_graph, create_graph)
        return
    targets = _as_tuple(inputs)
    results = _grad(outputs, targets, grad_outputs or None, retain_graph, create_graph, True)
    for t, g in zip(targets, results):
        if g is None:
            continue
        if t.grad_fn is None:
            _edge(t)[0].accumulate(g, create_graph, set())
        else:
            t.grad = g if t.grad is None else t.grad + g


def _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused) -> tuple:
    """d(outputs)/d(inputs), the engine's part of ``ember.autograd.grad`` (autograd_grad.py:
    PyTorch's arguments around it)."""
    outputs = _as_tuple(outputs)
    builder = getattr(outputs[0], "builder", None) if outputs else None
    if builder is not None:  # symbolic outputs: a graph being built records the backward pass
        return builder.grad(outputs, inputs, _as_tuple(grad_outputs), allow_unused, create_graph)
    if retain_graph is None:
        retain_graph = create_graph
    roots = _root_grads(outputs, _as_tuple(grad_outputs), create_graph)
    capture = {}
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor) or not t._requires_grad:
            raise AutogradError(f"input {i} does not require grad", op="grad")
        node, nr = _edge(t)
        capture[(node, nr)] = i
    captured = _run(roots, retain_graph, create_graph, capture)
    result = []
    for i in range(len(inputs)):
        g = captured.get(i)
        if g is None and not allow_unused:
            raise AutogradError(
                f"input {i} was not used to compute the outputs; pass allow_unused=True "
                "to get None for it",
                op="grad",
            )
        if g is not None and not create_graph:
            g = g.detach()
        result.append(g)
    return tuple(result)


# torch.autograd.graph's names: the tape's Node, and importable as a module of its own
graph.Node = Node
sys.modules[__name__ + ".graph"] = graph
