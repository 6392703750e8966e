"""The op registry and the single dispatch point.

An `OpDef` holds everything about one primitive (DESIGN.md principle 1):

* ``infer(*inputs, **attrs)``: the shape-and-dtype rule. It sees only objects with ``.shape`` and
  ``.dtype`` (eager tensors, graph values, `TensorType`s) and never touches data. It validates its
  operands and raises `ShapeError` / `DTypeError` naming the op and the shapes.
* ``kernel(*arrays, **attrs)``: the NumPy reference implementation, the executable specification.
* ``vjp(ctx, *grads)``: the vector-Jacobian product written in ember ops, so that one rule serves
  eager backward, graph autodiff and higher-order gradients. ``ctx`` exposes ``inputs`` and
  ``outputs`` (the saved ones; others are None), ``in_types``, ``out_types`` and ``attrs``.
* ``cost(in_types, out_types, attrs)``: FLOPs and bytes moved, for the tools and the cost models.
* ``fast(*arrays, **attrs)``: optionally, a faster implementation of the same contract (C code
  from kernels/); it returns None where it does not apply (a dtype, a layout, no compiler).
  Eager execution and generated code call `OpDef.run`, which tries it first; the interpreter
  calls only ``kernel``, so checking either against the interpreter compares two independent
  implementations.

Everything else a pass, planner, executor or tool needs to know about an op is a typed *rule*:
a field of `OpDef` declared where the op is defined (ops/_rules.py has the rule types and says
who reads each). A misspelled rule name fails when the op is defined, and the parts of ember
above the ops read rules, never op names.

Attributes are keyword arguments in canonical, hashable form (ints, floats, tuples, strings,
DTypes); the public wrapper of an op normalises user arguments before calling `apply`.

`apply(op, *inputs, **attrs)` is the only way an op runs: it checks the ``complex`` rule (an op
that does not declare it refuses complex operands, and the ``float8`` rule likewise float8 ones,
`_refuse_special`; the eager mode checks them as it types the operands), then asks the innermost
*mode* on the stack (eager execution by default; tracing pushes a graph builder) to handle the
call, so no op knows which mode it is in (principle 2).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .. import dtypes as _dt
from ..errors import ArgumentError, ComplexDTypeError, KernelDTypeError
from ._fast_rule import _kind, _preferring, _real_only, runner_for  # noqa: F401 (tests)
from ._rules import Complex, Layout

_ELEMENTWISE_LAYOUT = Layout(None)  # (the first operand of the result's shape decides)

_GRADIENT = Complex.GRADIENT


class _KindDefault:
    """`OpDef.batch` when the op declares no batch rule: its kind's default applies."""

    def __repr__(self) -> str:
        return "KIND_DEFAULT"


KIND_DEFAULT = _KindDefault()

KINDS = ("elementwise", "reduce", "shape", "index", "linalg", "nn", "random", "creation", "control")


class TensorBase:
    """Base class of ember's tensor types (the eager Tensor; later symbolic tensors), so op
    modules can recognise tensors without importing tensor.py (which imports this package)."""

    __slots__ = ()


class Cost(NamedTuple):
    flops: int
    bytes: int


@dataclass(eq=False)
class OpDef:
    name: str
    kind: str
    infer: Callable[..., Any]
    kernel: Callable[..., Any]
    vjp: Callable[..., Any] | None = None
    cost: Callable[..., Cost] | None = None
    # which inputs / outputs the vjp reads; None means every input. Saving less frees memory early.
    save_inputs: tuple[int, ...] | None = None
    save_outputs: tuple[int, ...] = ()
    num_outputs: int = 1
    # the kernel may return a view of input 0 (reshape, transpose, ...): the output shares its
    # version counter, so in-place writes through either are seen by autograd's checks.
    view: bool = False
    as_view: Callable[..., Any] | None = None
    doc: str = ""
    fast: Callable[..., Any] | None = None
    # ---- rules (ops/_rules.py documents each: its type, its meaning, who reads it)
    c: str | None = None
    reduction: Any = None  # ReductionRule
    epilogue: Any = None  # EpilogueRule
    clamp: Callable[..., Any] | None = None  # (attrs, constants) -> Clamp | None
    fused: Any = None  # FusedRule
    unroll: Callable[..., Any] | None = None
    compile: Callable[..., Any] | None = None
    c_step: Callable[..., Any] | None = None
    c_sources: Callable[..., Any] | None = None
    accepts_out: Callable[..., bool] | None = None
    overwrites_operand: bool = False
    workspace: Callable[..., int] | None = None
    flop_family: str | None = None
    quantized: str | None = None  # "all" or "per_tensor": takes quantized tensors
    limited: bool = False  # takes uint16/uint32/uint64 (PyTorch's few kernels for them)
    torch_flops: Callable[..., Any] | None = None  # (inputs, attrs, backward) -> str | None
    batch: Any = KIND_DEFAULT  # a batch rule (ops/_batching.py), None, or the kind's default
    identity: Any = None  # Identity
    noop: Callable[..., bool] | None = None
    remat_free: bool = False  # recomputed in a training step's backward (transforms/cheap_remat.py)
    widening: Callable[..., Any] | None = None  # (in_type, attrs) -> DType | None (_rules.py)
    reads_widened: Callable[..., Any] | None = None  # (attrs, in_type, DType) -> attrs | None
    row_statistics: Any = None  # RowStatistics (ops/_rules.py)
    keeps_order: bool = False  # the result in its operand's memory order (ops/_rules.py)
    gathers: Callable[..., Any] | None = None  # attrs -> axis | None (ops/_rules.py)
    compose: Callable[..., Any] | None = None
    broadcast: bool = False
    aliases: bool = False
    channel_affine: Callable[..., Any] | None = None
    channel_weight: Callable[..., Any] | None = None
    channel_terms: Callable[..., Any] | None = None
    channel_fold: Callable[..., Any] | None = None
    onnx: Callable[..., Any] | None = None  # the op as ONNX nodes (onnx/export_emit.py)
    autocast: Any = None  # Autocast, or attrs -> Autocast | None (ops/_autocast.py)
    effect: Any = None  # Effect: the call talks to other processes (ops/_rules.py)
    stops_gradient: bool = False  # the result carries no gradient back (stop_gradient)
    selects: tuple = ()  # Select pairs (where)
    scatter: Any = None  # ScatterRule (pool_scatter)
    picks: Any = None  # PickRule (max_pool)
    complex: Any = None  # Complex: the op takes complex operands (ops/_rules.py)
    pattern: Any = None  # PatternRule: the op computes a subgraph of other ops (ops/_rules.py)
    float8: bool = False  # the op takes float8 operands: it moves or compares values only
    grad_fn: Any = None  # PyTorch's name of the call's backward node (ops/_node_names.py)
    layout: Any = KIND_DEFAULT  # Layout: an eager result's memory format (ops/_rules.py)
    cached_infer: bool = False  # the shape rule is pure: eager calls keep its answers
    attrs: dict | None = None  # key -> attribute Rule, over the conventions (ops/_attr_rules.py)
    run: Callable[..., Any] = field(init=False, repr=False)
    # signature -> (in_types, out_type) of the eager calls `infer` accepted (``cached_infer``)
    infer_cache: dict | None = field(init=False, repr=False, default=None)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ArgumentError(
                f"op {self.name}: unknown kind {self.kind!r}; expected one of {KINDS}"
            )
        if self.c is not None and self.kind != "elementwise":
            raise ArgumentError(f"op {self.name}: only elementwise ops have a C expression")
        if self.complex is not None and not isinstance(self.complex, Complex):
            raise ArgumentError(
                f"op {self.name}: the complex rule is a Complex, got {self.complex!r}"
            )
        if self.layout is KIND_DEFAULT:
            self.layout = _ELEMENTWISE_LAYOUT if self.kind == "elementwise" else None
        if self.cached_infer:
            self.infer_cache = {}
        self._bind_run()

    def _bind_run(self) -> None:
        fast = self.fast
        # (C code never sees complex arrays; a fast rule gated by dtype declines them already)
        real_only = (
            fast is not None
            and self.complex is not None
            and not getattr(fast, "declines_complex", False)
        )
        self.run = self.kernel if fast is None else _preferring(fast, self.kernel, real_only)
        # ``fast``'s `declines_unless` gate as (dtype classes, size), for the eager mode to
        # decide once per kept signature (eager.py): `runner_for`
        gate = None if fast is None else getattr(fast, "declines_unless", None)
        self.gate = None if gate is None else (frozenset(type(d) for d in gate[0]), gate[1])
        if self.infer_cache:  # (a signature kept before a fast rule was attached ran without it)
            self.infer_cache.clear()

    def runner_for(self, arrays):
        """What `run` calls on operands like ``arrays`` (their shapes and dtypes decide): the
        kernel where the fast rule's gate surely declines them, else `run` (ops/_fast_rule.py
        `runner_for`). The eager mode keeps it per signature, so a small call skips the gate."""
        return runner_for(self, arrays)

    def attach_fast(self, fast) -> None:
        """Give the op a ``fast`` rule after its definition (ops/_half.py attaches the C loop
        of every registered elementwise op with a C expression and none of its own)."""
        self.fast = fast
        self._bind_run()

    def __repr__(self) -> str:
        return f"<op {self.name} ({self.kind})>"


_ndarray = np.ndarray


def native_code(node) -> bool:
    """Whether C code (an op's ``compile``, ``c_step``, fused loops and epilogues) may run graph
    node ``node``: not where one of its values is complex or float8 (the reference kernels run
    those)."""
    for v in (*node.inputs, *node.outputs):
        if v.dtype.special:
            return False
    return True


def limited_refusal(name: str, dtype) -> KernelDTypeError:
    """PyTorch's NotImplementedError for a uint16/uint32/uint64 operand of a kernel it lacks."""
    return KernelDTypeError(
        f"not implemented for '{dtype.name.capitalize().replace('Ui', 'UI')}' ({dtype}), as "
        f"PyTorch has no {name} kernel for it: cast first, e.g. x.long()",
        op=name,
    )


def _refuse_special(op: OpDef, inputs: tuple) -> None:
    """The one check of the ``complex`` and ``float8`` rules (ops/_rules.py), run for every op
    but those that take both, where an operand is special: by `apply`, or eagerly by the eager
    mode as it types the operands (eager.py), so a rule is checked once. A complex operand of
    an op without the ``complex`` rule, or one requiring grad of an op whose rule is
    ``Complex.VALUES``, raises `ComplexDTypeError`; a float8 operand of an op without the
    ``float8`` rule raises `KernelDTypeError`, as PyTorch's kernels do."""
    for t in inputs:
        dtype = getattr(t, "dtype", None)
        if dtype is None or not dtype.special:
            continue
        if getattr(dtype, "quantized", False):
            _refuse_quantized(op, t, dtype)
            continue
        if dtype.limited:
            if not op.limited:
                raise limited_refusal(op.name, dtype)
            continue
        if dtype.float8:
            if not op.float8:
                raise KernelDTypeError(
                    f"not implemented for '{_TORCH_NAMES[dtype.name]}' ({dtype}): float8 is a "
                    f"storage format, and ember's {op.name} does not take it (PyTorch's CPU "
                    "kernels refuse most ops on it too): cast first, e.g. x.float()",
                    op=op.name,
                )
            continue
        if op.complex is _GRADIENT:
            continue
        if op.complex is None:
            raise ComplexDTypeError(
                f"not implemented for '{_TORCH_NAMES[dtype.name]}' ({dtype}): ember's {op.name} "
                "takes no complex operands",
                op=op.name,
            )
        if _state.grad_enabled and getattr(t, "requires_grad", False):
            raise ComplexDTypeError(
                f"the derivative for a complex ({dtype}) operand is not implemented: ember's "
                f"{op.name} computes complex values without a gradient",
                op=op.name,
            )


_TORCH_NAMES = {
    "complex64": "ComplexFloat",
    "complex128": "ComplexDouble",
    "float8_e4m3fn": "Float8_e4m3fn",
    "float8_e5m2": "Float8_e5m2",
    "float8_e4m3fnuz": "Float8_e4m3fnuz",
    "float8_e5m2fnuz": "Float8_e5m2fnuz",
}


REGISTRY: dict[str, OpDef] = {}

# Public functions declared by op modules: name -> function, with the Tensor method names they
# provide. ember/__init__.py, ember.nn.functional and tensor.py read these tables, so an op module
# is the one place that defines an op and its user-facing entry points.
PUBLIC: dict[str, Callable] = {}
METHODS: dict[str, Callable] = {}
# PyTorch's ``torch.ops.<namespace>.<name>`` for operators the user defines (ember/library.py
# adds each custom op here; ``ember.ops.<namespace>`` reads it, ops/__init__.py)
CUSTOM_NAMESPACES: dict[str, dict[str, Callable]] = {}
FUNCTIONAL: dict[str, Callable] = {}
INPLACE: dict[str, Callable] = {}  # Tensor gets ``name_`` writing ``fn(self, ...)`` into self


# called with each op as it is registered (ops/_half.py's: the C loop as the fast rule of an
# elementwise op with a C expression); a lower module adds to it, so this one imports none
REGISTER_HOOKS: list = []
# called with each public name as `export` (re)defines it (ops/api.py forgets its copy)
EXPORT_HOOKS: list = []


_PLAIN_VALUES = frozenset((bool, int, float, complex, str, list, tuple, dict, type(None)))


def is_traced(x, flag: str = "is_traced_item") -> bool:
    """Whether ``x`` is a traced ``.item()`` (``flag="is_traced_list"``: ``.tolist()``) of
    graph/traced_item.py, which ops take as the Python number (list) it stands for. The flag is
    looked up only where one could be (a tensor's missing attribute is slow to look up)."""
    return (
        type(x) not in _PLAIN_VALUES
        and not isinstance(x, TensorBase)
        and getattr(x, flag, False) is True
    )


def register(op: OpDef) -> OpDef:
    if op.name in REGISTRY:
        raise ArgumentError(f"op {op.name!r} is registered twice")
    REGISTRY[op.name] = op
    for hook in REGISTER_HOOKS:
        hook(op)
    return op


def export(
    fn=None,
    *,
    name: str | None = None,
    method: bool | str | tuple = False,
    functional: bool = False,
    toplevel: bool = True,
    inplace: bool = False,
):
    """Declare a public function: ``ember.<name>`` (toplevel), a Tensor method (method=True or the
    method name(s)), ``ember.nn.functional.<name>`` (functional=True) and in-place Tensor
    methods ``<method>_`` (inplace=True)."""

    def wrap(f):
        public_name = name or f.__name__
        if toplevel:
            PUBLIC[public_name] = f
            for hook in EXPORT_HOOKS:
                hook(public_name)
        if functional:
            FUNCTIONAL[public_name] = f
        if method:
            names = (
                (public_name,)
                if method is True
                else ((method,) if isinstance(method, str) else method)
            )
            for m in names:
                METHODS[m] = f
                if inplace:
                    INPLACE[m + "_"] = f
        return f

    return wrap if fn is None else wrap(fn)


# ----------------------------------------------------------------------------------------------
# modes and dispatch


class Mode:
    """How ops run in a context. Eager execution is the default; tracing pushes a builder."""

    def apply(self, op: OpDef, inputs: tuple, attrs: dict):
        raise NotImplementedError(f"{type(self).__name__} does not implement apply")

    def constant(self, array):
        """A tensor holding a concrete NumPy array (Python scalars become these)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement constant")


class _State(threading.local):
    def __init__(self):
        self.modes: list[Mode] = []
        self.grad_enabled = True
        self.autocast = None  # the enabled autocast region (ops/_autocast.py), or None


_state = _State()
_base_mode: list[Mode] = []  # the eager mode, installed by ember.eager at import
# ember.eager's own mode, the first base mode installed (the profiler's replaces it for a while)
_plain_eager: list[Mode] = []


def current_mode() -> Mode:
    modes = _state.modes
    return modes[-1] if modes else _base_mode[0]


def building_graph() -> bool:
    """Whether ops are being recorded into a graph (the current mode is not eager's)."""
    modes = _state.modes
    return bool(modes) and modes[-1] is not _base_mode[0]


def push_mode(mode: Mode) -> None:
    _state.modes.append(mode)


def pop_mode() -> Mode:
    return _state.modes.pop()


# the eager mode's marking of a view op's result (its source's version counter and view chain:
# eager.py's `_mark_outputs`), for the kernels run without a dispatch (ops/_unrecorded.py)
view_marker: list = []


def set_base_mode(mode: Mode) -> None:
    if not _plain_eager:
        _plain_eager.append(mode)
    _base_mode[:] = [mode]


def plain_eager_no_grad() -> bool:
    """Whether a kernel run on eager arrays, its result wrapped, is all a dispatch would do:
    grad mode off (nothing recorded), no mode pushed (no graph built), the base mode ember.eager's
    own (no profiler recording ops), no autocast region, no conformance check. A backward that
    records nothing (create_graph=False) runs its VJPs so, and their products skip dispatching
    their temporaries (ops/_unrecorded.py)."""
    state = _state
    return (
        not state.grad_enabled
        and not state.modes
        and state.autocast is None
        and conformance is None
        and _base_mode[0] is _plain_eager[0]
    )


def apply(op: OpDef, *inputs, **attrs):
    """Run primitive ``op`` on ember tensors ``inputs`` in the current mode (inside an autocast
    region, an op with an ``autocast`` rule first has its operands cast: ops/_autocast.py)."""
    state = _state
    modes = state.modes  # (current_mode inlined: every eager op call passes here)
    if state.autocast is not None and op.autocast is not None:
        _refuse_specials(op, inputs)  # (before any cast)
        inputs = state.autocast.operands(op, inputs, attrs)
    elif modes:
        _refuse_specials(op, inputs)
    if not modes:
        # the eager mode checks the operands' dtypes as it types them (`refuses_special`)
        return _base_mode[0].apply(op, inputs, attrs)
    return modes[-1].apply(op, inputs, attrs)


def _refuse_specials(op: OpDef, inputs: tuple) -> None:
    if refuses_special(op):
        for t in inputs:
            dtype = getattr(t, "dtype", None)
            if dtype is not None and dtype.special:
                _refuse_special(op, inputs)
                break


def refuses_special(op: OpDef) -> bool:
    """Whether ``op`` refuses some special (complex, float8 or quantized) operand: `apply`, and
    the eager mode as it types the operands, call `_refuse_special` for it then."""
    return op.complex is not _GRADIENT or not op.float8 or op.quantized != "all" or not op.limited


def _refuse_quantized(op: OpDef, t, dtype) -> None:
    """The ``quantized`` rule: an op without it refuses a quantized tensor, as PyTorch's
    QuantizedCPU backend has no kernel for most ops; "per_tensor" ops (which move elements)
    refuse a per-channel one, whose parameters follow an axis."""
    rule = op.quantized
    if rule == "all":
        return
    if rule == "per_tensor":
        meta = getattr(getattr(t, "_data", None), "dtype", None)
        qparams = None if meta is None or meta.metadata is None else meta.metadata.get(
            _dt.QUANTIZED_KEY)  # fmt: skip
        if qparams is None or qparams.axis is None:
            return
        raise KernelDTypeError(
            f"{op.name} does not take a per-channel quantized tensor (its scales follow an "
            "axis, as PyTorch refuses): dequantize() first",
            op=op.name,
        )
    raise KernelDTypeError(
        f"Could not run '{op.name}' with arguments from the 'QuantizedCPU' backend: ember's "
        f"{op.name} does not take a quantized tensor ({dtype}), as PyTorch's has no kernel for "
        "it: dequantize() first, or take int_repr()",
        op=op.name,
    )


def constant(array):
    modes = _state.modes  # (current_mode inlined: every Python scalar operand passes here)
    return (modes[-1] if modes else _base_mode[0]).constant(array)


def eager_constant(array):
    """A tensor of the eager mode holding ``array``, whatever mode is current (a leaf tensor
    made inside a trace stays eager: the trace captures it where it is used)."""
    return _base_mode[0].constant(array)


def scalar_value(tensor):
    """A 0-d tensor's value for scalar arithmetic (an optimizer's step count): a Python float
    when eager; while a graph is built, the mode's symbolic stand-in (so the arithmetic is
    recorded instead of baking in today's value)."""
    modes = _state.modes
    scalar = getattr(modes[-1], "scalar", None) if modes else None
    return float(tensor.item()) if scalar is None else scalar(tensor)


def is_grad_enabled() -> bool:
    return _state.grad_enabled


def set_grad_enabled_flag(enabled: bool) -> bool:
    previous = _state.grad_enabled
    _state.grad_enabled = bool(enabled)
    return previous


class Conformance:
    """While installed (``ops._registry.conformance = Conformance()``), eager execution checks
    every op's kernel output against its shape/dtype rule and records which ops ran forward and
    which VJPs ran. The registry conformance test uses it; it costs time, so it is off otherwise."""

    def __init__(self):
        self.forward: set[str] = set()
        self.vjp: set[str] = set()


conformance: Conformance | None = None
