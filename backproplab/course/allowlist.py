"""The allowlist: which names an answer may use, and why each other name is refused.

`backproplab.course.rules` walks an answer's syntax tree; for every module name,
attribute or builtin it meets it asks this module, which answers with a reason
key (``"autograd"``, ``"system"``, ...) or None. Three kinds of exercise:

- **by hand** (`BY_HAND`): tensor arithmetic only: torch's tensor operations and
  makers, ``torch.nn.functional``, ``torch.linalg``, ``torch.special``, ``math``,
  bookkeeping modules (``collections``, ``functools``, ``heapq``...);
- **method** (`METHOD`): besides, an explicit list of torch's modules a method
  answer works with (``torch.autograd``, ``torch.nn``, ``torch.optim``,
  ``torch.func``, ``torch.utils.checkpoint``...), never "whatever has no
  underscore": ``torch.load`` or ``torch.utils.cpp_extension`` are not on it;
- an exercise adds what it needs with ``names`` (``"torch.distributed."``).

A name is judged by what it is, not only by how it is spelt: ``torch.os`` is the
``os`` module and ``typing.sys`` is ``sys`` (`resolve`), so a chain through a
module that happens to import another reaches no further than the other's name.

>>> qualified_reason("torch.where", BY_HAND), qualified_reason("torch.os.system", METHOD)
(None, 'system')
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import math
import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional
import torch.overrides

__all__ = ["BY_HAND", "METHOD", "NEVER_OWN", "Vocabulary", "attribute_reason", "builtin_reason",
           "is_dunder", "is_module", "qualified_reason", "resolve"]


@dataclass(frozen=True)
class Vocabulary:
    """What one exercise's answer may use.

    ``by_hand``: tensor arithmetic only (else the torch modules of a method exercise
    too); ``names``: qualified names (or prefixes ending in ".") allowed beyond the
    kind's own, such as ``"heapq"`` or ``"torch.distributed."``, and class hooks the
    answer may define (``"__torch_dispatch__"``, for a dispatch mode); ``engine``: classes
    may overload arithmetic; ``complex_numbers``: complex literals and dtypes.
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

# --------------------------------------------------------------------------
# Words inside names
# --------------------------------------------------------------------------

_WORDS = (("backward", "autograd"), ("grad", "autograd"), ("hook", "autograd"),
          ("retain", "autograd"), ("is_leaf", "autograd"), ("output_nr", "autograd"),
          ("dual", "autograd"), ("complex", "complex"), ("imag", "complex"),
          ("real", "complex"), ("conj", "complex"), ("cfloat", "complex"),
          ("cdouble", "complex"), ("chalf", "complex"), ("polar", "complex"),
          ("fft", "complex"), ("numpy", "library"), ("storage", "memory"),
          ("data_ptr", "memory"), ("dlpack", "memory"), ("as_subclass", "subclass"))
# Explicit entries come before the word rules: these are allowed though a word matches.
_ALLOWED_DESPITE_WORDS = {"no_grad", "inference_mode", "is_grad_enabled", "set_grad_enabled",
                          "is_complex"}  # a question, asked to refuse complex inputs
# Flags a by-hand answer may read (``if x.requires_grad: x = x.detach()``), never set.
_READABLE_FLAGS = {"requires_grad", "is_leaf"}
# torch.gradient: finite differences along a dimension.
_ESTIMATES = {"gradient", "get_numerical_jacobian", "get_numerical_jacobian_wrt_specific_input",
              "_get_numerical_jacobian", "numerical_grad"}


def _word(name: str) -> str | None:
    if name in _ALLOWED_DESPITE_WORDS:
        return None
    if name in _ESTIMATES:
        return "estimate"
    return next((why for word, why in _WORDS if word in name), None)


def _arithmetic_word(name: str, vocabulary: Vocabulary) -> str | None:
    why = _word(name)
    return None if why == "complex" and vocabulary.complex_numbers else why


# --------------------------------------------------------------------------
# Tensor arithmetic: what a by-hand answer may take from torch
# --------------------------------------------------------------------------


def _overridable() -> tuple[dict, set[int]]:
    table = torch.overrides.get_overridable_functions()
    return table, {id(f) for functions in table.values() for f in functions}


def _tensor_operations() -> frozenset[str]:
    """Tensor methods and properties that torch lists as overridable tensor operations."""
    table, _ = _overridable()
    found = {getattr(f, "__name__", "") for f in table[torch.Tensor]}
    found |= {name for cls in torch.Tensor.__mro__ for name, value in vars(cls).items()
              if isinstance(value, property) or type(value).__name__ == "getset_descriptor"}
    # makers, and shape methods torch writes in Python without listing them (unflatten is
    # torch.unflatten, which it lists)
    found |= {"new_zeros", "new_ones", "new_full", "new_empty", "new_tensor", "unflatten",
              "stride"}
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
    "is_grad_enabled", "set_grad_enabled", "device", "inf", "nan", "pi", "e", "manual_seed",
    "sparse_coo_tensor", "vander", "triu_indices", "tril_indices", "asarray", "scalar_tensor",
    # memory formats and layouts, handed to makers (zeros_like(x, memory_format=...))
    "contiguous_format", "preserve_format", "channels_last", "channels_last_3d", "strided",
}
TENSOR_OPERATIONS = _tensor_operations()
# Per module: the names a by-hand answer may take from it.
ARITHMETIC = {
    "torch": _namespace(torch, _TORCH_EXTRAS),
    # one_hot, and the activations torch writes as plain wrappers it does not list as
    # operations (F.sigmoid is x.sigmoid()), and the in-place forms of listed ones.
    "torch.nn.functional": _namespace(torch.nn.functional, {
        "one_hot", "sigmoid", "tanh", "hardsigmoid", "hardswish", "relu_", "elu_", "celu_",
        "selu_", "leaky_relu_", "hardtanh_", "threshold_"}),
    # modules without parameters around an operation of torch.nn.functional (nn.Softmax
    # is F.softmax, nn.Unfold F.unfold), and Module, the base of a learner's own layer
    "torch.nn": frozenset({"Module", "Identity", "Fold", "Unfold", "Flatten", "Unflatten",
                           "PixelShuffle", "PixelUnshuffle", "ChannelShuffle",
                           "CosineSimilarity", "PairwiseDistance"}
                          | {n for n, v in vars(torch.nn).items() if isinstance(v, type)
                             and v.__module__.rsplit(".", 1)[-1] in ("activation", "padding",
                                                                    "pooling")
                             and n not in ("MultiheadAttention", "PReLU")}),
    "torch.linalg": _namespace(torch.linalg),
    "torch.special": _namespace(torch.special),
    "math": frozenset(n for n in dir(math) if not n.startswith("_")),
}
# Any answer: the device boilerplate and a warning of its own.
_ANY_ANSWER = {"torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.empty_cache",
               "torch.backends.mps.is_available", "warnings.warn", "warnings.catch_warnings",
               "warnings.simplefilter", "warnings.filterwarnings", "types.SimpleNamespace"}

# --------------------------------------------------------------------------
# A method answer: torch's modules it works with, by name
# --------------------------------------------------------------------------

# Names of torch itself beyond tensor arithmetic.
_METHOD_TORCH = {
    "enable_grad", "is_inference_mode_enabled", "get_rng_state", "set_rng_state",
    "initial_seed", "seed", "vmap", "from_numpy",
    "_check",  # a fake's shape checks, as torch.library's own examples write them
} | {n for n, v in vars(torch).items() if isinstance(v, torch.dtype)}
# Modules (and everything in them) a method answer may use.
_METHOD_MODULES = ("torch.nn", "torch.optim", "torch.autograd", "torch.func", "torch.linalg",
                   "torch.special", "torch.random", "torch.fft", "torch.testing",
                   "torch.utils.checkpoint", "torch.utils.hooks")
# Attributes of autograd's nodes and tensors a method answer may read though private:
# a node's saved tensors, its metadata and sequence number, a tensor's version counter.
_NODE_PRIVATE_PREFIXES = ("_saved_", "_raw_saved_")
_NODE_PRIVATE = {"_input_metadata", "_sequence_nr", "_version", "_base", "_is_view"}

# --------------------------------------------------------------------------
# What is never part of an answer
# --------------------------------------------------------------------------

# Bookkeeping modules: safe for any answer, except the parts named below.
BOOKKEEPING = {"collections", "itertools", "functools", "operator", "heapq", "bisect",
               "typing", "dataclasses", "enum", "numbers", "copy", "statistics", "string",
               "math", "random", "contextlib", "abc", "re", "pprint", "time", "__future__"}
_BOOKKEEPING_REFUSED = {
    # the working folder is the operating system's
    "contextlib.chdir": "system",
    # attributes by name
    "operator.attrgetter": "by-name", "operator.methodcaller": "by-name",
    "string.Formatter": "by-name",
    # typing evaluates string annotations and forward references with eval
    "typing.get_type_hints": "runs-code", "typing.ForwardRef": "runs-code",
}
# Methods of Python's lists, dicts, sets and strings, and of torch.finfo.
CONTAINERS = {"append", "extend", "insert", "pop", "get", "items", "keys", "values", "update",
              "setdefault", "count", "index", "copy", "sort", "reverse", "join", "split",
              "strip", "startswith", "endswith", "replace", "lower", "upper", "add",
              "discard", "remove", "clear", "is_integer", "bit_length", "tiny", "max",
              "min", "eps", "bits", "resolution", "smallest_normal", "popleft",
              "appendleft", "most_common", "fromkeys", "casefold", "title", "capitalize",
              "lstrip", "rstrip", "rsplit", "partition", "rpartition", "splitlines",
              "removeprefix", "removesuffix", "find", "rfind", "isdigit", "isalpha",
              "isspace", "union", "intersection", "difference", "issubset", "issuperset",
              "isdisjoint", "format", "start", "stop", "step", "register", "total",
              "rotate", "maxlen", "move_to_end", "default_factory", "as_integer_ratio",
              "cache_clear", "_replace", "_asdict", "_fields", "_make", "ljust", "rjust",
              "center", "zfill", "isalnum", "isupper", "islower", "isnumeric", "isdecimal",
              "isidentifier", "swapcase", "expandtabs", "popitem", "symmetric_difference",
              "difference_update", "intersection_update", "symmetric_difference_update"} | {
    # the fields of torch's named-tuple results (frexp's mantissa, slogdet's logabsdet)
    f for kind in vars(torch.return_types).values() if isinstance(kind, type)
    for f, member in vars(kind).items() if type(member).__name__ == "member_descriptor"
    and "_" not in f}
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
    "NotImplemented",
    # every exception and warning class: raised, caught or warned with
    *(name for name, value in vars(builtins).items()
      if isinstance(value, type) and issubclass(value, BaseException)),
})
REFUSED_BUILTINS = {
    "eval": "runs-code", "exec": "runs-code", "compile": "runs-code", "__import__": "import",
    "getattr": "by-name", "setattr": "by-name", "delattr": "by-name", "hasattr": "by-name",
    "globals": "introspection", "locals": "introspection", "vars": "introspection",
    "dir": "introspection", "open": "system", "input": "system", "breakpoint": "introspection",
    "memoryview": "memory", "complex": "complex",
}
# Modules by the first parts of their name: why each is refused.
_REFUSED_MODULES = (
    ("torch._C", "private"), ("torch.autograd", "autograd"), ("torch.func", "autograd"),
    ("torch._functorch", "autograd"), ("torch.ops", "kernels"), ("torch.fx", "autograd"),
    ("torch.nn.grad", "autograd"),
    ("torch.jit", "autograd"), ("torch.compile", "autograd"), ("torch._dynamo", "autograd"),
    ("torch._inductor", "autograd"), ("torch._decomp", "autograd"), ("torch.fft", "complex"),
    ("torch.load", "runs-code"), ("torch.utils.cpp_extension", "runs-code"),
    ("torch.hub", "runs-code"), ("torch.package", "runs-code"),
    ("torch.multiprocessing", "concurrency"),
    ("sys", "introspection"), ("gc", "introspection"), ("inspect", "introspection"),
    ("traceback", "introspection"), ("types", "introspection"), ("dis", "introspection"),
    ("threading", "concurrency"), ("_thread", "concurrency"), ("concurrent", "concurrency"),
    ("multiprocessing", "concurrency"), ("asyncio", "concurrency"),
    ("subprocess", "system"), ("os", "system"), ("posix", "system"), ("pathlib", "system"),
    ("io", "system"), ("shutil", "system"), ("socket", "system"), ("signal", "system"),
    ("atexit", "system"), ("tempfile", "system"), ("numpy", "library"), ("mpmath", "library"),
    ("sympy", "library"), ("scipy", "library"), ("jax", "library"), ("decimal", "library"),
    ("fractions", "library"), ("ctypes", "memory"), ("backproplab", "package"),
    ("builtins", "introspection"), ("importlib", "import"), ("pickle", "runs-code"),
    ("marshal", "runs-code"), ("runpy", "runs-code"), ("code", "runs-code"),
    ("codeop", "runs-code"), ("unittest", "introspection"), ("IPython", "introspection"),
)
_REFUSED_TOPS = {name for name, _ in _REFUSED_MODULES if "." not in name}
# Attribute names refused on any value, whoever defines them: the modules and entry points
# that reach around an answer (``x.sys``, ``x.exec``), whatever ``x`` turns out to be.
_REFUSED_ATTRIBUTES = {
    **{name: why for name, why in _REFUSED_MODULES if "." not in name
       and why not in ("library", "complex") and name not in ("types", "io", "signal", "code")},
    "exec": "runs-code", "system": "system", "popen": "system", "import_module": "import",
    "load_inline": "runs-code", "getattr": "by-name", "setattr": "by-name",
    "delattr": "by-name", "globals": "introspection", "locals": "introspection",
    "vars": "introspection", "open": "system", "breakpoint": "introspection",
}
# Refused on any value, yet everyday words for a learner's own state (``self.open``, a
# gate's flag; ``self.system``, a system of equations; ``self.vars``, a formula's
# variables): theirs once their own class sets them. Whatever the name, the grade's sandbox
# refuses opening files and starting processes.
_EVERYDAY = frozenset({"open", "system", "vars", "os", "inspect"})
# Names a learner's own attribute may not carry: a class attribute named ``sys`` would
# otherwise open ``value.sys`` on any value.
NEVER_OWN = (frozenset(_REFUSED_ATTRIBUTES) - _EVERYDAY) | _INTROSPECTION | {"modules", "numpy"}
# Classes: the operators a home-made engine overloads, and the hooks that change objects.
ARITHMETIC_METHODS = {
    f"__{op}__" for base in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                             "matmul", "lshift", "rshift", "and", "or", "xor", "divmod")
    for op in (base, "r" + base, "i" + base)} | {"__neg__", "__pos__", "__abs__", "__invert__"}
# What any class may define, set or read: how its objects print, compare, index, iterate.
CLASS_SAFE = {"__init__", "__call__", "__repr__", "__str__", "__len__", "__iter__", "__next__",
              "__getitem__", "__setitem__", "__contains__", "__eq__", "__ne__", "__hash__",
              "__bool__", "__enter__", "__exit__", "__post_init__", "__lt__", "__le__",
              "__gt__", "__ge__", "__float__", "__int__", "__index__", "__slots__",
              "__missing__", "__reversed__",
              # names and text, read to tell objects apart (``type(node).__name__``)
              "__name__", "__qualname__", "__doc__", "__module__"}
CLASS_HOOKS = {"__torch_function__", "__torch_dispatch__", "__getattr__", "__getattribute__",
               "__setattr__", "__delattr__", "__reduce__", "__reduce_ex__", "__del__",
               "__init_subclass__", "__class_getitem__", "__set_name__", "__get__", "__set__",
               "__instancecheck__", "__subclasscheck__", "__new__", "__prepare__",
               "__getstate__", "__setstate__", "__copy__", "__deepcopy__", "__match_args__"}

# --------------------------------------------------------------------------
# A name, resolved to what it is
# --------------------------------------------------------------------------

_TORCH = {"torch", "functorch"}  # and functorch, the name torch.func's compile tools go by


def is_dunder(name: str) -> bool:
    """Whether ``name`` is spelt like Python's machinery (``__self__``, ``__code__``)."""
    return name.startswith("__") and name.endswith("__") and len(name) > 4


@functools.lru_cache(maxsize=8192)
def resolve(qualified: str) -> str:
    """``qualified`` with each module on the way named by what it is: a module that imports
    another lends it no name of its own (``torch.os.system`` is ``os.system``, ``enum.bltns``
    is ``builtins``). Only modules already loaded are looked into, and only their own
    namespace (no module ``__getattr__`` runs); the rest is kept as written.

    >>> resolve("torch.nn.functional.torch.load"), resolve("typing.sys.modules")
    ('torch.load', 'sys.modules')
    """
    parts = qualified.split(".")
    module = sys.modules.get(parts[0])
    if not isinstance(module, types.ModuleType):
        return qualified
    for i, part in enumerate(parts[1:], start=1):
        held = vars(module).get(part)
        if held is None:
            held = sys.modules.get(f"{module.__name__}.{part}")
        if not isinstance(held, types.ModuleType):
            return ".".join([module.__name__, *parts[i:]])
        module = held
    return module.__name__


def is_module(qualified: str) -> bool:
    """Whether ``qualified`` names a module (a loaded one, or one of the refused list)."""
    canonical = resolve(qualified)
    if isinstance(sys.modules.get(canonical), types.ModuleType):
        return True
    return "." not in canonical and (canonical in BOOKKEEPING or canonical in _REFUSED_TOPS)


def _refused_prefix(qualified: str) -> str | None:
    return next((why for prefix, why in _REFUSED_MODULES
                 if qualified == prefix or qualified.startswith(prefix + ".")), None)


def _under(qualified: str, prefixes: Iterable[str]) -> bool:
    return any(qualified == n or qualified.startswith(n if n.endswith(".") else n + ".")
               for n in prefixes)


def _path_of_allowed(qualified: str, vocabulary: Vocabulary) -> bool:
    """A module on the way to an allowed name (``torch.utils`` for torch.utils.checkpoint,
    ``sys`` where an exercise allows ``sys.setrecursionlimit``): it may be imported."""
    allowed = [*_ANY_ANSWER, *vocabulary.names, *([] if vocabulary.by_hand else _METHOD_MODULES)]
    return any(n.startswith(qualified + ".") for n in allowed)


def qualified_reason(qualified: str, vocabulary: Vocabulary) -> str | None:
    """Why a module or a name read from one (``torch.autograd.grad``) is refused, or None.
    Both the name as written and the name of what it is must be allowed.

    >>> qualified_reason("torch.where", BY_HAND), qualified_reason("numpy.sin", BY_HAND)
    (None, 'library')
    """
    canonical = resolve(qualified)
    whys = [_judge(canonical, vocabulary)]
    if canonical != qualified:
        whys.append(_judge(qualified, vocabulary))
    refused = [w for w in whys if w is not None]
    if not refused:
        return None
    vague = ("other", "unlisted")
    return next((w for w in refused if w not in vague), refused[0])


def _parts_reason(parts: list[str], vocabulary: Vocabulary) -> str | None:
    """Why any attribute along a chain read from a module is refused (its dunders, private
    parts, or names such as ``sys``), or None."""
    for part in parts:
        why = attribute_reason(part, vocabulary, table=False)
        if why is not None:
            return why
    return None


def _beyond(qualified: str, names: Iterable[str]) -> list[str]:
    """The attributes of ``qualified`` past the longest name the exercise allows that holds
    it (a private module the exercise names, ``torch.utils._python_dispatch``, is allowed
    with its underscore); past the top module otherwise."""
    held = [n.rstrip(".") for n in names
            if qualified == n.rstrip(".") or qualified.startswith(n.rstrip(".") + ".")]
    return qualified.split(".")[max((n.count(".") + 1 for n in held), default=1):]


def _judge(qualified: str, vocabulary: Vocabulary) -> str | None:
    if _under(qualified, vocabulary.names) or qualified in _ANY_ANSWER \
            or _path_of_allowed(qualified, vocabulary):
        return _parts_reason(_beyond(qualified, vocabulary.names), vocabulary)
    if qualified in _BOOKKEEPING_REFUSED:
        return _BOOKKEEPING_REFUSED[qualified]
    parts = qualified.split(".")
    module, _, last = qualified.rpartition(".")
    if parts[0] in BOOKKEEPING:
        return _parts_reason(parts[1:], vocabulary)
    if last in _ESTIMATES:
        return "estimate"
    if vocabulary.by_hand:
        if qualified in ARITHMETIC or qualified in {"torch", "torch.nn", "torch.Tensor"}:
            return None  # the module itself, read as a name (``F``)
        held = getattr(torch, module[len("torch."):], None) if module.startswith("torch.") \
            else None
        if module == "torch.Tensor" or isinstance(held, torch.dtype):
            # a tensor's method (torch.Tensor.sum), a dtype's attribute (torch.float32.itemsize)
            return attribute_reason(last, vocabulary, frozenset())
        if _listed(last, ARITHMETIC.get(module, ())):
            return _arithmetic_word(last, vocabulary)
        return (_refused_prefix(qualified) or _parts_reason(parts[1:], vocabulary)
                or _word(last) or "other")
    if parts[0] in _TORCH:
        return _method_torch(qualified, vocabulary)
    return _refused_prefix(qualified) or "other"


def _method_torch(qualified: str, vocabulary: Vocabulary) -> str | None:
    """A method answer's torch name: on the list, or refused with the most exact reason."""
    parts = qualified.split(".")
    if parts[0] == "functorch" and len(parts) > 1 and hasattr(torch.func, parts[1]):
        parts = ["torch", "func", *parts[1:]]  # torch.func's transforms by their old name
        qualified = ".".join(parts)
    if qualified == "torch" or (parts[0] == "torch" and len(parts) > 1 and (
            _listed(parts[1], ARITHMETIC["torch"]) or parts[1] in _METHOD_TORCH)):
        return _parts_reason(parts[2:], vocabulary)  # a listed name, then what is read on it
    if _under(qualified, _METHOD_MODULES) and not _under(qualified, ("torch.nn.grad",)):
        return _parts_reason(parts[1:], vocabulary)
    if qualified.startswith("torch.ops.") or qualified == "torch.ops":
        return "kernels"
    private = any(p.startswith("_") for p in parts)
    return _refused_prefix(qualified) or ("private" if private else "unlisted")


def _listed(name: str, names: Iterable[str]) -> bool:
    """Whether ``name`` or the operation it does in place (``sigmoid_``) is in ``names``."""
    return name in names or name.removesuffix("_") in names


def builtin_reason(name: str) -> str | None:
    """Why a builtin read by name is refused (``eval``), or None (``len``)."""
    if name in REFUSED_BUILTINS:
        return REFUSED_BUILTINS[name]
    return None if name in _ALLOWED_BUILTINS else "other"


def attribute_reason(attr: str, vocabulary: Vocabulary, own: frozenset[str] = frozenset(),
                     *, reading: bool = True, table: bool = True) -> str | None:
    """Why ``value.attr`` is refused on a value (a tensor, a number, an object), or None.

    ``own``: attribute names the answer's own classes and objects define (they open what
    is otherwise unknown, never what is refused for a reason of its own); ``reading``:
    a read rather than a write; ``table``: judge by the by-hand table of tensor operations.

    >>> attribute_reason("sum", BY_HAND), attribute_reason("__self__", METHOD)
    (None, 'dunder')
    """
    if attr in CLASS_SAFE or (vocabulary.engine and attr in ARITHMETIC_METHODS):
        return None  # a class's own protocol, or an engine's operators (``Value.__radd__``)
    if attr == "__class__" and reading:
        return None  # what type(x) gives; set, or defined in a class, it is refused
    if is_dunder(attr):
        return "engine" if attr in ARITHMETIC_METHODS else "dunder"
    if attr in _INTROSPECTION:
        return "introspection"
    opened = attr in own and attr not in NEVER_OWN
    if attr in _REFUSED_ATTRIBUTES and not opened:
        return _REFUSED_ATTRIBUTES[attr]
    if attr in _ESTIMATES and not opened:  # a tensor has no such method: a class's own
        return "estimate"
    if not vocabulary.by_hand or not table:
        private = attr.startswith("_") and not opened and attr not in _NODE_PRIVATE \
            and attr not in CONTAINERS and not attr.startswith(_NODE_PRIVATE_PREFIXES)
        return "private" if private else None
    if opened or attr in CONTAINERS or (reading and attr in _READABLE_FLAGS):
        return None
    if attr in TENSOR_OPERATIONS:
        return _arithmetic_word(attr, vocabulary)
    return "private" if attr.startswith("_") else (_word(attr) or "other")
