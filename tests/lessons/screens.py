"""What a learner's screen shows while guessing: a learner copy read in JupyterLab.

tests/lessons/test_predictions.py reads the cells of a learner copy from the
question down to the next heading after the reveal. A screen shows more: at
1400x1000, with the guess cell scrolled to the top, the next section is often in
view too. `screen_report` opens a lesson's learner copy (`backproplab learn`) in
the lab's page, scrolls to each guess cell and reads what every cell on the screen
shows (markdown as rendered), so an answer stated a section further down is found as
well. Nothing runs: a learner copy has no outputs until the learner runs its cells.
What a lesson folds under a reveal ("After the reveal") must not be on the screen at
all: JupyterLab hides it until the learner opens the fold.

The browser test reads every lesson's screens right after running the lesson, in the
same page (tests/lessons/test_browser.py); tests/lessons/test_prediction_screens.py
asserts on what was read.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import nbformat
from browser_support import LabWindow, NotebookReport, notebook_page, open_notebook, screen_at
from test_predictions import IN_WORDS, _meaning, _on_screen, _readable, _screen_leaks

from backproplab.course.assignment import after_reveal_folds
from backproplab.course.grading import _answer_of, find_prediction
from backproplab.course.handout import learn

SCREEN = {"width": 1400, "height": 1000}


def _guesses(book: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """(cell index, prediction id) of each guess cell of a learner copy."""
    found = []
    for i, cell in enumerate(book.cells):
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and "predict" in str(meta.get("grade_id", "")):
            check = next(c for c in book.cells[i + 1:] if c.cell_type == "code")
            key = check.source.split('"')[1]
            found.append((i, key))
    return found


def _specific(answer: Any) -> bool:
    """An answer whose form alone states it: several numbers, a fraction, a phrase.
    A lone small number, a yes/no or one word turns up in any section's prose."""
    if hasattr(answer, "tolist"):
        answer = answer.tolist()
    if isinstance(answer, (list, tuple)):
        return len(answer) >= 2
    if isinstance(answer, float):
        return answer != int(answer)
    return isinstance(answer, str) and " " in answer.strip()


def _said_on_screen(key: str, piece: dict, answer: Any, choices: Any, section: bool,
                    below: bool) -> list[str]:
    """The forms of the answer in what one cell shows. Inside the prediction's own
    section (question down to the next heading after the reveal) every form counts, as
    in tests/lessons/test_predictions.py; in a section further down that is also on the
    screen, the answer's specific forms and the ways a lesson said it in words. Below
    the guess cell, what the reveal says counts too: its numbers, a run of its words,
    a yes/no or zero answer said in words about the question's subject."""
    text = piece["text"]
    if piece["type"] == "code":
        text = _readable(nbformat.v4.new_code_cell(text))
    # Rendered markdown has lost its backticks; so must the patterns of IN_WORDS.
    words = [w.replace("`", "") for w in IN_WORDS.get(key, [])]
    found = [w for w in words if re.search(w, text)]
    found += [m for m in (_meaning(find_prediction(key), answer, text) if below else [])
              if m not in found]
    if section or _specific(answer):
        found += [f for f in _screen_leaks(key, text, answer, choices) if f not in found]
    return found


def screen_report(lab: LabWindow, lesson: Path, artifacts: Path) -> tuple[NotebookReport, list]:
    """Open the learner copy of `lesson` at 1400x1000 and read each guess's screen.

    Returns the report (a problem for each answer on a screen) and, per guess, the
    indices of the cells on its screen."""
    report = NotebookReport(name=f"screen-{lesson.stem}")
    shutil.rmtree(artifacts, ignore_errors=True)
    (copied,) = learn(lesson, lab.server.root_dir / f"screen-{lesson.stem}")
    path = f"screen-{lesson.stem}/{copied.name}"
    book = nbformat.read(copied, as_version=4)
    guesses = _guesses(book)
    folded = {k for fold, end in after_reveal_folds(book.cells) for k in range(fold + 1, end)}
    seen = []
    with notebook_page(lab, path, report, artifacts=artifacts, viewport=SCREEN) as page:
        open_notebook(page, path, kernel=False)
        for index, key in guesses:
            section = set(_on_screen(book.cells, index)[:-1])  # the heading cell: further down
            prediction = find_prediction(key)
            answer = _answer_of(prediction)
            screen = screen_at(page, path, index)
            shown = [p["index"] for p in screen]
            assert index in shown, f"{key}: the guess cell is not on the screen ({shown})"
            seen.append(shown)
            if folded & set(shown):
                report.problem(f"{key}: cells {sorted(k + 1 for k in folded & set(shown))} "
                               "are folded under a reveal, yet on the screen")
            for piece in screen:
                if piece["index"] == index:
                    continue  # the guess cell itself: `name = ...`
                said = _said_on_screen(key, piece, answer, prediction.choices,
                                       piece["index"] in section, piece["index"] > index)
                if said:
                    report.problem(
                        f"{key}: cell {piece['index'] + 1} shows the answer on the screen "
                        f"of the guess ({said}): {piece['text'][:200]!r}")
            if os.environ.get("BACKPROPLAB_BROWSER_SAVE") == "always":
                artifacts.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(artifacts / f"{key}.png"))
    return report, seen
