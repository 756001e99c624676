"""Checks for exercises: gradients worked out by hand, methods, and predictions.

An exercise that says "by hand" asks for a *function*, not a number, so the
check can call it on inputs the learner has never seen. `check_by_hand` does
that: it makes fresh random inputs, runs the learner's function with autograd
switched off (any backward pass raises, with a message saying why), runs the
reference on the same inputs, and compares. A hard-coded answer fails because
it stays the same while the inputs change; a call to autograd fails because it
is refused.

`count_autograd` counts the backward passes a piece of code runs, for the
lessons where the method is the point (accumulating, zeroing, keeping the
graph). `check_prediction` grades a "predict, then run" guess: a wrong one gets a
hint, never the answer, which only `reveal` shows.

>>> import torch, backproplab as bl
>>> def grad_by_hand(x):            # d/dx of (x**2).sum()
...     return 2 * x
>>> print(bl.check_by_hand(
...     grad_by_hand,
...     reference=lambda x: torch.func.grad(lambda t: (t**2).sum())(x),
...     make_inputs=lambda gen: (torch.randn(3, generator=gen),),
...     name="dz/dx",
... ))
✓ dz/dx: matches autograd on 3 new random inputs
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import itertools
import math
import queue
import re
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import integrity
from ..check import Check, Report, compare, wrap
from ..watch import AutogradCount, AutogradForbidden, count_autograd, forbid_autograd
from . import secret, vocabulary
from .nudges import Nudges

__all__ = [
    "ADVICE",
    "BY_HAND_RTOL",
    "ESTIMATE_RTOL",
    "AutogradCount",
    "AutogradForbidden",
    "ByHand",
    "Method",
    "Prediction",
    "allowed_by",
    "check_by_hand",
    "check_exercise",
    "check_prediction",
    "count_autograd",
    "find_exercise",
    "find_prediction",
    "forbid_autograd",
    "prediction_report",
    "reveal",
]

_verify = integrity.verify  # bound now: patching the integrity module is seen


# --------------------------------------------------------------------------
# check_by_hand
# --------------------------------------------------------------------------


def _as_outputs(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _fresh(inputs: Sequence[Any]) -> tuple[Any, ...]:
    """Independent copies, so neither side can change what the other sees."""
    return tuple(t.detach().clone() if isinstance(t, torch.Tensor) else t for t in inputs)


def _float64(inputs: Sequence[Any]) -> tuple[Any, ...]:
    """Floating tensors as float64 (complex ones as complex128): there a derived formula
    agrees with autograd to round-off (~1e-16) and a numerical estimate only to ~1e-9, so
    the two can be told apart."""
    return tuple(
        t.to(torch.float64) if isinstance(t, torch.Tensor) and t.is_floating_point()
        else t.to(torch.complex128) if isinstance(t, torch.Tensor) and t.is_complex() else t
        for t in inputs
    )


def _shapes(inputs: Sequence[Any]) -> str:
    """The inputs' shapes, then any plain numbers: "shapes 3x4, 4 and the number 2.5"."""
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


def _fail(name: str, message: str, verdict: str = "fail") -> Report:
    return Report((Check(name, False, verdict, message),))


# A derived float64 formula agrees with autograd to round-off, about 1e-16 of the
# gradient's size: the worst over every by-hand exercise of the lessons is 4.5e-16.
# Central differences agree to about 1e-10 at best, a Richardson-extrapolated
# stencil to about 1e-12. The pass line sits between, with room for round-off.
BY_HAND_RTOL = 1e-13
# Closer than this, but not to round-off: an estimate, or float32 arithmetic.
ESTIMATE_RTOL = 1e-5

ADVICE = (
    "Work one entry out on paper for a tiny input (one or two elements) and compare it "
    "with the numbers below."
)


@dataclass
class _Trial:
    inputs: tuple[Any, ...]
    got: tuple[Any, ...]
    ref: tuple[Any, ...]


def check_by_hand(
    answer: Callable[..., Any],
    reference: Callable[..., Any],
    make_inputs: Callable[[torch.Generator], Sequence[Any]],
    *,
    name: str = "your function",
    outputs: Sequence[str] | None = None,
    trials: int = 3,
    seed: int = 0,
    mistakes: Mapping[str, Callable[..., Any]] | None = None,
    advice: str = ADVICE,
    rtol: float | None = None,
    atol: float | None = None,
    entries: Sequence[str] | None = None,
    vocabulary_only: bool = False,
    allow: Sequence[str] = (),
) -> Report:
    """Check a hand-written gradient function on new random inputs, autograd off.

    For each of ``trials`` seeds, ``make_inputs(generator)`` makes the inputs
    (new values, and new shapes where the formula allows); floating tensors
    are turned into float64. ``answer`` is called on copies of them inside
    `forbid_autograd`; ``reference`` (which may use autograd) on other copies.
    The results, a tensor or a tuple of tensors named by ``outputs``, must
    agree to float64 round-off (relative ``BY_HAND_RTOL``, 1e-13): a formula derived
    by hand does, a numerical estimate such as finite differences does not,
    and is told so.

    It fails, saying which, when ``answer`` is not a function, calls autograd
    or a numerical estimate, raises, returns the same thing whatever the
    inputs (a hard-coded answer), or disagrees with the reference. A mistake
    is named only when it holds on every trial: one of ``mistakes`` (a
    description of a typical slip mapped to a function computing that wrong
    answer), else the diagnosis of `compare` when every trial gives the same.
    Otherwise the message gives ``advice`` and the numbers (``entries`` names the
    entries of a 1-D result, so that its worst entry says which it is). Warnings the
    answer raises are shown as ``⚠`` lines of the report, never on stderr.

    Nothing the check knows is within the answer's reach while it runs: the
    answer is called in a thread of its own (its frames hold neither the
    reference nor the seed), the reference is computed only after it returns,
    and what it returns must be plain tensors of the reference's dtype and
    device (a Tensor subclass is refused by name). An answer that evaluates
    anything at inputs moved by a step (`backproplab.course.nudges`) is named a
    numerical estimate, even where that comes out exact. With
    ``vocabulary_only`` (what `ByHand` exercises ask) the answer's code must
    also keep to the by-hand vocabulary (`backproplab.course.vocabulary`), but for the
    kinds of refusal ``allow`` lifts (see `allowed_by`).

    >>> import torch
    >>> wrong = lambda x: x                      # forgot the factor 2
    >>> print(check_by_hand(
    ...     wrong,
    ...     reference=lambda x: 2 * x,
    ...     make_inputs=lambda gen: (torch.randn(4, generator=gen),),
    ...     name="dz/dx",
    ... ))  # doctest: +ELLIPSIS
    ✗ dz/dx: on new inputs (shape 4): mismatch. Likely mistake: ...factor 2...
    """
    _verify()
    _check_arguments(name, reference, make_inputs, trials, seed)
    if entries is not None and (isinstance(entries, str)
                                or not all(isinstance(e, str) for e in entries)):
        raise TypeError(f"entries: expected a sequence of names such as ('x.grad', "
                        f"'w.grad'), got {entries!r:.60}")
    if not callable(answer):
        return _fail(
            name,
            f"expected a function, got {type(answer).__name__} {answer!r:.60}. This exercise "
            "asks for a function so that it can be checked on new inputs; a number worked "
            "out for one point cannot be.",
        )
    if vocabulary_only:
        found = [f for f in vocabulary.check_answer(answer) if not allowed_by(f, allow)]
        if found:
            return _fail(name, vocabulary.refusal_message(found), "vocabulary")
    runs, noted = _run_trials(answer, reference, make_inputs, name, trials, seed)
    if isinstance(runs, Report):  # the answer raised, or called autograd
        return runs
    n_out = len(runs[0].ref)
    labels = list(outputs) if outputs is not None else (
        [name] if n_out == 1 else [f"{name}[{i}]" for i in range(n_out)]
    )
    if len(labels) != n_out:
        raise ValueError(f"outputs: expected {n_out} names, one per reference output, "
                         f"got {len(labels)}")
    warned = tuple(
        Check(name, True, "warning", f"your code raised a warning while it ran ({text}). It is "
              "shown here rather than on stderr and does not change the result.")
        for text in noted
    )
    bad = next((r for r in runs if len(r.got) != n_out), None)
    if bad is not None:
        return _fail(name, f"returned {len(bad.got)} value(s); expected {n_out} "
                           f"({', '.join(labels)}).")
    broken = _contract(labels, runs)
    if broken is not None:
        return broken
    constant = _hard_coded(name, labels, runs, mistakes)
    if constant is not None:
        return constant
    params = _parameter_names(answer)
    for i, label in enumerate(labels):
        failure = _judge(label, i, runs, mistakes, advice, rtol, atol, params)
        if failure is not None:
            return Report((_name_entry(failure, entries), *warned))
    checks = tuple(
        Check(label, True, "pass", f"matches autograd on {trials} new random inputs")
        for label in labels
    )
    return Report(checks + warned)


def allowed_by(finding: str, allow: Sequence[str]) -> bool:
    """Whether a vocabulary refusal is of a kind ``allow`` lifts: each kind is the words
    that open a refusal's reason, such as "complex numbers" (an exercise about complex
    gradients needs ``z.conj()``, which the vocabulary refuses elsewhere).

    >>> allowed_by("Tensor.conj() (complex numbers: the complex-step trick is a numerical "
    ...            "estimate)", ("complex numbers",))
    True
    """
    return any(f"({kind}:" in finding for kind in allow)


def _name_entry(failure: Check, entries: Sequence[str] | None) -> Check:
    """'worst entry [1] (w.grad)': the entry's name after its index."""
    if not entries:
        return failure
    message = re.sub(r"worst entry \[(\d+)\]",
                     lambda m: m.group(0) + (f" ({entries[int(m.group(1))]})"
                                             if int(m.group(1)) < len(entries) else ""),
                     failure.message)
    return dataclasses.replace(failure, message=message)


def _check_arguments(name: Any, reference: Any, make_inputs: Any, trials: Any,
                     seed: Any) -> None:
    """Refuse a check that is set up wrong (the lesson's bug, never the learner's)."""
    if not isinstance(name, str):
        raise TypeError(f"name: expected a str, got {type(name).__name__}")
    if not callable(reference):
        raise TypeError(f"reference: expected a function, got {type(reference).__name__}")
    if not callable(make_inputs):
        raise TypeError(f"make_inputs: expected a function of a torch.Generator, got "
                        f"{type(make_inputs).__name__}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 2:
        raise ValueError(f"trials: expected an int >= 2 (one trial cannot spot a hard-coded "
                         f"answer), got {trials!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed: expected an int, got {type(seed).__name__}")


def _run_trials(
    answer: Callable[..., Any], reference: Callable[..., Any],
    make_inputs: Callable[[torch.Generator], Sequence[Any]], name: str, trials: int, seed: int,
) -> tuple[list[_Trial] | Report, list[str]]:
    """Each trial's inputs, answer and reference, and the warnings the answer raised; or
    the failed report when the answer raised, called autograd or made an estimate."""
    runs: list[_Trial] = []
    noted: list[str] = []
    for k in range(trials):
        inputs = _float64(make_inputs(torch.Generator().manual_seed(seed + k)))
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got, nudged = _isolated(answer, _fresh(inputs))
        except AutogradForbidden as err:
            return _fail(name, str(err), "autograd"), noted
        except NotImplementedError:
            return _fail(name, "not written yet: the function still raises "
                               "NotImplementedError.", "missing"), noted
        except Exception as err:  # the learner's bug, reported as a failed check
            return _fail(
                name,
                f"raised {type(err).__name__}: {err} (on inputs with {_shapes(inputs)}). "
                "Call it yourself on such inputs to see where.",
                "error",
            ), noted
        if nudged is not None:
            return _fail(name, _estimate_message(nudged, _positional_names(answer)),
                         "estimate"), noted
        subclass = _subclass(_as_outputs(got))
        if subclass is not None:
            return _fail(name, subclass, "contract"), noted
        for w in caught:
            text = f"{w.category.__name__}: {w.message}"
            if text not in noted:
                noted.append(text)
        # The reference only now, once the answer has returned: it never coexists with it.
        ref = _as_outputs(reference(*_fresh(inputs)))
        runs.append(_Trial(inputs, _as_outputs(got),
                           tuple(r.detach() if isinstance(r, torch.Tensor) else r for r in ref)))
    return runs, noted


def _isolated(answer: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, int | None]:
    """``answer(*args)`` run in a thread of the check's own, with autograd off and refused:
    (its result, the position of an input it nudged or None). That thread's frames hold
    the answer and its arguments only; whatever the answer raises is raised here."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        seen = Nudges(args)
        try:
            # Complex inputs make complex arithmetic the task: then only a complex *step*
            # is an estimate, and `Nudges` sees that.
            complex_task = any(isinstance(t, torch.Tensor) and t.is_complex() for t in args)
            with torch.no_grad(), forbid_autograd(allow_complex=complex_task), seen:
                box["got"] = answer(*args)
        except BaseException as err:  # handed to the caller's thread, raised there
            box["error"] = err
        finally:
            box["nudged"] = seen.nudged()  # even when the answer swallowed the stop
            done.set()

    _idle_worker().jobs.put(run)
    while not done.wait(0.1):  # in steps, so that an interrupt reaches the learner's kernel
        pass
    if box["nudged"] is not None:
        return None, box["nudged"]
    if "error" in box:
        raise box.pop("error")
    return box["got"], None


class _Worker:
    """A thread that runs answers, one at a time. Threads are kept: torch gives each new
    thread its own pool of worker threads, which costs more than most answers."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.idle = False
        threading.Thread(target=self._loop, name="backproplab-answer", daemon=True).start()

    def _loop(self) -> None:
        while True:
            job = self.jobs.get()
            job()
            del job  # nothing of one answer stays in reach of the next
            self.idle = True


_WORKERS: list[_Worker] = []


def _idle_worker() -> _Worker:
    """A worker with nothing to do (one still running an answer that never returned,
    after an interrupt, is left alone)."""
    for worker in _WORKERS:
        if worker.idle:
            worker.idle = False
            return worker
    worker = _Worker()
    _WORKERS.append(worker)
    return worker


def _estimate_message(k: int, params: Sequence[str]) -> str:
    return (f"it evaluates at nudged inputs ({_input_name(k, params)} moved by a small step, "
            "by several steps, or entry by entry): a numerical estimate (finite differences), "
            "which is refused even where it comes out exact (a step linear in its input) or is "
            "extrapolated (Richardson). Derive the formula and compute it from the inputs "
            "as they are.")


def _subclass(got: tuple[Any, ...]) -> str | None:
    """Why a result that is a Tensor subclass is refused, or None."""
    for value in got:
        if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor:
            return (f"it returned a {type(value).__name__}, a subclass of torch.Tensor; the check "
                    "compares plain tensors only (a subclass can change what comparing means). "
                    "Return a torch.Tensor.")
    return None


def _contract(labels: list[str], runs: list[_Trial]) -> Report | None:
    """The failed report when a tensor result is not what the task states: on the
    reference's device, of its dtype (a lower floating precision is left to the diagnosis,
    which says where it came from; shapes to `compare`, which names the slip)."""
    for run in runs:
        for label, got, ref in zip(labels, run.got, run.ref, strict=True):
            if not (isinstance(ref, torch.Tensor) and isinstance(got, torch.Tensor)):
                continue  # a number, or None where a tensor belongs: `compare` says which
            if got.device != ref.device:
                return _fail(label, f"it returned a tensor on {got.device} where the task asks "
                                    f"for one on {ref.device} (the contract of the exercise).",
                             "contract")
            low = got.is_floating_point() and ref.is_floating_point()
            if got.dtype != ref.dtype and not low:
                return _fail(label, f"it returned a tensor of dtype {_dtype(got)} where the "
                                    f"task asks for {_dtype(ref)} (the contract of the "
                                    "exercise).", "contract")
    return None


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _hard_coded(name: str, labels: list[str], runs: list[_Trial],
                mistakes: Mapping[str, Callable[..., Any]] | None) -> Report | None:
    """The failed report of an answer that stays the same while the inputs change."""
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
            return _fail(label, f"on new inputs ({_shapes(runs[0].inputs)}): {slip}.")
    return _fail(
        name,
        "it returns the same result whatever the inputs, so it looks hard-coded (or it "
        "ignores its arguments). The check calls it on new random inputs: compute the "
        "gradient from the arguments it is given.",
        "hard-coded",
    )


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
    asked (``explain``): most comparisons here need only the verdict."""
    rtol, atol = _tolerance(ref, rtol, atol)
    return compare(label, got, want, rtol=rtol, atol=atol, explain=explain)


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


def _judge(
    label: str,
    i: int,
    runs: list[_Trial],
    mistakes: Mapping[str, Callable[..., Any]] | None,
    advice: str,
    rtol: float | None,
    atol: float | None,
    params: Sequence[str] = (),
) -> Check | None:
    """None when output ``i`` agrees on every trial; else the failed check, naming
    only what holds on every trial."""
    results = [_compare(label, r.got[i], r.ref[i], r.ref[i], rtol, atol)[0]
               for r in runs]
    failed = [(r, c) for r, c in zip(runs, results, strict=True) if not c.ok]
    if not failed:
        return None
    first, check = failed[0]
    where = f"on new inputs ({_shapes(first.inputs)})"
    numbers = check.message.split("\n", 1)[1].strip() if "\n" in check.message else ""

    def fail(text: str) -> Check:
        return Check(label, False, check.verdict, f"{where}: {text}" + (
            f"\n  {numbers}" if numbers else ""))

    low = _lower_precision(runs, i)
    if low is not None:
        return fail(f"your result is {low} while the inputs are float64, so it agrees only to "
                    f"{low} precision: a tensor made with torch.zeros, torch.ones or torch.tensor "
                    "without dtype= is float32 (pass dtype=x.dtype)")
    if rtol is None and atol is None and all(
            c.ok or _estimate_close(r.got[i], r.ref[i]) for r, c in zip(runs, results,
                                                                         strict=True)):
        worst = max(_relative(r.got[i], r.ref[i]) for r in runs)
        return fail(
            f"it agrees with autograd only to {worst:.0e} of the gradient's size. A formula "
            "derived by hand agrees to round-off (about 1e-16); a numerical estimate such as "
            "finite differences only to about 1e-9, which is what this looks like. Derive the "
            "formula (if you did, look for a constant written with too few digits).")
    slip = _named_mistake(mistakes, runs, i, rtol, atol)
    if slip:
        return fail(f"{slip}.")
    averaged = _mean_for_sum(runs, i, rtol, atol, params)
    if averaged:
        return fail(f"{averaged}.")
    if len(failed) < len(runs):
        follows = _follows_argument(runs, [r for r, _ in failed], params)
        return fail(
            f"it matches on {len(runs) - len(failed)} of {len(runs)} new inputs but not on "
            "these: " + (follows or "look at what sets them apart (a repeated index, a size-1 "
                         "dimension, a point at the edge of a formula)") + f". {advice}")
    common = _common_diagnosis(label, i, failed, rtol, atol)
    if common is not None:
        return common
    if check.verdict == "shape":
        head = check.message.split(". Likely", 1)[0]
        return Check(label, False, "shape", f"{where}: {head}. {advice}")
    return fail(f"mismatch, and no single common mistake explains it on every input. {advice}")


def _common_diagnosis(label: str, i: int, failed: list[tuple[_Trial, Check]],
                      rtol: float | None, atol: float | None) -> Check | None:
    """The failed check naming the mistake `compare` diagnoses on every failed trial, or
    None. Trials are diagnosed one at a time, and no further once one names another."""
    diagnosed: list[tuple[_Trial, Check]] = []
    for run, _ in failed:
        check = _compare(label, run.got[i], run.ref[i], run.ref[i], rtol, atol, explain=True)[0]
        if not check.diagnosis or (diagnosed and not _same_mistake(
                diagnosed[0][1].diagnosis, diagnosed[0][0], check.diagnosis, run)):
            return None
        diagnosed.append((run, check))
    # The claim holds on every trial; show the trial whose text claims least (a size
    # that happens to equal 2 on one trial adds "or N = 2" there only).
    run, shown = min(diagnosed, key=lambda rc: len(rc[1].message))
    head, _, rest = shown.message.partition("\n")
    return Check(label, False, shown.verdict,
                 f"on new inputs ({_shapes(run.inputs)}): {head}"
                 + (f"\n  {rest.strip()}" if rest.strip() else ""))


def _lower_precision(runs: list[_Trial], i: int) -> str | None:
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


def _relative(got: Any, ref: Any) -> float:
    try:
        g, r = _wide(got), _wide(ref)
        if g.is_complex() or r.is_complex():
            g, r = g.to(torch.complex128), r.to(torch.complex128)
        if g.shape != r.shape:
            return float("inf")
        return float((g - r).abs().max()) / max(_scale(r), 1e-300)
    except (TypeError, ValueError, RuntimeError):
        return float("inf")


def _estimate_close(got: Any, ref: Any) -> bool:
    """Close to the reference the way an estimate is: within ESTIMATE_RTOL of its size."""
    return _relative(got, ref) <= ESTIMATE_RTOL


_NUMBER = re.compile(r"(\d+(?:\.\d+)?)")


def _sizes(run: _Trial) -> set[str]:
    return {str(s) for t in (*run.inputs, *run.ref) if isinstance(t, torch.Tensor)
            for s in (*t.shape, t.numel()) if s > 1}


def _same_mistake(first: str, run: _Trial, other: str | None, other_run: _Trial) -> bool:
    """Whether two trials' diagnoses name the same mistake: the same words, and the same
    numbers except where each is a size of its own trial ("1/N = 1/4" on one trial and
    "1/N = 1/6" on another agree; "a factor of about 1.3" and "about 2.7" do not)."""
    if other is None:
        return False
    # The claim is the first clause; what follows are ways it may have happened.
    a, b = (_NUMBER.split(re.split(r"[:;]", d, maxsplit=1)[0]) for d in (first, other))
    if len(a) != len(b):
        return False
    sizes_a, sizes_b = _sizes(run), _sizes(other_run)
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        if x == y:
            continue
        if k % 2 == 0 or not (x in sizes_a and y in sizes_b):  # odd parts are the numbers
            return False
    return True


def _named_mistake(
    mistakes: Mapping[str, Callable[..., Any]] | None,
    runs: list[_Trial],
    i: int,
    rtol: float | None,
    atol: float | None,
) -> str | None:
    """The first slip whose wrong answer the learner's result equals on every trial, in
    output ``i`` and in every other output the slip changes (a slip of two outputs is not
    named when only one of them went wrong)."""
    for description, wrong in (mistakes or {}).items():
        try:
            if all(_slip_holds(description, r, _as_outputs(wrong(*_fresh(r.inputs))), i,
                               rtol, atol) for r in runs):
                return description
        except Exception:  # a slip that does not apply to this output
            continue
    return None


def _slip_holds(description: str, run: _Trial, wrong: tuple[Any, ...], i: int,
                rtol: float | None, atol: float | None) -> bool:
    def agree(j: int, value: Any) -> bool:
        return _compare(description, run.got[j], value, run.ref[j], rtol, atol).ok

    if not agree(i, wrong[i]):
        return False
    changed = [j for j in range(len(run.ref)) if j != i and j < len(wrong)
               and not _compare(description, wrong[j], run.ref[j], run.ref[j], rtol, atol).ok]
    return all(agree(j, wrong[j]) for j in changed)


def _parameter_names(answer: Callable[..., Any]) -> tuple[str, ...]:
    try:
        return tuple(inspect.signature(answer).parameters)
    except (TypeError, ValueError):  # a builtin or a callable without a signature
        return ()


def _positional_names(answer: Callable[..., Any]) -> tuple[str, ...]:
    """The names of the answer's positional parameters (not ``*args``)."""
    try:
        parameters = inspect.signature(answer).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(p.name for p in parameters if p.kind in (
        inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD))


def _input_name(k: int, params: Sequence[str]) -> str:
    return params[k] if k < len(params) else f"argument {k + 1}"


def _mean_for_sum(runs: list[_Trial], i: int, rtol: float | None, atol: float | None,
                  params: Sequence[str]) -> str | None:
    """'exactly 1/N x the reference' when N is the number of entries along the same
    dimensions of the same input on every trial (a mean where a sum belongs). Sizes of
    2 or 3 are left to the plain factor diagnosis: a missing 2 is as likely."""
    first = runs[0].inputs
    for k, x in enumerate(first):
        if not isinstance(x, torch.Tensor) or x.ndim == 0 or x.ndim > 4:
            continue
        for r in range(1, x.ndim + 1):
            for dims in itertools.combinations(range(x.ndim), r):
                sizes = _sizes_along(runs, k, dims)
                if sizes is None or min(sizes) < 4:
                    continue
                if all(_compare("", run.got[i] * n if isinstance(run.got[i], torch.Tensor)
                                else None, run.ref[i], run.ref[i], rtol, atol).ok
                       for run, n in zip(runs, sizes, strict=True)):
                    what = ("the size of " if r == 1 else "the number of entries along ") + (
                        f"dimension {dims[0]}" if r == 1
                        else "dimensions " + ", ".join(map(str, dims[:-1])) + f" and {dims[-1]}")
                    return (f"your answer is exactly 1/N × the reference, N = {sizes[0]} "
                            f"({what} of {_input_name(k, params)}): a mean where the gradient "
                            "needs a sum (every entry's contribution adds up, none is averaged)")
    return None


def _sizes_along(runs: list[_Trial], k: int, dims: tuple[int, ...]) -> list[int] | None:
    sizes = []
    for run in runs:
        x = run.inputs[k] if k < len(run.inputs) else None
        if not isinstance(x, torch.Tensor) or x.ndim <= max(dims):
            return None
        sizes.append(math.prod(x.shape[d] for d in dims))
    return sizes


def _follows_argument(runs: list[_Trial], failed: list[_Trial],
                      params: Sequence[str]) -> str | None:
    """'it is right whenever dim is 0 and wrong whenever it is 1' when a plain number
    among the inputs sets the right trials apart from the wrong ones."""
    right = [r for r in runs if all(r is not f for f in failed)]
    for k, x in enumerate(runs[0].inputs):
        if isinstance(x, bool) or not isinstance(x, int):
            continue
        if not all(k < len(r.inputs) and type(r.inputs[k]) is int for r in runs):
            continue
        good = {r.inputs[k] for r in right}
        bad = {r.inputs[k] for r in failed}
        if good and bad and not good & bad:
            name = _input_name(k, params)

            def listed(values: set[int]) -> str:
                return " or ".join(map(str, sorted(values)))
            return (f"it is right on every input where {name} is {listed(good)} and wrong on "
                    f"every one where {name} is {listed(bad)}: the answer does not follow the "
                    f"argument {name} (is a value written in where {name} belongs?)")
    return None


# --------------------------------------------------------------------------
# Exercises and predictions, as data
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ByHand:
    """A "by hand" exercise: the arguments of `check_by_hand` but the answer.

    The lessons keep these in ``backproplab.lessons``, so that a check cell
    shows neither the reference nor the slips it knows (they are near-solutions).
    """

    name: str
    reference: Callable[..., Any]
    make_inputs: Callable[[torch.Generator], Sequence[Any]]
    outputs: Sequence[str] | None = None
    mistakes: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    advice: str = ADVICE
    trials: int = 3
    allow: tuple[str, ...] = ()  # kinds of vocabulary refusal lifted here (`allowed_by`)

    def check(self, answer: Any, seed: int = 0) -> Report:
        return check_by_hand(answer, self.reference, self.make_inputs, name=self.name,
                             outputs=self.outputs, trials=self.trials, seed=seed,
                             mistakes=self.mistakes, advice=self.advice, vocabulary_only=True,
                             allow=self.allow)


@dataclass(frozen=True)
class Method:
    """An exercise whose method is the point: ``check(answer, seed)`` returns a Report."""

    check: Callable[[Any, int], Report]


@dataclass(frozen=True)
class Prediction:
    """A "predict, then run" question.

    ``answer`` runs the experiment and returns what torch really does;
    ``hint`` is what a wrong guess is told (it must not give the answer away);
    ``why`` is shown by `reveal`, after the guess (``{answer}`` is filled in).
    With ``choices``, a guess outside them is told what the choices are.
    """

    question: str
    answer: Callable[[], Any]
    hint: str
    why: str
    choices: tuple[Any, ...] | None = None


# First guess checked per question in this kernel, and the questions revealed.
_GUESSES: dict[Any, Any] = {}
_REVEALED: set[Any] = set()


def _lookup(prediction: str | Prediction) -> tuple[Any, Prediction]:
    if isinstance(prediction, Prediction):
        return prediction, prediction
    if not isinstance(prediction, str):
        raise TypeError(f"prediction: expected a question id such as 'l02-predict-paths' or a "
                        f"Prediction, got {type(prediction).__name__}")
    return prediction, find_prediction(prediction)


def _answer_of(p: Prediction) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the experiment's own warnings are not the learner's
        return p.answer()


def check_prediction(prediction: str | Prediction, guess: Any) -> None:
    """Grade a "predict, then run" guess without giving the answer away.

    ``prediction`` is a question of the lessons by id (``"l02-predict-paths"``)
    or a `Prediction`. A right guess is told so; a wrong one raises
    AssertionError with "not quite" and a hint, never the answer: that comes
    from `reveal`, in the next cell. Numbers and tensors are compared with
    `compare` (4 and 4.0 agree), words ignoring case and spaces, and ``None``
    matches ``None`` or ``"None"``. ``...`` (the blank in a lesson's guess
    cell) means no guess yet. Like every check it returns None, so a graded
    cell has no value. (`prediction_report` gives the same verdict as a
    Report, without raising.)

    >>> q = Prediction("x.grad after two backward calls", answer=lambda: 4.0,
    ...                hint="what does backward do to a .grad that is already there?",
    ...                why="each backward() adds 2")
    >>> check_prediction(q, 4)
    ✓ x.grad after two backward calls: your prediction 4 is right. Run the next cell to see
      why.
    >>> check_prediction(q, 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    AssertionError: ...✗ x.grad after two backward calls: not quite (you predicted 2). Hint: ...
    """
    __tracebackhide__ = True
    prediction_report(prediction, guess).assert_ok()


def prediction_report(prediction: str | Prediction, guess: Any) -> Report:
    """The verdict of `check_prediction` as a Report, without raising."""
    _verify()
    key, p = _lookup(prediction)
    if guess is Ellipsis:
        return _fail(p.question, "no prediction yet: replace ... with your guess and run this "
                                 "cell again.", "missing")
    if p.choices is not None and not any(_matches(guess, c) for c in p.choices):
        options = ", ".join(_show(c) for c in p.choices)
        return _fail(p.question, f"{_show(guess)} is not one of the choices: {options}.")
    _GUESSES.setdefault(key, guess)
    if _matches(guess, _answer_of(p)):
        late = (" (checked after the answer was revealed)" if key in _REVEALED else "")
        return Report((Check(p.question, True, "pass",
                             f"your prediction {_show(guess)} is right{late}. Run the next cell "
                             "to see why."),))
    return _fail(p.question, f"not quite (you predicted {_show(guess)}). Hint: {p.hint} Think "
                             "again and re-run this cell, or run the next cell to see the answer.")


def reveal(prediction: str | Prediction) -> None:
    """Print a prediction's answer and why, and the first guess checked for it.

    >>> q = Prediction("2 + 2", answer=lambda: 4, hint="count", why="it is {answer}")
    >>> reveal(q)
    2 + 2: the answer is 4. Why: it is 4.
    """
    key, p = _lookup(prediction)
    value = _answer_of(p)
    _REVEALED.add(key)
    why = p.why.replace("{answer}", _show(value))
    text = f"{p.question}: the answer is {_show(value)}. Why: {why}"
    text = text if text.endswith((".", "!", "?")) else text + "."
    if key in _GUESSES:
        first = _GUESSES[key]
        verdict = "right" if _matches(first, value) else "not right"
        text += f"\nYour first checked guess was {_show(first)}: {verdict}."
    print(wrap(text))


def _matches(guess: Any, answer: Any) -> bool:
    """Whether a guess means the answer: words by spelling, numbers by value."""
    if answer is None or (isinstance(answer, str) and answer.strip().lower() == "none"):
        return guess is None or (isinstance(guess, str) and guess.strip().lower() == "none")
    if isinstance(answer, str):
        return isinstance(guess, str) and guess.strip().lower() == answer.strip().lower()
    if isinstance(answer, bool) or isinstance(guess, bool):
        return type(guess) is type(answer) and guess == answer
    if isinstance(answer, (tuple, list)) and any(isinstance(a, str) for a in answer):
        return (isinstance(guess, (tuple, list)) and len(guess) == len(answer)
                and all(_matches(g, a) for g, a in zip(guess, answer, strict=True)))
    if isinstance(guess, str) or guess is None:
        return False
    try:
        return compare("prediction", guess, answer).ok
    except (TypeError, ValueError):
        return False


def _show(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return str(value.tolist())
    return repr(value) if isinstance(value, str) else str(value)


# --------------------------------------------------------------------------
# The lessons' exercises, by id
# --------------------------------------------------------------------------

_ID = re.compile(r"^l(\d\d)-")
EXERCISES = "backproplab.course.exercises"  # the package holding lessonNN.py


def _lesson(key: object, arg: str) -> Any:
    """The module of the lesson that ``key`` names: ``l02-cubic`` lives in ``lesson02.py``."""
    if not isinstance(key, str):
        raise TypeError(f"{arg}: expected an id such as 'l02-cubic', got {type(key).__name__}")
    found = _ID.match(key)
    if found is None:
        raise ValueError(f"{arg}: expected an id starting with l and a two-digit lesson "
                         f"number, such as 'l02-cubic', got {key!r}")
    try:
        return importlib.import_module(f"{EXERCISES}.lesson{found.group(1)}")
    except ModuleNotFoundError as err:
        if err.name != f"{EXERCISES}.lesson{found.group(1)}":
            raise  # the lesson module is there but imports something missing: its bug
        raise ValueError(f"{arg}: lesson {found.group(1)} has no checks here ({key!r})") from None


def find_exercise(key: str) -> Any:
    """The exercise (a ByHand or Method) with grade id ``key``.

    >>> find_exercise("l02-cubic").name
    'd/dx (x**3 - 4x**2 + 5)'
    """
    table = getattr(_lesson(key, "key"), "EXERCISES", {})
    if key not in table:
        raise ValueError(f"key: no exercise {key!r}; this lesson has "
                         f"{', '.join(sorted(table)) or 'none'}")
    return table[key]


def find_prediction(key: str) -> Any:
    """The "predict, then run" question (a Prediction) with id ``key``."""
    table = getattr(_lesson(key, "prediction"), "PREDICTIONS", {})
    if key not in table:
        raise ValueError(f"prediction: no question {key!r}; this lesson has "
                         f"{', '.join(sorted(table)) or 'none'}")
    return table[key]


def check_exercise(key: str, answer: Any, *, seed: int = 0) -> None:
    """Check the learner's ``answer`` to exercise ``key``; raise AssertionError if wrong.

    The check runs on inputs made from ``seed``: the lessons' visible check cells
    use the default, and their hidden tests other seeds, so an answer cannot be a
    table of the visible inputs. When the instructor has set a secret
    (`backproplab.course.secret`), a hidden test's seed is derived from it, so
    not even the seeds written in the lessons tell its inputs. On success the
    report is shown and None is returned (a graded cell must not end in a value:
    nbgrader would read it as a partial score).

    >>> import torch
    >>> check_exercise("l02-cubic", lambda x: 3 * x**2 - 8 * x)
    ✓ d/dx (x**3 - 4x**2 + 5): matches autograd on 3 new random inputs
    """
    _verify()
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed: expected an int, got {type(seed).__name__}")
    exercise = find_exercise(key)
    if seed != 0:  # a hidden test: its inputs come from the instructor's secret, if set
        seed = secret.grading_seed(key, seed)
    report = exercise.check(answer, seed)
    if not isinstance(report, Report):  # a lesson module's bug, never the learner's
        raise TypeError(f"{key}: its check returned {type(report).__name__}, not a Report")
    if not report.checks:
        report = Report((Check(key, False, "fail", "nothing was checked"),))
    report.assert_ok()


# Checked by `integrity.verify` before a grade is given (at the end: the snapshot is of
# the whole module, taken as soon as it exists).
integrity.protect_module(__name__)
