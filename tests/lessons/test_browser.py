"""What a learner sees: every lesson run in JupyterLab in headless Chromium.

nbval compares kernel output; this test looks at the page. For each lesson
it opens the notebook in a real JupyterLab, runs Run > Run All Cells, and
checks that no cell shows an error (cells tagged raises-exception aside),
that widgets render and respond to their slider, and that graph drawings
appear as images. A student version of lesson 2 is also opened and worked
like a student would: stubs shown, a wrong answer caught, the right one
accepted. The checker is itself tested on small notebooks in
tests/fixtures/browser/ that are broken on purpose.

Each test process has one server and one page with JupyterLab loaded: each
notebook is opened in that page, closed unsaved after it, and its kernel shut
down. A lesson's visit runs the lesson and then, in the same page, reads what
its learner copy shows on the screen of each prediction (asserted by
tests/lessons/test_prediction_screens.py). The server runs on copies of the
notebooks, so the repository's files are never modified.

Needs Debian's `chromium` (or CHROMIUM=/path/to/chromium). Without it the
test is skipped, except under CI (CI set), where that is a failure.
Failure artifacts go to test-artifacts/browser/<lesson>/ (or
$BACKPROPLAB_ARTIFACTS/<lesson>/); the assertion message names the folder.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser_support import (
    NOTEBOOK_RUN_TIMEOUT,
    LabWindow,
    NotebookReport,
    cell_editor_text,
    cell_output_text,
    cell_source,
    check_notebook,
    notebook_page,
    open_notebook,
    plan_notebook,
    run_all_cells,
    run_cell,
    set_cell_source,
    wait_for_run,
)
from screens import screen_report
from test_predictions import _leaks

from backproplab.course.assignment import GUESS_STUB, after_reveal_folds
from backproplab.course.grading import _answer_of, find_prediction
from backproplab.course.handout import learn

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "browser"
ARTIFACTS = Path(os.environ.get("BACKPROPLAB_ARTIFACTS") or REPO / "test-artifacts" / "browser")

# Collected at collection time, so a lesson added to notebooks/ is tested
# with no edit here, and a failure names the lesson.
LESSONS = sorted(NOTEBOOKS.glob("*.ipynb"))


def _run(lab: LabWindow, folder: str, notebook: Path, artifacts: Path) -> NotebookReport:
    shutil.rmtree(artifacts, ignore_errors=True)  # stale pictures would mislead
    # Expectations come from the copy the server serves, not the repository
    # file, which may have been edited since the session started.
    served = lab.server.root_dir / folder / notebook.name
    report = check_notebook(lab, f"{folder}/{notebook.name}", served, artifacts=artifacts)
    print(
        f"{notebook.name}: {report.seconds:.1f}s, {report.sliders_moved} slider(s) moved, "
        f"{report.graph_images} graph image(s)" + "".join(f"\n  note: {n}" for n in report.notes)
    )
    return report


@dataclass
class Visit:
    """A lesson seen in JupyterLab: run whole, then its learner copy's prediction screens."""

    run: NotebookReport
    screens: tuple[NotebookReport, list]  # the report, and the cells on each guess's screen


VISITS: dict[Path, Visit] = {}


def visit(lab: LabWindow, lesson: Path) -> Visit:
    """The lesson's one visit, shared by its browser test and its screen test (the two
    run in the same process: tests/conftest.py groups them)."""
    if lesson not in VISITS:
        run = _run(lab, "lessons", lesson, ARTIFACTS / lesson.stem)
        screens = screen_report(lab, lesson, ARTIFACTS / f"screen-{lesson.stem}")
        VISITS[lesson] = Visit(run, screens)
    return VISITS[lesson]


@pytest.mark.parametrize(
    "lesson",
    LESSONS or [pytest.param(None, marks=pytest.mark.skip(reason="no notebooks/*.ipynb yet"))],
    ids=[p.stem for p in LESSONS] or ["no-lessons"],
)
def test_lesson_in_browser(lab: LabWindow, lesson: Path) -> None:
    report = visit(lab, lesson).run
    assert report.ok, report.describe()


# ---------------------------------------------------------------------------
# A student version, worked as a student would.
# ---------------------------------------------------------------------------

# Lesson 2's first exercise is a graded prediction: a.grad for c = a + a is 2.
STUDENT_LESSON = NOTEBOOKS / "02-chain-rule.ipynb"
STUDENT_EXERCISE = "l02-predict-paths"
WRONG_ANSWER = "aa_guess = 1.0"  # one path only
RIGHT_ANSWER = "aa_guess = 2.0"


def _exercise_cells(book: nbformat.NotebookNode, grade_id: str) -> tuple[int, int]:
    """Indices of the solution cell `grade_id` and of the check cell after it."""
    meta = [cell.metadata.get("nbgrader", {}) for cell in book.cells]
    solution = next(i for i, m in enumerate(meta) if m.get("grade_id") == grade_id)
    code = [i for i, cell in enumerate(book.cells) if cell.cell_type == "code"]
    check = next(i for i in code if i > solution)
    assert meta[check].get("grade"), f"cell {check + 1} after {grade_id} is not a check cell"
    return solution, check


def _rendered_lines(page: Any, index: int) -> int:
    """How many lines the lab draws for the text of cell ``index``'s output area."""
    return page.locator(".jp-Notebook .jp-Cell").nth(index).evaluate(
        """(cell) => {
            const pres = cell.querySelectorAll('.jp-OutputArea-output pre');
            let lines = 0;
            for (const pre of pres) {
                const height = parseFloat(getComputedStyle(pre).lineHeight);
                lines += Math.round(pre.getBoundingClientRect().height / height);
            }
            return lines;
        }"""
    )


def _answer(page: Any, path: str, solution: int, check: int, source: str) -> tuple[dict, str]:
    """Give the solution cell `source`, run it and then its check cell, as a student would.

    Returns the check cell's state and the text its output area shows.
    """
    set_cell_source(page, path, solution, source)
    shown = cell_editor_text(page, path, solution)
    assert shown == source, f"cell {solution + 1}: the editor shows {shown!r}, not {source!r}"
    ran = run_cell(page, path, solution)
    errors = [f"{o['ename']}: {o['evalue']}" for o in ran["outputs"] if o["type"] == "error"]
    assert not errors, f"cell {solution + 1} with {source!r} shows an error: {errors}"
    return run_cell(page, path, check), cell_output_text(page, path, check)


def test_learner_route_in_browser(lab: LabWindow) -> None:
    """The self-learner's route: `backproplab learn` copies, worked in the lab.

    The learner copy of lesson 2 is written into the folder the server serves,
    opened in a fresh workspace and run with Run All, which must stop at the
    first blank, a prediction whose check says "no prediction yet"; nothing on the
    screen gives its answer away; it is answered wrongly (a hint, not the answer, and
    no frame from inside backproplab) and rightly (✓), and the reveal shows the
    answer, and the text under it opens with a click on its fold; finally the next
    exercise's collapsed worked solution opens with a click.
    """
    report = NotebookReport(name=f"learner-{STUDENT_LESSON.stem}")
    artifacts = ARTIFACTS / report.name
    shutil.rmtree(artifacts, ignore_errors=True)  # stale pictures would mislead
    (copied,) = learn(STUDENT_LESSON, lab.server.root_dir / "my-lessons")
    path = f"my-lessons/{copied.name}"
    book = nbformat.read(copied, as_version=4)
    first_exercise = next(
        i for i, c in enumerate(book.cells) if c.metadata.get("nbgrader", {}).get("solution")
    )
    solution, check = _exercise_cells(book, STUDENT_EXERCISE)
    assert solution >= first_exercise
    # A prediction has no "Show a solution" (its reveal cell answers it); the first
    # worked solution after it belongs to the next exercise.
    reveal = next(i for i, c in enumerate(book.cells) if i > check
                  and c.cell_type == "markdown" and "Show a solution" in c.source)
    lesson = nbformat.read(STUDENT_LESSON, as_version=4)
    shown_solution = book.cells[reveal].metadata["backproplab"]["solution_of"]
    worked = _solution_text(lesson, shown_solution)
    worked_line = next(line.strip() for line in worked.splitlines()
                       if line.strip() and not line.startswith("def"))
    plans = plan_notebook(copied)

    with notebook_page(lab, path, report, plans=plans, artifacts=artifacts) as page:
        open_notebook(page, path, server=lab.server)
        run_all_cells(page)
        state = wait_for_run(page, path, plans, NOTEBOOK_RUN_TIMEOUT)
        assert not state.get("timed_out"), "Run All did not finish"
        cells = state["cells"]
        assert len(cells) == len(plans), f"the page shows {len(cells)} cells, not {len(plans)}"

        # Everything before the first exercise runs cleanly, and Run All stops there.
        for plan, cell in zip(plans[:first_exercise], cells, strict=False):
            errors = [o for o in cell["outputs"] if o["type"] == "error"]
            if plan.runs and cell["count"] is None:
                report.problem(f"cell {plan.index + 1} never ran")
            if errors:
                first = errors[0]
                report.problem(
                    f"cell {plan.index + 1} shows an error: {first['ename']}: {first['evalue']}"
                )
        ran = {i for i, cell in enumerate(cells) if cell["count"] is not None}
        first_check = _exercise_cells(
            book, book.cells[first_exercise].metadata["nbgrader"]["grade_id"])[1]
        assert max(ran) <= first_check, "Run All went on past the first blank exercise"

        # Exercises before the prediction are done as a learner does them.
        for index in range(solution):
            cell = book.cells[index]
            if cell.cell_type != "code" or index in ran:
                continue
            if cell.metadata.get("nbgrader", {}).get("solution"):
                set_cell_source(page, path, index, _solution_text(
                    lesson, cell.metadata["nbgrader"]["grade_id"]))
            run_cell(page, path, index)
            ran.add(index)

        # The prediction is a blank guess, and its check says so when run.
        label = f"cell {solution + 1} ({STUDENT_EXERCISE})"
        stub = f"aa_guess = {GUESS_STUB}"
        shown = cell_editor_text(page, path, solution)
        assert stub in shown, f"{label}: the editor shows no blank guess: {shown!r}"
        run_cell(page, path, solution)
        graded = run_cell(page, path, check)
        raised = [f"{o['ename']}: {o['evalue']}" for o in graded["outputs"]
                  if o["type"] == "error"]
        assert len(raised) == 1 and "no prediction yet" in raised[0], (
            f"cell {check + 1}: expected 'no prediction yet', the outputs show "
            f"{raised or 'no error'}"
        )

        # The learner writes over the blank, keeping the rest of the cell.
        blank = cell_source(page, path, solution)
        assert stub in blank, f"{label}: the cell's text has no {stub!r}: {blank!r}"

        # Nothing from the question down to the check gives the answer away.
        question = next(i for i in range(solution - 1, -1, -1)
                        if book.cells[i].cell_type == "markdown")
        prediction = find_prediction(STUDENT_EXERCISE)
        answer = _answer_of(prediction)
        for index in range(question, check + 1):
            shown = page.locator(".jp-Notebook .jp-Cell").nth(index).inner_text()
            leaked = _leaks(shown, answer, prediction.choices)
            assert not leaked, f"cell {index + 1} shows the answer before the guess: {shown!r}"

        # A wrong answer: the check fails, gives a hint, not the answer, and shows the
        # learner's code only.
        graded, text = _answer(page, path, solution, check, blank.replace(stub, WRONG_ANSWER))
        errors = [o for o in graded["outputs"] if o["type"] == "error"]
        assert [o["ename"] for o in errors] == ["AssertionError"], (
            f"cell {check + 1}: the check accepted the wrong answer {WRONG_ANSWER!r} "
            f"(outputs: {graded['outputs']}; page: {text!r})"
        )
        message = text.rsplit("AssertionError:", 1)[-1]
        assert "not quite" in message and "Hint:" in message, (
            f"cell {check + 1}: the page does not show a hint: {text!r}"
        )
        leaked = _leaks(message.replace("you predicted 1.0", ""), answer, prediction.choices)
        assert not leaked, f"cell {check + 1}: a wrong guess is told the answer: {message!r}"
        for frame in ("_report.py", "exercise.py", "inside backproplab"):
            assert frame not in text, f"cell {check + 1}: the traceback shows {frame!r}: {text!r}"
        assert max(map(len, message.splitlines())) <= 88, (
            f"cell {check + 1}: the message has lines too long for the lab: {message!r}"
        )
        # The lab shows the message as it was wrapped, at word boundaries: it does not
        # wrap any line again (which would break a word at the window's edge).
        shown_lines = _rendered_lines(page, check)
        assert shown_lines == len(text.strip().splitlines()), (
            f"cell {check + 1}: the lab wraps the message into {shown_lines} lines, the "
            f"text has {len(text.strip().splitlines())}: {text!r}"
        )

        # The right answer: the check cell passes and shows a tick.
        graded, text = _answer(page, path, solution, check, blank.replace(stub, RIGHT_ANSWER))
        rejected = [
            f"{o['ename']}: {o['evalue']}" for o in graded["outputs"] if o["type"] == "error"
        ]
        assert not rejected, (
            f"cell {check + 1}: the check rejects the right answer {RIGHT_ANSWER!r}: {rejected}"
        )
        assert "✓" in text and "✗" not in text, (
            f"cell {check + 1}: the check shows no ✓ for the right answer: {text!r}"
        )

        # Then the reveal: the answer, why, and the first guess the learner checked.
        reveal_cell = next(i for i in range(check + 1, len(book.cells))
                           if book.cells[i].cell_type == "code")
        run_cell(page, path, reveal_cell)
        shown = cell_output_text(page, path, reveal_cell)
        assert "the answer is 2.0" in shown and "first checked guess was 1.0" in shown, (
            f"cell {reveal_cell + 1}: the reveal shows {shown!r}"
        )

        # What the lesson says about the answer sits folded under the reveal, hidden
        # until the learner opens it with the lab's "cells hidden" button.
        (fold, end), = [(f, e) for f, e in after_reveal_folds(book.cells) if f == reveal_cell + 1]
        all_cells = page.locator(".jp-Notebook .jp-Cell")
        under = [all_cells.nth(k) for k in range(fold + 1, end)]
        assert not any(c.is_visible() for c in under), "the text under the reveal shows unopened"
        button = all_cells.nth(fold).locator(".jp-showHiddenCellsButton")
        assert f"{end - fold - 1} cells hidden" in button.inner_text(), button.inner_text()
        button.click()
        for cell in under:
            cell.wait_for(state="visible", timeout=10_000)
        assert "paths add up" in " ".join(c.inner_text() for c in under)

        # The worked solution is one click away, and hidden until then.
        details = page.locator(".jp-Notebook .jp-Cell").nth(reveal).locator("details")
        details.scroll_into_view_if_needed()
        assert details.get_attribute("open") is None, "the solution is open before a click"
        assert not details.locator("code").first.is_visible(), "the solution shows unclicked"
        details.locator("summary").click()
        page.wait_for_function(
            "(el) => el.open", arg=details.element_handle(), timeout=10_000
        )
        assert worked_line in details.inner_text(), (
            f"cell {reveal + 1}: the opened solution does not show {worked_line!r}: "
            f"{details.inner_text()!r}"
        )

    print(f"{path}: {report.seconds:.1f}s")
    assert report.ok, report.describe()


# ---------------------------------------------------------------------------
# Lesson 12, step by step: each filled-in step turns its check from ✗ to ✓.
# ---------------------------------------------------------------------------

STEP_LESSON = NOTEBOOKS / "12-backprop-through-a-classifier.ipynb"


def _solution_text(lesson: nbformat.NotebookNode, grade_id: str) -> str:
    """The lesson's solution cell for ``grade_id``, marker lines left out."""
    cell = next(c for c in lesson.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return "\n".join(line for line in cell.source.split("\n") if "SOLUTION" not in line)


def test_the_classifier_walked_step_by_step_in_browser(lab: LabWindow) -> None:
    """A learner copy of lesson 12 stops at its first step; the first three steps,
    filled in one at a time, each fail before and pass after."""
    report = NotebookReport(name=f"steps-{STEP_LESSON.stem}")
    artifacts = ARTIFACTS / report.name
    shutil.rmtree(artifacts, ignore_errors=True)
    (copied,) = learn(STEP_LESSON, lab.server.root_dir / "my-steps")
    path = f"my-steps/{copied.name}"
    book = nbformat.read(copied, as_version=4)
    lesson = nbformat.read(STEP_LESSON, as_version=4)
    steps = [c.metadata["nbgrader"]["grade_id"] for c in book.cells
             if c.metadata.get("nbgrader", {}).get("solution")
             and "predict" not in c.metadata["nbgrader"]["grade_id"]][:3]
    assert len(steps) == 3
    plans = plan_notebook(copied)
    with notebook_page(lab, path, report, plans=plans, artifacts=artifacts) as page:
        open_notebook(page, path, server=lab.server)
        run_all_cells(page)
        state = wait_for_run(page, path, plans, NOTEBOOK_RUN_TIMEOUT)
        assert not state.get("timed_out"), "Run All did not finish"
        ran = {i for i, cell in enumerate(state["cells"]) if cell["count"] is not None}
        for step in steps:
            solution, check = _exercise_cells(book, step)
            # Run All stopped at the first blank: run what lies between, as a learner does.
            for index in range(solution):
                if book.cells[index].cell_type == "code" and index not in ran:
                    run_cell(page, path, index)
                    ran.add(index)
            graded = run_cell(page, path, solution)
            graded = run_cell(page, path, check)
            text = cell_output_text(page, path, check)
            assert any(o["type"] == "error" for o in graded["outputs"]), (
                f"{step}: the check passes while the step is blank: {text!r}")
            assert "not written yet" in text, f"{step}: the blank step is told {text!r}"
            graded, text = _answer(page, path, solution, check, _solution_text(lesson, step))
            failed = [o for o in graded["outputs"] if o["type"] == "error"]
            assert not failed and "✓" in text, f"{step}: the filled-in step shows {text!r}"
            ran |= {solution, check}
    assert report.ok, report.describe()


# ---------------------------------------------------------------------------
# The checker, checked: it passes a healthy notebook and catches each breakage.
# ---------------------------------------------------------------------------


def _fixture(lab: LabWindow, name: str, tmp_path: Path, **kwargs: Any) -> NotebookReport:
    path = FIXTURES / name
    return check_notebook(lab, f"fixtures/{name}", path, artifacts=tmp_path / "artifacts", **kwargs)


def test_checker_passes_a_healthy_notebook(
    lab: LabWindow, tmp_path: Path
) -> None:
    """Figure, graph drawing, a tagged error and a working slider: no problem."""
    report = _fixture(lab, "lesson_like.ipynb", tmp_path)
    assert report.ok, report.describe()
    assert report.sliders_moved == 1
    assert report.graph_images == 1


def test_checker_catches_a_callback_that_raises(
    lab: LabWindow, tmp_path: Path
) -> None:
    """The slider's callback raises before drawing: plot unchanged, error logged."""
    report = _fixture(lab, "broken_callback.ipynb", tmp_path, slider_timeout=15)
    assert not report.ok
    text = "\n".join(report.problems)
    assert "did not change" in text, report.describe()
    assert "log console shows an error" in text and "broken callback" in text, report.describe()
    # The failure leaves pictures behind, and the message says where.
    assert report.artifacts is not None
    assert (report.artifacts / "page.png").stat().st_size > 0
    assert (report.artifacts / "console.log").exists()
    assert str(report.artifacts.resolve()) in report.describe()


def test_checker_catches_a_traceback_shown_by_the_widget(
    lab: LabWindow, tmp_path: Path
) -> None:
    """The plot does change, but the callback then raises inside its Output."""
    report = _fixture(lab, "broken_callback_after_draw.ipynb", tmp_path, slider_timeout=15)
    assert not report.ok
    assert any(
        "widget shows an error" in p and "broken after drawing" in p for p in report.problems
    ), report.describe()


def test_checker_catches_an_error_cell(
    lab: LabWindow, tmp_path: Path
) -> None:
    """An untagged error fails, and Run All stopping there is reported too."""
    report = _fixture(lab, "error_cell.ipynb", tmp_path)
    assert not report.ok
    assert "cell 3 shows an error: ZeroDivisionError" in "\n".join(report.problems)
    assert "cell 4 never ran" in "\n".join(report.problems), report.describe()
    assert (tmp_path / "artifacts" / "cell-03.png").exists()
