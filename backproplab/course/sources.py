"""An answer's source: the code that defines it, and the definitions that code needs.

Two readers find it, for the two places an answer is judged:

- `from_notebook` reads a submitted notebook: starting from the names a check
  cell hands over (``bl.check_exercise("l04-grads", mse_grads)`` hands over
  ``mse_grads``), it takes the latest top-level definition of each name in the
  cells above the check (``def``, ``class``, assignments, imports, and
  statements that set an attribute of a needed name), then the definitions
  those need, and so on. Statements that are not definitions (a call, a loop,
  a thread started when the cell runs) are left out: only what defines the
  answer goes to ``backproplab grade``.
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
import functools
import linecache
import os
import re
import sys
import sysconfig
import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Piece", "answer_calls", "defined", "free_names", "from_notebook", "from_objects",
           "without_magics"]

_MAGIC = re.compile(r"^\s*(%|!)")


def without_magics(source: str) -> str:
    """A cell's text with IPython's magic and shell lines blanked (line numbers kept)."""
    return "\n".join("" if _MAGIC.match(line) else line for line in source.split("\n"))


@dataclass(frozen=True)
class Piece:
    """One top-level statement of a cell: its tree, the cell's index and its text."""

    tree: ast.Module
    cell: int
    text: str  # the whole cell, magics blanked: line numbers in ``tree`` refer to it


def defined(tree: ast.Module) -> set[str]:
    """The names the top-level statements of ``tree`` define."""
    return set().union(*(_bound(stmt) for stmt in tree.body))


def _bound(stmt: ast.stmt) -> set[str]:
    """The names a top-level statement defines."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"}
    targets = (stmt.targets if isinstance(stmt, ast.Assign)
               else [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else [])
    return {n.id for t in targets for n in ast.walk(t)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _attached(stmt: ast.stmt) -> set[str]:
    """``Value.exp = exp``: the names whose attributes a top-level assignment sets."""
    if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return set()
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    found = set()
    for target in targets:  # ``Tensor.sum, Tensor.mean = ...`` sets two
        for t in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
            while isinstance(t, (ast.Attribute, ast.Subscript, ast.Starred)):
                t = t.value
                if isinstance(t, ast.Name):
                    found.add(t.id)
    return found


def free_names(tree: ast.AST) -> set[str]:
    """Names a piece of code reads that it does not bind itself (a close reading: a name
    bound anywhere inside counts as bound)."""
    loads, binds = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else binds).add(node.id)
        elif isinstance(node, ast.arg):
            binds.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and not isinstance(tree, ast.Module):
            binds.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            binds.add(node.name)
    if isinstance(tree, ast.Module):  # a top-level statement's own names are defined by it
        for stmt in tree.body:
            binds -= _bound(stmt) - {n.id for n in ast.walk(stmt)
                                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loads - binds


def from_notebook(cells: Sequence[str], names: Iterable[str]) -> list[Piece]:
    """The definitions of ``names`` in ``cells`` (the code cells above a check, in order)
    and every definition they need, in notebook order."""
    table: list[tuple[int, ast.stmt, str]] = []  # (cell, statement, cell text)
    for index, source in enumerate(cells):
        text = without_magics(source)
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue  # no definition can come from a cell that does not run
        table += [(index, stmt, text) for stmt in tree.body]
    chosen: set[int] = set()
    todo, seen = list(names), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for k in _definition(table, name):
            if k not in chosen:
                chosen.add(k)
                todo.extend(free_names(ast.Module(body=[table[k][1]], type_ignores=[])))
    return [Piece(ast.Module(body=[stmt], type_ignores=[]), cell, text)
            for k, (cell, stmt, text) in enumerate(table) if k in chosen]


def _definition(table: list[tuple[int, ast.stmt, str]], name: str) -> list[int]:
    """The statements that define ``name`` as it stands at the end of ``table``: its latest
    binding (and the one before, for ``x += ...``), then what sets its attributes."""
    found: list[int] = []
    for k in range(len(table) - 1, -1, -1):
        stmt = table[k][1]
        if name in _bound(stmt):
            found.append(k)
            if not isinstance(stmt, ast.AugAssign):
                break
    if not found:
        return []
    start = min(found)
    found += [k for k in range(start + 1, len(table))
              if name in _attached(table[k][1]) and name not in _bound(table[k][1])]
    return found


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
    text = "".join(linecache.getlines(code.co_filename))
    try:
        tree = ast.parse(without_magics(text))
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
    """The shortest public name torch gives a function or class defined in a private module
    (``functorch.compile.make_boxed_func`` for ``torch._functorch...make_boxed_func``), as an
    import in the notebook would name it; None when it has none."""
    own, home = getattr(value, "__name__", None), getattr(value, "__module__", None) or ""
    if not isinstance(own, str) or home.split(".")[0] not in ("torch", "functorch") \
            or not any(part.startswith("_") for part in home.split(".")):
        return None  # not torch's, or already public where it is defined
    found = [name for name, module in list(sys.modules.items())
             if name.split(".")[0] in ("torch", "functorch")
             and not any(part.startswith("_") for part in name.split("."))
             and getattr(module, own, None) is value]
    return f"{min(found, key=len)}.{own}" if found else None


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
        elif isinstance(value, type) and self._class_code(value) is not None:
            self.cls(value)
        elif isinstance(value, types.MethodType):
            self.value(name, value.__func__, scope)
            self.value(name, value.__self__, scope)
        elif isinstance(value, functools.partial):
            for part in (value.func, *value.args, *value.keywords.values()):
                self.value(name, part, scope)
        elif self._class_code(type(value)) is not None:  # an instance of a learner's class
            self.cls(type(value))
            for attr, held in vars(value).items() if hasattr(value, "__dict__") else ():
                self.value(attr, held, scope)
        else:
            owner = getattr(value, "__module__", None) or type(value).__module__
            own = getattr(value, "__qualname__", None) or type(value).__qualname__
            self.bound.setdefault(name, _public_name(value) or f"{owner}.{own}")

    @staticmethod
    def _class_code(cls: type) -> types.CodeType | None:
        for member in vars(cls).values():
            member = getattr(member, "__func__", member)
            if isinstance(member, types.FunctionType) and _typed_in(member.__code__,
                                                                    cls.__module__):
                return member.__code__
        return None

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
