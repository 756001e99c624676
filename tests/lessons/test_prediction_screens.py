"""What a learner's screen shows while guessing: every prediction, in JupyterLab.

A learner copy opened at 1400x1000, each guess cell scrolled to the top: nothing on
that screen states the answer (tests/lessons/screens.py says how the screens are read).
Each lesson's screens are read during its visit by the browser test, in the page where
the lesson has just run (`test_browser.visit`): the app is loaded once, not per lesson.
Fixtures and Chromium come from tests/lessons/conftest.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from screens import screen_report
from test_browser import ARTIFACTS, LESSONS, visit

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_no_prediction_is_answered_on_the_learners_screen(lab: Any, lesson: Path) -> None:
    """A learner copy opened at 1400x1000: for each prediction, the guess cell scrolled to
    the top of the notebook, and nothing visible on that screen states the answer (the
    question, the check and the reveal are there; their outputs are not, until run)."""
    report, seen = visit(lab, lesson).screens
    assert seen, f"{lesson.name}: no prediction"
    print(f"{lesson.name}: {len(seen)} prediction(s), cells on screen {[len(s) for s in seen]}")
    assert report.ok, report.describe()


def test_the_screen_check_sees_a_spoiler_in_the_next_section(lab: Any, tmp_path: Path) -> None:
    """The section after a prediction is on the same screen: a sentence there that gives
    the answer away is found, and nothing else on that screen is blamed."""
    book = nbformat.v4.new_notebook()
    book.cells = [
        nbformat.v4.new_markdown_cell("## Ties\n\n### Predict, then run\n\nWhat is `x.grad`?"),
        nbformat.v4.new_code_cell("### BEGIN SOLUTION\nmax_ties_guess = [0.0, 0.5, 0.5, 0.0]\n"
                                  "### END SOLUTION"),
        nbformat.v4.new_code_cell('bl.check_prediction("l09-predict-max-ties", max_ties_guess)'),
        nbformat.v4.new_code_cell('bl.reveal("l09-predict-max-ties")'),
        nbformat.v4.new_markdown_cell("## Next\n\nA maximum splits the gradient evenly."),
    ]
    book.cells[1].metadata["nbgrader"] = {"solution": True, "grade_id": "l09-predict-max-ties"}
    for i, cell in enumerate(book.cells):
        cell.id = f"l09-s{i}"
    lesson = tmp_path / "09-spoiled.ipynb"
    nbformat.write(book, lesson)
    report, seen = screen_report(lab, lesson, ARTIFACTS / f"screen-{lesson.stem}")
    assert {1, 2, 3, 4} <= set(seen[0]), seen  # the guess, the check, the reveal, what follows
    assert [p for p in report.problems if "cell 5 shows the answer" in p], report.problems
    assert len(report.problems) == 1, report.problems
