"""What an answer's code may use: an allowlist, read on its syntax tree.

A gradient worked out by hand needs tensor arithmetic and nothing else: the
operators, torch's tensor operations (``torch.where``, ``x.sum``,
``scatter_add_``, ``einsum``...), Python's plain builtins, ``math``, a few
bookkeeping modules (``collections``, ``itertools``, ``functools``,
``heapq``...), ``torch.no_grad``, and the learner's own functions, classes
and data. A method exercise (accumulating, hooks, a custom Function) may use the
torch modules such work needs besides (`backproplab.course.allowlist` lists them).
Whatever the kind, some things are never part of an answer, because they reach
around the code instead of through it: imports of anything else, dunder
attributes (read directly or by a ``match`` class pattern), names built from
strings (``getattr``, ``eval``, ``exec``), string annotations (``typing`` can
evaluate them), a module passed around as a value, frames and code objects,
threads, processes, files, the environment, backproplab's own checks, torch's
private parts, and classes that overload arithmetic (a home-made dual number or
engine) unless the exercise builds one.

The same reading serves three places, so they never disagree: the feedback
of ``check_exercise`` in the learner's kernel, ``backproplab grade`` (which
reads the submitted source and runs it in a sandbox) and ``backproplab audit``.
It teaches "by hand" and is a second line of defence; the boundary that
protects the grade is the sandbox. A finding is data (where, what, why); its
sentence is made by `refusal` when it is shown.

>>> import ast
>>> def uses(source):
...     return [f.used for f in read([ast.parse("import torch\\n" + source)], BY_HAND)]
>>> uses("def f(x):\\n    return 2 * torch.cos(x).sum(dim=0)")
[]
>>> uses("def f(x):\\n    return torch.autograd.grad(x, x)")
['torch.autograd.grad']
"""

from __future__ import annotations

import ast
import builtins
import string
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .allowlist import (
    ARITHMETIC_METHODS,
    BY_HAND,
    CLASS_HOOKS,
    CLASS_SAFE,
    METHOD,
    NEVER_OWN,
    REFUSED_BUILTINS,
    TENSOR_OPERATIONS,
    Vocabulary,
    attribute_reason,
    builtin_reason,
    is_dunder,
    is_module,
    qualified_reason,
    resolve,
)
from .sources import binds, in_scope, local_names, star_names

__all__ = ["BY_HAND", "METHOD", "SHAPES", "Finding", "Vocabulary", "aliases", "qualified_reason",
           "read", "refusal"]


@dataclass(frozen=True)
class Finding:
    """One use outside the vocabulary: line (in its tree), what was used, why (a key of
    `REASONS`), and which of the trees read it is in."""

    line: int
    used: str
    why: str
    tree: int = 0


REASONS = {
    "autograd": "autograd: the gradient is what the exercise asks you to derive",
    "estimate": "a numerical estimate of the derivative",
    "complex": "complex numbers: the complex-step trick is a numerical estimate",
    "import": "an import outside the exercise's vocabulary",
    "introspection": "introspection: frames, code objects, the interpreter",
    "by-name": "a name or attribute built from a string",
    "runs-code": "code run from a string or a file (eval, exec, compile, pickle, ...)",
    "dunder": "a dunder attribute: the machinery behind objects, not arithmetic",
    "pattern": "an attribute read by a class pattern (case C(name=...)) that plain code "
               "may not read",
    "module-value": "a module used as a value: a module may be imported, read through "
                    "(torch.sin) or named (F = torch.nn.functional), nothing else",
    "annotation": "a string annotation, which typing can evaluate as code",
    "own-name": "an attribute of your own named like something refused (sys, exec, ...)",
    "shadow": "a name of your own spelt like one of Python's refused builtins, read where "
              "it may still be the builtin: give it another name",
    "private": "a private part of a library (a name with a leading underscore)",
    "unlisted": "a part of torch outside the modules this exercise works with",
    "kernels": "torch's own kernels, its backward kernels among them",
    "package": "backproplab's own tools (the checks' helpers, not a derivation)",
    "concurrency": "another thread or process",
    "system": "the operating system: files, processes, the environment",
    "library": "another numeric or symbolic library",
    "engine": "a class that overloads arithmetic: a home-made dual number or engine",
    "subclass": "a subclass of torch.Tensor, which can change what comparing means",
    "class-hook": "a class hook that changes how objects behave",
    "module-change": "a change to a module or a class of a library",
    "memory": "a tensor's raw memory",
    "other": "not known to be plain arithmetic",
}

# The shapes that reach around the code, whatever words they are spelt with: what
# ``backproplab audit`` lists in every cell.
SHAPES = frozenset({"pattern", "module-value", "annotation", "own-name", "runs-code", "dunder"})

# Builtin types whose class pattern's one positional part is the subject itself.
_SELF_MATCHING = {"bool", "bytearray", "bytes", "dict", "float", "frozenset", "int", "list",
                  "set", "str", "tuple"}


def _chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None when the chain does not start at a name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


class _Names(ast.NodeVisitor):
    """First pass: the names and attributes the answer's own code defines, and what its
    imports and plain aliases (``F = torch.nn.functional``) stand for."""

    def __init__(self, bound: Mapping[str, str]) -> None:
        self.aliases: dict[str, str] = dict(bound)
        self.own: set[str] = set()
        self.attributes: set[str] = set()
        self.alias_values: set[int] = set()  # ids of ``X = module`` values: a module named
        self.rebound: list[tuple[ast.AST, str, str, str]] = []  # an alias bound twice
        self.hint_only: set[str] = set()  # bound under ``if TYPE_CHECKING:`` only
        self._class_level: set[int] = set()

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            top = a.name.split(".")[0]
            self.aliases[a.asname or top] = a.name if a.asname else top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for name in star_names(node):  # ``from math import *``: each name, as if listed
            self.aliases[name] = f"{node.module}.{name}"
        for a in node.names:
            if node.module and not node.level and a.name != "*":
                self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def visit_Assign(self, node: ast.Assign) -> None:
        chain = _chain(node.value)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and chain \
                and chain[0] in self.aliases and id(node) not in self._class_level:
            name, meant = node.targets[0].id, ".".join([self.aliases[chain[0]], *chain[1:]])
            if self.aliases.get(name, meant) != meant and (
                    _namespace(self.aliases[name]) or _namespace(meant)):
                self.rebound.append((node, name, self.aliases[name], meant))
            self.aliases[name] = meant
            self.alias_values.add(id(node.value))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        # namedtuple("Pair", ["primal", "tangent"]) (or "primal tangent", or as
        # field_names=), NamedTuple("Pair", [("primal", T), ...]) and make_dataclass define
        # the attributes their fields name, as a class body would; so do the keywords of
        # SimpleNamespace(value=...)
        maker = (_chain(node.func) or [""])[-1]
        if maker == "SimpleNamespace":
            self.attributes.update(k.arg for k in node.keywords if k.arg)
        if maker in ("namedtuple", "NamedTuple", "make_dataclass"):
            given = [k.value for k in node.keywords if k.arg in ("field_names", "fields")]
            fields = node.args[1] if len(node.args) > 1 else (given or [None])[0]
            items = [fields] if isinstance(fields, ast.Constant) else getattr(fields, "elts", [])
            words = [(getattr(e, "elts", None) or [e])[0] for e in items]  # ("name", T)
            self.attributes.update(w for e in words if isinstance(e, ast.Constant)
                                   and isinstance(e.value, str)
                                   for w in e.value.replace(",", " ").split())
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.own.add(node.id)

    def visit_If(self, node: ast.If) -> None:
        if _type_checking(node):
            # names a type checker reads in hints: none of them exists when the code runs
            self.hint_only.update(n for part in node.body for n in binds(part))
            for part in node.orelse:
                self.visit(part)
            return
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.attributes.add(node.attr)
        self.generic_visit(node)

    def _define(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.own.add(node.name)
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = _define

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for item in node.body:  # methods and class attributes are the learner's attributes
            self._class_level.add(id(item))
            self.attributes.update(_class_attributes(item))
        if any((_chain(base) or [""])[-1].endswith(("Enum", "Flag")) for base in node.bases):
            self.attributes |= {"name", "value"}  # what each member of an enum holds
        self._define(node)

    def visit_arg(self, node: ast.arg) -> None:
        self.own.add(node.arg)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.own.add(node.name)
        self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, (ast.MatchAs, ast.MatchStar, ast.MatchMapping)):
            self.own |= binds(node)  # names a match pattern captures
        super().generic_visit(node)


def _type_checking(node: ast.If) -> bool:
    """Whether ``node`` is ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): its body
    runs for a type checker only, never when the code runs."""
    return (_chain(node.test) or [""])[-1] == "TYPE_CHECKING"


def _namespace(dotted: str) -> bool:
    """Whether a dotted name may stand for a module or a class (or for what cannot be
    found): names read on it (``m.grad``) mean other things as it is bound one way or
    another. A value (``torch.float32``, ``torch.ceil``, an enum's member) bound one way
    and then another is read at each binding; its attributes are alike either way."""
    top, *rest = dotted.split(".")
    found: Any = sys.modules.get(top)
    for part in rest:
        found = getattr(found, part, None)
    return found is None or isinstance(found, (types.ModuleType, type))


def _hint_values(annotation: ast.AST) -> set[int]:
    """The ids of a hint's nodes that are values, never evaluated as code: a Literal's words
    (``Literal["relu"]``) and an Annotated's notes (``Annotated[Tensor, "(n,)"]``)."""
    found: set[int] = set()
    for node in ast.walk(annotation):
        if isinstance(node, ast.Subscript):
            kind = (_chain(node.value) or [""])[-1]
            parts = getattr(node.slice, "elts", [node.slice])
            values = parts if kind == "Literal" else parts[1:] if kind == "Annotated" else []
            found |= {id(n) for part in values for n in ast.walk(part)}
    return found


def _class_attributes(item: ast.stmt) -> list[str]:
    """The attribute names one statement of a class body defines."""
    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [item.name]
    targets = item.targets if isinstance(item, ast.Assign) else (
        [item.target] if isinstance(item, ast.AnnAssign) else [])
    return [t.id for t in targets if isinstance(t, ast.Name)]


@dataclass(frozen=True)
class _Scope:
    """A function's (or a comprehension's) own names: every local, and those of them that
    an import or ``X = module`` binds."""

    bound: frozenset[str]
    aliased: frozenset[str]


def _scope(node: ast.AST, alias_values: set[int]) -> _Scope:
    """The names ``node`` (a function, lambda or comprehension) binds in its own scope."""
    bound = local_names(node)
    aliased = set()
    for n in in_scope(node):
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            aliased |= binds(n)
        elif isinstance(n, ast.Assign) and id(n.value) in alias_values:
            aliased.add(n.targets[0].id)
    return _Scope(frozenset(bound), frozenset(aliased & bound))


class _Reader(ast.NodeVisitor):
    """Second pass: every use outside the vocabulary, as a Finding."""

    def __init__(self, vocabulary: Vocabulary, names: _Names) -> None:
        self.vocabulary = vocabulary
        self.names = names
        self.aliases = names.aliases
        self.own = frozenset(names.own - set(names.aliases))
        self.attributes = frozenset(names.attributes)
        self.found: list[Finding] = []
        self.tree = 0
        self.scopes: list[_Scope] = []  # the functions around the node read, innermost last
        self._literal: set[int] = set()  # getattr(x, "name") read as x.name

    def _add(self, node: ast.AST, used: str, why: str | None) -> None:
        if why is not None:
            self.found.append(Finding(getattr(node, "lineno", 0), used, why, self.tree))

    def _local(self, name: str) -> _Scope | None:
        return next((s for s in reversed(self.scopes) if name in s.bound), None)

    def _alias(self, name: str) -> str | None:
        """What module or name ``name`` stands for, unless a function's own plain local
        (a parameter, a loop variable) hides it."""
        scope = self._local(name)
        if name not in self.aliases or (scope is not None and name not in scope.aliased):
            return None
        return self.aliases[name]

    # -------------------------------------------------------------- imports and names

    def _import(self, node: ast.AST, module: str) -> None:
        why = qualified_reason(module, self.vocabulary)
        self._add(node, f"import {module}", None if why is None else (
            why if why in ("runs-code", "introspection", "system", "concurrency", "library",
                           "package", "memory", "autograd", "complex") else "import"))

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            # ``import torch._dynamo`` binds only ``torch``: what is read through it is
            # checked where it is read. With ``as``, the name is the submodule itself.
            self._import(node, a.name if a.asname else a.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and star_names(node):  # each name is read where it is used
            self._import(node, node.module)
            return
        if node.level or not node.module or any(a.name == "*" for a in node.names):
            self._add(node, f"from {'.' * node.level}{node.module or ''} import ...", "import")
            return
        for a in node.names:
            why = qualified_reason(f"{node.module}.{a.name}", self.vocabulary)
            self._add(node, f"from {node.module} import {a.name}", why)

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if id(node) in self._literal or not isinstance(node.ctx, ast.Load):
            return
        meant = self._alias(name)
        if meant is None and name in self.names.hint_only:
            return  # a hint's name, imported for a type checker only
        if is_dunder(name):
            self._add(node, name, "introspection")
        elif meant is not None:
            shown = f"{name}, which is {meant}" if name != meant else name
            self._add(node, shown, qualified_reason(meant, self.vocabulary))
            if is_module(meant) and id(node) not in self.names.alias_values:
                self._add(node, shown, "module-value")
        elif self._local(name) is not None or not hasattr(builtins, name):
            return
        elif name in REFUSED_BUILTINS:  # a cell-level name of that spelling cannot be trusted
            self._add(node, name, "shadow" if name in self.own else REFUSED_BUILTINS[name])
        elif name not in self.own:
            self._add(node, name, builtin_reason(name))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain = _chain(node)
        meant = self._alias(chain[0]) if chain else None
        if chain and meant is not None:
            qualified, shown = ".".join([meant, *chain[1:]]), ".".join(chain)
            if not isinstance(node.ctx, ast.Load):
                self._add(node, shown, "module-change")
                return
            meant = resolve(qualified)  # torch.os is the os module
            shown = shown if shown == meant else f"{shown}, which is {meant}"
            self._add(node, shown, qualified_reason(qualified, self.vocabulary))
            if is_module(qualified) and id(node) not in self.names.alias_values:
                self._add(node, shown, "module-value")
            return  # the whole chain is read at once
        if node.attr == "__init__" and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "super":
            self.generic_visit(node)
            return
        reading = isinstance(node.ctx, ast.Load)
        own = self.attributes if reading else self.attributes | {node.attr}
        why = attribute_reason(node.attr, self.vocabulary, own, reading=reading)
        if not reading:
            why = self._set(node.attr, why)
        self._add(node, _tensor_name(node.attr), why)
        self.generic_visit(node)

    def _set(self, attr: str, why: str | None) -> str | None:
        """Why setting ``value.attr`` is refused: a name of the learner's is theirs to set,
        unless it is spelt like something refused on every value."""
        if attr in NEVER_OWN and attribute_reason(attr, self.vocabulary) is not None:
            return "own-name"
        if why in ("other", "private") and attr not in TENSOR_OPERATIONS:
            return None
        return why

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in {"getattr", "hasattr"} \
                and self._local(func.id) is None and func.id not in self.own \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str):
            self._literal.add(id(func))  # a name written out: read as the attribute it is
            attr = node.args[1].value
            self._add(node, f"{func.id}(..., {attr!r})", attribute_reason(
                attr, self.vocabulary, self.attributes) if attr.isidentifier() else "by-name")
        if isinstance(func, ast.Name) and func.id == "type" and len(node.args) == 3:
            self._add(node, "type(name, bases, namespace)", "by-name")
        if isinstance(func, ast.Attribute) and func.attr in {"format", "format_map"}:
            # A template's fields may read attributes ("{0.grad}"): only as text, but past
            # what a by-hand answer may read. A method answer may read public attributes.
            fields = _format_fields(func.value)
            hidden = fields is None and self.vocabulary.by_hand
            if hidden or any("." in f or "[" in f for f in fields or ()):
                self._add(node, f".{func.attr}(...)", "by-name")
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        if _type_checking(node):
            # never runs: what it imports names hints for a type checker only
            for part in node.orelse:
                self.visit(part)
            return
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, complex) and not self.vocabulary.complex_numbers:
            self._add(node, repr(node.value), "complex")

    # -------------------------------------------------------------- scopes

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        # Decorators, defaults and annotations run where the function is defined.
        args = node.args
        outside = [*getattr(node, "decorator_list", []), *args.defaults,
                   *(d for d in args.kw_defaults if d is not None)]
        annotations = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                              args.vararg, args.kwarg)
                       if a is not None and a.annotation is not None]
        annotations += [node.returns] if getattr(node, "returns", None) is not None else []
        for part in [*outside, *annotations]:
            self.visit(part)
        for annotation in annotations:
            self._annotation(annotation)
        self.scopes.append(_scope(node, self.names.alias_values))
        for part in node.body if isinstance(node.body, list) else [node.body]:
            self.visit(part)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.DictComp
                       | ast.GeneratorExp) -> None:
        self.visit(node.generators[0].iter)  # the first iterable is read outside
        self.scopes.append(_scope(node, self.names.alias_values))
        for k, generator in enumerate(node.generators):
            for part in [generator.target, *([generator.iter] if k else []), *generator.ifs]:
                self.visit(part)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            self.visit(part)
        self.scopes.pop()

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def _annotation(self, annotation: ast.AST) -> None:
        values = _hint_values(annotation)
        if any(isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in values
               for n in ast.walk(annotation)):
            self._add(annotation, f"the annotation {ast.unparse(annotation)}", "annotation")

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._annotation(node.annotation)
        self.generic_visit(node)

    # -------------------------------------------------------------- classes and patterns

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            chain = _chain(base)
            qualified = ".".join([self.aliases.get(chain[0], chain[0]), *chain[1:]]) \
                if chain else ""
            if qualified in {"torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"}:
                self._add(base, f"class {node.name}({'.'.join(chain)})", "subclass")
        for keyword in node.keywords:
            self._add(keyword, f"class {node.name}({keyword.arg}=...)", "class-hook")
        for item in node.body:
            for name in _class_attributes(item):
                self._add(item, f"{node.name}.{name}", self._defined(name))
        self.generic_visit(node)

    def _defined(self, name: str) -> str | None:
        """Why a class may not define ``name``: a hook, an operator (unless the exercise
        builds an engine), another dunder, or a name refused on every value."""
        if name in CLASS_HOOKS:
            # an exercise may name the hook its answer defines (a dispatch mode's
            # ``__torch_dispatch__``)
            return None if name in self.vocabulary.names else "class-hook"
        if name in ARITHMETIC_METHODS:
            return None if self.vocabulary.engine else "engine"
        if is_dunder(name):
            return None if name in CLASS_SAFE else "dunder"
        return self._set(name, None)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        # ``case C(name=x)`` reads ``subject.name``: read it as the attribute it is.
        cls = ".".join(_chain(node.cls) or ["..."])
        for attr in node.kwd_attrs:
            if attribute_reason(attr, self.vocabulary, self.attributes) is not None:
                self._add(node, f"case {cls}({attr}=...)", "pattern")
        # Positional parts read the attributes a class lists in __match_args__: known for
        # the learner's own classes and for the builtin types that match themselves.
        if node.patterns and cls not in self.own and cls not in _SELF_MATCHING:
            self._add(node, f"case {cls}(...), by position", "pattern")
        self.generic_visit(node)


def _tensor_name(attr: str) -> str:
    """``Tensor.backward()`` for a tensor method, ``Tensor.grad`` for a property, ``.attr``
    for what no tensor has: what an attribute read from a value most likely is."""
    if not hasattr(torch.Tensor, attr) or attr.startswith("__"):
        return f".{attr}"
    value = getattr(torch.Tensor, attr)
    method = callable(value) and not isinstance(value, type)
    return f"Tensor.{attr}" + ("()" if method else "")


def _format_fields(receiver: ast.AST) -> list[str] | None:
    """The field names of a literal format string; None when the string is not literal."""
    if not (isinstance(receiver, ast.Constant) and isinstance(receiver.value, str)):
        return None
    try:
        return [f or "" for _, f, _, _ in string.Formatter().parse(receiver.value) if f]
    except ValueError:
        return None


def aliases(trees: Sequence[ast.AST]) -> dict[str, str]:
    """What the names ``trees`` import or alias stand for (``{"F": "torch.nn.functional"}``):
    a ``bound`` for reading one of a notebook's cells with what the others import.

    >>> aliases([ast.parse("import torch.nn.functional as F")])
    {'F': 'torch.nn.functional'}
    """
    names = _Names({})
    for tree in trees:
        names.visit(tree)
    return names.aliases


def read(trees: Sequence[ast.AST], vocabulary: Vocabulary,
         bound: Mapping[str, str] | None = None) -> list[Finding]:
    """Every use outside ``vocabulary`` in ``trees`` (the answer and the definitions it
    needs, parsed), in order, each once. ``bound`` names what the trees' free names stand
    for when no import in them says (``{"F": "torch.nn.functional"}``, from a kernel).

    >>> [f.why for f in read([ast.parse("import sys")], BY_HAND)]
    ['introspection']
    """
    names = _Names(bound or {})
    for tree in trees:
        names.visit(tree)
    reader = _Reader(vocabulary, names)
    for k, tree in enumerate(trees):
        reader.tree = k
        reader.visit(tree)
    found = list(reader.found)
    for node, name, first, then in names.rebound:  # which one a later read meets is unknown
        found.append(Finding(node.lineno, f"{name}, bound to {first} and to {then}",
                             "module-value", next(k for k, t in enumerate(trees)
                                                  if any(n is node for n in ast.walk(t)))))
    seen: set[tuple[str, str]] = set()
    unique = []
    for f in found:
        if (f.used, f.why) not in seen:
            seen.add((f.used, f.why))
            unique.append(f)
    return unique


# What says most comes first: autograd and estimates before a name merely not listed.
_ORDER = ("autograd", "estimate", "package", "introspection", "concurrency", "system",
          "library", "runs-code", "by-name", "pattern", "module-value", "annotation", "own-name",
          "dunder", "engine", "subclass", "class-hook", "complex", "private", "kernels",
          "memory", "import", "module-change", "shadow", "unlisted", "other")

REPORT = ("If this refusal is wrong (what you used is plain arithmetic), tell your instructor "
          "or open an issue on backproplab's tracker quoting this message.")


def refusal(found: Sequence[Finding], vocabulary: Vocabulary = BY_HAND, *,
            asks_for: str = "the gradient by hand") -> str:
    """The sentence a refusal shows: what was used and why (what says most first), what
    the exercise allows, and how to report a refusal that is wrong (``asks_for``: what a
    by-hand exercise asks for, in its own words).

    >>> print(refusal([Finding(2, "import numpy", "library")]))  # doctest: +ELLIPSIS
    this exercise asks for the gradient by hand, but your code uses import numpy (another ...
    """
    ordered = sorted(found, key=lambda f: _ORDER.index(f.why) if f.why in _ORDER else 99)
    listed = "; ".join(f"{f.used} ({REASONS.get(f.why, f.why)})" for f in ordered[:4])
    listed += "; ..." if len(ordered) > 4 else ""
    if vocabulary.by_hand:
        return (f"this exercise asks for {asks_for}, but your code uses {listed}. A "
                "by-hand answer may use tensor arithmetic, torch's tensor operations "
                "(torch.where, x.sum, scatter_add_, einsum, ...), torch.no_grad, Python's "
                "plain builtins, math, its own helper functions and classes and the names "
                f"the exercise hands over. {REPORT}")
    extra = sorted(n.rstrip(".") for n in vocabulary.names if not is_dunder(n))
    extra_text = f", and for this exercise {', '.join(extra)}" if extra else ""
    return (f"your code uses {listed}, which this exercise does not allow. An answer may use "
            "torch's tensor operations and the modules a method works with (torch.autograd, "
            "torch.nn, torch.optim, torch.func, torch.linalg, torch.special, "
            f"torch.utils.checkpoint{extra_text}), Python's plain builtins, math and "
            "bookkeeping modules, and its own helper functions and classes. " + REPORT)
