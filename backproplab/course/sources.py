"""An answer's source: the code that defines it, and the definitions that code needs.

Two readers find it, for the two places an answer is judged:

- `from_notebook` reads a submitted notebook: starting from the names a check
  cell hands over (``bl.check_exercise("l04-grads", mse_grads)`` hands over
  ``mse_grads``), it takes the latest top-level definition of each name in the
  cells above the check (``def``, ``class``, assignments, imports, the same
  inside ``if``/``for``/``with``/``try`` blocks, and statements that set an item
  or attribute of a needed name, such as a loop filling a table), then the
  definitions those need, and so on. What a statement reads while it runs (a
  decorator, a base class, a default) comes from the latest definition above
  it; what a function reads when called, from the latest of all. Statements
  that are not definitions (a call, a thread started when the cell runs) are
  left out: only what defines the answer goes to ``backproplab grade``.
- `from_objects` reads a live answer in the learner's kernel, for feedback: the
  source of each function and class of the learner's it reaches (from the
  cells IPython keeps in ``linecache``), and what the other names it reads
  stand for (``F`` is ``torch.nn.functional``; data such as tensors and
  numbers is just data).

Both return syntax trees for `backproplab.course.rules.read`.

>>> cells = ["import torch", "def helper(x):\\n    return 2 * torch.cos(x)",
...          "print('not a definition')\\ndef slope(x):\\n    return helper(x) + 1"]
>>> [p.cell for p in from_notebook(cells, ["slope"])]
[0, 1, 2]
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import linecache
import os
import re
import sys
import sysconfig
import types
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["COMPREHENSIONS", "Piece", "answer_calls", "binds", "defined", "free_names",
           "from_notebook", "from_objects", "in_scope", "local_names", "unreadable_note",
           "without_magics"]

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


def _readable(source: str) -> tuple[ast.Module, str]:
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
    ``TABLE.append(...)``).
    """

    def __init__(self) -> None:
        self.eager: set[str] = set()
        self.lazy: set[str] = set()
        self.bound: set[str] = set()
        self.fills: set[str] = set()
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
        if not self._local(name):
            (self.lazy if self._lazy() else self.eager).add(name)

    def _bind(self, names: Iterable[str]) -> None:
        if not self.scopes:
            self.bound.update(names)
        elif self.scopes[-1][0] == "class":  # a function's own names are known beforehand
            self.scopes[-1][1].update(names)

    def _fill(self, target: ast.AST) -> None:
        while isinstance(target, (ast.Attribute, ast.Subscript, ast.Starred)):
            target = target.value
        if isinstance(target, ast.Name) and not self._lazy() and not self._local(target.id):
            self.fills.add(target.id)

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
        tree, text = _readable(source)
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
    a table)."""
    start = next((k for k in range(before - 1, -1, -1) if name in table[k].reads.bound), None)
    if start is None:
        return []
    return [start] + [k for k in range(start + 1, before) if name in table[k].reads.fills
                      and name not in table[k].reads.bound]


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


# --------------------------------------------------------------------------
# A live answer, in the learner's kernel
# --------------------------------------------------------------------------

_DATA = (int, float, complex, bool, str, bytes, type(None), torch.dtype, torch.Size, torch.finfo,
         torch.iinfo, torch.device, torch.Generator, slice, range, type(Ellipsis))


def _is_data(value: Any, depth: int = 0) -> bool:
    """Numbers, plain tensors and containers of them: data an answer may read."""
    if isinstance(value, torch.Tensor):
        return type(value) in (torch.Tensor, torch.nn.Parameter)
    if isinstance(value, _DATA):
        return True
    if isinstance(value, (tuple, list, set, frozenset)) and depth < 3:
        return all(_is_data(v, depth + 1) for v in list(value)[:50])
    if isinstance(value, dict) and depth < 3:
        return all(_is_data(k, depth + 1) and _is_data(v, depth + 1)
                   for k, v in list(value.items())[:50])
    return False


_LIBRARIES = tuple(os.path.realpath(sysconfig.get_paths()[k]) + os.sep
                   for k in ("stdlib", "platstdlib", "purelib", "platlib"))


def _typed_in(code: types.CodeType, module: str | None) -> bool:
    """Code of the learner's, to be read: from a notebook cell, a doctest, exec'd text, or a
    file that is not an installed library's (nor this package's)."""
    name = code.co_filename
    if "ipykernel_" in name or name.startswith(("<doctest", "<cell", "<test cell", "<string>")):
        return True
    top = sys.modules.get((module or "").split(".")[0])
    if top is not None and (top.__name__ == "backproplab" or os.path.realpath(
            getattr(top, "__file__", None) or "").startswith(_LIBRARIES)):
        return False  # a library's, generated code included (torch.fx's, say)
    return name.startswith("<") or not os.path.realpath(name).startswith(_LIBRARIES)


def _node(code: types.CodeType, kind: type | tuple[type, ...], name: str | None = None
          ) -> list[ast.AST]:
    """The definitions (``def``, ``lambda``, ``class``) in the text ``code`` came from that
    start on its first line (or, for a class, contain it)."""
    try:
        tree, _ = _readable("".join(linecache.getlines(code.co_filename)))
    except SyntaxError:
        return []
    line = code.co_firstlineno
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, kind):
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        inside = isinstance(node, ast.ClassDef) and first <= line <= (node.end_lineno or 0)
        if (first == line or node.lineno == line or inside) and (name is None
                                                                  or node.name == name):
            found.append(node)
    return found[-1:] if name is not None else found


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _public_name(value: Any) -> str | None:
    """The shortest public name torch gives one of its functions or classes, as code in the
    notebook would name it: ``functorch.compile.make_boxed_func`` for
    ``torch._functorch...make_boxed_func``, ``torch.matmul`` for the builtin whose qualified
    name is ``torch._VariableFunctionsClass.matmul``, ``torch.einsum`` for
    ``torch.functional.einsum``; None when it is not torch's or has no public name."""
    own, home = getattr(value, "__name__", None), getattr(value, "__module__", None) or ""
    if isinstance(own, str) and home in ("_functools", "_operator") \
            and getattr(sys.modules.get(home[1:]), own, None) is value:
        return f"{home[1:]}.{own}"  # Python's own, written in C: functools.reduce
    if not isinstance(own, str) or home.split(".")[0] not in ("torch", "functorch"):
        return None
    found = [name for name, module in list(sys.modules.items())
             if name.split(".")[0] in ("torch", "functorch")
             and not any(part.startswith("_") for part in name.split("."))
             and getattr(module, own, None) is value]
    return f"{min(found, key=len)}.{own}" if found else None


def _named_tuple(cls: type) -> bool:
    """Whether ``cls`` is a named tuple (``typing.NamedTuple``, ``collections.namedtuple``)."""
    return issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)


def _op_name(value: Any) -> str | None:
    """``torch.ops.aten.mm.default`` for an operator object held in a table or a constant
    (torch defines them in a private module, under names no code writes), as code names it;
    None for anything else."""
    kind = type(value)
    if kind.__module__ != "torch._ops":
        return None
    if kind.__name__ == "OpOverload":
        return f"torch.ops.{value.namespace}.{value.__name__}"
    if kind.__name__ == "OpOverloadPacket":
        return "torch.ops." + value._qualified_op_name.replace("::", ".")
    return None


def _wrapped(value: Any) -> types.FunctionType | None:
    """The learner's function a library's decorator wrapped (``functools.wraps`` keeps it
    as ``__wrapped__``) when its source can be read, or None."""
    inner = vars(value).get("__wrapped__") if hasattr(value, "__dict__") else None
    if isinstance(inner, types.FunctionType) and _typed_in(inner.__code__, inner.__module__) \
            and _node(inner.__code__, _FUNCTIONS):
        return inner
    return None


class _Live:
    """Collects the trees of a live answer and what its free names stand for."""

    def __init__(self) -> None:
        self.trees: list[ast.AST] = []
        self.bound: dict[str, str] = {}
        self.unread: list[str] = []
        self._seen: set[int] = set()

    def value(self, name: str, value: Any, scope: dict[str, Any]) -> None:
        if id(value) in self._seen or _is_data(value):
            return
        if isinstance(value, types.ModuleType):
            self.bound.setdefault(name, value.__name__)
        elif value is getattr(builtins, name, None):
            return
        elif isinstance(value, types.FunctionType) and _typed_in(value.__code__,
                                                                 value.__module__):
            self.function(value)
        elif callable(value) and _wrapped(value) is not None:
            # A library's wrapper around a function of the learner's (``@torch.no_grad()``,
            # ``@functools.cache``): the learner's function, whose decorators are read with it.
            self._seen.add(id(value))
            self.value(name, _wrapped(value), scope)
        elif isinstance(value, type) and self._class_code(value) is not None:
            self.cls(value)
        elif isinstance(value, type) and self._plain_class(value):
            self.empty_class(value, scope)
        elif isinstance(value, types.MethodType):
            self.value(name, value.__func__, scope)
            self.value(name, value.__self__, scope)
        elif isinstance(value, functools.partial):
            for part in (value.func, *value.args, *value.keywords.values()):
                self.held(name, part, scope)
        elif self._class_code(type(value)) is not None:  # an instance of a learner's class
            self.cls(type(value))
            for attr, held in vars(value).items() if hasattr(value, "__dict__") else ():
                self.held(attr, held, scope)
        elif isinstance(value, tuple) and type(value) is not tuple \
                and self._plain_class(type(value)) or (
                    hasattr(value, "__dict__") and self._plain_class(type(value))):
            # An instance of a learner's record class (a dataclass, a named tuple): the
            # class stands in the reading, and what the instance holds is read.
            if id(type(value)) not in self._seen:
                self.empty_class(type(value), scope)
            self._seen.add(id(value))
            parts = value if isinstance(value, tuple) else vars(value).values()
            for part in parts:
                self.held(name, part, scope)
        elif type(value) in (dict, list, tuple, set, frozenset):
            # A table of the learner's (a dict of rules, a list of steps): what it holds is
            # read, each function's source included, as if each were named on its own.
            self._seen.add(id(value))
            for part in (*value, *value.values()) if type(value) is dict else value:
                self.held(name, part, scope)
        else:
            owner = getattr(value, "__module__", None) or type(value).__module__
            own = getattr(value, "__qualname__", None) or type(value).__qualname__
            self.bound.setdefault(name, _public_name(value) or _op_name(value)
                                  or f"{owner}.{own}")

    def held(self, name: str, value: Any, scope: dict[str, Any]) -> None:
        """A value the answer holds (a partial's argument, an object's attribute): a module
        there was put there as a value, which the reading refuses as it would in code."""
        if isinstance(value, types.ModuleType) and name.isidentifier():
            self.bound.setdefault(name, value.__name__)
            self.trees.append(ast.parse(f"({name},)"))
        else:
            self.value(name, value, scope)

    @staticmethod
    def _class_code(cls: type) -> types.CodeType | None:
        """The code of a method the learner wrote in the class, to find the class's source
        by (a dataclass's ``__init__``, written by the dataclass machinery, has none)."""
        for member in vars(cls).values():
            member = getattr(member, "__func__", member)
            if isinstance(member, types.FunctionType) and _typed_in(member.__code__,
                                                                    cls.__module__) \
                    and _node(member.__code__, _FUNCTIONS):
                return member.__code__
        return None

    @staticmethod
    def _plain_class(cls: type) -> bool:
        """A class of the notebook's with no code of its own, used as a namespace or a
        record (``class Box: pass``, ``class Float32: size = 4``, a ``@dataclass`` or a
        ``NamedTuple`` of fields): made from ``object`` (or ``tuple``, for a named tuple)
        alone, every dunder Python's or the dataclass machinery's."""
        made = {"__module__", "__dict__", "__weakref__", "__doc__", "__annotations__",
                "__static_attributes__", "__firstlineno__", "__qualname__"}  # Python's own
        if dataclasses.is_dataclass(cls) or _named_tuple(cls):
            made |= {"__dataclass_fields__", "__dataclass_params__", "__match_args__",
                     "__hash__", "__slots__", "__new__", "__getnewargs__",
                     "__orig_bases__"}
            made |= {a for a, m in vars(cls).items() if isinstance(m, types.FunctionType)
                     and not (_typed_in(m.__code__, cls.__module__)
                              and _node(m.__code__, _FUNCTIONS))}  # the machinery's
        return (isinstance(cls, type) and cls.__bases__ in ((object,), (tuple,))
                and (cls.__bases__ == (object,) or _named_tuple(cls))
                and cls.__module__ == "__main__"
                and {a for a in vars(cls) if a.startswith("__")} <= made)

    def empty_class(self, cls: type, scope: dict[str, Any]) -> None:
        """A namespace or record class: what it holds is read as an object's attributes are,
        and it stands in the reading as a class of the learner's that names its attributes
        and fields (it has no source to read without a function in it)."""
        self._seen.add(id(cls))
        fields = [*getattr(cls, "_fields", ()), *getattr(cls, "__annotations__", {}),
                  *(a for a in vars(cls) if not a.startswith("_"))]
        body = "".join(f"    {f} = None\n" for f in dict.fromkeys(fields)) or "    pass\n"
        self.trees.append(ast.parse(f"class {cls.__name__}:\n{body}"))
        for attr, held in vars(cls).items():
            if not attr.startswith("_"):  # the rest is Python's (_plain_class)
                self.held(attr, held, scope)

    def function(self, fn: types.FunctionType) -> None:
        self._seen.add(id(fn))
        nodes = _node(fn.__code__, _FUNCTIONS)
        if not nodes:
            self.unread.append(fn.__qualname__)
            return
        self.trees.extend(nodes)
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False))
        for name in sorted(set().union(*(free_names(n) for n in nodes))):
            if name in cells:
                try:
                    self.value(name, cells[name].cell_contents, fn.__globals__)
                except ValueError:  # an empty cell
                    continue
            elif name in fn.__globals__:
                self.value(name, fn.__globals__[name], fn.__globals__)

    def cls(self, cls: type) -> None:
        self._seen.add(id(cls))
        code = self._class_code(cls)
        nodes = _node(code, ast.ClassDef, cls.__name__) if code else []
        if not nodes:
            self.unread.append(cls.__qualname__)
            return
        self.trees.extend(nodes)
        scope = next(m.__globals__ for m in (getattr(v, "__func__", v) for v in vars(cls).values())
                     if isinstance(m, types.FunctionType))
        for name in sorted(free_names(nodes[0])):
            if name in scope:
                self.value(name, scope[name], scope)
        for attr, member in vars(cls).items():
            if isinstance(member, property):  # its getter, setter and deleter are code
                parts = [member.fget, member.fset, member.fdel]
            elif isinstance(member, (staticmethod, classmethod)):
                parts = [member.__func__]
            elif attr.startswith("__") and not isinstance(member, (types.FunctionType, type)):
                continue  # what Python puts on every class: __dict__, __module__, __doc__
            else:
                parts = [member]
            for part in parts:
                if attr.startswith("__") and isinstance(part, types.FunctionType) \
                        and not _node(part.__code__, _FUNCTIONS):
                    continue  # written by the class machinery (a dataclass's __init__)
                if part is not None:
                    self.value(attr, part, scope)


def from_objects(answer: Any) -> tuple[list[ast.AST], dict[str, str], list[str]]:
    """A live answer's trees, what the free names they read stand for, and the learner's
    functions whose source could not be read (defined by exec without a file, say).

    A tuple or list of answers is read member by member.
    """
    live = _Live()
    for item in answer if isinstance(answer, (tuple, list)) else (answer,):
        live.value("answer", item, {})
    return live.trees, live.bound, live.unread
