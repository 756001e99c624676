"""Which names a function binds in its own scope, by Python's rule, for the two readers of
an answer: `backproplab.course.sources` (what a statement needs from the notebook) and
`backproplab.course.rules` (whether a name is the learner's own or a builtin).

A function's own names are its parameters and every name its body binds (an
assignment, a loop, ``with ... as``, an import, ``except ... as``, a ``match``
capture, a nested ``def`` or ``class``), unless declared ``global`` or
``nonlocal``; what nested functions, lambdas and comprehensions bind is theirs.

>>> import ast
>>> f = ast.parse("def f(x):\\n    y = [z for z in x]\\n    global n\\n    n = y").body[0]
>>> sorted(local_names(f))
['x', 'y']
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

__all__ = ["COMPREHENSIONS", "binds", "in_scope", "local_names"]

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def binds(node: ast.AST) -> set[str]:
    """The names one node binds by itself: a stored name, an import, an exception's name,
    a name captured by a match pattern."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return {node.id}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return {node.name} if node.name else set()
    if isinstance(node, ast.MatchMapping) and node.rest:
        return {node.rest}
    return set()


def in_scope(node: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``node``'s own scope (a function, lambda or comprehension): its body
    (a comprehension's loop targets), and of a nested ``def`` or ``class`` only itself."""
    if isinstance(node, COMPREHENSIONS):
        todo: list[ast.AST] = [g.target for g in node.generators]
    else:
        todo = list(node.body) if isinstance(node.body, list) else [node.body]
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                              ast.Lambda, *COMPREHENSIONS)):
            todo.extend(ast.iter_child_nodes(n))


def local_names(node: ast.AST) -> set[str]:
    """The names ``node`` (a function, lambda or comprehension) binds in its own scope."""
    bound: set[str] = set()
    declared: set[str] = set()
    if not isinstance(node, COMPREHENSIONS):
        args = node.args
        bound |= {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                  args.vararg, args.kwarg) if a is not None}
    for n in in_scope(node):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            declared.update(n.names)
        else:
            bound |= binds(n)
    return bound - declared
