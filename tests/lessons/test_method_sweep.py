"""Every method exercise's solution passes, and every kept wrong answer fails, on every seed.

The visible check runs seed 0 and a hidden test another written seed; a graded course
runs seeds derived from the instructor's secret. For each method exercise (a `Method`
judged from observations), the solution and each kept wrong answer (tests/wrong_answers/)
are taken from the lesson as ``backproplab grade`` takes them (the solution cell
replaced, the definitions it needs) and observed on the inputs of seeds 0 to
``SEEDS + trials - 2``. A check with seed s judges trials s .. s + trials - 1 and passes
only if all of them agree with the reference, so the check of every seed s < SEEDS is
known from these observations. The solution must pass on all of them, each wrong
answer fail on all of them.
"""

from __future__ import annotations

import nbformat
import pytest
import torch
from registry import exercises_of, lesson_of, wrong_answers

from backproplab.course import grade, rules, sandbox
from backproplab.course.grading import Method, is_failure, same

SEEDS = 50
pytestmark = pytest.mark.slow


METHODS = exercises_of(Method)


def _answer(nb: nbformat.NotebookNode, graded: grade.Graded, exercise: Method,
            source: str | None):
    """The answer as the grade takes it (``source`` in the solution cell's place), or
    None when the grade would refuse it before running it."""
    cell = next(c for c in nb.cells
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == graded.key)
    original = cell.source
    if source is not None:
        cell.source = source
    try:
        found = grade.answer_source(nb, graded)
    finally:
        cell.source = original
    if isinstance(found, str):
        return None
    pieces, files, _ = found
    if rules.read([p.tree for p in pieces], exercise.vocabulary):
        return None
    try:
        return sandbox.load_answer(files, graded.names)
    except Exception:  # its own source fails to run: it fails on every seed
        return None


def _agrees(exercise: Method, answer, seeds: int) -> list[bool]:
    """Whether the answer's observation agrees with the reference, trial seed by seed."""
    agree = exercise.agree or same
    found = []
    for s in range(seeds + exercise.trials - 1):
        inputs = exercise.make_inputs(torch.Generator().manual_seed(s))
        got = exercise.observe(answer, inputs)
        found.append(not is_failure(got) and agree(got, exercise.reference(inputs)))
    return found


@pytest.mark.parametrize("key", sorted(METHODS))
def test_the_solution_passes_and_every_kept_slip_fails_on_every_seed(key):
    exercise = METHODS[key]
    nb, graded = lesson_of(key)
    solution = _answer(nb, graded, exercise, None)
    assert solution is not None, f"{key}: the lesson's solution is refused or does not run"
    agrees = _agrees(exercise, solution, SEEDS)
    failing = [s for s in range(SEEDS) if not all(agrees[s:s + exercise.trials])]
    assert not failing, f"{key}: the solution fails on {len(failing)} of {SEEDS} seeds, " \
                        f"e.g. seed {failing[0]}"
    passing = []
    for k, (source, fragment) in enumerate(wrong_answers(key)):
        answer = _answer(nb, graded, exercise, source)
        if answer is None:
            continue
        agrees = _agrees(exercise, answer, SEEDS)
        passed = [s for s in range(SEEDS) if all(agrees[s:s + exercise.trials])]
        if passed:
            passing.append(f"wrong answer {k} ({fragment!r}) passes on {len(passed)} of "
                           f"{SEEDS} seeds, e.g. seed {passed[0]}")
    assert not passing, f"{key}:\n" + "\n".join(passing)
