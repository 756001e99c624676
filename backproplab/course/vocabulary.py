"""What a "by hand" answer may use: an allowlist, checked on the code itself.

A gradient worked out by hand needs tensor arithmetic and nothing else: the
operators, torch's tensor operations (``torch.where``, ``x.sum``,
``scatter_add_``, ``einsum``...), Python's plain builtins (``len``,
``range``, ``zip``...), ``math``, and the names the exercise hands over.
Everything else is a way around the derivation, so it is refused *by name*:
imports, introspection (``sys``, ``gc``, ``inspect``, frames), threads,
processes and subprocesses, torch's private parts (``torch._C``,
``torch._*``), ``torch.autograd``/``func``/``ops``/``fx``/``jit``/``compile``,
other numeric libraries (numpy, mpmath, sympy, ctypes), complex numbers, and
``eval``/``exec``/``getattr``/``__import__``. A name not known to be
arithmetic is refused too: this is a list of what is allowed, not of what is
forbidden.

Two readers use the same list:

- `check_answer` reads a function's compiled code (and that of the learner's
  own helpers it calls, closures and globals it reads) when the check calls it;
- `source_findings` reads submitted source, for ``backproplab audit``.

>>> import torch
>>> check_answer(lambda x: 2 * torch.cos(x).sum(dim=0))
[]
>>> check_answer(lambda x: torch.autograd.grad(x, x))
['torch.autograd.grad (autograd: the gradient is what the exercise asks you to derive)']
"""

from __future__ import annotations

import ast
import builtins
import dis
import math
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional
import torch.overrides

__all__ = [
    "ALLOWED_BUILTINS",
    "REPORT",
    "VocabularyRefused",
    "attribute_refusal",
    "check_answer",
    "name_refusal",
    "refusal_message",
    "source_findings",
]

REPORT = ("If this refusal is wrong (what you used is plain arithmetic), tell your instructor "
          "or open an issue on backproplab's tracker quoting this message.")

ALLOWED_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "divmod", "dict", "enumerate", "filter", "float", "int",
    "iter", "next", "isinstance", "len", "list", "map", "max", "min", "pow", "print", "range",
    "reversed", "round", "set", "slice", "sorted", "sum", "tuple", "zip", "frozenset", "str",
    "repr", "None",
    "True", "False", "Ellipsis", "NotImplementedError", "ValueError", "TypeError",
    "IndexError", "KeyError", "RuntimeError", "ZeroDivisionError",
})

# Words in a name that mark it as more than arithmetic, with the reason told.
_REFUSED_WORDS = (
    ("backward", "a backward formula of torch's: the gradient is what you derive"),
    ("grad", "autograd: the gradient is what the exercise asks you to derive"),
    ("hook", "autograd's hooks"),
    ("retain", "autograd's graph"),
    ("dual", "forward-mode autograd (dual numbers)"),
    ("complex", "complex numbers: the complex-step trick is a numerical estimate"),
    ("imag", "complex numbers: the complex-step trick is a numerical estimate"),
    ("real", "complex numbers: the complex-step trick is a numerical estimate"),
    ("conj", "complex numbers: the complex-step trick is a numerical estimate"),
    ("cfloat", "complex numbers: the complex-step trick is a numerical estimate"),
    ("cdouble", "complex numbers: the complex-step trick is a numerical estimate"),
    ("chalf", "complex numbers: the complex-step trick is a numerical estimate"),
    ("polar", "complex numbers: the complex-step trick is a numerical estimate"),
    ("fft", "complex numbers: the complex-step trick is a numerical estimate"),
    ("numpy", "numpy, another numeric library"),
    ("storage", "a tensor's raw memory"),
    ("data_ptr", "a tensor's raw memory"),
    ("dlpack", "a tensor's raw memory"),
    ("is_leaf", "autograd's graph"),
    ("output_nr", "autograd's graph"),
)
# Modules, by the first parts of their name, and why each is refused.
_REFUSED_MODULES = (
    ("torch.autograd", "autograd: the gradient is what the exercise asks you to derive"),
    ("torch.func", "torch.func transforms are autograd"),
    ("torch._functorch", "torch.func transforms are autograd"),
    ("torch.ops", "torch's own kernels, backward kernels among them"),
    ("torch.fx", "tracing a graph (make_fx) to replay autograd's backward"),
    ("torch.jit", "TorchScript, which can replay autograd's backward"),
    ("torch.compile", "torch.compile, which builds autograd's backward"),
    ("torch._dynamo", "torch.compile, which builds autograd's backward"),
    ("torch._inductor", "torch.compile, which builds autograd's backward"),
    ("torch._decomp", "torch's backward decompositions (its own backward formulas)"),
    ("torch._C", "a private part of torch (torch._C), where autograd's engine lives"),
    ("torch.fft", "complex numbers: the complex-step trick is a numerical estimate"),
    ("torch.", "a part of torch that is not plain tensor arithmetic"),
    ("sys", "introspection (sys): frames, the interpreter's switches"),
    ("gc", "introspection (gc): every object the kernel holds, the check's included"),
    ("inspect", "introspection (inspect): the frames of the check"),
    ("traceback", "introspection (traceback): the frames of the check"),
    ("threading", "a thread (the check watches the thread it runs your code in)"),
    ("_thread", "a thread (the check watches the thread it runs your code in)"),
    ("concurrent", "another thread or process"),
    ("multiprocessing", "another process"),
    ("subprocess", "a subprocess"),
    ("os", "the operating system (os): processes, files, the environment"),
    ("numpy", "numpy, another numeric library"),
    ("mpmath", "mpmath, another numeric library"),
    ("sympy", "sympy, symbolic differentiation"),
    ("scipy", "scipy, another numeric library"),
    ("jax", "jax, another autograd"),
    ("ctypes", "ctypes, raw memory and C calls"),
    ("backproplab", "backproplab's own tools (the check's helpers, not a derivation)"),
    ("builtins", "the builtins module"),
    ("importlib", "imports"),
    ("pickle", "serialised objects"),
    ("marshal", "serialised code"),
    ("decimal", "another number type (a numerical estimate in high precision)"),
    ("fractions", "another number type (a numerical estimate in exact fractions)"),
)
_BUILTIN_REASONS = {
    "eval": "runs code from a string", "exec": "runs code from a string",
    "compile": "compiles code from a string", "__import__": "imports by name",
    "getattr": "reads an attribute by name (getattr)", "setattr": "sets an attribute by name",
    "delattr": "deletes an attribute by name", "globals": "reads the module's globals()",
    "locals": "reads the frame's locals()", "vars": "reads a namespace (vars)",
    "open": "opens a file", "breakpoint": "starts the debugger", "type": "makes or reads types",
    "object": "makes objects", "super": "reaches a parent class", "complex": (
        "complex numbers: the complex-step trick is a numerical estimate"),
}
# torch names that are not overridable tensor functions but are plain values or makers.
_TORCH_EXTRAS = {
    "tensor", "as_tensor", "zeros", "ones", "full", "empty", "arange", "linspace", "logspace",
    "eye", "rand", "randn", "randint", "finfo", "iinfo", "Tensor", "Size", "Generator",
    "float16", "float32", "float64", "bfloat16", "half", "float", "double", "int8", "int16",
    "int32", "int64", "uint8", "long", "int", "short", "bool", "get_default_dtype",
    "promote_types", "result_type", "can_cast", "is_tensor", "is_floating_point", "numel",
    "broadcast_shapes", "no_grad", "inference_mode", "device", "inf", "nan", "pi", "e",
}
_FINFO = {"tiny", "max", "min", "eps", "bits", "resolution", "smallest_normal", "dtype"}
# Methods of Python's lists, dicts and strings: bookkeeping, not arithmetic on gradients.
_CONTAINERS = {"append", "extend", "insert", "pop", "get", "items", "keys", "values", "update",
               "setdefault", "count", "index", "copy", "sort", "reverse", "join", "format",
               "is_integer", "bit_length"}


def _names(functions: Any) -> set[str]:
    return {getattr(f, "__name__", "") for f in functions} - {""}


def _overridable() -> dict[Any, Any]:
    return torch.overrides.get_overridable_functions()


def _tensor_attributes() -> frozenset[str]:
    """Tensor methods and properties that are tensor operations (torch's own list of
    what a Tensor subclass can override), with the arithmetic operators' names."""
    found = _names(_overridable()[torch.Tensor])
    found |= {name for cls in torch.Tensor.__mro__ for name, value in vars(cls).items()
              if isinstance(value, property) or type(value).__name__ == "getset_descriptor"}
    found |= {"new_zeros", "new_ones", "new_full", "new_empty", "new_tensor"}
    return frozenset(n for n in found if not n.startswith("_")) | _FINFO | _CONTAINERS


def _module_names() -> dict[str, frozenset[str]]:
    """The public names of torch's tensor namespaces whose objects are tensor operations
    (in torch's own list of what a Tensor subclass can override), and math's functions."""
    table = _overridable()
    operations = {id(f) for functions in table.values() for f in functions}

    def operations_of(module: Any) -> set[str]:
        return {n for n in dir(module) if not n.startswith("_")
                and id(getattr(module, n, None)) in operations}

    return {
        "torch": frozenset(operations_of(torch) | _TORCH_EXTRAS),
        "torch.nn.functional": frozenset(operations_of(torch.nn.functional) | {"one_hot"}),
        "torch.linalg": frozenset(operations_of(torch.linalg)),
        "torch.special": frozenset(operations_of(torch.special)),
        "math": frozenset(n for n in dir(math) if not n.startswith("_")),
    }


TENSOR_ATTRIBUTES = _tensor_attributes()
MODULE_NAMES = _module_names()
_MODULE_OF = {torch: "torch", torch.nn.functional: "torch.nn.functional",
              torch.linalg: "torch.linalg", torch.special: "torch.special", math: "math",
              torch.nn: "torch.nn"}


def _word_refusal(name: str) -> str | None:
    last = name.rsplit(".", 1)[-1]
    if last.startswith("_"):
        return "a private or special attribute"
    for word, why in _REFUSED_WORDS:
        if word in last:
            return why
    return None


def attribute_refusal(attr: str) -> str | None:
    """Why ``something.attr`` is refused on a value (a tensor, a number), or None.

    >>> attribute_refusal("sum") is None, attribute_refusal("backward")
    (True, "a backward formula of torch's: the gradient is what you derive")
    """
    why = _word_refusal(attr)
    if why is not None:
        return why
    if attr in TENSOR_ATTRIBUTES:
        return None
    return "not a tensor operation known to be plain arithmetic"


def name_refusal(qualified: str) -> str | None:
    """Why the module-level name ``qualified`` (``torch.autograd.grad``) is refused, or None.

    >>> name_refusal("torch.where") is None, name_refusal("numpy.sin")
    (True, 'numpy, another numeric library')
    """
    module, _, last = qualified.rpartition(".")
    allowed = MODULE_NAMES.get(module)
    if allowed is not None and last in allowed and _word_refusal(last) is None:
        return None
    if qualified in MODULE_NAMES:  # the module itself, e.g. `F` read as a value
        return None
    for prefix, why in _REFUSED_MODULES:
        if qualified == prefix or qualified.startswith(prefix + ".") or (
                prefix.endswith(".") and qualified.startswith(prefix)):
            if prefix == "torch.":  # no part of its own: the name says what it is
                return _word_refusal(last) or why
            return why
    return _word_refusal(qualified) or "not known to be plain arithmetic"


_VAGUE = ("not known to be plain arithmetic", "not plain tensor arithmetic",
          "not a tensor operation known to be plain arithmetic")


def refusal_message(found: list[str]) -> str:
    """The words of a refusal: what was used (what says most first: autograd, threads,
    imports before a name merely not on the list), what is allowed, how to report a
    wrong refusal."""
    found = sorted(found, key=lambda f: any(v in f for v in _VAGUE))  # stable: code order
    listed = "; ".join(found[:4]) + ("; ..." if len(found) > 4 else "")
    return (f"this exercise asks for the gradient by hand, but your code uses {listed}. A "
            "by-hand answer may use tensor arithmetic, torch's tensor operations (torch.where, "
            "x.sum, scatter_add_, einsum, ...), Python's plain builtins, math, its own helper "
            f"functions and the names the exercise hands over. {REPORT}")


class VocabularyRefused(AssertionError):
    """A by-hand answer used a name outside the by-hand vocabulary."""


# --------------------------------------------------------------------------
# Compiled code: what the check reads when it calls the answer
# --------------------------------------------------------------------------

_LOADS = {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF"}
_ATTRS = {"LOAD_ATTR", "LOAD_METHOD"}
# code object -> (chains of names it reads, constant refusals); code never changes.
_CACHE: dict[types.CodeType, tuple[list[tuple[str, tuple[str, ...]]], list[str]]] = {}


def _chains(code: types.CodeType) -> tuple[list[tuple[str, tuple[str, ...]]], list[str]]:
    """Each ``base.attr.attr`` read by ``code`` and its nested code as (kind, names), where
    kind is "global" (base is a global or closure name) or "value" (base is a local); and
    what its constants or imports use that is refused."""
    if code in _CACHE:
        return _CACHE[code]
    chains: list[tuple[str, tuple[str, ...]]] = []
    refused: list[str] = []
    current: list[str] | None = None
    kind = "value"
    for ins in dis.get_instructions(code):
        if ins.opname in _ATTRS and current is not None:
            current.append(ins.argval)
            continue
        if current:
            chains.append((kind, tuple(current)))
        current = None
        if ins.opname in _LOADS:
            current, kind = [ins.argval], "global"
        elif ins.opname in _ATTRS:  # an attribute of a value computed on the stack
            chains.append(("value", ("", ins.argval)))
        elif ins.opname in {"STORE_ATTR", "DELETE_ATTR"}:
            chains.append(("value", ("", ins.argval)))
        elif ins.opname == "IMPORT_NAME":
            refused.append(f"import {ins.argval} (imports are not part of a by-hand answer: "
                           f"{name_refusal(ins.argval)})")
        elif ins.opname in {"STORE_GLOBAL", "DELETE_GLOBAL"}:
            refused.append(f"global {ins.argval} (changes a global name)")
        elif ins.opname == "LOAD_CONST" and isinstance(ins.argval, complex):
            refused.append(f"{ins.argval!r} (complex numbers: the complex-step trick is a "
                           "numerical estimate)")
    if current:
        chains.append((kind, tuple(current)))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            inner_chains, inner_refused = _chains(const)
            chains += inner_chains
            refused += inner_refused
    _CACHE[code] = (chains, refused)
    return chains, refused


def _lookup(fn: types.FunctionType, name: str) -> tuple[bool, Any]:
    """The value of global or closure ``name`` as ``fn`` sees it now: (found, value)."""
    code = fn.__code__
    if fn.__closure__ and name in code.co_freevars:
        try:
            return True, fn.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:  # an empty cell
            return False, None
    if name in fn.__globals__:
        return True, fn.__globals__[name]
    if hasattr(builtins, name):
        return True, getattr(builtins, name)
    return False, None


def _is_learners(obj: Any) -> bool:
    """A plain Python function written by the learner (not a library's)."""
    if not isinstance(obj, types.FunctionType):
        return False
    if obj.__code__.co_filename.startswith("<"):
        return True  # typed in (a doctest, exec'd text): read it, whatever module it claims
    module = obj.__module__ or ""
    return module.split(".")[0] not in {"torch", "backproplab", "numpy", "math", "functools"}


_DATA = (int, float, bool, str, bytes, type(None), torch.Tensor, torch.dtype, torch.Size,
         torch.finfo, torch.iinfo, torch.device, slice, range, type(Ellipsis))


def _is_data(value: Any, depth: int = 0) -> bool:
    """Plain numbers, tensors and containers of them: data an answer may read."""
    if isinstance(value, _DATA):
        return type(value) is torch.Tensor if isinstance(value, torch.Tensor) else True
    if isinstance(value, (tuple, list, set, frozenset)) and depth < 3:
        return all(_is_data(v, depth + 1) for v in list(value)[:50])
    if isinstance(value, dict) and depth < 3:
        return all(_is_data(k, depth + 1) and _is_data(v, depth + 1)
                   for k, v in list(value.items())[:50])
    return False


def _value_refusal(name: str, value: Any, attrs: tuple[str, ...],
                   visit: Callable[[types.FunctionType], None]) -> str | None:
    """Why reading ``name.attrs`` refers to something refused, given ``name``'s value."""
    shown = ".".join((name, *attrs))
    if isinstance(value, types.ModuleType):
        qualified = ".".join((_MODULE_OF.get(value, value.__name__), *attrs))
        why = name_refusal(qualified)
        if why is None:
            return None
        if shown == qualified:
            return f"{shown} ({why})"
        return f"{shown}, which is {qualified} ({why})"
    if value is builtins.__dict__.get(name) and name in dir(builtins):
        if name in ALLOWED_BUILTINS:
            return _attrs_refusal(shown, attrs)
        return f"{name} ({_BUILTIN_REASONS.get(name, 'not a plain builtin')})"
    if _is_learners(value):
        visit(value)
        return _attrs_refusal(shown, attrs)
    if _is_data(value):
        return _attrs_refusal(shown, attrs)
    if isinstance(value, type) and issubclass(value, torch.Tensor) and value is not torch.Tensor:
        return f"{shown} (a subclass of torch.Tensor)"
    for module, qualified_module in _MODULE_OF.items():
        own = str(getattr(value, "__name__", ""))
        if own and getattr(module, own, None) is value:
            why = name_refusal(f"{qualified_module}.{own}")
            return _attrs_refusal(shown, attrs) if why is None else f"{shown} ({why})"
    owner = getattr(value, "__module__", None) or type(value).__module__
    own = getattr(value, "__qualname__", None) or type(value).__qualname__
    why = name_refusal(f"{owner}.{own}") or "not known to be plain arithmetic"
    return f"{shown}, a {type(value).__name__} from {owner} ({why})"


def _attrs_refusal(shown: str, attrs: tuple[str, ...]) -> str | None:
    for attr in attrs:
        why = attribute_refusal(attr)
        if why is not None:
            return f"{shown} ({why})"
    return None


def _tensor_name(attrs: tuple[str, ...]) -> str:
    """``Tensor.backward()`` for a method of tensors, ``Tensor.grad`` for a property, and
    ``.start`` for what no tensor has: what an attribute read from a value most likely is."""
    last = attrs[-1]
    if not hasattr(torch.Tensor, last):
        return "." + ".".join(attrs)
    method = callable(getattr(torch.Tensor, last)) and not isinstance(
        getattr(torch.Tensor, last), type)
    return "Tensor." + ".".join(attrs) + ("()" if method else "")


def _walk(fn: types.FunctionType, found: list[str], seen: set[Any]) -> None:
    if (fn.__code__, id(fn)) in seen:
        return
    seen.add((fn.__code__, id(fn)))
    chains, refused = _chains(fn.__code__)
    found.extend(r for r in refused if r not in found)

    def visit(helper: types.FunctionType) -> None:
        if (helper.__code__, id(helper)) not in seen:
            _walk(helper, found, seen)

    for kind, names in chains:
        if kind == "value":
            why = _attrs_refusal(_tensor_name(names[1:]), names[1:])
        else:
            known, value = _lookup(fn, names[0])
            why = (_value_refusal(names[0], value, names[1:], visit) if known
                   else _attrs_refusal(".".join(names), names[1:]))
        if why is not None and why not in found:
            found.append(why)


def check_answer(answer: Callable[..., Any]) -> list[str]:
    """What ``answer`` (and the learner's helpers it reaches) uses outside the by-hand
    vocabulary, each with why; [] when everything is allowed. Code objects are read once.

    >>> def helper(t):
    ...     import numpy
    ...     return t
    >>> check_answer(lambda x: helper(x) * 2)  # doctest: +ELLIPSIS
    ['import numpy (imports are not part of a by-hand answer: numpy, another numeric library)']
    """
    found: list[str] = []
    target = answer
    if not isinstance(target, types.FunctionType):
        target = getattr(answer, "__func__", None) or vars(type(answer)).get("__call__")
        if not isinstance(target, types.FunctionType):
            return [f"{type(answer).__name__} (an answer must be a plain Python function)"]
    _walk(target, found, set())
    return found


# --------------------------------------------------------------------------
# Source: what the audit reads in a submitted notebook
# --------------------------------------------------------------------------

KNOWN_ALIASES = {"torch": "torch", "F": "torch.nn.functional", "math": "math",
                 "bl": "backproplab", "backproplab": "backproplab", "nn": "torch.nn"}


def _dotted(node: ast.AST) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _parameters(tree: ast.AST) -> set[str]:
    return {a.arg for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.Lambda, ast.AsyncFunctionDef))
            for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}


def _nudged(call: ast.Call, params: set[str]) -> bool:
    """``f(x + h)``: a function of the learner's called at a parameter moved by a step."""
    func = _dotted(call.func)
    if func is None or func[0] in KNOWN_ALIASES or len(func) > 1:
        return False
    for arg in call.args:
        if isinstance(arg, ast.BinOp) and isinstance(arg.op, (ast.Add, ast.Sub)):
            sides = (arg.left, arg.right)
            if any(isinstance(s, ast.Name) and s.id in params for s in sides):
                return True
    return False


def _chain_findings(node: ast.Attribute, imported: set[str]) -> Iterator[str]:
    """What the outermost ``a.b.c`` of a chain reads that is refused (nothing more for a
    name the cell imports: the import is listed)."""
    attrs: list[str] = []
    base: ast.AST = node
    while isinstance(base, ast.Attribute):
        attrs.append(base.attr)
        base = base.value
    attrs.reverse()
    if isinstance(base, ast.Name) and base.id in imported:
        return
    if isinstance(base, ast.Name) and base.id in KNOWN_ALIASES:
        why = name_refusal(".".join((KNOWN_ALIASES[base.id], *attrs)))
        if why is not None:
            yield f"{base.id}.{'.'.join(attrs)} ({why})"
        return
    for attr in attrs:
        why = attribute_refusal(attr)
        if why is not None:
            yield f".{attr} ({why})"


def _node_findings(node: ast.AST, params: set[str], imported: set[str]) -> Iterator[str]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
        yield f"imports {module} ({name_refusal(module or '')})"
    elif isinstance(node, ast.Attribute):
        yield from _chain_findings(node, imported)
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        if hasattr(builtins, node.id) and node.id not in ALLOWED_BUILTINS:
            yield f"{node.id} ({_BUILTIN_REASONS.get(node.id, 'not a plain builtin')})"
    elif isinstance(node, ast.Constant) and isinstance(node.value, complex):
        yield f"{node.value!r} (complex numbers: the complex-step trick is a numerical estimate)"
    elif isinstance(node, ast.ClassDef):
        bases = [".".join(_dotted(b) or ["?"]) for b in node.bases]
        yield f"class {node.name}({', '.join(bases)}) (a class of its own: a by-hand answer " \
              "is a function, and a Tensor subclass can fool a comparison)"
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        yield f"global {', '.join(node.names)} (changes a name outside the function)"
    elif isinstance(node, ast.Call) and _nudged(node, params):
        yield ("calls a function at a nudged argument (f(x + h)): a numerical estimate "
               "(finite differences), refused even where it comes out exact")


def source_findings(source: str) -> list[tuple[int, str]]:
    """(line, what) for each use outside the by-hand vocabulary in ``source``.

    >>> source_findings("def f(x):\\n    import numpy\\n    return numpy.cos(x)")
    [(2, 'imports numpy (numpy, another numeric library)')]
    """
    tree = ast.parse(source)
    params = _parameters(tree)
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
                if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in inner:
            continue  # part of a longer a.b.c, read as a whole
        for what in _node_findings(node, params, imported):
            found.append((getattr(node, "lineno", 0), what))
    return sorted(set(found))


# Checked by `integrity.verify` before a grade is given (at the end: the snapshot is of
# the whole module, taken as soon as it exists).
from .. import integrity  # noqa: E402

integrity.protect_module(__name__)
