"""Checking a gradient worked out by hand: the `ByHand` exercise and `check_by_hand`.

An exercise that says "by hand" asks for a *function*, not a number, so the
check can call it on inputs the learner has never seen. For a few seeds it
makes new inputs, turns floating ones into float64, runs the answer with
autograd switched off and refused (`run_answer`), computes the reference
itself, and compares. A hard-coded answer fails because it stays the same
while the inputs change; a call to autograd fails because it is refused; a
numerical estimate fails because it moves its inputs by a step
(`backproplab.course.nudges`) and is not exact to round-off. What is wrong is
named by `backproplab.course.slips`.

Where the answer runs is the caller's choice: in the learner's kernel
(`feedback` on a `ByHand` exercise, or `check_by_hand`, which makes one), or in a
fresh process that has only the answer's source (the grade, `backproplab grade`,
through `judge_by_hand`, which takes the exercise and a way to call the answer).

>>> import torch
>>> print(check_by_hand(
...     lambda x: 2 * x,
...     reference=lambda x: torch.func.grad(lambda t: (t**2).sum())(x),
...     make_inputs=lambda gen: (torch.randn(3, generator=gen),),
...     name="dz/dx",
... ))
✓ dz/dx: matches autograd on 3 new random inputs
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from ..check import Check, Report
from ..watch import AutogradForbidden, forbid_autograd
from . import live, rules
from .nudges import Nudges, NudgeSeen
from .slips import (
    Trial,
    as_outputs,
    fail,
    fresh,
    hard_coded,
    input_name,
    judge,
    shapes,
)

__all__ = ["ADVICE", "ByHand", "Ran", "Task", "check_by_hand", "feedback", "judge_by_hand",
           "run_answer", "seeded", "source_refusal"]

ADVICE = (
    "Work one entry out on paper for a tiny input (one or two elements) and compare it "
    "with the numbers below."
)


@dataclass(frozen=True)
class Ran:
    """What one call of an answer gave: its result, or what went wrong instead.

    ``failure`` is None, ``"autograd"`` (refused; ``detail`` says what the code did, as
    "called Tensor.backward()"), ``"missing"`` (NotImplementedError),
    ``"error"`` (it raised; ``detail`` says what), ``"estimate"`` (``nudged`` is the
    position of the input it moved by a step) or ``"contract"`` (a result that is not
    plain data; ``detail`` says why). ``warnings`` are those it raised; ``largest`` is
    the number of entries of the largest tensor it made.
    """

    got: Any = None
    failure: str | None = None
    detail: str = ""
    nudged: int | None = None
    warnings: tuple[str, ...] = ()
    largest: int = 0


@contextmanager
def seeded(seed: int = 0) -> Iterator[None]:
    """Torch's global (CPU) random generator seeded with ``seed`` inside the block and put back as
    it was after it. An answer runs inside it (`run_answer`, `Method.run`), and so does what
    a check builds at random (an nn.Linear's first weights): what they draw is the same
    whatever ran before, in the kernel and in the grade's sandbox, and the learner's own
    draws after a check go on as if it had not run.

    >>> with seeded(0):
    ...     a = torch.rand(1)
    >>> with seeded(0):
    ...     b = torch.rand(1)
    >>> bool(a == b)
    True
    """
    # The CPU generator alone: torch.manual_seed would also queue a CUDA seeding, and that
    # queue records the caller's stack, reading torch's source files inside the sandbox.
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        yield


def run_answer(answer: Callable[..., Any], args: Sequence[Any]) -> Ran:
    """``answer(*args)`` with autograd off and refused, every operation watched for inputs
    moved by a step, and torch's generator `seeded`; warnings are kept, not shown.

    >>> import torch
    >>> run_answer(lambda x: x.backward(), [torch.ones(1)]).failure
    'autograd'
    """
    seen = Nudges(args)
    got, failure, detail = None, None, ""
    default = torch.get_default_dtype()
    # torch's own default dtype, as in the grade's fresh process, whatever a notebook set
    torch.set_default_dtype(torch.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with seeded(), torch.no_grad(), forbid_autograd(), seen:
                got = answer(*args)
        except NudgeSeen:
            pass
        except AutogradForbidden as err:  # the exercise's words are added by the judge
            failure, detail = "autograd", err.did
        except NotImplementedError:
            failure = "missing"
        except Exception as err:  # the learner's bug, told as a failed check
            failure, detail = "error", f"{type(err).__name__}: {err}"
        finally:
            torch.set_default_dtype(default)
    noted = tuple(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))
    nudged = seen.nudged()
    if nudged is not None:  # even when the answer swallowed the stop
        return Ran(failure="estimate", detail="read back" if seen.read_back else "",
                   nudged=nudged, warnings=noted)
    if failure is None:
        subclass = _subclass(as_outputs(got))
        if subclass is not None:
            failure, detail = "contract", subclass
    return Ran(got if failure is None else None, failure, detail, None, noted, seen.largest)


def _float64(inputs: Sequence[Any]) -> tuple[Any, ...]:
    """Floating tensors as float64 (complex ones as complex128): there a derived formula
    agrees with autograd to round-off (~1e-16) and a numerical estimate only to ~1e-9, so
    the two can be told apart."""
    return tuple(
        t.to(torch.float64) if isinstance(t, torch.Tensor) and t.is_floating_point()
        else t.to(torch.complex128) if isinstance(t, torch.Tensor) and t.is_complex() else t
        for t in inputs
    )


@dataclass(frozen=True)
class Task:
    """What a by-hand exercise asks for, in the words its feedback uses.

    The defaults speak of a gradient checked against autograd on new random inputs; an
    exercise whose answer is another formula (a byte count, checked against what is
    measured) says so here, and every message of its feedback follows.

    >>> Task().passed(3)
    'matches autograd on 3 new random inputs'
    """

    asks_for: str = "the gradient by hand"
    result: str = "the gradient"
    how: str = "Work the chain rule out and compute the gradient with plain tensor operations."
    reference: str = "autograd"
    inputs: str = "new random inputs"

    def passed(self, trials: int) -> str:
        return f"matches {self.reference} on {trials} {self.inputs}"

    def refused(self, did: str) -> str:
        """The message of an answer that used autograd (``did``: "called Tensor.backward()")."""
        return f"this exercise asks for {self.asks_for}, but your code {did}. {self.how}"


@dataclass(frozen=True)
class ByHand:
    """A "by hand" exercise: the arguments of `check_by_hand` but the answer.

    The lessons keep these in ``backproplab.course.exercises``, so that a check cell
    shows neither the reference nor the slips it knows (they are near-solutions).
    ``vocabulary`` is what the answer's source may use (`rules.BY_HAND` unless the
    exercise allows more, such as complex numbers); ``without`` names what the answer
    must not build (a Jacobian): no tensor it makes may be larger than its largest input.
    ``rtol``/``atol`` replace the by-hand tolerance (round-off); ``entries`` names the
    entries of a 1-D result; ``task`` words what the exercise asks for when it is not a
    gradient checked against autograd. The options are checked here, once, when the
    exercise is made.

    >>> ByHand("dz/dx", reference=abs, make_inputs=lambda gen: (), trials=1)
    Traceback (most recent call last):
    ValueError: trials: expected an int >= 2 (one trial cannot spot a hard-coded answer), got 1
    """

    name: str
    reference: Callable[..., Any]
    make_inputs: Callable[[torch.Generator], Sequence[Any]]
    outputs: Sequence[str] | None = None
    mistakes: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    advice: str = ADVICE
    trials: int = 3
    vocabulary: rules.Vocabulary = rules.BY_HAND
    without: str | None = None
    rtol: float | None = None
    atol: float | None = None
    entries: Sequence[str] | None = None
    task: Task = Task()

    def __post_init__(self) -> None:
        """Refuse an exercise that is set up wrong (the lesson's bug, never the learner's)."""
        if not isinstance(self.name, str):
            raise TypeError(f"name: expected a str, got {type(self.name).__name__}")
        if not callable(self.reference):
            raise TypeError(f"reference: expected a function, got "
                            f"{type(self.reference).__name__}")
        if not callable(self.make_inputs):
            raise TypeError(f"make_inputs: expected a function of a torch.Generator, got "
                            f"{type(self.make_inputs).__name__}")
        trials = self.trials
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 2:
            raise ValueError(f"trials: expected an int >= 2 (one trial cannot spot a "
                             f"hard-coded answer), got {trials!r}")
        if self.entries is not None and (isinstance(self.entries, str) or not all(
                isinstance(e, str) for e in self.entries)):
            raise TypeError(f"entries: expected a sequence of names such as ('x.grad', "
                            f"'w.grad'), got {self.entries!r:.60}")

    def check(self, answer: Any, seed: int = 0) -> Report:
        """Feedback on a live answer: its source read, then run here."""
        return feedback(self, answer, seed=seed)


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
    vocabulary: Any = None,
    without: str | None = None,
) -> Report:
    """Check a hand-written gradient function on new random inputs, autograd off.

    For each of ``trials`` seeds, ``make_inputs(generator)`` makes the inputs
    (new values, and new shapes where the formula allows); floating tensors
    are turned into float64. ``answer`` is called on copies of them with
    autograd off and refused; ``reference`` (which may use autograd) on other
    copies, once the answer has returned. The results, a tensor or a tuple of
    tensors named by ``outputs``, must agree to float64 round-off (relative
    1e-13): a formula derived by hand does, a numerical estimate such as finite
    differences does not, and is told so.

    It fails, saying which, when ``answer`` is not a function, calls autograd
    or makes a numerical estimate, raises, returns the same thing whatever the
    inputs (a hard-coded answer), returns something that is not a plain tensor
    of the reference's dtype and device, or disagrees with the reference. A
    mistake is named only when it holds on every trial: one of ``mistakes`` (a
    description of a typical slip mapped to a function computing that wrong
    answer), else the diagnosis of `compare` when every trial gives the same.
    Otherwise the message gives ``advice`` and the numbers (``entries`` names the
    entries of a 1-D result, so that its worst entry says which it is). Warnings the
    answer raises are shown as ``⚠`` lines of the report, never on stderr.

    With a ``vocabulary`` (`backproplab.course.rules.Vocabulary`, what `ByHand`
    exercises pass), the answer's source is read first and anything outside the
    vocabulary is refused by name. With ``without`` (say "the (n, n) Jacobian"), the
    answer may make no tensor larger than its largest input, and is told it built
    ``without`` when it does. The arguments but ``answer`` and ``seed`` are those of a
    `ByHand` exercise, which is made from them (and checks them).

    >>> import torch
    >>> wrong = lambda x: x                      # forgot the factor 2
    >>> print(check_by_hand(
    ...     wrong,
    ...     reference=lambda x: 2 * x,
    ...     make_inputs=lambda gen: (torch.randn(4, generator=gen),),
    ...     name="dz/dx",
    ... ))  # doctest: +ELLIPSIS
    ✗ dz/dx: on new inputs (x of shape 4): mismatch. Likely mistake: ...factor 2...
    """

    exercise = ByHand(name, reference, make_inputs, outputs=outputs, mistakes=mistakes or {},
                      advice=advice, trials=trials, vocabulary=vocabulary or rules.BY_HAND,
                      without=without, rtol=rtol, atol=atol, entries=entries)
    return feedback(exercise, answer, seed=seed, read=vocabulary is not None)


def feedback(exercise: ByHand, answer: Any, *, seed: int = 0, read: bool = True) -> Report:
    """Feedback on a live ``answer`` to a by-hand ``exercise``: its source read against the
    exercise's vocabulary (unless ``read`` is False), then run here, on the trials of
    ``seed``, and judged by `judge_by_hand`."""
    if not callable(answer):
        return fail(
            exercise.name,
            f"expected a function, got {type(answer).__name__} {answer!r:.60}. This exercise "
            "asks for a function so that it can be checked on new inputs; a number worked "
            "out for one point cannot be.",
        )
    if read:
        refused = source_refusal(answer, exercise.vocabulary, asks_for=exercise.task.asks_for)
        if refused is not None:
            return fail(exercise.name, refused, "vocabulary")
    return judge_by_hand(exercise, lambda args: run_answer(answer, args), seed=seed,
                         params=_positional_names(answer))


def source_refusal(answer: Any, vocabulary: rules.Vocabulary, *,
                   asks_for: str = "the gradient by hand") -> str | None:
    """Why a live answer's source is refused (the sentence a learner reads), or None.

    The answer's functions and classes, and those of the learner's they reach, are read
    from the cells that defined them; what else they read is named by what it is.

    >>> import torch
    >>> from backproplab.course import rules
    >>> source_refusal(lambda x: torch.autograd.grad(x, x), rules.BY_HAND)[:60]
    'this exercise asks for the gradient by hand, but your code u'
    """
    trees, bound, unread = live.from_objects(answer)
    found = rules.read(trees, vocabulary, bound)
    if not trees and "answer" in bound:  # the answer is a library's own function
        why = rules.qualified_reason(bound["answer"], vocabulary)
        found = [rules.Finding(0, bound["answer"], why)] if why else []
    if found:
        return rules.refusal(found, vocabulary, asks_for=asks_for)
    if unread:
        return (f"the source of {', '.join(unread)} could not be read, so what it uses cannot "
                "be checked. Define it with def (or lambda) in a cell of the notebook.")
    return None


def judge_by_hand(exercise: ByHand, call: Callable[[tuple[Any, ...]], Ran], *, seed: int,
                  params: Sequence[str] = ()) -> Report:
    """The judgement of a by-hand ``exercise``, with the answer run by ``call(args) -> Ran``
    wherever the caller runs it (this kernel for feedback, a sandbox for the grade) on the
    trials of ``seed``; ``params`` are the answer's parameter names, for messages."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed: expected an int, got {type(seed).__name__}")
    name = exercise.name
    runs, noted = _run_trials(exercise, call, seed, params)
    if isinstance(runs, Report):  # the answer raised, called autograd, made an estimate
        return runs
    n_out = len(runs[0].ref)
    labels = list(exercise.outputs) if exercise.outputs is not None else (
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
        return fail(name, f"returned {len(bad.got)} value(s); expected {n_out} "
                          f"({', '.join(labels)}).")
    broken = _contract(labels, runs)
    if broken is not None:
        return broken
    constant = hard_coded(name, labels, runs, exercise.mistakes, exercise.task.result)
    if constant is not None:  # (a failed Report is falsy: compare with None)
        return constant
    for i, label in enumerate(labels):
        failure = judge(label, i, runs, exercise.mistakes, exercise.advice, exercise.rtol,
                        exercise.atol, params, labels, exercise.reference)
        if failure is not None:
            return Report((_name_entry(failure, exercise.entries), *warned))
    checks = tuple(Check(label, True, "pass", exercise.task.passed(exercise.trials))
                   for label in labels)
    return Report(checks + warned)


def _name_entry(failure: Check, entries: Sequence[str] | None) -> Check:
    """'worst entry [1] (w.grad)': the worst entry of a 1-D result named."""
    numbers = failure.numbers
    if not entries or numbers is None or len(numbers.index) != 1 \
            or numbers.index[0] >= len(entries):
        return failure
    named = dataclasses.replace(numbers, entry=entries[numbers.index[0]])
    return dataclasses.replace(failure, numbers=named)


def _run_trials(exercise: ByHand, call: Callable[[tuple[Any, ...]], Ran], seed: int,
                params: Sequence[str]) -> tuple[list[Trial] | Report, list[str]]:
    """Each trial's inputs, answer and reference, and the warnings the answer raised; or
    the failed report when the answer raised, called autograd or made an estimate."""
    name, without = exercise.name, exercise.without
    runs: list[Trial] = []
    noted: list[str] = []
    for k in range(exercise.trials):
        inputs = _float64(exercise.make_inputs(torch.Generator().manual_seed(seed + k)))
        ran = call(fresh(inputs))
        if ran.failure == "autograd":
            return fail(name, exercise.task.refused(ran.detail), "autograd"), noted
        if ran.failure == "missing":
            return fail(name, "not written yet: the function still raises "
                              "NotImplementedError.", "missing"), noted
        if ran.failure == "error":
            return fail(name, f"raised {ran.detail} (on inputs: {shapes(inputs, params)}). Call "
                              "it yourself on such inputs to see where.", "error"), noted
        if ran.failure == "estimate":
            return fail(name, _estimate_message(ran.nudged or 0, params, ran.detail),
                        "estimate"), noted
        if ran.failure is not None:
            return fail(name, ran.detail, "contract"), noted
        limit = max((t.numel() for t in inputs if isinstance(t, torch.Tensor)), default=1)
        if without is not None and ran.largest > limit:
            return fail(name, f"it makes a tensor of {ran.largest} entries, more than any input "
                              f"holds ({limit}): it builds {without}, which this exercise asks "
                              "you to do without. Work out what one entry of the result is, "
                              "and compute it from the inputs directly.", "size"), noted
        noted += [w for w in ran.warnings if w not in noted]
        # The reference only now, once the answer has returned.
        ref = as_outputs(exercise.reference(*fresh(inputs)))
        runs.append(Trial(inputs, as_outputs(ran.got),
                          tuple(r.detach() if isinstance(r, torch.Tensor) else r for r in ref)))
    return runs, noted


def _estimate_message(k: int, params: Sequence[str], detail: str = "") -> str:
    name = input_name(k, params)
    # A number read back (``w.item()``) and used to move a value looks like a chosen step.
    read_back = (" Your code reads numbers back from tensors (.item(), float()): a value "
                 "moved by such a number is moved by a constant, as a step is; keep the "
                 "values as tensors.") if detail == "read back" else ""
    return (f"it evaluates at nudged inputs: it runs one computation at {name} (or a value "
            f"computed from it) moved by a step of any size, by a factor, entry by entry or "
            f"along a direction, at more than one point, or moves {name} by a tiny step: a "
            "numerical estimate (finite differences, SPSA, Richardson, a least-squares fit), "
            "which is refused even where it comes out exact (a large step on a low-degree "
            f"function). Derive the formula and compute it from the inputs as they are.{read_back}")


def _subclass(got: tuple[Any, ...]) -> str | None:
    """Why a result that is a Tensor subclass is refused, or None."""
    for value in got:
        if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor:
            return (f"it returned a {type(value).__name__}, a subclass of torch.Tensor; the check "
                    "compares plain tensors only (a subclass can change what comparing means). "
                    "Return a torch.Tensor.")
    return None


def _contract(labels: list[str], runs: list[Trial]) -> Report | None:
    """The failed report when a tensor result is not what the task states: on the
    reference's device, of its dtype (a lower floating precision is left to the diagnosis,
    which says where it came from; shapes to `compare`, which names the slip)."""
    for run in runs:
        for label, got, ref in zip(labels, run.got, run.ref, strict=True):
            if not (isinstance(ref, torch.Tensor) and isinstance(got, torch.Tensor)):
                continue  # a number, or None where a tensor belongs: `compare` says which
            if got.device != ref.device:
                return fail(label, f"it returned a tensor on {got.device} where the task asks "
                                   f"for one on {ref.device} (the contract of the exercise).",
                            "contract")
            low = got.is_floating_point() and ref.is_floating_point()
            if got.dtype != ref.dtype and not low:
                return fail(label, f"it returned a tensor of dtype {_dtype(got)} where the "
                                   f"task asks for {_dtype(ref)} (the contract of the "
                                   "exercise).", "contract")
    return None


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _positional_names(answer: Callable[..., Any]) -> tuple[str, ...]:
    """The names of the answer's positional parameters (not ``*args``)."""
    try:
        parameters = inspect.signature(answer).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(p.name for p in parameters if p.kind in (
        inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD))
