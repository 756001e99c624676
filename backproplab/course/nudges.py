"""Spotting a numerical estimate by what it does: it runs one computation at moved points.

Every numerical estimate of a derivative evaluates the function somewhere other than at
the point it was given, then combines the values: central differences at ``x + h`` and
``x - h``, one-sided ones at ``x`` and ``x + h``, Richardson at several ``h``, a
least-squares fit at many, SPSA along random signs (``x + h*d`` and ``x - h*d``), entry
by entry (``x + h*e_i``) or all at once. The step may be large, where a low-degree
function makes the estimate exact, and the moved point may be made in many ways:
``x * (1 + h)``, ``torch.lerp``, ``torch.where``, a stacked or rolled copy, an entry
changed in place, the input copied through Python numbers first.

So the check watches every operation the answer runs (`Nudges`, a torch dispatch mode)
and follows the *moved copies* of each tensor: a tensor whose entries are entries of
another (its root: an input, or a value computed from inputs), each multiplied by a
constant and shifted by something not computed from the root. ``+``, ``-``, ``lerp``,
negation, ``*`` and ``/`` by a constant make moved copies, and so do the operations that
move entries without changing them (views, indexing, ``where``, ``stack``, ``cat``,
``roll``, ``clone``, writing into a copy). Every other operation computes something at
the copies it is given: at *points*. Three things are a nudge (`NudgeSeen` stops the
answer at the first):

1. one operation, with the same other operands, run at two copies of one root, moved by
   the same things, that hold different values for the same entries (the root itself is
   a copy of itself): one function evaluated at two points;
2. one copy that holds the same entry twice, moved by two different constant steps:
   several points at once (stacked, or broadcast against a column of steps);
3. an input moved by a tiny constant step (at most 1e-3 of its size) or scaled by a
   factor within 1e-3 of 1: a one-sided difference's step, or the complex step.

Why a derived formula never looks like this: it shifts and scales inputs too (``1 + x``,
``x - mean``, ``var + eps``, ``2 * x``), but each shifted copy goes its own way into the
formula; it never feeds two of them to the same operation with the same operands. Where
it does feed two copies to one function, one is the other reflected (``p`` and
``1 - p``, ``z`` and ``-z``), which never gives a slope at ``x``, so it is not counted.
Nor are copies moved by different values (``lse`` minus one block of scores, then
another): only copies moved by the same things can be two points of one function.

>>> import torch
>>> x = torch.randn(3, dtype=torch.float64)
>>> try:
...     with Nudges([x]) as seen:
...         _ = ((x + 1.0).sin() - (x - 1.0).sin()) / 2
... except NudgeSeen:
...     pass
>>> seen.nudged()
0
>>> with Nudges([x]) as seen:
...     _ = 3 * (x + 1) ** 2 + torch.sigmoid(x) - torch.sigmoid(-x)
>>> seen.nudged() is None
True
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..watch import QuietDispatchMode

__all__ = ["NudgeSeen", "Nudges"]

TINY = 1e-3  # a step this small relative to the input's size is a nudge, whatever else
_KEPT = 8  # points kept per operation and operands: the second decides


class NudgeSeen(BaseException):
    """Stops an answer at its first nudge: the estimate is named, whatever it would have
    returned (a BaseException, so that a learner's ``except Exception`` lets it pass)."""


@dataclass
class _Copy:
    """A moved copy of ``root``: for each of its entries, which entry of the root it holds
    (``entry``: 1 + its position in ``root.flatten()``; 0 for a constant entry) and the
    factor it was multiplied by (``scale``); ``by``: what besides constants moved it
    (the roots of other values, a number the exercise handed over)."""

    root: torch.Tensor
    entry: torch.Tensor
    scale: torch.Tensor
    by: frozenset = frozenset()


# Operations that move entries without changing them: done to a copy's record, they give
# the record of the result (a constant's entries become 0, as do numbers).
_MOVES = {
    "clone", "detach", "alias", "view", "_unsafe_view", "reshape", "_reshape_alias",
    "contiguous", "expand", "select", "slice", "t", "transpose", "permute", "squeeze",
    "unsqueeze", "flatten", "index", "unbind", "split", "split_with_sizes", "chunk",
    "roll", "flip", "repeat", "narrow", "movedim", "diagonal", "unfold", "index_select",
    "gather", "take", "view_as", "expand_as", "constant_pad_nd", "im2col", "where",
    "masked_fill", "stack", "cat", "index_put", "copy", "fill", "zero", "_to_copy",
}
# Functions whose values at one tensor times powers of two give no slope: those no
# polynomial matches along a line through 0 (exp(k u) for k = 1, 2, 4...), where an
# estimate is never exact, and those whose value at 2u is twice that at u (a min). So
# ``exp(u)`` beside ``exp(2 * u)`` (tanh written out), or the minimum of a tensor scaled by
# 2, 4, 8 in a search, is no nudge (`_doubled`).
_ALONG_A_RAY = {"exp", "exp2", "expm1", "sin", "cos", "sinh", "cosh", "tanh", "sigmoid",
                "abs", "min", "max", "amin", "amax"}
# Comparisons give no values to take a slope from (``while smallest * low < tiny``).
_COMPARED = {"lt", "le", "gt", "ge", "eq", "ne"}
# Makers of constants shaped like a value (no values of it in them).
_LIKE = {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
         "randint_like", "new_zeros", "new_ones", "new_full", "new_empty"}


class Nudges(QuietDispatchMode):
    """Watch the operations run inside the block for one computation at moved points."""

    def __init__(self, inputs: Sequence[Any]) -> None:
        super().__init__()
        self._inputs = {id(t): k for k, t in enumerate(inputs) if isinstance(t, torch.Tensor)
                        and (t.is_floating_point() or t.is_complex())}
        self._numbers = {complex(v) for v in inputs if isinstance(v, (float, complex))}
        self._from: dict[int, frozenset[int]] = {}  # id -> the inputs its values come from
        self._copies: dict[int, _Copy] = {}  # id -> what it is a moved copy of
        self._points: dict[Any, list[tuple[_Copy, torch.Tensor]]] = {}
        self._keep: list[Any] = []  # the tensors whose ids are in use
        self._nudged: int | None = None
        self.largest = 0  # entries of the largest tensor an operation made
        self.read_back = False  # a number read back from a computed value (``.item()``)
        for t in inputs:
            if id(t) in self._inputs:
                self._data(t, frozenset({self._inputs[id(t)]}))

    def nudged(self) -> int | None:
        """The position of the input the nudged values come from, or None."""
        return self._nudged

    def _data(self, t: torch.Tensor, found: frozenset[int], copy: _Copy | None = None) -> None:
        """``t`` holds values computed from the inputs ``found`` (a moved copy: ``copy``)."""
        self._from[id(t)] = found
        self._keep.append(t)
        if copy is not None:
            self._copies[id(t)] = copy

    def _constant(self, value: Any) -> bool:
        """Whether ``value`` depends on no input: a number (not one the exercise hands
        over), a tensor made of constants, or a copy multiplied by 0 (``x * 0 + h``)."""
        if not isinstance(value, torch.Tensor):
            return _number(value) and complex(value) not in self._numbers
        copy = self._copies.get(id(value))
        return id(value) not in self._from or (
            copy is not None and not copy.by and not bool(copy.scale.any()))

    def _copy_of(self, t: torch.Tensor) -> _Copy:
        """The record of ``t``, a value computed from inputs: itself, untouched, if none."""
        if id(t) not in self._copies:
            self._copies[id(t)] = self._record(t, t)
        return self._copies[id(t)]

    @staticmethod
    def _record(t: torch.Tensor, root: torch.Tensor) -> _Copy:
        """``t`` as every entry of ``root`` (``t`` itself, or a token for its new values)."""
        entry = torch.arange(1, t.numel() + 1, dtype=torch.float64).reshape(t.shape)
        return _Copy(root, entry, torch.ones(t.shape, dtype=torch.float64))

    # ---------------------------------------------------------------- moved copies made

    def _moved(self, name: str, func: Any, args: tuple, kwargs: dict,
               out: Any) -> list[_Copy] | None:
        """The records of what the operation returns when it makes moved copies, else None
        (it then computes something at its arguments)."""
        if name in _MOVES:
            return self._replayed(func, args, kwargs)
        alpha = kwargs.get("alpha", 1)
        terms = {"add": lambda a, b: [(a, 1), (b, alpha)],
                 "sub": lambda a, b: [(a, 1), (b, -alpha)],
                 "rsub": lambda a, b: [(b, 1), (a, -alpha)],
                 "neg": lambda a: [(a, -1)],
                 "lerp": lambda a, b, w: [(a, 1 - w), (b, w)],
                 "mul": lambda a, b: [(b, a)] if self._constant(a) else [(a, b)],
                 "div": lambda a, b: [(a, 1 / b)] if self._constant(b) and not (
                     _number(b) and b == 0) else None}
        if name not in terms or not isinstance(out, torch.Tensor):
            return None
        copy = self._sum(terms[name](*args), out)
        return None if copy is None else [copy]

    def _sum(self, terms: list[tuple[Any, Any]], out: torch.Tensor) -> _Copy | None:
        """``out = sum(weight * value)`` with constant weights: a copy of one root when its
        values are copies of that root laid out alike, constants (steps) and values not
        computed from it (``x + s * v``: x moved along v, s * v the step)."""
        if terms is None or not all(self._constant(w) for _, w in terms):
            return None
        data = [(v, self._copy_of(v), w) for v, w in terms if _data_of(v, self._from)]
        if not data:
            return None
        main = next((c for _, c, _ in data if bool((c.scale == 1).all())), data[0][1])
        mine = [(c, w) for _, c, w in data if c.root is main.root]
        entry = main.entry.expand(out.shape)
        if any(not torch.equal(c.entry.expand(out.shape), entry) for c, _ in mine):
            return None
        by = [self._moved_by(v, main.root) for v, c, _ in data if c.root is not main.root]
        if None in by:
            return None
        if len(mine) == 1 and bool(main.scale.any()):
            self._tiny(main, [w * v for v, w in terms if not _data_of(v, self._from)
                              and self._constant(v)], mine[0][1])
        return _Copy(main.root, _own(entry, out), _own(sum(w * c.scale for c, w in mine), out),
                     frozenset().union(*by, *(c.by for c, _ in mine)))

    def _moved_by(self, value: Any, root: torch.Tensor) -> frozenset | None:
        """What ``value`` moves a copy of ``root`` by, added to it: nothing for a constant,
        a number handed over, or the root of other values (``0 * v`` too: ``x + s * v`` at
        s = 0 is on the line along v); None for a value computed from ``root``."""
        if not _data_of(value, self._from):
            return frozenset() if self._constant(value) else frozenset({complex(value)})
        if not self._constant(value) and self._from[id(value)] & self._from[id(root)]:
            return None
        copy = self._copies.get(id(value))
        return frozenset({id(value)}) if copy is None else copy.by | {id(copy.root)}

    def _replayed(self, func: Any, args: tuple, kwargs: dict) -> list[_Copy] | None:
        """An operation that moves entries, done to the records of the copies it moves (of
        one root, with indices or masks not computed from it)."""
        tensors = [t for _, t in _tensors(args) if id(t) in self._from]
        # values: floats, and whole numbers that are moved copies (``x.round().long() + 1``);
        # other whole numbers here are indices or masks
        valued = [t for t in tensors if t.is_floating_point() or t.is_complex()
                  or id(t) in self._copies]
        copies = [self._copy_of(t) for t in valued]
        if not copies or len({id(c.root) for c in copies}) > 1 or any(
                self._from[id(t)] & self._from[id(copies[0].root)] for t in tensors
                if not any(t is v for v in valued)):
            return None
        kwargs = {k: v for k, v in kwargs.items() if k != "dtype"}  # records stay float64
        twins = [func(*_twins(args, self._copies, copies[0].root, part), **kwargs)
                 for part in ("entry", "scale")]
        entries, scales = ([t] if isinstance(t, torch.Tensor) else list(t) for t in twins)
        by = frozenset().union(*(c.by for c in copies))
        return [_Copy(copies[0].root, e, s, by) for e, s in zip(entries, scales, strict=True)]

    # ---------------------------------------------------------------- the three rules

    def _evaluated(self, name: str, args: tuple, kwargs: dict) -> None:
        """Each copy (or input) the operation computes something at is a point (rule 1)."""
        for path, point in _tensors(args):
            if id(point) not in self._copies and id(point) not in self._inputs:
                continue
            if not (point.is_floating_point() or point.is_complex()):
                continue  # whole numbers (frexp's exponent, k - 1): no slope lies between
            copy, value = self._copy_of(point), point.detach()
            if not copy.by and copy.entry.numel() > copy.root.numel():
                self._several(copy, value)
            key = (name, path, self._operands(args, path, copy.root, point),
                   self._operands(kwargs, None, copy.root, point))
            points = self._points.setdefault(key, [])
            if any(_two_points(old, seen, copy, value) and not (
                    name in _ALONG_A_RAY and _doubled(old, seen, copy, value))
                   for old, seen in points):
                self._stop(copy)
            if len(points) < _KEPT:
                points.append((_Copy(copy.root, copy.entry.clone(), copy.scale.clone(),
                                     copy.by), value.clone()))

    def _operands(self, value: Any, skip: tuple | None, root: torch.Tensor, point: Any,
                  path: tuple = ()) -> Any:
        """The operation's other operands, to compare: numbers as they are, tensors by their
        values, the point itself again (``t * t`` at every point), another copy of ``root``
        by which entries it holds with which factors (``t * (1 - t)`` alike at every point),
        ``skip`` left out."""
        if path == skip:
            return "the point"
        if value is point:
            return "the point again"
        if isinstance(value, torch.Tensor):
            copy = self._copies.get(id(value))
            if copy is not None and copy.root is root:
                return "copy", _digest(copy.entry), _digest(copy.scale)
            return tuple(value.shape), str(value.dtype), _digest(value)
        if isinstance(value, (list, tuple, dict)):
            items = sorted(value.items()) if isinstance(value, dict) else enumerate(value)
            return tuple((k, self._operands(v, skip, root, point, (*path, k)))
                         for k, v in items)
        return value if isinstance(value, (int, float, complex, str, type(None))) \
            else repr(value)

    def _several(self, copy: _Copy, values: torch.Tensor) -> None:
        """Rule 2: one entry of the root held twice, moved two ways (not reflected)."""
        keep = (copy.entry > 0) & (copy.scale != 0)
        if values.shape == keep.shape:
            entry, scale, values = copy.entry[keep], copy.scale[keep], values[keep]
            order = torch.argsort(entry, stable=True)
            entry, scale, values = entry[order], scale[order], values[order]
            twice = (entry[1:] == entry[:-1]) & (scale[1:] != -scale[:-1])
            if bool((twice & _differ(values[1:], values[:-1])).any()):
                self._stop(copy)

    def _tiny(self, copy: _Copy, steps: list, factor: Any) -> None:
        """Rule 3: an input moved by a tiny constant step, or scaled by a factor near 1."""
        if id(copy.root) not in self._inputs or not copy.root.numel():
            return
        size = max(float(copy.root.detach().abs().max()), 1.0)
        for moved, most in [(torch.as_tensor(s).abs(), TINY * size) for s in steps] + [
                (torch.as_tensor(factor - 1).abs(), TINY)]:
            if bool(((moved > 0) & (moved <= most)).any()):
                self._stop(copy)

    def _stop(self, copy: _Copy) -> None:
        self._nudged = min(self._from[id(copy.root)])
        raise NudgeSeen(self._nudged)

    # ---------------------------------------------------------------- the watch

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs, args = kwargs or {}, tuple(args)
        name, in_place = _operation(func)
        found = frozenset().union(*(self._from.get(id(t), frozenset())
                                    for _, t in _tensors((args, tuple(kwargs.values())))))
        if in_place and found:
            self._written(name, func, args, kwargs)
        out = func(*args, **kwargs)
        outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
                if isinstance(o, torch.Tensor)]
        self.largest = max([self.largest, *(o.numel() for o in outs)])
        if in_place:
            for written in (args[0], args[0]._base):  # ``out[i] = x[j]``: both hold data
                if found and written is not None:
                    self._data(written, self._from.get(id(written), frozenset()) | found)
        elif name == "_local_scalar_dense":
            self.read_back = True
        elif not found and name == "lift_fresh":
            self._from_numbers(out)
        elif found and name not in _LIKE:
            try:
                records = self._moved(name, func, args, kwargs, out)
            except (RuntimeError, TypeError, IndexError, ValueError):  # records it can't take
                records = None
            if records is None and name not in _COMPARED:
                self._evaluated(name, args, kwargs)
            for k, o in enumerate(outs):
                self._data(o, found, records[k] if records else None)
        return out

    def _written(self, name: str, func: Any, args: tuple, kwargs: dict) -> None:
        """Before an operation writes into a copy (or an input): its record changed in place
        (the views of it see the change), or, when it now holds computed values, it is a
        point, then a value of its own (its later points are not points of its old values:
        ``x.copy_(softplus(x))``, then ``exp(-x)``)."""
        target = args[0]
        if id(target) in self._copies or id(target) in self._inputs:
            copy = self._copy_of(target)
            try:
                new = self._moved(name, func, args, kwargs, target)
            except RuntimeError:  # a record that cannot be written in place
                new = None
            if new is None:
                self._evaluated(name, args, kwargs)
                for t in (target, target._base):
                    if t is not None:
                        self._copies[id(t)] = self._record(t, torch.empty(t.shape, device="meta"))
                        self._data(self._copies[id(t)].root, self._from.get(id(t), frozenset()))
                return
            if new[0].entry is not copy.entry:
                copy.entry.copy_(new[0].entry)
                copy.scale.copy_(new[0].scale)
            copy.by = new[0].by

    def _from_numbers(self, out: torch.Tensor) -> None:
        """A constant made from Python numbers equal to an input's values, or to a value
        computed from inputs (copied through ``tolist``), is a copy of it."""
        for t in (t for t in self._keep if isinstance(t, torch.Tensor) and t.dtype == out.dtype
                  and t.shape == out.shape and id(t) in self._from):
            if torch.equal(t.detach(), out):
                source = self._copy_of(t)
                self._data(out, self._from[id(t)], _Copy(
                    source.root, source.entry.clone(), source.scale.clone(), source.by))
                return


@functools.cache
def _operation(func: Any) -> tuple[str, bool]:
    """An operation's name (``add`` for ``aten.add_.Tensor``), and whether it writes into
    its first argument."""
    schema = func._schema
    alias = schema.arguments[0].alias_info if schema.arguments else None
    return schema.name.split("::")[-1].rstrip("_"), bool(alias and alias.is_write)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float, complex)) and not isinstance(value, bool)


def _data_of(value: Any, found: dict[int, frozenset[int]]) -> bool:
    return isinstance(value, torch.Tensor) and id(value) in found


def _tensors(value: Any, path: tuple = ()) -> list[tuple[tuple, torch.Tensor]]:
    """Every tensor inside ``value`` (arguments, lists of them), with where it sits."""
    if type(value) in (list, tuple):  # not torch.Size: its numbers are no tensors
        return [found for i, v in enumerate(value) for found in _tensors(v, (*path, i))]
    return [(path, value)] if isinstance(value, torch.Tensor) else []


def _twins(value: Any, copies: dict[int, _Copy], root: torch.Tensor, part: str) -> Any:
    """``value`` with each copy of ``root`` replaced by its ``entry`` or ``scale`` (a copy
    in whole numbers too), other floating tensors by zeros and numbers by 0 (they are no
    entries of the root)."""
    if type(value) in (list, tuple):
        return type(value)(_twins(v, copies, root, part) for v in value)
    copy = copies.get(id(value)) if isinstance(value, torch.Tensor) else None
    if copy is not None and copy.root is root:
        return getattr(copy, part)
    if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
        return torch.zeros(value.shape, dtype=torch.float64)
    return 0.0 if isinstance(value, float) else value


def _own(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``t`` broadcast to ``like``'s shape and laid out like it (it allows the same views),
    in memory of its own (it may be written in place)."""
    return torch.empty_strided(like.shape, like.stride(), dtype=t.dtype).copy_(
        t.expand(like.shape))


def _digest(t: torch.Tensor) -> str:
    """A tensor's values, in a few bytes."""
    t = t.detach().resolve_conj().resolve_neg().contiguous().cpu()
    try:
        data = t.numpy().tobytes()
    except (TypeError, RuntimeError):
        data = repr(t.tolist()).encode()
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _differ(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Entry by entry, whether two tensors hold different values (NaN and NaN alike)."""
    return (a != b) & ~(a.isnan() & b.isnan())


def _doubled(a: _Copy, a_values: torch.Tensor, b: _Copy, b_values: torch.Tensor) -> bool:
    """Whether two points are one tensor times two powers of two (``u`` and ``2 * u``, or
    ``-u``), exactly."""
    factors = [_factor(a), _factor(b)]
    if not all(factors) or any(math.log2(abs(f)) % 1 for f in factors):
        return False
    return torch.equal(b_values, a_values * (factors[1] / factors[0]))


def _factor(copy: _Copy) -> float:
    """The one real factor every entry of ``copy`` holds (0.0 where they differ)."""
    first = complex(copy.scale.reshape(-1)[0]) if copy.scale.numel() else 0j
    return first.real if not first.imag and bool((copy.scale == first).all()) else 0.0


def _two_points(a: _Copy, a_values: torch.Tensor, b: _Copy, b_values: torch.Tensor) -> bool:
    """Whether two copies of one root, moved by the same things, hold different values for
    the same entries (where one at least holds the root's, and not as the other's
    reflection)."""
    if a.root is not b.root or a.by != b.by or not a_values.shape == b_values.shape \
            == a.entry.shape or not torch.equal(a.entry, b.entry):
        return False
    both = (a.entry > 0) & ((a.scale != 0) | (b.scale != 0)) & (a.scale != -b.scale)
    return bool((both & _differ(a_values, b_values)).any())
