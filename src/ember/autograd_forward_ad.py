"""``ember.autograd.forward_ad``: PyTorch's forward-mode AD API (``dual_level``, ``make_dual``,
``unpack_dual``, ``UnpackedDualTensor``, ``enter_dual_level``, ``exit_dual_level``).

ember's ops have reverse-mode rules only (VJPs written in ember ops), so a tangent is not
pushed through each op as it runs. Instead a dual tensor is an ordinary tensor that the tape
records from a *dual root* (a fresh leaf, or a view of the primal when the primal itself
requires grad), and ``unpack_dual(y)`` computes ``J t`` exactly, when asked, by the double-vjp
trick: with ``u`` a zero cotangent that requires grad, ``g(u) = sum_i (dy/dx_i)^T u`` is linear
in ``u``, so the gradient of ``sum_i <g_i, t_i>`` with respect to ``u`` is ``sum_i J_i t_i``.
No finite differences: the result is exact to rounding.

Cost: each ``unpack_dual`` of a non-root tensor runs one backward pass with ``create_graph``
and one backward pass of that backward (about 3-4 forward passes' work, against PyTorch's one
extra forward), and the values the tape keeps for the forward stay alive until the level ends.

Differences from PyTorch, all consequences of deriving tangents from the tape:
* a dual tensor made from a primal that does not require grad reports ``requires_grad=True``
  (it is a leaf of the tape; its ``.grad`` is never filled by ``backward``);
* operations run under ``no_grad`` (or on ``detach()``-ed values) carry no tangent;
* the primal ``unpack_dual`` returns has no tangent itself, but when the computation also
  depends on tensors that require grad, values computed from that primal inside the level
  still carry the tangent (where it does not, the primal is a plain detached tensor, as
  PyTorch's).
Only one level is active at a time, as in PyTorch ("Nested forward mode AD is not supported").
It runs eagerly only: ``make_dual`` inside ``ember.function`` or ``trace`` raises
`UnsupportedError` (as ``ember.func.jvp`` and ``linearize`` refuse symbolic tensors).
"""

from __future__ import annotations

from typing import NamedTuple

from . import dtypes as dt
from .autograd import AccumulateGrad
from .autograd_grad import grad as _grad
from .errors import ArgumentError, AutogradError, ShapeError, UnsupportedError
from .grad_mode import enable_grad
from .ops import api as E
from .ops._registry import TensorBase, building_graph
from .tensor import Tensor

__all__ = [
    "UnpackedDualTensor",
    "dual_level",
    "enter_dual_level",
    "exit_dual_level",
    "make_dual",
    "unpack_dual",
]


class UnpackedDualTensor(NamedTuple):
    """What `unpack_dual` returns: the primal and its tangent (None when it has none)."""

    primal: Tensor
    tangent: Tensor | None


class _Level:
    """The dual tensors made in one level: their roots, tangents and the primals handed out."""

    def __init__(self, index: int):
        self.index = index
        self.roots: dict[int, tuple[Tensor, Tensor]] = {}  # id(root) -> (root, tangent)
        self.fresh: set[int] = set()  # roots that are new leaves (their primal needs no grad)
        self.primals: set[int] = set()
        self.keep: list[Tensor] = []  # keeps the primals' ids unique while the level lives


_current: _Level | None = None


def enter_dual_level() -> int:
    """Starts a forward-AD level and returns its index (0, as PyTorch's only level)."""
    global _current
    if _current is not None:
        raise AutogradError("Nested forward mode AD is not supported at the moment")
    _current = _Level(0)
    return 0


def exit_dual_level(*, level: int | None = None) -> None:
    """Ends the current level: every dual tensor made in it loses its tangent."""
    global _current
    if _current is None or (level is not None and level != _current.index):
        raise AutogradError(
            "Trying to exit a forward AD level that was not the last one that was created. "
            "This is not supported."
        )
    _current = None


class dual_level:
    """Context manager (and decorator) for a forward-AD level: ``with dual_level(): ...``."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> None:
        exit_dual_level()

    def __call__(self, fn):
        def wrapper(*args, **kwargs):
            with dual_level():
                return fn(*args, **kwargs)

        wrapper.__name__ = getattr(fn, "__name__", "wrapper")
        wrapper.__doc__ = getattr(fn, "__doc__", None)
        return wrapper


def _level(level: int | None, where: str) -> _Level:
    if _current is None:
        raise AutogradError(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
            "enter_dual_level() first.",
            op=where,
        )
    if level is not None and level != _current.index:
        raise AutogradError(f"Invalid level given to {where}: {level}", op=where)
    return _current


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A tensor equal to ``tensor`` whose tangent (forward gradient) is ``tangent``.

    ``tangent`` must have ``tensor``'s shape; both must be floating point (PyTorch's checks)."""
    where = "make_dual"
    lv = _level(level, where)
    if building_graph():
        raise UnsupportedError(
            "forward-mode AD runs eagerly only (its tangents come from the tape's backward "
            "pass, which a graph being built does not record twice): call it outside "
            "ember.function / trace",
            op=where,
        )
    if not isinstance(tensor, TensorBase) or not isinstance(tangent, TensorBase):
        raise TypeError(
            f"{where}: expected Tensors, got {type(tensor).__name__} and {type(tangent).__name__}"
        )
    if not dt.differentiable(tensor.dtype):
        raise ArgumentError(  # a ValueError, as PyTorch's
            f"Expected primal to be floating point or complex, but got: {tensor.dtype}", op=where
        )
    if not dt.differentiable(tangent.dtype):
        raise ArgumentError(
            f"Expected tangent to be floating point or complex, but got: {tangent.dtype}",
            op=where,
        )
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise ShapeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(tensor.shape)} "
            f"while the given forward gradient is of size {list(tangent.shape)}.",
            op=where,
        )
    if id(tensor) in lv.roots:
        raise AutogradError(
            "Making a dual Tensor based on a Tensor that already has a forward gradient at the "
            f"same level {lv.index} is not supported.",
            op=where,
        )
    with enable_grad():
        if tensor.requires_grad:
            root = tensor.view_as(tensor)  # keeps the primal's reverse-mode history
        else:
            root = tensor.detach().requires_grad_(True)
            lv.fresh.add(id(root))
    lv.roots[id(root)] = (root, tangent)
    return root


def _reaches_other_leaves(out: Tensor, lv: _Level) -> bool:
    """Whether ``out``'s history reaches a tensor needing grad other than the fresh roots."""
    stack = [out.grad_fn] if out.grad_fn is not None else []
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            if id(node.variable) not in lv.fresh:
                return True
            continue
        stack.extend(edge[0] for edge in node._edges if edge is not None)
    return out.grad_fn is None and id(out) not in lv.fresh and out.requires_grad


def _tangent(out: Tensor, lv: _Level) -> Tensor | None:
    roots = [(r, t) for r, t in lv.roots.values()]
    u = E.zeros_like(out.detach()).requires_grad_(True)
    with enable_grad():
        firsts = _grad(
            [out],
            [r for r, _ in roots],
            [u],
            retain_graph=True,
            create_graph=True,
            allow_unused=True,
        )
        pairs = [(g, t) for g, (_, t) in zip(firsts, roots) if g is not None]
        if not pairs:
            return None
        live = [(g, t) for g, t in pairs if g.requires_grad]
        if not live:  # out depends on a root only through ops without a derivative
            return out.detach() * 0
        keep = any(t.requires_grad for _, t in live) or _reaches_other_leaves(out, lv)
        (result,) = _grad(
            [g for g, _ in live],
            [u],
            [t.to(g.dtype) for g, t in live],
            retain_graph=True,
            create_graph=keep,
            allow_unused=True,
        )
    return out.detach() * 0 if result is None else result


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor`` in the current level; the tangent is None outside a
    level, for tensors that do not depend on a dual tensor, and for non-float tensors."""
    lv = _current
    if lv is None or not isinstance(tensor, TensorBase):
        return UnpackedDualTensor(tensor, None)
    if level is not None and level != lv.index:
        raise ArgumentError(f"Invalid level given to unpack_dual: {level}", op="unpack_dual")
    if id(tensor) in lv.roots:
        root, tangent = lv.roots[id(tensor)]
        if root is tensor:
            return UnpackedDualTensor(_primal(tensor, lv), tangent)
    if (
        id(tensor) in lv.primals
        or not tensor.requires_grad
        or not dt.differentiable(tensor.dtype)
        or not lv.roots
    ):
        return UnpackedDualTensor(tensor, None)
    tangent = _tangent(tensor, lv)
    return UnpackedDualTensor(_primal(tensor, lv), tangent)


def _primal(tensor: Tensor, lv: _Level) -> Tensor:
    if not _reaches_other_leaves(tensor, lv):
        return tensor.detach()
    with enable_grad():
        primal = tensor.view_as(tensor)
    lv.primals.add(id(primal))
    lv.keep.append(primal)
    return primal
