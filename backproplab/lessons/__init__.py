"""What the lessons check, one module per lesson: ``lesson02.py`` for lesson 02.

A lesson's check cells name an exercise or a question by its id and hand over
the learner's answer:

    bl.check_exercise("l02-cubic", cubic_slope)
    bl.check_prediction("l02-predict-paths", aa_guess)
    bl.reveal("l02-predict-paths")

The references, the inputs, the typical slips (near-solutions) and the
answers to predictions live here, so a check cell gives none of them away.
Each module holds two dicts:

- ``EXERCISES``: id -> `ByHand` (a gradient by hand, see `check_by_hand`) or
  `Method` (a check of how the answer was reached, e.g. counted passes);
- ``PREDICTIONS``: id -> `Prediction` (the experiment that answers a
  "predict, then run" question, a hint and the explanation).

A module is imported only when one of its ids is first asked for.
"""

from __future__ import annotations

from typing import Any

from .. import _integrity
from .._diagnose import _type_name
from .._registry import find_exercise, find_prediction
from .._report import Check, Report

__all__ = ["check_exercise", "find_exercise", "find_prediction"]

def check_exercise(key: str, answer: Any, *, seed: int = 0) -> None:
    """Check the learner's ``answer`` to exercise ``key``; raise AssertionError if wrong.

    The check runs on inputs made from ``seed``: the lessons' visible check cells
    use the default, and their hidden tests other seeds, so an answer cannot be a
    table of the visible inputs. On success the report is shown and None is
    returned (a graded cell must not end in a value: nbgrader would read it as a
    partial score).

    >>> import torch
    >>> check_exercise("l02-cubic", lambda x: 3 * x**2 - 8 * x)
    ✓ d/dx (x**3 - 4x**2 + 5): matches autograd on 3 new random inputs
    """
    _verify()
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed: expected an int, got {_type_name(seed)}")
    exercise = find_exercise(key)
    report = exercise.check(answer, seed)
    if not isinstance(report, Report):  # a lesson module's bug, never the learner's
        raise TypeError(f"{key}: its check returned {_type_name(report)}, not a Report")
    if not report.checks:
        report = Report((Check(key, False, "fail", "nothing was checked"),))
    report.assert_ok()


_verify = _integrity.verify  # bound now: patching _integrity is seen
_integrity.protect(__name__, "check_exercise", "find_exercise", "_verify")
_integrity.protect("backproplab._registry", "find_exercise", "find_prediction", "_module")
