"""The lessons' "predict, then run" questions: a guess checked before the answer is shown.

A `Prediction` is a question with an experiment that answers it. `check_prediction`
grades a guess: a right one is told so, a wrong one gets a hint, never the answer, which
only `reveal` shows (with the first guess checked). A lesson's questions live beside its
exercises, in ``PREDICTIONS``; a cell names one by id: ``bl.check_prediction(
"l02-predict-paths", paths_guess)``.

>>> q = Prediction("2 + 2", answer=lambda: 4, hint="count", why="it is {answer}")
>>> prediction_report(q, 5).ok, prediction_report(q, 4).ok
(False, True)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..check import Check, Report, compare, wrap
from .grading import lesson_module
from .slips import fail

__all__ = ["Prediction", "check_prediction", "find_prediction", "prediction_report", "reveal"]


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
