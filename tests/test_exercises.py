"""Every exercise is real practice, and every check rejects wrong answers helpfully.

tests/wrong_answers/lessonNN.py holds, for each solution cell of lesson NN,
the plausible wrong answers and a fragment each one's message must contain:

    WRONG = {
        "l02-cubic": [
            ("def dfdx(x):\\n    return 3 * x**2 - 4 * x\\n", "factor"),   # the typical slip
            ("def dfdx(x):\\n    return 3.0\\n", "hard-coded"),            # the lesson's number
        ],
    }

A wrong answer replaces the whole solution cell. Each lesson runs once per
"round": round k swaps in the k-th wrong answer of every exercise (exercises
with fewer answers keep their solution), and the check cell right after every
swapped solution must then fail with an AssertionError naming the mistake.

The structural tests hold the course to the exercise standard (DESIGN.md,
Exercises): at least two exercises per lesson, a graded prediction in every
lesson, every "by hand" exercise checked with ``bl.check_by_hand``, and no
solution that copies a worked cell of its lesson.
"""

from __future__ import annotations

import copy
import importlib.util
import re
from pathlib import Path

import nbformat
import pytest
from notebook_runner import NOTEBOOKS, error_of, grade_id, run

import backproplab as bl
from backproplab.course import SOLUTION, regions

WRONG_DIR = Path(__file__).parent / "wrong_answers"
CHEATS_DIR = Path(__file__).parent / "cheats"
LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))


def _meta(cell: nbformat.NotebookNode) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _solution_ids(nb: nbformat.NotebookNode) -> list[str]:
    return [grade_id(c) for c in nb.cells if c.cell_type == "code" and _meta(c).get("solution")]


def _table(folder: Path, lesson: Path, name: str) -> dict[str, list[tuple[str, str]]]:
    path = folder / f"lesson{lesson.name[:2]}.py"
    if not path.exists():
        return {}
    spec = importlib.util.spec_from_file_location(f"{folder.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = getattr(module, name, {})
    return {k: [v] if isinstance(v, tuple) else list(v) for k, v in table.items()}


def _wrong_answers(lesson: Path) -> dict[str, list[tuple[str, str]]]:
    return _table(WRONG_DIR, lesson, "WRONG")


def _cheats(lesson: Path) -> dict[str, list[tuple[str, str]]]:
    """tests/cheats/lessonNN.py: CHEATS has the format of WRONG, for shortcuts."""
    return _table(CHEATS_DIR, lesson, "CHEATS")


def _check_after(nb: nbformat.NotebookNode, i: int) -> nbformat.NotebookNode:
    return next(c for c in nb.cells[i + 1:] if c.cell_type == "code")


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
            for i in _solution_ids(nbformat.read(p, as_version=4))]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_every_exercise_has_wrong_answers(lesson: Path):
    ids = _solution_ids(nbformat.read(lesson, as_version=4))
    assert len(ids) >= 2, f"{lesson.name} has {len(ids)} exercises; at least 2 expected"
    wrong = _wrong_answers(lesson)
    assert sorted(wrong) == sorted(_lesson_ids(lesson))
    assert all(wrong[k] for k in ids), "every exercise keeps at least one wrong answer"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_every_lesson_has_a_graded_prediction(lesson: Path):
    nb = nbformat.read(lesson, as_version=4)
    predictions = [
        i for i, c in enumerate(nb.cells)
        if _meta(c).get("solution") and "predict" in (grade_id(c) or "")
    ]
    assert predictions, f"{lesson.name}: no solution cell with 'predict' in its grade_id"
    for i in predictions:
        check = _check_after(nb, i)
        assert "check_prediction" in check.source or "check_graph" in check.source, (
            f"{lesson.name}: the check after {grade_id(nb.cells[i])} does not grade a prediction"
        )


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_by_hand_exercises_are_checked_on_fresh_inputs(lesson: Path):
    nb = nbformat.read(lesson, as_version=4)
    for i, cell in enumerate(nb.cells):
        if not (cell.cell_type == "code" and _meta(cell).get("solution")):
            continue
        task = next(c for c in reversed(nb.cells[:i]) if c.cell_type == "markdown").source
        if "by hand" in task.lower():
            check = _check_after(nb, i)
            called = re.search(r"check_exercise\(\s*\"([^\"]+)\"", check.source)
            by_hand = called is not None and isinstance(
                bl.lessons.find_exercise(called.group(1)), bl.ByHand)
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
        if c.cell_type == "code" and not _meta(c)
        for line in c.source.splitlines()
    }
    for cell in nb.cells:
        if not (cell.cell_type == "code" and _meta(cell).get("solution")):
            continue
        lines = [line for line in _solution_lines(cell.source) if _meaningful(line)]
        copied = [line for line in lines if line in worked]
        assert len(lines) < 2 or len(copied) * 2 <= len(lines), (
            f"{lesson.name}: {grade_id(cell)} repeats worked lines: {copied}"
        )


def _rounds(wrong: dict[str, list[tuple[str, str]]]) -> int:
    return max((len(v) for v in wrong.values()), default=0)


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_checks_reject_wrong_answers_helpfully(lesson: Path):
    _reject_all(lesson, _wrong_answers(lesson))


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_checks_reject_cheats(lesson: Path):
    """Shortcuts (finite differences, numerical_grad, torch's own backward, a table of
    the visible inputs, ...) fail, naming what they did. The lesson runs with its
    hidden tests, as nbgrader grades it."""
    _reject_all(lesson, _cheats(lesson))


def _reject_all(lesson: Path, wrong: dict[str, list[tuple[str, str]]]) -> None:
    nb = nbformat.read(lesson, as_version=4)
    # A lesson in two parts shares one table: each part runs the rounds of its own cells.
    wrong = {k: v for k, v in wrong.items() if k in _solution_ids(nb)}
    failures = []
    for k in range(_rounds(wrong)):
        swapped = copy.deepcopy(nb)
        swapped_ids = {}
        for cell in swapped.cells:
            answers = wrong.get(grade_id(cell), [])
            if k < len(answers):
                cell.source = answers[k][0]
                swapped_ids[grade_id(cell)] = answers[k][1]
        run(swapped)

        for i, cell in enumerate(swapped.cells):
            fragment = swapped_ids.get(grade_id(cell))
            if fragment is None:
                continue
            error = error_of(_check_after(swapped, i))
            where = f"{grade_id(cell)} (wrong answer {k + 1})"
            if error is None:
                failures.append(f"{where}: the check passed a wrong answer")
            elif error.ename != "AssertionError":
                failures.append(f"{where}: the check raised {error.ename}: {error.evalue}")
            # Messages are wrapped to fit the lab's width: match across line breaks.
            elif not re.search(re.escape(fragment), " ".join(error.evalue.split()), re.IGNORECASE):
                failures.append(f"{where}: message lacks {fragment!r}: {error.evalue}")
            elif len(error.evalue.strip()) < 20:
                failures.append(f"{where}: message too terse: {error.evalue!r}")
    assert not failures, "\n".join(failures)
