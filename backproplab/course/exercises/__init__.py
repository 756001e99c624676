"""What the lessons check, one module per lesson: ``lesson02.py`` for lesson 02.

A lesson's check cells name an exercise or a question by its id and hand over
the learner's answer:

    bl.check_exercise("l02-cubic", cubic_slope)
    bl.check_prediction("l02-predict-paths", aa_guess)
    bl.reveal("l02-predict-paths")

The references, the inputs, the typical slips (near-solutions) and the
answers to predictions live here, so a check cell gives none of them away.
Each module holds two dicts (a lesson whose checks pass 300 code lines is a
package, ``lesson11/``: its ``__init__.py`` holds them, the rest of its checks in
as few modules beside it as that limit allows):

- ``EXERCISES``: id -> `ByHand` (a gradient by hand, see `check_by_hand`) or
  `Method` (a check of how the answer was reached, e.g. counted passes);
- ``PREDICTIONS``: id -> `Prediction` (the experiment that answers a
  "predict, then run" question, a hint and the explanation).

A module is imported only when one of its ids is first asked for (by
:mod:`backproplab.course.grading`, which finds ``lessonNN`` here by the id's number).
``_spec.py`` holds the vocabulary the modules write their checks in.
"""

from __future__ import annotations

from ..grading import check_exercise, find_exercise, find_prediction

__all__ = ["check_exercise", "find_exercise", "find_prediction"]
