"""Are the grading functions still the package's own?

A check cell runs in the learner's kernel, after the learner's code, so that
code can replace a checker (``bl.check_by_hand = ...``), patch one inside the
package, or swap autograd's engine. Python cannot stop that inside one
kernel; it can notice it. Each grading module lists its functions with
`protect` when it is imported; `verify` compares them, and their code, with
what was listed, and fails the check when anything differs. What a check
cannot see (a cell that is never run, a checker replaced before it is
called) is for ``backproplab audit``, which reads the submitted notebooks.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
import torch.autograd.forward_ad as forward_ad
from torch.autograd.variable import Variable

# (module name, attribute path) -> (the object, its code object or None)
_ORIGINAL: dict[tuple[str, str], tuple[Any, Any]] = {}
_MODULES: dict[str, Any] = {}
_TORCH = {
    "torch.Tensor.backward": (torch.Tensor, "backward", torch.Tensor.backward),
    "torch.autograd.grad": (torch.autograd, "grad", torch.autograd.grad),
    "torch.autograd.backward": (torch.autograd, "backward", torch.autograd.backward),
    "torch.autograd.forward_ad.make_dual": (forward_ad, "make_dual", forward_ad.make_dual),
}
_ENGINE = Variable._execution_engine


class GradingTampered(AssertionError):
    """The grading functions were replaced in this notebook."""


def _resolve(module: Any, path: str) -> Any:
    obj = module
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def protect(module_name: str, *paths: str) -> None:
    """Remember ``module.path`` (and its code) as the original, for `verify`."""
    module = sys.modules[module_name]
    _MODULES[module_name] = module
    for path in paths:
        obj = _resolve(module, path)
        raw = obj.fget if isinstance(obj, property) else obj
        _ORIGINAL[(module_name, path)] = (obj, getattr(raw, "__code__", None))


def replaced() -> list[str]:
    """What differs from the originals, as names a person can look for."""
    found = []
    for name, module in _MODULES.items():
        if sys.modules.get(name) is not module:
            found.append(f"sys.modules[{name!r}]")
    for (name, path), (obj, code) in _ORIGINAL.items():
        try:
            now = _resolve(_MODULES[name], path)
        except AttributeError:
            found.append(f"{name}.{path} (deleted)")
            continue
        raw = now.fget if isinstance(now, property) else now
        if now is not obj or getattr(raw, "__code__", None) is not code:
            found.append(f"{name}.{path}")
    package = sys.modules.get("backproplab")
    if package is not None:
        for public, home in getattr(package, "_HOME", {}).items():
            bound = package.__dict__.get(public)
            original = _ORIGINAL.get((f"backproplab.{home}", public))
            if bound is not None and original is not None and bound is not original[0]:
                found.append(f"backproplab.{public}")
    for label, (owner, attr, original) in _TORCH.items():
        now = getattr(owner, attr)
        if now is not original and now not in _stand_ins():
            found.append(label)
    engine = Variable._execution_engine
    watch = sys.modules.get("backproplab._watch")
    watched = (watch is not None and type(engine) is watch._EngineWatch
               and engine._engine is _ENGINE)  # inside count_autograd or forbid_autograd
    if engine is not _ENGINE and not watched:
        found.append("torch.autograd.Variable._execution_engine")
    return found


def _stand_ins() -> set[Any]:
    """What a count_autograd or forbid_autograd block has put in place for now."""
    watch = sys.modules.get("backproplab._watch")
    return watch.STAND_INS if watch is not None else set()


def verify() -> None:
    """Raise `GradingTampered` when a grading function was replaced."""
    __tracebackhide__ = True
    found = replaced()
    if found:
        raise GradingTampered(
            "\nthe grading functions were replaced in this notebook ("
            + ", ".join(found[:6]) + (", ..." if len(found) > 6 else "")
            + "), so this check cannot be trusted. Restart the kernel and run the notebook "
            "from the top without the code that replaces them."
        )


protect(__name__, "verify", "replaced", "_stand_ins")
