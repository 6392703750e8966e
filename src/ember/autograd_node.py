"""The tape's nodes: one `Node` per eager op call whose inputs need gradients, holding the op,
its attributes, the tensors its VJP reads (with their versions, so an in-place overwrite is
reported instead of differentiated wrongly) and an edge per input to the node that produced it
(or a leaf's `AccumulateGrad`); also the edges, zero gradients and tensor hooks the engine
(autograd.py) and autograd.Function use.
"""

from __future__ import annotations

import types
import weakref

import numpy as np

from . import autograd_node_hooks as _node_hooks
from . import dtypes as _dt
from .autograd_accumulate import AccumulateGrad, _sequence
from .errors import AutogradError, ShapeError
from .grad_mode import (
    InferenceVersion,
    _anomaly,
    record_creation,
)
from .ops import _node_names
from .ops import _registry as _reg
from .saved_hooks import SavedHandle
from .saved_hooks import hooks as _saved_hooks
from .saved_hooks import pack_saved as _pack_saved
from .tensor import Tensor
from .types import TensorType

# ------------------------------------------------------------------------------------ nodes

_FREED = object()


def _checks_version(saved) -> bool:
    """Whether an in-place change of a saved value since the save is an error: for the tape's
    own saves and checkpointing's, not for what a user's saved-tensor hook packed (PyTorch's:
    the backward reads what its unpack hook gives)."""
    return type(saved) is not SavedHandle or saved.checked


# the saved outputs of a node that saves none (one shared, read-only mapping: no dict per node)
_NO_OUTPUTS = types.MappingProxyType({})


def vjp_results(op, result, n_inputs: int, where: str) -> tuple:
    """A VJP's return value as one gradient (or None) per input of ``op``; the tape's
    ``backward`` and graph autodiff (``where``: the caller, for the error) both check it here."""
    if not isinstance(result, (tuple, list)):
        result = (result,)
    if len(result) != n_inputs:
        raise AutogradError(
            f"the VJP of {op.name} returned {len(result)} gradients for {n_inputs} inputs",
            op=where,
        )
    return tuple(result)


def _refuse_inference(op) -> None:
    raise AutogradError(
        "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
        "inference mode in computation tracked by autograd. To work around this, you can make "
        "a clone to get a normal tensor and use it in autograd.",
        op=op.name,
    )


class Node:
    """The record of one op call: the grad_fn of its outputs, and the VJP's context."""

    __slots__ = (
        "op",
        "attrs",
        "in_types",
        "out_types",
        "_edges",
        "_needs",
        "_seq",
        "_saved_in",
        "_saved_out",
        "_pre_hooks",
        "_retained",
        "_extras",
        "_witnesses",
        "__weakref__",
    )

    @property
    def needs_input_grad(self) -> tuple:
        """For each input, whether a gradient for it is wanted (VJPs skip the others)."""
        needs = self._needs
        if needs is None:  # (computed once: the edges never change)
            needs = self._needs = tuple([edge is not None for edge in self._edges])
        return needs

    def __init__(self, op, attrs, inputs, outputs, out_types=None, in_types=None):
        """``out_types``, ``in_types``: the outputs' and the inputs' types when the caller has
        them (eager execution typed the inputs for the op's rule, which typed the outputs)."""
        # one loop over the inputs, no comprehensions or calls: every recorded op call runs this
        self.op = op
        self.attrs = attrs
        types = [] if in_types is None else None
        edges = []
        saved = {}
        keep = op.save_inputs
        i = 0
        for t in inputs:
            if types is not None:
                data = t._data
                dtype = _BY_NP.get(data.dtype)  # (`_tensor_type`, inlined)
                types.append(
                    _new_tuple(TensorType, (data.shape, dtype if dtype is not None else t.dtype))
                )
            if t._requires_grad:
                fn = t.grad_fn
                edges.append((fn, t._output_nr) if fn is not None else _edge(t))
            else:
                edges.append(None)
            if keep is None or i in keep:
                vc = t._vc
                if type(vc) is InferenceVersion:
                    _refuse_inference(op)
                saved[i] = (t, vc[0])
            i += 1
        self.in_types = tuple(types) if in_types is None else in_types
        self.out_types = (
            tuple([_tensor_type(t) for t in outputs]) if out_types is None else out_types
        )
        self._edges = tuple(edges)
        self._needs = None
        self._seq = next(_sequence)
        self._pre_hooks = None
        self._retained = None  # output_nr -> weakref of a tensor whose .grad keeps the gradient
        self._extras = None  # the node's own hooks and metadata (autograd_node_hooks.py)
        self._witnesses = None  # operands PyTorch's node saves (ops/_saved_operands.py)
        self._saved_in = saved
        self._saved_out = (
            {i: (outputs[i]._data, outputs[i]._vc, outputs[i]._vc[0]) for i in op.save_outputs}
            if op.save_outputs
            else _NO_OUTPUTS
        )
        if _saved_hooks:
            _pack_saved(self, Tensor._wrap)
        if _anomaly.enabled:
            record_creation(self)
        # the class PyTorch's node of this call has (its name: MulBackward0), made once per op
        # where the op's rule names every call alike
        cls = _OP_CLASSES.get(op)
        if cls is None:
            cls = _op_class(op, attrs, self.in_types)
        self.__class__ = cls

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{self.name()}>"

    # -------- the VJP's view of the saved values
    @property
    def inputs(self) -> tuple:
        """The saved inputs (None where not saved). An input overwritten in place since it was
        saved comes back as a placeholder that raises a clear error if the VJP touches it, so
        VJPs that do not need it (``a.mul_(3)`` needs only the 3) still run."""
        saved = self._saved_in
        if saved is _FREED:
            self._check_saved()  # (raises)
        result = [None] * len(self.in_types)
        for i, (tensor, version) in saved.items():  # (in input order)
            if tensor._vc[0] != version and _checks_version(tensor):
                result[i] = _Overwritten(self._modified_error(f"input {i}", tensor._vc[0], version))
            else:
                result[i] = tensor.get() if type(tensor) is SavedHandle else tensor
        return tuple(result)

    @property
    def outputs(self) -> tuple:
        if self._saved_in is _FREED:
            self._check_saved()  # (raises)
        result = [None] * len(self.out_types)
        for i, (data, counter, version) in self._saved_out.items():
            if counter[0] != version and _checks_version(data):
                result[i] = _Overwritten(self._modified_error(f"output {i}", counter[0], version))
                continue
            if type(data) is SavedHandle:
                data = data.get()._data
            t = _wrap(data)
            t._vc = counter
            t.grad_fn = self
            t._output_nr = i
            t._requires_grad = True
            result[i] = t
        return tuple(result)

    def _check_saved(self):
        if self._saved_in is _FREED:
            raise AutogradError(
                f"trying to backward through {self.name()} a second time, but its saved values "
                "were freed by the first backward; pass retain_graph=True to the first backward "
                "if you need to run backward twice",
                op="backward",
            )
        return self._saved_in

    def _modified_error(self, which: str, now: int, expected: int) -> AutogradError:
        return AutogradError(
            f"{which} of {self.op.name}, which its gradient needs, was modified by an in-place "
            f"operation (it is at version {now}; backward expected version {expected}); "
            "use the out-of-place form of the later operation, or clone() before it",
            op="backward",
        )

    def _check_witnesses(self) -> None:
        """Refuse a run after an operand PyTorch's node of this call saves changed in place."""
        for tensor, version in self._witnesses:
            if tensor is None:  # (ops/_saved_operands.refuses_backward: its message)
                raise AutogradError(version, op="backward")
            if tensor._vc[0] != version:
                raise AutogradError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: an operand of {self.name()} (it is at version "
                    f"{tensor._vc[0]}; backward expected version {version}); use the "
                    "out-of-place form of the later operation, or clone() before it",
                    op="backward",
                )

    def release(self) -> None:
        # a node that saved nothing has nothing to free and runs again, as PyTorch's nodes
        # without saved variables do (SubBackward0 of ``w - lr * g``: first-order MAML runs
        # backward through fast weights whose inner-loop autograd.grad had passed them)
        if not (self._saved_in or self._saved_out or self._witnesses):
            return
        self._saved_in = _FREED
        self._witnesses = None
        self._saved_out = _NO_OUTPUTS

    register_hook = _node_hooks.register_hook
    register_prehook = _node_hooks.register_prehook
    metadata = _node_hooks.metadata
    next_functions = _node_hooks.next_functions

    _register_output_hook = _node_hooks.register_output_hook

    # -------- running the VJP
    def apply(self, grads: list) -> tuple:
        op = self.op
        vjp = op.vjp
        if vjp is None:
            raise AutogradError(
                f"the op {op.name} has no gradient (no VJP is defined)", op="backward"
            )
        if self._saved_in is _FREED:
            self._check_saved()  # (raises)
        if self._witnesses is not None:
            self._check_witnesses()
        if _reg.conformance is not None:
            _reg.conformance.vjp.add(op.name)
        if len(grads) == 1:  # (one output: most ops)
            g = grads[0]
            result = vjp(self, g if g is not None else _zeros(self.out_types[0]))
        else:
            result = vjp(
                self, *[g if g is not None else _zeros(t) for g, t in zip(grads, self.out_types)]
            )
        in_types = self.in_types
        if type(result) is not tuple or len(result) != len(in_types):
            result = vjp_results(op, result, len(in_types), "backward")
        i = 0
        for g in result:
            if g is not None:
                # (an eager gradient's shape read off its array: no Size made)
                shape = g._data.shape if type(g) is Tensor else g.shape
                if shape != in_types[i].shape:  # (a Size and a tuple compare as tuples)
                    raise ShapeError(
                        f"the VJP returned a gradient of shape {tuple(g.shape)} for input {i} "
                        f"of shape {tuple(in_types[i].shape)}",
                        op=op.name,
                    )
            i += 1
        return result


_node_names.NODE_BASE = Node
_OP_CLASSES: dict = {}  # op -> the class of all its nodes, for ops whose rule is not per call


def _op_class(op, attrs, in_types) -> type:
    cls = _node_names.node_class(Node, _node_names.op_node_name(op, attrs, in_types))
    if not callable(op.grad_fn):
        _OP_CLASSES[op] = cls
    return cls


class _Overwritten:
    """Stands for a saved tensor that was modified in place; any use raises the saved error."""

    __slots__ = ("_error",)

    def __init__(self, error: AutogradError):
        self._error = error

    def __getattr__(self, name):
        raise self._error

    def _fail(self, *args, **kwargs):
        raise self._error

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __truediv__ = __rtruediv__ = __pow__ = __rpow__ = __matmul__ = __rmatmul__ = _fail
    __neg__ = __gt__ = __lt__ = __ge__ = __le__ = __eq__ = __ne__ = __getitem__ = _fail
    __hash__ = object.__hash__


_new_tuple = tuple.__new__
_BY_NP = _dt._BY_NP
_wrap = Tensor._wrap


def _tensor_type(t: Tensor) -> TensorType:
    """``TensorType(t.shape, t.dtype)``, built without the named tuple's Python constructor or
    the Size (the tape builds one per input and output of every recorded call)."""
    data = t._data
    dtype = _BY_NP.get(data.dtype)
    return _new_tuple(TensorType, (data.shape, dtype if dtype is not None else t.dtype))


def _edge(t: Tensor):
    if not t._requires_grad:
        return None
    if t.grad_fn is not None:
        return (t.grad_fn, t._output_nr)
    acc = t._accumulator() if t._accumulator is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        t._accumulator = weakref.ref(acc)
    return (acc, 0)


def _zeros(t) -> Tensor:
    return Tensor._wrap(np.zeros(t.shape, dtype=t.dtype.np))


def register_tensor_hook(t: Tensor, hook):
    """Hooks of non-leaf tensors live on their grad_fn, keyed by output number."""
    key, table = t.grad_fn._register_output_hook(t._output_nr, hook)

    class Handle:
        def remove(self_inner):
            table.pop(key, None)

    return Handle()
