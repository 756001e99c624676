"""A live answer in the learner's kernel, read for feedback: the source of each function
and class of the learner's it reaches (from the cells IPython keeps in ``linecache``), and
what the other names it reads stand for (``F`` is ``torch.nn.functional``, ``matmul =
torch.matmul`` is ``torch.matmul``; data such as tensors and numbers is just data). Like
`backproplab.course.sources.from_notebook`, it returns syntax trees for
`backproplab.course.rules.read`, so that the kernel's feedback reads what the grade reads.
"""

from __future__ import annotations

import ast
import builtins
import collections
import dataclasses
import enum
import functools
import linecache
import os
import sys
import sysconfig
import types
from typing import Any

import torch

from .sources import free_names, readable

__all__ = ["from_objects"]


# A plain container of each kind, as code would write one (for its methods).
_EMPTY = {list: "[]", dict: "{}", set: "set()", str: "''", tuple: "()", bytes: "b''",
          frozenset: "frozenset()"}
_DATA = (int, float, complex, bool, str, bytes, type(None), torch.dtype, torch.Size, torch.finfo,
         torch.iinfo, torch.device, torch.Generator, slice, range, type(Ellipsis))


def _is_data(value: Any, depth: int = 0) -> bool:
    """Numbers, plain tensors and containers of them: data an answer may read."""
    if isinstance(value, torch.Tensor):
        return type(value) in (torch.Tensor, torch.nn.Parameter)
    if isinstance(value, _DATA) or type(value) is object:  # object(): a sentinel
        return True
    if _hint(value):
        return True  # a type alias (``Grads = dict[str, Tensor]``): never called
    if isinstance(value, (tuple, list, set, frozenset)) and depth < 3:
        return all(_is_data(v, depth + 1) for v in list(value)[:50])
    if isinstance(value, dict) and depth < 3:
        return all(_is_data(k, depth + 1) and _is_data(v, depth + 1)
                   for k, v in list(value.items())[:50])
    return False


def _hint(value: Any, depth: int = 0) -> bool:
    """A type hint made of classes: ``tuple[Tensor, Tensor]``, ``int | float``,
    ``Optional[str]`` (what it holds is classes, never called as code)."""
    args = getattr(value, "__args__", None)
    if not (isinstance(value, (types.GenericAlias, types.UnionType))
            or type(value).__module__ == "typing") or not isinstance(args, tuple) or depth > 4:
        return False
    return all(isinstance(a, type) or a is None or a is Ellipsis or _hint(a, depth + 1)
               or (isinstance(a, list) and all(isinstance(b, type) for b in a)) for a in args)


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


def _texts(filename: str) -> list[str]:
    """The texts code compiled from ``filename`` may come from: the cell IPython keeps in
    ``linecache``; for ``<timed exec>``, which has no entry there, the bodies of the
    ``%%time`` cells the learner ran, latest first (IPython compiles the lines below the
    magic under that name, numbered from 1)."""
    text = "".join(linecache.getlines(filename))
    if text or filename != "<timed exec>":
        return [text]
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    cells = getattr(getattr(shell, "history_manager", None), "input_hist_raw", [])
    return [cell.partition("\n")[2] for cell in reversed(cells)
            if cell.split("\n", 1)[0].split()[:1] == ["%%time"]]


def _node(code: types.CodeType, kind: type | tuple[type, ...], name: str | None = None
          ) -> list[ast.AST]:
    """The definitions (``def``, ``lambda``, ``class``) in the text ``code`` came from that
    start on its first line (or, for a class, contain it)."""
    texts = _texts(code.co_filename)
    for text in texts:
        found = _defined_at(text, code.co_firstlineno, kind, name)
        # of several %%time cells, the one defining this very name at that line
        if found and (len(texts) == 1 or any(getattr(n, "name", "<lambda>")
                                             == (name or code.co_name) for n in found)):
            return found
    return []


def _defined_at(text: str, line: int, kind: type | tuple[type, ...], name: str | None
                ) -> list[ast.AST]:
    try:
        tree, _ = readable(text)
    except SyntaxError:
        return []
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
    ``torch.functional.einsum``, ``torch.linalg.vecdot`` for ``linalg_vecdot``; Python's
    own modules written in C by their public name (``heapq.heappush``); None when it has
    no public name."""
    own, home = getattr(value, "__name__", None), getattr(value, "__module__", None) or ""
    if not isinstance(own, str):
        return None
    if home.startswith("_") and getattr(sys.modules.get(home[1:]), own, None) is value:
        return f"{home[1:]}.{own}"  # Python's own, written in C: functools.reduce, heapq
    if getattr(torch.Tensor, own, None) is value:
        return f"torch.Tensor.{own}"  # a tensor method held as a value: torch.Tensor.sum
    if home.split(".")[0] not in ("torch", "functorch"):
        return None
    # torch.linalg.vecdot is named linalg_vecdot, F.logsigmoid log_sigmoid
    names = {own, own.split("_", 1)[-1], own.replace("_", "")}
    found = [f"{name}.{n}" for name, module in list(sys.modules.items())
             if name.split(".")[0] in ("torch", "functorch")
             and not any(part.startswith("_") for part in name.split("."))
             for n in names if getattr(module, n, None) is value]
    # torch.jit re-exports what other modules define (torch.futures.Future): its names last
    return min(found, key=lambda n: (n.startswith("torch.jit."), len(n))) if found else None


# Where Python's record makers write a class's methods: generated code, or their modules.
_MAKERS = ("<string>", dataclasses.__file__, enum.__file__, collections.__file__)


def _machinery(member: Any) -> bool:
    """Whether a class member is one a record maker wrote (a dataclass's ``__eq__``, a named
    tuple's ``__new__``, an IntEnum's ``__format__``, which is int's): never the learner's
    code, nor a library's function put there (``__call__ = torch.autograd.grad``)."""
    member = getattr(member, "__func__", member)
    if isinstance(member, types.FunctionType):
        return member.__code__.co_filename in _MAKERS
    return getattr(member, "__objclass__", None) in (object, int, str, float, tuple)


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
        elif value is getattr(builtins, getattr(value, "__name__", ""), None):
            # a builtin under a name of the answer's (``show = print``): read as written
            self.trees.append(ast.parse(f"{name} = {value.__name__}"))
        elif isinstance(value, types.BuiltinMethodType) and type(
                getattr(value, "__self__", None)) in _EMPTY:
            # a plain container's method (``remember = trail.append``): the method as code
            # reads it, and what the container holds
            self.trees.append(ast.parse(f"{name} = {_EMPTY[type(value.__self__)]}."
                                        f"{value.__name__}"))
            self.held(name, value.__self__, scope)
        elif isinstance(value, types.FunctionType) and _typed_in(value.__code__,
                                                                 value.__module__):
            self.function(value)
        elif isinstance(value, (staticmethod, classmethod)):  # held by a record class
            self.value(name, value.__func__, scope)
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
            self._attributes(name, vars(value) if hasattr(value, "__dict__") else {}, scope)
        elif self._plain_class(type(value)):
            # An instance of a learner's record class (a dataclass, a named tuple): the
            # class stands in the reading, and what the instance holds is read.
            if id(type(value)) not in self._seen:
                self.empty_class(type(value), scope)
            self._seen.add(id(value))
            held = value if isinstance(value, tuple) else getattr(value, "__dict__", {})
            for part in held.values() if isinstance(held, dict) else held:
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
            # an object of torch's stands for its class (``torch.no_grad()``: torch.no_grad)
            named = isinstance(value, type) or (callable(value) and hasattr(value, "__name__"))
            typed = None if named else _public_name(type(value))
            self.bound.setdefault(name, _public_name(value) or _op_name(value) or typed
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
        by (a dataclass's ``__init__``, written by the dataclass machinery, has none; nor has
        a function written outside and put in the class, ``staticmethod(f)``)."""
        for member in vars(cls).values():
            member = getattr(member, "__func__", member)
            if isinstance(member, types.FunctionType) and _typed_in(member.__code__,
                                                                    cls.__module__) \
                    and member.__qualname__.startswith(f"{cls.__qualname__}.") \
                    and _node(member.__code__, _FUNCTIONS):
                return member.__code__
        return None

    @staticmethod
    def _plain_class(cls: type) -> bool:
        """A class of the notebook's with no code of its own, used as a namespace or a
        record (``class Box: pass``, ``class Float32: size = 4``, a ``@dataclass``, a
        ``NamedTuple`` of fields or an ``Enum``), or made of functions written outside it
        (``forward = staticmethod(f)`` in a ``torch.autograd.Function``): every dunder
        Python's, the dataclass machinery's or the enum module's."""
        made = {"__module__", "__dict__", "__weakref__", "__doc__", "__annotations__",
                "__static_attributes__", "__firstlineno__", "__qualname__",
                "__slots__"}  # Python's own
        record = dataclasses.is_dataclass(cls) or _named_tuple(cls)
        if record or isinstance(cls, enum.EnumMeta):
            made |= {"__dataclass_fields__", "__dataclass_params__", "__match_args__",
                     "__hash__", "__orig_bases__"}
            made |= {a for a, m in vars(cls).items() if _machinery(m)}
        # make_dataclass names its class's module "types" (before Python 3.12)
        homes = ("__main__", "types") if record else ("__main__",)
        return (isinstance(cls, type) and cls.__module__ in homes
                and _Live._class_code(cls) is None
                and {a for a in vars(cls) if a.startswith("__")} <= made)

    def empty_class(self, cls: type, scope: dict[str, Any]) -> None:
        """A namespace or record class: what it holds is read as an object's attributes are,
        and it stands in the reading as a class of the learner's that names its attributes
        and fields (it has no source to read without a function in it)."""
        self._seen.add(id(cls))
        fields = [*getattr(cls, "_fields", ()), *getattr(cls, "__annotations__", {}),
                  *(a for a in vars(cls) if not a.startswith("_"))]
        body = "".join(f"    {f} = None\n" for f in dict.fromkeys(fields)) or "    pass\n"
        bases = ", ".join(self._base(b, scope) for b in cls.__bases__ if b is not object)
        self.trees.append(ast.parse(f"class {cls.__name__}({bases}):\n{body}"))
        for attr, held in vars(cls).items():
            # the rest is Python's (_plain_class), a slot's descriptor too
            if not attr.startswith("_") and not isinstance(held, types.MemberDescriptorType):
                self.held(attr, held, scope)

    def _base(self, base: type, scope: dict[str, Any]) -> str:
        """A base class as the class statement would name it; a class of the notebook's
        is read, a library's named by its public name (its module bound)."""
        if base.__module__ == "__main__":
            self.value(base.__name__, base, scope)
        name = _public_name(base) or f"{base.__module__}.{base.__qualname__}"
        name = name.removeprefix("builtins.").removeprefix("__main__.")
        if "." in name:  # a library's: the name stands on its top module
            self.bound.setdefault(name.split(".")[0], name.split(".")[0])
        return name

    def function(self, fn: types.FunctionType) -> None:
        self._seen.add(id(fn))
        nodes = _node(fn.__code__, _FUNCTIONS)
        if not nodes:
            self.unread.append(fn.__qualname__)
            return
        self.trees.extend(nodes)
        self._attributes(fn.__name__, vars(fn), fn.__globals__)
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
        self._attributes(cls.__name__, {}, scope, names=vars(cls))
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

    def _attributes(self, owner: str, held: dict[str, Any], scope: dict[str, Any],
                    names: Any = ()) -> None:
        """Attributes of the learner's object, set outside its code too (``slope.c = ...``
        in a cell, a method put on a class after it): known as code setting them makes
        them; what ``held`` holds is read."""
        found = [a for a in (*held, *names) if a.isidentifier() and not a.startswith("__")]
        if owner.isidentifier() and found:
            self.trees.append(ast.parse("".join(f"{owner}.{a} = None\n"
                                                for a in dict.fromkeys(found))))
        for attr, value in held.items():
            if not attr.startswith("__"):
                self.held(attr, value, scope)


def from_objects(answer: Any) -> tuple[list[ast.AST], dict[str, str], list[str]]:
    """A live answer's trees, what the free names they read stand for, and the learner's
    functions whose source could not be read (defined by exec without a file, say).

    A tuple or list of answers is read member by member.
    """
    live = _Live()
    for item in answer if isinstance(answer, (tuple, list)) else (answer,):
        live.value("answer", item, {})
    return live.trees, live.bound, live.unread
