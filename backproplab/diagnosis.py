"""Naming the mistake: what turns the reference into a learner's answer.

`diagnose` tries the common slips one by one (transposed, a missing sum over
a broadcast dimension, a flipped sign, a constant factor, accumulated
``.grad``, all zeros, float32 round-off) and names one only when it holds.
:mod:`backproplab.check` asks for a diagnosis only when an answer is
wrong; the conversion and the closeness test both use are in
:mod:`backproplab.values`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import torch

from .values import (
    TWO_MISTAKES,
    aligned,
    all_close,
    as_value,
    close_mask,
    fmt,
    index_text,
    resolve_tolerance,
    shape_text,
)

__all__ = ["diagnose", "name_mistake"]


def name_mistake(
    a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float, *, accumulation: bool = True
) -> str | None:
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
        kinds = " and ".join(
            k for k, mask in (("NaN", a.isnan()), ("inf", a.isinf())) if mask.any()
        )
        first = index_text(int(bad_a.flatten().nonzero()[0]), a.shape)
        where = f", first at {first}" if first else ""
        count = f" ({int(bad_a.sum())} of {a.numel()} entries{where})" if a.numel() > 1 else ""
        return (
            f"your answer contains {kinds}{count} "
            "while the reference is finite: look for a division by zero, log of 0 or sqrt of 0"
        )
    if not torch.isfinite(b).all():
        # Around an inf in the reference only a flipped sign can still be judged.
        if a.shape == b.shape and close(-a):
            return _value_mistake(a, b, close, accumulation)
        return None

    if a.shape != b.shape:
        return _diagnose_shape(a, b, rtol, atol, accumulation)

    if b.abs().max() > atol and bool((a == 0).all()):
        return (
            "your answer is all zeros but the reference is not: is a term of the chain rule "
            "missing, or was the path cut (detach, no_grad)?"
        )
    if a.ndim == 2 and a.shape[0] == a.shape[1] and close(a.T):
        return "it is transposed: your answer's .T matches the reference (swap the matmul order?)"
    if a.ndim > 2:
        perm = _find_permutation(a, b, close)
        if perm is not None:
            return f"the dimensions are in the wrong order: .permute{perm} matches the reference"
    value = _value_mistake(a, b, close, accumulation)
    if value is not None:
        return value
    # Right up to round-off, but the tolerance is tighter than the arithmetic.
    if all_close(a, b, max(rtol, 1e-12), atol):
        return (
            "the difference is float64 round-off: the same numbers added or multiplied in "
            "another order (they agree to rtol=1e-12)"
        )
    if all_close(a, b, max(rtol, 1e-4), atol):
        return (
            "the difference is small enough to be float32 round-off (they agree to rtol=1e-4): "
            "part of the computation probably ran in float32"
        )
    return _two_mistakes(a, b, close, accumulation) or _diagnose_rows(a, b, rtol, atol)


def _diagnose_rows(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> str | None:
    """A mismatch confined to a few rows (entries of a 1-D tensor): say which.

    A gradient wrong in only some rows points at what sets those rows apart:
    an embedding row looked up twice whose two contributions were not added,
    or a point at the edge of a piecewise formula (x = 0 for ReLU or abs).
    """
    if a.ndim == 0 or a.shape[0] < 2:
        return None
    row_ok = close_mask(a, b, rtol, atol).reshape(a.shape[0], -1).all(dim=1)
    bad = (~row_ok).nonzero().flatten().tolist()
    if not bad or 2 * len(bad) > len(row_ok):
        return None  # most rows differ: nothing sets the few right ones apart
    unit, units = ("row", "rows") if a.ndim > 1 else ("entry", "entries")
    shown = ", ".join(map(str, bad[:6])) + (", ..." if len(bad) > 6 else "")
    where = f"{unit} {shown}" if len(bad) == 1 else f"{units} {shown}"
    others = f"the other {len(row_ok) - len(bad)} of {len(row_ok)} {units} match"
    if all(all_close(-a[i], b[i], rtol, atol) for i in bad):
        return f"the sign is flipped in {where} only ({others})"
    return (
        f"only {where} {'differs' if len(bad) == 1 else 'differ'} ({others}): look at what "
        f"sets {'it' if len(bad) == 1 else 'them'} apart, e.g. an index used more than once "
        "(each use adds its own contribution, as index_add_ does) or a point at the edge of "
        "a formula such as x = 0"
    )


def _value_mistake(
    a: torch.Tensor, b: torch.Tensor, close: Callable[[torch.Tensor], bool], accumulation: bool
) -> str | None:
    """A flipped sign or a constant factor between same-shaped ``a`` and ``b``."""
    if close(-a):
        return (
            "the sign is flipped: your answer is the negative of the reference "
            "(a minus sign lost or added in the chain rule?)"
        )
    return _diagnose_factor(a, b, close, accumulation)


def _two_mistakes(
    a: torch.Tensor, b: torch.Tensor, close: Callable[[torch.Tensor], bool], accumulation: bool
) -> str | None:
    """One mistake of arrangement (transpose, dimension order, a missing sum,
    a shape) and one of value (sign, factor) together: undo the first, then
    name the second. Each pairing is verified on the numbers."""
    for what, fixed in _rearrangements(a, b):
        value = _value_mistake(fixed, b, close, accumulation)
        if value is not None:
            return f"{TWO_MISTAKES}{what}; with that undone, {value}"
    return None


def _rearrangements(a: torch.Tensor, b: torch.Tensor):
    """(description, rearranged a) for each single rearrangement of ``a``
    that gives the reference's shape."""
    if a.ndim == 2 and a.T.shape == b.shape:
        yield "it is transposed (your answer's .T lines up with the reference)", a.T
    if a.ndim > 2 and sorted(a.shape) == sorted(b.shape):
        for perm, p in _permutations(a, b.shape):
            yield f"the dimensions are in the wrong order (.permute{perm})", p
    dims = _broadcast_dims(a.shape, b.shape)
    if dims is not None:
        leading, keep = dims
        summed = _sum_away(a, leading, keep)
        yield f"you forgot to sum over {_dims_text(leading + keep)}", summed
    if a.shape != b.shape and a.numel() == b.numel():
        yield f"the shape is wrong (.reshape{shape_text(b.shape)} lines up)", a.reshape(b.shape)


def _permutations(a: torch.Tensor, shape: torch.Size):
    """(perm, a.permute(perm)) for every non-identity order of a's dimensions
    that gives ``shape``; none beyond 5 dimensions (720 orders is the most
    worth trying)."""
    if a.ndim > 5:
        return
    for perm in itertools.permutations(range(a.ndim)):
        p = a.permute(perm)
        if perm != tuple(range(a.ndim)) and p.shape == shape:
            yield perm, p


def _find_permutation(
    a: torch.Tensor, b: torch.Tensor, close: Callable[[torch.Tensor], bool]
) -> tuple[int, ...] | None:
    return next((perm for perm, p in _permutations(a, b.shape) if close(p)), None)
    for perm in itertools.permutations(range(a.ndim)):
        if perm == tuple(range(a.ndim)):
            continue
        p = a.permute(perm)
        if p.shape == b.shape and close(p):
            return perm
    return None


def _diagnose_shape(
    a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float, accumulation: bool
) -> str | None:
    """Mistakes that change the shape: transpose, missing reduction, reshape."""

    def close(x: torch.Tensor) -> bool:
        return all_close(x, b, rtol, atol)

    if a.ndim == 2 and a.T.shape == b.shape and close(a.T):
        return "it is transposed: your answer's .T matches the reference (swap the matmul order?)"
    if a.ndim > 2 and sorted(a.shape) == sorted(b.shape):
        perm = _find_permutation(a, b, close)
        if perm is not None:
            return f"the dimensions are in the wrong order: .permute{perm} matches the reference"
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
        reduced = _sum_away(b, leading, keep)
        if all_close(a, reduced, rtol, atol):
            return (
                f"you summed over {_dims_text(leading + keep)} but the reference keeps "
                f"{'it' if len(leading + keep) == 1 else 'them'}: a gradient has the shape of "
                "the tensor it belongs to, so do not reduce here"
            )
    if a.numel() == b.numel() and close(a.reshape(b.shape)):
        if _squeezed(a.shape) == _squeezed(b.shape):
            why = "a missing keepdim=True, or an extra squeeze/unsqueeze?"
        else:
            why = ("a view not undone: the gradient of x.view(...) or x.flatten() is the "
                   "incoming gradient viewed back to x's shape")
        return (
            f"the values are right but the shape is not: .reshape{shape_text(b.shape)} matches "
            f"the reference ({why})"
        )
    return _two_mistakes(a, b, close, accumulation)


def _squeezed(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(s for s in shape if s != 1)


def _size_one_left(
    a: torch.Tensor, b: torch.Tensor, close: Callable[[torch.Tensor], bool]
) -> str | None:
    """The reduction is there, but ``a`` keeps it as size-1 dimensions the reference
    does not have (a ``keepdim=True`` too many, or an ``unsqueeze``)."""
    extra = a.ndim - b.ndim
    if extra <= 0 or _squeezed(a.shape) != _squeezed(b.shape):
        return None
    dims = [d for d in range(a.ndim) if a.shape[d] == 1]
    if not close(a.reshape(b.shape)):
        return None
    where = _dims_text(dims) if len(dims) == extra else f"{extra} size-1 dimension(s)"
    return (
        f"the sum is there, but keepdim=True (or an unsqueeze) left a size-1 dimension: "
        f"yours is {shape_text(a.shape)}, the reference {shape_text(b.shape)}; without "
        f"{where} your answer matches it (drop keepdim=True here)"
    )


def _dims_text(dims: Sequence[int]) -> str:
    if len(dims) == 1:
        return f"dimension {dims[0]}"
    return "dimensions " + ", ".join(map(str, dims[:-1])) + f" and {dims[-1]}"


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


def _diagnose_missing_sum(
    a: torch.Tensor, b: torch.Tensor, close: Callable[[torch.Tensor], bool]
) -> str | None:
    """``a`` has extra (broadcast) dimensions that should have been summed away."""
    dims = _broadcast_dims(a.shape, b.shape)
    if dims is None:
        return None
    leading, keep = dims
    summed = _sum_away(a, leading, keep)
    all_dims = leading + keep
    n = math.prod(a.shape[d] for d in all_dims)
    if len(all_dims) == 1:
        d = all_dims[0]
        role = (
            "the broadcast batch dimension" if d == 0 and leading
            else f"size {a.shape[d]} in yours, broadcast from size 1"
        )  # fmt: skip
    else:
        role = "the broadcast dimensions"
    call = ""
    if keep:
        call += f".sum({keep[0] if len(keep) == 1 else tuple(keep)}, keepdim=True)"
    if leading:
        call += f".sum({leading[0] if len(leading) == 1 else tuple(leading)})"
    what = _dims_text(all_dims)
    if close(summed):
        return (
            f"you forgot to sum over {what} ({role}): {call} of your answer matches the reference"
        )
    if close(summed / n):
        return (
            f"you forgot to reduce over {what} ({role}); the reference is the mean, not the sum: "
            f"{call} / {n} of your answer matches it"
        )
    return None


def _diagnose_factor(
    a: torch.Tensor, b: torch.Tensor, close: Callable[[torch.Tensor], bool], accumulation: bool
) -> str | None:
    """A constant factor c with manual == c * reference, named when recognised."""
    bb = float((b * b).sum())
    if bb == 0.0:
        return None
    c = float((a * b).sum()) / bb  # least-squares fit of manual ≈ c * reference
    if not math.isfinite(c) or c == 0.0 or not close(a / c):
        return None
    sizes = sorted({*a.shape, *b.shape, a.numel()} - {0, 1})
    # Candidate exact values, most telling first; each is verified, not assumed.
    named: list[tuple[float, str]] = []
    for k in (2, 3):
        named.append((float(k), f"{k}"))
        named.append((1.0 / k, f"1/{k}"))
    for n in sizes:
        named.append((float(n), f"N = {n}"))
        named.append((1.0 / n, f"1/N = 1/{n}"))

    def verified(sign: float) -> list[tuple[float, str]]:
        return [
            (v, label) for v, label in named
            if math.isclose(sign * c, v, rel_tol=1e-3) and close(sign * a / v)
        ]  # fmt: skip

    hits = verified(1.0)
    if hits:
        return _factor_sentence(c, [label for _, label in hits], a, b, accumulation)
    hits_neg = verified(-1.0)
    if hits_neg:
        frac = _fraction_text(hits_neg[0][0])
        return (
            f"your answer is exactly -{frac} × the reference: the sign is flipped and it is "
            f"off by a factor of {frac}"
        )
    # Any two numbers differ by "a factor": only claim a generic factor when
    # it relates several non-zero entries at once.
    if int((b.abs() > 0).sum()) < 2:
        return None
    sign = "and the sign is flipped " if c < 0 else ""
    return (
        f"your answer is off by a constant factor of about {fmt(c)} {sign}"
        f"(yours ≈ {fmt(c)} × reference)"
    )


def _fraction_text(v: float) -> str:
    f = Fraction(v).limit_denominator(10_000)
    return str(f)


def _dims_of_size(n: int, a: torch.Tensor, b: torch.Tensor) -> str:
    for t, whose in ((a, "your answer"), (b, "the reference")):
        dims = [i for i, s in enumerate(t.shape) if s == n]
        if dims:
            d = dims[0]
            return f"the size of dimension {d}" + ("" if t is a else f" of {whose}")
    return "the number of elements"


def _factor_sentence(
    c: float, labels: list[str], a: torch.Tensor, b: torch.Tensor, accumulation: bool
) -> str:
    ideas: list[str] = []
    v = Fraction(c).limit_denominator(10_000)
    for label in labels:
        if label in ("2", "3"):
            k = int(label)
            ideas.append(
                f"a stray factor {k} (e.g. the power rule applied twice)"
                if k == 2 else "a stray factor 3"
            )  # fmt: skip
            if accumulation:
                ideas.append(
                    f"gradients accumulated over {k} backward passes because .grad was not "
                    "zeroed in between (call .grad.zero_() or optimizer.zero_grad())"
                )
        elif label in ("1/2", "1/3"):
            k = int(label[-1])
            ideas.append(
                "a missing factor 2 (e.g. d(x²)/dx = 2x)"
                if k == 2
                else "a missing factor 3 (e.g. d(x³)/dx = 3x²)"
            )
            if accumulation:
                ideas.append(
                    f"the reference .grad accumulated {k} backward passes without zeroing "
                    "(re-running a cell adds to .grad; call .grad.zero_() or zero_grad())"
                )
        elif label.startswith("1/N"):
            n = int(label.split("/")[-1])
            ideas.append(
                f"off by a factor of 1/N with N = {n}, {_dims_of_size(n, a, b)}: "
                "did you average instead of sum?"
            )
        elif label.startswith("N"):
            n = int(label.split("= ")[-1])
            ideas.append(
                f"off by a factor of N = {n}, {_dims_of_size(n, a, b)}: "
                "did you sum where the forward pass takes a mean (a missing 1/N)?"
            )
    # Keep one sentence per distinct idea, in order.
    seen: list[str] = []
    for idea in ideas:
        if idea not in seen:
            seen.append(idea)
    head = f"your answer is exactly {v} × the reference"
    if len(seen) == 1:
        return f"{head}: {seen[0]}"
    return f"{head}; either " + ", or ".join(seen)


# --------------------------------------------------------------------------
# diagnose: the public face of this module
# --------------------------------------------------------------------------


def diagnose(
    manual: Any,
    reference: Any,
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> str | None:
    """Name the most likely mistake that turns ``reference`` into ``manual``.

    Candidates (transposed, dimensions permuted, missing sum over a broadcast
    dimension, a sum kept as a size-1 dimension, right values in the wrong shape
    (a view not undone), sign flipped, constant factor
    such as 2, 1/2, N or 1/N, doubled/tripled by ``.grad`` accumulation, all
    zeros, NaN/inf, float32 round-off) are each *verified* with the same
    closeness test as :func:`backproplab.check.compare`; a diagnosis is only
    returned when it holds. When no single mistake fits, one mistake of
    arrangement (transpose, permutation, missing sum, shape) together with one
    of value (sign, factor) is tried, and the text then begins ``"two mistakes: "``.
    Last, a mismatch confined to a minority of rows (of entries, for 1-D) is
    located: which rows differ, and whether their sign is flipped.
    Returns ``None`` when the values already match or nothing fits.

    >>> import torch
    >>> ref = torch.tensor([1.0, 2.0, 3.0])
    >>> print(diagnose(-ref, ref))  # doctest: +ELLIPSIS
    the sign is flipped: your answer is the negative of the reference...
    >>> diagnose(torch.ones(4, 3), torch.full((3,), 4.0))  # doctest: +ELLIPSIS
    'you forgot to sum over dimension 0 (the broadcast batch dimension): ...'
    >>> print(diagnose(-2 * ref.reshape(3, 1), ref))  # doctest: +ELLIPSIS
    two mistakes: the shape is wrong (.reshape(3,) lines up); with that undone, ...exactly -2 × ...
    """
    m = as_value(manual, "manual")
    r = as_value(reference, "reference")
    rtol_, atol_, _ = resolve_tolerance(m, r, rtol, atol)
    return name_mistake(*aligned(m, r), rtol_, atol_)
