"""The run-time half of ``ember.script``: the helpers converted code calls (as ``_ember_rt``).

Each helper decides when it runs, from the values it is given, whether the construct is plain
Python or becomes graph control flow:

* a condition (or a ``range`` bound) that is a tensor while a graph is being built (a traced
  symbolic tensor, or an eager tensor a trace reads) is **staged**: ``if_stmt`` records
  ``ember.cond`` with both branches, ``while_stmt`` an ``ember.while_loop``, ``for_stmt`` over a
  tensor ``range`` an ``ember.fori_loop`` (a ``while_loop`` when it has a break flag or a step);
* anything else (Python values, eager tensors outside a trace) runs as the Python statement.

Converted statements pass their variables' values in and take the new values back (one tuple,
in ``names`` order). Staging sorts each variable by kind: a tensor (or a tuple, list, dict of
tensors) goes through the node; a Python value must be the same on both branches or stay
unchanged in a loop; a Python number a loop changes becomes a tensor carry; a variable with no
value (`Undefined`) on one side becomes an `Undefined` that raises `ScriptError` naming the
variable, the construct and its line when used. The generated flags (``_ember_*``: break,
continue, return) are Python bools that become bool tensors once a tensor decides them; the
return value, unset on a path that has not returned yet, is filled with zeros there (the return
flag guarantees it is never read).

Staging a branch or loop body traces it once; when the first trace shows the two branches (or
the body and the carries) disagree in a way that can be fixed (a flag that differs, a return
value set on one side only), the construct is traced once more with the fix, so Python side
effects inside such a branch can run twice while tracing.
"""

from __future__ import annotations

import builtins

from ..control.flow import cond
from ..errors import ScriptError
from ..graph.builder import GraphBuilder
from ..ops._registry import TensorBase, current_mode
from .script_analysis import RETVAL
from .script_loops import TensorRange, staged_loop
from .script_values import (
    _INTERNAL,
    NO_RETURN,
    Undefined,
    _describe,
    _kind,
    _leaves,
    _number,
    _refuse_in_try,
    _Retry,
    _same_python,
    _scalar,
    _site,
    _struct,
    _zeros_like_struct,
    staged,
)

# ------------------------------------------------------------------------------ expressions


def pick(scope: dict, names: tuple) -> tuple:
    return tuple(scope[n] if n in scope else Undefined(n) for n in names)


def not_(x):
    if staged(x):
        from ..ops.api import logical_not

        return logical_not(x)
    return not x


def _logical(op: str, a, b):
    from ..ops import api

    return getattr(api, op)(a, b)


def and_(value, *thunks):
    for i, thunk in enumerate(thunks):
        if staged(value):
            return _logical("logical_and", value, and_(thunk(), *thunks[i + 1 :]))
        if not value:
            return value
        value = thunk()
    return value


def or_(value, *thunks):
    for i, thunk in enumerate(thunks):
        if staged(value):
            return _logical("logical_or", value, or_(thunk(), *thunks[i + 1 :]))
        if value:
            return value
        value = thunk()
    return value


def guard(*flags):
    """True when none of the (break / continue / return) flags is set."""
    if any(staged(f) for f in flags):
        return not_(or_(flags[0], *[(lambda f=f: f) for f in flags[1:]]))
    return not any(flags)


def if_exp(test, true_thunk, false_thunk, location: str):
    if staged(test):
        return cond(test, true_thunk, false_thunk)
    return true_thunk() if test else false_thunk()


def checked(value):
    """``value``, unless it is (or holds) an `Undefined`: then its error."""
    for leaf in _leaves(value):
        if isinstance(leaf, Undefined):
            raise leaf.error()
    return value


def result(retval, returned, falls_off: bool, location: str):
    """The scripted function's return value (from the lowered ``return`` flags)."""
    if staged(returned) and falls_off:
        raise ScriptError(
            "the function returns a value on some paths and reaches its end (returning None) "
            "on others, chosen by a tensor; end it with a return statement",
            op="script",
            location=location,
        )
    if retval is NO_RETURN:
        return None
    return checked(retval)


# ------------------------------------------------------------------------------ if


def if_stmt(test, true_fn, false_fn, init, names, construct, location, in_try):
    if not staged(test):
        return true_fn(*init) if test else false_fn(*init)
    _refuse_in_try(in_try, construct, location)
    return staged_if(test, true_fn, false_fn, init, names, _site(construct, location), location)


def _agree(a_vals, b_vals) -> bool:
    for a, b in zip(a_vals, b_vals):
        ka, kb = _kind(a), _kind(b)
        if ka != kb or (ka == "T" and _struct(a) != _struct(b)):
            return False
        if ka == "P" and not _same_python(a, b):
            return False
    return True


def _if_plan(t_vals, f_vals, names, site, location) -> list:
    """Per variable: ('cond', fix_true, fix_false) | ('const', value) | ('undef', value)."""
    plan = []
    for name, a, b in zip(names, t_vals, f_vals):
        ka, kb = _kind(a), _kind(b)
        internal = name.startswith(_INTERNAL)
        if ka == kb == "T":
            if _struct(a) != _struct(b):
                raise ScriptError(
                    f"variable {name!r} is {_describe(a)} after the true branch and "
                    f"{_describe(b)} after the false branch of the {site}, whose condition is a "
                    "tensor; both branches must give it the same structure, shapes and dtypes",
                    op="script",
                    location=location,
                )
            plan.append(("cond", None, None))
        elif ka == kb == "P":
            if _same_python(a, b):
                plan.append(("const", a))
            elif internal and _number(a) and _number(b):

                def promote(v, a=a, b=b):
                    return _scalar(v, a, b)

                plan.append(("cond", promote, promote))
            else:
                raise ScriptError(
                    f"variable {name!r} is {_describe(a)} after the true branch and "
                    f"{_describe(b)} after the false branch of the {site}, whose condition is a "
                    "tensor; a Python value must be equal on both branches (make it a tensor to "
                    "let it depend on the condition)",
                    op="script",
                    location=location,
                )
        elif "U" in (ka, kb):
            other, k_other = (b, kb) if ka == "U" else (a, ka)
            if k_other == "U":
                plan.append(("undef", a))
            elif name == RETVAL and k_other == "T":  # the side that has not returned yet

                def fill(v, o=other):
                    return _zeros_like_struct(o)

                plan.append(("cond", fill, None) if ka == "U" else ("cond", None, fill))
            elif name == RETVAL:
                plan.append(("const", other))
            else:
                reason = (
                    f"it is assigned in only one branch of the {site}, whose condition is a "
                    "tensor; assign it in both branches (or before the `if`)"
                )
                plan.append(("undef", Undefined(name, reason, location)))
        else:  # a tensor on one side, a Python value on the other
            t, p = (a, b) if ka == "T" else (b, a)
            if not (_number(p) and isinstance(t, TensorBase)):
                raise ScriptError(
                    f"variable {name!r} is {_describe(t)} in one branch and {_describe(p)} in "
                    f"the other of the {site}, whose condition is a tensor; give it a tensor on "
                    "both branches",
                    op="script",
                    location=location,
                )
            from ..ops.creation import full

            def fix(v, t=t):
                return full(tuple(t.shape), v, dtype=t.dtype) if _number(v) else v

            plan.append(("cond", fix, fix))
    return plan


def staged_if(pred, true_fn, false_fn, init, names, site, location):
    """Record ``ember.cond`` for a converted ``if`` (see the module docstring)."""
    record: dict = {}
    plan = None

    def branch(side: str, fn):
        def run():
            vals = tuple(fn(*init))
            record[side] = vals
            if plan is None:
                if side == "false" and not _agree(record["true"], vals):
                    raise _Retry
                outs = tuple(v for v in vals if _kind(v) == "T")
            else:
                fix_at = 1 if side == "true" else 2
                outs = tuple(
                    step[fix_at](v) if step[fix_at] else v
                    for step, v in zip(plan, vals)
                    if step[0] == "cond"
                )
            if not outs:
                raise _Retry  # no tensor to return: the branches only agree on Python values
            return outs

        return run

    for _attempt in range(2):
        try:
            outs = iter(cond(pred, branch("true", true_fn), branch("false", false_fn)))
            break
        except _Retry:
            if "false" not in record:  # the true branch gave no tensor; trace the other alone
                record["false"] = tuple(_trace_only(false_fn, init))
            plan = _if_plan(record["true"], record["false"], names, site, location)
            if not any(step[0] == "cond" for step in plan):
                outs = iter(())
                break
    else:  # pragma: no cover - the second attempt follows a plan that agrees by construction
        raise ScriptError(f"could not convert the {site}", op="script", location=location)
    if plan is None:
        plan = [("cond", None, None) if _kind(v) == "T" else ("const", v) for v in record["true"]]
        plan = [("undef", v) if _kind(v) == "U" else p for p, v in zip(plan, record["true"])]
    return tuple(next(outs) if step[0] == "cond" else step[1] for step in plan)


def _trace_only(fn, init):
    """Run ``fn`` under a throwaway subgraph builder (to see what a branch assigns)."""
    from ..graph.subgraph import SubgraphBuilder

    parent = current_mode()
    with SubgraphBuilder("probe", parent if isinstance(parent, GraphBuilder) else None):
        return fn(*init)


# ------------------------------------------------------------------------------ loops


def while_stmt(test_fn, body_fn, init, names, construct, location, in_try):
    vals = tuple(init)
    while True:
        c = test_fn(*vals)
        if staged(c):
            _refuse_in_try(in_try, construct, location)
            return staged_loop(test_fn, body_fn, vals, names, _site(construct, location), location)
        if not c:
            return vals
        vals = tuple(body_fn(*vals))


def range_spec(fn, *args):
    if fn is builtins.range and any(staged(a) for a in args):
        return TensorRange(args)
    return fn(*args)


def for_stmt(iterable, body_fn, test_fn, init, names, construct, location, in_try):
    site = _site(construct, location)
    if isinstance(iterable, TensorRange):
        _refuse_in_try(in_try, construct, location)
        return staged_loop(test_fn, body_fn, tuple(init), names, site, location, iterable)
    vals = tuple(init)
    for item in iterable:
        if test_fn is not None:
            c = test_fn(*vals)
            if staged(c):  # a tensor broke the loop: guard each remaining step with a cond
                _refuse_in_try(in_try, construct, location)
                vals = staged_if(
                    c, lambda *v: body_fn(item, *v), lambda *v: v, vals, names, site, location
                )
                continue
            if not c:
                break
        vals = tuple(body_fn(item, *vals))
    return vals
