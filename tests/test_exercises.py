"""Every exercise check rejects a plausible wrong answer with a useful message.

tests/wrong_answers/lessonNN.py holds, for each solution cell of lesson NN,
a wrong solution and a fragment the diagnostic message must contain:

    WRONG = {"l02-cubic": ("dydx = -3.0", "sign")}

Each lesson runs once with all its wrong answers swapped in; the check cell
right after every swapped solution must then fail with AssertionError.
"""

from __future__ import annotations

import copy
import importlib.util
import re
from pathlib import Path

import nbformat
import pytest
from notebook_runner import NOTEBOOKS, error_of, grade_id, run

WRONG_DIR = Path(__file__).parent / "wrong_answers"
LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))


def _solution_ids(nb: nbformat.NotebookNode) -> list[str]:
    return [
        grade_id(c) for c in nb.cells
        if c.cell_type == "code" and c.get("metadata", {}).get("nbgrader", {}).get("solution")
    ]


def _wrong_answers(lesson: Path) -> dict[str, tuple[str, str]]:
    path = WRONG_DIR / f"lesson{lesson.name[:2]}.py"
    if not path.exists():
        return {}
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WRONG


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_every_exercise_has_a_wrong_answer(lesson: Path):
    ids = _solution_ids(nbformat.read(lesson, as_version=4))
    assert len(ids) >= 2, f"{lesson.name} has {len(ids)} exercises; at least 2 expected"
    assert sorted(_wrong_answers(lesson)) == sorted(ids)


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_checks_reject_wrong_answers_helpfully(lesson: Path):
    wrong = _wrong_answers(lesson)
    nb = nbformat.read(lesson, as_version=4)
    swapped = copy.deepcopy(nb)
    for cell in swapped.cells:
        if grade_id(cell) in wrong:
            cell.source = wrong[grade_id(cell)][0]
    run(swapped)

    failures = []
    for i, cell in enumerate(swapped.cells):
        if grade_id(cell) not in wrong:
            continue
        check = next(c for c in swapped.cells[i + 1:] if c.cell_type == "code")
        error = error_of(check)
        fragment = wrong[grade_id(cell)][1]
        if error is None:
            failures.append(f"{grade_id(cell)}: the check passed a wrong answer")
        elif error.ename != "AssertionError":
            failures.append(f"{grade_id(cell)}: the check raised {error.ename}: {error.evalue}")
        elif not re.search(re.escape(fragment), error.evalue, re.IGNORECASE):
            failures.append(
                f"{grade_id(cell)}: message lacks {fragment!r}: {error.evalue}"
            )
        elif len(error.evalue.strip()) < 20:
            failures.append(f"{grade_id(cell)}: message too terse: {error.evalue!r}")
    assert not failures, "\n".join(failures)
