"""Spotting a numerical estimate by what it does: it moves its inputs by a step.

Finite differences, of any stencil, evaluate the function at ``x + h`` and
``x - h`` (or at ``x + h*e_i`` entry by entry); Richardson extrapolation does
it for several ``h``. A derived formula never needs to: it may shift an input
once by a constant (``1 + x``) or by a number it was handed (``var + eps``),
but not by two different steps, nor by a tiny one, nor entry by entry. So the
check watches every operation the answer runs (`Nudges`, a torch dispatch
mode), stops the answer at the first nudge (`NudgeSeen`) and names the input
that was nudged. This holds even
where the estimate comes out exact (a step linear in its input, where central
differences have no error) or is extrapolated to round-off.

>>> import torch
>>> x = torch.randn(3, dtype=torch.float64)
>>> try:
...     with Nudges([x]) as seen:
...         _ = ((x + 1e-6).sin() - (x - 1e-6).sin()) / 2e-6
... except NudgeSeen:
...     pass
>>> seen.nudged()
0
>>> with Nudges([x]) as seen:
...     _ = 3 * (x + 1) ** 2
>>> seen.nudged() is None
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..watch import QuietDispatchMode

__all__ = ["NudgeSeen", "Nudges"]


class NudgeSeen(BaseException):
    """Stops an answer at its first nudge: the estimate is named, whatever it would have
    returned (a BaseException, so that a learner's ``except Exception`` lets it pass)."""

# Operations whose result is (a part of, or a copy of) their first argument's values.
_SAME_VALUES = {
    "clone", "detach", "alias", "view", "_unsafe_view", "reshape", "_to_copy", "contiguous",
    "expand", "select", "slice", "t", "transpose", "permute", "squeeze", "unsqueeze",
    "lift_fresh", "flatten", "index", "unbind", "split", "chunk", "copy",
}
# Makers of new values that do not depend on the argument's values.
_LIKE = {"zeros_like", "ones_like", "empty_like", "full_like", "new_zeros", "new_ones",
         "new_full", "new_empty", "zeros", "ones", "full", "empty", "scalar_tensor", "eye",
         "arange"}
# x + c and x - c move x; c - x (a reflection) does not evaluate anything near x.
_SHIFTS = {"add": 1.0, "sub": -1.0}
TINY = 1e-3  # a step this small relative to the input is a nudge, whatever else


def _number(value: int | float | complex) -> float | complex:
    """A step as a number: a float, or a complex when it has an imaginary part."""
    value = complex(value)
    return value.real if value.imag == 0 else value


def _base(func: Any) -> str:
    return func._schema.name.split("::")[-1].rstrip("_")


class Nudges(QuietDispatchMode):
    """Watch the operations run inside the block for inputs moved by a step."""

    def __init__(self, inputs: Sequence[Any]) -> None:
        super().__init__()
        self._root: dict[int, int] = {}  # id of a tensor -> the input it carries the values of
        self._keep: list[torch.Tensor] = []  # the tensors whose ids are in use
        self._data: set[int] = set()  # tensors computed from an input's values
        self._numbers = {float(v) for v in inputs
                         if isinstance(v, (int, float)) and not isinstance(v, bool)}
        self._steps: dict[int, set[Any]] = {}
        self._tiny: set[int] = set()
        self._scale: dict[int, float] = {}
        self.largest = 0  # entries of the largest tensor an operation made
        for k, t in enumerate(inputs):
            if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()):
                self._mark(t, k)
                self._scale[k] = float(t.detach().abs().max()) if t.numel() else 0.0

    def _mark(self, t: torch.Tensor, root: int) -> None:
        self._root[id(t)] = root
        self._data.add(id(t))
        self._keep.append(t)

    def nudged(self) -> int | None:
        """The position of an input that was nudged, or None."""
        for k in sorted(self._steps):
            if len(self._steps[k]) >= 2 or k in self._tiny:
                return k
        return None

    def _step(self, other: Any) -> tuple[Any, float] | None:
        """The step ``other`` is when it does not depend on any input's values (a complex
        step too: the complex-step trick moves a real input by a tiny imaginary one)."""
        if isinstance(other, (int, float, complex)) and not isinstance(other, bool):
            return _number(other), abs(other)
        if not isinstance(other, torch.Tensor) or id(other) in self._data:
            return None
        if not (other.is_floating_point() or other.is_complex()) or other.numel() == 0:
            return None
        flat = other.detach().reshape(-1)
        nonzero = int((flat != 0).sum())
        if nonzero == 0:
            return None
        if other.numel() > 1 and nonzero == 1:  # one entry moved: entry by entry
            return ("entry", tuple(flat.tolist())), float("inf")
        if bool((flat == flat[0]).all()):
            return _number(flat[0].item()), abs(flat[0].item())
        return ("tensor", tuple(flat.tolist()[:64])), float(flat.abs().max())

    def _record(self, name: str, args: tuple[Any, ...]) -> None:
        if name not in _SHIFTS or len(args) < 2:
            return
        pairs = [(args[0], args[1], _SHIFTS[name])]
        if name == "add":
            pairs.append((args[1], args[0], 1.0))
        for mine, other, sign in pairs:
            if not isinstance(mine, torch.Tensor) or id(mine) not in self._root:
                continue
            step = self._step(other)
            if step is None:
                continue
            value, size = step
            if isinstance(value, (float, complex)):
                if value in self._numbers:
                    continue  # a number the exercise hands over, such as eps
                value = sign * value
            k = self._root[id(mine)]
            self._steps.setdefault(k, set()).add(value)
            if size == float("inf") or size <= TINY * max(self._scale.get(k, 0.0), 1.0):
                self._tiny.add(k)
            if self.nudged() is not None:
                raise NudgeSeen(k)
            return

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = _base(func)
        self._record(name, tuple(args))
        out = func(*args, **kwargs)
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        outs = out if isinstance(out, (tuple, list)) else (out,)
        first = args[0] if args else None
        for o in outs:
            if not isinstance(o, torch.Tensor):
                continue
            self.largest = max(self.largest, o.numel())
            if name in _SAME_VALUES and isinstance(first, torch.Tensor) and id(first) in self._root:
                self._mark(o, self._root[id(first)])
            elif name in _LIKE:
                continue
            elif any(id(t) in self._data for t in tensors) and id(o) not in self._root:
                self._data.add(id(o))
                self._keep.append(o)
        if _writes_first(func) and isinstance(first, torch.Tensor) \
                and any(id(t) in self._data for t in tensors):
            # An input's values written into a tensor (``out[row] += x[i]``): the tensor, and
            # the one it is a view of, now carry them, so neither is a step later on.
            for written in (first, first._base):
                if written is not None and id(written) not in self._data:
                    self._data.add(id(written))
                    self._keep.append(written)
        return out


def _writes_first(func: Any) -> bool:
    """Whether the operation writes into its first argument (``add_``, ``copy_``, ...)."""
    arguments = func._schema.arguments
    alias = arguments[0].alias_info if arguments else None
    return alias is not None and alias.is_write
