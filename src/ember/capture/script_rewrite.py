"""The AST side of ``ember.script``: checks a function's syntax tree and rewrites its control flow
into calls of the runtime helpers (capture/script_runtime.py, bound to the name ``_ember_rt``).

Three passes over the function's body, none descending into nested functions, lambdas or
classes (their code stays plain Python):

1. **Expressions**: ``a and b``, ``a or b``, ``not a`` and ``x if c else y`` become helper calls
   (the later operands wrapped in lambdas, so Python short-circuiting is kept when the values
   are not traced tensors).
2. **Lowering** of ``break``, ``continue`` and ``return`` (as AutoGraph does): each sets a flag
   variable (``_ember_break_<n>``, ``_ember_continue_<n>``, ``_ember_return`` with the value in
   ``_ember_retval``); the statements after one that may set a flag run under
   ``if _ember_rt.guard(flags):``; a loop's test also checks its break flag and the return flag;
   a loop's ``else`` runs under ``guard(break flag)``; the function ends in one
   ``return _ember_rt.result(...)``. Returns are lowered only when one sits inside a compound
   statement.
3. **Conversion**: ``if`` / ``while`` / ``for`` become nested functions of the variables the
   statement assigns (its outputs, or the loop's variables), plus one helper call
   ``(a, b) = _ember_rt.if_stmt(test, true_fn, false_fn, _ember_rt.pick(locals(), names), ...)``
   that decides at run time whether to run Python or record ``ember.cond`` / ``while_loop``.
   ``for x in range(...)`` passes its bounds through ``_ember_rt.range_spec`` so a tensor bound
   can become a loop node.

Every new node takes the location of the statement it replaces, so the compiled code keeps the
user's file and line numbers. Generated names start with ``_ember_`` (never two underscores:
class-private name mangling must not touch them).
"""

from __future__ import annotations

import ast

from .script_analysis import (
    RETURN_FLAG,
    RETVAL,
    RT,
    always_returns,
    assigned_names,
    check_supported,
    scope_nodes,
)

# ------------------------------------------------------------------------------ helpers


def _rt(attr: str, *args) -> ast.Call:
    return ast.Call(
        func=ast.Attribute(value=ast.Name(RT, ast.Load()), attr=attr, ctx=ast.Load()),
        args=list(args),
        keywords=[],
    )


def _name(name: str, store: bool = False) -> ast.Name:
    return ast.Name(name, ast.Store() if store else ast.Load())


def _assign(name: str, value) -> ast.Assign:
    return ast.Assign(targets=[_name(name, True)], value=value)


def _at(node, like):
    """``node`` (or each of a list) with ``like``'s first line as the location of every node
    missing one (a span over ``like``'s whole statement would move a method call's reported
    line to the statement's last line)."""
    for n in node if isinstance(node, list) else [node]:
        for sub in ast.walk(n):
            if "lineno" in sub._attributes and not hasattr(sub, "lineno"):
                sub.lineno, sub.col_offset = like.lineno, like.col_offset
                sub.end_lineno, sub.end_col_offset = like.lineno, like.col_offset
    return node


def _lambda(body) -> ast.Lambda:
    args = ast.arguments(
        posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
    )
    return ast.Lambda(args=args, body=body)


def _def(name: str, params: list[str], body: list) -> ast.FunctionDef:
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(p) for p in params],
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=[],
    )
    node = ast.FunctionDef(name=name, args=args, body=body, decorator_list=[], returns=None)
    if "type_params" in ast.FunctionDef._fields:  # Python 3.12+
        node.type_params = []
    return node


def _tuple(names: list[str], store: bool = False) -> ast.Tuple:
    return ast.Tuple([_name(n, store) for n in names], ast.Store() if store else ast.Load())


def _guard(flags) -> ast.Call:
    return _rt("guard", *[_name(f) for f in flags])


# ------------------------------------------------------------------------------ pass 1


class _Expressions(ast.NodeTransformer):
    """``and`` / ``or`` / ``not`` / conditional expressions to helper calls (see pass 1)."""

    def __init__(self, filename: str, first_arg: str | None):
        self.filename = filename
        self.first_arg = first_arg

    def visit_Call(self, node):
        self.generic_visit(node)
        zero_arg_super = isinstance(node.func, ast.Name) and node.func.id == "super"
        if zero_arg_super and not node.args and not node.keywords and self.first_arg:
            # branch bodies become nested functions, whose own first argument super() would
            # read: name the class and the instance explicitly
            node.args = _at([_name("__class__"), _name(self.first_arg)], node)
        return node

    def visit_Lambda(self, node):
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        if any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.Await)) for n in ast.walk(node)):
            return node  # a lambda would change where these bind
        helper = "and_" if isinstance(node.op, ast.And) else "or_"
        first, *rest = node.values
        return _at(_rt(helper, first, *[_lambda(v) for v in rest]), node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return _at(_rt("not_", node.operand), node)
        return node

    def visit_IfExp(self, node):
        self.generic_visit(node)
        if any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.Await)) for n in ast.walk(node)):
            return node
        where = ast.Constant(f"{self.filename}:{node.lineno}")
        return _at(_rt("if_exp", node.test, _lambda(node.body), _lambda(node.orelse), where), node)


# ------------------------------------------------------------------------------ pass 2


class _Loop:
    def __init__(self, n: int):
        self.brk, self.cont = f"_ember_break_{n}", f"_ember_continue_{n}"
        self.brk_used = self.cont_used = False


class _Lowering:
    """Pass 2: ``break`` / ``continue`` / ``return`` to flags (see the module docstring)."""

    def __init__(self, counter, lower_returns: bool):
        self.counter = counter
        self.lower_returns = lower_returns

    def block(self, stmts, loop) -> tuple[list, set]:
        out, flags = [], set()
        for i, s in enumerate(stmts):
            new, set_here, ends = self.stmt(s, loop)
            out += new
            flags |= set_here
            if ends:  # the rest of the block is unreachable
                break
            if set_here and i + 1 < len(stmts):
                rest, rest_flags = self.block(stmts[i + 1 :], loop)
                if rest:
                    out.append(_at(ast.If(test=_guard(sorted(set_here)), body=rest, orelse=[]), s))
                return out, flags | rest_flags
        return out, flags

    def stmt(self, s, loop) -> tuple[list, set, bool]:
        if isinstance(s, ast.Return) and self.lower_returns:
            value = s.value if s.value is not None else ast.Constant(None)
            new = [_assign(RETVAL, value), _assign(RETURN_FLAG, ast.Constant(True))]
            return _at(new, s), {RETURN_FLAG}, True
        if isinstance(s, ast.Break):
            loop.brk_used = True
            return _at([_assign(loop.brk, ast.Constant(True))], s), {loop.brk}, True
        if isinstance(s, ast.Continue):
            loop.cont_used = True
            return _at([_assign(loop.cont, ast.Constant(True))], s), {loop.cont}, True
        if isinstance(s, ast.If):
            s.body, f1 = self.block(s.body, loop)
            s.orelse, f2 = self.block(s.orelse, loop)
            s.body = s.body or [_at(ast.Pass(), s)]
            return [s], f1 | f2, False
        if isinstance(s, (ast.With, ast.AsyncWith)):
            s.body, flags = self.block(s.body, loop)
            s.body = s.body or [_at(ast.Pass(), s)]
            return [s], flags, False
        if isinstance(s, ast.Try):
            s.body, flags = self.block(s.body, loop)
            s.body = s.body or [_at(ast.Pass(), s)]
            for h in s.handlers:
                h.body, f = self.block(h.body, loop)
                h.body = h.body or [_at(ast.Pass(), h)]
                flags |= f
            s.orelse, f = self.block(s.orelse, loop)
            flags |= f
            s.finalbody, f = self.block(s.finalbody, loop)
            return [s], flags | f, False
        if isinstance(s, (ast.While, ast.For)):
            return self.loop(s, loop)
        return [s], set(), False

    def loop(self, s, outer) -> tuple[list, set, bool]:
        inner = _Loop(next(self.counter))
        body, flags = self.block(s.body, inner)
        escaping = flags - {inner.brk, inner.cont}
        if inner.cont_used:
            body.insert(0, _at(_assign(inner.cont, ast.Constant(False)), s))
        s.body = body or [_at(ast.Pass(), s)]
        stop = ([inner.brk] if inner.brk_used else []) + sorted(escaping)
        if isinstance(s, ast.While) and stop:
            s.test = _at(_rt("and_", _guard(stop), _lambda(s.test)), s.test)
        s.ember_stop = stop if isinstance(s, ast.For) else []
        before = [_at(_assign(inner.brk, ast.Constant(False)), s)] if inner.brk_used else []
        after, after_flags = [], set()
        if s.orelse:
            orelse, after_flags = self.block(s.orelse, outer)
            if inner.brk_used:
                orelse = [_at(ast.If(test=_guard([inner.brk]), body=orelse, orelse=[]), s)]
            after = orelse
            s.orelse = []
        if escaping and after:  # a return in the loop skips its else clause
            after = [_at(ast.If(test=_guard(sorted(escaping)), body=after, orelse=[]), s)]
        return before + [s] + after, escaping | after_flags, False


# ------------------------------------------------------------------------------ pass 3


class _Conversion:
    """Pass 3: ``if`` / ``while`` / ``for`` to nested functions and helper calls."""

    def __init__(self, counter, filename: str):
        self.counter = counter
        self.filename = filename

    def block(self, stmts, in_try: bool) -> list:
        out = []
        for s in stmts:
            out += self.stmt(s, in_try)
        return out

    def stmt(self, s, in_try: bool) -> list:
        if isinstance(s, ast.If):
            return self.convert_if(s, in_try)
        if isinstance(s, ast.While):
            return self.convert_while(s, in_try)
        if isinstance(s, ast.For):
            return self.convert_for(s, in_try)
        if isinstance(s, (ast.With, ast.AsyncWith)):
            s.body = self.block(s.body, in_try)
        elif isinstance(s, ast.Try):
            s.body = self.block(s.body, True)
            for h in s.handlers:
                h.body = self.block(h.body, True)
            s.orelse = self.block(s.orelse, True)
            s.finalbody = self.block(s.finalbody, True)
        return [s]

    def _call(self, s, helper: str, args: list, names: list[str], construct: str, in_try):
        site = [
            _rt("pick", ast.Call(_name("locals"), [], []), ast.Constant(tuple(names))),
            ast.Constant(tuple(names)),
            ast.Constant(construct),
            ast.Constant(f"{self.filename}:{s.lineno}"),
            ast.Constant(in_try),
        ]
        call = _rt(helper, *args, *site)
        if names:
            return _at(ast.Assign(targets=[_tuple(names, True)], value=call), s)
        return _at(ast.Expr(call), s)

    def convert_if(self, s, in_try) -> list:
        n = next(self.counter)
        body, orelse = self.block(s.body, in_try), self.block(s.orelse, in_try)
        names = assigned_names(body + orelse)
        ret = _at(ast.Return(_tuple(names)), s)
        t_name, f_name = f"_ember_if_true_{n}", f"_ember_if_false_{n}"
        defs = [_def(t_name, names, body + [ret]), _def(f_name, names, orelse + [ret])]
        args = [s.test, _name(t_name), _name(f_name)]
        return _at(defs, s) + [self._call(s, "if_stmt", args, names, "if", in_try)]

    def convert_while(self, s, in_try) -> list:
        n = next(self.counter)
        body = self.block(s.body, in_try)
        names = assigned_names(body)
        test_name, body_name = f"_ember_while_test_{n}", f"_ember_while_body_{n}"
        defs = [
            _def(test_name, names, [_at(ast.Return(s.test), s.test)]),
            _def(body_name, names, body + [_at(ast.Return(_tuple(names)), s)]),
        ]
        args = [_name(test_name), _name(body_name)]
        return _at(defs, s) + [self._call(s, "while_stmt", args, names, "while", in_try)]

    def convert_for(self, s, in_try) -> list:
        n = next(self.counter)
        bind = _at(ast.Assign(targets=[s.target], value=_name("_ember_item")), s)
        body = [bind] + self.block(s.body, in_try)
        names = assigned_names(body)
        body_name = f"_ember_for_body_{n}"
        defs = [_def(body_name, ["_ember_item", *names], body + [ast.Return(_tuple(names))])]
        test = ast.Constant(None)
        if s.ember_stop:
            test_name = f"_ember_for_test_{n}"
            defs.append(_def(test_name, names, [ast.Return(_guard(s.ember_stop))]))
            test = _name(test_name)
        iterable = s.iter
        if (
            isinstance(iterable, ast.Call)
            and isinstance(iterable.func, ast.Name)
            and iterable.func.id == "range"
            and not iterable.keywords
            and 1 <= len(iterable.args) <= 3
            and not any(isinstance(a, ast.Starred) for a in iterable.args)
        ):
            iterable = _at(_rt("range_spec", iterable.func, *iterable.args), iterable)
        args = [iterable, _name(body_name), test]
        return _at(defs, s) + [self._call(s, "for_stmt", args, names, "for", in_try)]


# ------------------------------------------------------------------------------ entry


def rewrite(fn: ast.FunctionDef, filename: str) -> ast.FunctionDef:
    """Check ``fn`` and rewrite its body in place (see the module docstring); returns it."""
    check_supported(fn, filename)
    counter = iter(range(1, 1 << 30))
    fn.decorator_list = []
    params = fn.args.posonlyargs + fn.args.args
    expressions = _Expressions(filename, params[0].arg if params else None)
    fn.body = [expressions.visit(s) for s in fn.body]
    nested_return = any(
        isinstance(node, ast.Return)
        for s in fn.body
        if not isinstance(s, ast.Return)
        for node in scope_nodes([s])
    )
    first = fn.body[0]
    falls_off = not always_returns(fn.body)
    body, _ = _Lowering(counter, nested_return).block(fn.body, None)
    if nested_return:
        prologue = [
            _assign(RETURN_FLAG, ast.Constant(False)),
            _assign(RETVAL, ast.Attribute(_name(RT), "NO_RETURN", ast.Load())),
        ]
        where = ast.Constant(f"{filename}:{fn.lineno}")
        result = _rt("result", _name(RETVAL), _name(RETURN_FLAG), ast.Constant(falls_off), where)
        body = _at(prologue, first) + body + [_at(ast.Return(result), fn.body[-1])]
    body = _Conversion(counter, filename).block(body, False)
    for node in scope_nodes(body):  # plain returns: refuse a value left undefined by a branch
        if isinstance(node, ast.Return) and node.value is not None and not nested_return:
            node.value = _at(_rt("checked", node.value), node)
    fn.body = body
    return ast.fix_missing_locations(fn)
