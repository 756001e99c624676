"""What is wrong with a by-hand answer, named only where it holds on every trial.

`backproplab.course.byhand` runs an answer on a few new inputs and hands the
results here as trials (inputs, the answer's result, the reference). For each
output that disagrees, `judge` says what the learner most likely did, and
says it only when it holds on every trial: one of the exercise's typical slips
(a function computing the wrong answer it describes), a mean where a sum
belongs, a result right only where a plain-number argument takes some values,
float32 arithmetic, a numerical estimate's precision, or a diagnosis of
`backproplab.diagnosis` (transposed, a constant factor, a flipped sign) that
every failed trial shares. Otherwise it gives the exercise's advice and the
numbers.

>>> import torch
>>> x = torch.tensor([1.0, 2.0], dtype=torch.float64)
>>> run = Trial((x,), (x,), (2 * x,))
>>> print(judge("dz/dx", 0, [run], {"the factor 2 is missing": lambda x: x}, "", None, None)
...       .message)  # doctest: +ELLIPSIS
on new inputs (shape 2): the factor 2 is missing.
  worst entry [1]: yours 2, expected 4; ...
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..check import Check, Report, compare
from ..diagnosis import Diagnosis
from ..values import relative

__all__ = ["BY_HAND_RTOL", "ESTIMATE_RTOL", "Trial", "as_outputs", "fail", "fresh", "hard_coded",
           "input_name", "judge", "shapes"]

# A derived float64 formula agrees with autograd to round-off, about 1e-16 of the
# gradient's size: the worst over every by-hand exercise of the lessons is 4.5e-16.
# Central differences agree to about 1e-10 at best, a Richardson-extrapolated
# stencil to about 1e-12. The pass line sits between, with room for round-off.
BY_HAND_RTOL = 1e-13
# Closer than this, but not to round-off: an estimate, or float32 arithmetic.
ESTIMATE_RTOL = 1e-5


@dataclass
class Trial:
    """One trial of a by-hand check: the inputs, the answer's results, the reference's."""

    inputs: tuple[Any, ...]
    got: tuple[Any, ...]
    ref: tuple[Any, ...]


def as_outputs(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def fresh(inputs: Sequence[Any]) -> tuple[Any, ...]:
    """Independent copies, so neither side can change what the other sees."""
    return tuple(t.detach().clone() if isinstance(t, torch.Tensor) else t for t in inputs)


def shapes(inputs: Sequence[Any], params: Sequence[str] = ()) -> str:
    """The inputs' shapes, then any plain numbers: "shapes 3x4, 4 and the number 2.5";
    each named when ``params`` names them all: "x of shape 3x4, w of shape 4, eps = 2.5"."""
    if params and len(params) >= len(inputs):
        return ", ".join(
            f"{name} of shape " + ("x".join(map(str, t.shape)) or "()")
            if isinstance(t, torch.Tensor) else f"{name} = {t!r}"
            for name, t in zip(params, inputs, strict=False))
    shapes = ["x".join(map(str, t.shape)) or "scalar" for t in inputs
              if isinstance(t, torch.Tensor)]
    others = [repr(t) for t in inputs if not isinstance(t, torch.Tensor)]
    text = ("shape " if len(shapes) == 1 else "shapes ") + ", ".join(shapes) if shapes else ""
    if others:
        numbers = ("the number " if len(others) == 1 else "the numbers ") + ", ".join(others)
        text = f"{text} and {numbers}" if text else numbers
    return text


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two answers are identical (used to spot answers that ignore their inputs)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True


def _one_number(answers: list[tuple[Any, ...]]) -> bool:
    """Whether every answer, on every input, is filled with one and the same number
    (a hard-coded value broadcast to the input's shape, say)."""
    values = set()
    for answer in answers:
        for value in answer:
            if isinstance(value, torch.Tensor):
                values.update(value.detach().reshape(-1).tolist())
            elif isinstance(value, (int, float)):
                values.add(value)
            else:
                return False
    return len(values) == 1


def fail(name: str, message: str, verdict: str = "fail") -> Report:
    return Report((Check(name, False, verdict, message),))


def _tolerance(ref: Any, rtol: float | None, atol: float | None) -> tuple[Any, Any]:
    """The by-hand tolerance for one reference: round-off relative to its size."""
    if rtol is not None or atol is not None:
        return rtol, atol
    if not (isinstance(ref, torch.Tensor) and (ref.is_floating_point() or ref.is_complex())
            ) and not isinstance(ref, (float, complex)):
        return None, None  # integers (byte counts, say) are compared exactly
    return BY_HAND_RTOL, BY_HAND_RTOL * _scale(ref)


def _compare(label: str, got: Any, want: Any, ref: Any, rtol: float | None,
             atol: float | None, explain: bool = False) -> Report:
    """`compare` with the by-hand tolerance of ``ref``; the mistake is named only when
    asked (``explain``): most comparisons here need only the verdict. The reference is
    the check's own, so no ``.grad`` of it can have accumulated."""
    rtol, atol = _tolerance(ref, rtol, atol)
    return compare(label, got, want, rtol=rtol, atol=atol, explain=explain, accumulation=False)


def _wide(value: Any) -> torch.Tensor:
    """A value as a float64 tensor, or complex128 when it is complex."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        return t.to(torch.complex128 if t.is_complex() else torch.float64)
    return torch.as_tensor(value, dtype=torch.complex128 if isinstance(value, complex)
                           else torch.float64)


def _scale(value: Any) -> float:
    t = _wide(value).abs()  # a complex entry's size is its modulus
    t = t[torch.isfinite(t)]
    return float(t.max()) if t.numel() else 0.0


def judge(
    label: str,
    i: int,
    runs: list[Trial],
    mistakes: Mapping[str, Callable[..., Any]] | None,
    advice: str,
    rtol: float | None,
    atol: float | None,
    params: Sequence[str] = (),
    labels: Sequence[str] = (),
    reference: Callable[..., Any] | None = None,
) -> Check | None:
    """None when output ``i`` agrees on every trial; else the failed check, naming
    only what holds on every trial (``labels`` names every output, to say which two
    are swapped; ``reference``, the exercise's, tests whether an argument is ignored)."""
    results = [_compare(label, r.got[i], r.ref[i], r.ref[i], rtol, atol)[0]
               for r in runs]
    failed = [(r, c) for r, c in zip(runs, results, strict=True) if not c.ok]
    if not failed:
        return None
    first, check = failed[0]
    where = f"on new inputs ({shapes(first.inputs, params)})"

    def told(text: str) -> Check:
        """The failed check saying ``text``, with the first failed trial's numbers."""
        return Check(label, False, check.verdict, f"{where}: {text}", numbers=check.numbers)

    low = _lower_precision(runs, i)
    if low is not None:
        return told(f"your result is {low} while the inputs are float64, so it agrees only to "
                    f"{low} precision: a tensor made with torch.zeros, torch.ones or torch.tensor "
                    "without dtype= is float32 (pass dtype=x.dtype)")
    if rtol is None and atol is None and all(
            c.ok or _estimate_close(r.got[i], r.ref[i]) for r, c in zip(runs, results,
                                                                         strict=True)):
        worst = max(relative(r.got[i], r.ref[i]) for r in runs)
        return told(
            f"it agrees with autograd only to {worst:.0e} of the gradient's size. A formula "
            "derived by hand agrees to round-off (about 1e-16); a numerical estimate such as "
            "finite differences only to about 1e-9, which is what this looks like. Derive the "
            "formula (if you did, look for a constant written with too few digits).")
    slip = _named_mistake(mistakes, runs, i, rtol, atol)
    if slip:
        return told(f"{slip}.")
    partner = _swap_partner(i, runs, rtol, atol)
    if partner is not None and partner < len(labels):
        return told(f"{label} and {labels[partner]} are swapped: each is right, but returned in "
                    f"the other's place (return them in the order {', '.join(labels)}).")
    averaged = _mean_or_sum(runs, i, rtol, atol, params)
    if averaged:
        return told(f"{averaged}.")
    shaped = next(((r, c) for r, c in failed if c.verdict == "shape"), None)
    if shaped is not None and len(failed) < len(runs):  # the plainest fact comes first
        run, wrong = shaped
        return Check(label, False, "shape", f"on new inputs ({shapes(run.inputs, params)}): "
                     f"{wrong.text}; it matches on {len(runs) - len(failed)} of {len(runs)} "
                     f"new inputs. {advice}")
    if len(failed) < len(runs):
        follows = _follows_argument(runs, [r for r, _ in failed], params, reference, i,
                                    rtol, atol)
        return told(
            f"it matches on {len(runs) - len(failed)} of {len(runs)} new inputs but not on "
            "these: " + (follows or "look at what sets them apart (a repeated index, a size-1 "
                         "dimension, a point at the edge of a formula)") + f". {advice}")
    common = _common_diagnosis(label, i, failed, rtol, atol, params)
    if common is not None:
        return common
    if check.verdict == "shape":
        return Check(label, False, "shape", f"{where}: {check.text}. {advice}")
    return told(f"mismatch, and no single common mistake explains it on every input. {advice}")


def _common_diagnosis(label: str, i: int, failed: list[tuple[Trial, Check]],
                      rtol: float | None, atol: float | None,
                      params: Sequence[str] = ()) -> Check | None:
    """The failed check naming the mistake `compare` diagnoses on every failed trial, or
    None. Trials are diagnosed one at a time, and no further once one names another."""
    diagnosed: list[tuple[Trial, Check]] = []
    for run, _ in failed:
        check = _compare(label, run.got[i], run.ref[i], run.ref[i], rtol, atol, explain=True)[0]
        if check.diagnosis is None or (diagnosed and not _same_mistake(
                diagnosed[0][1].diagnosis, diagnosed[0][0], check.diagnosis, run)):
            return None
        diagnosed.append((run, check))
    # The claim holds on every trial; show the trial whose diagnosis claims least (a size
    # that happens to equal 2 on one trial adds "or N = 2" there only), the smallest of
    # those (its numbers are the easiest to follow).
    run, shown = min(diagnosed, key=lambda rc: (_claims(rc[1].diagnosis), _entries(rc[0])))
    return dataclasses.replace(shown, text=f"on new inputs ({shapes(run.inputs, params)}): "
                                           f"{shown.text}")


def _lower_precision(runs: list[Trial], i: int) -> str | None:
    """'float32' when the answer is less precise than its float64 reference on every trial."""
    dtypes = set()
    for r in runs:
        got, ref = r.got[i], r.ref[i]
        if not (isinstance(got, torch.Tensor) and isinstance(ref, torch.Tensor)
                and ref.dtype == torch.float64 and got.is_floating_point()
                and got.dtype != torch.float64):
            return None
        dtypes.add(str(got.dtype).removeprefix("torch."))
    return dtypes.pop() if len(dtypes) == 1 else None


def _estimate_close(got: Any, ref: Any) -> bool:
    """Close to the reference the way an estimate is: within ESTIMATE_RTOL of its size."""
    return relative(got, ref) <= ESTIMATE_RTOL


def _sizes(run: Trial) -> set[int]:
    """The sizes of one trial: every dimension and entry count above 1 of its tensors."""
    return {s for t in (*run.inputs, *run.ref) if isinstance(t, torch.Tensor)
            for s in (*t.shape, t.numel()) if s > 1}


# What each kind of diagnosis states, field by field: two trials name the same mistake
# when these agree. The rest (the shapes, where the first NaN is, the size of a dimension
# summed over, which size-1 dimensions a kept sum left) is where the mistake showed on
# that trial.
_CLAIM = {
    "nonfinite": ("found",),
    "permuted": ("permutation",),
    "missing-sum": ("dims", "kept"),
    "missing-mean": ("dims", "kept"),
    "summed-away": ("dims",),
    "rows": ("rows",),
    "sign-in-rows": ("rows",),
}


def _same_mistake(first: Diagnosis | None, run: Trial, other: Diagnosis | None,
                  other_run: Trial) -> bool:
    """Whether two trials' diagnoses name the same mistake: the same kind and the same
    fields, a factor included, except that a factor of N or 1/N agrees where N is each
    trial's own size ("1/N = 1/4" on one trial and "1/N = 1/6" on another agree; "a
    factor of about 1.3" and "about 2.7" do not)."""
    if first is None or other is None or first.kind != other.kind:
        return False
    if len(first.parts) != len(other.parts) or not all(
            _same_mistake(a, run, b, other_run)
            for a, b in zip(first.parts, other.parts, strict=True)):
        return False
    if first.kind in ("factor", "negative-factor"):
        return first.factor == other.factor or (
            bool({"mean", "sum"} & set(first.readings) & set(other.readings))
            and (first.factor or 0) * (other.factor or 0) > 0
            and first.size in _sizes(run) and other.size in _sizes(other_run))
    if first.kind == "rough-factor":  # the same to the digits the sentence shows
        return math.isclose(first.factor or 0, other.factor or 0, rel_tol=1e-3)
    return all(getattr(first, f) == getattr(other, f) for f in _CLAIM.get(first.kind, ()))


def _entries(run: Trial) -> int:
    return sum(t.numel() for t in run.inputs if isinstance(t, torch.Tensor))


def _claims(d: Diagnosis | None) -> int:
    """How many ways a diagnosis says its mistake may have come about (fewest is plainest)."""
    return 0 if d is None else len(d.readings) + sum(_claims(p) for p in d.parts)


def _named_mistake(
    mistakes: Mapping[str, Callable[..., Any]] | None,
    runs: list[Trial],
    i: int,
    rtol: float | None,
    atol: float | None,
) -> str | None:
    """The first slip whose wrong answer the learner's result equals on every trial, in
    output ``i`` and in every other output the slip changes (a slip of two outputs is not
    named when only one of them went wrong)."""
    for description, wrong in (mistakes or {}).items():
        try:
            if all(_slip_holds(description, r, as_outputs(wrong(*fresh(r.inputs))), i,
                               rtol, atol) for r in runs):
                return description
        except Exception:  # a slip that does not apply to this output
            continue
    return None


def _slip_holds(description: str, run: Trial, wrong: tuple[Any, ...], i: int,
                rtol: float | None, atol: float | None) -> bool:
    def agree(j: int, value: Any) -> bool:
        return _compare(description, run.got[j], value, run.ref[j], rtol, atol).ok

    if not agree(i, wrong[i]):
        return False
    changed = [j for j in range(len(run.ref)) if j != i and j < len(wrong)
               and not _compare(description, wrong[j], run.ref[j], run.ref[j], rtol, atol).ok]
    return all(agree(j, wrong[j]) for j in changed)


def input_name(k: int, params: Sequence[str]) -> str:
    return params[k] if k < len(params) else f"argument {k + 1}"


def _mean_or_sum(runs: list[Trial], i: int, rtol: float | None, atol: float | None,
                  params: Sequence[str]) -> str | None:
    """'exactly 1/N x the reference' when N is the number of entries along the same
    dimensions of the same input on every trial (a mean where a sum belongs), or 'exactly
    N x' (a sum where the loss takes a mean). Where N is 2 (or 3) on every trial, a missing
    (or stray) factor 2 (or 3) is as likely, and said too."""
    first = runs[0].inputs
    for k, x in enumerate(first):
        if not isinstance(x, torch.Tensor) or x.ndim == 0 or x.ndim > 4:
            continue
        for r in range(1, x.ndim + 1):
            for dims in itertools.combinations(range(x.ndim), r):
                sizes = _sizes_along(runs, k, dims)
                if sizes is None or min(sizes) < 2:
                    continue
                for power in (1, -1):  # got * N == ref: a mean; got / N == ref: a sum
                    if all(_compare("", run.got[i] * n ** power
                                    if isinstance(run.got[i], torch.Tensor) else None,
                                    run.ref[i], run.ref[i], rtol, atol).ok
                           for run, n in zip(runs, sizes, strict=True)):
                        return _factor_words(power, sizes, r, dims, input_name(k, params))
    return None


def _factor_words(power: int, sizes: list[int], r: int, dims: tuple[int, ...],
                  name: str) -> str:
    """The words for a result N times (``power`` -1) or 1/N times (1) the reference, N
    the number of entries along ``dims`` of input ``name``."""
    what = ("the size of " if r == 1 else "the number of entries along ") + (
        f"dimension {dims[0]}" if r == 1
        else "dimensions " + ", ".join(map(str, dims[:-1])) + f" and {dims[-1]}")
    if power == -1:
        sum_ = f"({what} of {name}): a sum where the loss takes a mean (a missing 1/N)"
        if len(set(sizes)) == 1 and sizes[0] in (2, 3):
            return (f"your answer is exactly {sizes[0]} × the reference; either a stray factor "
                    f"{sizes[0]}, or N = {sizes[0]} {sum_}")
        return f"your answer is exactly N × the reference, N = {sizes[0]} {sum_}"
    mean = (f"({what} of {name}): a mean where the gradient needs a sum (every entry's "
            "contribution adds up, none is averaged)")
    if len(set(sizes)) == 1 and sizes[0] in (2, 3):
        n = sizes[0]
        return (f"your answer is exactly 1/{n} × the reference; either a missing "
                f"factor {n}, or 1/N with N = {n} {mean}")
    return f"your answer is exactly 1/N × the reference, N = {sizes[0]} {mean}"


def _sizes_along(runs: list[Trial], k: int, dims: tuple[int, ...]) -> list[int] | None:
    sizes = []
    for run in runs:
        x = run.inputs[k] if k < len(run.inputs) else None
        if not isinstance(x, torch.Tensor) or x.ndim <= max(dims):
            return None
        sizes.append(math.prod(x.shape[d] for d in dims))
    return sizes


def _follows_argument(runs: list[Trial], failed: list[Trial], params: Sequence[str],
                      reference: Callable[..., Any] | None, i: int, rtol: float | None,
                      atol: float | None) -> str | None:
    """'it is right whenever dim is 0 and wrong whenever it is 1' when a plain number
    among the inputs sets the right trials apart from the wrong ones, and on every wrong
    trial the answer gives what the reference gives with that number put in. (Three trials
    split by some number are common by chance: without the second test, a slip elsewhere
    would be put down to whichever argument happened to line up.)"""
    if reference is None:
        return None
    right = [r for r in runs if all(r is not f for f in failed)]

    def put_in(run: Trial, k: int, value: int) -> bool:
        inputs = list(fresh(run.inputs))
        inputs[k] = value
        try:
            wrong = as_outputs(reference(*inputs))
            return _compare("", run.got[i], wrong[i], run.ref[i], rtol, atol).ok
        except Exception:  # the reference refuses the value there: not what the answer did
            return False

    for k, x in enumerate(runs[0].inputs):
        if isinstance(x, bool) or not isinstance(x, int):
            continue
        if not all(k < len(r.inputs) and type(r.inputs[k]) is int for r in runs):
            continue
        good = {r.inputs[k] for r in right}
        bad = {r.inputs[k] for r in failed}
        if good and bad and not good & bad and all(
                any(put_in(r, k, v) for v in good) for r in failed):
            name = input_name(k, params)

            def listed(values: set[int]) -> str:
                return " or ".join(map(str, sorted(values)))
            return (f"it is right on every input where {name} is {listed(good)} and wrong on "
                    f"every one where {name} is {listed(bad)}: the answer does not follow the "
                    f"argument {name} (is a value written in where {name} belongs?)")
    return None


def _swap_partner(i: int, runs: list[Trial], rtol: float | None,
                  atol: float | None) -> int | None:
    """The output ``j`` that output ``i`` swapped places with, on every trial: each is the
    other's reference (returned in the wrong order, the commonest slip of several outputs)."""
    def agree(a: int, b: int) -> bool:
        return all(b < len(r.got) and a < len(r.ref)
                   and _compare("", r.got[a], r.ref[b], r.ref[b], rtol, atol).ok for r in runs)

    return next((j for j in range(len(runs[0].ref)) if j != i and agree(i, j) and agree(j, i)),
                None)


def hard_coded(name: str, labels: list[str], runs: list[Trial],
               mistakes: Mapping[str, Callable[..., Any]] | None,
               result: str = "the gradient") -> Report | None:
    """The failed report of an answer that stays the same while the inputs change
    (``result``: what the answer should compute from them)."""
    answers, refs = [r.got for r in runs], [r.ref for r in runs]
    same_answers = all(_same(a, answers[0]) for a in answers[1:])
    same_refs = all(_same(r, refs[0]) for r in refs[1:])
    if not ((same_answers and not same_refs) or (_one_number(answers) and not _one_number(refs))):
        return None
    # A slip can be a constant too (the ~0 gradient of a max trick taken for 0): a
    # slip that holds on every trial says more than "hard-coded".
    for i, label in enumerate(labels):
        slip = _named_mistake(mistakes, runs, i, None, None)
        if slip and not all(_compare(label, r.got[i], r.ref[i], r.ref[i], None, None).ok
                            for r in runs):
            return fail(label, f"on new inputs ({shapes(runs[0].inputs)}): {slip}.")
    return fail(
        name,
        "it returns the same result whatever the inputs, so it looks hard-coded (or it "
        f"ignores its arguments). The check calls it on new random inputs: compute {result} "
        "from the arguments it is given.",
        "hard-coded",
    )
