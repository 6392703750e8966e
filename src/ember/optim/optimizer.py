"""The `Optimizer` base class: parameter groups, per-parameter state, and their state_dict.

An optimizer holds ``param_groups`` (a list of dicts, each with ``'params'`` and that group's
hyper-parameters; keys a group leaves out take the optimizer's ``defaults``) and ``state`` (a dict
from parameter to that parameter's buffers). Subclasses implement ``_update_group(group, params)``
with ember ops and in-place Tensor methods; `step` runs it under ``no_grad`` for the parameters
that have a gradient, so the whole update is a sequence of ops that a tracer can capture.

Hyper-parameters a scheduler may change (``lr``, momentum, betas, weight decay, ...; each
optimizer lists its own in ``runtime_hyperparameters``) enter the update through `_hyper`: a
Python float when eager; while a step is recorded into a graph, a float64 0-d symbolic scalar
read from a `HyperParameter` tensor, which the graph takes as an input fed with the group's value
at every run (capture/call.py). So a captured step follows ``group['lr'] = ...`` without tracing
again; `graph_facts` is what of a group the recorded graph does bake in (the other entries, and
the branches the update takes on the runtime ones, e.g. ``weight_decay != 0``), which
``ember.function`` keys its cache on.

``state_dict()`` uses PyTorch's layout: ``{'state': {index: {...}}, 'param_groups': [{...,
'params': [index, ...]}]}`` with parameters numbered in group order. It holds only ember Tensors,
Python numbers, bools, strings and tuples, so ``ember.save`` writes it without pickle.
``load_state_dict`` checks the whole dict against this optimizer before changing anything, so a
dict that does not fit raises `StateDictError` and leaves the optimizer as it was.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..autograd import enable_grad, no_grad
from ..errors import EmberError, StateDictError
from ..graph import scope as _scope
from ..ops._registry import _base_mode, apply, current_mode, scalar_value
from ..ops.add_scaled import ADD_SCALED
from ..ops.pointwise_composite import lerp_fused
from ..ops.sparse_tensor import SparseTensor
from ..tensor import Tensor
from ._complex import update_as_real
from ._hooks import (  # noqa: F401  (torch.optim.optimizer's global hooks live here too)
    HookMethods,
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
    wrap_class,
)
from ._state_values import (
    _is_number,
    _load_step,
    _load_value,
    new_step_counter,  # noqa: F401  (the optimizers import it from here)
)
from .train_op import minimize as record_minimize

__all__ = ["HyperParameter", "Optimizer", "OptimizerError", "required"]


class OptimizerError(EmberError, ValueError):
    """An invalid optimizer or scheduler argument: a bad hyper-parameter value, a parameter given
    twice, a tensor that cannot be optimized."""


class _Required:
    """Marks a hyper-parameter that has no default: every param group must give it."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()

_SET_MESSAGE = (
    "parameters must be in an ordered collection (list, tuple, generator), not a set: a set's "
    "order changes between runs, and the state_dict is keyed by order"
)


def check_number(
    op: str,
    name: str,
    value,
    *,
    low: float = 0.0,
    high: float | None = None,
    open_high=True,
    tensor_ok: bool = False,
) -> None:
    """Raise `OptimizerError` unless ``low <= value`` (and ``value < high`` / ``<= high``).
    ``tensor_ok``: a one-element real Tensor is accepted too (PyTorch's Tensor ``lr``), checked
    by its value; the group keeps the Tensor, and `_hyper` reads it at every step."""
    if tensor_ok and isinstance(value, Tensor):
        if value.numel() != 1 or value.dtype.is_complex or value.dtype.name == "bool":
            raise OptimizerError(
                f"Tensor {name} must be a 1-element real tensor, got shape "
                f"{tuple(value.shape)} ({value.dtype})",
                op=op,
            )
        value = float(value.detach().item())
    if not _is_number(value):
        raise OptimizerError(
            f"{name} must be a real number, got {value!r} ({type(value).__name__})", op=op
        )
    too_high = high is not None and (value >= high if open_high else value > high)
    if not value >= low or too_high:  # `not >=` also rejects NaN
        bound = "" if high is None else f" and {'<' if open_high else '<='} {high}"
        raise OptimizerError(f"invalid {name}={value!r}: it must be >= {low}{bound}", op=op)


class SparseGradientError(OptimizerError, RuntimeError):
    """An optimizer that takes no sparse gradient got one (PyTorch raises a RuntimeError)."""


class HyperParameter(Tensor):
    """A param group's hyper-parameter as a float64 0-d tensor, made while a step is recorded:
    the graph reads it as an input, and `current` is what a run feeds it (the group's value at
    that run). ``index`` picks an element of a tuple-valued one (``betas``)."""

    __slots__ = ("optimizer", "group_index", "key", "index")

    def __init__(self, optimizer, group_index: int, key: str, index: int | None = None):
        self.optimizer, self.group_index, self.key, self.index = optimizer, group_index, key, index
        super().__init__(self.current())

    def current(self) -> np.ndarray:
        """The hyper-parameter's value now, as a fresh float64 0-d array."""
        value = self.optimizer.param_groups[self.group_index][self.key]
        if self.index is not None:
            value = value[self.index]
        if isinstance(value, Tensor):
            value = value.item()
        return np.array(value, dtype=np.float64)

    def describe(self) -> str:
        where = f"[{self.index}]" if self.index is not None else ""
        return f"param_groups[{self.group_index}]['{self.key}']{where}"


def _frozen(value):
    """A hashable stand-in for a param group's value (lists become tuples)."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, Tensor):
        return ("tensor", id(value))
    return value


class Optimizer(HookMethods):
    """Base class of ember's optimizers (PyTorch's ``torch.optim.Optimizer`` interface; the
    hooks of ``step`` and the state dicts in optim/_hooks.py)."""

    # the hyper-parameters that a recorded step reads at run time (see the module docstring);
    # an optimizer that leaves this empty bakes every value into the graph it is recorded in
    runtime_hyperparameters: tuple[str, ...] = ()
    # per-parameter state entries that are 0-d whatever the parameter's shape (NAdam's
    # mu_product, ASGD's eta and mu): `load_state_dict` does not hold them to its shape
    scalar_state: tuple[str, ...] = ()
    # whether `step` may be recorded into a graph (LBFGS's refuses): if so, ``ember.function``
    # keys a compiled function on ``state`` (its buffers, and its plain Python values, which a
    # recorded step bakes in); if not, no graph reads the state and the key leaves it out
    records_steps: bool = True
    # whether an optimizer with its own `step` takes complex parameters (the base `step` runs
    # every rule on their real form, optim/_complex.py; LBFGS's flattens them itself)
    takes_complex: bool = False

    def __init__(self, params: Iterable, defaults: dict[str, Any]) -> None:
        if isinstance(params, Tensor):
            raise OptimizerError(
                "params must be an iterable of Tensors or of param-group dicts, got a single "
                "Tensor; pass [tensor] or model.parameters()",
                op=type(self).__name__,
            )
        if isinstance(params, (set, frozenset)):
            raise OptimizerError(_SET_MESSAGE, op=type(self).__name__)
        self.defaults = dict(defaults)
        self._validate({k: v for k, v in self.defaults.items() if v is not required})
        self.state: defaultdict[Tensor, dict] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        self._step_count = 0
        self._hyper_tensors: dict[tuple, HyperParameter] = {}
        groups = list(params)
        if not groups:
            raise OptimizerError("got an empty parameter list", op=type(self).__name__)
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # ------------------------------------------------------------------------------ groups
    def _validate(self, group: dict[str, Any]) -> None:
        """Check a group's hyper-parameters (subclasses raise `OptimizerError` naming the value)."""

    def state_shape(self, name: str, param: Tensor) -> tuple:
        """The shape per-parameter state ``name`` has (what `load_state_dict` holds a loaded
        value to): 0-d for `scalar_state`, else the parameter's (Adafactor's factored
        variances override this)."""
        return () if name in self.scalar_state else tuple(param.shape)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own hyper-parameters (missing ones: defaults)."""
        op = type(self).__name__
        if not isinstance(param_group, dict):
            raise OptimizerError(
                f"a param group must be a dict, got {type(param_group).__name__}", op=op
            )
        group = dict(param_group)
        params = group.get("params")
        if params is None:
            raise OptimizerError("a param group must have a 'params' entry", op=op)
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise OptimizerError(_SET_MESSAGE, op=op)
        params = list(params)
        names = None
        if params and all(isinstance(p, tuple) and len(p) == 2 for p in params):
            names = [name for name, _ in params]  # named_parameters()
            params = [p for _, p in params]
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise OptimizerError(
                    f"can only optimize Tensors, but parameter {i} of the group is a "
                    f"{type(p).__name__}",
                    op=op,
                )
            if not p.is_leaf and not p.retains_grad:
                raise OptimizerError(
                    f"cannot optimize a non-leaf tensor (parameter {i}, shape {tuple(p.shape)}, "
                    f"made by {p.grad_fn.name()}); optimize the leaf it was computed from, or "
                    "use .detach().requires_grad_()",
                    op=op,
                )
            complex_ok = p.dtype.is_complex and (
                type(self).step is Optimizer.step or type(self).takes_complex
            )
            if not p.dtype.is_floating_point and not complex_ok:
                what = (
                    "floating-point or complex"
                    if type(self).step is Optimizer.step or type(self).takes_complex
                    else ("floating-point")
                )
                raise OptimizerError(
                    f"can only optimize {what} tensors; parameter {i} has dtype {p.dtype}",
                    op=op,
                )
        seen: set[int] = set()
        for i, p in enumerate(params):
            if id(p) in seen:
                raise OptimizerError(
                    f"parameter {i} (shape {tuple(p.shape)}) appears twice in the same param group",
                    op=op,
                )
            seen.add(id(p))
        for g_index, other in enumerate(self.param_groups):
            for p in other["params"]:
                if id(p) in seen:
                    raise OptimizerError(
                        f"a parameter of shape {tuple(p.shape)} is already in param group "
                        f"{g_index}; each parameter may belong to one group only",
                        op=op,
                    )
        for key, default in self.defaults.items():
            if default is required and key not in group:
                raise OptimizerError(
                    f"the param group does not give {key!r}, which has no default", op=op
                )
            group.setdefault(key, default)
        self._validate(group)
        group["params"] = params
        if names is not None:
            group["param_names"] = names
        # as PyTorch: the optimizer keeps the caller's dict (its params now a list, defaults
        # filled in), so it can make another optimizer and later edits of it reach this one;
        # written only once every check has passed
        param_group.update(group)
        self.param_groups.append(param_group)

    # ---------------------------------------------------------------------- hyper-parameters
    def _hyper(self, group: dict[str, Any], key: str, index: int | None = None):
        """``group[key]`` (element ``index`` of it) for the update's arithmetic: a Python float
        when eager; while a graph is recorded, a float64 0-d symbolic scalar the graph reads as
        an input (see the module docstring). Multiply tensors by it through `as_operand`."""
        if getattr(current_mode(), "scalar", None) is None:
            value = group[key] if index is None else group[key][index]
            return float(value.item() if isinstance(value, Tensor) else value)
        g = next(i for i, other in enumerate(self.param_groups) if other is group)
        holder = self._holder(g, key, index)
        holder._data = holder.current()
        return scalar_value(holder)

    def _holder(self, g: int, key: str, index: int | None) -> HyperParameter:
        holder = self._hyper_tensors.get((g, key, index))
        if holder is None:
            holder = self._hyper_tensors[(g, key, index)] = HyperParameter(self, g, key, index)
        return holder

    def hyperparameter_tensors(self) -> list[tuple[str, HyperParameter]]:
        """(name, `HyperParameter`) of each runtime hyper-parameter of each group (made now
        if need be): ``lr``, ``betas0``, and ``g1_lr`` in a second group. A recorder names the
        graph inputs after them."""
        out = []
        for g, group in enumerate(self.param_groups):
            where = f"g{g}_" if len(self.param_groups) > 1 else ""
            for key in self.runtime_hyperparameters:
                value = group.get(key)
                indices = range(len(value)) if isinstance(value, (tuple, list)) else [None]
                for i in indices:
                    name = f"{where}{key}{'' if i is None else i}"
                    out.append((name, self._holder(g, key, i)))
        return out

    def _branch_facts(self, group: dict[str, Any]) -> tuple:
        """The decisions the update takes in Python on the group's runtime hyper-parameters
        (``weight_decay != 0``): a recorded graph bakes them in."""
        return ()

    def graph_facts(self, group: dict[str, Any]) -> tuple:
        """What of ``group`` a recorded step bakes into its graph: every entry but the
        parameters and the runtime hyper-parameters, and the update's branches on those."""
        runtime = self.runtime_hyperparameters
        baked = tuple(
            (k, _frozen(v))
            for k, v in group.items()
            if k not in ("params", "param_names") and k not in runtime
        )
        return baked + self._branch_facts(group)

    # ------------------------------------------------------------------------------ steps
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's gradient: to None (default) or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:  # a create_graph gradient: cut its history
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    with no_grad():
                        p.grad.zero_()

    def step(self, closure: Callable[[], Any] | None = None):
        """Update every parameter that has a gradient; ``closure`` (if given) re-evaluates the
        loss with gradients enabled first, and its result is returned."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        note = getattr(current_mode(), "note_optimizer", None)
        if note is not None:  # a graph is being recorded: it tracks this optimizer's state
            note(self)
        with no_grad(), _scope.entered(_scope.OPTIMIZER if _scope.recording() else None):
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                if any(type(p.grad) is SparseTensor for p in params) or self._captured_sparse(
                    params
                ):
                    self._update_sparse(group, params)
                elif any(p.dtype.is_complex for p in params):
                    update_as_real(self, group, params)
                elif params:
                    self._update_group(group, params)
        self._step_count += 1
        return loss

    def minimize(self, loss, var_list: Iterable | None = None, name: str | None = None):
        """Minimize ``loss``. Built inside ``with ember.Graph():``, this records the backward
        pass and this optimizer's step into the graph and returns a training op that
        ``ember.Session.run`` executes (optim/train_op.py); eagerly (or while ``ember.function``
        traces) it is ``zero_grad(); loss.backward(); step()`` now and returns None.
        ``var_list`` restricts the update to some of the optimizer's parameters."""
        return record_minimize(self, loss, var_list, name)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement _update_group")

    #: PyTorch's error for a sparse gradient (F.embedding(sparse=True)'s); the optimizers that
    #: take one (SGD, Adagrad, SparseAdam) override `_update_sparse`
    sparse_grad_error = "{name} does not support sparse gradients"

    def _update_sparse(self, group: dict[str, Any], params: list[Tensor]) -> None:
        """The update of a group where some gradient is a sparse tensor: refused here (a
        RuntimeError, as PyTorch's)."""
        raise SparseGradientError(
            self.sparse_grad_error.format(name=type(self).__name__), op=type(self).__name__
        )

    def _captured_sparse(self, params: list[Tensor]) -> bool:
        """While a graph is built: whether a gradient it computes densely would be sparse
        eagerly (F.embedding(sparse=True)'s), for the optimizers whose sparse step refuses it
        or densifies it (SparseAdam's reads a sparse tensor: it keeps its dense step)."""
        mode = current_mode()
        if mode is _base_mode[0] or type(self)._update_sparse not in (
            Optimizer._update_sparse,
            Optimizer._update_densified,
        ):
            return False
        from ..functional._embedding_sparse import captured_sparse

        return any(captured_sparse(p, mode) for p in params)

    def _update_densified(self, group: dict[str, Any], params: list[Tensor]) -> None:
        """`_update_group` with each sparse gradient replaced by its dense equivalent for the
        step (for SGD and Adagrad the same update as PyTorch's sparse one, which refuses
        ``weight_decay`` as here); the sparse gradients are put back afterwards."""
        name = type(self).__name__
        if group.get("weight_decay", 0) != 0:
            sgd = "add(sparse, dense) is not supported. Use add(dense, sparse) instead."
            raise SparseGradientError(
                sgd
                if name == "SGD"
                else "weight_decay option is not compatible with sparse gradients",
                op=name,
            )
        sparse = {id(p): p.grad for p in params if type(p.grad) is SparseTensor}
        for p in params:
            if id(p) in sparse:
                p.grad = sparse[id(p)].to_dense()
        try:
            self._update_group(group, params)
        finally:
            for p in params:
                if id(p) in sparse:
                    p.grad = sparse[id(p)]

    @staticmethod
    def _step_counter(state: dict):
        """Advance a parameter's step count (a float32 0-d tensor, as in PyTorch) and return the
        new count for the bias-correction arithmetic, which PyTorch also does in double
        precision: a Python float when eager, a float64 0-d symbolic tensor while a graph is
        built (so a captured training step computes it instead of baking in one step's value).
        """
        step = state["step"]
        step.add_(1)
        return scalar_value(step)

    # ------------------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state in PyTorch's layout (parameters replaced by their indices)."""
        index: dict[int, int] = {}
        groups = []
        start = 0
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                index.setdefault(id(p), i)
            packed["params"] = [index[id(p)] for p in group["params"]]
            start += len(group["params"])
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a dict made by `state_dict` (or read back by ``ember.load``).

        Everything is checked before anything changes: the number of groups and of parameters
        per group, that every state entry belongs to a listed parameter, the shapes of the
        per-parameter buffers, and the hyper-parameters. Buffers are taken as PyTorch takes them:
        cast to a floating-point parameter's dtype, and so the dict's own tensors when the dtype
        already matches (a second optimizer loaded from the same dict shares, and updates, them);
        a ``step`` tensor is likewise the same tensor (`_load_step`).
        """
        op = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict):
            raise StateDictError(
                f"expected a dict with 'state' and 'param_groups', got {type(state_dict).__name__}",
                op=op,
            )
        missing = [k for k in ("state", "param_groups") if k not in state_dict]
        if missing:
            raise StateDictError(
                f"the state dict has no {' or '.join(map(repr, missing))} entry; it must come "
                "from an optimizer's state_dict()",
                op=op,
            )
        saved_groups = list(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise StateDictError(
                f"the state dict has {len(saved_groups)} parameter group(s) but this optimizer "
                f"has {len(self.param_groups)}",
                op=op,
            )
        id_map: dict[Any, Tensor] = {}
        new_groups = []
        for g, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            saved_params = list(saved.get("params", ()))
            if len(saved_params) != len(group["params"]):
                raise StateDictError(
                    f"parameter group {g} has {len(saved_params)} parameter(s) in the state "
                    f"dict but {len(group['params'])} in this optimizer",
                    op=op,
                )
            id_map.update(zip(saved_params, group["params"]))
            new_group = {k: v for k, v in saved.items() if k != "params"}
            for key, default in self.defaults.items():
                if default is not required:
                    new_group.setdefault(key, default)
            try:
                self._validate(new_group)
            except OptimizerError as exc:
                raise StateDictError(f"parameter group {g}: {exc.detail}", op=op) from None
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            new_groups.append(new_group)

        new_state: defaultdict[Tensor, dict] = defaultdict(dict)
        for key, entries in dict(state_dict["state"]).items():
            param = id_map.get(key)
            if param is None:
                raise StateDictError(
                    f"the state dict has state for parameter {key!r}, which none of its "
                    f"param groups lists (they list {sorted(id_map, key=str)})",
                    op=op,
                )
            if not isinstance(entries, dict):
                raise StateDictError(
                    f"the state of parameter {key!r} must be a dict, got {type(entries).__name__}",
                    op=op,
                )
            device_step = any(  # (PyTorch's "special device hosting for step")
                key in saved.get("params", ()) and (saved.get("capturable") or saved.get("fused"))
                for saved in saved_groups
            )
            new_state[param] = {
                name: _load_step(op, key, value, device_step)
                if name == "step"
                else _load_value(op, key, name, value, param, self.state_shape(name, param))
                for name, value in entries.items()
            }
        self.param_groups[:] = new_groups
        self.state = new_state

    def __repr__(self) -> str:
        # PyTorch's layout: each group opens with a newline and ends its lines with one, so
        # groups are separated by a blank line; every key but "params" shown (param_names too)
        text = f"{type(self).__name__} ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(k for k in group if k != "params"):
                text += f"    {key}: {group[key]}\n"
        return text + ")"


def lerp_(start: Tensor, end: Tensor, weight, near_start: bool | None = None) -> Tensor:
    """``start += weight * (end - start)`` in place, in PyTorch's two-sided lerp form (the form
    that is exact at the end nearer to ``weight``). ``weight``: a Python float, or a symbolic
    scalar (`Optimizer._hyper`) with ``near_start`` saying whether ``|weight| < 0.5`` (a branch
    the optimizer's `_branch_facts` must name)."""
    if near_start is None:
        near_start = abs(weight) < 0.5
    if isinstance(weight, float) and start.dtype in (dt.float32, dt.float64):
        # (PyTorch's lerp_ kernel: one fused multiply-add, ops/pointwise_composite.py)
        return start.copy_(lerp_fused(start, end, weight))
    w = as_operand(weight, start)
    if start.dtype not in (dt.float32, dt.float64):
        if near_start:
            return start.add_((end - start) * w)
        return start.copy_(end - (end - start) * as_operand(1 - weight, start))
    # (a symbolic weight: PyTorch's two forms, fma(w, end - start, start) or fma(w - 1,
    # end - start, end), w - 1 computed in the tensors' dtype, as lerp_fused's; ops/add_scaled.py)
    if near_start:
        return start.copy_(apply(ADD_SCALED, start, end - start, w))
    return start.copy_(apply(ADD_SCALED, end, end - start, w - 1))


def as_operand(scalar, like: Tensor):
    """A scalar coefficient ready to multiply ``like``: a Python float as it is; a symbolic one
    (see `Optimizer._step_counter`) cast to ``like``'s dtype, which is what the eager update's
    Python float becomes inside the op, so the two paths round the same way."""
    return scalar if isinstance(scalar, float) else scalar.to(like.dtype)


wrap_class(Optimizer)  # (its subclasses are wrapped by HookMethods.__init_subclass__)
