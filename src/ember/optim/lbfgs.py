"""L-BFGS, with an optional strong-Wolfe line search: PyTorch's ``torch.optim.LBFGS``.

One `LBFGS.step(closure)` runs up to ``max_iter`` iterations: the two-loop recursion turns the
last ``history_size`` pairs (s, y) of parameter and gradient changes into a search direction d
(the first iteration: the negative gradient); the step along d is ``lr`` (the first iteration of
all: ``min(1, 1 / sum|g|) * lr``) or what the strong-Wolfe line search finds (optim/
_line_search.py). It stops early when the gradient's largest element is at most
``tolerance_grad``, or the step or the loss change is below ``tolerance_change``, or after
``max_eval`` evaluations of the closure. The arithmetic follows PyTorch's line by line: dot
products and the quantities made from them (ys, rho, H_diag, the line-search slopes) are 0-d
tensors of the parameters' dtype, losses Python floats.

All parameters form one flat vector, so there is one param group. The state is kept on the
first parameter as PyTorch keeps it: ``func_evals``, ``n_iter``, ``d``, ``t``, ``old_dirs``,
``old_stps``, ``ro``, ``H_diag``, ``prev_flat_grad``, ``prev_loss`` and ``al``.

The step runs eagerly only: it calls the closure a data-dependent number of times and decides
in Python on the values it computes, so it is not recorded into an ``ember.function`` graph
(and refuses to be). The closure may be an ``ember.function`` (its forward and backward are
the costly part): LBFGS's state is no part of that function's cache key (``records_steps``),
so the closure is traced once, not at every step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..autograd import enable_grad, no_grad
from ..errors import StateDictError
from ..ops import api as E
from ..ops._registry import current_mode
from ..tensor import Tensor
from ._line_search import strong_wolfe
from .optimizer import Optimizer, OptimizerError, check_number

__all__ = ["LBFGS"]

_STATE_KEYS = (
    "func_evals",
    "n_iter",
    "d",
    "t",
    "old_dirs",
    "old_stps",
    "ro",
    "H_diag",
    "prev_flat_grad",
    "prev_loss",
    "al",
)


class LBFGS(Optimizer):
    """``LBFGS(params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
    tolerance_change=1e-9, history_size=100, line_search_fn=None)``, as ``torch.optim.LBFGS``
    (``max_eval`` defaults to ``max_iter * 5 // 4``; ``line_search_fn`` is None or
    ``"strong_wolfe"``).

    ``step(closure)`` needs the closure, which clears the gradients, computes the loss, calls
    ``backward()`` and returns the loss. It runs eagerly only (see the module docstring).
    Differences from PyTorch: an unknown ``line_search_fn`` is refused when the optimizer is
    built rather than at the first step, and a second param group is refused by
    `add_param_group` as by the constructor."""

    records_steps = False  # (see the module docstring)
    takes_complex = True  # (a complex parameter is two real ones in the flat vectors)

    def __init__(
        self,
        params: Iterable,
        lr: float = 1,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {
            "lr": lr,
            "max_iter": max_iter,
            "max_eval": max_eval,
            "tolerance_grad": tolerance_grad,
            "tolerance_change": tolerance_change,
            "history_size": history_size,
            "line_search_fn": line_search_fn,
        }
        super().__init__(params, defaults)
        self._params = self.param_groups[0]["params"]
        # a complex parameter counts its real and imaginary parts, as PyTorch's
        self._numel = sum(2 * p.numel() if p.dtype.is_complex else p.numel() for p in self._params)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if self.param_groups:
            raise OptimizerError(
                "LBFGS doesn't support per-parameter options (parameter groups): all "
                "parameters form one vector",
                op="LBFGS",
            )
        super().add_param_group(param_group)

    def _validate(self, group: dict[str, Any]) -> None:
        op = "LBFGS"
        check_number(op, "lr", group["lr"], tensor_ok=True)
        for name in ("max_iter", "max_eval", "history_size"):
            value = group[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise OptimizerError(f"{name} must be a positive int, got {value!r}", op=op)
        check_number(op, "tolerance_grad", group["tolerance_grad"], low=float("-inf"))
        check_number(op, "tolerance_change", group["tolerance_change"], low=float("-inf"))
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise OptimizerError(
                f"line_search_fn must be None or 'strong_wolfe', got {group['line_search_fn']!r}",
                op=op,
            )

    # ------------------------------------------------------------------ flat vector helpers
    def _gather_flat_grad(self) -> Tensor:
        views = []
        for p in self._params:
            view = E.zeros(p.numel(), dtype=p.dtype) if p.grad is None else p.grad.reshape(-1)
            if view.dtype.is_complex:  # (real and imaginary parts side by side, as PyTorch's)
                view = E.view_as_real(view).reshape(-1)
            views.append(view)
        return E.cat(views, 0)

    def _add_grad(self, step_size, update: Tensor) -> None:
        offset = 0
        for p in self._params:
            if p.dtype.is_complex:
                numel = 2 * p.numel()
                part = E.view_as_complex(update[offset : offset + numel].reshape(*p.shape, 2))
            else:
                numel = p.numel()
                part = update[offset : offset + numel].reshape(p.shape)
            p.add_(part, alpha=step_size)  # (PyTorch's: one fused multiply-add)
            offset += numel

    def _clone_param(self) -> list[Tensor]:
        return [p.clone() for p in self._params]

    def _set_param(self, params_data: list[Tensor]) -> None:
        for p, data in zip(self._params, params_data):
            p.copy_(data)

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    # ------------------------------------------------------------------------------ step
    def step(self, closure: Callable[[], Any] | None = None):
        """Run up to ``max_iter`` L-BFGS iterations; returns the closure's first loss."""
        if closure is None:
            raise OptimizerError(
                "LBFGS.step needs a closure that re-evaluates the loss (and calls backward)",
                op="LBFGS",
            )
        if getattr(current_mode(), "scalar", None) is not None:
            raise OptimizerError(
                "LBFGS.step runs eagerly only: it evaluates the closure a number of times that "
                "depends on the values it computes, so it cannot be recorded into a graph; call "
                "it outside ember.function (the closure itself may call a compiled function)",
                op="LBFGS",
            )
        with no_grad():
            return self._step(closure)

    def _step(self, user_closure):  # noqa: C901
        def closure():
            with enable_grad():
                return user_closure()

        group = self.param_groups[0]
        lr = group["lr"]
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if flat_grad.abs().max() <= tolerance_grad:  # already optimal
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # the search direction
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y.dot(s)
                if ys > 1e-10:  # curvature condition: update the memory
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)
                num_old = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                # the two-loop recursion: d = -H g
                q = flat_grad.neg()
                for i in range(num_old - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q.sub_(old_dirs[i] * al[i])
                d = r = q * H_diag
                for i in range(num_old):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r.add_(old_stps[i] * (al[i] - be_i))

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # the step length
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr
            else:
                t = lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:  # not a descent direction
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = self._clone_param()

                def obj_func(x, t, d):
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals
                )
                self._add_grad(t, d)
                opt_cond = flat_grad.abs().max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    # re-evaluate unless this is the last iteration (the caller does that)
                    loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = flat_grad.abs().max() <= tolerance_grad
                    ls_func_evals = 1

            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if (d * t).abs().max() <= tolerance_change:  # the step is too small
                break
            if abs(loss - prev_loss) < tolerance_change:  # the loss no longer changes
                break

        state["d"], state["t"] = d, t
        state["old_dirs"], state["old_stps"], state["ro"] = old_dirs, old_stps, ro
        state["H_diag"] = H_diag
        state["prev_flat_grad"], state["prev_loss"] = prev_flat_grad, prev_loss
        return orig_loss

    # ------------------------------------------------------------------------------ state
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a dict made by `state_dict` (this optimizer's or PyTorch's layout): the param
        group as for every optimizer; the state's flat vectors are checked against the total
        number of parameter elements and copied."""
        op = "LBFGS.load_state_dict"
        if not isinstance(state_dict, dict) or "state" not in state_dict:
            return super().load_state_dict(state_dict)  # (its error names what is missing)
        entries = dict(state_dict["state"])
        saved_params = [
            k for g in state_dict.get("param_groups", ()) for k in dict(g).get("params", ())
        ]
        loaded = {}
        for key, entry in entries.items():
            if not saved_params or key != saved_params[0] or not isinstance(entry, dict):
                raise StateDictError(
                    f"LBFGS keeps its state on its first parameter, but the state dict has "
                    f"state for parameter {key!r}",
                    op=op,
                )
            unknown = sorted(set(entry) - set(_STATE_KEYS))
            if unknown:
                raise StateDictError(f"unknown LBFGS state entries {unknown}", op=op)
            loaded = {name: self._load_entry(op, name, value) for name, value in entry.items()}
        super().load_state_dict({**state_dict, "state": {}})
        if loaded:
            self.state[self._params[0]] = loaded

    def _load_entry(self, op: str, name: str, value):
        dtype = self._params[0].dtype

        def copy(v):
            if isinstance(v, Tensor):
                if v.ndim not in (0, 1) or (v.ndim == 1 and v.shape[0] != self._numel):
                    raise StateDictError(
                        f"state {name!r} holds a tensor of shape {tuple(v.shape)}; LBFGS's vectors "
                        f"have {self._numel} elements (all the parameters)",
                        op=op,
                    )
                with no_grad():
                    return v.detach().to(dtype).clone()
            return v

        if isinstance(value, (list, tuple)):
            return [copy(v) for v in value]
        return copy(value)
