"""A diagnosis as a value: what mistake turns the reference into an answer, and its words.

:mod:`backproplab.diagnosis` finds the mistake and returns a `Diagnosis`: a
``kind`` (a short key such as ``"transposed"`` or ``"factor"``) and the fields
that kind needs (the factor, the dimensions, the rows). Code compares the
fields; the sentence a learner reads is made only when the diagnosis is shown
(``str(d)``, ``d.likely()``), by the functions of this module.

>>> from fractions import Fraction
>>> print(Diagnosis("factor", factor=Fraction(1, 2), readings=("missing",)))
your answer is exactly 1/2 × the reference: a missing factor 2 (e.g. d(x²)/dx = 2x)
>>> print(Diagnosis("zeros", subject=("backward's result", "its")).likely())  # doctest: +ELLIPSIS
Likely mistake: backward's result is all zeros but the reference is not: ...
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .values import fmt, index_words, shape_text

__all__ = ["KINDS", "Diagnosis", "sentence"]


@dataclass(frozen=True)
class Diagnosis:
    """A named mistake, as data: its ``kind`` and the fields that kind needs.

    ``factor``: the answer is ``factor`` × the reference (a Fraction when exact, a float
    for ``"rough-factor"``); ``readings``: how an exact factor may have come about
    (``"stray"``, ``"missing"``, ``"accumulated"``, ``"reference-accumulated"``,
    ``"mean"``: 1/N, ``"sum"``: N); ``size``: that N, the entries a mean averaged, the
    entries (rows) in all; ``dims``: the dimensions concerned (``kept``: those summed
    with keepdim); ``shapes``: (the answer's, the reference's); ``rows``: the rows that
    differ; ``count``/``index``/``found``: how many entries are NaN or inf, the first
    one, which of the two; ``parts``: the mistakes a two-mistake diagnosis joins (or
    what else a backward ignoring grad_output gets wrong); ``subject``: how the answer
    is called in the sentence, and its short form.

    >>> d = Diagnosis("permuted", permutation=(2, 0, 1))
    >>> d.kind, str(d)
    ('permuted', 'the dimensions are in the wrong order: .permute(2, 0, 1) matches the reference')
    """

    kind: str
    factor: Fraction | float | None = None
    readings: tuple[str, ...] = ()
    size: int | None = None
    dims: tuple[int, ...] = ()
    kept: tuple[int, ...] = ()
    permutation: tuple[int, ...] = ()
    shapes: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
    rows: tuple[int, ...] = ()
    count: int = 0
    index: tuple[int, ...] = ()
    found: tuple[str, ...] = ()
    parts: tuple[Diagnosis, ...] = ()
    subject: tuple[str, str] = ("your answer", "yours")

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind: expected one of {', '.join(sorted(KINDS))}, "
                             f"got {self.kind!r}")

    def words(self) -> str:
        """The diagnosis in plain words."""
        return KINDS[self.kind](self, *self.subject)

    def __str__(self) -> str:
        return self.words()

    def likely(self) -> str:
        """As a check's message puts it: "Likely mistake: ..." or, for a pair, "Likely two
        mistakes: ..."."""
        if self.kind == "two-mistakes":
            return f"Likely two mistakes: {sentence(_pair(self, *self.subject))}"
        return f"Likely mistake: {sentence(self.words())}"


def sentence(text: str) -> str:
    """End a text with exactly one full stop (or its own question mark)."""
    return text if text.endswith((".", "?", "!")) else text + "."


def _dims_text(dims: Sequence[int]) -> str:
    """'dimension 0', 'dimensions 0 and 2'."""
    if len(dims) == 1:
        return f"dimension {dims[0]}"
    return "dimensions " + ", ".join(map(str, dims[:-1])) + f" and {dims[-1]}"


# --------------------------------------------------------------------------
# The words of each kind: (diagnosis, the answer's name, its short form) -> sentence
# --------------------------------------------------------------------------


def _nonfinite(d: Diagnosis, you: str, yours: str) -> str:
    where = f", first at {index_words(d.index)}" if d.index else ""
    count = f" ({d.count} of {d.size} entries{where})" if (d.size or 0) > 1 else ""
    return (f"{you} contains {' and '.join(d.found)}{count} while the reference is finite: "
            "look for a division by zero, log of 0 or sqrt of 0")


def _rows(d: Diagnosis, you: str, yours: str) -> str:
    bad, total = d.rows, d.size or 0
    unit, units = ("row", "rows") if len(d.shapes[0]) > 1 else ("entry", "entries")
    shown = ", ".join(map(str, bad[:6])) + (", ..." if len(bad) > 6 else "")
    where = f"{unit} {shown}" if len(bad) == 1 else f"{units} {shown}"
    others = f"the other {total - len(bad)} of {total} {units} match"
    if d.kind == "sign-in-rows":
        return f"the sign is flipped in {where} only ({others})"
    one = len(bad) == 1
    return (f"only {where} {'differs' if one else 'differ'} ({others}): look at what sets "
            f"{'it' if one else 'them'} apart, e.g. an index used more than once (each use "
            "adds its own contribution, as index_add_ does) or a point at the edge of a "
            "formula such as x = 0")


def _missing_sum(d: Diagnosis, you: str, yours: str) -> str:
    answer_shape = d.shapes[0]
    leading = [k for k in d.dims if k not in d.kept]
    if len(d.dims) == 1:
        k = d.dims[0]
        role = ("the broadcast batch dimension" if k == 0 and leading
                else f"size {answer_shape[k]} in {yours}, broadcast from size 1")
    else:
        role = "the broadcast dimensions"
    call = ""
    if d.kept:
        call += f".sum({d.kept[0] if len(d.kept) == 1 else d.kept}, keepdim=True)"
    if leading:
        call += f".sum({leading[0] if len(leading) == 1 else tuple(leading)})"
    what = _dims_text(d.dims)
    if d.kind == "missing-sum":
        return f"you forgot to sum over {what} ({role}): {call} of {you} matches the reference"
    return (f"you forgot to reduce over {what} ({role}); the reference is the mean, not the "
            f"sum: {call} / {d.size} of {you} matches it")


def _summed_away(d: Diagnosis, you: str, yours: str) -> str:
    return (f"you summed over {_dims_text(d.dims)} but the reference keeps "
            f"{'it' if len(d.dims) == 1 else 'them'}: a gradient has the shape of the tensor "
            "it belongs to, so do not reduce here")


def _size_one_left(d: Diagnosis, you: str, yours: str) -> str:
    mine, ref = d.shapes
    extra = len(mine) - len(ref)
    where = _dims_text(d.dims) if len(d.dims) == extra else f"{extra} size-1 dimension(s)"
    return (f"the sum is there, but keepdim=True (or an unsqueeze) left a size-1 dimension: "
            f"{yours} is {shape_text(mine)}, the reference {shape_text(ref)}; without {where} "
            f"{you} matches it (drop keepdim=True here)")


def _reshape(d: Diagnosis, you: str, yours: str) -> str:
    mine, ref = d.shapes
    if [s for s in mine if s != 1] == [s for s in ref if s != 1]:
        why = "a missing keepdim=True, or an extra squeeze/unsqueeze?"
    else:
        why = ("a view not undone: the gradient of x.view(...) or x.flatten() is the "
               "incoming gradient viewed back to x's shape")
    return (f"the values are right but the shape is not: .reshape{shape_text(ref)} matches "
            f"the reference ({why})")


def _size_words(d: Diagnosis, you: str) -> str:
    return (f"the size of dimension {d.dims[0]} of {you}" if d.dims
            else f"the number of elements of {you}")


def _factor(d: Diagnosis, you: str, yours: str) -> str:
    v = Fraction(d.factor or 0)
    k = int(max(v, 1 / v))  # the 2 or 3 of a stray or missing factor
    ideas = {
        "stray": ("a stray factor 2 (a term counted twice, or the power rule applied twice)"
                  if k == 2 else "a stray factor 3"),
        "accumulated": f"gradients accumulated over {k} backward passes because .grad was not "
                       "zeroed in between (call .grad.zero_() or optimizer.zero_grad())",
        "missing": "a missing factor 2 (e.g. d(x²)/dx = 2x)" if k == 2
        else "a missing factor 3 (e.g. d(x³)/dx = 3x²)",
        "reference-accumulated": f"the reference .grad accumulated {k} backward passes without "
                                 "zeroing (re-running a cell adds to .grad; call .grad.zero_() "
                                 "or zero_grad())",
        "mean": f"off by a factor of 1/N with N = {d.size}, {_size_words(d, you)}: did you average "
                "instead of sum?",
        "sum": f"off by a factor of N = {d.size}, {_size_words(d, you)}: did you sum where the "
               "forward pass takes a mean (a missing 1/N)?",
    }
    said = [ideas[r] for r in d.readings]
    head = f"{you} is exactly {v} × the reference"
    if len(said) == 1:
        return f"{head}: {said[0]}"
    return f"{head}; either " + ", or ".join(said)


def _negative_factor(d: Diagnosis, you: str, yours: str) -> str:
    frac = -Fraction(d.factor or 0)
    return (f"{you} is exactly -{frac} × the reference: the sign is flipped and it is off by "
            f"a factor of {frac}")


def _rough_factor(d: Diagnosis, you: str, yours: str) -> str:
    c = float(d.factor or 0)
    sign = "and the sign is flipped " if c < 0 else ""
    # As many digits as it takes to tell the factor from 1 (1.00012 is not "about 1").
    gap = abs(abs(c) - 1)
    digits = max(4, 2 - math.floor(math.log10(gap))) if gap > 0 else 4
    return (f"{you} is off by a constant factor of about {fmt(c, digits)} {sign}"
            f"({yours} ≈ {fmt(c, digits)} × reference)")


def _arrangement(d: Diagnosis, you: str) -> str:
    """The first of two mistakes, said as what undoing it lines up."""
    if d.kind == "transposed":
        return f"it is transposed ({you}'s .T lines up with the reference)"
    if d.kind == "permuted":
        return f"the dimensions are in the wrong order (.permute{d.permutation})"
    if d.kind == "missing-sum":
        return f"you forgot to sum over {_dims_text(d.dims)}"
    return f"the shape is wrong (.reshape{shape_text(d.shapes[1])} lines up)"


def _pair(d: Diagnosis, you: str, yours: str) -> str:
    arrangement, value = d.parts
    return (f"{_arrangement(arrangement, you)}; with that undone, "
            f"{KINDS[value.kind](value, you, yours)}")


def _ignored(d: Diagnosis, you: str, yours: str) -> str:
    if d.kind == "grad-output-ignored":
        return ("backward ignores grad_output: it returns the local derivative but must "
                "multiply it by the incoming gradient grad_output (chain rule)")
    text = ("backward ignores grad_output: it returns the same gradient whatever grad_output "
            "is, but the chain rule needs the local derivative multiplied by the incoming "
            "gradient grad_output")
    for also in d.parts:  # what else is wrong, said of backward's result
        text += "; also, even for grad_output all ones " + also.words()
    return text


def _fixed(text: str) -> Callable[[Diagnosis, str, str], str]:
    return lambda d, you, yours: text.format(you=you)


# Every kind a diagnosis can have, and how it is said.
KINDS: dict[str, Callable[[Diagnosis, str, str], str]] = {
    "nonfinite": _nonfinite,
    "zeros": _fixed("{you} is all zeros but the reference is not: is a term of the chain rule "
                    "missing, or was the path cut (detach, no_grad)?"),
    "transposed": _fixed("it is transposed: {you}'s .T matches the reference (swap the matmul "
                         "order?)"),
    "reversed-shape": _fixed("it looks transposed (the shape is reversed), though the values "
                             "differ too"),
    "permuted": lambda d, you, yours: (f"the dimensions are in the wrong order: "
                                       f".permute{d.permutation} matches the reference"),
    "sign": _fixed("the sign is flipped: {you} is the negative of the reference (a minus sign "
                   "lost or added in the chain rule?)"),
    "factor": _factor,
    "negative-factor": _negative_factor,
    "rough-factor": _rough_factor,
    "round-off-64": _fixed("the difference is float64 round-off: the same numbers added or "
                           "multiplied in another order (they agree to rtol=1e-12)"),
    "round-off-32": _fixed("the difference is small enough to be float32 round-off (they "
                           "agree to rtol=1e-4): part of the computation probably ran in "
                           "float32"),
    "near": _fixed("the difference is small (they agree to rtol=1e-4) but too large for "
                   "float64 round-off, and the values are not float32's: near the gradient, "
                   "not equal to it, as an estimate such as finite differences is"),
    "rows": _rows,
    "sign-in-rows": _rows,
    "missing-sum": _missing_sum,
    "missing-mean": _missing_sum,
    "summed-away": _summed_away,
    "size-one-left": _size_one_left,
    "reshape": _reshape,
    "two-mistakes": lambda d, you, yours: "two mistakes: " + _pair(d, you, yours),
    "grad-output-ignored": _ignored,
    "grad-output-unused": _ignored,
}
