"""What an answer's code may use: an allowlist, read on its syntax tree.

A gradient worked out by hand needs tensor arithmetic and nothing else: the
operators, torch's tensor operations (``torch.where``, ``x.sum``,
``scatter_add_``, ``einsum``...), Python's plain builtins, ``math``, a few
bookkeeping modules (``collections``, ``itertools``, ``functools``,
``heapq``...), ``torch.no_grad``, and the learner's own functions, classes
and data. A method exercise (accumulating, hooks, a custom Function) may use
torch's public API besides. Whatever the kind, some things are never part of
an answer, because they reach around the code instead of through it: imports
of anything else, dunder attributes, names built from strings (``getattr``,
``eval``, ``exec``), frames and code objects, threads, processes, files, the
environment, backproplab's own checks, torch's private parts, and classes
that overload arithmetic (a home-made dual number or engine) unless the
exercise builds one.

The same reading serves three places, so they never disagree: the feedback
of ``check_exercise`` in the learner's kernel, ``backproplab grade`` (which
reads the submitted source and runs it in a fresh process) and
``backproplab audit``. A finding is data (where, what, why); its sentence is
made by `refusal` when it is shown.

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
import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional
import torch.overrides

__all__ = ["BY_HAND", "METHOD", "Finding", "Vocabulary", "qualified_reason", "read", "refusal"]


@dataclass(frozen=True)
class Vocabulary:
    """What one exercise's answer may use.

    ``by_hand``: tensor arithmetic only (else torch's public API too, for a method
    exercise); ``names``: qualified names (or prefixes ending in ".") allowed beyond
    the kind's own, such as ``"heapq"`` or ``"torch.autograd.graph."``, and class hooks
    the answer may define (``"__torch_dispatch__"``, for a dispatch mode); ``engine``:
    classes may overload arithmetic; ``complex_numbers``: complex literals and dtypes.
    """

    by_hand: bool
    names: frozenset[str] = frozenset()
    engine: bool = False
    complex_numbers: bool = False

    def allowing(self, *names: str, engine: bool | None = None,
                 complex_numbers: bool | None = None) -> Vocabulary:
        """This vocabulary with more allowed, e.g. ``BY_HAND.allowing(complex_numbers=True)``."""
        return dataclasses.replace(
            self, names=self.names | frozenset(names),
            engine=self.engine if engine is None else engine,
            complex_numbers=self.complex_numbers if complex_numbers is None else complex_numbers)


BY_HAND = Vocabulary(by_hand=True)
METHOD = Vocabulary(by_hand=False)


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
    "dunder": "a dunder attribute: the machinery behind objects, not arithmetic",
    "private": "a private part of torch",
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

# --------------------------------------------------------------------------
# The tables
# --------------------------------------------------------------------------

_WORDS = (("backward", "autograd"), ("grad", "autograd"), ("hook", "autograd"),
          ("retain", "autograd"), ("is_leaf", "autograd"), ("output_nr", "autograd"),
          ("dual", "autograd"), ("complex", "complex"), ("imag", "complex"),
          ("real", "complex"), ("conj", "complex"), ("cfloat", "complex"),
          ("cdouble", "complex"), ("chalf", "complex"), ("polar", "complex"),
          ("fft", "complex"), ("numpy", "library"), ("storage", "memory"),
          ("data_ptr", "memory"), ("dlpack", "memory"), ("as_subclass", "subclass"))
# Explicit entries come before the word rules: these are allowed though a word matches.
_ALLOWED_DESPITE_WORDS = {"no_grad", "inference_mode", "is_grad_enabled"}
# torch.gradient: finite differences along a dimension.
_ESTIMATES = {"gradient", "get_numerical_jacobian", "get_numerical_jacobian_wrt_specific_input",
              "_get_numerical_jacobian", "numerical_grad"}


def _word(name: str) -> str | None:
    if name in _ALLOWED_DESPITE_WORDS:
        return None
    if name in _ESTIMATES:
        return "estimate"
    return next((why for word, why in _WORDS if word in name), None)


def _overridable() -> tuple[dict, set[int]]:
    table = torch.overrides.get_overridable_functions()
    return table, {id(f) for functions in table.values() for f in functions}


def _tensor_operations() -> frozenset[str]:
    """Tensor methods and properties that torch lists as overridable tensor operations."""
    table, _ = _overridable()
    found = {getattr(f, "__name__", "") for f in table[torch.Tensor]}
    found |= {name for cls in torch.Tensor.__mro__ for name, value in vars(cls).items()
              if isinstance(value, property) or type(value).__name__ == "getset_descriptor"}
    found |= {"new_zeros", "new_ones", "new_full", "new_empty", "new_tensor"}
    return frozenset(n for n in found if n and not n.startswith("_"))


def _namespace(module: object, extra: Iterable[str] = ()) -> frozenset[str]:
    _, operations = _overridable()
    return frozenset({n for n in dir(module) if not n.startswith("_")
                      and id(getattr(module, n, None)) in operations} | set(extra))


# Values and makers of torch that are not overridable operations.
_TORCH_EXTRAS = {
    "tensor", "as_tensor", "zeros", "ones", "full", "empty", "arange", "linspace", "logspace",
    "eye", "rand", "randn", "randint", "randperm", "finfo", "iinfo", "Tensor", "Size",
    "Generator", "float16", "float32", "float64", "bfloat16", "half", "float", "double",
    "int8", "int16", "int32", "int64", "uint8", "long", "int", "short", "bool", "dtype",
    "get_default_dtype", "promote_types", "result_type", "can_cast", "is_tensor",
    "is_floating_point", "numel", "broadcast_shapes", "no_grad", "inference_mode",
    "is_grad_enabled", "device", "inf", "nan", "pi", "e", "manual_seed",
}
_COMPLEX_DTYPES = {"complex64", "complex128", "cfloat", "cdouble", "chalf", "complex32"}
TENSOR_OPERATIONS = _tensor_operations()
# Per module: the names a by-hand answer may take from it.
ARITHMETIC = {
    "torch": _namespace(torch, _TORCH_EXTRAS),
    "torch.nn.functional": _namespace(torch.nn.functional, {"one_hot"}),
    "torch.linalg": _namespace(torch.linalg),
    "torch.special": _namespace(torch.special),
    "math": frozenset(n for n in dir(math) if not n.startswith("_")),
}
# Bookkeeping modules: safe for any answer (operator's getters build attributes from strings).
BOOKKEEPING = {"collections", "itertools", "functools", "operator", "heapq", "bisect",
               "typing", "dataclasses", "enum", "numbers", "copy", "statistics", "string",
               "math", "random"}
_BOOKKEEPING_REFUSED = {"operator.attrgetter": "by-name", "operator.methodcaller": "by-name"}
# Methods of Python's lists, dicts, sets and strings, and of torch.finfo.
_CONTAINERS = {"append", "extend", "insert", "pop", "get", "items", "keys", "values", "update",
               "setdefault", "count", "index", "copy", "sort", "reverse", "join", "split",
               "strip", "startswith", "endswith", "replace", "lower", "upper", "add",
               "discard", "remove", "clear", "is_integer", "bit_length", "tiny", "max",
               "min", "eps", "bits", "resolution", "smallest_normal", "popleft",
               "appendleft", "most_common"}
# Frames, code and generators: the way to the check's own variables.
_INTROSPECTION = {"gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await",
                  "ag_frame", "ag_code", "f_back", "f_locals", "f_globals", "f_builtins",
                  "f_code", "f_trace", "tb_frame", "tb_next", "func_globals", "mro"}
_ALLOWED_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "callable", "divmod", "dict", "enumerate", "filter", "float",
    "int", "iter", "next", "isinstance", "issubclass", "len", "list", "map", "max", "min",
    "pow", "print", "range", "reversed", "round", "set", "slice", "sorted", "sum", "tuple",
    "zip", "frozenset", "str", "repr", "hash", "id", "format", "object", "super", "property",
    "staticmethod", "classmethod", "type", "None", "True", "False", "Ellipsis",
    "NotImplemented", "Exception", "ArithmeticError", "AssertionError", "IndexError",
    "KeyError", "LookupError", "NotImplementedError", "OverflowError", "RuntimeError",
    "StopIteration", "TypeError", "ValueError", "ZeroDivisionError",
})
_REFUSED_BUILTINS = {
    "eval": "by-name", "exec": "by-name", "compile": "by-name", "__import__": "import",
    "getattr": "by-name", "setattr": "by-name", "delattr": "by-name", "hasattr": "by-name",
    "globals": "introspection", "locals": "introspection", "vars": "introspection",
    "dir": "introspection", "open": "system", "input": "system", "breakpoint": "introspection",
    "memoryview": "memory", "complex": "complex",
}
# Classes: the operators a home-made engine overloads, and the hooks that change objects.
_ARITHMETIC_METHODS = {
    f"__{op}__" for base in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                             "matmul", "lshift", "rshift", "and", "or", "xor", "divmod")
    for op in (base, "r" + base, "i" + base)} | {"__neg__", "__pos__", "__abs__", "__invert__"}
# What any class may define, set or read: how its objects print, compare, index, iterate.
_CLASS_SAFE = {"__init__", "__call__", "__repr__", "__str__", "__len__", "__iter__", "__next__",
               "__getitem__", "__setitem__", "__contains__", "__eq__", "__ne__", "__hash__",
               "__bool__", "__enter__", "__exit__", "__post_init__", "__lt__", "__le__",
               "__gt__", "__ge__", "__float__", "__int__", "__index__",
               # names and text, read to tell objects apart (``type(node).__name__``)
               "__name__", "__qualname__", "__doc__", "__module__"}
_CLASS_HOOKS = {"__torch_function__", "__torch_dispatch__", "__getattr__", "__getattribute__",
                "__setattr__", "__delattr__", "__reduce__", "__reduce_ex__", "__del__",
                "__init_subclass__", "__class_getitem__", "__set_name__", "__get__", "__set__",
                "__instancecheck__", "__subclasscheck__", "__new__", "__prepare__",
                "__getstate__", "__setstate__", "__copy__", "__deepcopy__"}
# Modules by the first parts of their name: why each is refused.
_REFUSED_MODULES = (
    ("torch._C", "private"), ("torch.autograd", "autograd"), ("torch.func", "autograd"),
    ("torch._functorch", "autograd"), ("torch.ops", "kernels"), ("torch.fx", "autograd"),
    ("torch.nn.grad", "autograd"),
    ("torch.jit", "autograd"), ("torch.compile", "autograd"), ("torch._dynamo", "autograd"),
    ("torch._inductor", "autograd"), ("torch._decomp", "autograd"), ("torch.fft", "complex"),
    ("sys", "introspection"), ("gc", "introspection"), ("inspect", "introspection"),
    ("traceback", "introspection"), ("types", "introspection"), ("dis", "introspection"),
    ("threading", "concurrency"), ("_thread", "concurrency"), ("concurrent", "concurrency"),
    ("multiprocessing", "concurrency"), ("asyncio", "concurrency"),
    ("subprocess", "system"), ("os", "system"), ("pathlib", "system"), ("io", "system"),
    ("shutil", "system"), ("socket", "system"), ("signal", "system"), ("atexit", "system"),
    ("tempfile", "system"), ("numpy", "library"), ("mpmath", "library"),
    ("sympy", "library"), ("scipy", "library"), ("jax", "library"), ("decimal", "library"),
    ("fractions", "library"), ("ctypes", "memory"), ("backproplab", "package"),
    ("builtins", "introspection"), ("importlib", "import"), ("pickle", "system"),
    ("marshal", "system"), ("unittest", "introspection"), ("IPython", "introspection"),
)


# --------------------------------------------------------------------------
# Qualified names: a module, or something read from one
# --------------------------------------------------------------------------


# torch, and functorch, the name torch.func's compile tools still go by.
_TORCH = {"torch", "functorch"}


def _refused_prefix(qualified: str) -> str | None:
    return next((why for prefix, why in _REFUSED_MODULES
                 if qualified == prefix or qualified.startswith(prefix + ".")), None)


def _named(qualified: str, vocabulary: Vocabulary) -> bool:
    return any(qualified == n or qualified.startswith(n if n.endswith(".") else n + ".")
               for n in vocabulary.names)


def qualified_reason(qualified: str, vocabulary: Vocabulary) -> str | None:
    """Why a module or a name read from one (``torch.autograd.grad``) is refused, or None.

    >>> qualified_reason("torch.where", BY_HAND), qualified_reason("numpy.sin", BY_HAND)
    (None, 'library')
    """
    if _named(qualified, vocabulary):
        return None
    if qualified in _BOOKKEEPING_REFUSED:
        return _BOOKKEEPING_REFUSED[qualified]
    parts = qualified.split(".")
    module, _, last = qualified.rpartition(".")
    if parts[0] in BOOKKEEPING:
        return None
    if last in _ESTIMATES:
        return "estimate"
    if vocabulary.by_hand:
        if qualified in ARITHMETIC or qualified in {"torch", "torch.nn", "torch.Tensor"}:
            return None  # the module itself, read as a name (``F``)
        if module == "torch.Tensor":
            return _attribute_reason(last, vocabulary, frozenset())
        if last in ARITHMETIC.get(module, ()):
            return _arithmetic_word(last, vocabulary)
        return _refused_prefix(qualified) or _word(last) or "other"
    if parts[0] in _TORCH:  # a method exercise: torch's public API
        if qualified.startswith("torch.ops.") and "backward" in qualified:
            return "kernels"
        return "private" if any(p.startswith("_") for p in parts) else None
    return _refused_prefix(qualified) or "other"


def _arithmetic_word(name: str, vocabulary: Vocabulary) -> str | None:
    why = _word(name)
    if why == "complex" and vocabulary.complex_numbers:
        return None
    return why


def _attribute_reason(attr: str, vocabulary: Vocabulary, own: frozenset[str]) -> str | None:
    """Why ``value.attr`` is refused on a value (a tensor, a number, an object), or None."""
    if attr in _CLASS_SAFE or (vocabulary.engine and attr in _ARITHMETIC_METHODS):
        return None  # a class's own protocol, or an engine's operators (``Value.__radd__``)
    if attr.startswith("__") and attr.endswith("__"):
        return "engine" if attr in _ARITHMETIC_METHODS else "dunder"
    if attr in _INTROSPECTION:
        return "introspection"
    if attr in _ESTIMATES and attr not in own:  # a tensor has no such method: a class's own
        return "estimate"
    if not vocabulary.by_hand:
        return None
    if attr in own or attr in _CONTAINERS:
        return None
    if attr in TENSOR_OPERATIONS:
        return _arithmetic_word(attr, vocabulary)
    return "private" if attr.startswith("_") else (_word(attr) or "other")


# --------------------------------------------------------------------------
# Reading the tree
# --------------------------------------------------------------------------


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

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.asname:
                self.aliases[a.asname] = a.name
            else:
                top = a.name.split(".")[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            if node.module and not node.level and a.name != "*":
                self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def visit_Assign(self, node: ast.Assign) -> None:
        chain = _chain(node.value)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and chain \
                and chain[0] in self.aliases:
            self.aliases[node.targets[0].id] = ".".join([self.aliases[chain[0]], *chain[1:]])
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.own.add(node.id)

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
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.attributes.add(item.name)
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                self.attributes.update(t.id for t in targets if isinstance(t, ast.Name))
        self._define(node)

    def visit_arg(self, node: ast.arg) -> None:
        self.own.add(node.arg)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.own.add(node.name)
        self.generic_visit(node)


class _Reader(ast.NodeVisitor):
    """Second pass: every use outside the vocabulary, as a Finding."""

    def __init__(self, vocabulary: Vocabulary, names: _Names) -> None:
        self.vocabulary = vocabulary
        self.aliases = names.aliases
        self.own = frozenset(names.own - set(names.aliases))
        self.attributes = frozenset(names.attributes)
        self.found: list[Finding] = []
        self.tree = 0
        self._literal: set[int] = set()  # getattr(x, "name") read as x.name

    def _add(self, node: ast.AST, used: str, why: str | None) -> None:
        if why is not None:
            self.found.append(Finding(getattr(node, "lineno", 0), used, why, self.tree))

    def _import(self, node: ast.AST, module: str) -> None:
        if any(n.startswith(module + ".") for n in self.vocabulary.names):
            return  # a module the exercise allows a name of (sys, for sys.setrecursionlimit)
        why = qualified_reason(module, self.vocabulary)
        self._add(node, f"import {module}", None if why is None else (
            _refused_prefix(module) or "import"))

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            # ``import torch._dynamo`` binds only ``torch``: what is read through it is
            # checked where it is read. With ``as``, the name is the submodule itself.
            self._import(node, a.name if a.asname else a.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module or any(a.name == "*" for a in node.names):
            self._add(node, f"from {'.' * node.level}{node.module or ''} import ...", "import")
            return
        for a in node.names:
            why = qualified_reason(f"{node.module}.{a.name}", self.vocabulary)
            self._add(node, f"from {node.module} import {a.name}", why)

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if id(node) in self._literal:
            return
        if name.startswith("__") and name.endswith("__"):
            self._add(node, name, "introspection")
        elif name in self.aliases:
            self._add(node, f"{name}, which is {self.aliases[name]}"
                      if name != self.aliases[name] else name,
                      qualified_reason(self.aliases[name], self.vocabulary))
        elif name in self.own or not hasattr(builtins, name):
            return
        elif name in _REFUSED_BUILTINS:
            self._add(node, name, _REFUSED_BUILTINS[name])
        elif name not in _ALLOWED_BUILTINS:
            self._add(node, name, "other")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain = _chain(node)
        if chain and chain[0] in self.aliases:
            qualified = ".".join([self.aliases[chain[0]], *chain[1:]])
            shown = ".".join(chain)
            if not isinstance(node.ctx, ast.Load):
                self._add(node, shown, "module-change")
                return
            why = qualified_reason(qualified, self.vocabulary)
            self._add(node, shown if shown == qualified else f"{shown}, which is {qualified}",
                      why)
            return  # the whole chain is read at once
        if node.attr == "__init__" and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "super":
            self.generic_visit(node)
            return
        why = _attribute_reason(node.attr, self.vocabulary,
                                self.attributes if isinstance(node.ctx, ast.Load)
                                else self.attributes | {node.attr})
        if not isinstance(node.ctx, ast.Load) and why in ("other", "private") \
                and node.attr not in TENSOR_OPERATIONS:
            why = None  # a learner's own attribute, set
        self._add(node, _tensor_name(node.attr), why)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in {"getattr", "hasattr"} \
                and func.id not in self.own and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            self._literal.add(id(func))  # a name written out: read as the attribute it is
            attr = node.args[1].value
            self._add(node, f"{func.id}(..., {attr!r})", _attribute_reason(
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

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, complex) and not self.vocabulary.complex_numbers:
            self._add(node, repr(node.value), "complex")

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
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if item.name in _CLASS_HOOKS and item.name not in self.vocabulary.names:
                    self._add(item, f"{node.name}.{item.name}", "class-hook")
                elif item.name in _ARITHMETIC_METHODS and not self.vocabulary.engine:
                    self._add(item, f"{node.name}.{item.name}", "engine")
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
    import string

    if not (isinstance(receiver, ast.Constant) and isinstance(receiver.value, str)):
        return None
    try:
        return [f or "" for _, f, _, _ in string.Formatter().parse(receiver.value) if f]
    except ValueError:
        return None


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
    seen: set[tuple[str, str]] = set()
    found = []
    for f in reader.found:
        if (f.used, f.why) not in seen:
            seen.add((f.used, f.why))
            found.append(f)
    return found


# What says most comes first: autograd and estimates before a name merely not listed.
_ORDER = ("autograd", "estimate", "package", "introspection", "concurrency", "system",
          "library", "by-name", "dunder", "engine", "subclass", "class-hook", "complex",
          "private", "memory", "import", "module-change", "other")

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
    return (f"your code uses {listed}, which this exercise does not allow. An answer may use "
            "torch's public API, Python's plain builtins, math and bookkeeping modules, and "
            f"its own helper functions and classes. {REPORT}")
