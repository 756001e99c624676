"""Exercises and predictions, by id: the feedback a learner's kernel gives.

Each lesson's exercises live in ``backproplab.course.exercises.lessonNN`` as
data: a `ByHand` (a gradient worked out by hand, checked on new inputs, from
`backproplab.course.byhand`) or a `Method` (a check of how the answer was
reached: passes counted, hooks watched); beside them its "predict, then run"
questions, each a `Prediction`. A check cell names one by id:
``bl.check_exercise("l02-cubic", cubic_slope)``,
``bl.check_prediction("l02-predict-paths", paths_guess)``.

In the learner's kernel a check is **feedback**: it reads the answer's source
against the exercise's vocabulary (`backproplab.course.rules`, the same
reading ``backproplab grade`` applies), runs it, and names what is wrong. It
guards nothing: code in a kernel can reach everything in it. The **grade** is
decided by ``backproplab grade`` (`backproplab.course.grade`), from the
submitted source run in a sandbox, by the same judges (`judge_method` here,
`backproplab.course.byhand.judge_by_hand`) on what the answer's run sent back.

A hidden test runs its check on a seed written in the cell; when the
instructor sets a secret, that seed is replaced by one derived from it
(`grading_seed`), so the public lessons do not tell the hidden inputs.

>>> exercise = find_exercise("l02-cubic")
>>> type(exercise).__name__, exercise.name
('ByHand', 'd/dx (x**3 - 4x**2 + 5)')
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..check import Check, Report, compare, wrap
from . import rules
from .byhand import seeded, source_refusal
from .slips import fail

__all__ = [
    "SECRET_FILE_VARIABLE",
    "SECRET_VARIABLE",
    "Method",
    "Prediction",
    "check_exercise",
    "check_prediction",
    "failure",
    "find_exercise",
    "find_prediction",
    "grading_seed",
    "instructor_secret",
    "is_failure",
    "judge_method",
    "lesson_module",
    "prediction_report",
    "read_secret_file",
    "reveal",
    "same",
]


# --------------------------------------------------------------------------
# Exercises and predictions, as data
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    """An exercise whose method is the point: the answer is watched at work, not only called.

    On each of ``trials`` seeds, ``make_inputs(generator)`` makes the trial's setting as
    plain data (numbers, strings, tensors and containers of them: what can be sent to the
    grade's sandbox); ``observe(answer, inputs)`` runs the answer on it, wherever the
    answer lives (the learner's kernel, or the grade's sandbox), and returns what it saw,
    as plain data (a `failure` when the answer could not be run); ``reference(inputs)`` is
    what a right answer shows. `judge_method`, the one judge, compares them in the caller's
    process: ``agree(got, want)`` on every trial passes. A slip of ``mistakes`` (its words
    -> the observation it gives, from the inputs) is named only when the answer shows
    exactly that on every trial; otherwise ``explain(inputs, got, want)`` says what the
    first trial that disagrees shows (a `failure`, to give it a verdict of its own, such
    as ``estimate``). ``wrong(got, want)`` stands for either that is not given: None when
    an observation is right, else what is wrong with it. ``caution(got)`` words what a
    passing observation still deserves to hear (None when nothing): a warning shown beside
    the pass, which keeps its points. ``allows`` names the sandbox's
    refused families the observation needs (`backproplab.course.runner.EVENTS`),
    ``vocabulary`` what the answer's source may use.

    ``check(answer, seed)`` is the whole check run in one process (the learner's kernel):
    the observation, then the judgement.
    """

    name: str = ""
    make_inputs: Callable[[torch.Generator], Any] | None = None
    observe: Callable[[Any, Any], Any] | None = None
    reference: Callable[[Any], Any] | None = None
    explain: Callable[[Any, Any, Any], str] | None = None
    mistakes: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    trials: int = 2
    agree: Callable[[Any, Any], bool] | None = None
    wrong: Callable[[Any, Any], str | dict | None] | None = None
    caution: Callable[[Any], str | None] | None = None
    passed: str = "works on every new case the check made"
    vocabulary: rules.Vocabulary = rules.METHOD
    allows: frozenset[str] = frozenset()
    check: Callable[[Any, int], Report] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        wrong = self.wrong
        if wrong is not None and not callable(wrong):
            raise TypeError(f"Method {self.name!r}: wrong: expected a function (got, want) -> "
                            f"None or what is wrong, got {type(wrong).__name__}")
        if self.caution is not None and not callable(self.caution):
            raise TypeError(f"Method {self.name!r}: caution: expected a function got -> None "
                            f"or a warning, got {type(self.caution).__name__}")
        if wrong is not None and self.agree is None:
            object.__setattr__(self, "agree", lambda got, want: wrong(got, want) is None)
        if wrong is not None and self.explain is None:
            object.__setattr__(self, "explain", lambda inputs, got, want: wrong(got, want))
        missing = [f for f in ("make_inputs", "observe", "reference", "explain")
                   if not callable(getattr(self, f))]
        if missing or not self.name:
            raise TypeError(f"Method {self.name!r}: expected functions for make_inputs, "
                            f"observe, reference and explain (or wrong), and a name; missing "
                            f"{', '.join(missing) or 'name'}")
        if isinstance(self.trials, bool) or not isinstance(self.trials, int) or self.trials < 1:
            raise ValueError(f"Method {self.name!r}: trials: expected an int >= 1, got "
                             f"{self.trials!r}")
        unknown = set(self.allows) - {"import", "exec", "open", "processes", "sockets",
                                      "ctypes"}
        if unknown:
            raise ValueError(f"Method {self.name!r}: allows: unknown families {sorted(unknown)}")
        object.__setattr__(self, "check", lambda answer, seed=0: judge_method(
            self, lambda inputs: self.run(answer, inputs), seed=seed))

    def run(self, answer: Any, inputs: Any) -> Any:
        """``observe(answer, inputs)`` with torch's generator `seeded`: an answer that draws
        random numbers draws the same ones in the kernel and in the sandbox, on every run."""
        with seeded():
            return self.observe(answer, inputs)


def failure(kind: str, detail: str) -> dict[str, str]:
    """What an observation step returns when the answer could not be run: plain data whose
    ``kind`` becomes the verdict (``missing``, ``error``, ``autograd``, ``fail``) and whose
    ``detail`` is what the learner is told."""
    return {"failed": kind, "detail": detail}


def is_failure(value: Any) -> bool:
    return (isinstance(value, dict) and set(value) == {"failed", "detail"}
            and isinstance(value["failed"], str) and isinstance(value["detail"], str))


def same(got: Any, want: Any, *, rtol: float = 0.0, atol: float = 0.0) -> bool:
    """Whether two observations agree: the same structure, the same words and whole
    numbers, floats and tensors (of the same shape) within ``rtol``/``atol``.

    >>> same({"order": ["b", "a"], "grad": 1.0}, {"order": ["b", "a"], "grad": 1.0 + 1e-12},
    ...      rtol=1e-9)
    True
    """
    if isinstance(want, bool) or isinstance(got, bool) or want is None or isinstance(want, str):
        return type(got) is type(want) and got == want
    if isinstance(want, (list, tuple)):
        return (isinstance(got, (list, tuple)) and len(got) == len(want)
                and all(same(g, w, rtol=rtol, atol=atol) for g, w in zip(got, want, strict=True)))
    if isinstance(want, dict):
        return (isinstance(got, dict) and got.keys() == want.keys()
                and all(same(got[k], want[k], rtol=rtol, atol=atol) for k in want))
    if isinstance(want, torch.Tensor) or isinstance(got, torch.Tensor):
        if not (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor)) \
                or got.shape != want.shape or got.dtype.is_floating_point \
                != want.dtype.is_floating_point:
            return False
        if not want.dtype.is_floating_point and not want.is_complex():
            return torch.equal(got, want)
        return bool(torch.allclose(got.to(want.dtype), want, rtol=rtol, atol=atol,
                                   equal_nan=True))
    if isinstance(want, (int, float, complex)) and isinstance(got, (int, float, complex)):
        if isinstance(want, int) and isinstance(got, int):
            return got == want
        if got == want or (got != got and want != want):  # equal, or both NaN
            return True
        return abs(got - want) <= atol + rtol * abs(want)
    return False


def judge_method(exercise: Method, observe: Callable[[Any], Any], *, seed: int = 0) -> Report:
    """The one judge of a method exercise: ``observe(inputs)`` runs the answer (in the
    learner's kernel, or in the grade's sandbox) and returns what it saw; the verdict is
    made here, from that and from the reference's observation, trial by trial."""
    agree = exercise.agree or same
    trials = []
    for k in range(exercise.trials):
        inputs = exercise.make_inputs(torch.Generator().manual_seed(seed + k))
        got = observe(inputs)
        if is_failure(got):
            return fail(exercise.name, got["detail"], got["failed"])
        trials.append((inputs, got, exercise.reference(inputs)))
    if all(agree(got, want) for _, got, want in trials):
        heard = [exercise.caution(got) for _, got, _ in trials] if exercise.caution else []
        warned = next((words for words in heard if words), None)
        return Report((Check(exercise.name, True, "pass", exercise.passed),
                       *([Check(exercise.name, True, "warning", warned)] if warned else [])))
    for words, slip in exercise.mistakes.items():
        if all(agree(got, slip(inputs)) for inputs, got, _ in trials):
            return fail(exercise.name, words)
    inputs, got, want = next(t for t in trials if not agree(t[1], t[2]))
    told = exercise.explain(inputs, got, want)  # words, or a failure with its own verdict
    return fail(exercise.name, *((told["detail"], told["failed"]) if is_failure(told)
                                 else (told,)))


# --------------------------------------------------------------------------
# The lessons' exercises, by id
# --------------------------------------------------------------------------

_ID = re.compile(r"^l(\d\d)-")
EXERCISES = "backproplab.course.exercises"  # the package holding lessonNN.py


def lesson_module(key: str, arg: str = "key") -> Any:
    """The module holding the lesson that id ``key`` names (``l02-cubic``: ``lesson02``);
    ``arg`` is the argument a bad id is reported as."""
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
    table = getattr(lesson_module(key), "EXERCISES", {})
    if key not in table:
        raise ValueError(f"key: no exercise {key!r}; this lesson has "
                         f"{', '.join(sorted(table)) or 'none'}")
    return table[key]


def check_exercise(key: str, answer: Any, *, seed: int = 0) -> None:
    """Feedback on the learner's ``answer`` to exercise ``key``: raise AssertionError
    naming what is wrong, or show a ✓ and return None.

    The answer's source is read against the exercise's vocabulary first (the reading
    ``backproplab grade`` applies to a submission), then the check runs on inputs made
    from ``seed``: the visible check cells use the default, the hidden tests other
    seeds, derived from the instructor's secret when one is set
    (`grading_seed`). None is returned on success because a graded cell
    must not end in a value: nbgrader would read it as a partial score.

    >>> import torch
    >>> check_exercise("l02-cubic", lambda x: 3 * x**2 - 8 * x)
    ✓ d/dx (x**3 - 4x**2 + 5): matches autograd on 3 new random inputs
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed: expected an int, got {type(seed).__name__}")
    exercise = find_exercise(key)
    if seed != 0:  # a hidden test: its inputs come from the instructor's secret, if set
        seed = grading_seed(key, seed)
    readable = callable(answer) or isinstance(answer, (tuple, list))
    refused = (source_refusal(answer, exercise.vocabulary)
               if isinstance(exercise, Method) and readable else None)
    if refused is not None:
        report = fail(key, refused, "vocabulary")
    else:
        report = exercise.check(answer, seed)
    if not isinstance(report, Report):  # a lesson module's bug, never the learner's
        raise TypeError(f"{key}: its check returned {type(report).__name__}, not a Report")
    if not report.checks:
        report = Report((Check(key, False, "fail", "nothing was checked"),))
    report.assert_ok()


# --------------------------------------------------------------------------
# "Predict, then run": a guess checked before the answer is shown
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Prediction:
    """A "predict, then run" question.

    ``answer`` runs the experiment and returns what torch really does;
    ``hint`` is what a wrong guess is told (it must not give the answer away);
    ``why`` is shown by `reveal`, after the guess (``{answer}`` is filled in).
    With ``choices``, a guess outside them is told what the choices are. With
    ``unordered`` (the question asks *which* items), a guess of the right items in any
    order, a set included, is right. With ``order`` (the question asks for an order
    of items it names), the right items in another order are simply a wrong guess,
    told the hint.
    """

    question: str
    answer: Callable[[], Any]
    hint: str
    why: str
    choices: tuple[Any, ...] | None = None
    unordered: bool = False
    order: bool = False


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
    """Check a "predict, then run" guess without giving the answer away.

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
    key, p = _lookup(prediction)
    if guess is Ellipsis:
        return fail(p.question, "no prediction yet: replace ... with your guess and run this "
                                 "cell again.", "missing")
    if p.choices is not None and not any(_matches(guess, c) for c in p.choices):
        options = ", ".join(_show(c) for c in p.choices)
        return fail(p.question, f"{_show(guess)} is not one of the choices: {options}.")
    _GUESSES.setdefault(key, guess)
    answer = _answer_of(p)
    shown = guess
    if not (p.unordered or p.order) and _items(guess) is not None \
            and _items(guess) == _items(answer) and not _matches(guess, answer):
        order = ("in increasing order" if list(answer) == _items(answer)
                 else "in the order the question asks for")
        return fail(p.question, f"not quite: the right items (you predicted {_show(shown)}), "
                                f"but in another order: give them {order}.")
    if _right(p, guess, answer):
        late = (" (checked after the answer was revealed)" if key in _REVEALED else "")
        return Report((Check(p.question, True, "pass",
                             f"your prediction {_show(shown)} is right{late}. Run the next cell "
                             "to see why."),))
    return fail(p.question, f"not quite (you predicted {_show(shown)}). Hint: {p.hint} Think "
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
        verdict = "right" if _right(p, first, value) else "not right"
        text += f"\nYour first checked guess was {_show(first)}: {verdict}."
    print(wrap(text))


def _right(p: Prediction, guess: Any, answer: Any) -> bool:
    """Whether ``guess`` answers ``p``: the right items in any order where it asks which."""
    if p.unordered and _items(guess) is not None:
        return _items(guess) == _items(answer)
    return _matches(guess, answer)


def _items(value: Any) -> list[Any] | None:
    """The items of a tuple, list or set of plain numbers or words, sorted; else None."""
    if not isinstance(value, (tuple, list, set, frozenset)):
        return None
    if not all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in value):
        return None
    try:
        return sorted(value)
    except TypeError:  # numbers and words mixed
        return None


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


def find_prediction(key: str) -> Any:
    """The "predict, then run" question (a Prediction) with id ``key``."""
    table = getattr(lesson_module(key, "prediction"), "PREDICTIONS", {})
    if key not in table:
        raise ValueError(f"prediction: no question {key!r}; this lesson has "
                         f"{', '.join(sorted(table)) or 'none'}")
    return table[key]


# --------------------------------------------------------------------------
# Hidden seeds: the hidden tests' inputs come from the instructor, not from the lessons
# --------------------------------------------------------------------------

SECRET_VARIABLE = "BACKPROPLAB_SECRET"
SECRET_FILE_VARIABLE = "BACKPROPLAB_SECRET_FILE"
_SEEDS = 2**31 - 10_000  # derived seeds stay far from overflow when a check adds to them


def instructor_secret() -> str | None:
    """The secret the instructor set, or None (a self-learner's kernel)."""
    text = os.environ.get(SECRET_VARIABLE)
    if text:
        return text
    path = os.environ.get(SECRET_FILE_VARIABLE)
    return read_secret_file(path, SECRET_FILE_VARIABLE) if path else None


def read_secret_file(path: str, arg: str) -> str:
    """The secret held in the file at ``path`` (``arg`` names where the path came from)."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as err:
        raise RuntimeError(f"{arg}: cannot read the secret from {path!r} "
                           f"({err.strerror})") from None
    if not text:
        raise RuntimeError(f"{arg}: the file {path!r} is empty")
    return text


def grading_seed(key: str, seed: int, secret: str | None = None) -> int:
    """The seed a check of exercise ``key`` really uses for the written ``seed``: seed 0
    (the visible check) as it is, a hidden seed derived from the instructor's secret when
    one is set (``secret``, else the environment's), else as written.

    A check cell runs its exercise's check twice: the visible check on seed 0 and,
    between the hidden-test markers, a hidden check on a seed written in the cell
    (``seed=6211``). The lessons are public, so an answer could be a table of the inputs
    those seeds make. An instructor therefore sets a secret in the environment of the
    kernels that grade::

        export BACKPROPLAB_SECRET='any words only the instructor knows'
        nbgrader autograde ps1

    (or ``BACKPROPLAB_SECRET_FILE=/path/to/a/file`` holding it). Every hidden seed is then
    derived from the secret, the exercise id and the written seed, which no one without
    the secret can compute. Seed 0 never changes, so a self-learner's notebook prints what
    it printed when it was stored; without a secret the written seeds are used as they
    are (other inputs than the visible ones, but not secret ones).

    >>> os.environ.pop(SECRET_VARIABLE, None) and None
    >>> grading_seed("l02-cubic", 6211), grading_seed("l02-cubic", 0)
    (6211, 0)
    >>> grading_seed("l02-cubic", 6211, "example") != 6211, grading_seed("l02-cubic", 0, "x")
    (True, 0)
    """
    secret = secret if secret is not None else instructor_secret()
    if seed == 0 or secret is None:
        return seed
    digest = hashlib.sha256(f"{secret}\0{key}\0{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % _SEEDS + 1
