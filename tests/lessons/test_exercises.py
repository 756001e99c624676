"""Every exercise is real practice, and every check rejects wrong answers helpfully.

tests/wrong_answers/lessonNN.py holds, for each solution cell of lesson NN,
the plausible wrong answers and a fragment each one's message must contain:

    WRONG = {
        "l02-cubic": [
            ("def dfdx(x):\\n    return 3 * x**2 - 4 * x\\n", "factor"),   # the typical slip
            ("def dfdx(x):\\n    return 3.0\\n", "hard-coded"),            # the lesson's number
        ],
    }

A wrong answer replaces the whole solution cell, and the check cell right after
it must then fail with an AssertionError naming the mistake. Each lesson is
executed once for all of them (tests/rounds.py): in one live kernel, each
wrong answer, shortcut and student blank goes through its check right where
the learner's notebook would run it; the same run compares every cell with its
stored output under torch's default thread count.

The structural tests hold the course to the exercise standard (DESIGN.md,
Exercises): at least two exercises per lesson, a graded prediction in every
lesson, every "by hand" exercise checked with ``bl.check_by_hand``, and no
solution that copies a worked cell of its lesson.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest
import rounds
from notebook_runner import NOTEBOOKS, grade_id
from registry import tells
from rounds import check_after, meta, solution_ids

import backproplab as bl
from backproplab.course import assignment as course
from backproplab.course.assignment import SOLUTION, regions

LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))


def _solution_lines(source: str) -> list[str]:
    lines = source.splitlines()
    inside = [line for start, end in regions(source, SOLUTION) for line in lines[start + 1:end]]
    return [line.strip() for line in inside]


def _meaningful(line: str) -> bool:
    """A line that shows work: not blank, not a comment, not a bare name or return."""
    return bool(line) and not line.startswith("#") and len(line) > 12 and line not in {
        "return", "pass", "raise NotImplementedError()",
    }


def _lesson_ids(lesson: Path) -> list[str]:
    """Solution ids of every notebook with this lesson's number (a lesson may have parts)."""
    return [i for p in LESSONS if p.name[:2] == lesson.name[:2]
            for i in solution_ids(nbformat.read(p, as_version=4))]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_every_exercise_has_wrong_answers(lesson: Path):
    ids = solution_ids(nbformat.read(lesson, as_version=4))
    assert len(ids) >= 2, f"{lesson.name} has {len(ids)} exercises; at least 2 expected"
    wrong = rounds.wrong_answers(lesson)
    assert sorted(wrong) == sorted(_lesson_ids(lesson))
    assert all(wrong[k] for k in ids), "every exercise keeps at least one wrong answer"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_every_lesson_has_a_graded_prediction(lesson: Path):
    nb = nbformat.read(lesson, as_version=4)
    predictions = [
        i for i, c in enumerate(nb.cells)
        if meta(c).get("solution") and "predict" in (grade_id(c) or "")
    ]
    assert predictions, f"{lesson.name}: no solution cell with 'predict' in its grade_id"
    for i in predictions:
        check = check_after(nb, i)
        assert "check_prediction" in check.source or "check_graph" in check.source, (
            f"{lesson.name}: the check after {grade_id(nb.cells[i])} does not grade a prediction"
        )


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_by_hand_exercises_are_checked_on_fresh_inputs(lesson: Path):
    nb = nbformat.read(lesson, as_version=4)
    for i, cell in enumerate(nb.cells):
        if not (cell.cell_type == "code" and meta(cell).get("solution")):
            continue
        task = next(c for c in reversed(nb.cells[:i]) if c.cell_type == "markdown").source
        if "by hand" in task.lower():
            check = check_after(nb, i)
            called = re.search(r"check_exercise\(\s*\"([^\"]+)\"", check.source)
            by_hand = called is not None and isinstance(
                bl.course.exercises.find_exercise(called.group(1)), bl.ByHand)
            assert by_hand or "check_by_hand" in check.source, (
                f"{lesson.name}: {grade_id(cell)} asks for work by hand but its check does not "
                "use bl.check_by_hand (directly or as a ByHand exercise of bl.check_exercise)"
            )


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_no_solution_copies_a_worked_cell(lesson: Path):
    nb = nbformat.read(lesson, as_version=4)
    worked = {
        line.strip()
        for c in nb.cells
        if c.cell_type == "code" and not meta(c)
        for line in c.source.splitlines()
    }
    for cell in nb.cells:
        if not (cell.cell_type == "code" and meta(cell).get("solution")):
            continue
        lines = [line for line in _solution_lines(cell.source) if _meaningful(line)]
        copied = [line for line in lines if line in worked]
        assert len(lines) < 2 or len(copied) * 2 <= len(lines), (
            f"{lesson.name}: {grade_id(cell)} repeats worked lines: {copied}"
        )


# --------------------------------------------------------------------------
# one live kernel per lesson (tests/rounds.py): wrong answers, shortcuts, blanks


_RUNS: dict[Path, rounds.LessonRun] = {}


def _run(lesson: Path) -> rounds.LessonRun:
    """The lesson's one live execution, shared by the tests of this lesson (they run in
    one process: tests/conftest.py makes them a unit of work of their own): nbval's run
    of it when it played the rounds here (rounds.LIVE), else one of its own."""
    if lesson not in _RUNS:
        _RUNS[lesson] = rounds.LIVE.get(lesson.resolve()) or rounds.play(
            lesson, rounds.variants(lesson))
    run = _RUNS[lesson]
    assert not run.not_restored, (
        "the solution failed its check after the variants ran, so the kernel was not "
        f"restored and later results cannot be trusted: {run.not_restored}")
    return run


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_lesson_matches_its_stored_outputs_with_default_threads(lesson: Path,
                                                               request: pytest.FixtureRequest):
    """A learner's lab runs torch's default thread count, one thread per core, where every
    other kernel of the suite has one (faster on a small machine). A printed number that
    depends on the count (a reduction order, an address reused by the allocator) would
    differ in the lab: the live run, nbval's own when it ran the lesson here, has the
    default count and compares every cell, as strict nbval does. When nbval ran the lesson
    in this process, its kernel played the rounds: no second execution of the lesson."""
    nb = nbformat.read(lesson, as_version=4)
    nbval_here = any(item.nodeid.startswith(f"notebooks/{lesson.name}::")
                     for item in request.session.items)
    if nbval_here and request.config.getoption("dist", default="no") in ("no", "loadfile"):
        assert lesson.resolve() in rounds.LIVE, (
            "nbval ran this lesson in this process, yet did not play its rounds")
    run = _run(lesson)
    expected = sum(1 for c in nb.cells if c.cell_type == "code"
                   and not set(c.metadata.get("tags", [])) & rounds._NOT_COMPARED)
    assert run.compared == expected
    assert run.threads > 1 or (os.cpu_count() or 1) == 1, f"{run.threads} torch thread(s)"
    assert not run.mismatches, "\n".join(run.mismatches)


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_checks_reject_wrong_answers_helpfully(lesson: Path):
    _assert_rejected(_run(lesson).of("wrong"), rounds.wrong_answers(lesson), lesson)


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_checks_reject_cheats(lesson: Path):
    """Shortcuts (finite differences, numerical_grad, torch's own backward, a table of
    the visible inputs, ...) fail, naming what they did. The lesson runs with its
    hidden tests, as nbgrader grades it."""
    _assert_rejected(_run(lesson).of("cheat"), rounds.cheats(lesson), lesson)


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_student_version_fails_every_check(lesson: Path):
    """Each exercise left blank, as the student version has it, fails its check: the
    student version's check cell (hidden tests removed) and the lesson's own (hidden
    tests in, as nbgrader's autograde runs it; tests/course/test_nbgrader.py has
    nbgrader itself run a few lessons' blanks)."""
    nb = nbformat.read(lesson, as_version=4)
    blanks = _run(lesson).of("blank")
    assert sorted((o.grade_id, o.variant.number) for o in blanks) == sorted(
        (g, n) for g in solution_ids(nb) for n in (1, 2))
    passing = [f"{o.grade_id} ({('student version', 'with hidden tests')[o.variant.number - 1]})"
               for o in blanks if o.answer_error is None and o.check_error is None]
    assert not passing, f"{lesson.name}: these checks pass on the blank student version: {passing}"


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_student_version_stops_at_first_exercise(lesson: Path):
    """The student version runs cleanly up to its first exercise and fails there. The
    cells before it are the lesson's own (asserted here), which the live run executed
    with no error but the stored ones; the blank then raises NotImplementedError in the
    exercise cell, or in its check when the blank is inside a function."""
    source, student = nbformat.read(lesson, as_version=4), rounds.student_cells(lesson)
    first = next(i for i, c in enumerate(student.cells) if meta(c).get("solution"))
    assert [c.source for c in student.cells[:first]] == [c.source for c in source.cells[:first]]
    run = _run(lesson)
    assert not run.mismatches, "\n".join(run.mismatches)
    blank = next(o for o in run.of("blank") if o.grade_id == grade_id(student.cells[first]))
    error = blank.answer_error or blank.check_error
    assert error is not None, f"{lesson.name}: the first blank exercise raised nothing"
    where = f"{lesson.name}: {error.ename}: {error.evalue}"
    if course.CODE_STUB[1] in [line.strip() for line in blank.variant.source.split("\n")
                               if not line.startswith((" ", "\t"))]:
        # A top-level stub raises in the solution cell itself.
        assert blank.answer_error is not None, where
        assert blank.answer_error.ename == "NotImplementedError", where
    else:
        assert "NotImplementedError" in f"{error.ename} {error.evalue}", where


def _assert_rejected(outcomes: list[rounds.Outcome], table: dict, lesson: Path) -> None:
    ids = set(solution_ids(nbformat.read(lesson, as_version=4)))
    expected = sum(len(v) for k, v in table.items() if k in ids)
    assert len(outcomes) == expected, f"{len(outcomes)} of {expected} answers were tried"
    failures = []
    for outcome in outcomes:
        error, variant = outcome.check_error, outcome.variant
        where = f"{outcome.grade_id} ({variant.kind} {variant.number})"
        if error is None:
            failures.append(f"{where}: the check passed a wrong answer")
        elif error.ename != "AssertionError":
            failures.append(f"{where}: the check raised {error.ename}: {error.evalue}")
        # Messages are wrapped to fit the lab's width: match across line breaks.
        elif not tells(error.evalue, variant.fragment):
            failures.append(f"{where}: message lacks {variant.fragment!r}: {error.evalue}")
        elif len(error.evalue.strip()) < 20:
            failures.append(f"{where}: message too terse: {error.evalue!r}")
    assert not failures, "\n".join(failures)
