"""The multi-tensor form of the eager SGD and Adam/AdamW steps: one C call per param group
(kernels/coptim.py), as PyTorch's ``foreach`` / ``fused`` paths, with the per-tensor update's
arithmetic exactly (the per-tensor ops stay the reference and the path for everything else).

It runs when ``foreach`` is not False (None, PyTorch's default, or True; ``fused`` too), the
step is eager (a step recorded into a graph is a sequence of ops, which the graph's passes fuse)
and every parameter, gradient and state buffer of the group is a C-contiguous float32 or
float64 array of one dtype; otherwise `sgd_step` / `adam_step` return False and the optimizer
runs its ops. State is kept exactly as the per-tensor path keeps it (the float32 step counts,
the buffers, created on first use), and every written tensor's version counter is bumped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels import coptim
from ..ops._registry import building_graph
from ..tensor import Tensor
from .optimizer import new_step_counter

__all__ = ["adam_step", "sgd_step"]


def _applies(group: dict[str, Any], params: list[Tensor]) -> bool:
    if group.get("foreach") is False or building_graph():
        return False
    dtype = params[0]._data.dtype
    return all(p._data.dtype == dtype for p in params)


def _grad_array(p: Tensor):
    g = p.grad
    return g._data if isinstance(g, Tensor) else None


def _bump(tensors) -> None:
    for t in tensors:
        t._vc[0] += 1


def sgd_step(
    optimizer, group: dict[str, Any], params: list[Tensor], facts: tuple, hyper: dict
) -> bool:
    """The SGD update of ``params`` in one call, or False (nothing changed) where it does not
    apply. ``facts``: (use_momentum, damped, decayed); ``hyper``: the group's values."""
    if not _applies(group, params):
        return False
    use_momentum, damped, decayed = facts
    grads = [_grad_array(p) for p in params]
    if any(g is None or g.shape != p._data.shape for g, p in zip(grads, params)):
        return False
    buffers = fresh = None
    made = []
    if use_momentum:
        buffers, fresh = [], []
        for p in params:
            state = optimizer.state[p]
            buf = state.get("momentum_buffer")
            fresh.append(int(buf is None))
            if buf is None:  # the kernel fills it with the gradient (as clone(g) does)
                buf = Tensor._wrap(np.empty_like(p._data))
                made.append((state, buf))
            buffers.append(buf._data)
    done = coptim.sgd(
        [p._data for p in params],
        grads,
        buffers,
        fresh,
        lr=hyper["lr"],
        momentum=hyper["momentum"] if use_momentum else 0.0,
        damp=1 - hyper["dampening"] if use_momentum and damped else 1.0,
        weight_decay=hyper["weight_decay"] if decayed else 0.0,
        damped=damped,
        decayed=decayed,
        nesterov=bool(group["nesterov"]),
        maximize=bool(group["maximize"]),
    )
    if not done:
        return False
    for state, buf in made:
        state["momentum_buffer"] = buf
    _bump(params)
    if use_momentum:
        _bump(optimizer.state[p]["momentum_buffer"] for p in params)
    return True


def adam_step(
    optimizer, group: dict[str, Any], params: list[Tensor], facts: tuple, hyper: dict
) -> bool:
    """The Adam/AdamW update of ``params`` in one call, or False (nothing changed) where it
    does not apply. ``facts``: (decayed, near_start); ``hyper``: the group's values."""
    if not _applies(group, params):
        return False
    decayed, near_start = facts
    grads = [_grad_array(p) for p in params]
    if any(g is None or g.shape != p._data.shape for g, p in zip(grads, params)):
        return False
    amsgrad = bool(group["amsgrad"])
    states = []
    for p in params:
        state = optimizer.state[p]
        if not state:
            state["step"] = new_step_counter()
            state["exp_avg"] = Tensor._wrap(_zeros(p))
            state["exp_avg_sq"] = Tensor._wrap(_zeros(p))
        if amsgrad and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = Tensor._wrap(_zeros(p))
        states.append(state)
    if any(s["step"]._data.dtype.kind != "f" for s in states):
        return False
    beta1, beta2 = hyper["beta1"], hyper["beta2"]
    lr = hyper["lr"]
    step_sizes, bc2 = [], []
    for s in states:
        step = float(s["step"]._data + 1)  # the count after this step, as step.add_(1) makes it
        step_sizes.append(lr / (1 - beta1**step))
        bc2.append((1 - beta2**step) ** 0.5)
    weight = 1 - beta1
    dtype = params[0]._data.dtype
    weight_decay = hyper["weight_decay"] if decayed else 0.0
    done = coptim.adam(
        [p._data for p in params],
        grads,
        [s["exp_avg"]._data for s in states],
        [s["exp_avg_sq"]._data for s in states],
        [s["max_exp_avg_sq"]._data for s in states] if amsgrad else None,
        step_sizes,
        bc2,
        lr_wd=1 - lr * weight_decay,
        weight_decay=weight_decay,
        w1=weight,
        # (lerp's w - 1, in the parameters' dtype as PyTorch's kernel computes it)
        w1_far=float(np.asarray(weight, dtype) - dtype.type(1)),
        beta2=beta2,
        one_minus_beta2=1 - beta2,
        eps=hyper["eps"],
        decayed=decayed,
        decoupled=bool(group["decoupled_weight_decay"]),
        near_start=near_start,
        maximize=bool(group["maximize"]),
    )
    if not done:
        return False
    for s in states:
        s["step"]._data += 1
    _bump(params)
    for s in states:
        _bump(s[k] for k in ("step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq") if k in s)
    return True


def _zeros(p: Tensor):
    return np.zeros(p._data.shape, dtype=p._data.dtype)
