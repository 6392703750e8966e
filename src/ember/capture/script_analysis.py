"""Static analysis for ``ember.script`` (capture/script_rewrite.py): the names generated code
uses, which names a block of statements binds, whether a block always returns, and the checks
that refuse constructs ``ember.script`` does not convert (with the construct and file:line).

Scope: every walk stays in the function's own scope; nested functions, lambdas, classes and
comprehensions are seen as single nodes, never entered.
"""

from __future__ import annotations

import ast

from ..errors import ScriptError

RT = "_ember_rt"
RETURN_FLAG = "_ember_return"
RETVAL = "_ember_retval"
_GENERATED_FUNCTIONS = ("_ember_if_", "_ember_while_", "_ember_for_")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _script_error(message: str, filename: str, node) -> ScriptError:
    return ScriptError(message, op="script", location=f"{filename}:{node.lineno}")


def scope_nodes(nodes):
    """Every node under ``nodes`` in the same scope (nested functions, lambdas, classes and
    comprehensions are yielded but not entered)."""
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES + _COMPREHENSIONS):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


def assigned_names(stmts) -> list[str]:
    """The local names ``stmts`` bind, in first-binding order (generated functions excluded)."""
    names: dict[str, None] = {}
    for node in scope_nodes(stmts):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names[node.id] = None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = None
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names[node.name] = None
    return [n for n in names if not n.startswith(_GENERATED_FUNCTIONS)]


# ------------------------------------------------------------------------------ checks


def check_supported(fn: ast.FunctionDef, filename: str) -> None:
    """Raise `ScriptError` for constructs ``ember.script`` does not convert."""
    if isinstance(fn, ast.AsyncFunctionDef):
        raise _script_error("`async def` functions cannot be scripted", filename, fn)
    nodes = list(scope_nodes(fn.body))
    for node in nodes:
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            raise _script_error(
                "`yield`: generators cannot be scripted; return a tensor (or a tuple of them)",
                filename,
                node,
            )
        if isinstance(node, ast.Await):
            raise _script_error("`await` cannot be scripted", filename, node)
    written = set(assigned_names(fn.body))
    for node in nodes:
        if isinstance(node, ast.Global) and written & set(node.names):
            name = sorted(written & set(node.names))[0]
            raise _script_error(
                f"`global {name}` with an assignment to it: a scripted function cannot write "
                "globals; return the value instead",
                filename,
                node,
            )
        if isinstance(node, ast.Nonlocal):
            for block in nodes:
                if isinstance(block, (ast.If, ast.While, ast.For)):
                    inner = set(assigned_names(block.body + block.orelse)) & set(node.names)
                    if inner:
                        raise _script_error(
                            f"`nonlocal {sorted(inner)[0]}` written inside the "
                            f"`{type(block).__name__.lower()}` at line {block.lineno}: "
                            "converted blocks cannot write nonlocal variables; return the "
                            "value instead",
                            filename,
                            block,
                        )


def always_returns(stmts) -> bool:
    """Whether every path through ``stmts`` ends in ``return`` or ``raise``."""
    for s in stmts:
        if isinstance(s, (ast.Return, ast.Raise)):
            return True
        if isinstance(s, ast.If) and always_returns(s.body) and always_returns(s.orelse):
            return True
        if isinstance(s, (ast.With, ast.AsyncWith)) and always_returns(s.body):
            return True
        if isinstance(s, ast.Try):
            handled = all(always_returns(h.body) for h in s.handlers)
            if always_returns(s.finalbody) or (always_returns(s.body + s.orelse) and handled):
                return True
    return False
