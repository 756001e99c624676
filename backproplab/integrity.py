"""Are the grading functions still the package's own?

A check cell runs in the learner's kernel, after the learner's code, so that
code can replace a checker (``bl.check_by_hand = ...``), patch one inside the
package, or swap autograd's engine. Python cannot stop that inside one
kernel; it can notice it. Each module that grading relies on registers itself
once, at the end of its own import, with `protect_module`: every function and
class it holds (its own and those it imported), the methods of its classes,
and their code, are remembered as they are then. `verify` compares them with
what is there now and fails the check when anything differs, so a function
added to a protected module is protected without anyone listing it. What a
check cannot see (a cell that is never run, a checker replaced before it is
called) is for ``backproplab audit``, which reads the submitted notebooks.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any

import torch
import torch.autograd.forward_ad as forward_ad
from torch.autograd.variable import Variable

__all__ = ["GradingTampered", "protect_module", "protected", "replaced", "verify"]

# module name -> (the module, {attribute path: (the object, its code object or None)})
_SNAPSHOTS: dict[str, tuple[types.ModuleType, dict[str, tuple[Any, Any]]]] = {}
_TORCH = {
    "torch.Tensor.backward": (torch.Tensor, "backward", torch.Tensor.backward),
    "torch.autograd.grad": (torch.autograd, "grad", torch.autograd.grad),
    "torch.autograd.backward": (torch.autograd, "backward", torch.autograd.backward),
    "torch.autograd.forward_ad.make_dual": (forward_ad, "make_dual", forward_ad.make_dual),
}
_ENGINE = Variable._execution_engine
WATCH = "backproplab.watch"  # the module whose engine stand-in is not tampering


class GradingTampered(AssertionError):
    """The grading functions were replaced in this notebook."""


def _code(obj: Any) -> Any:
    raw = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
    return getattr(raw, "__code__", None)


def _members(module: types.ModuleType) -> dict[str, Any]:
    """Every function and class of ``module`` by name, and ``Class.method`` for its classes."""
    found = {}
    for name, obj in vars(module).items():
        if name.startswith("__") or isinstance(obj, types.ModuleType) or not callable(obj):
            continue
        found[name] = obj
        if inspect.isclass(obj) and obj.__module__ == module.__name__:
            for attr, member in vars(obj).items():
                if isinstance(member, (types.FunctionType, property, staticmethod, classmethod)):
                    found[f"{name}.{attr}"] = member
    return found


def _resolve(module: types.ModuleType, path: str) -> Any:
    """What ``path`` ("name" or "Class.method") names in ``module`` now; KeyError if gone."""
    head, _, attr = path.partition(".")
    obj = vars(module)[head]
    return vars(obj)[attr] if attr else obj


def protect_module(name: str) -> None:
    """Remember what module ``name`` holds now as the original, for `verify`."""
    module = sys.modules[name]
    _SNAPSHOTS[name] = (module, {path: (obj, _code(obj))
                                 for path, obj in _members(module).items()})


def protected() -> list[str]:
    """The names of the modules `verify` watches."""
    return sorted(_SNAPSHOTS)


def _moved(package: Any) -> list[str]:
    """An old module name (``backproplab.exercise``) now standing for another module."""
    found = []
    for old, new in getattr(package, "_MOVED", {}).items():
        now = sys.modules.get(f"backproplab.{old}")
        snapshot = _SNAPSHOTS.get(f"backproplab.{new}")
        if now is not None and snapshot is not None and now is not snapshot[0]:
            found.append(f"sys.modules['backproplab.{old}']")
    return found


def _package_names(package: Any) -> list[str]:
    """A name the package hands out (``bl.check_by_hand``) bound to something else."""
    found = []
    for public, home in getattr(package, "_HOME", {}).items():
        bound = package.__dict__.get(public)
        snapshot = _SNAPSHOTS.get(f"backproplab.{home}")
        original = snapshot[1].get(public) if snapshot is not None else None
        if bound is not None and original is not None and bound is not original[0]:
            found.append(f"backproplab.{public}")
    return found


def _torch_replaced() -> list[str]:
    found = [label for label, (owner, attr, original) in _TORCH.items()
             if getattr(owner, attr) is not original and getattr(owner, attr) not in _stand_ins()]
    engine = Variable._execution_engine
    watch = sys.modules.get(WATCH)
    watched = (watch is not None and type(engine) is watch.EngineWatch
               and engine.engine is _ENGINE)  # inside count_autograd or forbid_autograd
    if engine is not _ENGINE and not watched:
        found.append("torch.autograd.Variable._execution_engine")
    return found


def replaced() -> list[str]:
    """What differs from the originals, as names a person can look for."""
    found = []
    for name, (module, originals) in _SNAPSHOTS.items():
        if sys.modules.get(name) is not module:
            found.append(f"sys.modules[{name!r}]")
        for path, (obj, code) in originals.items():
            try:
                now = _resolve(module, path)
            except KeyError:
                found.append(f"{name}.{path} (deleted)")
                continue
            if now is not obj or _code(now) is not code:
                found.append(f"{name}.{path}")
    package = sys.modules.get("backproplab")
    if package is not None:
        found += _moved(package) + _package_names(package)
    return found + _torch_replaced()


def _stand_ins() -> set[Any]:
    """What a count_autograd or forbid_autograd block has put in place for now."""
    watch = sys.modules.get(WATCH)
    return watch.STAND_INS if watch is not None else set()


def verify() -> None:
    """Raise `GradingTampered` when a grading function was replaced.

    >>> verify()  # nothing replaced: silent
    """
    __tracebackhide__ = True
    found = replaced()
    if found:
        raise GradingTampered(
            "\nthe grading functions were replaced in this notebook ("
            + ", ".join(found[:6]) + (", ..." if len(found) > 6 else "")
            + "), so this check cannot be trusted. Restart the kernel and run the notebook "
            "from the top without the code that replaces them."
        )


protect_module(__name__)
