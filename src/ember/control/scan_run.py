"""The ``scan`` node's compiled form (its ``compile`` rule, ops/_rules.py): generated code
(runtime/codegen.py) runs a scan through this instead of the reference kernel.

The reference kernel (control/scan.py) runs the body with the interpreter every step: its NumPy
kernels, an environment keyed by value, liveness looked up per node. Here the body is planned
once: a list of steps over numbered slots, each calling the op's ``run`` (its C implementation
where it has one, as generated code calls it), and the body's nodes that read only the lifted
operands and constants (a transposed weight, a bias sum) run once before the loop, not every
step. The stacked outputs are written into arrays made once. Bodies this plan does not cover
(symbolic sizes in an attribute, nodes other than calls and constants, effects or random ops)
keep the reference kernel.
"""

from __future__ import annotations

import numpy as np

from ..graph.rewrite import is_pure
from ..graph.subgraph import fresh_results
from ..symbolic import has_symbols

__all__ = ["compile_scan"]


def compile_scan(node):
    """``fn(*arrays, out=None) -> tuple`` running scan ``node`` as the reference kernel does,
    or None where the plan does not apply (see the module docstring)."""
    attrs = node.attrs
    body, nc, nx = attrs["body"], attrs["num_carries"], attrs["num_xs"]
    if attrs.get("checkpoint_every") is not None:
        return None
    slot: dict[int, int] = {id(v): i for i, v in enumerate(body.inputs)}
    values = len(body.inputs)
    # slots known before the loop: the lifted operands, constants and what they alone decide
    invariant = set(range(nc + nx, len(body.inputs)))
    constants: list[tuple[int, object]] = []
    hoisted: list[tuple] = []
    steps: list[tuple] = []
    for n in body.nodes:
        if n.kind == "input":
            continue
        if n.kind == "constant":
            constants.append((values, body.constants[n.name]))
            invariant.add(values)
            slot[id(n.outputs[0])] = values
            values += 1
            continue
        if n.kind != "call" or not is_pure(n) or has_symbols(n.attrs):
            return None
        if any(id(v) not in slot for v in n.inputs):
            return None
        ins = tuple(slot[id(v)] for v in n.inputs)
        outs = []
        for v in n.outputs:
            slot[id(v)] = values
            outs.append(values)
            values += 1
        step = (n.op.run, ins, n.attrs, tuple(outs), n.op.num_outputs == 1)
        if all(i in invariant for i in ins):
            hoisted.append(step)
            invariant.update(outs)
        else:
            steps.append(step)
    if any(id(v) not in slot for v in body.outputs):
        return None
    results = [slot[id(v)] for v in body.outputs]
    carry_out, y_out = results[:nc], results[nc:]
    y_types = [(tuple(v.type.shape), v.type.dtype.np) for v in body.outputs[nc:]]

    def run(*arrays, out=None):
        env = [None] * values
        for i, a in constants:
            env[i] = a
        carries = list(arrays[:nc])
        xs = arrays[nc : nc + nx]
        env[nc + nx : nc + nx + len(arrays) - nc - nx] = arrays[nc + nx :]
        for step in hoisted:
            _call(env, step)
        length = xs[0].shape[0]
        ys = [np.empty((length, *shape), dtype) for shape, dtype in y_types]
        for t in range(length):
            env[:nc] = carries
            for j, x in enumerate(xs):
                env[nc + j] = x[t]
            for step in steps:
                _call(env, step)
            carries = [env[i] for i in carry_out]
            for y, i in zip(ys, y_out):
                y[t] = env[i]
        results = fresh_results([*carries, *ys], arrays)
        if out is None:
            return results
        for o, r in zip(out, results):
            if o is not None:
                np.copyto(o, r)
        return tuple(r if o is None else o for o, r in zip(out, results))

    return run


def _call(env: list, step: tuple) -> None:
    fn, ins, attrs, outs, single = step
    result = fn(*[env[i] for i in ins], **attrs)
    if single:
        env[outs[0]] = result if type(result) is np.ndarray else np.asarray(result)
    else:
        for i, r in zip(outs, result):
            env[i] = r if type(r) is np.ndarray else np.asarray(r)
