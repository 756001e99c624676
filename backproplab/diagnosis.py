"""Naming the mistake: what turns the reference into a learner's answer.

`diagnose` tries the common slips one by one (transposed, a missing sum over
a broadcast dimension, a flipped sign, a constant factor, accumulated
``.grad``, all zeros, float32 round-off) and names one only when it holds.
What it finds is a `Diagnosis`: a value that code compares (its ``kind`` and
fields); its sentence is made only when it is shown (``str(d)``; the words
are in :mod:`backproplab.mistakes`). :mod:`backproplab.check` asks for a
diagnosis only when an answer is wrong; the conversion and the closeness test
both use are in :mod:`backproplab.values`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any

import torch

from .mistakes import Diagnosis
from .values import aligned, all_close, as_value, close_mask, position, resolve_tolerance

__all__ = ["Diagnosis", "diagnose", "name_mistake"]

Close = Callable[[torch.Tensor], bool]

# Closer than this (relative) is told as round-off or as "near", never as a mistake.
NEAR = 1e-4


def name_mistake(
    a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float, *, accumulation: bool = True
) -> Diagnosis | None:
    """Diagnosis of ``a`` (manual) against ``b`` (reference); float64 inputs."""
    if all_close(a, b, rtol, atol):
        return None
    if a.is_complex() or b.is_complex():
        return None  # the mistakes below are about real-valued gradients

    def close(x: torch.Tensor) -> bool:
        return all_close(x, b, rtol, atol)

    # Non-finite values first: nothing else can be judged around a NaN.
    bad_a = ~torch.isfinite(a)
    if bad_a.any() and torch.isfinite(b).all():
        found = tuple(k for k, mask in (("NaN", a.isnan()), ("inf", a.isinf())) if mask.any())
        return Diagnosis("nonfinite", found=found, count=int(bad_a.sum()), size=a.numel(),
                         index=position(int(bad_a.flatten().nonzero()[0]), a.shape))
    if not torch.isfinite(b).all():
        # Around an inf in the reference only a flipped sign can still be judged.
        if a.shape == b.shape and close(-a):
            return _value_mistake(a, b, close, accumulation)
        return None

    if a.shape != b.shape:
        return _diagnose_shape(a, b, rtol, atol, accumulation)

    if b.abs().max() > atol and bool((a == 0).all()):
        return Diagnosis("zeros")
    if a.ndim == 2 and a.shape[0] == a.shape[1] and close(a.T):
        return Diagnosis("transposed")
    if a.ndim > 2:
        perm = _find_permutation(a, b, close)
        if perm is not None:
            return Diagnosis("permuted", permutation=perm)
    value = _value_mistake(a, b, close, accumulation)
    if value is not None:
        return value
    # Right up to round-off, but the tolerance is tighter than the arithmetic.
    if all_close(a, b, max(rtol, 1e-12), atol):
        return Diagnosis("round-off-64")
    if all_close(a, b, max(rtol, NEAR), atol):
        # Said to be float32's only when every value is one a float32 holds exactly.
        held = bool((a.float().double() == a).all())
        return Diagnosis("round-off-32" if held else "near")
    return _two_mistakes(a, b, close, accumulation) or _diagnose_rows(a, b, rtol, atol)


def _diagnose_rows(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float
                   ) -> Diagnosis | None:
    """A mismatch confined to a few rows (entries of a 1-D tensor): say which.

    A gradient wrong in only some rows points at what sets those rows apart:
    an embedding row looked up twice whose two contributions were not added,
    or a point at the edge of a piecewise formula (x = 0 for ReLU or abs).
    """
    if a.ndim == 0 or a.shape[0] < 2:
        return None
    row_ok = close_mask(a, b, rtol, atol).reshape(a.shape[0], -1).all(dim=1)
    bad = tuple((~row_ok).nonzero().flatten().tolist())
    if not bad or 2 * len(bad) > len(row_ok):
        return None  # most rows differ: nothing sets the few right ones apart
    flipped = all(all_close(-a[i], b[i], rtol, atol) for i in bad)
    return Diagnosis("sign-in-rows" if flipped else "rows", rows=bad, size=len(row_ok),
                     shapes=(tuple(a.shape), tuple(b.shape)))


def _value_mistake(a: torch.Tensor, b: torch.Tensor, close: Close, accumulation: bool
                   ) -> Diagnosis | None:
    """A flipped sign or a constant factor between same-shaped ``a`` and ``b``."""
    if close(-a):
        return Diagnosis("sign")
    return _diagnose_factor(a, b, close, accumulation)


def _two_mistakes(a: torch.Tensor, b: torch.Tensor, close: Close, accumulation: bool
                  ) -> Diagnosis | None:
    """One mistake of arrangement (transpose, dimension order, a missing sum,
    a shape) and one of value (sign, factor) together: undo the first, then
    name the second. Each pairing is verified on the numbers."""
    for arrangement, fixed in _rearrangements(a, b):
        value = _value_mistake(fixed, b, close, accumulation)
        if value is not None:
            return Diagnosis("two-mistakes", parts=(arrangement, value))
    return None


def _rearrangements(a: torch.Tensor, b: torch.Tensor) -> Iterator[tuple[Diagnosis, torch.Tensor]]:
    """(the mistake, rearranged a) for each single rearrangement of ``a``
    that gives the reference's shape."""
    if a.ndim == 2 and a.T.shape == b.shape:
        yield Diagnosis("transposed"), a.T
    if a.ndim > 2 and sorted(a.shape) == sorted(b.shape):
        for perm, p in _permutations(a, b.shape):
            yield Diagnosis("permuted", permutation=perm), p
    dims = _broadcast_dims(a.shape, b.shape)
    if dims is not None:
        leading, keep = dims
        yield (Diagnosis("missing-sum", dims=(*leading, *keep), kept=tuple(keep),
                         shapes=(tuple(a.shape), tuple(b.shape))),
               _sum_away(a, leading, keep))
    if a.shape != b.shape and a.numel() == b.numel():
        yield Diagnosis("reshape", shapes=(tuple(a.shape), tuple(b.shape))), a.reshape(b.shape)


def _permutations(a: torch.Tensor, shape: torch.Size
                  ) -> Iterator[tuple[tuple[int, ...], torch.Tensor]]:
    """(perm, a.permute(perm)) for every non-identity order of a's dimensions
    that gives ``shape``; none beyond 5 dimensions (720 orders is the most
    worth trying)."""
    if a.ndim > 5:
        return
    for perm in itertools.permutations(range(a.ndim)):
        p = a.permute(perm)
        if perm != tuple(range(a.ndim)) and p.shape == shape:
            yield perm, p


def _find_permutation(a: torch.Tensor, b: torch.Tensor, close: Close) -> tuple[int, ...] | None:
    return next((perm for perm, p in _permutations(a, b.shape) if close(p)), None)


def _diagnose_shape(
    a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float, accumulation: bool
) -> Diagnosis | None:
    """Mistakes that change the shape: transpose, missing reduction, reshape."""

    def close(x: torch.Tensor) -> bool:
        return all_close(x, b, rtol, atol)

    shapes = (tuple(a.shape), tuple(b.shape))
    if a.ndim == 2 and a.T.shape == b.shape and close(a.T):
        return Diagnosis("transposed")
    if a.ndim > 2 and sorted(a.shape) == sorted(b.shape):
        perm = _find_permutation(a, b, close)
        if perm is not None:
            return Diagnosis("permuted", permutation=perm)
    kept = _size_one_left(a, b, close)
    if kept is not None:
        return kept
    missing = _diagnose_missing_sum(a, b, close)
    if missing is not None:
        return missing
    # The reverse: the learner reduced a dimension the reference keeps.
    dims = _broadcast_dims(b.shape, a.shape)
    # (Only where a dimension the reference keeps holds more than one entry: an answer
    # that merely lacks a size-1 dimension summed nothing away; the reshape below says so.)
    if dims is not None and any(b.shape[d] != 1 for d in dims[0] + dims[1]):
        leading, keep = dims
        if all_close(a, _sum_away(b, leading, keep), rtol, atol):
            return Diagnosis("summed-away", dims=(*leading, *keep), shapes=shapes)
    if a.numel() == b.numel() and close(a.reshape(b.shape)):
        return Diagnosis("reshape", shapes=shapes)
    return _two_mistakes(a, b, close, accumulation)


def _squeezed(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(s for s in shape if s != 1)


def _size_one_left(a: torch.Tensor, b: torch.Tensor, close: Close) -> Diagnosis | None:
    """The reduction is there, but ``a`` keeps it as size-1 dimensions the reference
    does not have (a ``keepdim=True`` too many, or an ``unsqueeze``)."""
    extra = a.ndim - b.ndim
    if extra <= 0 or _squeezed(a.shape) != _squeezed(b.shape):
        return None
    if not close(a.reshape(b.shape)):
        return None
    return Diagnosis("size-one-left", dims=tuple(d for d in range(a.ndim) if a.shape[d] == 1),
                     shapes=(tuple(a.shape), tuple(b.shape)))


def _broadcast_dims(big: Sequence[int], small: Sequence[int]) -> tuple[list[int], list[int]] | None:
    """Dims of ``big`` that broadcasting ``small`` up to ``big`` would add or stretch.

    Returns (leading dims to sum away, dims to sum with keepdim) or None when
    ``small`` does not broadcast to ``big``.
    """
    lead = len(big) - len(small)
    if lead < 0:
        return None
    keep = []
    for i, (sb, ss) in enumerate(zip(big[lead:], small, strict=False)):
        if sb == ss:
            continue
        if ss != 1:
            return None
        keep.append(lead + i)
    leading = list(range(lead))
    if not leading and not keep:
        return None
    return leading, keep


def _sum_away(t: torch.Tensor, leading: list[int], keep: list[int]) -> torch.Tensor:
    """Undo broadcasting: sum over the stretched dims (kept as size 1), then
    over the leading dims broadcasting added (`_broadcast_dims` gives both)."""
    t = t.sum(dim=keep, keepdim=True) if keep else t
    return t.sum(dim=leading) if leading else t


def _diagnose_missing_sum(a: torch.Tensor, b: torch.Tensor, close: Close) -> Diagnosis | None:
    """``a`` has extra (broadcast) dimensions that should have been summed away."""
    dims = _broadcast_dims(a.shape, b.shape)
    if dims is None:
        return None
    leading, keep = dims
    summed = _sum_away(a, leading, keep)
    n = math.prod(a.shape[d] for d in leading + keep)
    fields: dict[str, Any] = {"dims": (*leading, *keep), "kept": tuple(keep),
                              "shapes": (tuple(a.shape), tuple(b.shape))}
    if close(summed):
        return Diagnosis("missing-sum", **fields)
    if close(summed / n):
        return Diagnosis("missing-mean", size=n, **fields)
    return None


def _diagnose_factor(a: torch.Tensor, b: torch.Tensor, close: Close, accumulation: bool
                     ) -> Diagnosis | None:
    """A constant factor c with manual == c * reference, named when recognised."""
    bb = float((b * b).sum())
    if bb == 0.0:
        return None
    c = float((a * b).sum()) / bb  # least-squares fit of manual ≈ c * reference
    if not math.isfinite(c) or c == 0.0 or not close(a / c):
        return None
    sizes = sorted({*a.shape, *b.shape, a.numel()} - {0, 1})
    # Candidate exact values, most telling first; each is verified, not assumed.
    named: list[tuple[float, int | None]] = []  # (value, the size N it is N or 1/N of)
    for k in (2, 3):
        named += [(float(k), None), (1.0 / k, None)]
    for n in sizes:
        named += [(float(n), n), (1.0 / n, n)]

    def verified(sign: float) -> list[tuple[float, int | None]]:
        return [
            (v, n) for v, n in named
            if math.isclose(sign * c, v, rel_tol=1e-3) and close(sign * a / v)
        ]  # fmt: skip

    hits = verified(1.0) or verified(-1.0)
    if hits:
        sign = 1 if c > 0 else -1
        exact = Fraction(c if sign > 0 else hits[0][0]).limit_denominator(10_000)
        readings = tuple(r for v, n in hits for r in _readings(v, n, accumulation))
        size = next((n for _, n in hits if n is not None), None)
        dims = () if size is None else tuple(d for d in range(a.ndim) if a.shape[d] == size)[:1]
        return Diagnosis("factor" if sign > 0 else "negative-factor", factor=sign * exact,
                         readings=tuple(dict.fromkeys(readings)), size=size, dims=dims)
    # Any two numbers differ by "a factor": only claim a generic factor when
    # it relates several non-zero entries at once, and is more than the difference
    # that round-off or an estimate makes (those are told as round-off or "near").
    if int((b.abs() > 0).sum()) < 2 or abs(c - 1) <= NEAR:
        return None
    return Diagnosis("rough-factor", factor=c)


def _readings(value: float, size: int | None, accumulation: bool) -> tuple[str, ...]:
    """How an exact factor may have come about, most telling first: a stray or missing
    factor 2 or 3, ``.grad`` accumulated, a mean where a sum belongs (1/N) or the reverse."""
    if size is not None:
        return ("mean",) if value < 1 else ("sum",)
    if value > 1:
        return ("stray", "accumulated") if accumulation else ("stray",)
    return ("missing", "reference-accumulated") if accumulation else ("missing",)


# --------------------------------------------------------------------------
# diagnose: the public face of this module
# --------------------------------------------------------------------------


def diagnose(
    manual: Any,
    reference: Any,
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> Diagnosis | None:
    """Name the most likely mistake that turns ``reference`` into ``manual``.

    Candidates (transposed, dimensions permuted, missing sum over a broadcast
    dimension, a sum kept as a size-1 dimension, right values in the wrong shape
    (a view not undone), sign flipped, constant factor
    such as 2, 1/2, N or 1/N, doubled/tripled by ``.grad`` accumulation, all
    zeros, NaN/inf, float32 round-off) are each *verified* with the same
    closeness test as :func:`backproplab.check.compare`; a diagnosis is only
    returned when it holds. When no single mistake fits, one mistake of
    arrangement (transpose, permutation, missing sum, shape) together with one
    of value (sign, factor) is tried (kind ``"two-mistakes"``, its sentence
    begins ``"two mistakes: "``). Last, a mismatch confined to a minority of rows
    (of entries, for 1-D) is located: which rows differ, and whether their sign is
    flipped. Returns ``None`` when the values already match or nothing fits.

    The result is a `Diagnosis`: ``print`` it for the sentence, or read its fields
    (``kind``, ``factor``, ``dims``, ...) in code.

    >>> import torch
    >>> ref = torch.tensor([1.0, 2.0, 3.0])
    >>> print(diagnose(-ref, ref))  # doctest: +ELLIPSIS
    the sign is flipped: your answer is the negative of the reference...
    >>> d = diagnose(torch.ones(4, 3), torch.full((3,), 4.0))
    >>> d.kind, d.dims
    ('missing-sum', (0,))
    >>> print(d)  # doctest: +ELLIPSIS
    you forgot to sum over dimension 0 (the broadcast batch dimension): ...
    >>> print(diagnose(-2 * ref.reshape(3, 1), ref))  # doctest: +ELLIPSIS
    two mistakes: the shape is wrong (.reshape(3,) lines up); with that undone, ...exactly -2 × ...
    """
    m = as_value(manual, "manual")
    r = as_value(reference, "reference")
    rtol_, atol_, _ = resolve_tolerance(m, r, rtol, atol)
    return name_mistake(*aligned(m, r), rtol_, atol_)
