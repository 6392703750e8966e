"""``torch.utils.flop_counter.FlopCounterMode``: the FLOPs of the products a block of eager
code runs, counted as PyTorch counts them, per module.

While the block runs, the counter is the dispatcher's base mode (as the profiler's recorder
is, ember/profiler/recorder.py): every eager op call passes through it, and a call whose op
has a ``torch_flops`` rule naming a PyTorch operator (ops/_torch_flops.py) adds its ``cost``
rule's FLOPs under that name (``aten.mm``, ``aten.convolution``, ...) to "Global" and to
every module being called, named as PyTorch's ModuleTracker names them ("Net", "Net.fc").
Backward ops count under the modules whose forward made the tape node they differentiate
(the counter runs each node's VJP, as the profiler does, through ``autograd._profiler``).
A public function PyTorch runs as an operator of its own names what its products count as
(ops/_torch_flops.py `counted_as`: ``mv`` and the CPU flash attention kernel are not counted,
nor are the nodes they record, ``baddbmm`` counts as ``aten.baddbmm``). Compiled graphs
(``ember.compile``) run no eager ops: their
FLOPs are ember.tools.flops'.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import defaultdict

from .. import autograd
from ..errors import NotInEmberError
from ..nn import hooks as _nn_hooks
from ..ops import _registry as _reg
from ..ops import _torch_flops
from ..types import TensorType

__all__ = ["FlopCounterMode"]

GLOBAL = "Global"
_SKIPPED = frozenset()  # the modules of a node whose backward PyTorch does not count


class _AtenOp(str):
    """A key of `get_flop_counts`'s rows: the operator's name (``"aten.mm"``), which is how
    PyTorch's ``torch.ops.aten.mm`` key prints and compares by ``str(key)``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str.__str__(self)


class _CountingMode(_reg.Mode):
    """The eager mode, counting: installed as the base mode while a counter is active."""

    def __init__(self, eager, counter: FlopCounterMode):
        self._eager = eager
        self._counter = counter

    def __getattr__(self, name):  # anything else the eager mode offers
        return getattr(self._eager, name)

    def apply(self, op, inputs, attrs):
        result = self._eager.apply(op, inputs, attrs)
        self._counter._record(op, inputs, attrs, result)
        return result

    def constant(self, array):
        return self._eager.constant(array)


class FlopCounterMode:
    """Count the FLOPs of the products run inside ``with FlopCounterMode() as fc:`` (PyTorch's
    API: ``fc.get_total_flops()``, ``fc.get_flop_counts()`` as ``{module: {op: flops}}``,
    ``fc.get_table(depth)``; ``display=True`` prints the table when the block ends). ``mods``
    is accepted and unused, as in PyTorch; ``custom_mapping`` is refused (ember's counts come
    from its ops' cost rules, not from aten operators)."""

    def __init__(self, mods=None, depth: int = 2, display: bool = True, custom_mapping=None):
        if custom_mapping:
            raise NotInEmberError(
                "custom_mapping: ember counts its ops' cost rules, not aten operators",
                name="custom_mapping",
                op="FlopCounterMode",
            )
        self.depth = depth
        self.display = display
        self.flop_counts: dict[str, dict] = defaultdict(lambda: defaultdict(int))
        self._modules: list[tuple[str, object]] = []  # the modules being called, outermost first
        self._backward: list[frozenset] = []  # the modules of the tape nodes being run
        self._node_modules: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._saved = None
        self._handles: list = []

    # ------------------------------------------------------------------ results
    def get_total_flops(self) -> int:
        return sum(self.flop_counts[GLOBAL].values()) if GLOBAL in self.flop_counts else 0

    def get_flop_counts(self) -> dict[str, dict]:
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def get_table(self, depth: int | None = None) -> str:
        """The counts as PyTorch's table: each module to ``depth`` levels with its operators,
        and "Global" first where some FLOPs ran outside every module."""
        depth = self.depth if depth is None else depth
        depth = 999999 if depth is None else depth
        total = self.get_total_flops()
        suffix = _suffix(total)
        rows: list[list[str]] = []
        subsumed = False

        def module_rows(name: str, level: int) -> list[list[str]]:
            nonlocal subsumed
            flops = sum(self.flop_counts[name].values())
            subsumed |= flops >= total
            pad = " " * level
            out = [[pad + name, _with_suffix(flops, suffix), _percent(flops, total)]]
            for op, n in self.flop_counts[name].items():
                out.append([f"{pad} - {op}", _with_suffix(n, suffix), _percent(n, total)])
            return out

        for name in sorted(self.flop_counts):
            if name == GLOBAL or name.count(".") + 1 > depth:
                continue
            rows.extend(module_rows(name, name.count(".")))
        if GLOBAL in self.flop_counts and not subsumed:
            rows = module_rows(GLOBAL, 0) + [[" " + r[0], r[1], r[2]] for r in rows]
        if not rows:
            rows = [[GLOBAL, "0", "0%"]]
        return _tabulate(["Module", "FLOP", "% Total"], rows)

    # ------------------------------------------------------------------ the block
    def __enter__(self) -> FlopCounterMode:
        if self._saved is not None:
            raise RuntimeError("FlopCounterMode is not reentrant: this one is already counting")
        self.flop_counts.clear()
        self._modules.clear()
        self._backward.clear()
        base = _reg._base_mode[0]
        self._saved = (base, autograd._profiler)
        _reg.set_base_mode(_CountingMode(base, self))
        autograd._profiler = _BackwardHook(self, autograd._profiler)
        self._handles = [
            _nn_hooks.register_module_forward_pre_hook(self._enter_module),
            _nn_hooks.register_module_forward_hook(self._leave_module, always_call=True),
        ]
        _torch_flops._Regions.watchers += 1
        return self

    def __exit__(self, *exc) -> bool:
        base, autograd._profiler = self._saved
        _reg.set_base_mode(base)
        self._saved = None
        for handle in self._handles:
            handle.remove()
        _torch_flops._Regions.watchers -= 1
        if self.display:
            print(self.get_table(self.depth))
        return False

    # ------------------------------------------------------------------ modules
    def _enter_module(self, module, args):
        self._modules.append((_module_name(self._modules, module), module))

    def _leave_module(self, module, args, output):
        for i in range(len(self._modules) - 1, -1, -1):
            if self._modules[i][1] is module:
                del self._modules[i:]
                break

    def _parents(self) -> frozenset:
        if self._backward:
            return self._backward[-1]
        return frozenset([GLOBAL, *(name for name, _ in self._modules)])

    # ------------------------------------------------------------------ counting
    def _record(self, op, inputs, attrs, result) -> None:
        regions = _torch_flops.REGIONS.names
        uncounted = bool(regions) and regions[-1] is None
        outs = (result,) if op.num_outputs == 1 else result
        if not self._backward:  # (a node made here is differentiated under these modules)
            parents = self._parents()
            for out in outs:
                node = getattr(out, "grad_fn", None)
                if node is None:
                    continue
                if uncounted:
                    _torch_flops.UNCOUNTED_NODES.add(node)
                elif node not in self._node_modules:
                    self._node_modules[node] = parents
        rule = op.torch_flops
        if rule is None or uncounted:
            return
        name = rule(inputs, attrs, bool(self._backward))
        if name is None:
            return
        if regions and not self._backward:  # (a call PyTorch runs as an operator of its own)
            name = regions[-1]
        in_types = tuple([TensorType(tuple(t.shape), t.dtype) for t in inputs])
        out_types = tuple([TensorType(tuple(t.shape), t.dtype) for t in outs])
        flops = int(op.cost(in_types, out_types, attrs).flops)
        key = _AtenOp(name)
        for parent in self._parents():
            self.flop_counts[parent][key] += flops


class _BackwardHook:
    """What the autograd engine calls around a backward pass and each tape node
    (``autograd._profiler``): runs the node's VJP with its forward's modules current, and
    hands the call on to a profiler recording at the same time."""

    def __init__(self, counter: FlopCounterMode, inner):
        self._counter, self._inner = counter, inner

    def range(self, name: str, cat: str = "user_annotation"):
        return self._inner.range(name, cat) if self._inner else contextlib.nullcontext()

    def backward_node(self, node, grads):
        counter = self._counter
        if node in _torch_flops.UNCOUNTED_NODES:
            modules = _SKIPPED
        else:
            modules = counter._node_modules.get(node, frozenset([GLOBAL]))
        counter._backward.append(modules)
        try:
            if self._inner is not None:
                return self._inner.backward_node(node, grads)
            return node.apply(grads)
        finally:
            counter._backward.pop()


def _module_name(stack: list, module) -> str:
    """PyTorch's ModuleTracker name: the outermost module by its class name, a descendant of a
    module being called by that module's name and its attribute path."""
    for name, outer in reversed(stack):
        if outer is module:
            return name
        for qualified, sub in outer.named_modules():
            if sub is module and qualified:
                return f"{name}.{qualified}"
    return type(module).__name__


_SUFFIXES = ["", "K", "M", "B", "T"]


def _suffix(number: int) -> str:
    return _SUFFIXES[max(0, min(len(_SUFFIXES) - 1, (len(str(number)) - 2) // 3))]


def _with_suffix(number: int, suffix: str) -> str:
    return f"{number / 1000 ** _SUFFIXES.index(suffix):.3f}{suffix}"


def _percent(num: int, denom: int) -> str:
    return "0%" if denom == 0 else f"{num / denom:.2%}"


def _tabulate(header: list[str], rows: list[list[str]]) -> str:
    """A plain table: the first column left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r):
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        return "  ".join(cells)

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])
