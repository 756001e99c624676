"""An answer's source: the code that defines it, and the definitions that code needs.

`from_notebook` reads a submitted notebook: starting from the names a check
  cell hands over (``bl.check_exercise("l04-grads", mse_grads)`` hands over
  ``mse_grads``), it takes the latest top-level definition of each name in the
  cells above the check (``def``, ``class``, assignments, imports, the same
  inside ``if``/``for``/``with``/``try`` blocks, and statements that set an item
  or attribute of a needed name, such as a loop filling a table), then the
  definitions those need, and so on. What a statement reads while it runs (a
  decorator, a base class, a default) comes from the latest definition above
  it; what a function reads when called, from the latest of all. Statements
  that are not definitions (a call, a thread started when the cell runs) are
  left out: only what defines the answer goes to ``backproplab grade``. It returns
  syntax trees for `backproplab.course.rules.read`; `backproplab.course.live` reads a
  live answer in the learner's kernel the same way, for feedback.

>>> cells = ["import torch", "def helper(x):\\n    return 2 * torch.cos(x)",
...          "print('not a definition')\\ndef slope(x):\\n    return helper(x) + 1"]
>>> [p.cell for p in from_notebook(cells, ["slope"])]
[0, 1, 2]
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

__all__ = ["COMPREHENSIONS", "Piece", "answer_calls", "binds", "defined", "free_names",
           "from_notebook", "in_scope", "local_names", "readable", "star_names",
           "unreadable_note", "without_magics"]

_MAGIC = re.compile(r"^\s*(%|!)")
# IPython's help syntax: ``name?``, ``name??``, ``?name``: a help page, not code that runs.
_HELP = re.compile(r"^\s*(\?{1,2}[\w.]+|[\w.]+\?{1,2})\s*$")

# ---------------------------------------------------------------- a function's own names
# Which names a function binds in its own scope, by Python's rule, for both readers of an
# answer: this module (what a statement needs from the notebook) and
# `backproplab.course.rules` (whether a name is the learner's own or a builtin). A
# function's own names are its parameters and every name its body binds (an assignment,
# a loop, ``with ... as``, an import, ``except ... as``, a ``match`` capture, a nested
# ``def`` or ``class``), unless declared ``global`` or ``nonlocal``; what nested
# functions, lambdas and comprehensions bind is theirs.

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def binds(node: ast.AST) -> set[str]:
    """The names one node binds by itself: a stored name, an import, an exception's name,
    a name captured by a match pattern."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return {node.id}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"} | (
            set(star_names(node)) if isinstance(node, ast.ImportFrom) else set())
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return {node.name} if node.name else set()
    if isinstance(node, ast.MatchMapping) and node.rest:
        return {node.rest}
    return set()


def star_names(node: ast.ImportFrom) -> list[str]:
    """The names ``from module import *`` binds, for a module already loaded (reading never
    imports anything); none for another, or a relative import."""
    star = any(a.name == "*" for a in node.names)
    module = sys.modules.get(node.module or "") if star and not node.level else None
    if module is None:
        return []
    names = getattr(module, "__all__", None)
    if not isinstance(names, (list, tuple)):
        names = [n for n in vars(module) if not n.startswith("_")]
    return [n for n in names if isinstance(n, str) and n.isidentifier()]


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
    """The names ``node`` (a function, lambda or comprehension) binds in its own scope.

    >>> f = ast.parse("def f(x):\\n    y = [z for z in x]\\n    global n\\n    n = y").body[0]
    >>> sorted(local_names(f))
    ['x', 'y']
    """
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

# ---------------------------------------------------------------- reading a notebook


def without_magics(source: str) -> str:
    """A cell's text with IPython's magic and shell lines blanked (line numbers kept)."""
    return "\n".join("" if _MAGIC.match(line) else line for line in source.split("\n"))


def readable(source: str) -> tuple[ast.Module, str]:
    """A cell's tree and the text it was read from: magics blanked, and help lines
    (``cubic_slope?``) too when the cell reads as Python only without them. Raises
    SyntaxError when it cannot be read at all."""
    text = without_magics(source)
    try:
        return ast.parse(text), text
    except SyntaxError:
        helpless = "\n".join("" if _HELP.match(line) else line for line in text.split("\n"))
        if helpless == text:
            raise
        return ast.parse(helpless), helpless


@dataclass(frozen=True)
class Piece:
    """One top-level statement of a cell: its tree, the cell's index and its text."""

    tree: ast.Module
    cell: int
    text: str  # the whole cell, magics blanked: line numbers in ``tree`` refer to it


# Methods that fill a container in place: ``TABLE.append(...)`` defines part of TABLE.
_FILLERS = {"append", "extend", "insert", "update", "add", "setdefault", "appendleft",
            "extendleft"}


class _Reads(ast.NodeVisitor):
    """What one top-level statement reads from the notebook's globals and defines there.

    ``eager``: names read while the statement runs (in the order it runs: a value before
    the name it is assigned to, a decorator, a default, a base class, a class body);
    ``lazy``: names read only when a function it defines is called; ``bound``: the global
    names it binds (inside ``if``, ``for``, ``with`` and ``try`` blocks too); ``fills``:
    the global names whose items or attributes it sets (``TABLE[k] = ...``,
    ``TABLE.append(...)``); ``lazy_fills``: those a function it defines sets when called
    (a decorator that registers what it decorates).
    """

    def __init__(self) -> None:
        self.eager: set[str] = set()
        self.lazy: set[str] = set()
        self.bound: set[str] = set()
        self.fills: set[str] = set()
        self.lazy_fills: set[str] = set()
        self.scopes: list[tuple[str, set[str]]] = []  # ("function" | "class", its names)

    def _local(self, name: str) -> bool:
        inner = True  # a class's names are seen from its own body only
        for kind, names in reversed(self.scopes):
            if name in names and (kind != "class" or inner):
                return True
            inner = False
        return False

    def _lazy(self) -> bool:
        return any(kind == "function" for kind, _ in self.scopes)

    def _read(self, name: str) -> None:
        # At the top level, a name the statement has already bound is its own (a loop's
        # variable read in its body), not an earlier cell's.
        if not self._local(name) and (self.scopes or name not in self.bound):
            (self.lazy if self._lazy() else self.eager).add(name)

    def _bind(self, names: Iterable[str]) -> None:
        if not self.scopes:
            self.bound.update(names)
        elif self.scopes[-1][0] == "class":  # a function's own names are known beforehand
            self.scopes[-1][1].update(names)

    def _fill(self, target: ast.AST) -> None:
        while isinstance(target, (ast.Attribute, ast.Subscript, ast.Starred)):
            target = target.value
        if isinstance(target, ast.Name) and not self._local(target.id):
            (self.lazy_fills if self._lazy() else self.fills).add(target.id)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self._read(node.id)
        else:
            self._bind([node.id])

    def generic_visit(self, node: ast.AST) -> None:
        if not isinstance(node, ast.Name):
            self._bind(binds(node))
        super().generic_visit(node)

    def _targets(self, targets: Sequence[ast.AST]) -> None:
        for target in targets:
            for t in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                if isinstance(t, (ast.Attribute, ast.Subscript)):
                    self._fill(t)
            self.visit(target)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)  # the value is read before the names are bound
        self._targets(node.targets)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        for part in (node.annotation, node.value):
            if part is not None:
                self.visit(part)
        self._targets([node.target])

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self._read(node.target.id)  # ``x += 1`` reads x first
        self.visit(node.value)
        self._targets([node.target])

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.visit(node.target)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._targets([node.target])
        for part in [*node.body, *node.orelse]:
            self.visit(part)

    visit_AsyncFor = visit_For

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr in _FILLERS:
            self._fill(node.func.value)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:  # read and written in the notebook's globals
            (self.lazy if self._lazy() else self.eager).add(name)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        args = node.args
        for part in [*getattr(node, "decorator_list", []), *args.defaults,
                     *(d for d in args.kw_defaults if d is not None)]:
            self.visit(part)
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if a is not None and a.annotation is not None:
                self.visit(a.annotation)
        if getattr(node, "returns", None) is not None:
            self.visit(node.returns)
        self.scopes.append(("function", local_names(node)))
        for part in node.body if isinstance(node.body, list) else [node.body]:
            self.visit(part)
        self.scopes.pop()
        if not isinstance(node, ast.Lambda):
            self._bind([node.name])

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for part in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(part)
        self.scopes.append(("class", set()))
        for part in node.body:
            self.visit(part)
        self.scopes.pop()
        self._bind([node.name])

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.DictComp
                       | ast.GeneratorExp) -> None:
        self.visit(node.generators[0].iter)  # read where the comprehension is
        names = {n.id for g in node.generators for n in ast.walk(g.target)
                 if isinstance(n, ast.Name)}
        self.scopes.append(("function" if self._lazy() else "comprehension", names))
        for k, generator in enumerate(node.generators):
            for part in [*([generator.iter] if k else []), *generator.ifs]:
                self.visit(part)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            self.visit(part)
        self.scopes.pop()

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension


def _reads(tree: ast.AST) -> _Reads:
    reads = _Reads()
    reads.visit(tree)
    return reads


def defined(tree: ast.Module) -> set[str]:
    """The names the top-level statements of ``tree`` define (inside ``if True:`` too)."""
    return _reads(tree).bound


def free_names(tree: ast.AST) -> set[str]:
    """Names a piece of code reads from the globals: those it reads before binding them,
    and those its functions read without binding them (a ``global`` counter included)."""
    reads = _reads(tree)
    return reads.eager | reads.lazy


@functools.lru_cache(maxsize=4096)
def _statements(source: str) -> tuple[str, tuple[tuple[ast.stmt, _Reads], ...]] | tuple[int, str]:
    """A cell's text as read and its top-level statements with what each reads and
    defines; or, when it cannot be read, the line and what Python said. Kept: a class's
    notebooks share most cells, and the trees are only read, never changed."""
    try:
        tree, text = readable(source)
    except SyntaxError as err:
        return err.lineno or 0, err.msg
    return text, tuple((stmt, _reads(stmt)) for stmt in tree.body)


@dataclass(frozen=True)
class _Statement:
    cell: int
    tree: ast.stmt
    text: str
    reads: _Reads


def from_notebook(cells: Sequence[str], names: Iterable[str],
                  unreadable: list[tuple[int, int, str]] | None = None) -> list[Piece]:
    """The definitions of ``names`` in ``cells`` (the code cells above a check, in order)
    and every definition they need, in notebook order.

    What a statement reads while it runs (a decorator, a base class, a default) is taken
    from the latest definition above it; what its functions read when called, from the
    latest definition of all (a later cell's ``import torch`` included). A cell that
    cannot be read as Python defines nothing; with ``unreadable`` (a list), each is
    added to it as (cell index, line, what Python said).
    """
    table: list[_Statement] = []
    for index, source in enumerate(cells):
        read = _statements(source)
        if isinstance(read[0], int):
            if unreadable is not None:
                unreadable.append((index, *read))
            continue  # no definition can come from a cell that does not run
        text, statements = read
        table += [_Statement(index, stmt, text, reads) for stmt, reads in statements]
    end = len(table)
    chosen: set[int] = set()
    todo, seen = [(name, end) for name in names], set()
    while todo:
        name, before = todo.pop()
        if (name, before) in seen:
            continue
        seen.add((name, before))
        for k in _definition(table, name, before):
            if k not in chosen:
                chosen.add(k)
                todo += [(n, k) for n in table[k].reads.eager]
                todo += [(n, end) for n in table[k].reads.lazy]
    return [Piece(ast.Module(body=[s.tree], type_ignores=[]), s.cell, s.text)
            for k, s in enumerate(table) if k in chosen]


def _definition(table: list[_Statement], name: str, before: int) -> list[int]:
    """The statements above ``before`` that define ``name`` as it stands there: its latest
    binding, then what sets its items or attributes (``Value.exp = exp``, a loop filling
    a table, a function decorated by one that registers it in the table)."""
    start = _latest(table, name, before)
    if start is None:
        return []
    # a module is not filled by calling it (``torch.manual_seed(0)``, ``@torch.no_grad()``)
    imported = isinstance(table[start].tree, (ast.Import, ast.ImportFrom))
    return [start] + [k for k in range(start + 1, before) if name not in table[k].reads.bound
                      and (name in table[k].reads.fills
                           or _filled_by_call(table, name, k, own=not imported))]


def _latest(table: list[_Statement], name: str, before: int) -> int | None:
    return next((k for k in range(before - 1, -1, -1) if name in table[k].reads.bound), None)


def _filled_by_call(table: list[_Statement], name: str, k: int, own: bool) -> bool:
    """Whether statement ``k`` may fill or set up ``name`` by a call: a decorator or a call
    standing alone that is a method of ``name``, an object of the notebook's (``own``:
    ``@RULES.register("mul")``, ``normalize.along(-1)``), or a function of the notebook's
    that sets items of ``name`` when called (``@register("mul")``, ``install_rules()``)."""
    tree = table[k].tree
    calls = list(getattr(tree, "decorator_list", []))
    if isinstance(tree, ast.Expr) and isinstance(tree.value, ast.Call):
        calls.append(tree.value.func)
    names = [n.id for c in calls for n in ast.walk(c) if isinstance(n, ast.Name)]
    found = [_latest(table, n, k) for n in names]
    return (own and name in names) or any(d is not None and name in table[d].reads.lazy_fills
                                          for d in found)


def unreadable_note(unreadable: Sequence[tuple[int, int, str]],
                    names: Sequence[str] | None = None) -> str:
    """What `from_notebook` could not read, as a clause for a message; ``names`` names
    the cells it was given as the notebook shows them. Empty when every cell was read.

    >>> unreadable_note([(1, 3, "invalid syntax")])
    'cell 1 could not be read as Python (line 3: invalid syntax), so nothing it defines counts'
    """
    return "; ".join(f"{names[c] if names is not None else f'cell {c}'} could not be read "
                     f"as Python (line {line}: {msg}), so nothing it defines counts"
                     for c, line, msg in unreadable)


def answer_calls(source: str, key: str) -> list[tuple[list[str], int]]:
    """For each ``check_exercise(key, answer, seed=N)`` call in a check cell's source: the
    names the answer is made of and the seed (0 when none is written).

    >>> answer_calls('bl.check_exercise("l03-ops", (exp, Value))\\n'
    ...              'bl.check_exercise("l03-ops", (exp, Value), seed=7)', "l03-ops")
    [(['exp', 'Value'], 0), (['exp', 'Value'], 7)]
    """
    found = []
    for node in ast.walk(ast.parse(without_magics(source))):
        if not (isinstance(node, ast.Call) and len(node.args) >= 2
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == key):
            continue
        names = [n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)]
        seeds = [k.value.value for k in node.keywords
                 if k.arg == "seed" and isinstance(k.value, ast.Constant)]
        found.append((names, int(seeds[0]) if seeds else 0))
    return found
